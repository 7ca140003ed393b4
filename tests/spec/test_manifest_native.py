"""The compiled manifest decoder (``native/``) against the polars path it replaces.

Both must give the same Arrow table (``Table.equals``: schema, types, nullability, values)
for manifests written by us (every partition type and transform, v1-v3, data and delete
manifests, with and without stats), by PyIceberg 0.12, and in Java's 64 KB blocks and
PyIceberg's one-entry blocks. Where polars cannot read a manifest at all (v1 and some
partition types), the values are checked against fastavro's records instead. Damaged bytes
(every truncation point, random byte flips) give ``CorruptFileError`` naming the manifest or
the table polars gives, never a crash. A plan is the same with the decoder forced off.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import random
import subprocess
import sys
import textwrap
import uuid
import warnings
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import fastavro.write
import pyarrow as pa
import pytest

from aioiceberg import sync
from aioiceberg.errors import CorruptFileError
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.manifest.avro_blocks import read_long
from aioiceberg.spec.manifest.columnar import _header, _to_arrow, avro_layout, open_columnar
from aioiceberg.spec.manifest.columnar_list import read_manifest_list_columnar
from aioiceberg.spec.manifest.entry_rows import STAT_FIELDS
from aioiceberg.spec.manifest.native_decode import (
    decode_native,
    decode_native_joined,
    native_available,
    read_header_native,
)
from aioiceberg.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import to_bytes

pytestmark = pytest.mark.skipif(not native_available(), reason="built without a Rust toolchain (no cargo)")

LOCATION = "s3://bucket/wh/db/t/metadata/native-m0.avro"

# -- comparisons -----------------------------------------------------------------------------


def _polars(data: bytes) -> pa.Table | Exception:
    try:
        return _to_arrow(data, native=False)
    except Exception as e:  # polars' own errors: the fastavro reader decides in the planner
        return e
    except BaseException as e:  # polars panics on some damaged schemas (a BaseException)
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        return Exception(repr(e))


def _native(data: bytes) -> pa.Table:
    table = decode_native(data, LOCATION)
    assert table is not None, "the native decoder declined a schema it should handle"
    return table


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables; NaN (unequal to itself in ``Table.equals``) compared by its repr."""
    return a.schema == b.schema and (a.equals(b) or repr(a.to_pylist()) == repr(b.to_pylist()))


def _plain(value: Any) -> Any:
    """fastavro's and Arrow's Python values in one convention."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def _records(data: bytes) -> list[Any]:
    records: list[Any] = _plain(list(fastavro.reader(io.BytesIO(data))))
    return records


def _agree(data: bytes) -> str:
    """Native and polars give the same table ("polars"), or, where polars cannot read the
    manifest, native gives fastavro's records ("fastavro")."""
    native = _native(data)
    want = _polars(data)
    if isinstance(want, pa.Table):
        assert _same(native, want), (native.schema, want.schema)
        return "polars"
    assert _plain(native.to_pylist()) == _records(data)
    return "fastavro"


# -- manifests of every partition type and transform --------------------------------------------

SCHEMA = Schema(
    NestedField(1, "b", BooleanType()),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "l", LongType(), required=True),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "s", StringType()),
    NestedField(7, "bin", BinaryType()),
    NestedField(8, "dt", DateType()),
    NestedField(9, "ts", TimestampType()),
    NestedField(10, "tz", TimestamptzType()),
    NestedField(11, "t", TimeType()),
    NestedField(12, "u", UUIDType()),
    NestedField(13, "dec", DecimalType(9, 2)),
    NestedField(14, "wide", DecimalType(30, 4)),
    NestedField(15, "fx", FixedType(4)),
    NestedField(16, "ns", TimestampNanoType()),
    schema_id=1,
)
U = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
ROW = {
    1: True,
    2: -5,
    3: 1 << 40,
    4: 2.5,
    5: -0.0,
    6: "é-abc",
    7: b"\x00\xff\x10",
    8: 19000,
    9: 1_700_000_000_123_456,
    10: -7,
    11: 3_600_000_001,
    12: U,
    13: Decimal("-12.34"),
    14: Decimal("123456789012345678901234.5678"),
    15: b"abcd",
    16: 1_700_000_000_123_456_789,
}
OTHER = {**ROW, 1: False, 4: float("nan"), 5: 1e300, 6: "", 7: b"", 13: Decimal("0.01"), 14: Decimal("-1")}
# (field id, transform) pairs: identity on every type, and each other transform where it applies
TRANSFORMS = [(i, "identity") for i in ROW] + [
    (3, "bucket[16]"),
    (6, "bucket[8]"),
    (12, "bucket[4]"),
    (13, "bucket[4]"),
    (2, "truncate[10]"),
    (6, "truncate[3]"),
    (7, "truncate[2]"),
    (13, "truncate[100]"),
    (8, "year"),
    (9, "month"),
    (10, "day"),
    (9, "hour"),
    (16, "day"),
    (6, "void"),
]


