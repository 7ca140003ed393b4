"""Writing data and delete files: independent readers, rolling, validation, local FS and S3."""

from __future__ import annotations

import datetime as dt
import decimal
import gc
import uuid
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import ArrowScan, PyArrowFileIO, parquet_file_to_data_file
from pyiceberg.manifest import DataFile as PyDataFile
from pyiceberg.manifest import FileFormat as PyFileFormat
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema as PySchema
from pyiceberg.table import FileScanTask
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import Record
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

from aioiceberg.errors import ValidationError
from aioiceberg.io import FileIO, LocalFileIO, MemoryFileIO, S3FileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.spec import values
from aioiceberg.spec.arrow import FIELD_ID_KEY
from aioiceberg.spec.manifest.data_file import DataFileContent, FileFormat
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import schema_to_json
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
    UUIDType,
)
from aioiceberg.write import (
    LocationProvider,
    ParquetOptions,
    data_files_from_parquet,
    write_data_files,
    write_equality_delete_file,
    write_position_delete_file,
)

pytestmark = pytest.mark.anyio

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "price", DecimalType(12, 3)),
    NestedField(4, "day", DateType()),
    NestedField(5, "at", TimestamptzType()),
    NestedField(6, "score", DoubleType()),
    NestedField(7, "uid", UUIDType()),
    NestedField(8, "blob", BinaryType()),
    NestedField(
        9, "loc", StructType(NestedField(10, "lat", DoubleType()), NestedField(11, "lon", DoubleType()))
    ),
    NestedField(12, "tags", ListType(13, StringType())),
    NestedField(14, "attrs", MapType(15, StringType(), 16, IntegerType())),
)


def _data(n: int, offset: int = 0) -> pa.Table:
    """User-shaped data: int32 ids, large strings, no field ids, columns in another order."""
    k = range(offset, offset + n)
    return pa.table(
        {
            "name": pa.array([f"name-{i % 50}" if i % 10 else None for i in k], pa.large_string()),
            "id": pa.array(list(k), pa.int32()),
            "price": pa.array([decimal.Decimal(i) / 1000 for i in k], pa.decimal128(10, 3)),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 5) for i in k]),
            "at": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i) for i in k]),
            "score": pa.array([float("nan") if i % 17 == 0 else i / 3 for i in k], pa.float32()),
            "uid": pa.array([uuid.UUID(int=i).bytes for i in k], pa.binary(16)),
            "blob": [bytes([i % 256]) * 3 for i in k],
            "loc": [{"lat": i / 10, "lon": -i / 10} if i % 7 else None for i in k],
            "tags": [[f"t{i % 3}", "x"] if i % 4 else None for i in k],
            "attrs": pa.array([[("a", i)] if i % 5 else None for i in k], pa.map_(pa.string(), pa.int32())),
        }
    )


DAY_SPEC = PartitionSpec.of(PartitionField((4,), 1000, parse_transform("identity"), "day"), spec_id=3)


def _py_metadata(location: str) -> Any:
    py_schema = PySchema.model_validate(schema_to_json(SCHEMA))
    md = new_table_metadata(py_schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {})
    # new_table_metadata assigns fresh ids; keep ours so the files' ids match.
    return md.model_copy(update={"schemas": [py_schema], "last_column_id": SCHEMA.highest_field_id})


