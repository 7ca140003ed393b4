"""Bulk pruning of a columnar manifest keeps exactly the rows the per-entry evaluators keep.

``prune_rows(..., vectorized=True)`` decides rows from whole columns of bounds and counts;
``vectorized=False`` sends every row through ``PartitionEvaluator`` and
``InclusiveMetricsEvaluator``, the reference. Manifests are written with our writer and
opened columnar; their files carry stats for every primitive type (and struct fields), with
what writers leave behind: missing bounds and counts, columns of NULLs or NaNs only, NaN,
infinite and signed-zero float bounds, string and binary bounds truncated (the upper one
incremented), decimals of several precisions, uuids and fixed values with the high bit set,
instants before 1970, bounds of the wrong width (a foreign writer's, or a promoted column's),
and record counts of 0 and -1. Stats need not be consistent (a lower bound above the upper
one): the two paths must agree whatever a file says. Filters come as text in our syntax,
bound as a scan binds them (``bind_row_filter``), with the evaluators a plan builds
(``PruneContext``).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import random
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioiceberg.expressions import AlwaysTrue, Expression, InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.visitor import referenced_field_ids
from aioiceberg.scan.columnar_prune import prune_rows
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
)
from aioiceberg.spec.manifest.columnar import ColumnarManifest, open_columnar
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
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
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import to_bytes

pytest.importorskip("polars")

INF, NAN = math.inf, math.nan
F32_MAX = 3.4028234663852886e38
FILES = 16  # files per manifest
LOCATION = "mem://wh/metadata/prune-differential.avro"


# -- columns -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column with the values its bounds take and the literals filters compare it with
    (both in Iceberg's internal form: days, micros, nanos, unscaled-free Decimals)."""

    fid: int
    name: str
    type: PrimitiveType
    kind: str
    pool: tuple[Any, ...]  # bound values
    near: tuple[Any, ...] = ()  # literals only: neighbours of bound values, type limits

    @property
    def literals(self) -> tuple[Any, ...]:
        return tuple(v for v in self.pool + self.near if not (isinstance(v, float) and math.isnan(v)))

    def __repr__(self) -> str:
        return self.name


def _decimals(*texts: str) -> tuple[Decimal, ...]:
    return tuple(Decimal(t) for t in texts)


_DAY = 86_400_000_000
_TS_MIN, _TS_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999  # 0001-01-01, 9999-12-31T23:59:59.999999
_NOON = 1_714_564_800_000_000  # 2024-05-01T12:00
_TOP = "\U0010ffff" * 3
STRINGS = ("", "a", "ab", "abc", "abd", "b", "é", "\uffff", "😀", "x" * 20 + "a", "x" * 20 + "b", _TOP)
BYTES = (b"", b"\x00", b"\x00\x00\x01", b"\x01", b"ab", b"\x7f", b"\x80", b"\xff", b"\xff" * 3, b"a" * 17)

