"""``aioiceberg.spark.read_table``: Spark's Parquet reader where it reads exactly, aioiceberg elsewhere.

Every table here is read three ways in one real SparkSession: ``read_table`` (native
files through ``spark.read.parquet`` by field id), ``read_table(native=False)`` (every
file through aioiceberg) and the ``aioiceberg`` data source; the rows must be equal, and
which files Spark read itself is checked through ``DataFrame.inputFiles()``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from spark_sessions import local_session

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg.errors import ValidationError
from aioiceberg.spark.native_files import native_file
from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import BucketTransform, IdentityTransform
from aioiceberg.spec.types import IntegerType, LongType, NestedField, StringType


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-read-table")


def canon(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows as sortable tuples, NaN made comparable."""

    def value(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return ("NaN",)
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        return v

    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def collect(df: Any) -> list[tuple[Any, ...]]:
    return canon([tuple(r) for r in df.collect()])


def native_paths(df: Any) -> set[str]:
    return {p.removeprefix("file://").removeprefix("file:") for p in df.inputFiles()}


def data_paths(table: sync.Table) -> set[str]:
    return {t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()}


def assert_reads_alike(spark: Any, table: sync.Table, options: dict[str, str] | None = None) -> list[Any]:
    fast = aioiceberg.spark.read_table(spark, table.location, options)
    rows = collect(fast)
    assert rows == collect(aioiceberg.spark.read_table(spark, table.location, options, native=False))
    source = spark.read.format("aioiceberg").options(**(options or {})).load(table.location)
    assert rows == collect(source)
    assert fast.columns == source.columns
    return rows


def test_a_plain_table_is_read_by_spark_itself_and_prunes_columns(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("v", pa.float64())])
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=schema, partition_by=["region"])
    for k in range(3):
        ids = list(range(k * 30, (k + 1) * 30))
        values = [i / 2 if i % 7 else float("nan") for i in ids]
        table.append(pa.table({"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": values}))
    rows = assert_reads_alike(spark, table)
    assert [r[0] for r in rows] == sorted(range(90), key=repr)
    df = aioiceberg.spark.read_table(spark, table.location)
    assert native_paths(df) == data_paths(table)
    plan = df.select("id", "v")._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<id:bigint,v:double>" in plan  # Spark reads 2 of the 3 columns
    # a filter option prunes files in planning; the rows are filtered by Spark
    pruned = aioiceberg.spark.read_table(spark, table.location, {"filter": "region = 'eu' AND id < 40"})
    assert len(native_paths(pruned)) == 2  # eu files of the first two appends (ids 0-59)
    assert sorted(r["id"] for r in pruned.collect()) == [i for i in range(40) if i % 3 == 0]


def test_a_file_in_a_folder_java_escapes_is_read_by_spark_at_its_path(spark: Any, tmp_path: Path) -> None:
    # Java's Hadoop file system writes a partition value a/b as the folder region=a%2Fb, on
    # disk and in the manifest (file:// warehouses): Spark must be handed that folder, not
    # the path the location decodes to
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    table = sync.connect(tmp_path.as_uri()).create_table("db.t", schema=schema, partition_by=["region"])
    table.append(pa.table({"id": [1, 2, 3], "region": ["eu"] * 3}, schema=schema))
    [task] = list(table.scan().plan_files())
    folder = Path(task.file.file_path.removeprefix("file://")).parent.parent / "region=a%2Fb"
    folder.mkdir()
    (folder / "java.parquet").write_bytes(Path(task.file.file_path.removeprefix("file://")).read_bytes())
    table.delete("id > 0")
    as_java_writes = f"{table.location}/data/region=a%2Fb/java.parquet"
    table.append_data_files([dataclasses.replace(task.file, file_path=as_java_writes)])
    rows = assert_reads_alike(spark, table)
    assert [r[0] for r in rows] == [1, 2, 3]
    df = aioiceberg.spark.read_table(spark, table.location)
    # Spark read it itself, from the folder as named (its URI escapes the %)
    assert {unquote(p) for p in native_paths(df)} == {str(folder / "java.parquet")}