def _spec(pairs: list[tuple[int, str]]) -> PartitionSpec:
    return PartitionSpec(
        0,
        tuple(
            PartitionField((fid,), 1000 + k, parse_transform(t), f"p{k}_{t.split('[')[0]}")
            for k, (fid, t) in enumerate(pairs)
        ),
    )


def _partition(spec: PartitionSpec, row: dict[int, Any] | None) -> tuple[Any, ...]:
    if row is None:
        return (None,) * len(spec.fields)
    out = []
    for f in spec.fields:
        source = SCHEMA.find_field(f.source_ids[0])
        out.append(f.transform.apply(row[source.field_id], source.field_type))
    return tuple(out)


def _data_file(k: int, partition: tuple[Any, ...], stats: bool, **kw: Any) -> DataFile:
    if not stats:
        return DataFile(
            DataFileContent.DATA, f"s3://b/data/{k}.parquet", FileFormat.PARQUET, partition, 10, 99, **kw
        )
    return DataFile(
        kw.pop("content", DataFileContent.DATA),
        f"s3://b/data/{k}-é.parquet",
        FileFormat.PARQUET if k % 2 else FileFormat.AVRO,
        partition,
        10 + k,
        1000 + k,
        column_sizes={1: 50 + k, 3: 60},
        value_counts={1: 10 + k, 3: 10},
        null_value_counts={1: 0, 3: k},
        nan_value_counts={4: k % 2} if k % 3 else {},
        lower_bounds={3: to_bytes(k, LongType()), 6: b"a"},
        upper_bounds={3: to_bytes(k + 100, LongType()), 6: b"z" * (k % 5)},
        key_metadata=b"\x01\x02" if k % 2 else None,
        split_offsets=(4, 400) if k % 2 else None,
        sort_order_id=0 if k % 2 else None,
        **kw,
    )


def _entries(spec: PartitionSpec, format_version: int, stats: bool = True, n: int = 6) -> list[ManifestEntry]:
    rows: list[dict[int, Any] | None] = [ROW, OTHER, None]
    out = []
    for k in range(n):
        status = list(ManifestEntryStatus)[k % 3]
        seq = None if status == ManifestEntryStatus.ADDED or format_version == 1 else k
        snapshot = None if status == ManifestEntryStatus.ADDED else 40 + k
        out.append(
            ManifestEntry(status, snapshot, seq, seq, _data_file(k, _partition(spec, rows[k % 3]), stats))
        )
    return out


def _write(spec: PartitionSpec, format_version: int, codec: str = "deflate", stats: bool = True) -> bytes:
    entries = _entries(spec, format_version, stats)
    return write_manifest(entries, spec, SCHEMA, format_version, 7, codec=codec, manifest_path=LOCATION)[0]  # type: ignore[arg-type]


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_every_partition_type_and_transform_decodes_as_polars_or_fastavro_reads_it(
    format_version: int, codec: str
) -> None:
    verdicts = []
    for pair in TRANSFORMS:  # one partition field at a time: polars reads most of them alone
        verdicts.append(_agree(_write(_spec([pair]), format_version, codec)))
    for stats in (True, False):  # every field at once
        _agree(_write(_spec(TRANSFORMS), format_version, codec, stats))
    if format_version > 1:
        assert verdicts.count("polars") >= len(TRANSFORMS) - 2, verdicts
    _agree(_write(UNPARTITIONED, format_version, codec))


def test_the_columnar_path_types_decode_exactly_as_polars_does() -> None:
    """The partition types the columnar path takes today, all in one manifest, v2 and v3."""
    pairs = [(i, "identity") for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)] + [(3, "bucket[16]"), (9, "day")]
    for format_version in (2, 3):
        for stats in (True, False):
            data = _write(_spec(pairs), format_version, stats=stats)
            assert _agree(data) == "polars"
            assert open_columnar(data) is not None