COLUMNS: tuple[Column, ...] = (
    Column(1, "b", BooleanType(), "boolean", (False, True)),
    Column(
        2,
        "i",
        IntegerType(),
        "int",
        (-(2**31), -1000, -1, 0, 1, 7, 1000, 2**31 - 1),
        (-(2**31) + 1, -2, 2, 6, 8, 999, 1001, 2**31 - 2, 2**31, -(2**40)),
    ),
    Column(
        3,
        "l",
        LongType(),
        "long",
        (-(2**63), -(2**32), -1, 0, 1, 2**32, 2**63 - 1),
        (-(2**63) + 1, -2, 2, 2**31, 2**32 + 1, 2**63 - 2, 2**63, 2**70),
    ),
    Column(
        4,
        "f",
        FloatType(),
        "float",
        (-INF, -F32_MAX, -2.5, -0.0, 0.0, 1.401298464324817e-45, 1.5, 2.25, F32_MAX, INF, NAN),
        (-3.0, -1e39, 0.1, 1.5000001, 2.0, 1e39, 1e10),
    ),
    Column(
        5,
        "d",
        DoubleType(),
        "double",
        (-INF, -1e300, -1.5, -0.0, 0.0, 5e-324, 0.1, 1.5, 1e300, INF, NAN),
        (-2.0, -1e-300, 0.30000000000000004, 2.0, 1e301, 1.7976931348623157e308),
    ),
    Column(
        6,
        "dec9",
        DecimalType(9, 2),
        "decimal",
        _decimals("-9999999.99", "-1.00", "-0.01", "0.00", "0.01", "1.25", "100.50", "9999999.99"),
        _decimals("-10000000.00", "-1.01", "0.02", "1", "1.3", "100.5", "99999999"),
    ),
    Column(
        7,
        "dec18",
        DecimalType(18, 6),
        "decimal",
        _decimals(
            "-999999999999.999999",
            "-0.000001",
            "0.000000",
            "0.500000",
            "123456.789012",
            "999999999999.999999",
        ),
        _decimals("-0.000002", "0.000001", "0.5", "123456.789013", "1000000000000"),
    ),
    Column(
        8,
        "dec38",
        DecimalType(38, 10),
        "decimal",
        _decimals(
            "-9999999999999999999999999999.9999999999",
            "-1.0000000000",
            "0E-10",
            "1.5000000000",
            "100000000000000000000.0000000000",
            "9999999999999999999999999999.9999999999",
        ),
        _decimals("-1.0000000001", "1.4999999999", "2", "-10000000000000000000000000000"),
    ),
    Column(
        9,
        "dt",
        DateType(),
        "date",
        (-719_162, -1, 0, 1, 19_844, 2_932_896),  # 0001-01-01 .. 9999-12-31
        (-719_161, -2, 2, 19_843, 19_845, 2_932_895),
    ),
    Column(
        10, "tm", TimeType(), "time", (0, 1, _DAY // 2, _DAY - 1), (2, _DAY // 2 - 1, _DAY // 2 + 1, _DAY - 2)
    ),
    Column(
        11,
        "ts",
        TimestampType(),
        "timestamp",
        (_TS_MIN, -_DAY, -1, 0, 1, _NOON, _TS_MAX),
        (_TS_MIN + 1, -2, 2, _NOON - 1, _NOON + 1, _TS_MAX - 1),
    ),
    Column(
        12,
        "tstz",
        TimestamptzType(),
        "timestamptz",
        (_TS_MIN, -_DAY, -1, 0, 1, _NOON, _TS_MAX),
        (_TS_MIN + 1, -2, 2, _NOON - 1, _NOON + 1, _TS_MAX - 1),
    ),
    Column(
        13,
        "tsn",
        TimestampNanoType(),
        "timestamp_ns",
        (-(2**63) + 1, -1, 0, 1, _NOON * 1000 + 789, 2**63 - 1),
        (-(2**63) + 2, -2, 2, _NOON * 1000 + 788, _NOON * 1000 + 790, 2**63 - 2),
    ),
    Column(
        14,
        "tsnz",
        TimestamptzNanoType(),
        "timestamptz_ns",
        (-(2**63) + 1, -1, 0, 1, _NOON * 1000 + 789, 2**63 - 1),
        (-2, 2, _NOON * 1000 + 788, _NOON * 1000 + 790),
    ),
    Column(15, "s", StringType(), "string", STRINGS, ("aa", "abcd", "c", "\U0010ffff", "x" * 20, "z", "😀a")),
    Column(
        16,
        "u",
        UUIDType(),
        "uuid",
        tuple(
            uuid.UUID(t)
            for t in (
                "00000000-0000-0000-0000-000000000000",
                "00000000-0000-0000-8000-000000000000",
                "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
                "7fffffff-ffff-ffff-ffff-ffffffffffff",
                "80000000-0000-0000-0000-000000000000",
                "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
                "ffffffff-ffff-ffff-ffff-ffffffffffff",
            )
        ),
        tuple(
            uuid.UUID(t)
            for t in (
                "00000000-0000-0000-0000-000000000001",
                "7fffffff-ffff-ffff-ffff-fffffffffffe",
                "80000000-0000-0000-0000-000000000001",
                "ffffffff-ffff-ffff-ffff-fffffffffffe",
            )
        ),
    ),
    Column(
        17, "bin", BinaryType(), "binary", BYTES, (b"\x00\x00", b"a", b"ac", b"\xfe", b"\xff" * 4, b"a" * 16)
    ),
    Column(
        18,
        "fx",
        FixedType(3),
        "fixed",
        (b"\x00\x00\x00", b"\x00\x00\x01", b"\x7f\xff\xff", b"\x80\x00\x00", b"abc", b"\xff\xff\xff"),
        (b"\x00\x00\x02", b"abb", b"abd", b"\x80\x00\x01", b"\xff\xff\xfe"),
    ),
    Column(19, "req", LongType(), "long", (-(2**63), -1, 0, 3, 2**63 - 1), (-2, 1, 4)),
    Column(21, "st.a", IntegerType(), "int", (-(2**31), -3, 0, 5, 2**31 - 1), (-4, 4, 6)),
    Column(22, "st.c", StringType(), "string", ("", "k", "ka", "kb", "m", _TOP), ("kaa", "l", "j")),
)
BY_NAME = {c.name: c for c in COLUMNS}

SCHEMA = Schema(
    *(NestedField(c.fid, c.name, c.type, required=c.name == "req") for c in COLUMNS if "." not in c.name),
    NestedField(
        20,
        "st",
        StructType(
            NestedField(21, "a", IntegerType()),
            NestedField(22, "c", StringType()),
        ),
    ),
)
SPEC = PartitionSpec(
    0,
    (
        PartitionField((2,), 1000, parse_transform("identity"), "i"),
        PartitionField((15,), 1001, parse_transform("truncate[2]"), "s_trunc"),
        PartitionField((16,), 1002, parse_transform("bucket[4]"), "u_bucket"),
        PartitionField((11,), 1003, parse_transform("day"), "ts_day"),
        PartitionField((5,), 1005, parse_transform("identity"), "d"),
        PartitionField((1,), 1006, parse_transform("identity"), "b"),
    ),
)
# a few values per partition field, so that tuples repeat as they do in real manifests (no
# decimal field: the columnar decoder leaves such manifests to fastavro)
PARTITION_VALUES: tuple[tuple[Any, ...], ...] = (
    (None, -(2**31), 0, 7, 2**31 - 1),
    (None, "", "a", "ab", "é", "\U0010ffff"),
    (None, 0, 1, 3),
    (None, -719_162, -1, 0, 19_844),
    (None, NAN, -0.0, 0.0, 1.5, -INF),
    (None, False, True),
)


# -- stats -------------------------------------------------------------------------------------


def _incremented(text: str) -> str | None:
    """The least string above every string that starts with ``text`` (None: there is none)."""
    while text:
        code = ord(text[-1]) + 1
        if code == 0xD800:
            code = 0xE000
        if code <= 0x10FFFF:
            return text[:-1] + chr(code)
        text = text[:-1]
    return None


def _incremented_bytes(data: bytes) -> bytes | None:
    while data:
        if data[-1] < 0xFF:
            return data[:-1] + bytes([data[-1] + 1])
        data = data[:-1]
    return None


def _sort_key(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, float) and math.isnan(value):
        return math.inf  # NaN bounds are drawn apart
    return value


def _wrong_width(c: Column, value: Any, rng: random.Random) -> bytes:
    """A bound as another writer may have left it: another width of the same number (a
    promoted column's old form, or a mistake), a cut or padded value, or noise."""
    if c.kind in ("int", "date") and isinstance(value, int):
        return struct.pack("<q", value)
    if c.kind in ("long", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"):
        return struct.pack("<i", max(-(2**31), min(2**31 - 1, int(value))))
    if c.kind == "double":
        return struct.pack(
            "<f", value if math.isnan(value) or abs(value) <= F32_MAX else math.copysign(INF, value)
        )
    if c.kind == "float":
        return struct.pack("<d", value)
    if c.kind == "boolean":
        return rng.choice([b"", b"\x02", b"\x01\x00"])
    if c.kind == "uuid":
        cut: bytes = value.bytes[: rng.choice([0, 8, 15])]
        return cut + (b"\x00" if rng.random() < 0.5 else b"")
    if c.kind == "fixed":
        other: bytes = rng.choice([value[:2], value + b"\x00"])
        return other
    if c.kind == "decimal":
        return b"\x00" * rng.choice([0, 17])
    return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 3, 9])))


