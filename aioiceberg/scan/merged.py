"""Many decoded manifests pruned as one: a warm plan's filter runs once over all their rows.

Pruning manifests one by one costs a fixed ~0.5 ms each in Python and numpy calls, so a
100k-file table of 1000-entry manifests paid ~50-70 ms a plan from memory however few
files matched. :class:`MergedColumns` lays the decoded parts of the manifests a plan reads
side by side in one row space: the bound, count and record-count columns the pruning
passes ask for are the parts' own (decoded once per part and kept there), joined once per
merge and kept with it; the passes then run once, and entries are built per part only for
the rows that survive them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from aioiceberg.expressions import InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.scan.cache import DecodedPart
from aioiceberg.scan.columnar_prune import Bounds, certain, partition_keep, prefilter, settle, unbuilt_where
from aioiceberg.spec.manifest.columnar import ArrowRead, BoundColumn, ColumnarManifest
from aioiceberg.spec.manifest.entry_rows import EntryRows

__all__ = ["MergedColumns", "PartPruned", "prune_merged"]

_Read = Callable[[list[Any]], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]


class MergedColumns:
    """The parts' rows as one row space (part k's rows follow part k-1's), offering the
    column reads of :class:`ColumnarManifest` that the pruning passes use."""

    def __init__(self, parts: Sequence[DecodedPart], sources: Sequence[object] = ()) -> None:
        self.parts = tuple(parts)
        # what the parts came from (the cache's decoded manifests): a merge is reused only
        # while a plan holds the very same ones
        self.sources = tuple(sources)
        sizes = [len(rows) for _, rows in self.parts]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.entries_read = int(self.offsets[-1])
        self.rows = np.arange(self.entries_read, dtype=np.int64)
        self._memo: dict[Any, Any] = {}

    def _joined(
        self, key: Any, one: Callable[[ColumnarManifest, np.ndarray[Any, Any]], BoundColumn]
    ) -> BoundColumn:
        found: BoundColumn | None = self._memo.get(key)
        if found is None:
            columns = [one(cm, rows) for cm, rows in self.parts]
            if columns:
                found = BoundColumn(
                    np.concatenate([c.values for c in columns]), np.concatenate([c.state for c in columns])
                )
            else:
                found = BoundColumn(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8))
            self._memo[key] = found
        return found

    def _at(self, whole: BoundColumn, rows: np.ndarray[Any, Any]) -> BoundColumn:
        if len(rows) == self.entries_read:
            return whole  # the passes ask for every row, or for rows of their own choosing
        return BoundColumn(whole.values[rows], whole.state[rows])

    def keyed_column(
        self,
        name: str,
        field_id: int,
        rows: np.ndarray[Any, Any],
        read: _Read,
        kind: Any,
        dtype: Any,
        *,
        arrow_read: ArrowRead | None = None,
    ) -> BoundColumn:
        whole = self._joined(
            ("keyed", name, field_id, kind),
            lambda cm, r: cm.keyed_column(name, field_id, r, read, kind, dtype, arrow_read=arrow_read),
        )
        return self._at(whole, rows)

    def bound_column(self, field_id: int, upper: bool, width: int, rows: np.ndarray[Any, Any]) -> BoundColumn:
        whole = self._joined(
            ("bound", field_id, upper, width), lambda cm, r: cm.bound_column(field_id, upper, width, r)
        )
        return self._at(whole, rows)

    def count_column(self, name: str, field_id: int, rows: np.ndarray[Any, Any]) -> BoundColumn:
        whole = self._joined(("count", name, field_id), lambda cm, r: cm.count_column(name, field_id, r))
        return self._at(whole, rows)

    def record_counts(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
        found: np.ndarray[Any, np.dtype[np.int64]] | None = self._memo.get("record_counts")
        if found is None:
            parts = [cm.record_counts(r) for cm, r in self.parts]
            found = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            self._memo["record_counts"] = found
        out: np.ndarray[Any, np.dtype[np.int64]] = found if len(rows) == self.entries_read else found[rows]
        return out

    def partition_groups(self) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]]:
        found: tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]] | None = self._memo.get("groups")
        if found is None:
            ids: dict[tuple[Any, ...], int] = {}  # manifests of one table share their partitions
            indices = []
            for cm, rows in self.parts:
                index, distinct = cm.partition_groups()
                to_global = np.fromiter(
                    (ids.setdefault(p, len(ids)) for p in distinct), dtype=np.int64, count=len(distinct)
                )
                indices.append(
                    to_global[index[rows]] if len(distinct) else np.zeros(len(rows), dtype=np.int64)
                )
            joined = np.concatenate(indices) if indices else np.zeros(0, dtype=np.int64)
            found = self._memo["groups"] = (joined, list(ids))
        return found

    def owners(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The part each of ``rows`` (of the merged space) belongs to."""
        owner: np.ndarray[Any, Any] = np.searchsorted(self.offsets, rows, side="right") - 1
        return owner

    @property
    def size(self) -> int:
        """Bytes of the joined columns it keeps."""
        total = 0
        for value in self._memo.values():
            if isinstance(value, BoundColumn):
                total += value.values.nbytes + value.state.nbytes
            elif isinstance(value, np.ndarray):
                total += value.nbytes
            else:
                total += value[0].nbytes
        return total