def test_delete_manifests_and_v3_deletion_vectors() -> None:
    spec = _spec([(6, "identity"), (3, "bucket[4]")])
    for format_version in (2, 3):
        entries = [
            ManifestEntry(
                ManifestEntryStatus.ADDED,
                None,
                None,
                None,
                _data_file(0, _partition(spec, ROW), True, content=DataFileContent.POSITION_DELETES),
            ),
            ManifestEntry(
                ManifestEntryStatus.EXISTING,
                5,
                3,
                3,
                _data_file(
                    1,
                    _partition(spec, OTHER),
                    True,
                    content=DataFileContent.EQUALITY_DELETES,
                    equality_ids=(1, 3),
                ),
            ),
        ]
        if format_version == 3:
            dv = DataFile(
                DataFileContent.POSITION_DELETES,
                "s3://b/data/dv.puffin",
                FileFormat.PUFFIN,
                _partition(spec, None),
                3,
                500,
                referenced_data_file="s3://b/data/1.parquet",
                content_offset=4,
                content_size_in_bytes=40,
            )
            entries.append(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, dv))
        data, _ = write_manifest(
            entries, spec, SCHEMA, format_version, 5, ManifestContent.DELETES, manifest_path=LOCATION
        )
        assert _agree(data) == "polars"


def test_an_empty_manifest_gives_an_empty_table_of_the_same_schema() -> None:
    for format_version in (2, 3):
        data = write_manifest(
            [], _spec([(6, "identity")]), SCHEMA, format_version, 1, manifest_path=LOCATION
        )[0]
        assert _agree(data) == "polars"
        assert _native(data).num_rows == 0


AVRO_TYPES: list[tuple[Any, Any]] = [
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, Decimal("-1.23")),
    (
        {"type": "fixed", "name": "d16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 3},
        Decimal("-9.5"),
    ),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
    ),
    ({"type": "int", "logicalType": "time-millis"}, dt.time(1, 2, 3, 4000)),
    ({"type": "long", "logicalType": "time-micros"}, dt.time(23, 59, 59, 999999)),
    ({"type": "string", "logicalType": "uuid"}, str(U)),
    ({"type": "fixed", "name": "u16", "size": 16, "logicalType": "uuid"}, U.bytes),
    ({"type": "long", "logicalType": "timestamp-nanos"}, 7),
    ({"type": "array", "items": ["null", "long"]}, [1, None, -3]),
    ({"type": "record", "name": "inner", "fields": [{"name": "a", "type": ["string", "null"]}]}, {"a": "x"}),
]