def _bounds(c: Column, rng: random.Random) -> tuple[bytes | None, bytes | None]:
    pool = [v for v in c.pool if not (isinstance(v, float) and math.isnan(v))]
    lo, hi = sorted((rng.choice(pool), rng.choice(pool)), key=_sort_key)
    if rng.random() < 0.05:
        lo, hi = hi, lo  # inconsistent stats: still both paths must agree
    if c.kind in ("float", "double") and rng.random() < 0.15:
        if rng.random() < 0.5:
            lo = NAN
        else:
            hi = NAN
    lower: bytes | None = to_bytes(lo, c.type)
    upper: bytes | None = to_bytes(hi, c.type)
    if c.kind in ("string", "binary") and rng.random() < 0.3:  # truncated to a prefix
        k = rng.choice([1, 2, 16])
        if c.kind == "string":
            lower = lo[:k].encode()
            up = hi if len(hi) <= k else _incremented(hi[:k])
            upper = None if up is None else up.encode()
        else:
            lower = lo[:k]
            upper = hi if len(hi) <= k else _incremented_bytes(hi[:k])
    r = rng.random()
    if r < 0.08:
        lower = None
    elif r < 0.16:
        upper = None
    elif r < 0.22:
        lower = upper = None
    elif r < 0.28:
        lower = _wrong_width(c, lo, rng)
    elif r < 0.34:
        upper = _wrong_width(c, hi, rng)
    return lower, upper