def test_an_evolved_schema_reads_the_same_by_field_id(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int32()),
            ("name", pa.string()),
            ("score", pa.float32()),
            ("gone", pa.string()),
            ("point", pa.struct([("x", pa.int32()), ("y", pa.int32())])),
        ]
    )
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=schema)
    table.append(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int32()),
                "name": ["a", None],
                "score": pa.array([1.5, float("nan")], pa.float32()),
                "gone": ["x", "y"],
                "point": [{"x": 1, "y": 2}, None],
            },
            schema=schema,
        )
    )
    with table.update_schema() as u:
        u.rename_column("name", "label")
        u.update_column("id", LongType())
        u.update_column("score", "double")
        u.delete_column("gone")
        u.add_column("extra", StringType())
        u.add_column(("point", "z"), IntegerType())
        u.move_first("name")
    new = table.schema()
    table.append(
        pa.Table.from_pylist(
            [{"label": "c", "id": 3, "score": 2.25, "point": {"x": 5, "y": 6, "z": 7}, "extra": "e"}],
            schema=schema_to_arrow(new, include_field_ids=False),
        )
    )
    rows = assert_reads_alike(spark, table)
    assert rows == canon(
        [
            ("a", 1, 1.5, (1, 2, None), None),
            (None, 2, float("nan"), None, None),
            ("c", 3, 2.25, (5, 6, 7), "e"),
        ]
    ) or rows == canon(
        [
            ("a", 1, 1.5, {"x": 1, "y": 2, "z": None}, None),
            (None, 2, float("nan"), None, None),
            ("c", 3, 2.25, {"x": 5, "y": 6, "z": 7}, "e"),
        ]
    )
    # every file has field ids, so Spark reads both: promotion, rename, drop and adds included
    assert native_paths(aioiceberg.spark.read_table(spark, table.location)) == data_paths(table)


def test_defaults_deletes_and_unmapped_files_go_through_aioiceberg(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = sync.connect(str(tmp_path / "wh"))
    table = catalog.create_table("db.t", schema=schema, format_version=3)
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    with table.update_schema() as u:
        u.add_column("n", LongType(), default_value=7)  # the old file lacks it: 7, not null
    with_n = schema_to_arrow(table.schema(), include_field_ids=False)
    table.append(pa.Table.from_pylist([{"id": 6, "v": "f", "n": 60}], schema=with_n))
    rows = assert_reads_alike(spark, table)
    assert rows == canon([(1, "a", 7), (2, "b", 7), (3, "c", 7), (6, "f", 60)])
    native = native_paths(aioiceberg.spark.read_table(spark, table.location))
    newest = {t.file.file_path.removeprefix("file://") for t in table.scan(row_filter="id = 6").plan_files()}
    assert native == newest  # only the file that has ``n``

    deleted = catalog.create_table("db.d", schema=schema, properties={"write.delete.mode": "merge-on-read"})
    deleted.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    deleted.append(pa.table({"id": [4, 5], "v": ["d", "e"]}, schema=schema))
    deleted.delete("id = 2")  # a position delete file on the first data file
    assert assert_reads_alike(spark, deleted) == canon([(1, "a"), (3, "c"), (4, "d"), (5, "e")])
    untouched = {
        t.file.file_path.removeprefix("file://") for t in deleted.scan().plan_files() if not t.delete_files
    }
    assert len(untouched) == 1
    assert native_paths(aioiceberg.spark.read_table(spark, deleted.location)) == untouched

    # plain Parquet without field ids, added under a name mapping: aioiceberg maps the names
    from aioiceberg.spec.name_mapping import create_mapping_from_schema, name_mapping_to_json

    plain = catalog.create_table("db.plain", schema=pa.schema([("a", pa.int64()), ("b", pa.string())]))
    with plain.transaction() as tx:
        tx.set_properties(
            {"schema.name-mapping.default": name_mapping_to_json(create_mapping_from_schema(plain.schema()))}
        )
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", None]}), path)
    plain.add_files([str(path)])
    plain.append(pa.table({"a": [3], "b": ["z"]}))
    assert assert_reads_alike(spark, plain) == canon([(1, "x"), (2, None), (3, "z")])
    assert native_paths(aioiceberg.spark.read_table(spark, plain.location)) == data_paths(plain) - {str(path)}


def test_types_spark_does_not_hold_exactly_read_through_aioiceberg(spark: Any, tmp_path: Path) -> None:
    import uuid

    schema = pa.schema([("id", pa.int64()), ("u", pa.uuid())])
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=schema)
    u1 = uuid.UUID("12345678-1234-5678-1234-567812345678")
    table.append(pa.table({"id": [1, 2], "u": pa.array([u1.bytes, None], pa.uuid())}, schema=schema))
    assert len(assert_reads_alike(spark, table)) == 2
    assert native_paths(aioiceberg.spark.read_table(spark, table.location)) == set()


