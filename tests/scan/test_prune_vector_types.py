"""The bulk pruning passes against the inclusive metrics evaluator, type by type.

For every column type and predicate the evaluator handles, manifests of files with
generated stats (bounds in and out of order, NaN and undecodable bounds, 4-byte bounds of
promoted columns, decimals beyond int64, truncated and invalid UTF-8 strings, counts that
are absent, zero or all-null) are written, opened columnar, and each row checked: the
prefilter drops only rows the evaluator drops, ``certain`` claims only rows it keeps. A
second set of tests checks that the passes do decide: a selective filter on a column of
any type drops most rows in bulk and claims the rows that match.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from aioiceberg.expressions import InclusiveMetricsEvaluator, bind
from aioiceberg.expressions.tree import (
    And,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from aioiceberg.scan.columnar_prune import certain, prefilter
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
)
from aioiceberg.spec.manifest.columnar import ColumnarManifest, open_columnar
from aioiceberg.spec.partitioning import UNPARTITIONED
from aioiceberg.spec.schema import Schema
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
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import to_bytes

LOCATION = "file:///wh/t/metadata/m0.avro"
NAN_F, NAN_D = struct.pack("<f", float("nan")), struct.pack("<d", float("nan"))
INF = float("inf")
BIG = Decimal(10) ** 30  # unscaled beyond int64 at scale 4

# name -> (type, values bounds and literals are drawn from, raw bounds beside them)
COLUMNS: dict[str, tuple[PrimitiveType, list[Any], list[bytes]]] = {
    "b": (BooleanType(), [False, True], [b"", b"\x02"]),
    "i": (IntegerType(), [-3, -1, 0, 1, 2, 7], [b"\x01", b"\x00" * 8]),
    "l": (
        LongType(),
        [-(2**40), -1, 0, 1, 2, 2**40],
        [b"\x01", to_bytes(2, IntegerType()), to_bytes(-5, IntegerType())],
    ),
    "f": (FloatType(), [-INF, -1.5, -0.0, 0.0, 1.0, 2.5, INF], [NAN_F, b"\x01"]),
    "d": (
        DoubleType(),
        [-INF, -1.5, -0.0, 0.0, 0.1, 2.5, INF],
        [NAN_D, NAN_F, struct.pack("<f", 1.5), b"\x01"],
    ),
    "dt": (DateType(), [-400, -1, 0, 1, 19000], [b"\x01\x02"]),
    "t": (TimeType(), [0, 1, 3_600_000_000, 86_399_999_999], [b"\x01"]),
    "ts": (TimestampType(), [-(10**15), -1, 0, 1, 10**15], [b"\x01" * 4]),
    "tz": (TimestamptzType(), [-1, 0, 1, 10**12], [b"\x01"]),
    "tsn": (TimestampNanoType(), [-(10**18), 0, 1, 10**18], [b"\x01"]),
    "dec": (
        DecimalType(9, 2),
        [Decimal("-1.50"), Decimal("0.00"), Decimal("1.25"), Decimal("3.00"), Decimal("9999999.99")],
        [b"", b"\x00" * 17, b"\xff"],
    ),
    "big": (
        DecimalType(38, 4),
        [Decimal("-2.0000"), Decimal("0.0001"), Decimal("5.5000"), BIG, -BIG],
        [b"\x7f" + b"\x00" * 8, b"\x80" + b"\xff" * 7, b""],
    ),
    "s": (
        StringType(),
        ["", "a", "ab", "abz", "b", "é", "éa", "\U0001f600", "z"],
        [b"\xff", b"a\xc3", b"ab\xc3\xa9"],
    ),
    "bin": (BinaryType(), [b"", b"\x00", b"a", b"a\x00", b"ab", b"\xff", b"\xff\xff"], []),
    "fx": (
        FixedType(4),
        [b"\x00\x00\x00\x00", b"aaaa", b"abcd", b"\xff\x00\x00\x01", b"\xff\xff\xff\xff"],
        [b"abcde", b"ab"],
    ),
    "u": (
        UUIDType(),
        [uuid.UUID(int=0), uuid.UUID(int=5), uuid.UUID(int=2**127), uuid.UUID(int=2**128 - 1)],
        [b"\x01" * 15],
    ),
}
SCHEMA = Schema(
    *[NestedField(fid, name, t, False) for fid, (name, (t, _, _)) in enumerate(COLUMNS.items(), start=1)]
)
FIELD_IDS = {name: fid for fid, name in enumerate(COLUMNS, start=1)}
COUNTS = [None, 0, 3, 5]


def _literal_values(name: str) -> list[Any]:
    t, values, _ = COLUMNS[name]
    if isinstance(t, FixedType):
        return [v for v in values if len(v) == t.length]
    if isinstance(t, FloatType | DoubleType):
        return [*values, 0.3, -7]
    if isinstance(t, DecimalType):
        return [v for v in values if abs(v) < 10**30] + [Decimal("1.2"), 3]
    return values


@dataclass(frozen=True)
class _Draws:
    """A column's strategies, made once: a strategy made afresh on every draw is validated
    afresh, which cost most of this module's time."""

    choice: st.SearchStrategy[int]
    odd: st.SearchStrategy[bytes] | None
    value: st.SearchStrategy[Any]
    cut: st.SearchStrategy[int]
    literal: st.SearchStrategy[Any]
    some: st.SearchStrategy[list[Any]]
    form: st.SearchStrategy[int]