def data_file(k: int, rng: random.Random, columns: Sequence[Column] = COLUMNS) -> DataFile:
    """File ``k`` with stats for ``columns``, each drawn with its own odd cases."""
    record_count = rng.choice([10, 10, 10, 10, 10, 1, 0, -1])
    values: dict[int, int] = {}
    nulls: dict[int, int] = {}
    nans: dict[int, int] = {}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    n = max(record_count, 0)
    for c in columns:
        shape = rng.choice(["some", "some", "some", "none null", "nulls only", "no counts", "no null count"])
        count = n if rng.random() < 0.9 else rng.choice([0, n + 3])
        nulls_here = {"none null": 0, "nulls only": count}.get(shape, rng.randrange(count + 1))
        if c.name == "req":
            nulls_here = 0
        if shape != "no counts":
            values[c.fid] = count
            if shape != "no null count":
                nulls[c.fid] = nulls_here
        if c.kind in ("float", "double") and rng.random() < 0.8:
            nans[c.fid] = rng.choice([0, 0, 1, count - nulls_here, count])
        if shape == "nulls only" and rng.random() < 0.7:
            continue  # a column of NULLs has no bounds
        lo, hi = _bounds(c, rng)
        if lo is not None:
            lower[c.fid] = lo
        if hi is not None:
            upper[c.fid] = hi
    partition = tuple(rng.choice(values_) for values_ in PARTITION_VALUES)
    return DataFile(
        DataFileContent.DATA,
        f"mem://wh/data/{k:02d}.parquet",
        FileFormat.PARQUET,
        partition,
        record_count,
        100 + k,
        value_counts=values if rng.random() < 0.95 else None,
        null_value_counts=nulls if rng.random() < 0.95 else None,
        nan_value_counts=nans if rng.random() < 0.9 else None,
        lower_bounds=lower if rng.random() < 0.95 else None,
        upper_bounds=upper if rng.random() < 0.95 else None,
    )


@dataclass(frozen=True)
class Written:
    files: list[DataFile]
    data: bytes  # the manifest listing them

    def opened(self, fids: frozenset[int]) -> ColumnarManifest:
        """Opened as a plan opens it: with the metrics of the filter's columns only."""
        cm = open_columnar(self.data, columns_needed=fids)
        assert cm is not None, "the columnar decoder refused the manifest"
        return cm