async def test_written_files_read_back_in_pyarrow_duckdb_and_pyiceberg(tmp_path: Path) -> None:
    data = _data(500)
    files = await write_data_files(
        LocalFileIO().bind_runtime(default_runtime()),
        SCHEMA,
        DAY_SPEC,
        data,
        LocationProvider(str(tmp_path)),
        {},
        cpu_workers=2,
    )
    assert len(files) == 5
    assert sum(f.record_count for f in files) == 500
    expected = data.sort_by("id").column("id").to_pylist()
    got: list[int] = []
    for f in files:
        assert f.content == DataFileContent.DATA and f.file_format == FileFormat.PARQUET
        assert f.spec_id == 3
        path = Path(f.file_path)
        assert path.parent.name == f"day={values.format_date(f.partition[0])}"
        assert f.file_size_in_bytes == path.stat().st_size
        table = pq.read_table(path)
        assert table.schema.field("id").metadata[FIELD_ID_KEY] == b"1"
        assert table.schema.field("loc").type.field("lat").metadata[FIELD_ID_KEY] == b"10"
        assert not table.schema.field("id").nullable
        assert set(table.column("day").to_pylist()) == {values.days_to_date(f.partition[0])}
        got.extend(table.column("id").to_pylist())
        # DuckDB reads the same rows and sees the field ids.
        con = duckdb.connect()
        rows = con.execute(f"select count(*), sum(id), count(name) from read_parquet('{path}')").fetchone()
        assert rows == (
            f.record_count,
            sum(table.column("id").to_pylist()),
            len(table) - table.column("name").null_count,
        )
        ids = dict(con.execute(f"select name, field_id from parquet_schema('{path}')").fetchall())
        assert (ids["id"], ids["lat"], ids["element"], ids["key"], ids["value"]) == (1, 10, 13, 15, 16)
    assert sorted(got) == expected

    # PyIceberg reads the files through its own Arrow scan, with the table schema.
    md = _py_metadata(str(tmp_path))
    py_io = PyArrowFileIO()
    py_files = [
        PyDataFile.from_args(
            file_path=f.file_path,
            file_format=PyFileFormat.PARQUET,
            partition=Record(),
            record_count=f.record_count,
            file_size_in_bytes=f.file_size_in_bytes,
        )
        for f in files
    ]
    for df in py_files:
        df._spec_id = 0
    scan = ArrowScan(md, py_io, md.schema(), row_filter=_always_true())
    table = scan.to_table([FileScanTask(df) for df in py_files])
    assert sorted(table.column("id").to_pylist()) == expected
    assert table.num_rows == 500


def _always_true() -> Any:
    from pyiceberg.expressions import AlwaysTrue

    return AlwaysTrue()


async def test_data_file_metrics_match_pyiceberg_reading_the_same_file(tmp_path: Path) -> None:
    files = await write_data_files(
        LocalFileIO().bind_runtime(default_runtime()),
        SCHEMA,
        PartitionSpec(),
        _data(300),
        LocationProvider(str(tmp_path)),
        {},
    )
    [ours] = files
    theirs = parquet_file_to_data_file(PyArrowFileIO(), _py_metadata(str(tmp_path)), ours.file_path)
    assert ours.record_count == theirs.record_count == 300
    assert ours.file_size_in_bytes == theirs.file_size_in_bytes
    assert ours.column_sizes == theirs.column_sizes
    assert ours.value_counts == theirs.value_counts
    assert ours.null_value_counts == theirs.null_value_counts
    assert list(ours.split_offsets or ()) == theirs.split_offsets
    top_level = {f.field_id for f in SCHEMA.fields}
    assert {k: v for k, v in (ours.lower_bounds or {}).items() if k in top_level} == theirs.lower_bounds
    assert {k: v for k, v in (ours.upper_bounds or {}).items() if k in top_level} == theirs.upper_bounds
    assert ours.nan_value_counts == {6: 18, 10: 0, 11: 0}  # 0, 17, ..., 289 are NaN scores


async def test_small_target_file_size_rolls_files(tmp_path: Path) -> None:
    target = 40_000
    props = {"write.target-file-size-bytes": str(target), "write.parquet.compression-codec": "snappy"}
    batches = _data(20_000).to_batches(max_chunksize=1000)
    files = await write_data_files(
        LocalFileIO().bind_runtime(default_runtime()),
        SCHEMA,
        PartitionSpec(),
        batches,
        LocationProvider(str(tmp_path)),
        props,
    )
    assert len(files) >= 5
    assert sum(f.record_count for f in files) == 20_000
    assert len({f.file_path for f in files}) == len(files)
    sizes = [f.file_size_in_bytes for f in files]
    # Rolling works from an estimate of encoded bytes per row: files land near the target.
    assert max(sizes) <= target * 1.5
    assert sum(sizes[:-1]) / len(sizes[:-1]) >= target * 0.6
    meta = pq.read_metadata(files[0].file_path)
    assert meta.row_group(0).column(0).compression == "SNAPPY"
    ids = sorted(
        i for f in files for i in pq.read_table(f.file_path, columns=["id"]).column("id").to_pylist()
    )
    assert ids == list(range(20_000))


