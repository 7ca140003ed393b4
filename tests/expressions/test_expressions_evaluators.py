"""Metrics, manifest and partition evaluators, checked by brute force on generated rows and
against PyIceberg's evaluators; and the Arrow translation against the row evaluator."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyiceberg.expressions as pe
import pyiceberg.schema as ps
import pyiceberg.types as pyt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, _StrictMetricsEvaluator

from aioiceberg.expressions import (
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    PartitionEvaluator,
    StrictMetricsEvaluator,
    bind,
    compile_row_filter,
)
from aioiceberg.expressions import tree as t
from aioiceberg.expressions.arrow_filter import RowMask, to_arrow_expression
from aioiceberg.spec import types as ice
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import BucketTransform, IdentityTransform, TruncateTransform
from aioiceberg.spec.types import DoubleType, LongType, NestedField, PrimitiveType, StringType
from aioiceberg.spec.values import to_bytes

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "x", DoubleType()),
    NestedField(3, "s", StringType()),
)
PY_SCHEMA = ps.Schema(
    pyt.NestedField(1, "id", pyt.LongType(), required=False),
    pyt.NestedField(2, "x", pyt.DoubleType(), required=False),
    pyt.NestedField(3, "s", pyt.StringType(), required=False),
)
TYPES: list[PrimitiveType] = [LongType(), DoubleType(), StringType()]

ids = st.one_of(st.none(), st.integers(-10, 10))
xs = st.one_of(st.none(), st.just(math.nan), st.sampled_from([-1.5, 0.0, 2.0, 3.25]), st.floats(-5, 5))
ss = st.one_of(st.none(), st.text(alphabet="abc", max_size=4))
rows_strategy = st.lists(st.tuples(ids, xs, ss), min_size=1, max_size=8)

COMPARISONS = [t.LessThan, t.LessThanOrEqual, t.GreaterThan, t.GreaterThanOrEqual, t.EqualTo, t.NotEqualTo]
PY = {
    t.LessThan: pe.LessThan,
    t.LessThanOrEqual: pe.LessThanOrEqual,
    t.GreaterThan: pe.GreaterThan,
    t.GreaterThanOrEqual: pe.GreaterThanOrEqual,
    t.EqualTo: pe.EqualTo,
    t.NotEqualTo: pe.NotEqualTo,
    t.In: pe.In,
    t.NotIn: pe.NotIn,
    t.IsNull: pe.IsNull,
    t.NotNull: pe.NotNull,
    t.IsNaN: pe.IsNaN,
    t.NotNaN: pe.NotNaN,
    t.StartsWith: pe.StartsWith,
    t.NotStartsWith: pe.NotStartsWith,
}


def leaves() -> st.SearchStrategy[t.Expression]:
    return st.one_of(
        st.builds(lambda c, v: c("id", v), st.sampled_from(COMPARISONS), st.integers(-11, 11)),
        st.builds(
            lambda c, v: c("x", v), st.sampled_from(COMPARISONS), st.sampled_from([-1.5, 0.0, 2.0, 3.25, 9.0])
        ),
        st.builds(
            lambda c, v: c("s", v),
            st.sampled_from([*COMPARISONS, t.StartsWith, t.NotStartsWith]),
            st.text(alphabet="abc", max_size=3),
        ),
        st.builds(
            lambda c, v: c("id", v),
            st.sampled_from([t.In, t.NotIn]),
            st.sets(st.integers(-11, 11), min_size=2, max_size=4),
        ),
        st.builds(
            lambda c, n: c(n), st.sampled_from([t.IsNull, t.NotNull]), st.sampled_from(["id", "x", "s"])
        ),
        st.builds(lambda c: c("x"), st.sampled_from([t.IsNaN, t.NotNaN])),
    )


filters = st.recursive(
    leaves(),
    lambda c: st.one_of(st.builds(t.And, c, c), st.builds(t.Or, c, c), st.builds(t.Not, c)),
    max_leaves=4,
)


def to_pyiceberg(expr: t.Expression) -> Any:
    if isinstance(expr, t.And):
        return pe.And(to_pyiceberg(expr.left), to_pyiceberg(expr.right))
    if isinstance(expr, t.Or):
        return pe.Or(to_pyiceberg(expr.left), to_pyiceberg(expr.right))
    if isinstance(expr, t.Not):
        return pe.Not(to_pyiceberg(expr.child))
    assert isinstance(expr, t.Predicate) and isinstance(expr.term, t.Reference)
    cls = PY[type(expr)]
    if isinstance(expr, t.SetPredicate):
        return cls(expr.term.name, set(expr.values))
    if isinstance(expr, t.LiteralPredicate):
        return cls(expr.term.name, expr.value)
    return cls(expr.term.name)


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _bump(s: str) -> str | None:
    """Truncated upper bound: the prefix with its last character incremented (as writers do)."""
    return s[:-1] + chr(ord(s[-1]) + 1) if s else None


def stats_for(
    rows: list[tuple[Any, ...]], truncate: int | None = None, drop: frozenset[str] = frozenset()
) -> Any:
    value_counts, nulls, nans, lower, upper = {}, {}, {}, {}, {}
    for i, type_ in enumerate(TYPES):
        fid = i + 1
        col = [r[i] for r in rows]
        value_counts[fid] = len(col)
        nulls[fid] = sum(v is None for v in col)
        if isinstance(type_, DoubleType):
            nans[fid] = sum(_is_nan(v) for v in col)
        present = [v for v in col if v is not None and not _is_nan(v)]
        if present:
            lo, hi = min(present), max(present)
            if isinstance(type_, StringType) and truncate is not None and len(hi) > truncate:
                hi = _bump(hi[:truncate])
            if isinstance(type_, StringType) and truncate is not None:
                lo = lo[:truncate]
            lower[fid] = to_bytes(lo, type_)
            if hi is not None:
                upper[fid] = to_bytes(hi, type_)
    return SimpleNamespace(
        record_count=len(rows),
        value_counts=None if "values" in drop else value_counts,
        null_value_counts=None if "nulls" in drop else nulls,
        nan_value_counts=None if "nans" in drop else nans,
        lower_bounds=None if "lower" in drop else lower,
        upper_bounds=None if "upper" in drop else upper,
    )


@settings(max_examples=400, deadline=None)
@given(
    filters,
    rows_strategy,
    st.one_of(st.none(), st.integers(1, 2)),
    st.frozensets(st.sampled_from(["values", "nulls", "nans", "lower", "upper"]), max_size=2),
)
def test_metrics_evaluators_are_sound_on_real_stats(
    expr: t.Expression, rows: list[tuple[Any, ...]], truncate: int | None, drop: frozenset[str]
) -> None:
    matches = [compile_row_filter(bind(SCHEMA, expr))(r) for r in rows]
    stats = stats_for(rows, truncate, drop)
    if any(matches):
        assert InclusiveMetricsEvaluator(SCHEMA, expr).eval(stats), (expr, rows)
    if StrictMetricsEvaluator(SCHEMA, expr).eval(stats):
        assert all(matches), (expr, rows)


@settings(max_examples=400, deadline=None)
@given(filters, rows_strategy)
def test_metrics_evaluators_prune_at_least_as_well_as_pyiceberg(
    expr: t.Expression, rows: list[tuple[Any, ...]]
) -> None:
    stats = stats_for(rows)
    py_expr = to_pyiceberg(expr)
    if not _InclusiveMetricsEvaluator(PY_SCHEMA, py_expr).eval(stats):
        assert not InclusiveMetricsEvaluator(SCHEMA, expr).eval(stats), expr
    if _StrictMetricsEvaluator(PY_SCHEMA, py_expr).eval(stats):
        assert StrictMetricsEvaluator(SCHEMA, expr).eval(stats), expr


def test_empty_and_unknown_record_counts() -> None:
    empty = SimpleNamespace(
        record_count=0,
        value_counts=None,
        null_value_counts=None,
        nan_value_counts=None,
        lower_bounds=None,
        upper_bounds=None,
    )
    assert not InclusiveMetricsEvaluator(SCHEMA, "id = 1").eval(empty)
    assert InclusiveMetricsEvaluator(SCHEMA, "id = 1", include_empty_files=True).eval(empty)
    assert StrictMetricsEvaluator(SCHEMA, "id = 1").eval(empty)
    unknown = SimpleNamespace(**{**vars(empty), "record_count": -1})
    assert InclusiveMetricsEvaluator(SCHEMA, "id = 1").eval(unknown)
    assert not StrictMetricsEvaluator(SCHEMA, "id = 1").eval(unknown)


def test_truncated_string_upper_bound_is_not_a_value() -> None:
    # values "abcz", "abd" -> lower "ab", upper "ac" (truncated to 2 chars, last one bumped)
    stats = stats_for([(None, None, "abcz"), (None, None, "abd")], truncate=2)
    assert stats.upper_bounds[3] == b"ac"
    assert InclusiveMetricsEvaluator(SCHEMA, "s LIKE 'abd%'").eval(stats)
    assert not InclusiveMetricsEvaluator(SCHEMA, "s LIKE 'ad%'").eval(stats)
    assert not StrictMetricsEvaluator(SCHEMA, "s = 'ac'").eval(stats)
    assert not StrictMetricsEvaluator(SCHEMA, "s LIKE 'ac%'").eval(stats)
    assert StrictMetricsEvaluator(SCHEMA, "s LIKE 'a%'").eval(stats)
    assert not StrictMetricsEvaluator(SCHEMA, "s LIKE 'abc%'").eval(stats)


def test_nan_only_columns() -> None:
    stats = stats_for([(1, math.nan, "a"), (2, math.nan, "b")])
    assert not InclusiveMetricsEvaluator(SCHEMA, "x > 0").eval(stats)
    assert InclusiveMetricsEvaluator(SCHEMA, "x IS NAN").eval(stats)
    assert StrictMetricsEvaluator(SCHEMA, "x IS NAN").eval(stats)
    assert StrictMetricsEvaluator(SCHEMA, "x != 0").eval(stats)
    assert not InclusiveMetricsEvaluator(SCHEMA, "x IS NOT NAN").eval(stats)


SPEC = PartitionSpec.of(
    PartitionField((1,), 1000, IdentityTransform(), "id"),
    PartitionField((1,), 1001, BucketTransform(3), "id_bucket"),
    PartitionField((3,), 1002, TruncateTransform(1), "s_trunc"),
    PartitionField((2,), 1003, IdentityTransform(), "x"),
)
PARTITION_TYPES = [f.field_type for f in SPEC.partition_type(SCHEMA).fields]


def partition_of(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(f.transform.apply(row[f.source_id - 1], SCHEMA.find_type(f.source_id)) for f in SPEC.fields)


def summaries_for(partitions: list[tuple[Any, ...]]) -> list[Any]:
    out = []
    for i, type_ in enumerate(PARTITION_TYPES):
        col = [p[i] for p in partitions]
        present = [v for v in col if v is not None and not _is_nan(v)]
        assert isinstance(type_, PrimitiveType)
        out.append(
            SimpleNamespace(
                contains_null=any(v is None for v in col),
                contains_nan=any(_is_nan(v) for v in col) if isinstance(type_, DoubleType) else None,
                lower_bound=to_bytes(min(present), type_) if present else None,
                upper_bound=to_bytes(max(present), type_) if present else None,
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(filters, rows_strategy)
def test_manifest_and_partition_evaluators_keep_every_matching_row(
    expr: t.Expression, rows: list[tuple[Any, ...]]
) -> None:
    full = compile_row_filter(bind(SCHEMA, expr))
    partitions = [partition_of(r) for r in rows]
    partition_eval = PartitionEvaluator(SCHEMA, SPEC, expr)
    for row, part in zip(rows, partitions, strict=True):
        if full(row):
            assert partition_eval.eval(part), (expr, row, part)
    if any(full(r) for r in rows):
        assert ManifestEvaluator(SCHEMA, SPEC, expr).eval(summaries_for(partitions)), (expr, rows)


def test_manifest_evaluator_prunes_by_bounds_and_null_flags() -> None:
    summaries = summaries_for([partition_of((5, 1.0, "b")), partition_of((7, 2.0, "c"))])
    assert ManifestEvaluator(SCHEMA, SPEC, "id = 6").eval(summaries)
    assert not ManifestEvaluator(SCHEMA, SPEC, "id > 7").eval(summaries)
    assert not ManifestEvaluator(SCHEMA, SPEC, "s LIKE 'a%'").eval(summaries)
    assert not ManifestEvaluator(SCHEMA, SPEC, "id IS NULL").eval(summaries)
    assert not ManifestEvaluator(SCHEMA, SPEC, "x IS NAN").eval(summaries)
    assert ManifestEvaluator(SCHEMA, SPEC, "id = 6").eval(None)
    assert not ManifestEvaluator(SCHEMA, SPEC, "false").eval(None)


@settings(max_examples=200, deadline=None)
@given(filters, rows_strategy)
def test_arrow_expression_filters_exactly_like_the_row_evaluator(
    expr: t.Expression, rows: list[tuple[Any, ...]]
) -> None:
    bound = bind(SCHEMA, expr)
    table = pa.table(
        {
            "row": pa.array(range(len(rows)), pa.int64()),
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "x": pa.array([r[1] for r in rows], pa.float64()),
            "s": pa.array([r[2] for r in rows], pa.string()),
        }
    )
    kept = table.filter(to_arrow_expression(bound)).column("row").to_pylist()
    full = compile_row_filter(bound)
    assert kept == [i for i, r in enumerate(rows) if full(r)], str(bound)
    batch = table.combine_chunks().to_batches()[0] if rows else pa.RecordBatch.from_pylist([], table.schema)
    assert RowMask(bound).filter(batch).column("row").to_pylist() == kept, str(bound)


@pytest.mark.parametrize(
    "text", ["x IN (-0.0, 7)", "x IN (0.0, 7)", "x NOT IN (-0.0, 7)", "x NOT IN (0.0, 7)"]
)
def test_arrow_in_calls_both_zeros_equal(text: str) -> None:
    """Arrow's is_in hashes -0.0 and 0.0 apart: ``x IN (-0.0)`` missed a 0.0 row that ``x = -0.0`` keeps."""
    bound = bind(SCHEMA, text)
    table = pa.table({"x": pa.array([0.0, -0.0, 7.0, 1.0], pa.float64())})
    kept = table.filter(to_arrow_expression(bound)).column("x").to_pylist()
    assert kept == ([1.0] if "NOT" in text else [0.0, -0.0, 7.0])
    assert RowMask(bound).filter(table.to_batches()[0]).column("x").to_pylist() == kept
    assert kept == [x for x in table.column("x").to_pylist() if compile_row_filter(bound)((None, x, None))]


