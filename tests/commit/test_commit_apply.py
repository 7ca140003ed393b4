"""Updates, requirements, transactions and the catalog on a local warehouse."""

from __future__ import annotations

from pathlib import Path

import pytest
from commit_helpers import ARROW_SCHEMA, rows

import aioiceberg
from aioiceberg.commit import AssertCurrentSchemaId, MetadataChange, SetProperties, apply_updates
from aioiceberg.commit.protocols.base import version_hint_path, version_path
from aioiceberg.errors import (
    CommitConflictError,
    ConditionalWritesUnsupportedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
)


async def make_table(tmp_path: Path, **properties: str) -> aioiceberg.Table:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    return await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=properties)


@pytest.mark.anyio
async def test_metadata_log_is_bounded_by_previous_versions_max(tmp_path: Path) -> None:
    table = await make_table(tmp_path, **{"write.metadata.previous-versions-max": "3"})
    for i in range(5):
        await table.set_properties(step=str(i))
    log = table.metadata.metadata_log
    assert [e.metadata_file for e in log] == [version_path(table.location, v) for v in (3, 4, 5)]
    assert table.version == 6


@pytest.mark.anyio
async def test_appends_advance_sequence_numbers_and_snapshot_log(tmp_path: Path) -> None:
    table = await make_table(tmp_path)
    await table.append(rows("a", 0))
    await table.append(rows("a", 10))
    md = table.metadata
    assert md.last_sequence_number == 2
    assert [s.sequence_number for s in table.history()] == [1, 2]
    assert [e.snapshot_id for e in md.snapshot_log] == [s.snapshot_id for s in table.history()]
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None
    assert (summary["added-records"], summary["total-records"], summary["total-data-files"]) == (
        "3",
        "6",
        "2",
    )


@pytest.mark.anyio
async def test_transaction_commits_several_changes_as_one_version(tmp_path: Path) -> None:
    table = await make_table(tmp_path)
    async with table.transaction() as tx:
        await tx.append(rows("a", 0))
        await tx.append(rows("a", 10))
        tx.set_properties(owner="tests")
    assert table.version == 2
    assert len(table.history()) == 2
    assert table.properties["owner"] == "tests"
    assert await table.io.read(version_hint_path(table.location)) == b"2"


@pytest.mark.anyio
async def test_failed_transaction_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    table = await make_table(tmp_path)
    with pytest.raises(RuntimeError):
        async with table.transaction() as tx:
            await tx.append(rows("a", 0))
            raise RuntimeError("caller gave up")
    await table.refresh()
    assert table.version == 1 and table.current_snapshot() is None
    data_files = [i async for i in table.io.list(table.location + "/data/")]
    assert data_files == []


@pytest.mark.anyio
async def test_unmet_requirement_is_a_conflict_and_removes_the_attempts_files(tmp_path: Path) -> None:
    table = await make_table(tmp_path)
    async with table.transaction() as tx:
        await tx.append(rows("a", 0))
        tx.changes.append(MetadataChange([SetProperties({"x": "1"})], [AssertCurrentSchemaId(99)]))
        with pytest.raises(CommitConflictError):
            await tx.commit_transaction()
    await table.refresh()
    assert table.version == 1
    leftovers = [i.location async for i in table.io.list(table.location + "/")]
    assert all("/metadata/v1.metadata.json" in p or p.endswith("version-hint.text") for p in leftovers)


@pytest.mark.anyio
async def test_create_load_exists_and_list(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    await catalog.create_table("db.a", schema=ARROW_SCHEMA, partition_by=["bucket(4, id)"])
    await catalog.create_table("db.b", schema=ARROW_SCHEMA, format_version=1)
    with pytest.raises(TableAlreadyExistsError):
        await catalog.create_table("db.a", schema=ARROW_SCHEMA)
    assert await catalog.list_tables("db") == ["db.a", "db.b"]
    assert await catalog.table_exists("db.a") and not await catalog.table_exists("db.c")
    with pytest.raises(TableNotFoundError):
        await catalog.load_table("db.c")
    loaded = await catalog.load_table("db.a")
    assert str(loaded.spec().fields[0].transform) == "bucket[4]"
    assert (await catalog.load_table("db.b")).metadata.format_version == 1
    assert (tmp_path / "wh" / "db" / "a" / "metadata" / "v1.metadata.json").exists()


@pytest.mark.anyio
async def test_table_opened_by_metadata_file_is_read_only(tmp_path: Path) -> None:
    table = await make_table(tmp_path)
    await table.append(rows("a", 0))
    static = await aioiceberg.load_table(table.metadata_location)
    assert static.current_snapshot() == table.current_snapshot()
    with pytest.raises(UnsupportedError):
        await static.append(rows("a", 10))
    latest = await aioiceberg.load_table(table.location)
    assert latest.version == 2 and not latest.read_only


@pytest.mark.anyio
async def test_store_without_conditional_writes_refuses_commits() -> None:
    catalog = aioiceberg.connect("memory://nocond/wh", storage_options={"io.backend": "fsspec"})
    with pytest.raises(ConditionalWritesUnsupportedError):
        await catalog.create_table("db.events", schema=ARROW_SCHEMA)


def test_apply_updates_is_pure() -> None:
    from aioiceberg.spec.arrow import arrow_to_schema_assign_ids
    from aioiceberg.spec.metadata_json import new_table_metadata
    from aioiceberg.spec.partitioning import UNPARTITIONED
    from aioiceberg.spec.sorting import UNSORTED

    base = new_table_metadata(arrow_to_schema_assign_ids(ARROW_SCHEMA), UNPARTITIONED, UNSORTED, "/t")
    new = apply_updates(
        base, [SetProperties({"a": "1"})], base_location="/t/metadata/v1.metadata.json", now_ms=1
    )
    assert base.properties == {} and new.properties == {"a": "1"}
    assert new.last_updated_ms == base.last_updated_ms
    assert [e.metadata_file for e in new.metadata_log] == ["/t/metadata/v1.metadata.json"]
