"""Row filters agree with DuckDB row for row, and planning keeps every file holding a match.

Hypothesis builds filters in our syntax over every primitive type and over struct
fields, with type limits, values equal to data values and values just beside them, and
renders each filter as SQL too. DuckDB evaluates the SQL over the rows read straight
from each data file with pyarrow (neither our planner nor our reader takes part in the
answer), under SQL's three-valued logic: a row for which the filter is NULL is not
returned. The tables are written by us (format version 3, with the nanosecond
timestamps) and by PyIceberg 0.12 (version 2), four appends each with different value
ranges per file, so that pruning on metrics decides something.

NaN is checked apart, against IEEE rules: DuckDB orders NaN above every number, so it
is no oracle there.

Each filter is also planned three more ways, which must keep the same files with the same
deletes: with the bulk pruning passes and with the per-entry evaluators only
(``vectorized=False``), both in the shared runtime that has planned these manifests under
every filter before, and in a runtime that keeps nothing (see ``plans_agreeing``). A fifth
table, with position deletes, is planned (not read) the same ways.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import random
import struct
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from maint_helpers import duckdb_connection

from aioiceberg import sync
from aioiceberg.runtime import Runtime
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.spec.scan_tasks import FileScanTask

pytest.importorskip("pyiceberg")

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

F32_MAX = 3.4028234663852886e38
F64_MAX = sys.float_info.max
INF = math.inf
UTC = dt.UTC
FILES = 4
ROWS_PER_FILE = 60


# -- columns -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One filterable column: the values rows hold, and literal-only neighbours of them."""

    name: str  # dotted reference, spelled the same in our syntax and in SQL
    kind: str
    pool: tuple[Any, ...]
    near: tuple[Any, ...]  # type limits, values beyond them, values between data values
    required: bool = False  # never NULL itself (st.r still is where the struct st is)

    @property
    def literals(self) -> tuple[Any, ...]:
        return self.pool + self.near

    @property
    def sql(self) -> str:
        """The column in DuckDB's SQL. DuckDB casts a literal to the column's decimal type
        and fails ("Could not cast value -10^38 to DECIMAL(38,0)") where SQL just compares:
        a wide decimal column compares as HUGEINT instead (exact, its scale is 0)."""
        return f"CAST({self.name} AS HUGEINT)" if self.kind == "wide_decimal" else self.name

    def __repr__(self) -> str:
        return self.name

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.name)


def _ts(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, us)  # naive on purpose: no zone


def _tz(year: int, month: int, day: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, tzinfo=UTC)


