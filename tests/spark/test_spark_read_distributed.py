"""``read_table`` planned on executors (``distributed-planning``) reads what the driver-planned one reads.

One local session: every table is read with planning forced onto the executors and forced
onto the driver, with and without Spark's Parquet reader; rows must be equal and Spark must
read the same files itself. ``auto`` is checked by the decision ``read_table`` logs, and a
table of many files by the DataFrame's lineage (the plan never reaches the driver's Python).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from spark_sessions import local_session

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import ValidationError
from aioiceberg.io.resolve import resolve_io
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.actions.distributed_plan import data_file_estimate
from aioiceberg.testing.synthetic import build_table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("v", pa.int32()),
        pa.field("x", pa.float64()),
    ]
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-read-distributed")


def rows(df: Any) -> list[tuple[Any, ...]]:
    def key(v: Any) -> Any:
        return ("NaN",) if isinstance(v, float) and math.isnan(v) else v

    return sorted((tuple(key(v) for v in r) for r in df.collect()), key=repr)


def read(spark: Any, table: sync.Table, where: str, options: dict[str, str] | None = None, **kw: Any) -> Any:
    return aioiceberg.spark.read_table(
        spark, table.location, {**(options or {}), "distributed-planning": where}, **kw
    )


def spark_files(df: Any) -> set[str]:
    return {p.removeprefix("file://").removeprefix("file:") for p in df.inputFiles()}


def lineage(df: Any) -> str:
    return str(df._jdf.queryExecution().analyzed().toString())


def build(tmp_path_factory: pytest.TempPathFactory, version: int) -> sync.Table:
    """Partitioned by region, six appends (six data manifests), merge-on-read deletes
    (position delete files in v2, deletion vectors in v3) in some files, not all."""
    root = tmp_path_factory.mktemp(f"read-v{version}")
    t = sync.connect(str(root)).create_table(
        "db.t",
        schema=SCHEMA,
        partition_by=["region"],
        properties={"write.delete.mode": "merge-on-read", "format-version": str(version)},
    )
    for k in range(6):
        ids = list(range(k * 50, k * 50 + 50))
        t.append(
            pa.table(
                {
                    "id": ids,
                    "region": [("eu", "us", "ap")[i % 3] for i in ids],
                    "v": [i % 11 for i in ids],
                    "x": [float("nan") if i % 17 == 0 else i / 4 for i in ids],
                },
                schema=SCHEMA,
            )
        )
    t.delete("id IN (" + ", ".join(str(i) for i in range(100, 200, 7)) + ")")
    t.delete("region = 'us' AND v = 3 AND id < 150")
    return t.refresh()


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    """v3: the deletes are deletion vectors (many data files' vectors in one Puffin file)."""
    return build(tmp_path_factory, 3)


@pytest.fixture(scope="module")
def v2_table(tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    """v2: the deletes are position delete files."""
    return build(tmp_path_factory, 2)


@pytest.mark.parametrize("row_filter", ["", "region = 'eu' AND v < 5", "x > 20.5 OR id = 3"])
def test_executors_and_driver_read_the_same_rows(spark: Any, table: sync.Table, row_filter: str) -> None:
    options = {"filter": row_filter} if row_filter else {}
    on_driver = read(spark, table, "false", options)
    on_executors = read(spark, table, "true", options)
    expected = rows(on_driver)
    assert expected and rows(on_executors) == expected
    # Spark reads the same delete-free files itself; those with deletes are aioiceberg's
    assert spark_files(on_executors) == spark_files(on_driver)
    if not row_filter:
        assert 0 < len(spark_files(on_executors)) < len({t.file.file_path for t in table.scan().plan_files()})
        assert rows(read(spark, table, "true", options, native=False)) == expected


def test_position_delete_files_read_alike(spark: Any, v2_table: sync.Table) -> None:
    expected = rows(read(spark, v2_table, "false"))
    assert expected and rows(read(spark, v2_table, "true")) == expected
    assert rows(read(spark, v2_table, "true", native=False)) == expected
    assert spark_files(read(spark, v2_table, "true")) == spark_files(read(spark, v2_table, "false"))


def test_task_rows_carry_each_files_own_deletion_vector(table: sync.Table) -> None:
    """Deletion vectors of many data files share one Puffin file: a task row names its own."""

    async def batches() -> list[pa.RecordBatch]:
        return [b async for b in table.scan().aio.plan_batches()]

    found = {
        r["file_path"]: sorted((d["file_path"], d["content_offset"]) for d in r["delete_files"])
        for b in default_loop.run(batches())
        for r in b.to_pylist()
    }
    expected = {
        t.file.file_path: sorted((d.file_path, d.content_offset) for d in t.delete_files)
        for t in table.scan().plan_files()
    }
    assert found == expected
    assert sum(1 for d in expected.values() if d) >= 4


def test_a_snapshot_and_split_files_read_alike(spark: Any, table: sync.Table) -> None:
    first = table.snapshots()[3].snapshot_id
    for options in ({"snapshot-id": str(first)}, {"split-size": "1", "filter": "v > 2"}):
        expected = rows(read(spark, table, "false", options))
        assert expected
        assert rows(read(spark, table, "true", options)) == expected
        assert rows(read(spark, table, "true", options, native=False)) == expected
    # before the deletes: every file is Spark's
    snapshot = read(spark, table, "true", {"snapshot-id": str(first)})
    assert len(spark_files(snapshot)) == 4 * 3


def test_the_snapshot_is_fixed_when_read_table_is_called(spark: Any, tmp_path: Path) -> None:
    t = sync.connect(str(tmp_path)).create_table("db.t", schema=SCHEMA)
    assert read(spark, t, "true").count() == 0  # no snapshot yet
    t.append(pa.table({"id": [1, 2], "region": ["eu", "us"], "v": [1, 2], "x": [0.5, 1.5]}, schema=SCHEMA))
    lazy = read(spark, t, "true", native=False)
    checked = read(spark, t, "true")
    t.append(pa.table({"id": [3], "region": ["ap"], "v": [3], "x": [2.5]}, schema=SCHEMA))
    assert [r[0] for r in rows(lazy)] == [1, 2]
    assert [r[0] for r in rows(checked)] == [1, 2]


def test_auto_plans_on_executors_from_the_threshold(
    spark: Any, table: sync.Table, caplog: pytest.LogCaptureFixture
) -> None:
    files = len({t.file.file_path for t in table.scan().plan_files()})
    chosen: dict[str, str] = {}
    for threshold in (files, files + 1):
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="aioiceberg.spark"):
            df = read(spark, table, "auto", {"distributed-planning-threshold": str(threshold)})
        [message] = [r.getMessage() for r in caplog.records if "planning on" in r.getMessage()]
        assert f"{files} data files in 6 manifests" in message
        chosen[str(threshold)] = message
        assert ("MapInArrow" in lineage(df)) == (threshold == files)
    assert "planning on executors" in chosen[str(files)]
    assert "planning on the driver" in chosen[str(files + 1)]
    # the default threshold is far above this table
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="aioiceberg.spark"):
        aioiceberg.spark.read_table(spark, table.location)
    assert any("planning on the driver" in r.getMessage() for r in caplog.records)