FILTER_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("s", pa.string()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
        ("nested", pa.struct([("k", pa.int32())])),
    ]
)
FILTERS = [
    "i > 3",
    "i <= 3",
    "i != 3",
    "i IN (1, 2, 3)",
    "i NOT IN (1, 2)",
    "i IS NULL",
    "NOT (i > 3)",
    "f > 0",
    "f >= 0",
    "f < 1.5",
    "f = 0",
    "f != 0",
    "d > 2.5",
    "d <= 2.5",
    "d IS NAN",
    "d IS NOT NAN",
    "NOT (d > 2.5)",
    "d IN (0.5, 1.5)",
    "s = 'a'",
    "s != 'a'",
    "s LIKE 'a%'",
    "s NOT LIKE 'a%'",
    "s IN ('a', 'bb')",
    "day >= '2024-01-03'",
    "ts < '2024-01-01T12:00:00'",
    "tz > '2024-01-01T10:00:00+00:00'",
    "dec > 1.25",
    "b = true",
    "nested.k >= 2",
    "id = 5 OR s IS NULL",
    "i BETWEEN 2 AND 4 AND d IS NOT NULL",
]


@pytest.fixture(scope="module")
def filter_table(tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    root = tmp_path_factory.mktemp("filters")
    table = sync.connect(str(root)).create_table("db.f", schema=FILTER_SCHEMA)
    floats = [0.0, -0.0, 1.5, float("nan"), None, 3.0, 2.5, 0.5]
    strings = ["a", "ab", "bb", None, "", "b", "a", "c"]
    for part in range(2):
        rows = []
        for j in range(8):
            k = part * 8 + j
            rows.append(
                {
                    "id": k,
                    "i": None if k % 5 == 4 else k % 6,
                    "f": floats[j],
                    "d": floats[(j + part) % 8],
                    "s": strings[(j + part) % 8],
                    "day": dt.date(2024, 1, 1 + k % 5),
                    "ts": dt.datetime(2024, 1, 1, 8 + k),
                    "tz": dt.datetime(2024, 1, 1, 8 + k, tzinfo=dt.UTC),
                    "dec": Decimal(k) / 4,
                    "b": None if k % 7 == 3 else k % 2 == 0,
                    "nested": None if k == 3 else {"k": k % 4},
                }
            )
        table.append(pa.Table.from_pylist(rows, schema=FILTER_SCHEMA))
    return table


@pytest.mark.parametrize("text", FILTERS)
def test_a_filter_keeps_the_rows_aioiceberg_keeps(spark: Any, filter_table: sync.Table, text: str) -> None:
    fast = aioiceberg.spark.read_table(spark, filter_table.location, {"filter": text})
    expected = sorted(filter_table.scan(row_filter=text).to_arrow().column("id").to_pylist())
    assert sorted(r["id"] for r in fast.select("id").collect()) == expected, text
    slow = aioiceberg.spark.read_table(spark, filter_table.location, {"filter": text}, native=False)
    assert sorted(r["id"] for r in slow.select("id").collect()) == expected, text
    assert native_paths(fast) <= data_paths(filter_table) and native_paths(slow) == set()


def test_the_snapshot_is_the_one_current_when_read_table_was_called(spark: Any, tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=schema)
    table.append(pa.table({"id": [1]}, schema=schema))
    df = aioiceberg.spark.read_table(spark, table.location)
    table.append(pa.table({"id": [2]}, schema=schema))
    assert [r["id"] for r in df.collect()] == [1]
    first = table.history()[0].snapshot_id
    again = aioiceberg.spark.read_table(spark, table.location, {"snapshot-id": str(first)})
    assert [r["id"] for r in again.collect()] == [1]
    assert aioiceberg.spark.read_table(spark, table.location, {"filter": "id > 5"}).count() == 0


def test_bad_options_are_errors_naming_them(spark: Any, tmp_path: Path) -> None:
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    with pytest.raises(ValidationError, match="overwrite-mode"):
        aioiceberg.spark.read_table(spark, table.location, {"overwrite-mode": "dynamic"})
    with pytest.raises(ValidationError, match="colour"):
        aioiceberg.spark.read_table(spark, table.location, {"colour": "red"})
    assert aioiceberg.spark.read_table(spark, table.location).count() == 0


# -- which files Spark can read exactly: the rule, file by file -------------------------


def _file(*fields: pa.Field) -> pa.Schema:
    return pa.schema(list(fields))


def _f(name: str, t: pa.DataType, fid: int | None) -> pa.Field:
    return pa.field(name, t, metadata=None if fid is None else {b"PARQUET:field_id": str(fid).encode()})


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "n", IntegerType()),
)
UNPARTITIONED = PartitionSpec(spec_id=0)
BY_REGION = PartitionSpec.of(PartitionField((2,), 1000, IdentityTransform(), "region"), spec_id=1)
BY_BUCKET = PartitionSpec.of(PartitionField((2,), 1000, BucketTransform(4), "region_bucket"), spec_id=2)


