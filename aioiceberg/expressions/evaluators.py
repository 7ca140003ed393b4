"""Decide from metadata alone whether files or manifests can hold matching rows.

- ``ManifestEvaluator``: manifest-list partition summaries -> may the manifest match?
- ``PartitionEvaluator``: a file's partition tuple -> may the file match?
- ``InclusiveMetricsEvaluator``: a data file's column stats -> may any row match?
- ``StrictMetricsEvaluator``: a data file's column stats -> must every row match?

Each is built once per (schema, spec, filter): the filter is bound, NOT-free and
compiled into closures at construction, and ``eval`` keeps no state, so one instance
can be cached and shared across tasks. Inputs are duck-typed (see the Protocols) so
any manifest model with these attribute names works.

Bounds are treated as bounds, never as values present in the file: a truncated
string upper bound (``"abd"`` for values up to ``"abcz..."``) is still >= every
value, so every rule below stays sound with truncated bounds; a bound that is NaN
or cannot be decoded counts as unknown.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aioiceberg.errors import ExpressionError, IcebergError
from aioiceberg.expressions.binding import prepare_filter
from aioiceberg.expressions.partition_projection import inclusive_projection
from aioiceberg.expressions.rows import compile_row_filter
from aioiceberg.expressions.tree import (
    LOWER_LIMIT_OPS,
    UPPER_LIMIT_OPS,
    AlwaysFalse,
    AlwaysTrue,
    Expression,
    LiteralPredicate,
    Op,
    Predicate,
    SetPredicate,
    UnaryPredicate,
)
from aioiceberg.expressions.visitor import ExpressionRewriter, compile_filter, visit
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    PrimitiveType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)
from aioiceberg.spec.values import from_bytes

__all__ = [
    "IN_PREDICATE_LIMIT",
    "DataFileStats",
    "InclusiveMetricsEvaluator",
    "ManifestEvaluator",
    "PartitionEvaluator",
    "PartitionFieldSummaryLike",
    "StrictMetricsEvaluator",
]

# beyond this many IN values, checking each against the bounds costs more than it saves
IN_PREDICATE_LIMIT = 200


class PartitionFieldSummaryLike(Protocol):
    """One partition field's summary in a manifest-list entry."""

    @property
    def contains_null(self) -> bool | None: ...

    @property
    def contains_nan(self) -> bool | None: ...

    @property
    def lower_bound(self) -> bytes | None: ...

    @property
    def upper_bound(self) -> bytes | None: ...


class DataFileStats(Protocol):
    """The column metrics of a data (or delete) file, keyed by field id."""

    @property
    def record_count(self) -> int: ...

    @property
    def value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def null_value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def nan_value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def lower_bounds(self) -> Mapping[int, bytes] | None: ...

    @property
    def upper_bounds(self) -> Mapping[int, bytes] | None: ...


class _Unknown:
    """A bound that exists but cannot be used (undecodable, or NaN)."""


_UNKNOWN = _Unknown()
_EMPTY: Mapping[int, Any] = {}


def _fixed_width(*structs: struct.Struct) -> Callable[[bytes], Any]:
    by_size = {s.size: s for s in structs}

    def decode(data: bytes) -> Any:
        try:
            found = by_size.get(len(data))
            return _UNKNOWN if found is None else found.unpack(data)[0]
        except TypeError:  # not bytes at all: as unusable as a wrong width
            return _UNKNOWN

    return decode