def test_evaluators_are_shareable_across_files() -> None:
    inclusive = InclusiveMetricsEvaluator(SCHEMA, "id > 5")
    a, b = stats_for([(1, None, None)]), stats_for([(9, None, None)])
    assert [inclusive.eval(a), inclusive.eval(b), inclusive.eval(a)] == [False, True, False]


_INTEGER_TYPES = [
    ice.IntegerType(),
    ice.DateType(),
    ice.LongType(),
    ice.TimeType(),
    ice.TimestampType(),
    ice.TimestamptzType(),
    ice.TimestampNanoType(),
    ice.TimestamptzNanoType(),
]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_INTEGER_TYPES), st.binary(max_size=10))
def test_integer_bounds_decode_as_the_value_codec_does(type_: PrimitiveType, data: bytes) -> None:
    """The evaluators' shortcut for integer bounds answers what ``from_bytes`` does: the value,
    an int written before promotion to long, or unusable for any other width."""
    from aioiceberg.errors import IcebergError
    from aioiceberg.expressions.evaluators import _UNKNOWN, _decode
    from aioiceberg.spec.values import from_bytes

    try:
        expected: Any = from_bytes(data, type_)
    except IcebergError:
        expected = _UNKNOWN
    assert _decode(data, type_) == expected
    assert _decode(None, type_) is None