def written(seed: int, count: int = FILES, columns: Sequence[Column] = COLUMNS) -> Written:
    rng = random.Random(seed)
    files = [data_file(k, rng, columns) for k in range(count)]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data, _ = write_manifest(entries, SPEC, SCHEMA, 3, 77, manifest_path=LOCATION)
    return Written(files, data)


# -- filters -----------------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _micros_text(micros: int) -> str:
    return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat()


def _nanos_text(nanos: int) -> str:
    seconds, frac = divmod(nanos, 10**9)
    return (_EPOCH + dt.timedelta(seconds=seconds)).isoformat() + f".{frac:09d}"


def literal(c: Column, v: Any) -> str:
    """``v`` as a literal of our filter syntax."""
    kind = c.kind
    if kind == "boolean":
        return "true" if v else "false"
    if kind in ("int", "long"):
        return str(v)
    if kind in ("float", "double"):
        return _quote(repr(v)) if math.isinf(v) else repr(v)
    if kind == "decimal":
        return format(v, "f")
    if kind == "date":
        return _quote((dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat())
    if kind == "time":
        return _quote((_EPOCH + dt.timedelta(microseconds=v)).time().isoformat())
    if kind == "timestamp":
        return _quote(_micros_text(v))
    if kind == "timestamptz":
        return _quote(_micros_text(v) + "+00:00")
    if kind == "timestamp_ns":
        return _quote(_nanos_text(v))
    if kind == "timestamptz_ns":
        return _quote(_nanos_text(v) + "+00:00")
    if kind in ("string", "uuid"):
        return _quote(str(v))
    if kind in ("binary", "fixed"):
        return f"X'{v.hex()}'"
    raise AssertionError(kind)


OPS = ("=", "!=", "<", "<=", ">", ">=")
FLOATING = frozenset({"float", "double"})


def _like(prefix: str, wildcard: bool) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _quote(escaped + ("%" if wildcard else ""))


@dataclass(frozen=True)
class Form:
    """One predicate form on a column: ``takes`` says what fills it (a literal, a list of
    them, a LIKE prefix, or nothing)."""

    takes: str  # "literal" | "a few" (literals) | "list" | "prefix" | "nothing"
    make: Callable[[Any], str]


def _list(c: Column, values: Sequence[Any]) -> str:
    return ", ".join(literal(c, v) for v in values)


def _between(c: Column, values: Sequence[Any]) -> str:
    low, high = min(values, key=_sort_key), max(values, key=_sort_key)
    return f"{c.name} BETWEEN {literal(c, low)} AND {literal(c, high)}"


def _compare(c: Column, op: str) -> Form:
    return Form("literal", lambda v: f"{c.name} {op} {literal(c, v)}")


def forms(c: Column) -> list[Form]:
    """Every predicate form on ``c``."""
    name = c.name
    out = [
        *(_compare(c, op) for op in OPS),
        Form("a few", lambda v: f"{literal(c, v)} < {name}"),  # written the other way round
        Form("list", lambda vs: f"{name} IN ({_list(c, vs)})"),
        Form("list", lambda vs: f"{name} NOT IN ({_list(c, vs)})"),
        Form("list", lambda vs: _between(c, vs)),
        Form("list", lambda vs: f"NOT ({_between(c, vs)})"),
        Form("nothing", lambda _: f"{name} IS NULL"),
        Form("nothing", lambda _: f"{name} IS NOT NULL"),
    ]
    if c.kind in FLOATING:
        out += [Form("nothing", lambda _: f"{name} IS NAN"), Form("nothing", lambda _: f"{name} IS NOT NAN")]
    if c.kind == "string":
        out += [
            Form("prefix", lambda v: f"{name} LIKE {_like(v, True)}"),
            Form("prefix", lambda v: f"{name} NOT LIKE {_like(v, True)}"),
            Form("prefix", lambda v: f"{name} LIKE {_like(v, False)}"),  # no wildcard: equality
        ]
    return out


def _prefixes(c: Column) -> tuple[str, ...]:
    return tuple(sorted({v[:n] for v in c.literals for n in range(len(v) + 1)}))


def _filling(c: Column, form: Form) -> st.SearchStrategy[Any]:
    if form.takes == "list":
        return st.lists(st.sampled_from(c.literals), min_size=1, max_size=4)
    if form.takes == "prefix":
        return st.sampled_from(_prefixes(c))
    if form.takes == "nothing":
        return st.none()
    return st.sampled_from(c.literals)  # "literal", "a few"


@functools.cache
def _column_leaves(c: Column) -> st.SearchStrategy[str]:
    """Made once per column: a strategy made afresh on every draw is validated afresh."""
    return st.one_of(*(_filling(c, form).map(form.make) for form in forms(c)))


def leaf() -> st.SearchStrategy[str]:
    return st.sampled_from(COLUMNS).flatmap(_column_leaves)


def filters() -> st.SearchStrategy[str]:
    return st.recursive(
        leaf(),
        lambda children: st.one_of(
            children.map(lambda t: f"NOT ({t})"),
            st.tuples(st.sampled_from(["AND", "OR"]), children, children).map(
                lambda x: f"({x[1]}) {x[0]} ({x[2]})"
            ),
        ),
        max_leaves=4,
    )


# -- the comparison ----------------------------------------------------------------------------


def _rows(a: np.ndarray[Any, Any]) -> list[int]:
    return sorted(int(x) for x in a)


def evaluators(bound: Expression) -> tuple[PartitionEvaluator | None, InclusiveMetricsEvaluator]:
    """The evaluators a plan builds for a bound filter (``PruneContext.evaluators``)."""
    part = PartitionEvaluator(SCHEMA, SPEC, bound)
    return (None if isinstance(part.partition_filter, AlwaysTrue) else part), InclusiveMetricsEvaluator(
        SCHEMA, bound
    )


def _stats_of(f: DataFile, text: str) -> str:
    fids = [c.fid for c in COLUMNS if re.search(rf"(?<![\w.]){re.escape(c.name)}(?!\w)", text)]

    def pick(m: dict[int, Any] | None) -> Any:
        return None if m is None else {i: m.get(i) for i in fids}

    return (
        f"{f.file_path}: record_count={f.record_count} partition={f.partition} "
        f"values={pick(f.value_counts)} nulls={pick(f.null_value_counts)} nans={pick(f.nan_value_counts)} "
        f"lower={pick(f.lower_bounds)} upper={pick(f.upper_bounds)}"
    )


def check_pruning(m: Written, cm: ColumnarManifest, text: str, bound: Expression) -> None:
    """The kept rows, and why the others were dropped, are the same either way."""
    part, metrics = evaluators(bound)
    bulk = prune_rows(cm, part, metrics, vectorized=True)
    per_entry = prune_rows(cm, part, metrics, vectorized=False)
    got, want = _rows(bulk.rows), _rows(per_entry.rows)
    if got != want:
        differing = sorted(set(got) ^ set(want))
        stats = "\n  ".join(_stats_of(m.files[i], text) for i in differing)
        raise AssertionError(
            f"filter {text!r}: bulk pruning kept rows {got}, the per-entry evaluators {want}; "
            f"rows that differ:\n  {stats}"
        )
    assert _rows(bulk.by_partition) == _rows(per_entry.by_partition), text
    assert _rows(bulk.by_metrics) == _rows(per_entry.by_metrics), text
    # in the same order (entries are compared by path: a NaN partition value is unequal to itself)
    paths = [e.data_file.file_path for e in bulk.entries]
    assert paths == [e.data_file.file_path for e in per_entry.entries], text


# Fewer manifests, more filters on each: every form x literal x column is swept below
# (test_every_predicate_on_every_column), so the draws here add combinations and stats.
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), texts=st.lists(filters(), min_size=5, max_size=12))
def test_bulk_pruning_keeps_the_rows_the_evaluators_keep(seed: int, texts: list[str]) -> None:
    bound = [bind_row_filter(SCHEMA, text) for text in texts]
    fids = frozenset().union(*map(referenced_field_ids, bound))
    # stats for the filters' columns and one other (the rest would only cost time)
    m = written(seed, columns=[c for c in COLUMNS if c.fid in fids or c.name == "req"])
    cm = m.opened(fids)
    for text, expr in zip(texts, bound, strict=True):
        check_pruning(m, cm, text, expr)


