"""Planning one scan: manifest list -> manifests -> pruned entries -> tasks.

:class:`Planner` holds what every plan of a scan shares (snapshot, bound filter,
evaluators); the stages that run one plan, joined by bounded streams, are in
:mod:`aioiceberg.scan.pipeline`. ``io_concurrency`` manifests are fetched at once
(sharing the FileIO's client) and decoded and pruned off the loop (``decode_workers``
threads running the columnar decoder, which releases the GIL; worker processes for the
fastavro decoder); at most ``channel_size`` decoded manifests wait for the consumer, so
memory is bounded by the manifests in flight, not by the table, when the caller consumes
tasks as they come.

Delete manifests are read first. A data file waits for the delete index only when a
delete manifest could still apply to it (its sequence number is not above every delete
manifest's); all others are yielded as soon as their manifest is pruned.

Manifests the columnar decoder read are kept in the runtime's cache as their columns with
every stat, whatever the filter (:class:`~aioiceberg.scan.cache.DecodedManifest`): a
later plan under any filter prunes them from memory, and when it needs nothing else, all
of them in one pass (:mod:`aioiceberg.scan.merged`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from aioiceberg.errors import ValidationError
from aioiceberg.expressions import ManifestEvaluator, ResidualEvaluator, parse
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.tree import AlwaysFalse, AlwaysTrue, Expression
from aioiceberg.expressions.visitor import referenced_field_ids
from aioiceberg.io.base import FileIO
from aioiceberg.scan.cache import CachedManifest, DecodedManifest, DecodedPart, estimate_size
from aioiceberg.scan.decode import (
    BatchLane,
    DecodeResult,
    PruneContext,
    collector_paused_if,
    decode_first_blocks,
    decode_part,
    joined,
    prune_decoded,
    stats_columns_for,
)
from aioiceberg.scan.manifest_select import ManifestListing, may_match
from aioiceberg.scan.merged import MergedColumns, PartPruned, prune_merged
from aioiceberg.scan.options import PlanOptions
from aioiceberg.scan.pipeline import PlanContext, PlanStream
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.scan.snapshot_select import select_snapshot
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.columnar import columnar_available
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.manifest.snapshot import listed_manifests
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import unmapped_field_ids
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema

__all__ = ["Lanes", "Planner", "manifest_cache_key"]

# Residuals memoised per partition tuple (cleared when full).
_RESIDUAL_MEMO = 4096
_MISSHAPEN = object()  # keys the residual of a partition tuple not of its spec's width
# A plan's first manifest listing at least this many entries has its first blocks (at least
# AHEAD_ROWS rows) decoded ahead of the whole (see ``Planner.load``). At 1000 entries (was
# 2000) a fresh 1% plan of 500x1000 gets its first task 94 -> 74 ms after the load (medians
# of six interleaved pairs), and ends no later.
AHEAD_MIN_ENTRIES = 1000
AHEAD_ROWS = 256
# A merge of at least this many decoded manifests is kept for the next plan (see _prune_together).
MERGE_KEEP_MIN = 16
# A manifest kept decoded with at most this many entries is pruned on the event loop (well
# under a millisecond for a selective filter); bigger ones in a worker thread.
PRUNE_ON_LOOP_MAX = 1000
# FileScanTask's checks (a tuple of deletes, start >= 0, length >= 0 or None) hold for every
# task built here, so tasks are built without them (several times faster per task).
_new_task = frozen_builder(FileScanTask, trusted=True)


@dataclass(frozen=True, slots=True)
class BulkChoice:
    """A listing, the indices its summaries may match (None: all), and those of them a
    columnar listing has not built yet (a plan builds many in a worker thread first)."""

    listing: ManifestListing
    indices: list[int] | None
    unbuilt: list[int]


def _entry_count(mf: ManifestFile) -> int | None:
    counts = (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count)
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


def _split_ranges(f: DataFile, target: int) -> list[tuple[int, int]]:
    """(start, length) ranges of about ``target`` bytes along the file's split offsets."""
    offsets = f.split_offsets
    size = f.file_size_in_bytes
    if not offsets or size <= target:
        return [(0, size)]
    points = list(offsets)
    if points != sorted(points) or points[0] < 0 or points[-1] >= size:
        return [(0, size)]  # offsets that contradict the file are ignored, not trusted
    points.append(size)
    out: list[tuple[int, int]] = []
    start = points[0]
    for end in points[1:]:
        if end - start >= target or end == size:
            out.append((start, end - start))
            start = end
    return out if out else [(0, size)]