def test_native_file_rule() -> None:
    full = _file(_f("id", pa.int64(), 1), _f("region", pa.string(), 2), _f("n", pa.int32(), 3))
    assert native_file(SCHEMA, BY_REGION, full)
    renamed = _file(_f("key", pa.int32(), 1), _f("r", pa.large_string(), 2), _f("n", pa.int32(), 3))
    assert native_file(SCHEMA, UNPARTITIONED, renamed)  # names and int -> long don't matter
    assert not native_file(SCHEMA, UNPARTITIONED, _file(_f("id", pa.int64(), None)))  # no ids
    no_n = _file(_f("id", pa.int64(), 1), _f("region", pa.string(), 2))
    assert native_file(SCHEMA, UNPARTITIONED, no_n)  # an added optional column reads as null
    no_region = _file(_f("id", pa.int64(), 1), _f("n", pa.int32(), 3))
    assert native_file(SCHEMA, BY_BUCKET, no_region)
    assert not native_file(SCHEMA, BY_REGION, no_region)  # its value is the partition's
    assert not native_file(SCHEMA, UNPARTITIONED, _file(_f("region", pa.string(), 2)))  # required id missing
    defaulted = Schema(*SCHEMA.fields[:2], NestedField(3, "n", IntegerType(), initial_default=7))
    assert not native_file(defaulted, UNPARTITIONED, no_n)  # its initial default, not null
    wrong = _file(_f("id", pa.int64(), 1), _f("region", pa.string(), 2), _f("n", pa.int64(), 3))
    assert not native_file(SCHEMA, UNPARTITIONED, wrong)  # long in the file, int in the table
    nanos = Schema(NestedField(1, "ts", aioiceberg_timestamp()))
    assert not native_file(nanos, UNPARTITIONED, _file(_f("ts", pa.timestamp("ns"), 1)))  # int96-style
    assert native_file(nanos, UNPARTITIONED, _file(_f("ts", pa.timestamp("us"), 1)))
    dup = _file(_f("id", pa.int64(), 1), _f("id2", pa.int64(), 1))
    assert not native_file(SCHEMA, UNPARTITIONED, dup)


