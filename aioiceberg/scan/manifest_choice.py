"""Which of a snapshot's manifests one scan reads: their summaries against its bound filter.

:class:`ManifestChooser` holds the scan's schema, specs and bound filter, with a manifest
evaluator per spec id (stateless, so every plan of the scan shares them); the bulk pass
over a listing's columns is :func:`~aioiceberg.scan.manifest_select.may_match`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aioiceberg.expressions import ManifestEvaluator
from aioiceberg.expressions.tree import AlwaysFalse, AlwaysTrue, Expression
from aioiceberg.scan.bound_filter import BoundFilter
from aioiceberg.scan.manifest_select import ManifestListing, may_match
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.spec.manifest import ManifestContent, ManifestFile

__all__ = ["BulkChoice", "ManifestChooser"]


@dataclass(frozen=True, slots=True)
class BulkChoice:
    """A listing, the indices its summaries may match (None: all), and those of them a
    columnar listing has not built yet (a plan builds many in a worker thread first)."""

    listing: ManifestListing
    indices: list[int] | None
    unbuilt: list[int]


class ManifestChooser:
    """Chooses the manifests a scan reads under its filter, bound once."""

    def __init__(self, bound: BoundFilter) -> None:
        self.schema = bound.schema
        self.specs = bound.specs
        self.bound_filter = bound.expr
        self.case_sensitive = bound.case_sensitive
        self._manifest_evaluators: dict[int, ManifestEvaluator | None] = {}
        self._summary_filters_by_spec: dict[int, tuple[Expression, dict[int, int], int] | None] = {}

    def _manifest_evaluator(self, spec_id: int) -> ManifestEvaluator | None:
        if spec_id not in self._manifest_evaluators:
            spec = self.specs.get(spec_id)
            if spec is None or isinstance(self.bound_filter, AlwaysTrue):
                self._manifest_evaluators[spec_id] = None
            else:
                self._manifest_evaluators[spec_id] = ManifestEvaluator(
                    self.schema, spec, self.bound_filter, self.case_sensitive
                )
        return self._manifest_evaluators[spec_id]

    def bulk_choice(self, manifests: Iterable[ManifestFile]) -> BulkChoice:
        """What the summaries leave of the listing, in bulk, before ``select`` reads them."""
        listing = manifests if isinstance(manifests, ManifestListing) else ManifestListing(manifests)
        if isinstance(self.bound_filter, AlwaysFalse):
            return BulkChoice(listing, [], [])
        chosen = None
        if not isinstance(self.bound_filter, AlwaysTrue):
            found = may_match(listing, self._summary_filters(listing))
            chosen = None if found is None else found.tolist()
        return BulkChoice(listing, chosen, listing.unbuilt(chosen))

    def select(
        self, manifests: Iterable[ManifestFile] | BulkChoice, m: PlanMetrics
    ) -> tuple[list[ManifestFile], list[ManifestFile]]:
        """Drop manifests the summaries exclude and delete manifests older than all data."""
        data: list[ManifestFile] = []
        deletes: list[ManifestFile] = []
        choice = manifests if isinstance(manifests, BulkChoice) else self.bulk_choice(manifests)
        listing = choice.listing
        m.manifests_total += len(listing)
        if isinstance(self.bound_filter, AlwaysFalse):
            m.manifests_skipped_by_summaries += len(listing)
            return [], []
        candidates: Sequence[ManifestFile] = listing
        if choice.indices is not None:
            if choice.unbuilt:  # the few rows kept, built together from their own values
                listing.build(choice.unbuilt)
            candidates = [listing[i] for i in choice.indices]
            m.manifests_skipped_by_summaries += len(listing) - len(candidates)
        for mf in candidates:
            if not self._reads(mf):
                m.manifests_skipped_by_summaries += 1
                continue
            (deletes if mf.content == ManifestContent.DELETES else data).append(mf)
        min_data_seq = min((mf.min_sequence_number or 0 for mf in data), default=0)
        kept = [mf for mf in deletes if (mf.sequence_number or 0) >= min_data_seq]
        m.delete_manifests_skipped_by_sequence = len(deletes) - len(kept)
        if not data:  # deletes without data to apply to need no reading
            m.delete_manifests_skipped_by_sequence += len(kept)
            kept = []
        return data, kept

    def select_first(
        self, choice: BulkChoice, m: PlanMetrics, most: int
    ) -> tuple[ManifestFile, list[int]] | None:
        """What :meth:`select` chooses, in two steps, for a listing of data manifests only:
        the first manifest the plan reads, found building at most ``most`` rows, and the rows
        after it (for :meth:`select_rest`). The plan's first request then waits for no more;
        a long list's other rows are built meanwhile (2000: ~10 ms). None (nothing counted)
        when the listing has delete manifests (their index goes first) or no such row."""
        listing = choice.listing
        if isinstance(self.bound_filter, AlwaysFalse) or listing.has_deletes():
            return None
        indices: Sequence[int] = range(len(listing)) if choice.indices is None else choice.indices
        for k, i in enumerate(indices[:most]):
            mf = listing[i]
            if self._reads(mf):
                m.manifests_total += len(listing)
                m.manifests_skipped_by_summaries += len(listing) - len(indices) + k
                return mf, list(indices[k + 1 :])
        return None

    def select_rest(
        self, listing: ManifestListing, rows: Sequence[int], m: PlanMetrics
    ) -> list[ManifestFile]:
        """The manifests :meth:`select_first` left at ``rows`` that the plan reads."""
        kept = []
        for i in rows:
            mf = listing[i]
            if self._reads(mf):
                kept.append(mf)
            else:
                m.manifests_skipped_by_summaries += 1
        return kept

    def _reads(self, mf: ManifestFile) -> bool:
        """Whether the plan reads ``mf``: its summaries may match, and it lists live files."""
        ev = self._manifest_evaluator(mf.partition_spec_id)
        if ev is not None and not ev.eval(mf.partitions):
            return False
        return mf.has_added_files() or mf.has_existing_files()

    def prepare(self, spec_ids: Iterable[int]) -> None:
        """Build what choosing reads for these specs (their manifest evaluators, the partition
        fields' positions): asked while a plan's manifest list is in flight, so its first
        choice does not (~0.2 ms, more in a fresh process)."""
        for spec_id in spec_ids:
            self._summary_filter(spec_id)

    def _summary_filters(
        self, listing: ManifestListing
    ) -> dict[int, tuple[Expression, dict[int, int], int] | None]:
        """Per spec id of the listing: what :func:`may_match` reads its manifests with."""
        return {spec_id: self._summary_filter(spec_id) for spec_id in listing.by_spec()}

    def _summary_filter(self, spec_id: int) -> tuple[Expression, dict[int, int], int] | None:
        if spec_id not in self._summary_filters_by_spec:
            ev = self._manifest_evaluator(spec_id)
            spec = self.specs.get(spec_id)
            found = None
            if ev is not None and spec is not None:
                fields = spec.partition_type(self.schema).fields
                found = (ev.partition_filter, {f.field_id: i for i, f in enumerate(fields)}, len(fields))
            self._summary_filters_by_spec[spec_id] = found
        return self._summary_filters_by_spec[spec_id]