@pytest.mark.parametrize(("avro", "value"), AVRO_TYPES, ids=[str(i) for i in range(len(AVRO_TYPES))])
def test_each_avro_type_decodes_as_polars_reads_it(avro: Any, value: Any) -> None:
    """Logical types, unions with null second, arrays of nullable items, nested records: the
    types polars gives, nulls where the union says so."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "nullable", "type": ["null", avro]},
            {"name": "null_second", "type": [dict(avro, name="again") if "name" in avro else avro, "null"]},
        ],
    }
    rows = [{"nullable": value, "null_second": value}, {"nullable": None, "null_second": None}] * 3
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), rows, codec="deflate", sync_interval=40)
    assert _agree(out.getvalue()) == "polars"


# -- block shapes ------------------------------------------------------------------------------


def _reblocked(data: bytes, per_block: int | None) -> bytes:
    """``data``'s records re-written (deflate) in Java's 64 KB blocks (None) or ``per_block``
    records a block (1: as PyIceberg writes)."""
    reader = fastavro.reader(io.BytesIO(data))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    out = io.BytesIO()
    interval = 64_000 if per_block is None else 1 << 30
    writer = fastavro.write.Writer(out, schema, "deflate", interval, metadata, validator=False)
    for i, record in enumerate(reader, 1):
        writer.write(record)
        if per_block is not None and i % per_block == 0:
            writer.flush()
    writer.flush()
    return out.getvalue()


@pytest.mark.parametrize("per_block", [None, 1, 7])
def test_java_and_pyiceberg_block_shapes(per_block: int | None) -> None:
    spec = _spec([(6, "identity"), (3, "bucket[16]"), (9, "day")])
    entries = [e for k in range(60) for e in _entries(spec, 2, n=6)[k % 6 : k % 6 + 1]]
    entries = [
        dataclasses.replace(e, data_file=dataclasses.replace(e.data_file, file_path=f"s3://b/{k}.parquet"))
        for k, e in enumerate(entries)
    ]
    data = write_manifest(entries, spec, SCHEMA, 2, 7, manifest_path=LOCATION)[0]
    shaped = _reblocked(data, per_block)
    assert _agree(shaped) == "polars"
    assert _native(shaped).equals(_native(data))


# -- PyIceberg 0.12 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pyiceberg_manifests(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, bytes]]:
    """Every manifest (and, as version 0, every manifest list) of partitioned v1 and v2
    PyIceberg tables (appends, then a delete that rewrites files)."""
    pytest.importorskip("pyiceberg_core", reason="PyIceberg needs pyiceberg-core for bucket/day")
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField as PyField
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
    from pyiceberg.types import DoubleType as PyDouble
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyNested
    from pyiceberg.types import StringType as PyString
    from pyiceberg.types import TimestamptzType as PyTimestamptz

    wh = tmp_path_factory.mktemp("native_wh")
    catalog = SqlCatalog("n", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("db")
    schema = PySchema(
        PyNested(1, "id", PyLong(), required=False),
        PyNested(2, "region", PyString(), required=False),
        PyNested(3, "ts", PyTimestamptz(), required=False),
        PyNested(4, "x", PyDouble(), required=False),
    )
    spec = PySpec(
        PyField(2, 1000, IdentityTransform(), "region"),
        PyField(1, 1001, BucketTransform(8), "b"),
        PyField(3, 1002, DayTransform(), "day"),
    )
    found = []
    for version in (1, 2):
        table = catalog.create_table(
            f"db.t{version}", schema, partition_spec=spec, properties={"format-version": str(version)}
        )
        for seed in range(2):
            ids = list(range(seed * 60, seed * 60 + 60))
            table.append(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "region": pa.array([["eu", "us", None][i % 3] for i in ids], pa.string()),
                        "ts": pa.array(
                            [1_700_000_000_000_000 + i * 3_600_000_000 for i in ids],
                            pa.timestamp("us", "UTC"),
                        ),
                        "x": pa.array([float("nan") if i % 7 == 0 else i / 3 for i in ids], pa.float64()),
                    }
                )
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table.delete("id < 10")
        for snapshot in table.snapshots():
            listed = Path(snapshot.manifest_list.removeprefix("file://")).read_bytes()
            found.append((0, listed))
            for mf in read_manifest_list(listed):
                found.append((version, Path(mf.manifest_path.removeprefix("file://")).read_bytes()))
    catalog.close()
    return found


def test_pyiceberg_manifests_decode_as_polars_reads_them(
    pyiceberg_manifests: list[tuple[int, bytes]],
) -> None:
    by: dict[int, set[str]] = {0: set(), 1: set(), 2: set()}
    for version, data in pyiceberg_manifests:
        by[version].add(_list_agree(data) if version == 0 else _agree(data))
    assert by[2] == {"polars"} and by[0] == {"polars"}, by
    assert by[1], by


# -- manifest lists ------------------------------------------------------------------------------


def _list_agree(data: bytes) -> str:
    """A manifest list: the native table is polars' (as the list reader called it, on the
    original blocks), and the columnar list reader builds the rows fastavro's does."""
    pl = pytest.importorskip("polars")
    assert _same(_native(data), pl.read_avro(io.BytesIO(data)).to_arrow())
    assert read_manifest_list_columnar(data, min_rows=0) == read_manifest_list(data)
    return "polars"


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_our_manifest_lists_decode_as_polars_reads_them(format_version: int) -> None:
    manifests = [
        ManifestFile(
            f"s3://b/metadata/m{k}.avro",
            1000 + k,
            k % 3,
            ManifestContent.DELETES if format_version > 1 and k % 4 == 3 else ManifestContent.DATA,
            None if k % 2 else k,
            None if k % 2 else k,
            7 if k % 2 else 3,
            added_files_count=k,
            existing_files_count=0,
            deleted_files_count=1,
            added_rows_count=k * 10,
            existing_rows_count=0,
            deleted_rows_count=5,
            partitions=(
                PartitionFieldSummary(k % 2 == 0, None if k % 3 else False, to_bytes(k, LongType()), None),
                PartitionFieldSummary(False, True, b"a", b"z" * (k % 4)),
            ),
            key_metadata=b"\x01" if k % 5 == 0 else None,
        )
        for k in range(300)
    ]
    if format_version == 1:
        manifests = [
            dataclasses.replace(
                m, content=ManifestContent.DATA, sequence_number=None, min_sequence_number=None
            )
            for m in manifests
        ]
    data = write_manifest_list(
        manifests, format_version, 7, 6, 9, first_row_id=100 if format_version == 3 else None
    )
    assert _list_agree(data) == "polars"


