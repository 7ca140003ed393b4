"""Choosing manifests by their partition summaries, a whole manifest list at once.

A plan of a 2000-manifest list evaluated each manifest's summaries in Python (~0.8 us each,
more with cold caches: 1.5-3.5 ms a plan), most of them to skip it. The integer-like
bounds (dates, ints, longs, times, timestamps: what ``day``, ``hour``, ``bucket`` and
``identity`` of such columns give) are read into columns once per listed snapshot and
kept with the list in the shared cache, so each plan compares them in bulk, reusing
:mod:`aioiceberg.scan.columnar_prune`'s prefilter. It only drops a manifest the
``ManifestEvaluator`` would drop too; the evaluator still decides every manifest it keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from aioiceberg.expressions.tree import Expression
from aioiceberg.expressions.visitor import visit
from aioiceberg.scan.columnar_prune import BoundsPrefilter
from aioiceberg.spec.manifest import ManifestContent, ManifestFile
from aioiceberg.spec.manifest.columnar import BoundColumn
from aioiceberg.spec.manifest.columnar_list import ManifestRows

__all__ = ["ManifestListing", "may_match"]

# Below this many manifests a plan evaluates each one: numpy's fixed costs would exceed it.
BULK_MIN_MANIFESTS = 64
_DTYPES: dict[int, str] = {4: "<i4", 8: "<i8"}


class ManifestListing(Sequence[ManifestFile]):
    """A snapshot's manifests, plus columns of their summary bounds built on first use.

    A long list decoded columnar (:class:`ManifestRows`) is read from its columns here, so
    choosing manifests builds only the rows chosen."""

    __slots__ = ("_bounds", "_by_spec", "_rows")

    def __init__(self, manifests: Iterable[ManifestFile]) -> None:
        self._rows: Sequence[ManifestFile] = (
            manifests if isinstance(manifests, ManifestRows) else tuple(manifests)
        )
        self._by_spec: dict[int, np.ndarray[Any, Any]] | None = None
        self._bounds: dict[tuple[int, int, bool, int, int], BoundColumn] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> ManifestFile: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ManifestFile, ...]: ...

    def __getitem__(self, index: int | slice) -> ManifestFile | tuple[ManifestFile, ...]:
        if isinstance(index, slice):
            return tuple(self._rows[index])
        return self._rows[index]

    def __iter__(self) -> Iterator[ManifestFile]:
        return iter(self._rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def unbuilt(self, rows: Sequence[int] | None) -> list[int]:
        """Those of ``rows`` (None: all) whose manifests are not built yet (see
        :class:`ManifestRows`); none for a listing of built manifests."""
        if not isinstance(self._rows, ManifestRows):
            return []
        return self._rows.unbuilt(range(len(self._rows)) if rows is None else rows)

    def build(self, rows: Sequence[int]) -> None:
        if isinstance(self._rows, ManifestRows):
            self._rows.build(rows)

    def has_deletes(self) -> bool:
        """Whether the listing names any delete manifest (from the column, unbuilt)."""
        rows = self._rows
        if isinstance(rows, ManifestRows):
            return rows.has_deletes()
        return any(mf.content == ManifestContent.DELETES for mf in rows)

    def total_length(self, rows: Sequence[int]) -> int:
        """The listed lengths of the manifests at ``rows`` (from the column, unbuilt)."""
        if isinstance(self._rows, ManifestRows):
            return self._rows.total_length(rows)
        return sum(self._rows[i].manifest_length for i in rows)

    def by_spec(self) -> Mapping[int, np.ndarray[Any, Any]]:
        """Indices of the manifests of each partition spec id."""
        if self._by_spec is None:
            rows = self._rows
            if isinstance(rows, ManifestRows):
                ids = rows.spec_ids()
            else:
                ids = np.fromiter((mf.partition_spec_id for mf in rows), dtype=np.int64, count=len(rows))
            # not np.unique: its first call imports numpy.ma (~10 ms) on the plan's critical path
            self._by_spec = {s: np.flatnonzero(ids == s) for s in sorted(set(ids.tolist()))}
        return self._by_spec

    def bound(self, spec_id: int, position: int, upper: bool, width: int, fields: int) -> BoundColumn:
        """One bound of partition field ``position`` for the spec's manifests, as
        :class:`BoundColumn`: state 1 where it is ``width`` bytes, 0 where absent, 2 where it
        cannot be read so (another width, or summaries not of the spec's ``fields``)."""
        key = (spec_id, position, upper, width, fields)
        found = self._bounds.get(key)
        if found is not None:
            return found
        rows = self.by_spec()[spec_id]
        bulk = None
        shaped: np.ndarray[Any, Any] | list[bool]
        if isinstance(self._rows, ManifestRows):
            bulk = self._rows.partition_bound_bytes(rows, position, upper, fields, width)
        if bulk is not None:
            shaped, lengths, joined = bulk
            raw = None
        elif isinstance(self._rows, ManifestRows):
            shaped, raw = self._rows.partition_bounds(rows, position, upper, fields)
        else:
            summaries = [self._rows[i].partitions for i in rows.tolist()]
            shaped = [s is not None and len(s) == fields for s in summaries]
            raw = [
                (s[position].upper_bound if upper else s[position].lower_bound)
                if ok and s is not None
                else None
                for s, ok in zip(summaries, shaped, strict=True)
            ]
        if raw is not None:
            lengths = np.fromiter((-1 if b is None else len(b) for b in raw), dtype=np.int64, count=len(raw))
            joined = b"".join([b for b in raw if b is not None and len(b) == width])
        readable = lengths == width
        state = np.where(lengths == -1, 0, np.where(readable, 1, 2)).astype(np.int8)
        state[~np.asarray(shaped, dtype=bool)] = 2
        values = np.zeros(len(rows), dtype=np.int64)
        if readable.any():
            values[readable] = np.frombuffer(joined, dtype=_DTYPES[width])
        found = self._bounds[key] = BoundColumn(values, state)
        return found


class _SummaryPrefilter(BoundsPrefilter):
    """The prefilter over one spec's manifests: bounds by partition field id."""

    __slots__ = ("_fields", "_listing", "_positions", "_spec_id")

    def __init__(
        self, listing: ManifestListing, spec_id: int, positions: Mapping[int, int], fields: int
    ) -> None:
        # no manifest to read columns of: ``_bound`` reads the listing's instead
        rows = listing.by_spec()[spec_id]
        self._rows, self._n, self._bounds = rows, len(rows), {}
        self._listing, self._spec_id = listing, spec_id
        self._positions, self._fields = positions, fields

    def _bound(self, fid: int, upper: bool, width: int) -> BoundColumn:
        position = self._positions.get(fid)
        if position is None:  # not a field of this spec: nothing can be read
            return BoundColumn(np.zeros(self._n, dtype=np.int64), np.full(self._n, 2, dtype=np.int8))
        return self._listing.bound(self._spec_id, position, upper, width, self._fields)


def may_match(
    listing: ManifestListing,
    spec_filters: Mapping[int, tuple[Expression, Mapping[int, int], int] | None],
) -> np.ndarray[Any, Any] | None:
    """Indices of the manifests that may match, in list order (None: all may).

    ``spec_filters``: per spec id, the partition filter its ``ManifestEvaluator`` projected,
    the position of each partition field id in the tuple, and the spec's field count (None
    for a spec whose manifests all go to the evaluator).
    """
    if len(listing) < BULK_MIN_MANIFESTS:
        return None
    may = np.ones(len(listing), dtype=bool)
    for spec_id, rows in listing.by_spec().items():
        found = spec_filters.get(spec_id)
        if found is None:
            continue
        expr, positions, fields = found
        may[rows] = visit(expr, _SummaryPrefilter(listing, spec_id, positions, fields))
    return np.flatnonzero(may)