def aioiceberg_timestamp() -> Any:
    from aioiceberg.spec.types import TimestampType

    return TimestampType()


def test_lists_maps_and_structs_inside_them_read_alike(spark: Any, tmp_path: Path) -> None:
    item = pa.struct([("sku", pa.string()), ("qty", pa.int32())])
    schema = pa.schema(
        [("id", pa.int64()), ("items", pa.list_(item)), ("attrs", pa.map_(pa.string(), pa.int64()))]
    )
    table = sync.connect(str(tmp_path)).create_table("db.t", schema=schema)
    table.append(
        pa.Table.from_pylist(
            [
                {"id": 1, "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": None}], "attrs": [("x", 1)]},
                {"id": 2, "items": [], "attrs": []},
                {"id": 3, "items": None, "attrs": None},
            ],
            schema=schema,
        )
    )
    with table.update_schema() as u:
        u.rename_column(("items", "element", "qty"), "quantity")
        u.add_column(("items", "element", "note"), StringType())
    rows = assert_reads_alike(spark, table)
    assert len(rows) == 3
    first = aioiceberg.spark.read_table(spark, table.location).where("id = 1").collect()[0]
    assert [(i["sku"], i["quantity"], i["note"]) for i in first["items"]] == [
        ("a", 1, None),
        ("b", None, None),
    ]
    assert native_paths(aioiceberg.spark.read_table(spark, table.location)) == data_paths(table)


def test_a_table_on_s3_is_read_through_aioiceberg_with_its_storage_options(
    spark: Any, moto_endpoint: str
) -> None:
    import asyncio

    from servers.backends import create_bucket
    from servers.plugin import s3_storage_options

    bucket = asyncio.run(create_bucket(moto_endpoint))
    options = s3_storage_options(moto_endpoint)
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    table = sync.connect(f"s3://{bucket}/wh", storage_options=options).create_table(
        "db.t", schema=schema, partition_by=["region"]
    )
    table.append(pa.table({"id": list(range(20)), "region": ["eu", "us"] * 10}, schema=schema))
    df = aioiceberg.spark.read_table(spark, table.location, {**options, "filter": "region = 'us'"})
    paths = native_paths(df)  # S3A is on the session's classpath: Spark's reader takes them
    assert paths and all(p.startswith(f"s3a://{bucket}/") and "region=us" in p for p in paths), paths
    assert sorted(r["id"] for r in df.collect()) == list(range(1, 20, 2))
    assert assert_reads_alike(spark, table, options) == canon([(i, ["eu", "us"][i % 2]) for i in range(20)])


def test_known_sizes_build_the_relation_without_spark_listing(spark: Any, tmp_path: Path) -> None:
    """The PySpark this project pins reaches the file index through its internals: the
    DataFrame read_table builds from known sizes is the one the public reader would give."""
    from pyspark.sql.types import LongType as SparkLong
    from pyspark.sql.types import StructField, StructType

    from aioiceberg.spark.native_files import known_files_frame

    paths = []
    for i in range(3):
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(pa.table({"x": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), path)
        paths.append(path)
    sizes = {"file://" + str(p): p.stat().st_size for p in paths}
    schema = StructType([StructField("x", SparkLong())])
    df = known_files_frame(spark, sizes, schema, {})
    assert df is not None, "Spark's internal file index is out of reach: read_table lists every file"
    assert sorted(df.inputFiles()) == sorted(sizes)
    public = spark.read.schema(schema).parquet(*sizes)
    assert sorted(r.x for r in df.collect()) == sorted(r.x for r in public.collect()) == list(range(30))
    assert df.filter("x >= 25").count() == 5