async def test_defaults_are_zstd_and_row_groups_follow_the_row_limit(tmp_path: Path) -> None:
    props = {"write.parquet.row-group-limit": "100"}
    [f] = await write_data_files(
        LocalFileIO().bind_runtime(default_runtime()),
        SCHEMA,
        PartitionSpec(),
        _data(450),
        LocationProvider(str(tmp_path)),
        props,
    )
    meta = pq.read_metadata(f.file_path)
    assert meta.num_row_groups == 5
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert f.split_offsets is not None and len(f.split_offsets) == 5
    assert ParquetOptions().compression == "zstd"


async def test_async_iterables_of_batches_are_accepted() -> None:
    async def gen() -> AsyncIterator[pa.RecordBatch]:
        for i in range(3):
            for b in _data(100, offset=i * 100).to_batches():
                yield b

    io = MemoryFileIO().bind_runtime(default_runtime())
    files = await write_data_files(io, SCHEMA, DAY_SPEC, gen(), LocationProvider("memory://w/t"), {})
    assert sum(f.record_count for f in files) == 300
    assert len(files) == 5
    for f in files:
        assert len(await io.read(f.file_path)) == f.file_size_in_bytes


async def test_a_write_that_fails_or_is_cancelled_closes_its_partition_streams() -> None:
    """Each partition's rows go to its worker through a stream pair. A write whose input fails
    after some partitions have started, or that is cancelled, must close them all (one left
    to the collector warns: an error under ``-W error``) and delete what it wrote."""

    class Broken(Exception):
        pass

    async def failing() -> AsyncIterator[pa.RecordBatch]:
        for b in _data(100).to_batches():
            yield b
        raise Broken("the source failed")

    async def endless() -> AsyncIterator[pa.RecordBatch]:
        i = 0
        while True:
            for b in _data(100, offset=i * 100).to_batches():
                yield b
            i += 1
            await anyio.sleep(0)

    io = MemoryFileIO().bind_runtime(default_runtime())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Broken):
            await write_data_files(io, SCHEMA, DAY_SPEC, failing(), LocationProvider("memory://f/t"), {})
        for seconds in (0, 0.001, 0.005, 0.02):
            with anyio.move_on_after(seconds):
                await write_data_files(io, SCHEMA, DAY_SPEC, endless(), LocationProvider("memory://c/t"), {})
        gc.collect()
        await anyio.sleep(0.01)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    assert [info async for info in io.list("memory://f/t")] == []  # nothing left of the failed write


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pa.table({"name": ["a"]}), "required column 'id' is missing"),
        (pa.table({"id": pa.array([1, None])}), "required column 'id' has 1 nulls"),
        (pa.table({"id": [1], "extra": [2]}), "'extra'"),
        (pa.table({"id": [1], "name": [3]}), "column 'name' is long"),
        (pa.table({"id": [1], "loc": [{"lat": 1.0, "alt": 2.0}]}), "'loc.alt'"),
        (pa.table({"id": [1.5]}), "column 'id' is double"),
        (pa.table({"id": [1], "at": pa.array([1], pa.timestamp("us"))}), "column 'at' is timestamp"),
        (pa.table({"id": [1], "at": pa.array([1], pa.timestamp("ns", "UTC"))}), "column 'at'"),
    ],
    ids=[
        "missing-required",
        "null-in-required",
        "extra",
        "bad-type",
        "extra-nested",
        "narrowing",
        "tz",
        "ns",
    ],
)
async def test_invalid_data_is_refused_before_anything_is_written(data: pa.Table, message: str) -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    with pytest.raises(ValidationError, match=message):
        await write_data_files(io, SCHEMA, PartitionSpec(), data, LocationProvider("memory://v/t"), {})
    assert [o async for o in io.list("memory://v/")] == []


