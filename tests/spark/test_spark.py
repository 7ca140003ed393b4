"""The aioiceberg PySpark data source against a real local SparkSession (one per module)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from maint_helpers import duckdb_ids
from region_rows import SCHEMA, rows
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from spark_sessions import local_session

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg.spark.source import FILTER_PUSHDOWN_CONF


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-tests")


def ids_of(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def sorted_rows(table: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def make_table(root: str, storage_options: dict[str, str] | None = None) -> sync.Table:
    table = sync.connect(root, storage_options=storage_options).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    for k in range(3):
        table.append(rows(k * 30, 30))
    return table


def test_reads_a_table_written_here_like_to_arrow_split_across_partitions(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    df = spark.read.format("aioiceberg").option("split-size", "1").load(table.location)
    assert [f.name for f in df.schema.fields] == ["id", "region", "v"]
    assert df.rdd.getNumPartitions() == 9  # 3 appends x 3 regions, one file per partition
    expected = table.scan().to_arrow()
    assert sorted_rows(pa.Table.from_pylist([r.asDict() for r in df.collect()]), ["id", "region", "v"]) == (
        sorted_rows(expected, ["id", "region", "v"])
    )
    packed = spark.read.format("aioiceberg").load(table.location)
    assert packed.rdd.getNumPartitions() == 1 and packed.count() == 90


def test_time_travel_by_snapshot_id(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    first = table.snapshots()[0].snapshot_id
    df = spark.read.format("aioiceberg").option("snapshot-id", str(first)).load(table.location)
    assert ids_of(df) == list(range(30))


def test_reads_a_pyiceberg_table_with_deletes_and_an_evolved_schema(spark: Any, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import StringType

    warehouse = tmp_path / "py"
    warehouse.mkdir()
    catalog = SqlCatalog("py", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace("db")
    py_table = catalog.create_table("db.t", schema=SCHEMA)
    py_table.append(rows(0, 40))
    with py_table.update_schema() as update:
        update.add_column("note", StringType())
    py_table = catalog.load_table("db.t")
    extra = rows(40, 10).append_column("note", pa.array(["n"] * 10, pa.large_string()))
    py_table.append(extra)
    py_table.delete("id < 5")  # copy-on-write: rewrites the file
    location = py_table.metadata_location
    df = spark.read.format("aioiceberg").load(location)
    expected = sync.load_table(location).scan().to_arrow()
    assert expected.num_rows == 45
    got = pa.Table.from_pylist([r.asDict() for r in df.collect()])
    assert sorted_rows(got, ["id", "note"]) == sorted_rows(expected, ["id", "note"])


def test_reads_a_table_on_s3_through_executors(spark: Any, moto_endpoint: str) -> None:
    bucket = asyncio.run(create_bucket(moto_endpoint))
    options = s3_storage_options(moto_endpoint)
    table = make_table(f"s3://{bucket}/wh", options)
    df = spark.read.format("aioiceberg").options(**options).option("split-size", "1").load(table.location)
    assert ids_of(df) == sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids_of(df.filter("region = 'us'")) == [i for i in range(90) if i % 3 == 1]


def _scan_description(df: Any) -> str:
    """The formatted explain string, where a scan lists its PushedFilters."""
    mode = df.sparkSession._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("formatted")
    return str(df._jdf.queryExecution().explainString(mode))


def test_pushed_filters_show_in_the_plan_and_prune_partitions(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    aioiceberg.spark.register(spark, filter_pushdown=True)
    try:

        def load() -> Any:  # a fresh DataFrame per query (see register)
            return spark.read.format("aioiceberg").option("split-size", "1").load(table.location)

        filtered = load().filter("region = 'eu' AND id >= 30 AND v > 1.0")
        plan = _scan_description(filtered)
        assert "PushedFilters" in plan and "EqualTo(region,eu)" in plan, plan
        assert "GreaterThan(v" not in plan.split("PushedFilters")[1].split("]")[0]  # NaN order differs: stays
        assert filtered.rdd.getNumPartitions() == 2  # region=eu files of the 2nd and 3rd append
        assert ids_of(filtered) == [i for i in range(30, 90) if i % 3 == 0]
        negated = load().filter("region != 'eu'")
        assert ids_of(negated) == [i for i in range(90) if i % 3 != 0]
    finally:
        spark.conf.unset(FILTER_PUSHDOWN_CONF)  # register sets it only to turn pushdown on
        aioiceberg.spark.register(spark)
    assert spark.conf.get(FILTER_PUSHDOWN_CONF) == "false"  # this Spark caches read plans per relation


def test_unfiltered_query_after_a_filtered_one_on_the_same_dataframe_returns_all_rows(
    spark: Any, tmp_path: Path
) -> None:
    table = make_table(str(tmp_path / "wh"))
    aioiceberg.spark.register(spark)  # the default guards against Spark reusing a pushed plan
    df = spark.read.format("aioiceberg").option("split-size", "1").load(table.location)
    assert ids_of(df.filter("region = 'eu'")) == [i for i in range(90) if i % 3 == 0]
    assert df.count() == 90
    assert len(ids_of(df)) == 90


def test_filter_option_prunes_planning(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    df = spark.read.format("aioiceberg").option("filter", "region = 'ap'").option("split-size", "1")
    df = df.load(table.location)
    assert df.rdd.getNumPartitions() == 3
    assert ids_of(df) == [i for i in range(90) if i % 3 == 2]


def test_append_and_overwrite_from_spark_read_back_by_pyiceberg_and_duckdb(
    spark: Any, tmp_path: Path
) -> None:
    from pyiceberg.table import StaticTable

    table = make_table(str(tmp_path / "wh"))
    new = spark.createDataFrame(rows(100, 20).to_pylist()).select("id", "region", "v").repartition(2)
    new.write.format("aioiceberg").mode("append").save(table.location)
    table.refresh()
    expected = list(range(90)) + list(range(100, 120))
    assert (
        sorted(StaticTable.from_metadata(table.metadata_location).scan().to_arrow()["id"].to_pylist())
        == expected
    )
    assert duckdb_ids(table.metadata_location) == expected

    spark.createDataFrame(rows(500, 7).to_pylist()).select("id", "region", "v").write.format(
        "aioiceberg"
    ).mode("overwrite").save(table.location)
    table.refresh()
    expected = list(range(500, 507))
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == expected
    assert (
        sorted(StaticTable.from_metadata(table.metadata_location).scan().to_arrow()["id"].to_pylist())
        == expected
    )
    assert duckdb_ids(table.metadata_location) == expected


def test_two_concurrent_spark_appends_lose_nothing(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    errors: list[BaseException] = []

    def job(start: int) -> None:
        try:
            df = spark.createDataFrame(rows(start, 10).to_pylist()).select("id", "region", "v")
            df.write.format("aioiceberg").mode("append").save(table.location)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(s,)) for s in (1000, 2000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    got = sorted(table.refresh().scan().to_arrow()["id"].to_pylist())
    assert got == sorted([*range(90), *range(1000, 1010), *range(2000, 2010)])


def test_failed_write_job_leaves_no_data_files_behind(spark: Any, tmp_path: Path) -> None:
    required = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    table = sync.connect(str(tmp_path / "wh")).create_table("db.r", schema=required)
    data_dir = Path(table.location) / "data"
    before = set(data_dir.rglob("*")) if data_dir.exists() else set()
    good = [{"id": i, "region": "eu"} for i in range(10)]
    bad = [{"id": None, "region": "us"}]  # a null in a required column fails its task
    df = spark.createDataFrame(good + bad, "id long, region string").repartition(2)
    with pytest.raises(Exception):  # noqa: B017 - Spark wraps the task error
        df.write.format("aioiceberg").mode("append").save(table.location)
    after = set(data_dir.rglob("*.parquet")) if data_dir.exists() else set()
    assert after <= before
    assert table.refresh().current_snapshot() is None


def _by_region(table: sync.Table) -> dict[str, list[int]]:
    data = table.refresh().scan().to_arrow()
    out: dict[str, list[int]] = {}
    for i, region in zip(data["id"].to_pylist(), data["region"].to_pylist(), strict=True):
        out.setdefault(region, []).append(i)
    return {k: sorted(v) for k, v in out.items()}


def test_unknown_options_are_errors_that_name_them(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    with pytest.raises(Exception, match="splitsize"):
        spark.read.format("aioiceberg").option("splitsize", "1").load(table.location).collect()
    df = spark.createDataFrame(rows(100, 3).to_pylist()).select("id", "region", "v")
    with pytest.raises(Exception, match="overwrite-mode"):  # an overwrite option on an append
        df.write.format("aioiceberg").mode("append").option("overwrite-mode", "dynamic").save(table.location)
    with pytest.raises(Exception, match="overwrite-mod"):
        df.write.format("aioiceberg").mode("overwrite").option("overwrite-mod", "dynamic").save(
            table.location
        )
    with pytest.raises(Exception, match="snapshot-id"):
        df.write.format("aioiceberg").mode("append").option("snapshot-id", "1").save(table.location)
    assert len(table.refresh().snapshots()) == 3


def test_an_append_with_the_branch_option_commits_to_that_branch_only(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    main_before = table.current_snapshot()
    assert main_before is not None
    with table.manage_snapshots() as ms:
        ms.create_branch("staging", main_before.snapshot_id)
    df = spark.createDataFrame(rows(100, 5).to_pylist()).select("id", "region", "v")
    df.write.format("aioiceberg").mode("append").option("branch", "staging").save(table.location)
    table.refresh()
    assert table.current_snapshot() == main_before  # main did not move
    assert sorted(table.scan(ref="staging").to_arrow()["id"].to_pylist()) == list(range(90)) + list(
        range(100, 105)
    )
    with pytest.raises(Exception, match=r"'branch'.*goes with mode\('append'\)"):
        df.write.format("aioiceberg").mode("overwrite").option("branch", "staging").save(table.location)
    assert len(table.refresh().scan(ref="staging").to_arrow()) == 95


def test_dynamic_overwrite_replaces_exactly_the_partitions_written(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    before = _by_region(table)
    eu = spark.createDataFrame([{"id": 1000 + i, "region": "eu", "v": 0.5} for i in range(4)]).select(
        "id", "region", "v"
    )
    eu.write.format("aioiceberg").mode("overwrite").option("overwrite-mode", "dynamic").save(table.location)
    after = _by_region(table)
    assert after == {**before, "eu": [1000, 1001, 1002, 1003]}
    assert duckdb_ids(table.metadata_location) == sorted(i for v in after.values() for i in v)
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.properties.get("replace-partitions") == "true"


def test_overwrite_by_filter_replaces_matching_rows_and_checks_what_it_writes(
    spark: Any, tmp_path: Path
) -> None:
    table = make_table(str(tmp_path / "wh"))
    before = _by_region(table)
    us = spark.createDataFrame([{"id": 2000 + i, "region": "us", "v": 1.0} for i in range(3)]).select(
        "id", "region", "v"
    )
    us.write.format("aioiceberg").mode("overwrite").option("overwrite-filter", "region = 'us'").save(
        table.location
    )
    assert _by_region(table) == {**before, "us": [2000, 2001, 2002]}
    snapshots = len(table.snapshots())
    data_dir = Path(table.location) / "data"
    files_before = set(data_dir.rglob("*.parquet"))
    stray = spark.createDataFrame(
        [{"id": 3000, "region": "us", "v": 1.0}, {"id": 3001, "region": "eu", "v": 1.0}]
    ).select("id", "region", "v")
    with pytest.raises(Exception, match="do not match overwrite-filter"):
        stray.write.format("aioiceberg").mode("overwrite").option("overwrite-filter", "region = 'us'").save(
            table.location
        )
    assert len(table.refresh().snapshots()) == snapshots
    assert set(data_dir.rglob("*.parquet")) <= files_before


def test_a_rerun_with_the_same_idempotency_key_is_a_no_op(spark: Any, tmp_path: Path) -> None:
    table = make_table(str(tmp_path / "wh"))
    df = spark.createDataFrame(rows(700, 5).to_pylist()).select("id", "region", "v")
    for _ in range(2):
        df.write.format("aioiceberg").mode("append").option("idempotency-key", "load-2024-05-01").option(
            "snapshot-property.job", "nightly"
        ).save(table.location)
    table.refresh()
    assert len(table.snapshots()) == 4
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.properties.get("job") == "nightly"
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [*range(90), *range(700, 705)]


def test_a_task_that_finishes_after_its_job_was_aborted_takes_its_files_away(tmp_path: Path) -> None:
    """A straggler Spark did not stop before abort() listed the job's files (seen under load):
    abort leaves a marker first, and a task that sees it removes what it wrote."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from aioiceberg.spark.source import AioIcebergDataSource

    table = make_table(str(tmp_path / "wh"))
    data_dir = Path(table.location) / "data"
    before = set(data_dir.rglob("*.parquet"))
    spark_schema = StructType(
        [StructField("id", LongType()), StructField("region", StringType()), StructField("v", DoubleType())]
    )
    writer = AioIcebergDataSource({"path": table.location}).writer(spark_schema, False)
    writer.abort([])  # the job failed elsewhere before this task ended
    late = writer.write(iter(rows(500, 6).to_batches()))
    assert late.data_files == []
    assert set(data_dir.rglob("*.parquet")) == before
    assert len(table.refresh().snapshots()) == 3
    # a task of another job is untouched by this job's marker
    other = AioIcebergDataSource({"path": table.location}).writer(spark_schema, False)
    assert len(other.write(iter(rows(600, 6).to_batches())).data_files) == 3
    other.abort([])