# What ``from_bytes`` answers for the integer types, without its checks in sequence: these
# bounds are most of what a plan decodes (a 2000-manifest list: 4000 summary bounds a plan)
_INT32, _INT64 = struct.Struct("<i"), struct.Struct("<q")
_DECODE_INT: dict[type, Callable[[bytes], Any]] = {
    IntegerType: _fixed_width(_INT32),
    DateType: _fixed_width(_INT32),
    LongType: _fixed_width(_INT32, _INT64),  # 4 bytes: written before promotion to long
    **{
        t: _fixed_width(_INT64)
        for t in (TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
    },
}


def _decode(data: bytes | None, type_: PrimitiveType) -> Any:
    """None when absent, _UNKNOWN when unusable, else the value."""
    if data is None:
        return None
    fast = _DECODE_INT.get(type(type_))
    if fast is not None:
        return fast(data)
    try:
        value = from_bytes(data, type_)
    except (IcebergError, ValueError):
        return _UNKNOWN
    if isinstance(value, float) and math.isnan(value):
        return _UNKNOWN
    return value


class _WithoutStatsOf(ExpressionRewriter):
    __slots__ = ("_fields", "_verdict")

    def __init__(self, fields: frozenset[int], verdict: Expression) -> None:
        self._fields, self._verdict = fields, verdict

    def visit_predicate(self, pred: Predicate) -> Expression:
        return self._verdict if pred.ref.field_id in self._fields else pred


def _without_stats_of(expr: Expression, fields: frozenset[int], verdict: Expression) -> Expression:
    """``expr`` (negations pushed to the leaves) with each predicate on ``fields`` replaced
    by ``verdict``: what an evaluator answers where the stats cannot be trusted."""
    return visit(expr, _WithoutStatsOf(fields, verdict)) if fields else expr


# bounds never show that no row is != a literal, or outside a set
_NEVER_REFUTED = frozenset({Op.NOT_EQ, Op.NOT_IN})
_ORDER: dict[Op, Callable[[Any, Any], bool]] = {
    Op.LT: operator.lt,
    Op.LT_EQ: operator.le,
    Op.GT: operator.gt,
    Op.GT_EQ: operator.ge,
}


def _is_float(t: PrimitiveType) -> bool:
    return isinstance(t, FloatType | DoubleType)


# ---------------------------------------------------------------------------------------------
# Manifest list partition summaries


class ManifestEvaluator:
    """May a manifest hold rows matching the filter, judging by its partition summaries?"""

    def __init__(
        self, schema: Schema, spec: PartitionSpec, expr: Expression | str, case_sensitive: bool = True
    ) -> None:
        self.partition_filter = inclusive_projection(schema, spec, expr, case_sensitive)
        self._field_count = len(spec.fields)
        self._fn = compile_filter(self.partition_filter, _manifest_leaf)

    def eval(self, summaries: Sequence[PartitionFieldSummaryLike] | None) -> bool:
        """``summaries``: the manifest's partition field summaries in spec order (or None)."""
        if isinstance(self.partition_filter, AlwaysTrue):
            return True
        if not summaries or len(summaries) != self._field_count:
            return not isinstance(self.partition_filter, AlwaysFalse)
        return self._fn(summaries)


def _manifest_leaf(pred: Predicate) -> Callable[[Any], bool]:
    ref = pred.ref
    pos, t, op = ref.position, ref.type, pred.op

    if isinstance(pred, UnaryPredicate):
        if op is Op.IS_NULL:
            return lambda s: s[pos].contains_null is not False
        if op is Op.NOT_NULL:

            def not_null(s: Any) -> bool:
                f = s[pos]
                all_null = f.contains_null is True and f.lower_bound is None
                if all_null and _is_float(t):
                    all_null = f.contains_nan is False
                return not all_null

            return not_null
        if op is Op.IS_NAN:
            return lambda s: s[pos].contains_nan is not False
        if op is Op.NOT_NAN:

            def not_nan(s: Any) -> bool:
                f = s[pos]
                return not (f.contains_nan is True and f.contains_null is False and f.lower_bound is None)

            return not_nan
        raise ExpressionError(f"unknown predicate {pred!r}")
    if op in _NEVER_REFUTED:
        return lambda s: True

    if isinstance(pred, SetPredicate):
        values = pred.values

        def in_(s: Any) -> bool:
            f = s[pos]
            if f.lower_bound is None:
                return False
            if len(values) > IN_PREDICATE_LIMIT:
                return True
            lower = _decode(f.lower_bound, t)
            if lower is not _UNKNOWN and all(lower > v for v in values):
                return False
            upper = _decode(f.upper_bound, t)
            if upper is not None and upper is not _UNKNOWN and all(upper < v for v in values):
                return False
            return True

        return in_

    assert isinstance(pred, LiteralPredicate)
    lit = pred.value

    if op is Op.STARTS_WITH:
        n = len(lit)

        def starts_with(s: Any) -> bool:
            f = s[pos]
            if f.lower_bound is None or f.upper_bound is None:
                return False
            lower, upper = _decode(f.lower_bound, t), _decode(f.upper_bound, t)
            if lower is not _UNKNOWN and lower[:n] > lit:
                return False
            return upper is _UNKNOWN or not upper[:n] < lit

        return starts_with
    if op is Op.NOT_STARTS_WITH:
        n = len(lit)

        def not_starts_with(s: Any) -> bool:
            f = s[pos]
            if f.contains_null is not False or f.lower_bound is None or f.upper_bound is None:
                return True
            lower, upper = _decode(f.lower_bound, t), _decode(f.upper_bound, t)
            if lower is _UNKNOWN or upper is _UNKNOWN:
                return True
            return not (len(lower) >= n and lower[:n] == lit and len(upper) >= n and upper[:n] == lit)

        return not_starts_with

    check_lower, check_upper = op in UPPER_LIMIT_OPS, op in LOWER_LIMIT_OPS
    lt, gt = op is Op.LT, op is Op.GT

    def compare(s: Any) -> bool:
        f = s[pos]
        if check_lower:
            if f.lower_bound is None:
                return False  # all values are null (or NaN)
            lower = _decode(f.lower_bound, t)
            if lower is not _UNKNOWN and (lower >= lit if lt else lower > lit):
                return False
        if check_upper:
            if f.upper_bound is None:
                return False
            upper = _decode(f.upper_bound, t)
            if upper is not _UNKNOWN and (upper <= lit if gt else upper < lit):
                return False
        return True

    return compare


# ---------------------------------------------------------------------------------------------
# Partition tuples


class PartitionEvaluator:
    """May a file with this partition tuple (values in spec order) hold matching rows?"""

    def __init__(
        self, schema: Schema, spec: PartitionSpec, expr: Expression | str, case_sensitive: bool = True
    ) -> None:
        self.partition_filter = inclusive_projection(schema, spec, expr, case_sensitive)
        self._fn = compile_row_filter(self.partition_filter)

    def eval(self, partition: Sequence[Any]) -> bool:
        return self._fn(partition)


# ---------------------------------------------------------------------------------------------
# Data file metrics


class _Stats:
    __slots__ = ("lower", "nans", "nulls", "upper", "values")

    def __init__(self, f: DataFileStats) -> None:
        self.values: Mapping[int, int] = f.value_counts or _EMPTY
        self.nulls: Mapping[int, int] = f.null_value_counts or _EMPTY
        self.nans: Mapping[int, int] = f.nan_value_counts or _EMPTY
        self.lower: Mapping[int, bytes] = f.lower_bounds or _EMPTY
        self.upper: Mapping[int, bytes] = f.upper_bounds or _EMPTY

    def nulls_only(self, fid: int) -> bool:
        vc, nc = self.values.get(fid), self.nulls.get(fid)
        return bool(vc) and vc == nc

    def nans_only(self, fid: int) -> bool:
        vc, nc = self.values.get(fid), self.nans.get(fid)
        return bool(vc) and vc == nc


class InclusiveMetricsEvaluator:
    """May a data file hold a row matching the filter? False only when its stats prove not.

    Missing stats never exclude a file. ``include_empty_files`` keeps files with zero
    records (for callers that must see them, such as delete planning). Stats of the
    ``untrusted`` field ids are ignored (see ``unmapped_field_ids``).
    """

    def __init__(
        self,
        schema: Schema,
        expr: Expression | str,
        case_sensitive: bool = True,
        include_empty_files: bool = False,
        untrusted: frozenset[int] = frozenset(),
    ) -> None:
        self.expr = _without_stats_of(prepare_filter(schema, expr, case_sensitive), untrusted, AlwaysTrue())
        self.include_empty_files = include_empty_files
        self._fn = compile_filter(self.expr, _inclusive_leaf)

    def eval(self, data_file: DataFileStats) -> bool:
        count = data_file.record_count
        if count == 0 and not self.include_empty_files:
            return False
        if count is None or count < 0:
            return True  # unknown (some importers write -1)
        return self._fn(_Stats(data_file))


def _inclusive_leaf(pred: Predicate) -> Callable[[_Stats], bool]:
    ref = pred.ref
    fid, t, op = ref.field_id, ref.type, pred.op

    if isinstance(pred, UnaryPredicate):
        if op is Op.IS_NULL:
            return lambda st: st.nulls.get(fid) != 0
        if op is Op.NOT_NULL:
            return lambda st: not st.nulls_only(fid)
        if op is Op.IS_NAN:
            return lambda st: st.nans.get(fid) != 0 and not st.nulls_only(fid)
        if op is Op.NOT_NAN:
            return lambda st: not st.nans_only(fid)
        raise ExpressionError(f"unknown predicate {pred!r}")
    if op in _NEVER_REFUTED:
        return lambda st: True

    if isinstance(pred, SetPredicate):
        values = pred.values

        def in_(st: _Stats) -> bool:
            if st.nulls_only(fid) or st.nans_only(fid):
                return False
            if len(values) > IN_PREDICATE_LIMIT:
                return True
            lower = _decode(st.lower.get(fid), t)
            if lower is _UNKNOWN:
                return True
            remaining = [v for v in values if lower <= v] if lower is not None else list(values)
            if not remaining:
                return False
            upper = _decode(st.upper.get(fid), t)
            if upper is _UNKNOWN:
                return True
            if upper is not None and not any(upper >= v for v in remaining):
                return False
            return True

        return in_

    assert isinstance(pred, LiteralPredicate)
    lit = pred.value

    if op is Op.STARTS_WITH:
        n = len(lit)

        def starts_with(st: _Stats) -> bool:
            if st.nulls_only(fid):
                return False
            lower = _decode(st.lower.get(fid), t)
            if lower is not None and lower is not _UNKNOWN and lower[:n] > lit:
                return False
            upper = _decode(st.upper.get(fid), t)
            if upper is not None and upper is not _UNKNOWN and upper[:n] < lit:
                return False
            return True

        return starts_with
    if op is Op.NOT_STARTS_WITH:
        n = len(lit)

        def not_starts_with(st: _Stats) -> bool:
            nulls = st.nulls.get(fid)
            if nulls is None or nulls > 0:
                return True  # a null row matches NOT LIKE
            lower, upper = _decode(st.lower.get(fid), t), _decode(st.upper.get(fid), t)
            if lower is None or upper is None or lower is _UNKNOWN or upper is _UNKNOWN:
                return True
            # every value lies between two strings starting with the prefix: all start with it
            return not (len(lower) >= n and lower[:n] == lit and len(upper) >= n and upper[:n] == lit)

        return not_starts_with

    check_lower, check_upper = op in UPPER_LIMIT_OPS, op in LOWER_LIMIT_OPS
    lt, gt = op is Op.LT, op is Op.GT

    def compare(st: _Stats) -> bool:
        if st.nulls_only(fid) or st.nans_only(fid):
            return False
        if check_lower:
            lower = _decode(st.lower.get(fid), t)
            if lower is _UNKNOWN:
                return True
            if lower is not None and (lower >= lit if lt else lower > lit):
                return False
        if check_upper:
            upper = _decode(st.upper.get(fid), t)
            if upper is _UNKNOWN:
                return True
            if upper is not None and (upper <= lit if gt else upper < lit):
                return False
        return True

    return compare


class StrictMetricsEvaluator:
    """Must every row of a data file match the filter? True only when its stats prove it.

    Missing counts are taken as "may contain nulls / NaNs", so incomplete stats never
    claim a match (stricter than PyIceberg, which reads a missing count as zero).
    """

    def __init__(
        self,
        schema: Schema,
        expr: Expression | str,
        case_sensitive: bool = True,
        untrusted: frozenset[int] = frozenset(),
    ) -> None:
        self.expr = _without_stats_of(prepare_filter(schema, expr, case_sensitive), untrusted, AlwaysFalse())
        self._fn = compile_filter(self.expr, _strict_leaf)

    def eval(self, data_file: DataFileStats) -> bool:
        count = data_file.record_count
        if count == 0:
            return True
        if count is None or count < 0:
            return False
        return self._fn(_Stats(data_file))


def _strict_leaf(pred: Predicate) -> Callable[[_Stats], bool]:
    ref = pred.ref
    fid, t, op = ref.field_id, ref.type, pred.op
    required, is_float = ref.required, _is_float(t)

    def no_nulls(st: _Stats) -> bool:
        return required or st.nulls.get(fid) == 0

    def no_nans(st: _Stats) -> bool:
        return not is_float or st.nans.get(fid) == 0

    if isinstance(pred, UnaryPredicate):
        if op is Op.IS_NULL:
            return lambda st: st.nulls_only(fid)
        if op is Op.NOT_NULL:
            return no_nulls
        if op is Op.IS_NAN:
            return lambda st: st.nans_only(fid)
        if op is Op.NOT_NAN:
            return lambda st: no_nans(st) or st.nulls_only(fid)
        raise ExpressionError(f"unknown predicate {pred!r}")

    if isinstance(pred, SetPredicate):
        values = pred.values
        if op is Op.IN:

            def in_(st: _Stats) -> bool:
                if not (no_nulls(st) and no_nans(st)):
                    return False
                lower, upper = _decode(st.lower.get(fid), t), _decode(st.upper.get(fid), t)
                if lower is None or upper is None or lower is _UNKNOWN or upper is _UNKNOWN:
                    return False
                return bool(lower == upper and lower in values)

            return in_

        def not_in(st: _Stats) -> bool:
            if st.nulls_only(fid) or st.nans_only(fid):
                return True
            lower, upper = _decode(st.lower.get(fid), t), _decode(st.upper.get(fid), t)
            if lower is _UNKNOWN or upper is _UNKNOWN or (lower is None and upper is None):
                return False
            # every value lies in [lower, upper]: no listed value there means no row is in the list
            inside = [v for v in values if (lower is None or lower <= v) and (upper is None or v <= upper)]
            return not inside

        return not_in

    assert isinstance(pred, LiteralPredicate)
    lit = pred.value

    if op is Op.STARTS_WITH:
        n = len(lit)

        def starts_with(st: _Stats) -> bool:
            if not no_nulls(st):
                return False
            lower, upper = _decode(st.lower.get(fid), t), _decode(st.upper.get(fid), t)
            if lower is None or upper is None or lower is _UNKNOWN or upper is _UNKNOWN:
                return False
            # all values lie between two strings that start with the prefix
            return len(lower) >= n and lower[:n] == lit and len(upper) >= n and upper[:n] == lit

        return starts_with
    if op is Op.NOT_STARTS_WITH:
        n = len(lit)

        def not_starts_with(st: _Stats) -> bool:
            if st.nulls_only(fid):
                return True
            lower = _decode(st.lower.get(fid), t)
            if lower is not None and lower is not _UNKNOWN and lower[:n] > lit:
                return True
            upper = _decode(st.upper.get(fid), t)
            return upper is not None and upper is not _UNKNOWN and upper[:n] < lit

        return not_starts_with

    if op is Op.NOT_EQ:

        def not_eq(st: _Stats) -> bool:
            if st.nulls_only(fid) or st.nans_only(fid):
                return True
            lower = _decode(st.lower.get(fid), t)
            if lower is not None and lower is not _UNKNOWN and lower > lit:
                return True
            upper = _decode(st.upper.get(fid), t)
            return upper is not None and upper is not _UNKNOWN and upper < lit

        return not_eq

    if op is Op.EQ:

        def eq(st: _Stats) -> bool:
            if not (no_nulls(st) and no_nans(st)):
                return False
            lower, upper = _decode(st.lower.get(fid), t), _decode(st.upper.get(fid), t)
            # every value lies between two bounds equal to the literal
            return lower is not _UNKNOWN and upper is not _UNKNOWN and lower == lit and upper == lit

        return eq

    # every value lies in [lower, upper]: "x > lit" holds when the lower bound is above lit
    from_lower, holds = op in LOWER_LIMIT_OPS, _ORDER[op]

    def compare(st: _Stats) -> bool:
        if not (no_nulls(st) and no_nans(st)):
            return False
        bound = _decode((st.lower if from_lower else st.upper).get(fid), t)
        return bound is not None and bound is not _UNKNOWN and holds(bound, lit)

    return compare