async def test_required_nested_fields_may_be_null_only_under_a_null_parent() -> None:
    schema = Schema(
        NestedField(1, "s", StructType(NestedField(2, "r", LongType(), required=True))),
    )
    io = MemoryFileIO().bind_runtime(default_runtime())
    ok = pa.table({"s": pa.array([{"r": 1}, None], pa.struct([pa.field("r", pa.int64())]))})
    files = await write_data_files(io, schema, PartitionSpec(), ok, LocationProvider("memory://n/t"), {})
    assert files[0].record_count == 2
    bad = pa.table({"s": pa.array([{"r": None}], pa.struct([pa.field("r", pa.int64())]))})
    with pytest.raises(ValidationError, match=r"'s\.r' has 1 nulls"):
        await write_data_files(io, schema, PartitionSpec(), bad, LocationProvider("memory://n/t"), {})


async def test_promotions_and_missing_optional_columns_are_filled() -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int16()),
            "name": pa.array(["a", "b"]).dictionary_encode(),
            "at": pa.array([1_000, 2_000], pa.timestamp("ns", "Europe/Paris")),  # whole micros
            "score": pa.array([1.0, 2.0], pa.float32()),
        }
    )
    [f] = await write_data_files(io, SCHEMA, PartitionSpec(), data, LocationProvider("memory://p/t"), {})
    table = pq.read_table(pa.BufferReader(await io.read(f.file_path)))
    assert table.column("id").type == pa.int64()
    assert table.column("at").to_pylist()[0] == dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)
    assert table.column("blob").null_count == 2
    assert f.null_value_counts is not None and f.null_value_counts[8] == 2


async def test_position_delete_files_are_sorted_and_reference_their_data_file() -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    provider = LocationProvider("memory://d/t")
    deletes = pa.table(
        {"file_path": ["s3://x/b.parquet", "s3://x/a.parquet", "s3://x/a.parquet"], "pos": [4, 9, 2]}
    )
    f = await write_position_delete_file(
        io, provider, deletes, table_schema=SCHEMA, spec=DAY_SPEC, partition=(19723,)
    )
    assert f.content == DataFileContent.POSITION_DELETES and f.record_count == 3
    assert "/day=2024-01-01/" in f.file_path and f.spec_id == 3
    table = pq.read_table(pa.BufferReader(await io.read(f.file_path)))
    assert table.to_pylist() == [
        {"file_path": "s3://x/a.parquet", "pos": 2},
        {"file_path": "s3://x/a.parquet", "pos": 9},
        {"file_path": "s3://x/b.parquet", "pos": 4},
    ]
    assert table.schema.field("file_path").metadata[FIELD_ID_KEY] == b"2147483546"
    assert table.schema.field("pos").metadata[FIELD_ID_KEY] == b"2147483545"
    assert f.lower_bounds is not None and f.upper_bounds is not None
    assert f.upper_bounds[2147483546] == b"s3://x/b.parquet"  # full, not truncated to 16 chars
    assert f.referenced_data_file is None
    single = await write_position_delete_file(
        io, provider, deletes.slice(1), table_schema=SCHEMA, spec=DAY_SPEC, partition=(19723,)
    )
    assert single.referenced_data_file == "s3://x/a.parquet"


async def test_equality_delete_files_hold_the_equality_columns() -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    rows = pa.table({"id": [3, 1], "name": ["c", "a"], "score": [1.0, 2.0]})
    f = await write_equality_delete_file(
        io, LocationProvider("memory://e/t"), rows, [1, 2], table_schema=SCHEMA, spec=PartitionSpec()
    )
    assert f.content == DataFileContent.EQUALITY_DELETES and f.equality_ids == (1, 2)
    table = pq.read_table(pa.BufferReader(await io.read(f.file_path)))
    assert table.column_names == ["id", "name"]
    assert table.schema.field("name").metadata[FIELD_ID_KEY] == b"2"
    with pytest.raises(ValidationError):
        await write_equality_delete_file(
            io, LocationProvider("memory://e/t"), rows, [12], table_schema=SCHEMA, spec=PartitionSpec()
        )


