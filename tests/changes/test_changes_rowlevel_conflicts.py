"""Row-level changes racing other commits: they rebase when disjoint and fail with a
conflict when a concurrent commit touched the same rows; never a lost append or a
resurrected row. Also: PyIceberg-made tables changed here, and one run on moto S3."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pyarrow as pa
import pytest
from rowlevel_tables import ROWS, SCHEMA, Row, assert_reads, new_table, row, rows_of, to_table
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.commit.protocols import ConditionalWriteProtocol
from aioiceberg.errors import CommitConflictError
from aioiceberg.table import Table


async def second_handle(table: Table) -> Table:
    """Another writer's view of the same table (as another process would load it)."""
    assert table.protocol is not None
    state = await table.protocol.load(table.location)
    return Table(None, table.location, state, table.io, table.protocol)


async def race(first: Table, planned: str, then: object) -> None:
    """Plan ``planned`` (a delete filter) on ``first``, let ``then`` commit, then commit."""
    async with first.transaction() as tx:
        await tx.delete(planned)
        await then  # type: ignore[misc]


@pytest.mark.anyio
async def test_delete_racing_an_append_to_the_same_partition_fails_and_loses_nothing(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    other = await second_handle(table)
    appended = [row(i) for i in range(300, 330) if i % 3 == 0]  # all 'eu'
    assert {r[1] for r in appended} == {"eu"}
    with pytest.raises(CommitConflictError, match="added"):
        await race(table, "region = 'eu'", other.append(to_table(appended)))
    await table.refresh()
    await assert_reads(table, ROWS + appended)  # the append survived, the delete did not happen
    leftovers = [p for p in os.listdir(tmp_path / "wh" / "db" / "t" / "metadata") if p.startswith("snap-")]
    assert len(leftovers) == len(table.snapshots())  # the failed delete cleaned up its manifest lists


@pytest.mark.anyio
async def test_delete_racing_an_append_to_another_partition_rebases(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    other = await second_handle(table)
    appended = [row(i) for i in range(301, 331, 3)]  # all 'us'
    await race(table, "region = 'eu' AND n > 10", other.append(to_table(appended)))
    expected = [r for r in ROWS if not (r[1] == "eu" and r[2] is not None and r[2] > 10)] + appended
    await assert_reads(table, expected)
    history = [s.summary.operation.value for s in table.history() if s.summary is not None]
    assert history[-2:] == ["append", "overwrite"]


@pytest.mark.anyio
async def test_concurrent_tasks_delete_and_append_never_lose_rows(tmp_path: Path) -> None:
    """Real asyncio tasks, forced order: delete planned, append commits, delete commits."""
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    other = await second_handle(table)
    planned, appended_done = anyio.Event(), anyio.Event()
    appended = [row(i) for i in range(600, 612)]  # every region
    outcome: list[str] = []

    async def deleter() -> None:
        try:
            async with table.transaction() as tx:
                await tx.delete("region = 'ap'")
                planned.set()
                await appended_done.wait()
        except CommitConflictError:
            outcome.append("conflict")
        else:
            outcome.append("committed")

    async def appender() -> None:
        await planned.wait()
        await other.append(to_table(appended))
        appended_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(deleter)
        tg.start_soon(appender)
    assert outcome == ["conflict"]  # appended rows include 'ap' ones: serializable says no
    await table.refresh()
    await assert_reads(table, ROWS + appended)


@pytest.mark.anyio
async def test_snapshot_isolation_lets_the_delete_commit_and_keeps_the_appended_rows(tmp_path: Path) -> None:
    table = await new_table(
        tmp_path, ROWS, partition_by=["region"], properties={"write.delete.isolation-level": "snapshot"}
    )
    other = await second_handle(table)
    appended = [row(i) for i in range(300, 330, 3)]  # 'eu'
    await race(table, "region = 'eu'", other.append(to_table(appended)))
    await assert_reads(table, [r for r in ROWS if r[1] != "eu"] + appended)


@pytest.mark.anyio
async def test_two_deletes_rewriting_the_same_file_second_fails(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, batches=1)
    other = await second_handle(table)
    with pytest.raises(CommitConflictError, match="removed"):
        await race(table, "id = 3", other.delete("id = 4"))
    await table.refresh()
    await assert_reads(table, [r for r in ROWS if r[0] != 4])


@pytest.mark.anyio
async def test_concurrent_position_deletes_on_one_file_both_apply(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, batches=1, properties={"write.delete.mode": "merge-on-read"})
    other = await second_handle(table)
    await race(table, "id = 3", other.delete("id = 4"))
    await assert_reads(table, [r for r in ROWS if r[0] not in (3, 4)])


@pytest.mark.anyio
async def test_rewrite_fails_when_a_concurrent_equality_delete_hits_its_file(tmp_path: Path) -> None:
    """Rewriting without the concurrent delete would resurrect the row it deleted."""
    table = await new_table(tmp_path, ROWS, batches=1)
    other = await second_handle(table)
    with pytest.raises(CommitConflictError, match="delete file"):
        await race(table, "id = 3", other.upsert(to_table([row(4, n=-4)]), join_cols=["id"]))
    await table.refresh()
    await assert_reads(table, [r for r in ROWS if r[0] != 4] + [row(4, n=-4)], pyiceberg=False)


@pytest.mark.anyio
async def test_dynamic_partition_overwrite_conflicts_only_on_its_partitions(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    other = await second_handle(table)
    new_eu = [(900, "eu", 1, ROWS[0][3])]
    async with table.transaction() as tx:  # disjoint: 'us' appended meanwhile
        await tx.dynamic_partition_overwrite(to_table(new_eu))
        await other.append(to_table([row(301)]))
    expected = [r for r in ROWS if r[1] != "eu"] + new_eu + [row(301)]
    await assert_reads(table, expected)
    await other.refresh()
    with pytest.raises(CommitConflictError):
        async with table.transaction() as tx:  # same partition: 'eu' appended meanwhile
            await tx.dynamic_partition_overwrite(to_table([(901, "eu", 2, ROWS[0][3])]))
            await other.append(to_table([row(300)]))
    await table.refresh()
    await assert_reads(table, [*expected, row(300)])


@pytest.mark.anyio
async def test_row_level_change_after_an_append_in_one_transaction_is_refused(tmp_path: Path) -> None:
    from aioiceberg.errors import UnsupportedError

    table = await new_table(tmp_path, ROWS)
    with pytest.raises(UnsupportedError, match="before other data changes"):
        async with table.transaction() as tx:
            await tx.append(to_table([row(100)]))
            await tx.delete("id = 1")
    async with table.transaction() as tx:  # the other order is one commit
        await tx.delete("id = 1")
        await tx.append(to_table([row(100)]))
    await assert_reads(table, [r for r in ROWS if r[0] != 1] + [row(100)])


@pytest.mark.anyio
async def test_table_written_by_pyiceberg_is_changed_here_and_reads_back_there(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import StaticTable

    warehouse = tmp_path / "py"
    warehouse.mkdir()
    catalog = SqlCatalog("py", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace("db")
    py_table = catalog.create_table("db.t", schema=SCHEMA, properties={"format-version": "2"})
    py_table.append(to_table(ROWS[:30]))
    py_table.append(to_table(ROWS[30:]))
    found = await aioiceberg.load_table(os.path.dirname(os.path.dirname(py_table.metadata_location)))
    assert found.read_only
    # Adopt it: our own version files start from PyIceberg's metadata.
    protocol = ConditionalWriteProtocol(found.io)
    state = await protocol.create(found.location, found.metadata)
    table = Table(None, found.location, state, found.io, protocol)
    await table.delete("n >= 10 AND n < 40")
    expected = [r for r in ROWS if not (r[2] is not None and 10 <= r[2] < 40)]
    await table.overwrite(to_table([row(77)]), overwrite_filter="region = 'ap'")
    expected = [r for r in expected if r[1] != "ap"] + [row(77)]
    await assert_reads(table, expected)
    py = StaticTable.from_metadata(table.metadata_location).scan(row_filter="id >= 50").to_arrow()
    assert rows_of(py) == sorted(r for r in expected if r[0] >= 50)


@pytest.mark.anyio
async def test_delete_overwrite_and_conflict_on_s3(moto_endpoint: str, aws_clients_closed: None) -> None:
    from pyiceberg.table import StaticTable

    options = s3_storage_options(moto_endpoint)
    bucket = await create_bucket(moto_endpoint)
    catalog = aioiceberg.connect(f"s3://{bucket}/wh", storage_options=options)
    table = await catalog.create_table("db.t", schema=SCHEMA, partition_by=["region"])
    await table.append(to_table(ROWS))
    await table.delete("region = 'us' OR id = 4")
    expected: list[Row] = [r for r in ROWS if r[1] != "us" and r[0] != 4]
    await table.overwrite(to_table([row(99)]), overwrite_filter="id < 10")
    expected = [r for r in expected if r[0] >= 10] + [row(99)]
    other = await catalog.load_table("db.t")
    with pytest.raises(CommitConflictError):
        await race(table, "region = 'eu'", other.append(to_table([row(300)])))
    expected.append(row(300))
    await table.refresh()
    assert rows_of(await table.scan().to_arrow()) == sorted(expected)
    props = {k: v for k, v in options.items() if k != "s3.path-style-access"}
    py = StaticTable.from_metadata(table.metadata_location, properties=props).scan().to_arrow()
    assert rows_of(py) == sorted(expected)
    assert py.schema.names == pa.schema(SCHEMA).names
