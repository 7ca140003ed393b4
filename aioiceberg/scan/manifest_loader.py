"""One scan's manifests, fetched and decoded or found in the runtime's caches.

:class:`ManifestLoader` holds what every plan of a scan loads with (its FileIO, snapshot,
caches, prune context, runtime and options); what one plan counts and holds while loading
is its :class:`LoadState` (the pipeline's ``PlanContext`` is one). ``io_concurrency``
manifests are fetched at once (sharing the FileIO's client) and decoded and pruned off
the loop (:class:`Lanes`: threads running the columnar decoder, which releases the GIL;
worker processes for the fastavro decoder).

Manifests the columnar decoder read are kept in the runtime's cache as their columns with
every stat, whatever the filter (:class:`~aioiceberg.scan.cache.DecodedManifest`): a
later plan under any filter prunes them from memory, and when it needs nothing else, all
of them in one pass (:mod:`aioiceberg.scan.merged`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from aioiceberg.errors import ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.scan.cache import (
    CachedManifest,
    DecodedManifest,
    DecodedPart,
    ManifestCache,
    ManifestListCache,
    estimate_size,
    min_size,
)
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
from aioiceberg.scan.manifest_select import ManifestListing
from aioiceberg.scan.merged import MergedColumns, PartPruned, prune_merged
from aioiceberg.scan.options import PlanOptions
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.spec.manifest import ManifestContent, ManifestFile
from aioiceberg.spec.manifest.avro_blocks import first_block_rows
from aioiceberg.spec.manifest.columnar import ColumnarRows, joined_rows
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.manifest.native_decode import native_available
from aioiceberg.spec.manifest.snapshot import listed_manifests
from aioiceberg.spec.metadata import Snapshot

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime

__all__ = ["AHEAD_MIN_ENTRIES", "AHEAD_ROWS", "Lanes", "LoadState", "ManifestLoader", "manifest_cache_key"]

# A plan's first manifest listing at least this many entries has its first blocks (at least
# AHEAD_ROWS rows) decoded ahead of the whole (see ``ManifestLoader.load``). At 1000 entries (was
# 2000) a fresh 1% plan of 500x1000 gets its first task 94 -> 74 ms after the load (medians
# of six interleaved pairs), and ends no later.
AHEAD_MIN_ENTRIES = 1000
AHEAD_ROWS = 256
# A merge of at least this many decoded manifests is kept for the next plan (see _prune_together).
MERGE_KEEP_MIN = 16
# A manifest's view is kept as rows (when its columns did not fit) only if it holds under
# 1 / ROWS_KEPT_BELOW of the manifest's entries: a selective filter's view, cheap to build.
ROWS_KEPT_BELOW = 4
# Manifests up to this many entries are decoded together with those waiting (see
# _joins_neighbours); for polars, only in blocks of at least BATCH_LANE_MIN_BLOCK_ROWS (the
# first block's count). Interleaved runs, 4000x500 columnar: 4.51-4.63 s -> ~4.0 s, 7.6 -> 6.2
# CPU-s.
BATCH_LANE_MAX_ENTRIES = 1000
BATCH_LANE_MIN_BLOCK_ROWS = 16
# A manifest kept decoded with at most this many entries is pruned on the event loop (well
# under a millisecond for a selective filter); bigger ones in a worker thread.
PRUNE_ON_LOOP_MAX = 1000


def _entry_count(mf: ManifestFile) -> int | None:
    counts = (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count)
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


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


# What a decoded entry holds in the cache before a plan has decoded one (10 columns of
# stats: ~1.15 KB); each whole decode then tells its plan the real figure.
DECODED_ENTRY_GUESS = 1200


class LoadState:
    """What one plan's loads count and hold: its metrics, the bytes of the shared cache it
    holds (found there or put), and its decode lanes (set when its manifests are chosen)."""

    def __init__(self, metrics: PlanMetrics) -> None:
        self.metrics = metrics
        self.cached_bytes = 0
        # bytes of the cache promised to decodes under way (see ManifestLoader._skips_stats),
        # and what a decoded entry held in this plan's last whole decode
        self.promised_bytes = 0
        self.entry_bytes = DECODED_ENTRY_GUESS
        self.lanes: Lanes | None = None
        # set (once) as the plan's first manifest request goes out; None: nobody waits for it
        self.first_request: anyio.Event | None = None

    def request_started(self) -> None:
        event, self.first_request = self.first_request, None
        if event is not None:
            event.set()


@dataclass(frozen=True, eq=False)
class ManifestLoader:
    """Loads the manifests of one snapshot for every plan of a scan (see the module docstring):
    ``columnar`` whether its plans start with the columnar decoder, ``cache`` and
    ``manifest_list_cache`` the shared caches they keep and find manifests in."""

    io: FileIO
    snapshot: Snapshot | None
    prune_context: PruneContext
    options: PlanOptions
    columnar: bool
    cache: ManifestCache
    manifest_list_cache: ManifestListCache

    @property
    def runtime(self) -> Runtime:
        return self.io.runtime

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

    def _joins_neighbours(self, mf: ManifestFile, data: bytes, lanes: Lanes) -> bool:
        """A manifest of up to ``BATCH_LANE_MAX_ENTRIES`` entries is decoded with the others
        waiting, as small ones are: one call and one ``ColumnarManifest`` for several, whose
        Python (~0.2 ms of GIL a 500-entry manifest) kept two decode threads at ~1.6x one. Not
        in a burst a plan gathers (its lane waits on fetches it counted), not before the plan's
        first decode has ended (the decoder is warm then). The compiled decoder reads each
        manifest's blocks where they lie, so any layout joins; for polars the blocks are joined
        in Python first, so not blocks of one entry (PyIceberg's layout: ~1 ms a manifest)."""
        n = _entry_count(mf)
        if n is None or n > BATCH_LANE_MAX_ENTRIES or lanes.batches.gather or not lanes.first_finished:
            return False
        if not self.runtime.columnar_ready or len(data) != mf.manifest_length:
            return False
        if self.prune_context.native_decoder and native_available():
            return True
        rows = first_block_rows(data)
        return rows is not None and rows >= BATCH_LANE_MIN_BLOCK_ROWS

    def _skips_stats(self, mf: ManifestFile, ctx: LoadState) -> int | None:
        """None: ``mf`` is decoded without its metric maps; else the cache bytes promised to
        its whole decode, released when it ends (0: the plan reads metrics).

        A plan that reads no metrics (no filter, none kept on its entries) still decodes them
        for the cache, whose columns serve any later filter. It skips them where the cache
        would not keep the columns: past the half of it one plan may hold (a 500 x 1000 plan
        keeps ~110 of its 500 manifests under the default 256 MB), where the maps were decoded
        only to be dropped. They are most of a manifest's decode: a 1000-entry Java manifest
        with 10 columns of stats took 2.0 ms whole, 1.0 ms with the maps read past.
        """
        n = _entry_count(mf)
        if n is None or not self.prune_context.reads_no_stats(mf) or not self.prune_context.native_decoder:
            return 0
        need = n * ctx.entry_bytes
        if need > self.cache.max_bytes // 2 - ctx.cached_bytes - ctx.promised_bytes:
            return None
        ctx.promised_bytes += need
        return need

    def _columnar_for(self, mf: ManifestFile) -> bool:
        n = _entry_count(mf)
        return n is None or n >= self.options.columnar_min_entries

    async def load(
        self,
        mf: ManifestFile,
        ctx: LoadState,
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
        ctx: LoadState,
        key: str,
        early: Callable[[CachedManifest], Awaitable[None]] | None,
    ) -> CachedManifest:
        lanes = ctx.lanes
        assert lanes is not None
        batched = lanes.columnar and not self._columnar_for(mf)
        if batched:
            lanes.batches.fetch_started()
        started = time.perf_counter()
        ctx.request_started()  # the request is made in this step, before anything waits
        try:
            # at most io_concurrency workers read at once; the listed length is only a hint
            data = await self.io.read_expecting(mf.manifest_path, mf.manifest_length)
        finally:
            if batched:
                lanes.batches.fetch_ended()
        promised = self._skips_stats(mf, ctx) if lanes.columnar else 0
        try:
            return await self._decode_fetched(mf, ctx, key, early, data, started, promised)
        finally:
            ctx.promised_bytes -= promised or 0

    async def _decode_fetched(
        self,
        mf: ManifestFile,
        ctx: LoadState,
        key: str,
        early: Callable[[CachedManifest], Awaitable[None]] | None,
        data: bytes,
        started: float,
        promised: int | None,
    ) -> CachedManifest:
        view = self.prune_context.key
        m = ctx.metrics
        lanes = ctx.lanes
        assert lanes is not None
        small = not self._columnar_for(mf)
        skip_stats = promised is None
        fetch_s = time.perf_counter() - started
        m.bytes_fetched += len(data)
        columnar = lanes.columnar
        # entries handed to ``early``, the last one's path, and the view when both parts decoded
        ahead, head_last, found_whole = 0, None, None
        if early is not None and columnar and not small and not skip_stats and self._ahead_for(mf, data):
            found_whole, ahead, head_last = await self._decode_ahead(data, mf, lanes, early, m)
        result: DecodeResult
        if found_whole is not None:
            result = found_whole
        elif columnar and (small or self._joins_neighbours(mf, data, lanes)):
            # small: decoded with its neighbours
            result = await lanes.batches.decode(data, mf, fetch_s, skip_stats)
        elif lanes.first_finished:  # the usual case, without entering ``first_alone`` per manifest
            result = await lanes.decode(data, mf, columnar, skip_stats)
        else:
            async with lanes.first_alone():
                result = await lanes.decode(data, mf, columnar, skip_stats)
        del data
        m.manifests_read += 1
        if result.in_worker_process:
            m.decoded_in_processes += 1
        if result.columnar:
            m.decoded_columnar += 1
            m.decoded_without_stats += int(skip_stats)
        elif result.refused and mf.content == ManifestContent.DATA:
            lanes.fell_back()
        m.add_entries(result.entries_read, result.skipped_by_partition, result.skipped_by_metrics)
        entries = result.entries if isinstance(result.entries, EntryRows) else tuple(result.entries)
        cached = CachedManifest(
            entries, result.entries_read, result.skipped_by_partition, result.skipped_by_metrics, 0
        )
        # One plan holds at most half the shared cache (what it found there counts too). A
        # plan bigger than that keeps its first manifests, which each repeat of it finds,
        # instead of evicting everything, its own first manifests included, in LRU order (a
        # repeat would find nothing); the rest of its entries are dropped once consumed.
        # A view is sized only when it might fit (sizing unbuilt rows builds a sample).
        room = self.cache.max_bytes // 2 - ctx.cached_bytes
        # no room left (a plan bigger than half the cache): nothing is sized, nothing kept
        whole = DecodedManifest.of(result.decoded) if result.decoded is not None and room > 0 else None
        if whole is not None and whole.entries_read:
            ctx.entry_bytes = max(1, whole.size // whole.entries_read)
        if whole is not None and whole.size <= room:
            ctx.cached_bytes += whole.size
            self.cache.put_decoded(key, mf.manifest_length, whole)
        elif (
            # decoded without its metrics: no view is kept either (one fits only where the
            # decode was guessed not to)
            not skip_stats
            and
            # A view of most of a manifest whose columns did not fit is not kept as rows:
            # building them all (~0.8 ms per 1000 entries on the loop, which a plan handing
            # out columns never needs) bought a row view only ~40% smaller than its columns.
            (whole is None or len(entries) * ROWS_KEPT_BELOW < whole.entries_read)
            and min_size(len(entries)) <= room
            and (size := estimate_size(entries)) <= room
        ):
            if isinstance(entries, ColumnarRows):  # kept as rows: not holding the columns' every stat
                entries = EntryRows(entries.rows, entries.spec_id)
            cached = CachedManifest(
                entries, result.entries_read, result.skipped_by_partition, result.skipped_by_metrics, size
            )
            ctx.cached_bytes += size
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
        self, decoded: DecodedManifest, mf: ManifestFile, ctx: LoadState
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
        self, data: Sequence[ManifestFile], held: Sequence[CachedManifest | DecodedManifest], ctx: LoadState
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
        ctx: LoadState,
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
                first if len(results) == 1 else joined_rows([one.entries for one in results], first.spec_id)
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

    def _view_of(self, result: DecodeResult, ctx: LoadState) -> CachedManifest:
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


class Lanes:
    """How one plan decodes: columnar in threads (small manifests in batches) until a
    manifest needs fastavro, then fastavro (in worker processes when the plan is big
    enough) for the rest."""

    def __init__(self, loader: ManifestLoader, big: bool) -> None:
        self._loader = loader
        self._big = big
        self.columnar = loader.columnar
        self.columnar_lane = anyio.CapacityLimiter(max(1, loader.options.workers))
        runtime = loader.runtime
        self.batches = BatchLane(
            loader.prune_context, self.columnar_lane, columnar_alone=lambda: runtime.columnar_ready
        )
        self.fastavro_lane = anyio.CapacityLimiter(1)
        self._pool: ThreadPoolExecutor | None = None
        self.processes = False
        self._first_started = False
        self._first_done = anyio.Event()
        self.first_finished = False  # the plan's first whole-manifest decode has ended
        self._decoder = loader.runtime.decoder(loader.options.workers)
        if not self.columnar:
            self._use_processes()

    def decode_threads(self) -> ThreadPoolExecutor:
        """The plan's ``workers`` threads decoding whole manifests with the columnar decoder.
        Fetched manifests queue in the pool, so a thread that ends a decode takes the next at
        once: handed over through a capacity limiter, the next decode waited for the event
        loop (busy building batches, or waiting for the GIL), and a 200x500 plan had two
        decodes in flight during ~45% of its decoding against ~60% so (decode_workers=2)."""
        pool = self._pool
        if pool is None:
            workers = max(1, self._loader.options.workers)
            pool = self._pool = ThreadPoolExecutor(workers, thread_name_prefix="aioiceberg-decode")
        return pool

    async def decode(
        self, data: bytes, mf: ManifestFile, columnar: bool, skip_stats: bool = False
    ) -> DecodeResult:
        """One whole manifest through the runtime's decoder, in this plan's lanes."""
        loader = self._loader
        return await self._decoder.decode(
            data,
            mf,
            loader.prune_context,
            processes=self.processes,
            thread_lane=self.columnar_lane if columnar else self.fastavro_lane,
            columnar=columnar,
            threads=self.decode_threads() if columnar else None,
            skip_stats=skip_stats,
        )

    def close(self) -> None:
        """The plan is over: its decode threads end (decodes not started are dropped)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

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
            self.first_finished = True
            self._first_done.set()

    def _use_processes(self) -> None:
        workers = self._loader.options.workers
        self.processes = workers > 0 and self._big
        if self.processes:
            self._loader.runtime.decoder(workers).start()

    def fell_back(self) -> None:
        """A manifest the columnar decoder could not read: its siblings likely cannot either."""
        if self.columnar:
            self.columnar = False
            self._use_processes()