async def _check_write_then_add(io: FileIO, base: str) -> None:
    files = await write_data_files(
        io, SCHEMA, DAY_SPEC, _data(200), LocationProvider(base), {}, io_concurrency=4
    )
    assert len(files) == 5
    added = await data_files_from_parquet(io, [f.file_path for f in files], SCHEMA, DAY_SPEC, {})
    for ours, again in zip(files, added, strict=True):
        assert again.partition == ours.partition
        assert again.record_count == ours.record_count
        assert again.file_size_in_bytes == ours.file_size_in_bytes
        assert again.lower_bounds == ours.lower_bounds and again.value_counts == ours.value_counts


async def test_write_and_add_files_on_the_local_file_system(tmp_path: Path) -> None:
    await _check_write_then_add(LocalFileIO().bind_runtime(default_runtime()), tmp_path.as_uri())


async def test_write_and_add_files_on_moto_s3(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    io = S3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    try:
        await _check_write_then_add(io, f"s3://{bucket}/warehouse/t")
    finally:
        await io.aclose()


async def test_add_files_infers_partitions_from_bounds_or_refuses(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    one_day = _data(10).filter(pa.compute.equal(pa.compute.field("day"), pa.scalar(dt.date(2024, 1, 2))))
    [f] = await write_data_files(io, SCHEMA, PartitionSpec(), one_day, LocationProvider(str(tmp_path)), {})
    [added] = await data_files_from_parquet(io, [f.file_path], SCHEMA, DAY_SPEC, {})
    assert added.partition == (values.date_to_days(dt.date(2024, 1, 2)),)
    month = PartitionSpec.of(PartitionField((5,), 1000, parse_transform("month"), "at_month"))
    [by_month] = await data_files_from_parquet(io, [f.file_path], SCHEMA, month, {})
    assert by_month.partition == (648,)  # 2024-01

    [mixed] = await write_data_files(
        io, SCHEMA, PartitionSpec(), _data(10), LocationProvider(str(tmp_path)), {}
    )
    with pytest.raises(ValidationError, match="single partition"):
        await data_files_from_parquet(io, [mixed.file_path], SCHEMA, DAY_SPEC, {})


async def test_add_files_needs_field_ids_or_a_name_mapping(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), path)
    io = LocalFileIO().bind_runtime(default_runtime())
    with pytest.raises(ValidationError, match="no field id"):
        await data_files_from_parquet(io, [str(path)], SCHEMA, PartitionSpec(), {})
    mapping = '[{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["name"]}]'
    [f] = await data_files_from_parquet(
        io, [str(path)], SCHEMA, PartitionSpec(), {"schema.name-mapping.default": mapping}
    )
    assert f.record_count == 2 and f.lower_bounds is not None
    assert values.from_bytes(f.lower_bounds[1], LongType()) == 1


class _SlowUploads(LocalFileIO):
    """A local store whose uploads take a while, counting how many run at once."""

    def __init__(self) -> None:
        super().__init__(fsync=False)
        self.running = 0
        self.most = 0

    async def write(self, location: str, data: bytes) -> Any:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await anyio.sleep(0.02)
            return await super().write(location, data)
        finally:
            self.running -= 1


@pytest.mark.parametrize(("knob", "at_most"), [(1, 1), (3, 3)])
async def test_uploads_at_once_are_the_runtimes_knob(tmp_path: Path, knob: int, at_most: int) -> None:
    from aioiceberg.runtime import Runtime

    io = _SlowUploads().bind_runtime(Runtime(write_io_concurrency=knob, write_cpu_workers=2))
    files = await write_data_files(io, SCHEMA, DAY_SPEC, _data(500), LocationProvider(str(tmp_path)), {})
    assert len(files) == 5
    assert io.most == at_most  # five uploads of 20 ms: the knob, and nothing else, bounds them


def test_runtime_knobs_refuse_bad_values() -> None:
    from aioiceberg.runtime import Runtime

    for bad in (0, -1, True, "4"):
        with pytest.raises(ValidationError, match="write_io_concurrency"):
            Runtime(write_io_concurrency=bad)  # type: ignore[arg-type]