@dataclass(frozen=True, slots=True)
class PartPruned:
    """What pruning kept of one part, and how many of its rows each pass dropped."""

    entries: EntryRows
    by_partition: int
    by_metrics: int


def prune_merged(
    merged: MergedColumns,
    part: PartitionEvaluator | None,
    metrics: InclusiveMetricsEvaluator | None,
    columns: frozenset[int] | Literal["as opened"] | None,
    spec_id: int,
) -> list[PartPruned]:
    """Each part's entries kept, with the bulk passes run once over all the parts' rows and
    the per-entry evaluator only where they could not decide; parts nothing of which
    survives the passes build nothing."""
    rows = merged.rows
    k = len(merged.parts)
    # the passes only read the columns the merged object offers (see ColumnarManifest)
    cols: Any = merged
    keep = (
        partition_keep(cols, part, rows) if part is not None and len(rows) else np.ones(len(rows), dtype=bool)
    )
    may, sure = keep, keep
    if metrics is not None and keep.any():
        kept = rows[keep] if not keep.all() else rows
        bounds: Bounds = {}
        may_kept = prefilter(metrics.expr, cols, kept, bounds)
        sure_kept = certain(metrics.expr, cols, kept, bounds) & may_kept
        may = np.zeros(len(rows), dtype=bool)
        sure = np.zeros(len(rows), dtype=bool)
        may[kept] = may_kept
        sure[kept] = sure_kept
    owner = merged.owners(rows)
    by_partition = np.bincount(owner[~keep], minlength=k)
    by_metrics = np.bincount(owner[keep & ~may], minlength=k)
    candidates_at = rows[may]
    candidate_owner = owner[candidates_at]
    cuts = np.searchsorted(candidate_owner, np.arange(k + 1))
    empty = EntryRows([], spec_id)
    out: list[PartPruned] = []
    for i, (cm, part_rows) in enumerate(merged.parts):
        a, b = int(cuts[i]), int(cuts[i + 1])
        if a == b:
            out.append(PartPruned(empty, int(by_partition[i]), int(by_metrics[i])))
            continue
        here = candidates_at[a:b]
        local = part_rows[here - merged.offsets[i]]
        candidates = cm.entry_rows(local, columns)
        if metrics is None:
            out.append(PartPruned(candidates, int(by_partition[i]), int(by_metrics[i])))
            continue
        verdicts = settle(candidates, sure[here], metrics)
        dropped = int((~verdicts).sum())
        entries = unbuilt_where(candidates, verdicts) if dropped else candidates
        out.append(PartPruned(entries, int(by_partition[i]), int(by_metrics[i]) + dropped))
    return out