def manifest_cache_key(io: FileIO, mf: ManifestFile) -> str:
    """What a cached manifest view is keyed by (with its length and the view): the store
    holding it, its path, and everything its entries inherit from the manifest list's row
    (content, spec, snapshot id, sequence numbers, first row id): the same path in another
    store, or listed with other inherited values, decodes to other entries."""
    inherited = (
        mf.content.value,
        mf.partition_spec_id,
        mf.added_snapshot_id,
        mf.sequence_number,
        mf.min_sequence_number,
        mf.first_row_id,
    )
    return f"{io.store_key(mf.manifest_path)}\0{mf.manifest_path}\0{inherited!r}"


class Planner:
    """Plans one snapshot of a table under one filter; ``plan_files()`` streams its tasks.

    What does not change between plans lives here (the snapshot, the bound filter, the
    evaluators and residuals, cached per spec id and partition tuple: stateless, so plans
    share them); what one plan counts and holds lives in its
    :class:`~aioiceberg.scan.pipeline.PlanContext`. ``limit`` stops planning once
    unfiltered, delete-free tasks hold that many rows; ``options`` are the knobs
    (:class:`PlanOptions`).
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        row_filter: str | Expression = "",
        selected_fields: Sequence[str] = ("*",),
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: int | dt.datetime | None = None,
        case_sensitive: bool = True,
        limit: int | None = None,
        options: PlanOptions | None = None,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
        self.options = options = options if options is not None else PlanOptions()
        self.io = io
        self.metadata = metadata
        self.snapshot: Snapshot | None = select_snapshot(metadata, snapshot_id, ref, as_of)
        # As Java and PyIceberg: time travel (a snapshot id, a time, a tag) binds and reads
        # with the snapshot's own schema; the current state and branches with the current one.
        tag = ref is not None and ref in metadata.refs and not metadata.refs[ref].is_branch
        time_travel = tag or snapshot_id is not None or as_of is not None
        self.schema: Schema = metadata.schema()
        if time_travel and self.snapshot is not None and self.snapshot.schema_id is not None:
            self.schema = metadata.schema_by_id(self.snapshot.schema_id) or self.schema
        self.specs: dict[int, PartitionSpec] = metadata.specs_by_id()
        self.unpartitioned_spec_ids = frozenset(i for i, s in self.specs.items() if not s.fields)
        self.case_sensitive = case_sensitive
        self.selected_fields = tuple(selected_fields)
        self.limit = limit
        if isinstance(row_filter, str):
            row_filter = parse(row_filter) if row_filter.strip() else AlwaysTrue()
        self.row_filter: Expression = row_filter
        # SQL's rule for NULLs: a row for which the filter is NULL is not returned
        self.bound_filter: Expression = bind_row_filter(self.schema, row_filter, case_sensitive)
        self.runtime = io.runtime
        self.columnar = options.columnar and columnar_available() and self.runtime.columnar_usable
        self.cache = options.cache if options.cache is not None else self.runtime.manifest_cache
        self.manifest_list_cache = (
            options.manifest_list_cache
            if options.manifest_list_cache is not None
            else self.runtime.manifest_list_cache
        )
        stats = None if options.include_column_stats else referenced_field_ids(self.bound_filter)
        self.prune_context = PruneContext.build(
            self.schema,
            self.specs,
            self.bound_filter,
            case_sensitive,
            stats,
            unmapped_field_ids(self.schema, metadata.properties),
            self.runtime.pause_gc,
            options.vectorized,
        )
        self._manifest_evaluators: dict[int, ManifestEvaluator | None] = {}
        self._residuals: dict[int, ResidualEvaluator] = {}
        self._residual_keys: dict[int, Callable[[tuple[Any, ...]], Any]] = {}
        self._unknown_specs: dict[int, PartitionSpec] = {}
        # one residual object per partition tuple: files of a partition share it
        self._residual_by_partition: dict[tuple[int, Any], Expression] = {}
        self.metrics = PlanMetrics()  # the last plan started (each call also has its own)

    # -- evaluators, cached per spec id --------------------------------------------------

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

    def residual(self, f: DataFile) -> Expression:
        """What of the filter the file's partition leaves for its rows, memoised per tuple of
        the partition values the filter reads (a ``ts`` range over ``day(ts), bucket(16, id)``
        has as many residuals as days, not as days times buckets)."""
        return self.residual_of(f.spec_id, f.partition)

    def residual_of(self, spec_id: int, partition: tuple[Any, ...]) -> Expression:
        """:meth:`residual` of a file of ``spec_id`` with this partition tuple."""
        if isinstance(self.bound_filter, AlwaysTrue):
            return self.bound_filter
        read = self._residual_keys.get(spec_id)
        if read is None:
            read = self._residual_key_for(spec_id)
        key = (spec_id, read(partition))
        found = self._residual_by_partition.get(key)
        if found is not None:
            return found
        residual = self._residuals[spec_id].residual_for(partition)
        if len(self._residual_by_partition) >= _RESIDUAL_MEMO:
            self._residual_by_partition.clear()
        try:
            self._residual_by_partition[key] = residual
        except TypeError:  # an unhashable partition value: not memoised
            pass
        return residual

    def _residual_key_for(self, spec_id: int) -> Callable[[tuple[Any, ...]], Any]:
        spec = self.spec(spec_id)
        ev = self._residuals[spec_id] = ResidualEvaluator(
            self.schema, spec, self.bound_filter, self.case_sensitive
        )
        width, positions = len(spec.fields), ev.positions

        def read(partition: tuple[Any, ...]) -> Any:
            if len(partition) != width:  # not the spec's shape: keyed whole, apart
                return (_MISSHAPEN, partition)
            return tuple([partition[i] for i in positions])

        self._residual_keys[spec_id] = read
        return read

    def spec(self, spec_id: int) -> PartitionSpec:
        spec = self.specs.get(spec_id)
        if spec is None:  # not in the metadata: typed as unpartitioned (built once)
            spec = self._unknown_specs.get(spec_id)
            if spec is None:
                spec = self._unknown_specs[spec_id] = PartitionSpec(spec_id, ())
        return spec

    # -- what the stages call (aioiceberg.scan.pipeline) -------------------------------

    async def manifests(self, metrics: PlanMetrics | None = None) -> Sequence[ManifestFile]:
        """The snapshot's manifests (from the shared cache when this snapshot was planned)."""
        m = metrics if metrics is not None else PlanMetrics()
        snap = self.snapshot
        if snap is None:
            return ()
        found = self.cached_manifests(m)
        if found is not None:
            return found
        key = self._listing_key(snap)

        def fetched(size: int) -> None:
            m.bytes_fetched += size

        decoded = ManifestListing(await listed_manifests(self.io, snap, fetched=fetched))
        self.manifest_list_cache.put(key, snap.snapshot_id, decoded)
        return decoded

    def _listing_key(self, snap: Snapshot) -> str:
        # A v1 snapshot naming its manifests inline has no list: its paths are the key.
        listed = snap.manifest_list if snap.manifest_list is not None else "\n".join(snap.manifests)
        return f"{self.io.store_key(listed)}\0{listed}"  # the same path in another store is another list

    def cached_manifests(self, metrics: PlanMetrics) -> Sequence[ManifestFile] | None:
        """The snapshot's manifests if the shared cache holds its list (None: not cached)."""
        snap = self.snapshot
        if snap is None:
            return ()
        found = self.manifest_list_cache.get(self._listing_key(snap), snap.snapshot_id)
        if found is not None:
            metrics.manifest_list_from_cache = True
        return found

    def cached_view(self, mf: ManifestFile) -> CachedManifest | None:
        """This plan's view of ``mf`` if the shared cache holds it."""
        return self.cache.get(manifest_cache_key(self.io, mf), mf.manifest_length, self.prune_context.key)

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

    def _summary_filters(
        self, listing: ManifestListing
    ) -> dict[int, tuple[Expression, dict[int, int], int] | None]:
        """Per spec id of the listing: what :func:`may_match` reads its manifests with."""
        out: dict[int, tuple[Expression, dict[int, int], int] | None] = {}
        for spec_id in listing.by_spec():
            ev = self._manifest_evaluator(spec_id)
            spec = self.specs.get(spec_id)
            if ev is None or spec is None:
                out[spec_id] = None
                continue
            fields = spec.partition_type(self.schema).fields
            out[spec_id] = (ev.partition_filter, {f.field_id: i for i, f in enumerate(fields)}, len(fields))
        return out

    def lanes(self, total_bytes: int) -> Lanes:
        return Lanes(self, total_bytes >= self.options.process_threshold_bytes)

    def _ahead_for(self, mf: ManifestFile, data: bytes) -> bool:
        """Whether a first manifest's first blocks are worth decoding apart: a big data
        manifest of the length its list says, without v3 row ids to assign across it."""
        return (
            mf.content == ManifestContent.DATA
            and mf.first_row_id is None
            and len(data) == mf.manifest_length
            and (_entry_count(mf) or 0) >= AHEAD_MIN_ENTRIES
        )

    def _columnar_for(self, mf: ManifestFile) -> bool:
        n = _entry_count(mf)
        return n is None or n >= self.options.columnar_min_entries

    async def load(
        self,
        mf: ManifestFile,
        ctx: PlanContext,
        early: Callable[[CachedManifest], Awaitable[None]] | None = None,
    ) -> CachedManifest:
        """The manifest's view, from the cache or fetched and decoded.

        ``early`` (given for a plan's first manifest): a big manifest's first blocks are
        decoded on their own and their view handed to ``early`` at once, then the rest, so
        the plan's first task does not wait for the whole manifest (5000 entries: ~55 ms of
        decoding on one core); the view returned then holds only the entries after those.
        The whole view is what the cache keeps.
        """
        view = self.prune_context.key
        key = manifest_cache_key(self.io, mf)
        found = self.cache.get(key, mf.manifest_length, view)
        m = ctx.metrics
        if found is not None:
            m.manifests_from_cache += 1
            m.add_entries(found.entries_read, found.skipped_by_partition, found.skipped_by_metrics)
            ctx.cached_bytes += found.size
            return found
        decoded = self.cache.get_decoded(key, mf.manifest_length)
        if decoded is None:
            # Plans running at once that miss the same manifest: one fetches and decodes it,
            # the others wait and prune what it kept, instead of each fetching and decoding
            # it again (test_scan_memory counts the reads of concurrent cold plans).
            loading = self.cache.loading(key, mf.manifest_length)
            if loading is not None:
                await loading
                decoded = self.cache.get_decoded(key, mf.manifest_length)
        if decoded is not None:
            m.manifests_from_cache += 1
            ctx.cached_bytes += decoded.size
            return await self._from_decoded(decoded, mf, ctx)
        self.cache.begin_load(key, mf.manifest_length)
        try:
            return await self._fetch_and_decode(mf, ctx, key, early)
        finally:
            self.cache.end_load(key, mf.manifest_length)

    async def _fetch_and_decode(
        self,
        mf: ManifestFile,
        ctx: PlanContext,
        key: str,
        early: Callable[[CachedManifest], Awaitable[None]] | None,
    ) -> CachedManifest:
        view = self.prune_context.key
        m = ctx.metrics
        lanes = ctx.lanes
        assert lanes is not None
        small = not self._columnar_for(mf)
        batched = lanes.columnar and small
        if batched:
            lanes.batches.fetch_started()
        started = time.perf_counter()
        try:
            # at most io_concurrency workers read at once; the listed length is only a hint
            data = await self.io.read_expecting(mf.manifest_path, mf.manifest_length)
        finally:
            if batched:
                lanes.batches.fetch_ended()
        fetch_s = time.perf_counter() - started
        m.bytes_fetched += len(data)
        columnar = lanes.columnar
        # entries handed to ``early``, the last one's path, and the view when both parts decoded
        ahead, head_last, found_whole = 0, None, None
        if early is not None and columnar and not small and self._ahead_for(mf, data):
            found_whole, ahead, head_last = await self._decode_ahead(data, mf, lanes, early, m)
        result: DecodeResult
        if found_whole is not None:
            result = found_whole
        elif columnar and small:
            result = await lanes.batches.decode(data, mf, fetch_s)  # small: decoded with its neighbours
        else:
            async with lanes.first_alone():
                result = await self.runtime.decoder(self.options.workers).decode(
                    data,
                    mf,
                    self.prune_context,
                    processes=lanes.processes,
                    thread_lane=lanes.columnar_lane if columnar else lanes.fastavro_lane,
                    columnar=columnar,
                )
        del data
        m.manifests_read += 1
        if result.in_worker_process:
            m.decoded_in_processes += 1
        if result.columnar:
            m.decoded_columnar += 1
        elif result.refused and mf.content == ManifestContent.DATA:
            lanes.fell_back()
        m.add_entries(result.entries_read, result.skipped_by_partition, result.skipped_by_metrics)
        entries = result.entries if isinstance(result.entries, EntryRows) else tuple(result.entries)
        cached = CachedManifest(
            entries,
            result.entries_read,
            result.skipped_by_partition,
            result.skipped_by_metrics,
            estimate_size(entries),
        )
        # One plan holds at most half the shared cache (what it found there counts too). A
        # plan bigger than that keeps its first manifests, which each repeat of it finds,
        # instead of evicting everything, its own first manifests included, in LRU order (a
        # repeat would find nothing); the rest of its entries are dropped once consumed.
        whole = DecodedManifest.of(result.decoded) if result.decoded is not None else None
        if whole is not None and ctx.cached_bytes + whole.size <= self.cache.max_bytes // 2:
            ctx.cached_bytes += whole.size
            self.cache.put_decoded(key, mf.manifest_length, whole)
        elif ctx.cached_bytes + cached.size <= self.cache.max_bytes // 2:
            ctx.cached_bytes += cached.size
            self.cache.put(key, mf.manifest_length, view, cached)
        if ahead:
            # the whole decode keeps what the first blocks' did, in file order, and more
            last = entries[ahead - 1].data_file.file_path if len(entries) >= ahead else None
            if last != head_last:
                raise ValidationError(
                    f"manifest {mf.manifest_path}: its first blocks decoded apart disagree with "
                    "the whole manifest"
                )
            return CachedManifest(entries[ahead:], cached.entries_read, 0, 0, cached.size)
        return cached

    async def _from_decoded(
        self, decoded: DecodedManifest, mf: ManifestFile, ctx: PlanContext
    ) -> CachedManifest:
        """The plan's view of a manifest kept decoded: pruned from its columns, on the loop
        when small (a thread hop costs more than the pruning), else in a worker thread."""
        if decoded.entries_read <= PRUNE_ON_LOOP_MAX:
            result = prune_decoded(decoded, mf, self.prune_context)
        else:
            result = await anyio.to_thread.run_sync(
                prune_decoded, decoded, mf, self.prune_context, limiter=self.runtime.prune_lane()
            )
        return self._view_of(result, ctx)

    def held_in_memory(self, data: Sequence[ManifestFile]) -> list[CachedManifest | DecodedManifest] | None:
        """Each manifest's view or whole decode from the shared cache; None unless all are."""
        held: list[CachedManifest | DecodedManifest] = []
        cache, view = self.cache, self.prune_context.key
        for mf in data:
            key = manifest_cache_key(self.io, mf)
            found: CachedManifest | DecodedManifest | None = cache.get_decoded(key, mf.manifest_length)
            if found is None:
                found = cache.get(key, mf.manifest_length, view)
                if found is None:
                    return None
            held.append(found)
        return held

    def views_from_memory(
        self, data: Sequence[ManifestFile], held: Sequence[CachedManifest | DecodedManifest], ctx: PlanContext
    ) -> list[CachedManifest]:
        """The plan's views of manifests all held in memory (see :meth:`held_in_memory`): the
        decoded ones pruned together, per partition spec, in one pass over all their rows
        (:mod:`aioiceberg.scan.merged`). Runs in a worker thread, or on the loop when small."""
        m = ctx.metrics
        pc = self.prune_context
        by_spec: dict[int, list[int]] = {}
        views: list[CachedManifest | None] = [f if isinstance(f, CachedManifest) else None for f in held]
        for i, (mf, found) in enumerate(zip(data, held, strict=True)):
            m.manifests_from_cache += 1
            ctx.cached_bytes += found.size
            if isinstance(found, DecodedManifest) and pc.vectorized:
                by_spec.setdefault(mf.partition_spec_id, []).append(i)
            elif isinstance(found, DecodedManifest):  # each entry through the evaluators
                views[i] = self._view_of(prune_decoded(found, mf, pc), ctx)
            else:
                m.add_entries(found.entries_read, found.skipped_by_partition, found.skipped_by_metrics)
        with collector_paused_if(pc.pause_gc):
            for spec_id, members in by_spec.items():
                self._prune_together(spec_id, members, data, held, views, ctx)
        out = [v for v in views if v is not None]
        assert len(out) == len(data)
        return out

    def _prune_together(
        self,
        spec_id: int,
        members: list[int],
        data: Sequence[ManifestFile],
        held: Sequence[CachedManifest | DecodedManifest],
        views: list[CachedManifest | None],
        ctx: PlanContext,
    ) -> None:
        """Prune the decoded manifests at ``members`` (all of ``spec_id``) in one pass."""
        pc = self.prune_context
        ev = pc.evaluators()
        owners: list[int] = []
        parts: list[DecodedPart] = []
        sources: list[DecodedManifest] = []
        for i in members:
            decoded = held[i]
            assert isinstance(decoded, DecodedManifest)
            sources.append(decoded)
            parts.extend(decoded.parts)
            owners.extend([i] * len(decoded.parts))
        # one merge kept per snapshot and spec, of a plan reading many manifests: merging a
        # few costs little, and a merge per distinct choice of manifests would crowd out the
        # decoded manifests themselves
        snap = self.snapshot
        keep = len(sources) >= MERGE_KEEP_MIN and snap is not None
        key = f"merged\0{spec_id}\0{self._listing_key(snap)}" if snap is not None else ""
        merged = self._merged(key, parts, sources) if keep else MergedColumns(parts, sources)
        columns = stats_columns_for(pc, data[members[0]])
        pruned = prune_merged(merged, ev.partition(spec_id), ev.metrics, columns, spec_id)
        if keep:
            self.cache.put_merged(key, merged)  # again: the columns this filter joined count now
        joined: dict[int, list[PartPruned]] = {}
        for i, one in zip(owners, pruned, strict=True):
            joined.setdefault(i, []).append(one)
        m = ctx.metrics
        for i, results in joined.items():
            decoded = held[i]
            assert isinstance(decoded, DecodedManifest)
            first = results[0].entries
            entries = (
                first
                if len(results) == 1
                else EntryRows([r for one in results for r in one.entries.rows], first.spec_id)
            )
            by_partition = sum(one.by_partition for one in results)
            by_metrics = sum(one.by_metrics for one in results)
            m.add_entries(decoded.entries_read, by_partition, by_metrics)
            views[i] = CachedManifest(entries, decoded.entries_read, by_partition, by_metrics, 0)

    def _merged(self, key: str, parts: list[DecodedPart], sources: list[DecodedManifest]) -> MergedColumns:
        """The manifests' columns side by side, reused from the shared cache while it holds a
        merge of the very same decoded manifests (a service's next query reads the columns
        the last one joined; the merge holds its sources, so their ids stay theirs)."""
        found = self.cache.get_merged(key)
        if isinstance(found, MergedColumns) and len(found.sources) == len(sources):
            if all(a is b for a, b in zip(found.sources, sources, strict=True)):
                return found
        return MergedColumns(parts, sources)

    def cached_decoded(self, mf: ManifestFile) -> DecodedManifest | None:
        return self.cache.get_decoded(manifest_cache_key(self.io, mf), mf.manifest_length)

    def _view_of(self, result: DecodeResult, ctx: PlanContext) -> CachedManifest:
        ctx.metrics.add_entries(result.entries_read, result.skipped_by_partition, result.skipped_by_metrics)
        return CachedManifest(
            result.entries, result.entries_read, result.skipped_by_partition, result.skipped_by_metrics, 0
        )

    async def _decode_ahead(
        self,
        data: bytes,
        mf: ManifestFile,
        lanes: Lanes,
        early: Callable[[CachedManifest], Awaitable[None]],
        m: PlanMetrics,
    ) -> tuple[DecodeResult | None, int, str | None]:
        """A big first manifest in two parts: its first blocks, whose view goes to ``early``
        at once, then the rest; joined, they are the whole view. (None, ahead, last) when a
        part cannot be decoded apart: the whole manifest is then decoded as any other, and
        the view returned skips the ``ahead`` entries sent (checked by the ``last`` one's path).
        """
        lane = lanes.columnar_lane
        first = await anyio.to_thread.run_sync(
            decode_first_blocks, data, mf, self.prune_context, AHEAD_ROWS, limiter=lane
        )
        if first is None:
            return None, 0, None
        head, rest_blocks = first
        ahead, last = len(head.entries), None
        if ahead:
            last = head.entries[ahead - 1].data_file.file_path
            m.entries_ahead += ahead
            await early(CachedManifest(head.entries, 0, 0, 0, 0))
        rest = await anyio.to_thread.run_sync(decode_part, rest_blocks, mf, self.prune_context, limiter=lane)
        return (joined(head, rest) if rest is not None else None), ahead, last

    def iter_plain_tasks(self, entries: Sequence[ManifestEntry]) -> Iterator[FileScanTask]:
        """One delete-free, unsplit task per entry, built as taken (of :class:`EntryRows`,
        only the data files are built, never the entries)."""
        schema, new_task, residual, spec = self.schema, _new_task, self.residual, self.spec
        files = entries.data_files() if isinstance(entries, EntryRows) else (e.data_file for e in entries)
        for f in files:
            yield new_task(f, (), residual(f), spec(f.spec_id), schema, 0, None)

    def tasks_for(self, entry: ManifestEntry, deletes: tuple[DataFile, ...]) -> list[FileScanTask]:
        f = entry.data_file
        spec = self.spec(f.spec_id)
        residual = self.residual(f)
        split_size = self.options.split_size
        if split_size is None:
            return [_new_task(f, deletes, residual, spec, self.schema, 0, None)]
        ranges = _split_ranges(f, split_size)
        if len(ranges) == 1:
            return [_new_task(f, deletes, residual, spec, self.schema, ranges[0][0], None)]
        return [_new_task(f, deletes, residual, spec, self.schema, start, length) for start, length in ranges]

    def plan_files(self, metrics: PlanMetrics | None = None) -> PlanStream:
        """Stream the tasks as they are decided (see :mod:`aioiceberg.scan.pipeline`).

        Each call counts into ``metrics`` (a fresh ``PlanMetrics`` if not given), so plans
        running at once keep theirs apart; ``self.metrics`` is the last started.
        ``async for task in planner.plan_files()`` needs nothing else: ``break``, or close
        or drop the iterator from any task, and the stages end; ``async with
        planner.plan_files() as tasks:`` runs the stages in the caller's task group instead.
        """
        m = self.metrics = metrics if metrics is not None else PlanMetrics()
        return PlanStream(PlanContext(self, m))

    def __repr__(self) -> str:
        snap = self.snapshot.snapshot_id if self.snapshot is not None else None
        return f"Planner(snapshot={snap}, filter={self.bound_filter})"