# -- damaged bytes -------------------------------------------------------------------------------


def _hostile(data: bytes) -> str:
    """The native decoder on damaged ``data``: CorruptFileError naming the manifest, or the
    table polars gives; never anything else."""
    try:
        got = decode_native(data, LOCATION)
    except CorruptFileError as e:
        assert LOCATION in str(e)
        return "corrupt"
    if got is None:
        return "declined"  # a damaged schema naming a type it does not handle: polars decides
    want = _polars(data)
    assert isinstance(want, pa.Table), f"native read what polars refuses: {want!r}"
    assert _same(got, want)
    return "equal"


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_every_truncation_point_is_corrupt_or_equal(codec: str) -> None:
    data = _write(_spec([(6, "identity"), (3, "bucket[16]")]), 2, codec)
    seen = {_hostile(data[:cut]) for cut in range(len(data))}
    assert "corrupt" in seen
    assert _hostile(data) == "equal"


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_random_byte_flips_are_corrupt_or_equal(codec: str) -> None:
    rng = random.Random(33)
    data = _write(_spec([(6, "identity"), (3, "bucket[16]"), (9, "day")]), 3, codec)
    seen: dict[str, int] = {}
    for _ in range(400):
        damaged = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 5))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        verdict = _hostile(bytes(damaged))
        seen[verdict] = seen.get(verdict, 0) + 1
    assert seen.get("corrupt", 0) > 0, seen


def test_counts_and_sizes_out_of_range_are_corrupt() -> None:
    data = _write(_spec([(6, "identity")]), 2, "null")
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.metadata
    for junk in (b"\xff" * 12, b"\x80" * 11, b"\x01\x02", b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00"):
        with pytest.raises(CorruptFileError, match="native-m0"):
            decode_native(data + junk, LOCATION)  # a block after the last: count/size nonsense
    with pytest.raises(CorruptFileError):
        decode_native(b"not avro at all", LOCATION)
    with pytest.raises(CorruptFileError):
        decode_native(b"", LOCATION)


def test_a_schema_type_it_does_not_decode_leaves_the_manifest_to_polars() -> None:
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int"},
            {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A", "B"]}},
        ],
    }
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [{"status": 1, "kind": "B"}])
    assert decode_native(out.getvalue(), LOCATION) is None


# -- a plan with the decoder on and off ----------------------------------------------------------


def test_plans_are_the_same_with_the_native_decoder_on_and_off(tmp_path: Path) -> None:
    with sync.connect(str(tmp_path / "wh")) as catalog:
        schema = pa.schema(
            [pa.field("id", pa.int64()), pa.field("cat", pa.string()), pa.field("x", pa.float64())]
        )
        table = catalog.create_table(
            "db.t", schema=schema, format_version=3, partition_by=["cat", "bucket(4, id)"]
        )
        for seed in range(4):
            ids = range(seed * 200, seed * 200 + 200)
            table.append(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "cat": pa.array([f"c{i % 5}" for i in ids], pa.string()),
                        "x": pa.array([float(i) for i in ids], pa.float64()),
                    },
                    schema=schema,
                )
            )
        for text in ("", "id < 300", "cat = 'c2' AND x > 100.5", "id IN (5, 405, 799) OR cat = 'c4'"):
            plans = []
            for native in (True, False):
                scan = table.scan(
                    row_filter=text,
                    native_decoder=native,
                    cache=ManifestCache(),
                    manifest_list_cache=ManifestListCache(),
                    columnar_min_entries=0,
                )
                plans.append(sorted((t.file.file_path, t.file.record_count) for t in scan.plan_files()))
                assert scan.metrics.decoded_columnar == scan.metrics.manifests_read > 0, repr(scan.metrics)
            assert plans[0] == plans[1] and plans[0], text