def test_planning_options_are_checked(spark: Any, table: sync.Table) -> None:
    with pytest.raises(ValidationError, match="distributed-planning"):
        read(spark, table, "sometimes")
    with pytest.raises(ValidationError, match="distributed-planning-threshold"):
        read(spark, table, "auto", {"distributed-planning-threshold": "many"})


MANIFESTS, ENTRIES = 8, 1500


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    """12,000 data files in 8 manifests (manifests only: the files do not exist)."""
    location = (tmp_path_factory.mktemp("many") / "t").as_uri()
    io = resolve_io(location, runtime=default_runtime())
    default_loop.run(build_table(io, location, MANIFESTS, ENTRIES))
    return sync.load_table(location)


def test_a_plan_of_many_files_stays_on_the_executors(spark: Any, many_files: sync.Table) -> None:
    options = {"distributed-planning-threshold": "10000"}
    scan = many_files.scan()
    manifests = default_loop.run(scan.aio.planner.manifests())
    assert data_file_estimate(manifests) == MANIFESTS * ENTRIES
    lazy = aioiceberg.spark.read_table(spark, many_files.location, options, native=False)
    plan = lineage(lazy)
    # planned by executors from a range of share ids; nothing planned on the driver rides in
    # the plan (the driver path's tasks travel as a data source option or a local relation)
    assert "Range (0, 8" in plan and plan.count("MapInArrow") == 2
    assert "LocalRelation" not in plan and "aioiceberg-planned" not in plan
    checked = aioiceberg.spark.read_table(spark, many_files.location, options)
    plan = lineage(checked)
    assert "LogicalRDD" in plan and "LocalRelation" not in plan and "aioiceberg-planned" not in plan
    assert checked.inputFiles() == []  # no footer readable (no file exists): all aioiceberg's
    assert lazy.columns == checked.columns == [f.name for f in scan.snapshot_schema.fields]