class Lanes:
    """How one plan decodes: columnar in threads (small manifests in batches) until a
    manifest needs fastavro, then fastavro (in worker processes when the plan is big
    enough) for the rest."""

    def __init__(self, scan: Planner, big: bool) -> None:
        self._scan = scan
        self._big = big
        self.columnar = scan.columnar
        self.columnar_lane = anyio.CapacityLimiter(max(1, scan.options.workers))
        runtime = scan.runtime
        self.batches = BatchLane(
            scan.prune_context, self.columnar_lane, columnar_alone=lambda: runtime.columnar_ready
        )
        self.fastavro_lane = anyio.CapacityLimiter(1)
        self.processes = False
        self._first_started = False
        self._first_done = anyio.Event()
        if not self.columnar:
            self._use_processes()

    @asynccontextmanager
    async def first_alone(self) -> AsyncIterator[None]:
        """The plan's first whole-manifest decode runs alone; the others start when it ends.

        Its tasks are the plan's first, and a second decode beside it (the same two cores,
        one GIL) only delayed them: a 1% plan of 500x1000 decoded its first 1000-entry
        manifest in 20-30 ms beside another, ~10 ms alone.
        """
        if self._first_started:
            await self._first_done.wait()
            yield
            return
        self._first_started = True
        try:
            yield
        finally:
            self._first_done.set()

    def _use_processes(self) -> None:
        workers = self._scan.options.workers
        self.processes = workers > 0 and self._big
        if self.processes:
            self._scan.runtime.decoder(workers).start()

    def fell_back(self) -> None:
        """A manifest the columnar decoder could not read: its siblings likely cannot either."""
        if self.columnar:
            self.columnar = False
            self._use_processes()