_COUNTS = st.sampled_from(COUNTS)
_RECORD_COUNTS = st.sampled_from([5, 5, 5, 5, 0, -1])
_SHAPES = st.integers(0, 4)
_BOOLEANS = st.booleans()


@functools.cache
def _draws(name: str) -> _Draws:
    t, values, odd = COLUMNS[name]
    lits = _literal_values(name)
    return _Draws(
        choice=st.integers(0, 9),
        odd=st.sampled_from(odd) if odd else None,
        value=st.sampled_from(values),
        cut=st.integers(0, t.length if isinstance(t, FixedType) else 0),
        literal=st.sampled_from(lits),
        some=st.lists(st.sampled_from(lits), min_size=2, max_size=4),
        form=st.integers(0, 13 if isinstance(t, StringType) else 11),
    )


def _bound(draw: st.DrawFn, name: str) -> bytes | None:
    t = COLUMNS[name][0]
    d = _draws(name)
    choice = draw(d.choice)
    if choice == 0:
        return None
    if choice == 1 and d.odd is not None:
        return draw(d.odd)
    value = draw(d.value)
    if isinstance(t, FixedType):  # a truncated bound is shorter than the type
        return bytes(value[: draw(d.cut)])
    if isinstance(t, StringType) and draw(_BOOLEANS):
        return str(value).encode("utf-8")[:2]  # cut inside a character at times
    return to_bytes(value, t)


def _data_file(draw: st.DrawFn, name: str, k: int) -> DataFile:
    fid = FIELD_IDS[name]

    def count_map() -> dict[int, int] | None:
        c = draw(_COUNTS)
        return None if c is None else {fid: c}

    def bound_map() -> dict[int, bytes] | None:
        b = _bound(draw, name)
        return None if b is None else {fid: b}

    return DataFile(
        DataFileContent.DATA,
        f"file:///wh/t/data/{k}.parquet",
        FileFormat.PARQUET,
        (),
        draw(_RECORD_COUNTS),
        100,
        value_counts=count_map(),
        null_value_counts=count_map(),
        nan_value_counts=count_map(),
        lower_bounds=bound_map(),
        upper_bounds=bound_map(),
    )


def _predicate(draw: st.DrawFn, name: str) -> Expression:
    d = _draws(name)
    lit = draw(d.literal)
    some = draw(d.some)
    options: list[Expression] = [
        LessThan(name, lit),
        LessThanOrEqual(name, lit),
        GreaterThan(name, lit),
        GreaterThanOrEqual(name, lit),
        EqualTo(name, lit),
        NotEqualTo(name, lit),
        In(name, some),
        NotIn(name, some),
        IsNull(name),
        NotNull(name),
        IsNaN(name),
        NotNaN(name),
    ]
    if isinstance(COLUMNS[name][0], StringType):
        options += [StartsWith(name, lit), NotStartsWith(name, lit)]
    return options[draw(d.form)]


