"""Prune a manifest on its columns, then build entries only for the survivors.

Exactness comes from the existing evaluators: partition tuples are evaluated with the
``PartitionEvaluator`` once per distinct tuple (manifests repeat few tuples), and the
inclusive metrics evaluator runs on every row that survives a vectorised prefilter. The
prefilter only drops a row when the evaluator would too: it reads integer-like bounds
(int, long, date, time, timestamps) of simple comparisons from the bound columns in
bulk, and treats anything it cannot read exactly (a missing or oddly sized bound, a
repeated key, a negative record count, any other predicate) as "may match". Its mirror,
:func:`certain`, reads the same bounds plus the value, null and NaN counts to find the rows
the evaluator surely keeps, so the evaluator runs only on the rest (most rows of a
selective plan pass every bound and cost ~9 us each in the evaluator).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aioiceberg.expressions import InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.expressions.tree import (
    LOWER_LIMIT_OPS,
    UPPER_LIMIT_OPS,
    BoundReference,
    Expression,
    LiteralPredicate,
    Op,
    Predicate,
)
from aioiceberg.expressions.visitor import BooleanExpressionVisitor, visit
from aioiceberg.spec.manifest.columnar import BoundColumn, ColumnarManifest
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.types import (
    DateType,
    IntegerType,
    LongType,
    PrimitiveType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

__all__ = ["BoundsPrefilter", "Pruned", "certain", "prefilter", "prune_columnar", "prune_rows"]

_COMPARISONS = UPPER_LIMIT_OPS | LOWER_LIMIT_OPS
Bounds = dict[tuple[int, bool, int], BoundColumn]  # (field id, upper, width) -> per row
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
    """Per row: may the row match? Only integer-like comparisons are read; the rest may."""

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


class _Certain(BoundsPrefilter):
    """Per row: does the evaluator surely keep it? Only where every predicate it must pass
    is an integer-like comparison whose counts and bounds are read exactly (anything else
    is "not sure", and the row goes to the evaluator)."""

    __slots__ = ("_counts",)

    def __init__(
        self, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
    ) -> None:
        super().__init__(cm, rows, bounds)
        self._counts: dict[tuple[str, int], BoundColumn] = {}

    def _count(self, name: str, fid: int) -> BoundColumn:
        found = self._counts.get((name, fid))
        if found is None:
            found = self._counts[(name, fid)] = self._cm.count_column(name, fid, self._rows)
        return found

    def _not_sure(self) -> np.ndarray[Any, Any]:
        return np.zeros(self._n, dtype=bool)

    def visit_true(self) -> np.ndarray[Any, Any]:
        return self._may()

    def visit_false(self) -> np.ndarray[Any, Any]:
        return self._not_sure()

    def visit_not(self, child: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return self._not_sure()

    def _only(self, name: str, fid: int, values: BoundColumn) -> np.ndarray[Any, Any]:
        """Rows where ``_Stats.nulls_only`` / ``nans_only`` may hold (or cannot be read)."""
        other = self._count(name, fid)
        unreadable = (values.state == 2) | (other.state == 2)
        both = (values.state == 1) & (other.state == 1)
        only = both & (values.values != 0) & (values.values == other.values)
        out: np.ndarray[Any, Any] = unreadable | only
        return out

    def visit_predicate(self, pred: Predicate) -> np.ndarray[Any, Any]:
        readable = _int_comparison(pred)
        if readable is None:
            return self._not_sure()
        op, ref, width, v = readable
        fid = ref.field_id
        counts = self._count("value_counts", fid)
        sure: np.ndarray[Any, Any] = ~(
            self._only("null_value_counts", fid, counts) | self._only("nan_value_counts", fid, counts)
        )
        if op in UPPER_LIMIT_OPS:
            lo = self._bound(fid, False, width)
            refuted = (lo.values >= v) if op is Op.LT else (lo.values > v)
            sure &= (lo.state == 0) | ((lo.state == 1) & ~refuted)
        if op in LOWER_LIMIT_OPS:
            hi = self._bound(fid, True, width)
            refuted = (hi.values <= v) if op is Op.GT else (hi.values < v)
            sure &= (hi.state == 0) | ((hi.state == 1) & ~refuted)
        return sure


def certain(
    expr: Expression, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
) -> np.ndarray[Any, Any]:
    """Per row of ``rows``: True only where the inclusive metrics evaluator says True.
    ``bounds``: the bound columns :func:`prefilter` read for the same rows, not read again."""
    sure: np.ndarray[Any, Any] = visit(expr, _Certain(cm, rows, bounds))
    if sure.any():
        sure &= cm.record_counts(rows) > 0  # empty files and unknown sizes: the evaluator's call
    return sure


def prefilter(
    expr: Expression, cm: ColumnarManifest, rows: np.ndarray[Any, Any], bounds: Bounds | None = None
) -> np.ndarray[Any, Any]:
    """Per row of ``rows``: False only where the inclusive metrics evaluator says False;
    the bound columns it reads are left in ``bounds`` (for :func:`certain`)."""
    may = visit(expr, BoundsPrefilter(cm, rows, bounds))
    if not may.all():
        may |= cm.record_counts(rows) < 0  # the evaluator keeps files of unknown size
    return may


def prune_columnar(
    cm: ColumnarManifest,
    part: PartitionEvaluator | None,
    metrics: InclusiveMetricsEvaluator | None,
    vectorized: bool = True,
) -> tuple[EntryRows, int, int]:
    """(surviving entries, skipped by partition, skipped by metrics) of one manifest."""
    pruned = prune_rows(cm, part, metrics, vectorized)
    return pruned.entries, len(pruned.by_partition), len(pruned.by_metrics)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What pruning a columnar manifest (or batch) kept and dropped, by row."""

    entries: EntryRows
    rows: np.ndarray[Any, Any]  # the row of each entry
    by_partition: np.ndarray[Any, Any]  # rows the partition filter dropped
    by_metrics: np.ndarray[Any, Any]  # rows the metrics dropped