@pytest.fixture(scope="module")
def sweep_manifest() -> Written:
    return written(seed=1, count=2 * FILES)


def _short_prefixes(c: Column) -> tuple[str, ...]:
    return tuple(sorted({v[:n] for v in c.pool for n in {0, 1, 2, len(v)} if n <= len(v)}))


@pytest.mark.parametrize("column", COLUMNS, ids=repr)
def test_every_predicate_on_every_column(sweep_manifest: Written, column: Column) -> None:
    """Each predicate form with each literal of the column (limits, bound values and their
    neighbours), over a manifest whose files hold every odd case of its stats, so each
    type x operator is compared whatever the draws above happened to pick."""
    m = sweep_manifest
    cm = m.opened(frozenset({column.fid}))
    literals = column.literals
    fillings: dict[str, Sequence[Any]] = {
        "literal": literals,
        "a few": literals[::5],
        "list": [literals[i : i + 3] for i in range(0, len(literals), 3)],
        "prefix": _short_prefixes(column) if column.kind == "string" else (),
        "nothing": [None],
    }
    for form in forms(column):
        for arg in fillings[form.takes]:
            text = form.make(arg)
            check_pruning(m, cm, text, bind_row_filter(SCHEMA, text))


def test_the_manifests_hold_the_odd_cases(sweep_manifest: Written) -> None:
    """The generated stats reach the cases named above (else the comparison proves less)."""
    files = sweep_manifest.files

    def bounds(name: str, upper: bool = False) -> list[bytes]:
        fid = BY_NAME[name].fid
        maps = [f.upper_bounds if upper else f.lower_bounds for f in files]
        return [m[fid] for m in maps if m and fid in m]

    def counts(name: str) -> list[tuple[int | None, int | None, int | None]]:
        fid = BY_NAME[name].fid
        return [
            tuple((m or {}).get(fid) for m in (f.value_counts, f.null_value_counts, f.nan_value_counts))  # type: ignore[misc]
            for f in files
        ]

    assert {f.record_count for f in files} >= {0, -1, 10}
    doubles = [struct.unpack("<d", b)[0] for b in bounds("d") + bounds("d", True) if len(b) == 8]
    assert any(math.isnan(v) for v in doubles) and INF in doubles and -INF in doubles
    assert any(v == 0 and math.copysign(1, v) < 0 for v in doubles)  # -0.0
    assert any(len(b) == 4 for b in bounds("d") + bounds("d", True))  # a float's width
    assert any(len(b) == 4 for b in bounds("l") + bounds("l", True))  # an int's width
    assert any(v is not None and v == n != 0 for v, n, _ in counts("d"))  # nulls only
    assert any(v is not None and v == nan != 0 for v, _, nan in counts("d"))  # NaN only
    assert any(v is None for v, _, _ in counts("s"))  # no counts
    # truncated strings: an upper bound that is no value of the pool (an incremented prefix)
    incremented = {_incremented(v[:k]) for v in STRINGS for k in (1, 2, 16) if len(v) > k}
    assert any(b.decode(errors="replace") in incremented - set(STRINGS) for b in bounds("s", True))
    assert any(b[0] >= 0x80 for b in bounds("u") + bounds("fx") if b)  # the high bit set
    assert any(struct.unpack("<q", b)[0] < 0 for b in bounds("ts") if len(b) == 8)  # before 1970
    assert any(b and b[0] >= 0x80 for b in bounds("dec38") + bounds("dec18"))  # negative
    assert any(len(b) not in (0, 3) for b in bounds("fx") + bounds("fx", True))  # odd widths