def _filter(draw: st.DrawFn, name: str) -> Expression:
    left = _predicate(draw, name)
    shape = draw(_SHAPES)
    if shape == 0:
        return left
    right = _predicate(draw, name)
    if shape == 1:
        return And(left, right)
    if shape == 2:
        return Or(left, right)
    if shape == 3:
        return Not(left)
    return Not(Or(left, Not(right)))


@functools.cache
def _case(name: str) -> st.SearchStrategy[tuple[list[DataFile], list[Expression]]]:
    """24 files and 6 filters on the column."""

    @st.composite
    def case(draw: st.DrawFn) -> tuple[list[DataFile], list[Expression]]:
        return [_data_file(draw, name, k) for k in range(24)], [_filter(draw, name) for _ in range(6)]

    return case()


def _columnar(files: Sequence[DataFile]) -> ColumnarManifest:
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data, _ = write_manifest(entries, UNPARTITIONED, SCHEMA, 2, 7, manifest_path=LOCATION)
    cm = open_columnar(data)
    assert cm is not None
    return cm


def _check(
    cm: ColumnarManifest, expr: Expression, files: Sequence[DataFile] | None = None
) -> tuple[list[bool], list[bool], list[bool]]:
    """(evaluator, prefilter, certain) per row; fails where a bulk pass contradicts it.
    ``files``: the rows' data files as the columnar manifest builds them (read if None)."""
    evaluator = InclusiveMetricsEvaluator(SCHEMA, expr)
    if files is None:
        files = [e.data_file for e in cm.entries(cm.rows)]
    verdicts = [evaluator.eval(f) for f in files]
    bounds: dict[Any, Any] = {}  # shared between the passes, as prune_rows shares it
    may = prefilter(evaluator.expr, cm, cm.rows, bounds).tolist()
    sure = certain(evaluator.expr, cm, cm.rows, bounds).tolist()
    assert certain(evaluator.expr, cm, cm.rows).tolist() == sure  # read afresh: the same
    if "Not(" in repr(expr):  # NOT still in the tree: the passes push it down themselves
        with_not = bind(SCHEMA, expr)
        assert prefilter(with_not, cm, cm.rows).tolist() == may
        assert certain(with_not, cm, cm.rows).tolist() == sure
    for f, verdict, m, s in zip(files, verdicts, may, sure, strict=True):
        if not m:
            assert not verdict, f"prefilter dropped a row the evaluator keeps: {expr} on {f}"
        if s:
            assert verdict, f"certain claimed a row the evaluator drops: {expr} on {f}"
    return verdicts, may, sure


@pytest.mark.parametrize("name", list(COLUMNS))
@settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),  # a failure names its filter and file: no shrinking
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_bulk_passes_agree_with_the_evaluator(name: str, data: st.DataObject) -> None:
    files, filters = data.draw(_case(name))
    cm = _columnar(files)
    read = [e.data_file for e in cm.entries(cm.rows)]
    assert read == files
    for expr in filters:
        _check(cm, expr, read)


# ---------------------------------------------------------------------------------------------
# The passes decide: a column of increasing, disjoint bounds


def _increasing(name: str, n: int) -> list[Any]:
    t = COLUMNS[name][0]
    if isinstance(t, FloatType | DoubleType):
        return [i * 0.5 - 10 for i in range(n)]
    if isinstance(t, DecimalType):
        return [(Decimal(i) * Decimal("0.25")).quantize(Decimal(1).scaleb(-t.scale)) for i in range(n)]
    if isinstance(t, StringType):
        return [f"k{i:03d}é" for i in range(n)]
    if isinstance(t, BinaryType | FixedType):
        return [f"k{i:03d}".encode() for i in range(n)]
    if isinstance(t, UUIDType):
        return [uuid.UUID(int=(i + 80) << 120) for i in range(n)]
    return [i * 1000 + 5 for i in range(n)]