def prune_rows(
    cm: ColumnarManifest,
    part: PartitionEvaluator | None,
    metrics: InclusiveMetricsEvaluator | None,
    vectorized: bool = True,
) -> Pruned:
    """Prune ``cm``'s live rows: partition tuples first, then metrics.

    ``vectorized`` False: every row goes through the per-entry evaluators (the bulk
    passes must keep exactly the same rows; tests compare the two)."""
    rows = cm.rows
    none = np.empty(0, dtype=np.int64)
    dropped_part = dropped_metrics = none
    if part is not None and len(rows):
        memo: dict[tuple[Any, ...], bool] = {}
        keep = np.empty(len(rows), dtype=bool)
        for i, p in enumerate(cm.partitions(rows)):
            verdict = memo.get(p)
            if verdict is None:
                verdict = memo[p] = part.eval(p)
            keep[i] = verdict
        dropped_part = rows[~keep]
        rows = rows[keep]
    if metrics is None or not len(rows):
        return Pruned(cm.entry_rows(rows), rows, dropped_part, none)
    bounds: Bounds = {}  # each bound column read once, for both passes over the same rows
    if vectorized:
        may = prefilter(metrics.expr, cm, rows, bounds)
        sure = certain(metrics.expr, cm, rows, bounds)[may].tolist() if may.any() else []
    else:
        may, sure = np.ones(len(rows), dtype=bool), [False] * len(rows)
    dropped_metrics = rows[~may]
    rows = rows[may]
    candidates = cm.entry_rows(rows)
    data_file = candidates.data_file  # built only for the rows the evaluator must see
    verdicts = np.fromiter(
        (s or metrics.eval(data_file(i)) for i, s in enumerate(sure)),
        dtype=bool,
        count=len(candidates),
    )
    kept = candidates.select(verdicts.tolist())
    return Pruned(kept, rows[verdicts], dropped_part, np.concatenate([dropped_metrics, rows[~verdicts]]))