def test_without_the_extension_manifests_decode_through_polars(tmp_path: Path) -> None:
    """An install without a Rust toolchain: the module cannot be imported (as when it was never
    built), and the columnar path decodes with polars, to the same table."""
    data = _write(_spec([(6, "identity"), (3, "bucket[16]")]), 2)
    (tmp_path / "m.avro").write_bytes(data)
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["aioiceberg._manifest_native"] = None  # an import of it fails, as when absent
        from pathlib import Path
        import pyarrow as pa
        from aioiceberg.spec.manifest.columnar import _to_arrow, columnar_available, open_columnar
        from aioiceberg.spec.manifest.native_decode import decode_native, native_available
        data = Path({str(tmp_path / "m.avro")!r}).read_bytes()
        assert not native_available() and columnar_available()
        assert decode_native(data) is None
        assert open_columnar(data) is not None
        table = _to_arrow(data)
        with pa.OSFile({str(tmp_path / "t.arrow")!r}, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    with pa.OSFile(str(tmp_path / "t.arrow")) as f:
        via_polars = pa.ipc.open_file(f).read_all()
    assert via_polars.equals(_native(data))


# -- the header, read by the compiled decoder -----------------------------------------------------


def _long(n: int) -> bytes:
    """An Avro long (zigzag varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if not z:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _rewritten(data: bytes, change: dict[str, bytes]) -> bytes:
    """``data`` with its header metadata changed as ``change`` says (its blocks kept)."""
    layout = avro_layout(data)
    assert layout is not None
    meta = {k: v.encode() for k, v in fastavro.reader(io.BytesIO(data)).metadata.items()}
    meta.update(change)
    parts = [b"Obj\x01", _long(len(meta))]
    for key, value in meta.items():
        parts += [_long(len(key)), key.encode(), _long(len(value)), value]
    parts += [_long(0), layout.sync, data[len(layout.header) + 16 :]]
    return b"".join(parts)


def _header_error(data: bytes, *, native: bool) -> CorruptFileError:
    with pytest.raises(CorruptFileError) as caught:
        open_columnar(data, None, LOCATION, native=native)
    assert LOCATION in str(caught.value)
    return caught.value


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_the_native_header_reads_what_the_fastavro_reader_does(format_version: int, codec: str) -> None:
    data = _write(_spec([(6, "identity"), (3, "bucket[16]"), (9, "day")]), format_version, codec)
    properties = read_header_native(data, LOCATION)
    assert properties == fastavro.reader(io.BytesIO(data)).metadata
    assert _header(data, None, LOCATION, True) == _header(data, None, LOCATION, False)


def test_a_bad_magic_is_the_same_error_on_both_paths() -> None:
    data = b"Obj\x02" + _write(_spec([(6, "identity")]), 2)[4:]
    native, fastavro_path = _header_error(data, native=True), _header_error(data, native=False)
    assert "bad magic" in str(native)
    assert str(native) == str(fastavro_path)


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_a_truncated_header_is_corrupt_on_both_paths(codec: str) -> None:
    data = _write(_spec([(6, "identity"), (3, "bucket[16]")]), 2, codec)
    layout = avro_layout(data)
    assert layout is not None
    for cut in range(len(layout.header) + 16):  # through the sync marker
        _header_error(data[:cut], native=True)
        _header_error(data[:cut], native=False)


def test_a_bad_metadata_map_is_corrupt_on_both_paths() -> None:
    data = _write(_spec([(6, "identity")]), 2)
    layout = avro_layout(data)
    assert layout is not None
    body = data[len(layout.header) :]
    damaged = [
        b"Obj\x01" + _long(5) + _long(4) + b"avro" + body,  # more pairs than the map holds
        b"Obj\x01" + _long(1) + _long(-3) + b"key" + _long(0) + _long(0) + body,  # negative length
        b"Obj\x01" + _long(1) + _long(10**6) + b"key" + body,  # a key past the end
        _rewritten(data, {"schema-id": b"\xff\xfe"}),  # a value that is not UTF-8
        _rewritten(data, {"avro.schema": b"{not json"}),
    ]
    for bad in damaged:
        assert "unreadable Avro header" in str(_header_error(bad, native=True))
        _header_error(bad, native=False)


def test_a_codec_avro_does_not_name_is_corrupt() -> None:
    data = _rewritten(_write(_spec([(6, "identity")]), 2, "null"), {"avro.codec": b"lzma9"})
    assert "unknown codec" in str(_header_error(data, native=True))
    with pytest.raises(CorruptFileError, match="native-m0"):
        decode_native(data, LOCATION)


def test_a_codec_it_does_not_decode_leaves_the_manifest_to_polars() -> None:
    entries = _entries(_spec([(6, "identity")]), 2)
    data = write_manifest(
        entries, _spec([(6, "identity")]), SCHEMA, 2, 7, codec="null", manifest_path=LOCATION
    )[0]  # type: ignore[arg-type]
    records = list(fastavro.reader(io.BytesIO(data)))
    reader = fastavro.reader(io.BytesIO(data))
    out = io.BytesIO()
    fastavro.writer(
        out, reader.writer_schema, records, codec="bzip2", metadata=_user_metadata(reader.metadata)
    )
    bz = out.getvalue()
    assert read_header_native(bz, LOCATION) == fastavro.reader(io.BytesIO(bz)).metadata
    assert decode_native(bz, LOCATION) is None  # declined: polars or fastavro decodes it
    assert _header(bz, None, LOCATION, True) == _header(bz, None, LOCATION, False)


def _user_metadata(metadata: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in metadata.items() if not k.startswith("avro.")}


# -- columns sized ahead from the blocks' headers -----------------------------------------------


@pytest.mark.parametrize("per_block", [1, 50, None])
@pytest.mark.parametrize(("plain", "with_stats"), [(70, 200), (200, 70), (63, 2), (64, 1), (0, 65)])
def test_columns_sized_from_early_records_hold_later_ones_of_another_size(
    per_block: int | None, plain: int, with_stats: int
) -> None:
    """The columns are sized for the rest once 64 records are read, from their lists' and
    strings' sizes so far: records after them much bigger (stats maps where the first had
    none) or much smaller decode all the same, in blocks of one record or of all of them."""
    spec = _spec([(3, "bucket[16]"), (6, "truncate[3]")])
    files = [_data_file(k, _partition(spec, ROW), stats=False) for k in range(plain)]
    files += [_data_file(k, _partition(spec, OTHER), stats=True) for k in range(plain, plain + with_stats)]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data = write_manifest(entries, spec, SCHEMA, 2, 7, manifest_path=LOCATION)[0]
    data = _reblocked(data, per_block)
    assert _native(data).num_rows == plain + with_stats
    _agree(data)
    # decoded in one call after a manifest of other sizes, sized from the first's records
    first = _reblocked(write_manifest(entries[:3], spec, SCHEMA, 2, 7, manifest_path=LOCATION)[0], 1)
    joined = decode_native_joined([first, data])
    assert joined is not None
    table, counts = joined
    assert counts == [3, plain + with_stats]
    assert _same(table, pa.concat_tables([_native(first), _native(data)]))


@pytest.mark.parametrize(
    ("count", "size"),
    [(1 << 40, 10), (1 << 62, 1 << 20), (10_000, 40)],
    ids=["huge-count", "huge-count-and-size", "inflatable-count"],
)
def test_a_block_announcing_more_records_than_it_can_hold_is_an_error_not_a_crash(
    tmp_path: Path, count: int, size: int
) -> None:
    """The columns are sized from the counts the blocks announce once 64 records are read: a
    damaged count after them (absurd, or one deflate could only just fit) must not size a
    column past what memory allows, nor abort the process. The decode reports the block."""
    spec = _spec([(3, "bucket[16]")])
    files = [_data_file(k, _partition(spec, ROW), stats=True) for k in range(100)]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data = write_manifest(entries, spec, SCHEMA, 2, 7, manifest_path=LOCATION)[0]
    sync = data[-16:]  # every block ends with the file's sync marker
    damaged = data + _long(count) + _long(size) + b"\x00" * min(size, 64) + sync
    (tmp_path / "m.avro").write_bytes(damaged)
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from aioiceberg.errors import CorruptFileError
        from aioiceberg.spec.manifest.native_decode import decode_native
        try:
            decode_native(Path({str(tmp_path / "m.avro")!r}).read_bytes(), "m.avro")
        except CorruptFileError as e:
            print("refused:", e)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "block 1" in done.stdout, done.stdout


# -- metric maps read past (a plan that reads no metrics) ------------------------------------------


def _maps_emptied(table: pa.Table) -> list[Any]:
    """``table``'s rows with each metric map's items dropped (a null map stays null)."""
    rows = table.to_pylist()
    for row in rows:
        for name in STAT_FIELDS:
            if row["data_file"].get(name) is not None:
                row["data_file"][name] = []
    return rows


def _skipped(data: bytes) -> pa.Table:
    table = decode_native(data, LOCATION, STAT_FIELDS)
    assert table is not None
    return table


def assert_maps_read_past(data: bytes) -> None:
    full, skipped = _native(data), _skipped(data)
    assert skipped.schema == full.schema
    assert repr(skipped.to_pylist()) == repr(_maps_emptied(full))


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_metric_maps_read_past_leave_every_other_value_as_decoded(format_version: int, codec: str) -> None:
    for stats in (True, False):
        assert_maps_read_past(_write(_spec(TRANSFORMS), format_version, codec, stats))
    assert_maps_read_past(_write(UNPARTITIONED, format_version, codec))
    spec = _spec([(6, "identity"), (3, "bucket[16]"), (9, "day")])
    data = write_manifest(
        _entries(spec, format_version, n=60),
        spec,
        SCHEMA,
        format_version,
        7,
        codec=codec,
        manifest_path=LOCATION,
    )[0]  # type: ignore[arg-type]
    for per_block in (None, 1, 7):  # one block, PyIceberg's one entry a block, Java's many
        assert_maps_read_past(_reblocked(data, per_block))
    first, second = data, _write(spec, format_version, codec)
    joined = decode_native_joined([first, second], None, STAT_FIELDS)
    whole = decode_native_joined([first, second])
    assert joined is not None and whole is not None and joined[1] == whole[1]
    assert repr(joined[0].to_pylist()) == repr(_maps_emptied(whole[0]))


def test_pyiceberg_manifests_read_past_their_metric_maps(
    pyiceberg_manifests: list[tuple[int, bytes]],
) -> None:
    for version, data in pyiceberg_manifests:
        if version:  # (version 0: a manifest list, which has no data_file)
            assert_maps_read_past(data)


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_damaged_bytes_read_past_are_corrupt_or_as_a_whole_decode(codec: str) -> None:
    """Every truncation point and random byte flips, decoded with the maps read past: the
    decode is corrupt, or gives what the whole decode gives without the maps' items, or the
    damage lies where the maps' values were only read past (the whole decode refuses a value
    the skip does not look at: an int out of range)."""
    rng = random.Random(37)
    data = _write(_spec([(6, "identity"), (3, "bucket[16]"), (9, "day")]), 2, codec)
    cases = [data[:cut] for cut in range(len(data))]
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 5))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        cases.append(bytes(damaged))
    seen: dict[str, int] = {}
    for case in cases:
        try:
            got = decode_native(case, LOCATION, STAT_FIELDS)
        except CorruptFileError as e:
            assert LOCATION in str(e)
            verdict = "corrupt"
        else:
            try:
                whole = decode_native(case, LOCATION)
            except CorruptFileError:
                verdict = "only the skipped values damaged"
            else:
                assert (got is None) == (whole is None)
                if got is not None and whole is not None:
                    assert repr(got.to_pylist()) == repr(_maps_emptied(whole))
                verdict = "equal"
        seen[verdict] = seen.get(verdict, 0) + 1
    assert seen.get("corrupt", 0) > len(data) // 2 and seen.get("equal", 0) > 0, seen


def test_a_block_inflating_far_beyond_its_size_decodes_whole() -> None:
    """Entries alike compress ~100x: the inflate buffer, first sized at 8x the block, grows
    until the block fits (and keeps that size for the next), one block or many."""
    spec = _spec([(6, "identity")])
    entry = _entries(spec, 2, n=1)[0]
    data = write_manifest([entry] * 3000, spec, SCHEMA, 2, 7, manifest_path=LOCATION)[0]
    for per_block in (None, 1000):
        shaped = _reblocked(data, per_block)
        layout = avro_layout(shaped)
        assert layout is not None
        ratios = []
        for start, _ in layout.blocks:
            _, at = read_long(shaped, start)
            size, at = read_long(shaped, at)
            ratios.append(len(zlib.decompress(shaped[at : at + size], -15)) / size)
        assert max(ratios) > 8  # past the first guess
        assert _plain(_native(shaped).to_pylist()) == _records(shaped)