def _one_value_files(
    name: str, values: Sequence[Any], nulls: Callable[[int], int] = lambda k: 0
) -> list[DataFile]:
    t, fid = COLUMNS[name][0], FIELD_IDS[name]
    return [
        DataFile(
            DataFileContent.DATA,
            f"file:///wh/t/data/{k}.parquet",
            FileFormat.PARQUET,
            (),
            10,
            100,
            value_counts={fid: 10},
            null_value_counts={fid: nulls(k)},
            nan_value_counts={fid: 0} if isinstance(t, FloatType | DoubleType) else None,
            lower_bounds={fid: to_bytes(v, t)},
            upper_bounds={fid: to_bytes(v, t)},
        )
        for k, v in enumerate(values)
    ]


def _decided(cm: ColumnarManifest, expr: Expression) -> tuple[int, int, int]:
    """(rows the evaluator keeps, rows the prefilter drops, rows certain claims)."""
    verdicts, may, sure = _check(cm, expr)
    return sum(verdicts), may.count(False), sure.count(True)


@pytest.mark.parametrize("name", [n for n in COLUMNS if n != "b"])
def test_selective_filters_are_decided_in_bulk(name: str) -> None:
    values = _increasing(name, 100)
    cm = _columnar(_one_value_files(name, values))
    lit = values[50]
    assert _decided(cm, EqualTo(name, lit)) == (1, 99, 1)
    assert _decided(cm, LessThan(name, lit)) == (50, 50, 50)
    assert _decided(cm, GreaterThanOrEqual(name, lit)) == (50, 50, 50)
    assert _decided(cm, In(name, [values[3], values[60], values[97]])) == (3, 97, 3)
    assert _decided(
        cm,
        Or(EqualTo(name, values[1]), And(GreaterThan(name, values[10]), LessThanOrEqual(name, values[20]))),
    ) == (11, 89, 11)
    assert _decided(cm, NotEqualTo(name, lit)) == (100, 0, 100)
    assert _decided(cm, Not(LessThan(name, lit))) == (50, 50, 50)


def test_booleans_are_decided_in_bulk() -> None:
    cm = _columnar(_one_value_files("b", [k % 2 == 0 for k in range(40)]))
    assert _decided(cm, EqualTo("b", True)) == (20, 20, 20)
    assert _decided(cm, LessThan("b", True)) == (20, 20, 20)


def test_null_and_nan_counts_are_decided_in_bulk() -> None:
    values = _increasing("d", 40)
    files = _one_value_files("d", values, nulls=lambda k: 10 if k % 4 == 0 else k % 2)
    fid = FIELD_IDS["d"]
    files = [
        DataFile(
            f.content,
            f.file_path,
            f.file_format,
            (),
            10,
            100,
            value_counts=f.value_counts,
            null_value_counts=f.null_value_counts,
            nan_value_counts={fid: 10 if k % 4 == 2 else 0},
            lower_bounds=f.lower_bounds if k % 4 != 0 else None,
            upper_bounds=f.upper_bounds if k % 4 != 0 else None,
        )
        for k, f in enumerate(files)
    ]
    cm = _columnar(files)
    assert _decided(cm, IsNull("d")) == (30, 10, 30)  # null counts 10 (k%4==0) or 1 (odd k)
    assert _decided(cm, NotNull("d")) == (30, 10, 30)
    assert _decided(cm, IsNaN("d")) == (10, 30, 10)
    assert _decided(cm, NotNaN("d")) == (30, 10, 30)
    assert _decided(cm, GreaterThan("d", values[20])) == (10, 30, 10)  # only-null and only-NaN files drop