def _ns(moment: dt.datetime, nanos: int = 0) -> int:
    """Nanoseconds since the epoch of a naive datetime (read as UTC) plus ``nanos``."""
    delta = moment - _ts(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000 + nanos


def _u(text: str) -> uuid.UUID:
    return uuid.UUID(text)


_TS_POOL = (
    _ts(1, 1, 1),
    _ts(1969, 12, 31, 23, 59, 59, 999_999),
    _ts(1970, 1, 1),
    _ts(1970, 1, 1, 0, 0, 0, 1),
    _ts(2024, 5, 1, 12),
    _ts(2024, 5, 2),
    _ts(9999, 12, 31, 23, 59, 59, 999_999),
)
_TS_NEAR = (
    _ts(1, 1, 1, 0, 0, 0, 1),
    _ts(1969, 12, 31, 23, 59, 59, 999_998),
    _ts(2024, 5, 1, 11, 59, 59, 999_999),
    _ts(2024, 5, 1, 12, 0, 0, 1),
    _ts(2024, 5, 1),
    _ts(9999, 12, 31, 23, 59, 59, 999_998),
)
_NS_POOL = (
    _ns(_ts(1677, 9, 22), 1),
    _ns(_ts(1969, 12, 31, 23, 59, 59, 999_999), 999),
    0,
    1,
    _ns(_ts(2024, 5, 1, 12), 123_456_789),
    _ns(_ts(2262, 4, 10, 23, 59, 59, 999_999), 999),
)
_NS_NEAR = (
    _ns(_ts(1677, 9, 22)),
    -1,
    2,
    _ns(_ts(2024, 5, 1, 12), 123_456_788),
    _ns(_ts(2024, 5, 1, 12), 123_456_790),
    _ns(_ts(2262, 4, 10, 23, 59, 59, 999_999), 998),
)
_LONG_STR = "x" * 20
_TOP = "\U0010ffff" * 18  # no upper bound can be made by incrementing a truncated prefix of it
_STRINGS = (
    "",
    "a",
    "a%b",
    "a_b",
    "ab",
    "abc",
    "abd",
    "b",
    "é",
    "éa",
    "\uffff",
    "😀",
    _LONG_STR + "a",
    _LONG_STR + "b",
    _TOP,
)
_STRINGS_NEAR = ("aa", "abcd", "c", "\U0010ffff", _LONG_STR, _LONG_STR + "c", "😀a", "z")
_BYTES = (b"", b"\x00", b"\x00\x00", b"\x01", b"ab", b"\x7f", b"\x80", b"\xff", b"\xff" * 20, b"a" * 18)
_BYTES_NEAR = (b"\x00\x01", b"a", b"ac", b"\xfe", b"\xff" * 19, b"\xff" * 21, b"a" * 17 + b"b")
_UUIDS = (
    _u("00000000-0000-0000-0000-000000000000"),
    _u("00000000-0000-0000-8000-000000000000"),
    _u("3f2504e0-4f89-11d3-9a0c-0305e82c3301"),
    _u("7fffffff-ffff-ffff-ffff-ffffffffffff"),
    _u("80000000-0000-0000-0000-000000000000"),
    _u("f81d4fae-7dec-11d0-a765-00a0c91e6bf6"),
    _u("ffffffff-ffff-ffff-ffff-ffffffffffff"),
)
_UUIDS_NEAR = (
    _u("00000000-0000-0000-0000-000000000001"),
    _u("3f2504e0-4f89-11d3-9a0c-0305e82c3300"),
    _u("7fffffff-ffff-ffff-ffff-fffffffffffe"),
    _u("80000000-0000-0000-0000-000000000001"),
    _u("ffffffff-ffff-ffff-ffff-fffffffffffe"),
)

COLUMNS: tuple[Column, ...] = (
    Column("b", "boolean", (False, True), ()),
    Column(
        "i",
        "int",
        (-(2**31), -(2**31) + 1, -1000, -1, 0, 1, 2, 7, 1000, 2**31 - 2, 2**31 - 1),
        (-(2**31) - 1, 2**31, -(2**40), 2**40, -5, 3, 999, 1001),
    ),
    Column(
        "l",
        "long",
        (-(2**63), -(2**63) + 1, -(2**32), -1, 0, 1, 2**32, 2**63 - 2, 2**63 - 1),
        (-(2**63) - 1, 2**63, 2**70, 3, 2**31, 2**32 + 1),
    ),
    Column(
        "f",
        "float",
        (-INF, -F32_MAX, -2.5, -0.0, 0.0, 1.401298464324817e-45, 1.5, 2.25, 1e10, F32_MAX, INF),
        (-1e39, 1e39, 0.1, 1.5000001, 2.0, -3.0, 3.4028235e38, F64_MAX),
    ),
    Column(
        "d",
        "double",
        (-INF, -F64_MAX, -1.5, -0.0, 0.0, 5e-324, 0.1, 1.5, 1e300, F64_MAX, INF),
        (-2.0, 1e-300, 0.30000000000000004, 2.0, 1e301, -1e300),
    ),
    Column(
        "dec",
        "decimal",
        tuple(
            Decimal(x)
            for x in ("-9999999.99", "-1.00", "-0.01", "0.00", "0.01", "1.25", "100.50", "9999999.99")
        ),
        tuple(
            Decimal(x)
            for x in ("-10000000.00", "10000000.00", "1", "1.3", "100.5", "0.02", "-0.02", "99999999")
        ),
    ),
    Column(
        "wdec",
        "wide_decimal",
        (-(10**38) + 1, -1, 0, 1, 10**20, 10**38 - 1),
        (-(10**38), 10**38, 2, 10**20 + 1, 10**38 - 2),
    ),
    Column(
        "dt",
        "date",
        (
            dt.date(1, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(1970, 1, 1),
            dt.date(2000, 2, 29),
            dt.date(2024, 5, 1),
            dt.date(9999, 12, 31),
        ),
        (
            dt.date(1, 1, 2),
            dt.date(1969, 12, 30),
            dt.date(1970, 1, 2),
            dt.date(2024, 4, 30),
            dt.date(9999, 12, 30),
        ),
    ),
    Column(
        "tm",
        "time",
        (
            dt.time(0),
            dt.time(0, 0, 0, 1),
            dt.time(12),
            dt.time(12, 34, 56, 789_012),
            dt.time(23, 59, 59, 999_999),
        ),
        (
            dt.time(11, 59, 59, 999_999),
            dt.time(12, 0, 0, 1),
            dt.time(23, 59, 59, 999_998),
            dt.time(0, 0, 0, 2),
        ),
    ),
    Column("ts", "timestamp", _TS_POOL, _TS_NEAR),
    Column(
        "tstz",
        "timestamptz",
        tuple(t.replace(tzinfo=UTC) for t in _TS_POOL),
        (
            *(t.replace(tzinfo=UTC) for t in _TS_NEAR),
            # the same instants as data values, written in other zones
            _tz(2024, 5, 1, 12).astimezone(dt.timezone(dt.timedelta(hours=2))),
            _tz(2024, 5, 2).astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
            _tz(1970, 1, 1).astimezone(dt.timezone(dt.timedelta(hours=14))),
        ),
    ),
    Column("tsn", "timestamp_ns", _NS_POOL, _NS_NEAR),
    Column("tsnz", "timestamptz_ns", _NS_POOL, _NS_NEAR),
    Column("s", "string", _STRINGS, _STRINGS_NEAR),
    Column("u", "uuid", _UUIDS, _UUIDS_NEAR),
    Column("bin", "binary", _BYTES, _BYTES_NEAR),
    Column(
        "fx",
        "fixed",
        (
            b"\x00" * 4,
            b"\x00\x00\x00\x01",
            b"\x7f\xff\xff\xff",
            b"\x80\x00\x00\x00",
            b"abcd",
            b"abce",
            b"\xff" * 4,
        ),
        (b"\x00\x00\x00\x02", b"abcc", b"abcf", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x01"),
    ),
    Column("req", "long", (-(2**63), -1, 0, 3, 2**63 - 1), (-2, 1, 4, 2**63), required=True),
    Column("st.a", "int", (-(2**31), -3, 0, 5, 9, 2**31 - 1), (-4, 4, 6, 10, 2**31)),
    Column("st.r", "int", (-(2**31), 0, 5, 2**31 - 1), (-1, 1, 6, 2**31), required=True),
    Column("st.b", "string", ("", "k", "ka", "kb", "m", _TOP), ("kaa", "l", "j")),
    Column("st.inner.c", "long", (-(2**63), -7, 0, 8, 2**63 - 1), (-8, 7, 9, 2**63)),
)
NS_COLUMNS = frozenset({"tsn", "tsnz"})

ARROW_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "decimal": pa.decimal128(9, 2),
    "wide_decimal": pa.decimal128(38, 0),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
    "string": pa.string(),
    "uuid": pa.uuid(),
    "binary": pa.binary(),
    "fixed": pa.binary(4),
}


def _field(column: Column) -> pa.Field:
    return pa.field(column.name.rsplit(".", 1)[-1], ARROW_TYPES[column.kind], nullable=not column.required)


def _arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    top = [c for c in columns if "." not in c.name]
    by_name = {c.name: c for c in columns}
    inner = pa.struct([_field(by_name["st.inner.c"])])
    st_type = pa.struct(
        [_field(by_name["st.a"]), _field(by_name["st.b"]), _field(by_name["st.r"]), ("inner", inner)]
    )
    return pa.schema([("rid", pa.int64()), *(_field(c) for c in top), ("st", st_type)])


# -- data ------------------------------------------------------------------------------------


def _sort_key(value: Any) -> Any:
    return value.bytes if isinstance(value, uuid.UUID) else value


def _file_values(column: Column, rng: random.Random) -> list[list[Any]]:
    """Per file, the column's values: each file draws from its own window of the sorted
    pool (windows overlap by one value, shuffled per column), at its own null rate."""
    ordered = sorted(column.pool, key=_sort_key)
    k = len(ordered)
    windows = [ordered[max(0, j * k // FILES - 1) : (j + 1) * k // FILES + 1] for j in range(FILES)]
    rng.shuffle(windows)
    out = []
    for window in windows:
        null_rate = 0.0 if column.required else rng.choice([0.0, 0.15, 0.15, 0.4, 1.0])
        out.append([None if rng.random() < null_rate else rng.choice(window) for _ in range(ROWS_PER_FILE)])
    return out


def _arrow_column(values: list[Any], kind: str) -> pa.Array:
    if kind == "uuid":
        storage = pa.array([None if v is None else v.bytes for v in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(pa.uuid(), storage)
    if kind == "wide_decimal":
        values = [None if v is None else Decimal(v) for v in values]
    return pa.array(values, ARROW_TYPES[kind])


def build_batches(columns: Sequence[Column], seed: int) -> list[pa.Table]:
    """FILES tables (one per append) over ``columns``; rid numbers the rows."""
    rng = random.Random(seed)
    schema = _arrow_schema(columns)
    per_column = {c.name: _file_values(c, rng) for c in columns}
    batches = []
    for j in range(FILES):
        arrays: dict[str, pa.Array] = {
            "rid": pa.array(range(j * ROWS_PER_FILE, (j + 1) * ROWS_PER_FILE), pa.int64())
        }
        for c in columns:
            if "." not in c.name:
                arrays[c.name] = _arrow_column(per_column[c.name][j], c.kind)
        st_null, inner_null = rng.choice([0.0, 0.2, 1.0]), rng.choice([0.0, 0.3])
        st_type = schema.field("st").type
        inner = pa.StructArray.from_arrays(
            [_arrow_column(per_column["st.inner.c"][j], "long")],
            fields=[st_type.field("inner").type.field("c")],
            mask=pa.array([rng.random() < inner_null for _ in range(ROWS_PER_FILE)]),
        )
        arrays["st"] = pa.StructArray.from_arrays(
            [
                _arrow_column(per_column["st.a"][j], "int"),
                _arrow_column(per_column["st.b"][j], "string"),
                _arrow_column(per_column["st.r"][j], "int"),
                inner,
            ],
            fields=list(st_type),
            mask=pa.array([rng.random() < st_null for _ in range(ROWS_PER_FILE)]),
        )
        batches.append(pa.table([arrays[f.name] for f in schema], schema=schema))
    return batches


# -- normalised rows -------------------------------------------------------------------------


def _plain_type(t: pa.DataType) -> pa.DataType:
    """The type rows are compared in: uuid as its bytes, timestamps as their integers, and
    one width of strings and binaries (PyIceberg reads large ones)."""
    if isinstance(t, pa.BaseExtensionType):
        return _plain_type(t.storage_type)
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct(
            [pa.field(t.field(i).name, _plain_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    return t


def plain_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts of comparable Python values, sorted by rid."""
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if isinstance(column.type, pa.BaseExtensionType):
            column = pa.chunked_array([c.storage for c in column.chunks], column.type.storage_type)
        columns[name] = column.cast(_plain_type(column.type))
    return sorted(pa.table(columns).to_pylist(), key=lambda r: r["rid"])


# -- tables ----------------------------------------------------------------------------------


@dataclass(repr=False)
class Loaded:
    """A table, the rows of each of its data files as pyarrow reads them, and a DuckDB view
    over those rows (with the file each row came from). ``cold`` is the same table in a
    runtime that keeps no manifest or manifest list: each of its plans decodes afresh."""

    table: sync.Table
    view: str
    rows: dict[int, dict[str, Any]]  # rid -> plain row
    files: dict[int, str]  # rid -> the data file holding it
    cold: sync.Table

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"<{self.view}>")


def _duckdb_ready(table: pa.Table) -> pa.Table:
    """What DuckDB gets: its Arrow import reads timestamptz_ns as microseconds, so those
    columns go in as plain nanosecond timestamps of UTC (filters compare them with UTC
    literals); uuid keeps its extension type (DuckDB's UUID)."""
    out = table
    for i, f in enumerate(table.schema):
        if f.type == pa.timestamp("ns", tz="UTC"):
            out = out.set_column(i, f.name, pc.cast(table.column(i), pa.timestamp("ns")))
    return out


def cold_runtime() -> Runtime:
    return Runtime(manifest_cache_bytes=0, manifest_lists=0)


def load(con: Any, view: str, table: sync.Table, cold: Runtime, files: int | None = FILES) -> Loaded:
    paths = [t.file.file_path for t in table.scan().plan_files()]
    assert files is None or len(paths) == files
    parts = []
    for path in paths:
        data = pq.read_table(path.removeprefix("file://"))
        parts.append(data.append_column("_file", pa.array([path] * data.num_rows, pa.string())))
    base = pa.concat_tables(parts)
    # a table, not a registered view: DuckDB would push filters into the Arrow scan, which
    # turns TIMESTAMPTZ constants into Python objects through pytz (not installed)
    con.register("incoming", _duckdb_ready(base))
    con.execute(f"CREATE TABLE {view} AS SELECT * FROM incoming")
    con.unregister("incoming")
    rows = {r["rid"]: r for r in plain_rows(base.drop_columns(["_file"]))}
    file_of = dict(zip(base.column("rid").to_pylist(), base.column("_file").to_pylist(), strict=True))
    return Loaded(table, view, rows, file_of, sync.load_table(table.metadata_location, runtime=cold))


def _pyiceberg_schema(arrow_schema: pa.Schema) -> Any:
    from pyiceberg import types as T
    from pyiceberg.schema import Schema as PySchema

    kinds: dict[str, Any] = {
        "boolean": T.BooleanType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "float": T.FloatType(),
        "double": T.DoubleType(),
        "decimal": T.DecimalType(9, 2),
        "wide_decimal": T.DecimalType(38, 0),
        "date": T.DateType(),
        "time": T.TimeType(),
        "timestamp": T.TimestampType(),
        "timestamptz": T.TimestamptzType(),
        "string": T.StringType(),
        "uuid": T.UUIDType(),
        "binary": T.BinaryType(),
        "fixed": T.FixedType(4),
    }
    by_type = {str(v): k for k, v in ARROW_TYPES.items() if k in kinds}
    next_id = iter(range(1, 1000))

    def field(f: pa.Field) -> Any:
        fid = next(next_id)
        if pa.types.is_struct(f.type):
            children = [field(f.type.field(i)) for i in range(f.type.num_fields)]
            return T.NestedField(fid, f.name, T.StructType(*children), required=not f.nullable)
        kind = "long" if f.name == "rid" else by_type[str(f.type)]
        if kind == "decimal" and f.type == pa.decimal128(38, 0):
            kind = "wide_decimal"
        return T.NestedField(fid, f.name, kinds[kind], required=not f.nullable)

    return PySchema(*(field(f) for f in arrow_schema))


@dataclass(repr=False)
class World:
    con: Any
    ours: Loaded
    theirs: Loaded
    partitioned: Loaded | None = None
    # the v2 columns' rows with some deleted by position: (warm, cold), for plans only
    with_deletes: tuple[sync.Table, sync.Table] | None = None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("<world>")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from pyiceberg.catalog.sql import SqlCatalog

    root = tmp_path_factory.mktemp("filter_differential")
    con = duckdb_connection()

    catalog = sync.connect(str(root / "wh"))
    ours = catalog.create_table("db.all_types", schema=_arrow_schema(COLUMNS), format_version=3)
    for batch in build_batches(COLUMNS, seed=15):
        ours.append(batch)

    v2_columns = [c for c in COLUMNS if c.name not in NS_COLUMNS]
    (root / "py").mkdir()
    py_catalog = SqlCatalog("py", uri=f"sqlite:///{root}/py.db", warehouse=f"file://{root}/py")
    py_catalog.create_namespace("db")
    py_table = py_catalog.create_table("db.all_types", _pyiceberg_schema(_arrow_schema(v2_columns)))
    py_arrow = py_table.schema().as_arrow()
    for batch in build_batches(v2_columns, seed=16):
        py_table.append(batch.cast(py_arrow))
    theirs = sync.load_table(py_table.metadata_location)

    # the same rows under partition transforms (truncate at the type limits wraps): pruning
    # by partition values must keep every file holding a match too
    by_parts = catalog.create_table(
        "db.partitioned",
        schema=_arrow_schema(COLUMNS),
        format_version=3,
        partition_by=PARTITIONING,
    )
    for batch in build_batches(COLUMNS, seed=15):
        by_parts.append(batch)

    with_deletes = catalog.create_table(
        "db.with_deletes",
        schema=_arrow_schema(v2_columns),
        partition_by=["bucket(2, i)"],
        properties={"write.delete.mode": "merge-on-read"},
    )
    for batch in build_batches(v2_columns, seed=16):
        with_deletes.append(batch)
    with_deletes.delete("rid IN (1, 2, 61, 130, 200)")
    with_deletes.delete("rid IN (3, 131) OR i IS NULL")

    cold = cold_runtime()
    yield World(
        con,
        load(con, "ours", ours, cold),
        load(con, "theirs", theirs, cold),
        load(con, "partitioned", by_parts, cold, files=None),
        (with_deletes, sync.load_table(with_deletes.metadata_location, runtime=cold)),
    )
    cold.close_sync()


PARTITIONING = [
    "truncate(3, l)",
    "truncate(4, i)",
    "truncate(2, s)",
    "bucket(3, u)",
    "day(ts)",
    "month(dt)",
    "hour(tstz)",
    "truncate(5, st.inner.c)",
]


# -- filters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cmp:
    column: Column
    op: str
    value: Any
    flipped: bool  # written ``literal op' column``, with op' the mirror of op


@dataclass(frozen=True)
class InList:
    column: Column
    values: tuple[Any, ...]
    negated: bool


@dataclass(frozen=True)
class Between:
    column: Column
    low: Any
    high: Any
    negated: bool


@dataclass(frozen=True)
class NullTest:
    column: Column
    negated: bool


@dataclass(frozen=True)
class NanTest:
    column: Column
    negated: bool


@dataclass(frozen=True)
class Like:
    column: Column
    prefix: str
    wildcard: bool
    negated: bool


@dataclass(frozen=True)
class NotNode:
    child: Node


@dataclass(frozen=True)
class Bool:
    op: str  # AND / OR
    left: Node
    right: Node


Node = Cmp | InList | Between | NullTest | NanTest | Like | NotNode | Bool

OPS = ("=", "!=", "<", "<=", ">", ">=")
FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
FLOATING = frozenset({"float", "double"})


def _ns_text(nanos: int) -> str:
    seconds, frac = divmod(nanos, 10**9)
    return (_ts(1970, 1, 1) + dt.timedelta(seconds=seconds)).isoformat() + f".{frac:09d}"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def ours_literal(kind: str, v: Any) -> str:
    """A literal in our filter syntax."""
    if kind == "boolean":
        return "true" if v else "false"
    if kind in ("int", "long", "wide_decimal"):
        return str(v)
    if kind in FLOATING:
        return _quote(repr(v)) if math.isinf(v) else repr(v)
    if kind == "decimal":
        return format(v, "f")
    if kind in ("date", "time", "timestamp", "timestamptz"):
        return _quote(v.isoformat())
    if kind == "timestamp_ns":
        return _quote(_ns_text(v))
    if kind == "timestamptz_ns":
        return _quote(_ns_text(v) + "+00:00")
    if kind in ("string", "uuid"):
        return _quote(str(v))
    if kind in ("binary", "fixed"):
        return f"X'{v.hex()}'"
    raise AssertionError(kind)


def sql_literal(kind: str, v: Any) -> str:
    """The same literal in DuckDB's SQL.

    A float column compares with the float32 nearest the (double) literal, as Java and
    our binding do; a finite literal beyond float32's range compares as a double.
    """
    if kind == "float":
        if math.isinf(v) or abs(v) > F32_MAX:
            return f"CAST('{v!r}' AS DOUBLE)"
        return f"CAST(CAST('{v!r}' AS DOUBLE) AS FLOAT)"
    if kind == "double":
        return f"CAST('{v!r}' AS DOUBLE)"
    if kind == "date":
        return f"DATE '{v.isoformat()}'"
    if kind == "time":
        return f"TIME '{v.isoformat()}'"
    if kind == "timestamp":
        return f"TIMESTAMP '{v.isoformat()}'"
    if kind == "timestamptz":
        return f"TIMESTAMPTZ '{v.isoformat()}'"
    if kind in ("timestamp_ns", "timestamptz_ns"):
        return f"TIMESTAMP_NS '{_ns_text(v)}'"
    if kind == "uuid":
        return f"'{v}'::UUID"
    if kind in ("binary", "fixed"):
        return f"unhex('{v.hex()}')"
    return ours_literal(kind, v)


def _like_pattern(node: Like) -> str:
    escaped = node.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _quote(escaped + ("%" if node.wildcard else ""))


def render(node: Node, literal: Callable[[str, Any], str], sql: bool) -> str:
    """The filter text in our syntax (``sql=False``) or in DuckDB's SQL."""
    col = "" if isinstance(node, NotNode | Bool) else node.column.sql if sql else node.column.name
    if isinstance(node, Cmp):
        lit = literal(node.column.kind, node.value)
        return f"{lit} {FLIP[node.op]} {col}" if node.flipped else f"{col} {node.op} {lit}"
    if isinstance(node, InList):
        values = ", ".join(literal(node.column.kind, v) for v in node.values)
        return f"{col} {'NOT IN' if node.negated else 'IN'} ({values})"
    if isinstance(node, Between):
        low, high = literal(node.column.kind, node.low), literal(node.column.kind, node.high)
        return f"{col} {'NOT ' if node.negated else ''}BETWEEN {low} AND {high}"
    if isinstance(node, NullTest):
        return f"{col} IS {'NOT ' if node.negated else ''}NULL"
    if isinstance(node, NanTest):
        if sql:
            return f"{'NOT ' if node.negated else ''}isnan({col})"
        return f"{col} IS {'NOT ' if node.negated else ''}NAN"
    if isinstance(node, Like):
        text = f"{col} {'NOT ' if node.negated else ''}LIKE {_like_pattern(node)}"
        return text + " ESCAPE '\\'" if sql else text
    if isinstance(node, NotNode):
        return f"NOT ({render(node.child, literal, sql)})"
    return f"({render(node.left, literal, sql)}) {node.op} ({render(node.right, literal, sql)})"


def ours_text(node: Node) -> str:
    return render(node, ours_literal, sql=False)


def sql_text(node: Node) -> str:
    return render(node, sql_literal, sql=True)


def _prefixes(column: Column) -> st.SearchStrategy[str]:
    known = sorted({v[:n] for v in column.literals for n in range(len(v) + 1)})
    return st.one_of(st.sampled_from(known), st.text(alphabet="ab%_\\'kx", max_size=3))


@functools.cache
def _column_leaves(c: Column) -> st.SearchStrategy[Node]:
    """Made once per column: a strategy made afresh on every draw is validated afresh."""
    lit = st.sampled_from(c.literals)
    options: list[st.SearchStrategy[Node]] = [
        st.builds(Cmp, st.just(c), st.sampled_from(OPS), lit, st.booleans()),
        st.builds(Cmp, st.just(c), st.sampled_from(OPS), lit, st.booleans()),
        st.builds(InList, st.just(c), st.lists(lit, min_size=1, max_size=4).map(tuple), st.booleans()),
        st.builds(Between, st.just(c), lit, lit, st.booleans()),
        st.builds(NullTest, st.just(c), st.booleans()),
    ]
    if c.kind in FLOATING:
        options.append(st.builds(NanTest, st.just(c), st.booleans()))
    if c.kind == "string":
        options.append(st.builds(Like, st.just(c), _prefixes(c), st.booleans(), st.booleans()))
    return st.one_of(*options)


def leaves(columns: Sequence[Column]) -> st.SearchStrategy[Node]:
    return st.sampled_from(list(columns)).flatmap(_column_leaves)


def filters(columns: Sequence[Column]) -> st.SearchStrategy[Node]:
    return st.recursive(
        leaves(columns),
        lambda children: st.one_of(
            st.builds(NotNode, children),
            st.builds(Bool, st.sampled_from(["AND", "OR"]), children, children),
        ),
        max_leaves=5,
    )


# -- the checks ------------------------------------------------------------------------------


def record(matching: int, total: int, planned: int, needed: int) -> None:
    """Shown by --hypothesis-show-statistics: how selective filters are, how much is pruned."""
    event(f"matching rows: {'none' if matching == 0 else 'all' if matching == total else 'some'}")
    event(f"files planned: {planned} of {FILES}, {needed} needed")


# -- plans agree -----------------------------------------------------------------------------
#
# Each filter is also planned with the bulk pruning passes and without them (``vectorized``
# False sends every entry through the per-entry evaluators), and in a runtime that keeps
# nothing (cold): the files kept, with their deletes, must be the same. The shared runtime is warm: it has
# planned these manifests under every filter before. The manifests here list 1 to 60
# entries, which the batch lane decodes with fastavro when one arrives alone;
# ``columnar_min_entries=0`` sends each through the columnar decoder and its pruning. (Reads
# plan with the default options: a file the batch lane dropped wrongly loses rows.)

Planned = frozenset[tuple[str, tuple[str, ...]]]


def planned(tasks: Iterable[FileScanTask]) -> Planned:
    return frozenset((t.file.file_path, tuple(sorted(d.file_path for d in t.delete_files))) for t in tasks)


def plan(table: sync.Table, text: str, vectorized: bool = True) -> tuple[Planned, PlanMetrics]:
    scan = table.scan(row_filter=text, columnar_min_entries=0, vectorized=vectorized)
    files = planned(scan.plan_files())
    return files, scan.metrics


def _shown(files: Planned) -> list[str]:
    return sorted(
        path.rsplit("/", 1)[-1] + (f" {list(deletes)}" if deletes else "") for path, deletes in files
    )


def plans_agreeing(warm: sync.Table, cold: sync.Table, text: str) -> Planned:
    """The files planned for ``text`` (``warm`` and ``cold``: one table, in the shared
    runtime and in one that keeps nothing), once the bulk passes are seen to keep what the
    per-entry evaluators keep and a warm runtime what a cold one does (and the passes to
    have run: every manifest decoded was decoded columnar)."""
    bulk, bulk_metrics = plan(warm, text)
    per_entry, per_entry_metrics = plan(warm, text, vectorized=False)
    cold_files, cold_metrics = plan(cold, text)
    name = warm.location.rsplit("/", 1)[-1]
    assert bulk == per_entry, (
        f"{text!r} on {name}: bulk pruning kept {_shown(bulk)}, the per-entry evaluators {_shown(per_entry)}"
    )
    assert cold_files == bulk, (
        f"{text!r} on {name}: a cold runtime planned {_shown(cold_files)}, a warm one {_shown(bulk)}"
    )
    for m in (bulk_metrics, per_entry_metrics, cold_metrics):
        assert m.decoded_columnar == m.manifests_read, f"{text!r}: a manifest was not decoded columnar\n{m!r}"
    # cold indeed: every manifest its summaries did not rule out was fetched and decoded
    assert cold_metrics.manifests_from_cache == 0, repr(cold_metrics)
    assert cold_metrics.manifests_read + cold_metrics.manifests_skipped_by_summaries == (
        cold_metrics.manifests_total
    ), repr(cold_metrics)
    return bulk


def check_against_duckdb(con: Any, loaded: Loaded, node: Node) -> None:
    """Our rows for the filter are DuckDB's rows; every file holding one of them is planned."""
    text, sql = ours_text(node), sql_text(node)
    scan = loaded.table.scan(row_filter=text)
    got = plain_rows(scan.to_arrow())
    found = con.execute(f"SELECT rid, _file FROM {loaded.view} WHERE {sql}").fetchall()
    want = [loaded.rows[rid] for rid in sorted(rid for rid, _ in found)]
    extra = sorted({r["rid"] for r in got} - {r["rid"] for r in want})
    missing = sorted({r["rid"] for r in want} - {r["rid"] for r in got})
    assert not extra and not missing, (
        f"{text!r} (SQL: {sql}): we return rows DuckDB does not: {[loaded.rows[i] for i in extra[:3]]}; "
        f"DuckDB returns rows we do not: {[loaded.rows[i] for i in missing[:3]]}"
    )
    assert got == want, f"row values differ for {text!r}"
    files = {path for path, _ in plans_agreeing(loaded.table, loaded.cold, text)}
    needed = {path for _, path in found}
    assert needed <= files, f"{text!r} pruned files holding matches: {sorted(needed - files)}"
    record(len(found), len(loaded.rows), len(files), len(needed))


@SETTINGS
@given(node=filters(COLUMNS))
def test_rows_match_duckdb_on_a_table_we_wrote(world: World, node: Node) -> None:
    check_against_duckdb(world.con, world.ours, node)


@SETTINGS
@given(node=filters([c for c in COLUMNS if c.name not in NS_COLUMNS]))
def test_rows_match_duckdb_on_a_table_pyiceberg_wrote(world: World, node: Node) -> None:
    check_against_duckdb(world.con, world.theirs, node)


@settings(SETTINGS, max_examples=60)  # plans only (no rows read): deletes are matched alike
@given(node=filters([c for c in COLUMNS if c.name not in NS_COLUMNS]))
def test_plans_with_deletes_agree(world: World, node: Node) -> None:
    assert world.with_deletes is not None
    plans_agreeing(*world.with_deletes, ours_text(node))


@settings(SETTINGS, max_examples=40)  # a file per row: each example reads ~240 files
@given(node=filters(COLUMNS))
def test_rows_match_duckdb_on_a_partitioned_table_we_wrote(world: World, node: Node) -> None:
    assert world.partitioned is not None
    check_against_duckdb(world.con, world.partitioned, node)


def test_the_rows_compared_are_the_tables_rows(world: World) -> None:
    """The oracle's rows (data files read alone) are what an unfiltered scan returns, and
    DuckDB's own Iceberg reader finds the same rows in the PyIceberg table."""
    assert world.partitioned is not None
    assert len(world.partitioned.files) == len(world.ours.files)
    for loaded in (world.ours, world.theirs, world.partitioned):
        assert plain_rows(loaded.table.scan().to_arrow()) == sorted(
            loaded.rows.values(), key=lambda r: r["rid"]
        )
        assert len(loaded.rows) == FILES * ROWS_PER_FILE
    location = world.theirs.table.metadata_location
    rids = world.con.execute(f"SELECT rid FROM iceberg_scan('{location}')").fetchall()
    assert sorted(r for (r,) in rids) == sorted(world.theirs.rows)


def test_the_table_with_deletes_has_them(world: World) -> None:
    """Its plans carry deletes (position delete files), so plans compare them too."""
    assert world.with_deletes is not None
    files, metrics = plan(world.with_deletes[1], "")
    assert sum(1 for _, deletes in files if deletes) >= 2
    assert metrics.delete_files >= 1 and metrics.decoded_columnar == metrics.manifests_read


def test_files_hold_different_ranges_of_each_column() -> None:
    """The tables give pruning something to decide: per column, files hold different
    ranges, and some hold only NULLs."""
    batches = build_batches(COLUMNS, seed=15)
    for c in COLUMNS:
        if "." in c.name:
            continue
        ranges = set()
        for batch in batches:
            values = [r[c.name] for r in plain_rows(batch) if r[c.name] is not None]
            ranges.add((min(values, key=_sort_key), max(values, key=_sort_key)) if values else None)
        assert len(ranges) > 1, c.name


# -- NaN -------------------------------------------------------------------------------------
#
# The oracle is IEEE 754 with SQL's NULLs: a comparison with NaN is false, except != which
# is true; NaN is in no IN list (so NOT IN holds); IS NAN finds it. NOT is pushed into the
# predicates first, as our filters define it (expressions/rows.py: NOT (x < 5) means
# x >= 5), so NOT (f < 1) is false for NaN, as f >= 1 is; that is also what Java's and
# PyIceberg's metrics evaluators assume when they prune.

NAN = math.nan
_FINITE = (-INF, -1.5, -0.0, 0.0, 1.5, 2.0, INF)
_NAN_NEAR = (-1e39, 1.75, 1e39, 0.5)
NAN_COLUMNS: tuple[Column, ...] = (
    Column("f", "float", _FINITE, _NAN_NEAR),
    Column("d", "double", _FINITE, _NAN_NEAR),
    Column("st.g", "double", _FINITE, _NAN_NEAR),
)
NAN_SCHEMA = pa.schema(
    [("rid", pa.int64()), ("f", pa.float32()), ("d", pa.float64()), ("st", pa.struct([("g", pa.float64())]))]
)
NAN_SHAPES = ("NaN and NULL only", "numbers only", "numbers and NaN", "NaN only")


def nan_batches(seed: int) -> list[pa.Table]:
    """One file per shape for each column (shuffled per column), so a file holding only
    NaN sits beside files without any."""
    rng = random.Random(seed)
    shapes = {c.name: rng.sample(NAN_SHAPES, len(NAN_SHAPES)) for c in NAN_COLUMNS}
    choices: dict[str, list[float | None]] = {
        "NaN and NULL only": [NAN, None],
        "numbers only": [*_FINITE, None],
        "numbers and NaN": [*_FINITE, NAN, NAN, None],
        "NaN only": [NAN],
    }
    batches = []
    for j in range(FILES):
        values = {
            c.name: [rng.choice(choices[shapes[c.name][j]]) for _ in range(ROWS_PER_FILE)]
            for c in NAN_COLUMNS
        }
        st_type = NAN_SCHEMA.field("st").type
        batches.append(
            pa.table(
                [
                    pa.array(range(j * ROWS_PER_FILE, (j + 1) * ROWS_PER_FILE), pa.int64()),
                    pa.array(values["f"], pa.float32()),
                    pa.array(values["d"], pa.float64()),
                    pa.StructArray.from_arrays(
                        [pa.array(values["st.g"], pa.float64())],
                        fields=list(st_type),
                        mask=pa.array([rng.random() < 0.1 for _ in range(ROWS_PER_FILE)]),
                    ),
                ],
                schema=NAN_SCHEMA,
            )
        )
    return batches


@pytest.fixture(scope="module")
def nan_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from pyiceberg.catalog.sql import SqlCatalog

    root = tmp_path_factory.mktemp("filter_nan")
    con = duckdb_connection()
    ours = sync.connect(str(root / "wh")).create_table("db.nan", schema=NAN_SCHEMA)
    for batch in nan_batches(seed=17):
        ours.append(batch)
    (root / "py").mkdir()
    py_catalog = SqlCatalog("py", uri=f"sqlite:///{root}/py.db", warehouse=f"file://{root}/py")
    py_catalog.create_namespace("db")
    py_table = py_catalog.create_table("db.nan", _pyiceberg_schema(NAN_SCHEMA))
    for batch in nan_batches(seed=18):
        py_table.append(batch.cast(py_table.schema().as_arrow()))
    theirs = sync.load_table(py_table.metadata_location)
    cold = cold_runtime()
    yield World(con, load(con, "nan_ours", ours, cold), load(con, "nan_theirs", theirs, cold))
    cold.close_sync()


NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", "<=": ">", ">": "<="}


def push_not(node: Node, negate: bool = False) -> Node:
    """``node`` (negated when asked) with NOT pushed into the predicates."""
    if isinstance(node, NotNode):
        return push_not(node.child, not negate)
    if isinstance(node, Bool):
        op = {"AND": "OR", "OR": "AND"}[node.op] if negate else node.op
        return Bool(op, push_not(node.left, negate), push_not(node.right, negate))
    if not negate:
        return node
    if isinstance(node, Cmp):
        return replace(node, op=NEGATED_OP[node.op])
    if isinstance(node, InList | Between | NullTest | NanTest):
        return replace(node, negated=not node.negated)
    raise AssertionError(node)


def _literal_as_column_compares(column: Column, value: float) -> float:
    """A float column compares with the float32 nearest the literal; beyond float32's
    range the literal stays itself (beyond every finite value)."""
    if column.kind == "float" and abs(value) <= F32_MAX:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    return value


def ieee(node: Node, row: dict[str, Any]) -> bool | None:
    """SQL's three-valued answer of a NOT-free filter on one row, with IEEE comparisons."""
    if isinstance(node, Bool):
        left, right = ieee(node.left, row), ieee(node.right, row)
        if node.op == "AND":
            return False if left is False or right is False else None if None in (left, right) else True
        return True if left is True or right is True else None if None in (left, right) else False
    assert not isinstance(node, NotNode)
    v = row
    for part in node.column.name.split("."):
        v = None if v is None else v[part]
    if isinstance(node, NullTest):
        return (v is not None) if node.negated else (v is None)
    if v is None:
        return None
    assert isinstance(v, float)
    if isinstance(node, NanTest):
        return math.isnan(v) != node.negated
    if isinstance(node, InList):
        found = any(v == _literal_as_column_compares(node.column, x) for x in node.values)
        return found != node.negated
    if isinstance(node, Between):
        low = _literal_as_column_compares(node.column, node.low)
        high = _literal_as_column_compares(node.column, node.high)
        return (v < low or v > high) if node.negated else (low <= v <= high)
    assert isinstance(node, Cmp)
    lit = _literal_as_column_compares(node.column, node.value)
    op = node.op  # a flipped one is only written the other way round
    return {
        "=": v == lit,
        "!=": v != lit,
        "<": v < lit,
        "<=": v <= lit,
        ">": v > lit,
        ">=": v >= lit,
    }[op]


def _nan_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_safe(v) for k, v in value.items()}
    return value


def check_against_ieee(loaded: Loaded, node: Node) -> tuple[int, int, int, int]:
    """Our rows for the filter are the IEEE oracle's; every file holding one is planned."""
    text = ours_text(node)
    pushed = push_not(node)
    matching = {rid: row for rid, row in loaded.rows.items() if ieee(pushed, row) is True}
    scan = loaded.table.scan(row_filter=text)
    got = [_nan_safe(r) for r in plain_rows(scan.to_arrow())]
    want = [_nan_safe(matching[rid]) for rid in sorted(matching)]
    assert [r["rid"] for r in got] == [r["rid"] for r in want], text
    assert got == want, text
    files = {path for path, _ in plans_agreeing(loaded.table, loaded.cold, text)}
    needed = {loaded.files[rid] for rid in matching}
    assert needed <= files, f"{text!r} pruned files holding matches: {sorted(needed - files)}"
    return len(matching), len(loaded.rows), len(files), len(needed)


@functools.cache
def _nan_leaves(c: Column) -> st.SearchStrategy[Node]:
    lit = st.sampled_from(c.literals)
    return st.one_of(
        st.builds(Cmp, st.just(c), st.sampled_from(OPS), lit, st.booleans()),
        st.builds(InList, st.just(c), st.lists(lit, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(Between, st.just(c), lit, lit, st.booleans()),
        st.builds(NullTest, st.just(c), st.booleans()),
        st.builds(NanTest, st.just(c), st.booleans()),
        st.builds(NanTest, st.just(c), st.booleans()),
    )


def nan_filters() -> st.SearchStrategy[Node]:
    return st.recursive(
        st.sampled_from(NAN_COLUMNS).flatmap(_nan_leaves),
        lambda children: st.one_of(
            st.builds(NotNode, children), st.builds(Bool, st.sampled_from(["AND", "OR"]), children, children)
        ),
        max_leaves=4,
    )


@settings(SETTINGS, max_examples=100)  # every column x predicate kind within the first 100
@given(node=nan_filters())
def test_nan_rows_follow_ieee(nan_world: World, node: Node) -> None:
    for loaded in (nan_world.ours, nan_world.theirs):
        record(*check_against_ieee(loaded, node))


@pytest.mark.parametrize(
    "node",
    [
        NanTest(NAN_COLUMNS[0], False),
        NanTest(NAN_COLUMNS[1], True),
        Cmp(NAN_COLUMNS[0], "!=", 1.5, False),
        InList(NAN_COLUMNS[1], (1.5, 2.0), True),
        NotNode(Cmp(NAN_COLUMNS[2], "=", 1.5, False)),
        NotNode(Cmp(NAN_COLUMNS[0], "<", 1.5, False)),
        Bool("OR", NanTest(NAN_COLUMNS[2], False), Cmp(NAN_COLUMNS[2], "<", 0.0, False)),
    ],
    ids=repr,
)
def test_files_holding_only_nan_are_planned_when_they_match(nan_world: World, node: Node) -> None:
    for loaded in (nan_world.ours, nan_world.theirs):
        check_against_ieee(loaded, node)


# -- regressions the comparison found --------------------------------------------------------


def test_delete_keeps_rows_whose_struct_is_null(tmp_path: Path) -> None:
    """A required field inside an optional struct was taken as never NULL: the delete below
    removed the row whose struct is NULL (its filter is NULL there, so SQL keeps it)."""
    inner = pa.struct([pa.field("r", pa.int32(), nullable=False)])
    schema = pa.schema([pa.field("rid", pa.int64(), nullable=False), pa.field("st", inner)])
    table = sync.connect(str(tmp_path / "wh")).create_table("db.t", schema=schema)
    table.append(pa.table({"rid": [1, 2], "st": pa.array([{"r": 5}, None], inner)}, schema=schema))
    assert table.scan(row_filter="st.r IS NULL").to_arrow().column("rid").to_pylist() == [2]
    table.delete("st.r IS NOT NULL")
    assert table.scan().to_arrow().column("rid").to_pylist() == [2]
