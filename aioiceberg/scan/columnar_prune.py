"""Prune a manifest on its columns, then build entries only for the survivors.

Exactness comes from the existing evaluators: partition tuples are evaluated with the
``PartitionEvaluator`` once per distinct tuple (manifests repeat few tuples), and the
inclusive metrics evaluator runs on every row the bulk passes leave undecided. Both passes
read bounds and counts of every type and predicate the evaluator handles in bulk
(:mod:`aioiceberg.scan.bound_arrays` decodes and compares them as it does): the prefilter
drops a row only where the evaluator surely drops it, and its mirror :func:`certain` claims
a row only where the evaluator surely keeps it, so the evaluator runs on the rest. Anything
not read exactly (a bound of another width, a repeated key, a decimal beyond int64, a
negative record count) is left to the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from aioiceberg.expressions import InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.expressions.evaluators import IN_PREDICATE_LIMIT
from aioiceberg.expressions.tree import (
    LOWER_LIMIT_OPS,
    UPPER_LIMIT_OPS,
    BoundReference,
    Expression,
    LiteralPredicate,
    Op,
    Predicate,
    SetPredicate,
    UnaryPredicate,
)
from aioiceberg.expressions.visitor import BooleanExpressionVisitor, rewrite_not, visit
from aioiceberg.scan.bound_arrays import (
    BoundKind,
    bound_kind,
    compare,
    prefix_above,
    prefix_below,
    starts_with,
    surely_in,
)
from aioiceberg.spec.manifest.columnar import BoundColumn, ColumnarManifest, ColumnarRows
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.types import (
    DateType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

__all__ = [
    "BoundsPrefilter",
    "MetricsPrefilter",
    "Pruned",
    "certain",
    "partition_keep",
    "prefilter",
    "prune_columnar",
    "prune_rows",
]

_COMPARISONS = UPPER_LIMIT_OPS | LOWER_LIMIT_OPS
# what one pruning pass reads, kept for the next over the same rows: bound and count columns
# (BoundColumn) by (field id, upper, width) or (map name, field id, kind), leaf verdicts by
# ("leaf", predicate)
Bounds = dict[Any, Any]
_NEVER_REFUTED = frozenset({Op.NOT_EQ, Op.NOT_IN})  # bounds never show no row is != x, or outside a set
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _width(t: PrimitiveType) -> int | None:
    if isinstance(t, LongType | TimestampType | TimestamptzType | TimeType):
        return 8
    if isinstance(t, IntegerType | DateType):
        return 4
    return None


def _int_comparison(pred: Predicate) -> tuple[Op, BoundReference, int, int] | None:
    """(op, reference, bound width, literal) of a comparison whose bounds are read in bulk:
    ``<, <=, >, >=, =`` of an integer-like column with an int64 literal; else None."""
    op = pred.op
    if op not in _COMPARISONS or not isinstance(pred, LiteralPredicate):
        return None
    width = _width(pred.ref.type)
    v = pred.value
    if width is None or not isinstance(v, int) or isinstance(v, bool) or not _INT64_MIN <= v <= _INT64_MAX:
        return None
    return op, pred.ref, width, v


class BoundsPrefilter(BooleanExpressionVisitor["np.ndarray[Any, Any]"]):
    """Per row: may the row match? Only integer-like comparisons are read; the rest may.

    Sound for both the metrics and the manifest evaluator (it reads bounds only), which is
    why manifest selection builds on it; manifest entries use :class:`MetricsPrefilter`."""

    __slots__ = ("_bounds", "_cm", "_n", "_rows")

    def __init__(
        self, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
    ) -> None:
        self._cm, self._rows, self._n = cm, rows, len(rows)
        self._bounds: Bounds = {} if bounds is None else bounds

    def _bound(self, fid: int, upper: bool, width: int) -> BoundColumn:
        key = (fid, upper, width)
        found = self._bounds.get(key)
        if found is None:
            found = self._bounds[key] = self._cm.bound_column(fid, upper, width, self._rows)
        return found

    def _may(self) -> np.ndarray[Any, Any]:
        return np.ones(self._n, dtype=bool)

    def visit_true(self) -> np.ndarray[Any, Any]:
        return self._may()

    def visit_false(self) -> np.ndarray[Any, Any]:
        return self._may()

    def visit_not(self, child: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return self._may()

    def visit_and(self, left: np.ndarray[Any, Any], right: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = left & right
        return out

    def visit_or(self, left: np.ndarray[Any, Any], right: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = left | right
        return out

    def visit_predicate(self, pred: Predicate) -> np.ndarray[Any, Any]:
        readable = _int_comparison(pred)
        if readable is None:
            return self._may()
        op, ref, width, v = readable
        n = self._n
        drop = np.zeros(n, dtype=bool)
        opaque = np.zeros(n, dtype=bool)
        if op in UPPER_LIMIT_OPS:
            lo = self._bound(ref.field_id, False, width)
            opaque |= lo.state == 2
            drop |= (lo.state == 1) & ((lo.values >= v) if op is Op.LT else (lo.values > v))
        if op in LOWER_LIMIT_OPS:
            hi = self._bound(ref.field_id, True, width)
            opaque |= hi.state == 2
            drop |= (hi.state == 1) & ((hi.values <= v) if op is Op.GT else (hi.values < v))
        out: np.ndarray[Any, Any] = ~(drop & ~opaque)
        return out


class _Leaves:
    """Per predicate of the evaluator's (NOT-free) filter: the rows whose stats surely make
    its leaf False, and those whose stats surely make it True, read in bulk.

    Each rule mirrors ``_inclusive_leaf`` branch for branch, on the same decoded values
    (see :mod:`aioiceberg.scan.bound_arrays`). A bound or count that cannot be read (state
    2: another width, a null, a repeated key) is in neither set, unless every value it could
    have leads to the same verdict. Columns and verdicts are kept in ``memo`` so the
    prefilter and :func:`certain` read them once.
    """

    __slots__ = ("_cm", "_memo", "_n", "_rows")

    def __init__(self, cm: ColumnarManifest, rows: np.ndarray[Any, Any], memo: Bounds) -> None:
        self._cm, self._rows, self._n, self._memo = cm, rows, len(rows), memo

    def _column(self, name: str, fid: int, kind: BoundKind) -> BoundColumn:
        key = (name, fid, kind.key)
        found = self._memo.get(key)
        if found is None:
            found = self._cm.keyed_column(
                name, fid, self._rows, kind.read, kind.key, kind.dtype, arrow_read=kind.bulk
            )
            self._memo[key] = found
        assert isinstance(found, BoundColumn)
        return found

    def _count(self, name: str, fid: int) -> BoundColumn:
        key = (name, fid, "count")
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._cm.count_column(name, fid, self._rows)
        assert isinstance(found, BoundColumn)
        return found

    def _only(self, name: str, fid: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``_Stats.nulls_only`` / ``nans_only`` (``bool(vc) and vc == nc``): (yes, no)."""
        vc, nc = self._count("value_counts", fid), self._count(name, fid)
        vc_some = (vc.state == 1) & (vc.values != 0)
        yes = vc_some & (nc.state == 1) & (nc.values == vc.values)
        no = (vc.state == 0) | ((vc.state == 1) & (vc.values == 0))
        no |= vc_some & ((nc.state == 0) | ((nc.state == 1) & (nc.values != vc.values)))
        return yes, no

    def verdicts(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(surely False, surely True) per row for ``pred``'s leaf."""
        key = ("leaf", pred)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._verdicts(pred)
        assert isinstance(found, tuple)
        return found

    def _verdicts(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        n, op, fid = self._n, pred.op, pred.ref.field_id
        none, every = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        if isinstance(pred, UnaryPredicate):
            if op is Op.IS_NULL or op is Op.IS_NAN:
                counts = self._count("null_value_counts" if op is Op.IS_NULL else "nan_value_counts", fid)
                zero = (counts.state == 1) & (counts.values == 0)
                nonzero = (counts.state == 0) | ((counts.state == 1) & (counts.values != 0))
                if op is Op.IS_NULL:
                    return zero, nonzero
                nulls_yes, nulls_no = self._only("null_value_counts", fid)
                return zero | nulls_yes, nonzero & nulls_no
            yes, no = self._only("null_value_counts" if op is Op.NOT_NULL else "nan_value_counts", fid)
            return yes, no
        if op in _NEVER_REFUTED:
            return none, every
        if op is Op.NOT_STARTS_WITH:
            return self._not_starts_with(pred)
        nulls_yes, nulls_no = self._only("null_value_counts", fid)
        if op is Op.STARTS_WITH:
            false, true = self._starts_with(pred)
            return nulls_yes | false, nulls_no & true
        nans_yes, nans_no = self._only("nan_value_counts", fid)
        only_yes, only_no = nulls_yes | nans_yes, nulls_no & nans_no
        if isinstance(pred, SetPredicate):
            if len(pred.values) > IN_PREDICATE_LIMIT:
                return only_yes, only_no
            false, true = self._in(pred)
        else:
            false, true = self._compare(pred)
        return only_yes | false, only_no & true

    def _bounds(
        self, pred: Predicate, upper: bool
    ) -> tuple[BoundKind | None, np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], Any]:
        """A bound's (kind, values, absent, usable, unknown) rows: absent is no bound (the
        evaluator skips the check), usable a value compared in bulk, unknown a NaN (the
        evaluator's unknown bound); the other rows cannot be read here."""
        kind = bound_kind(pred.ref.type)
        name = "upper_bounds" if upper else "lower_bounds"
        if kind is None:
            col = self._cm.keyed_column(name, pred.ref.field_id, self._rows, _unread, ("unread",), np.int8)
            no = np.zeros(self._n, dtype=bool)
            return None, col.values, col.state == 0, no, no
        col = self._column(name, pred.ref.field_id, kind)
        usable = col.state == 1
        unknown = np.zeros(self._n, dtype=bool)
        if kind.floating:
            unknown = usable & np.isnan(col.values)
            usable &= ~unknown
        return kind, col.values, col.state == 0, usable, unknown

    def _compare(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``<, <=, >, >=, =``: an unknown bound keeps the row at once; a usable one may
        refute; the lower bound is checked before the upper."""
        assert isinstance(pred, LiteralPredicate)
        op, n = pred.op, self._n
        false, true = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        passed = np.ones(n, dtype=bool)  # rows the checks so far surely let through
        for upper in (False, True):
            if (op in UPPER_LIMIT_OPS) if not upper else (op in LOWER_LIMIT_OPS):
                kind, values, absent, usable, unknown = self._bounds(pred, upper)
                lit = None if kind is None else kind.literal(pred.value)
                if lit is None:
                    usable = np.zeros(n, dtype=bool)
                refuted = np.zeros(n, dtype=bool)
                if usable.any():
                    assert kind is not None
                    test = ("ge" if op is Op.LT else "gt") if not upper else ("le" if op is Op.GT else "lt")
                    refuted[usable] = compare(values[usable], test, lit, kind)
                true |= passed & unknown
                false |= passed & usable & refuted
                passed &= absent | (usable & ~refuted)
        return false, true | passed

    def _in(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """IN: is some listed value within [lower, upper]? An unknown lower bound keeps the
        row; with no value at or above the lower bound it is dropped before the upper is
        read; an unknown upper bound then keeps it."""
        assert isinstance(pred, SetPredicate)
        n, k = self._n, len(pred.values)
        no = np.zeros(n, dtype=bool)
        kind, lo_values, lo_absent, lo_usable, lo_unknown = self._bounds(pred, False)
        _, hi_values, hi_absent, hi_usable, hi_unknown = self._bounds(pred, True)
        listed = None if kind is None else surely_in(kind, pred.values)
        if listed is None:
            lo_usable = hi_usable = no
            below = above = None
        else:
            below, above = listed
        first = np.zeros(n, dtype=np.int64)  # index of the first listed value >= the lower bound
        if lo_usable.any():
            assert below is not None
            first[lo_usable] = np.searchsorted(below, lo_values[lo_usable], "left")
        last = np.full(n, k, dtype=np.int64)  # how many listed values are <= the upper bound
        if hi_usable.any():
            assert above is not None
            last[hi_usable] = np.searchsorted(above, hi_values[hi_usable], "right")
        lo_read = lo_absent | lo_usable
        hi_read = hi_absent | hi_usable | hi_unknown
        false = lo_read & ((first >= k) | (hi_read & (first >= last)))
        true = lo_unknown | (lo_read & hi_read & (first < last))
        return false, true

    def _string_bounds(
        self, pred: Predicate, upper: bool
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], bytes | None]:
        """(values, absent, usable, prefix as UTF-8) of a LIKE's bound."""
        kind, values, absent, usable, _ = self._bounds(pred, upper)
        prefix = None
        if isinstance(pred.ref.type, StringType) and isinstance(pred, LiteralPredicate) and kind is not None:
            prefix = kind.literal(pred.value)
        if prefix is None:
            usable = np.zeros(self._n, dtype=bool)
        return values, absent, usable, prefix

    def _starts_with(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """LIKE 'p%': a bound refutes when its first len(p) characters sort past p; bounds
        that cannot be read only refute nothing."""
        n = self._n
        false, true = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        for upper in (False, True):
            values, absent, usable, prefix = self._string_bounds(pred, upper)
            refuted = np.zeros(n, dtype=bool)
            if usable.any():
                assert prefix is not None
                test = prefix_below if upper else prefix_above
                refuted[usable] = test(values[usable], prefix)
            false |= usable & refuted
            true &= absent | (usable & ~refuted)
        return false, true

    def _not_starts_with(self, pred: Predicate) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """NOT LIKE 'p%': dropped only when no value is null and both bounds start with p."""
        nulls = self._count("null_value_counts", pred.ref.field_id)
        may_null = (nulls.state == 0) | ((nulls.state == 1) & (nulls.values > 0))
        no_null = (nulls.state == 1) & (nulls.values <= 0)
        lo_values, lo_absent, lo_usable, prefix = self._string_bounds(pred, False)
        hi_values, hi_absent, hi_usable, _ = self._string_bounds(pred, True)
        both = lo_usable & hi_usable
        inside = np.zeros(self._n, dtype=bool)
        if both.any():
            assert prefix is not None
            inside[both] = starts_with(lo_values[both], prefix) & starts_with(hi_values[both], prefix)
        false = no_null & inside
        true = may_null | (no_null & (lo_absent | hi_absent | (both & ~inside)))
        return false, true


def _unread(raw: list[Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A reading of bounds that decodes none: only whether each row has one."""
    return np.zeros(len(raw), dtype=bool), np.zeros(0, dtype=np.int8)


class _MetricsVisitor(BooleanExpressionVisitor["np.ndarray[Any, Any]"]):
    """A pass over the evaluator's filter, leaf verdicts from :class:`_Leaves`; AND and OR
    combine as the evaluator's closures do (NOT never reaches it: see :func:`_not_free`)."""

    __slots__ = ("_leaves", "_n")

    def __init__(self, cm: ColumnarManifest, rows: np.ndarray[Any, Any], memo: Bounds) -> None:
        self._leaves, self._n = _Leaves(cm, rows, memo), len(rows)

    def visit_and(self, left: np.ndarray[Any, Any], right: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = left & right
        return out

    def visit_or(self, left: np.ndarray[Any, Any], right: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = left | right
        return out


class MetricsPrefilter(_MetricsVisitor):
    """Per row: may the inclusive metrics evaluator keep it? False only where it surely drops it."""

    __slots__ = ()

    def visit_true(self) -> np.ndarray[Any, Any]:
        return np.ones(self._n, dtype=bool)

    def visit_false(self) -> np.ndarray[Any, Any]:
        return np.zeros(self._n, dtype=bool)

    def visit_not(self, child: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.ones(self._n, dtype=bool)

    def visit_predicate(self, pred: Predicate) -> np.ndarray[Any, Any]:
        false, _ = self._leaves.verdicts(pred)
        return ~false


class _Certain(_MetricsVisitor):
    """Per row: does the evaluator surely keep it? True only where every path it takes says so."""

    __slots__ = ()

    def visit_true(self) -> np.ndarray[Any, Any]:
        return np.ones(self._n, dtype=bool)

    def visit_false(self) -> np.ndarray[Any, Any]:
        return np.zeros(self._n, dtype=bool)

    def visit_not(self, child: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.zeros(self._n, dtype=bool)

    def visit_predicate(self, pred: Predicate) -> np.ndarray[Any, Any]:
        _, true = self._leaves.verdicts(pred)
        return true.copy()


class _HasNot(BooleanExpressionVisitor[bool]):
    __slots__ = ()

    def visit_true(self) -> bool:
        return False

    def visit_false(self) -> bool:
        return False

    def visit_not(self, child: bool) -> bool:
        return True

    def visit_and(self, left: bool, right: bool) -> bool:
        return left or right

    def visit_or(self, left: bool, right: bool) -> bool:
        return left or right

    def visit_predicate(self, pred: Predicate) -> bool:
        return False


def _not_free(expr: Expression) -> Expression:
    """``expr`` as the evaluator compiles it: NOT pushed into the predicates (an inclusive
    verdict is not negated: ``NOT (x < 5)`` is decided as ``x >= 5``)."""
    return rewrite_not(expr) if visit(expr, _HasNot()) else expr


def certain(
    expr: Expression, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
) -> np.ndarray[Any, Any]:
    """Per row of ``rows``: True only where the inclusive metrics evaluator says True.
    ``bounds``: what :func:`prefilter` read for the same rows, not read again."""
    memo: Bounds = {} if bounds is None else bounds
    sure: np.ndarray[Any, Any] = visit(_not_free(expr), _Certain(cm, rows, memo))
    if sure.any():
        sure &= cm.record_counts(rows) > 0  # empty files and unknown sizes: the evaluator's call
    return sure


def prefilter(
    expr: Expression, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
) -> np.ndarray[Any, Any]:
    """Per row of ``rows``: False only where the inclusive metrics evaluator says False;
    the columns and verdicts it reads are left in ``bounds`` (for :func:`certain`)."""
    memo: Bounds = {} if bounds is None else bounds
    may: np.ndarray[Any, Any] = visit(_not_free(expr), MetricsPrefilter(cm, rows, memo))
    if not may.all():
        may |= cm.record_counts(rows) < 0  # the evaluator keeps files of unknown size
    return may


def prune_columnar(
    cm: ColumnarManifest,
    part: PartitionEvaluator | None,
    metrics: InclusiveMetricsEvaluator | None,
    vectorized: bool = True,
    rows: np.ndarray[Any, Any] | None = None,
    columns: frozenset[int] | Literal["as opened"] | None = "as opened",
) -> tuple[EntryRows, int, int]:
    """(surviving entries, skipped by partition, skipped by metrics) of one manifest."""
    pruned = prune_rows(cm, part, metrics, vectorized, rows, columns)
    return pruned.entries, len(pruned.by_partition), len(pruned.by_metrics)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What pruning a columnar manifest (or batch) kept and dropped, by row."""

    entries: EntryRows
    rows: np.ndarray[Any, Any]  # the row of each entry
    by_partition: np.ndarray[Any, Any]  # rows the partition filter dropped
    by_metrics: np.ndarray[Any, Any]  # rows the metrics dropped


def partition_keep(
    cm: ColumnarManifest, part: PartitionEvaluator, rows: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Per row of ``rows``: does its partition tuple pass? Each distinct tuple is evaluated
    once and the verdicts spread to the rows in bulk."""
    index, uniques = cm.partition_groups()
    verdicts = np.fromiter((part.eval(p) for p in uniques), dtype=bool, count=len(uniques))
    keep: np.ndarray[Any, Any] = verdicts[index[rows]] if len(uniques) else np.ones(len(rows), dtype=bool)
    return keep


def prune_rows(
    cm: ColumnarManifest,
    part: PartitionEvaluator | None,
    metrics: InclusiveMetricsEvaluator | None,
    vectorized: bool = True,
    rows: np.ndarray[Any, Any] | None = None,
    columns: frozenset[int] | Literal["as opened"] | None = "as opened",
) -> Pruned:
    """Prune ``rows`` of ``cm`` (default: its live rows): partition tuples first, then metrics.
    The entries kept carry the metrics of ``columns`` (see :meth:`ColumnarManifest.entry_rows`).

    ``vectorized`` False: every row goes through the per-entry evaluators (the bulk
    passes must keep exactly the same rows; tests compare the two)."""
    rows = cm.rows if rows is None else rows
    none = np.empty(0, dtype=np.int64)
    dropped_part = dropped_metrics = none
    if part is not None and len(rows):
        if vectorized:
            keep = partition_keep(cm, part, rows)
        else:
            keep = np.fromiter((part.eval(p) for p in cm.partitions(rows)), dtype=bool, count=len(rows))
        dropped_part = rows[~keep]
        rows = rows[keep]
    if metrics is None or not len(rows):
        return Pruned(cm.entry_rows(rows, columns), rows, dropped_part, none)
    bounds: Bounds = {}  # each bound column read once, for both passes over the same rows
    if vectorized:
        may = prefilter(metrics.expr, cm, rows, bounds)
        sure = certain(metrics.expr, cm, rows, bounds)[may].tolist() if may.any() else []
    else:
        may, sure = np.ones(len(rows), dtype=bool), [False] * len(rows)
    dropped_metrics = rows[~may]
    rows = rows[may]
    candidates = cm.entry_rows(rows, columns)
    verdicts = settle(candidates, np.asarray(sure, dtype=bool), metrics)
    kept = unbuilt_where(candidates, verdicts)
    return Pruned(kept, rows[verdicts], dropped_part, np.concatenate([dropped_metrics, rows[~verdicts]]))


def settle(
    candidates: EntryRows, sure: np.ndarray[Any, Any], metrics: InclusiveMetricsEvaluator
) -> np.ndarray[Any, Any]:
    """Per candidate: kept? ``sure`` ones are; the others go through the per-entry evaluator,
    their rows (and data files) built for them alone."""
    verdicts = sure.copy()
    doubtful = np.flatnonzero(~sure).tolist()
    if len(doubtful) == len(candidates):  # every row: built once, and kept built
        data_file = candidates.data_file
        for i in doubtful:
            verdicts[i] = metrics.eval(data_file(i))
    elif doubtful:
        built = EntryRows(candidates.rows_at(doubtful), candidates.spec_id)
        for j, i in enumerate(doubtful):
            verdicts[i] = metrics.eval(built.data_file(j))
    return verdicts


def unbuilt_where(candidates: EntryRows, keep: np.ndarray[Any, Any]) -> EntryRows:
    """The candidates ``keep`` says, left unbuilt when they are."""
    if isinstance(candidates, ColumnarRows) and not candidates.built:
        return candidates.where(keep)
    return candidates.select(keep.tolist())