def test_string_prefixes_are_decided_in_bulk() -> None:
    values = [f"{p}{i:02d}" for p in ("ab", "ac", "é", "\U0001f600") for i in range(25)]
    cm = _columnar(_one_value_files("s", values))
    assert _decided(cm, StartsWith("s", "ac")) == (25, 75, 25)
    assert _decided(cm, StartsWith("s", "é1")) == (10, 90, 10)
    assert _decided(cm, StartsWith("s", "\U0001f600")) == (25, 75, 25)
    assert _decided(cm, NotStartsWith("s", "ab")) == (75, 25, 75)
    assert _decided(cm, StartsWith("s", "")) == (100, 0, 100)


def test_a_selective_string_filter_drops_most_rows_and_claims_the_rest() -> None:
    """Ranges of truncated bounds, as writers keep them (16 characters)."""
    fid = FIELD_IDS["s"]
    files = [
        DataFile(
            DataFileContent.DATA,
            f"file:///wh/t/data/{k}.parquet",
            FileFormat.PARQUET,
            (),
            1000,
            100,
            value_counts={fid: 1000},
            null_value_counts={fid: 0},
            lower_bounds={fid: f"customer-{k:05d}-aaaaaaaaaaaa"[:16].encode()},
            upper_bounds={fid: f"customer-{k:05d}-zzzzzzzzzzzz"[:16].encode()},
        )
        for k in range(500)
    ]
    cm = _columnar(files)
    kept, dropped, claimed = _decided(cm, EqualTo("s", "customer-00042-mmmm"))
    assert (kept, dropped, claimed) == (1, 499, 1)
    kept, dropped, claimed = _decided(cm, In("s", ["customer-00042-m", "customer-00100-q", "zz"]))
    assert (kept, dropped, claimed) == (2, 498, 2)


def test_unreadable_bounds_are_left_to_the_evaluator() -> None:
    """Decimals beyond int64, invalid UTF-8 and bounds of another width: neither dropped nor
    claimed in bulk, even where the evaluator could say."""
    fid_big, fid_s, fid_i = FIELD_IDS["big"], FIELD_IDS["s"], FIELD_IDS["i"]
    big = to_bytes(BIG, COLUMNS["big"][0])
    file = DataFile(
        DataFileContent.DATA,
        "file:///wh/t/data/x.parquet",
        FileFormat.PARQUET,
        (),
        10,
        100,
        value_counts={fid_big: 10, fid_s: 10, fid_i: 10},
        null_value_counts={fid_big: 0, fid_s: 0, fid_i: 0},
        lower_bounds={fid_big: big, fid_s: b"\xff", fid_i: b"\x01"},
        upper_bounds={fid_big: big, fid_s: b"\xff", fid_i: b"\x01"},
    )
    cm = _columnar([file])
    for expr in (EqualTo("big", Decimal(1)), LessThan("s", "a"), GreaterThan("i", 5)):
        evaluator = InclusiveMetricsEvaluator(SCHEMA, expr)
        assert prefilter(evaluator.expr, cm, cm.rows).tolist() == [True]
        assert certain(evaluator.expr, cm, cm.rows).tolist() == [False]
    evaluator = InclusiveMetricsEvaluator(SCHEMA, EqualTo("big", Decimal(1)))
    assert not evaluator.eval(cm.entries(cm.rows)[0].data_file)  # the evaluator drops it


def test_verdicts_of_a_manifest_do_not_leak_into_another_filter() -> None:
    values = _increasing("l", 30)
    cm = _columnar(_one_value_files("l", values))
    rows = cm.rows[np.arange(0, 30, 2)]
    bounds: dict[Any, Any] = {}
    evaluator = InclusiveMetricsEvaluator(SCHEMA, LessThan("l", values[10]))
    may = prefilter(evaluator.expr, cm, rows, bounds)
    sure = certain(evaluator.expr, cm, rows, bounds)
    assert may.tolist() == [True] * 5 + [False] * 10
    assert sure.tolist() == may.tolist()
    again = certain(evaluator.expr, cm, rows, bounds)
    assert again.tolist() == sure.tolist()  # the memoised verdict was not changed in place