def test_reads_uuid_columns_top_level_and_nested_as_16_bytes(spark: Any, tmp_path: Path) -> None:
    """Spark has no uuid type: the value arrives as its 16 bytes, as Java's Spark reader gives it."""
    import uuid

    values = [uuid.UUID(int=i * 0x1000_0000_0000_0001) for i in range(1, 4)]
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("u", pa.uuid()),
            pa.field("s", pa.struct([pa.field("w", pa.uuid())])),
        ]
    )
    data = pa.table(
        {
            "id": [1, 2, 3],
            "u": pa.array([v.bytes for v in values], pa.uuid()),
            "s": pa.StructArray.from_arrays([pa.array([v.bytes for v in values], pa.uuid())], ["w"]),
        },
        schema=schema,
    )
    table = sync.connect(str(tmp_path / "wh")).create_table("db.u", schema=schema)
    table.append(data)
    df = spark.read.format("aioiceberg").load(table.location)
    got = sorted((r["id"], bytes(r["u"]), bytes(r["s"]["w"])) for r in df.collect())
    assert got == [(i + 1, v.bytes, v.bytes) for i, v in enumerate(values)]
    picked = spark.read.format("aioiceberg").option("filter", f"u = '{values[1]}'").load(table.location)
    assert [r["id"] for r in picked.collect()] == [2]
