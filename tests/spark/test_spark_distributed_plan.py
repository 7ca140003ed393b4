"""``plan_files`` on Spark executors returns exactly the tasks the single-process planner
returns (``Table.scan().plan_batches()``), on a multi-manifest table with delete files,
with and without a filter, in a local[2] session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from servers.spark_cluster import session_builder

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.spark.actions.distributed_plan import collect_tasks, plan_files
from aioiceberg.table_scan import TableScan

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("v", pa.int64())])


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = session_builder(
        "local[2]", "aioiceberg-plan", {"spark.ui.showConsoleProgress": "false"}
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    aioiceberg.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module", params=[2, 3])
def table(request: Any, tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    """Eight appends (eight data manifests), position deletes (or v3 deletion vectors)
    from two merge-on-read deletes, one partitioned, one not."""
    root = tmp_path_factory.mktemp(f"plan-v{request.param}")
    t = sync.connect(str(root)).create_table(
        "db.t",
        schema=SCHEMA,
        partition_by=["region"],
        properties={"write.delete.mode": "merge-on-read", "format-version": str(request.param)},
    )
    for k in range(8):
        ids = list(range(k * 40, k * 40 + 40))
        t.append(
            pa.table(
                {"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": [i % 11 for i in ids]},
                schema=SCHEMA,
            )
        )
    t.delete("id IN (" + ", ".join(str(i) for i in range(0, 320, 7)) + ")")
    t.delete("region = 'us' AND v = 3")
    return t.refresh()


def canon(tasks: pa.Table) -> list[tuple[Any, ...]]:
    rows = tasks.to_pylist()
    out = []
    for r in rows:
        r["delete_files"] = sorted(tuple(sorted(d.items(), key=lambda kv: kv[0])) for d in r["delete_files"])
        out.append(tuple(sorted(r.items(), key=lambda kv: kv[0])))
    return sorted(out, key=repr)


def single_process(table: sync.Table, row_filter: str, **options: Any) -> pa.Table:
    scan: TableScan = table.scan(row_filter, **options).aio

    async def batches() -> list[pa.RecordBatch]:
        return [b async for b in scan.plan_batches()]

    found = default_loop.run(batches())
    return pa.Table.from_batches(found, schema=found[0].schema) if found else pa.table({})


@pytest.mark.parametrize("row_filter", ["", "region = 'eu'", "id > 150 AND v < 5", "region = 'nowhere'"])
def test_plan_files_returns_the_single_process_tasks(spark: Any, table: sync.Table, row_filter: str) -> None:
    df = plan_files(spark, table.location, filter=row_filter, parallelism=3)
    got = collect_tasks(df)
    expected = single_process(table, row_filter)
    assert canon(got) == canon(expected) if expected.num_rows else got.num_rows == 0
    if row_filter == "":
        assert got.num_rows == 8 * 3  # a file per partition per append
        assert any(len(d) for d in got.column("delete_files").to_pylist())
    assert [f.name for f in df.schema.fields] == [
        "file_path",
        "file_format",
        "spec_id",
        "partition",
        "record_count",
        "file_size_in_bytes",
        "start",
        "length",
        "residual",
        "first_row_id",
        "delete_files",
    ]


def test_plan_files_splits_and_reads_options_as_the_source_does(spark: Any, table: sync.Table) -> None:
    first = table.snapshots()[2].snapshot_id
    df = plan_files(spark, table.location, {"snapshot-id": str(first), "filter": "v > 2"})
    assert canon(collect_tasks(df)) == canon(single_process(table, "v > 2", snapshot_id=first))
    split = plan_files(spark, table.location, {"split-size": "1"}, filter="region = 'ap'")
    assert canon(collect_tasks(split)) == canon(single_process(table, "region = 'ap'", split_size=1))
