"""Scan planning as a pipeline: manifest list -> manifests -> pruned entries -> tasks.

Stages are joined by bounded channels with named knobs, the asyncio twin of
iceberg-rust's scan: ``io_concurrency`` manifest workers each fetch one manifest
(sharing the FileIO's client), decode and prune it off the loop (``decode_workers``
threads running the columnar decoder, which releases the GIL; worker processes for the
fastavro decoder), and hand the survivors to the consumer through a queue of
``channel_size`` manifests. So memory is bounded by the manifests in flight, not by the
table, when the caller consumes tasks as they come.

The pipeline runs in its own asyncio task; the generator only reads the queue. Closing
the generator early (``break``, ``aclose()`` from any task, or garbage collection)
cancels and awaits that task in the generator's ``finally``, so no caller code is needed.

Delete manifests are queued first. A data file waits for the delete index only when a
delete manifest could still apply to it (its sequence number is not above every
delete manifest's); all others are yielded as soon as their manifest is pruned.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from aioiceberg._concurrency import raise_first
from aioiceberg.errors import ValidationError
from aioiceberg.expressions import ManifestEvaluator, ResidualEvaluator, parse
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.tree import AlwaysFalse, AlwaysTrue, And, Expression, Not, Or, Predicate
from aioiceberg.io.base import FileIO
from aioiceberg.scan.cache import (
    CachedManifest,
    ManifestCache,
    ManifestListCache,
    estimate_size,
)
from aioiceberg.scan.decode import BatchLane, DecodeResult, PruneContext
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.scan.metrics import ScanMetrics
from aioiceberg.scan.snapshot_select import select_snapshot
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    snapshot_manifests,
)
from aioiceberg.spec.manifest.columnar import columnar_available, frozen_builder
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import unmapped_field_ids
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.tasks import FileScanTask

__all__ = ["TableScan", "manifest_cache_key"]

# Below this many manifest bytes to decode, starting worker processes costs more than it saves.
PROCESS_THRESHOLD_BYTES = 4 * 1024 * 1024
# Below this many entries a manifest goes to the batch lane: the columnar decoder has a fixed
# cost of ~2-3 ms per call, so small manifests are decoded together (or, alone, by fastavro).
COLUMNAR_MIN_ENTRIES = 100
# Residuals memoised per partition tuple (cleared when full).
_RESIDUAL_MEMO = 4096
# FileScanTask's checks (a tuple of deletes, start >= 0, length >= 0 or None) hold for every
# task built here, so tasks are built without them (several times faster per task).
_new_task = frozen_builder(FileScanTask, trusted=True)


def _entry_count(mf: ManifestFile) -> int | None:
    counts = (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count)
    return None if any(c is None for c in counts) else sum(c or 0 for c in counts)


def _referenced_ids(expr: Expression) -> set[int]:
    if isinstance(expr, And | Or):
        return _referenced_ids(expr.left) | _referenced_ids(expr.right)
    if isinstance(expr, Not):
        return _referenced_ids(expr.child)
    if isinstance(expr, Predicate):
        return {expr.ref.field_id}
    return set()


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


class TableScan:
    """One planned read of a table snapshot; ``plan_files()`` streams its tasks.

    ``row_filter`` is a filter string or an expression. Knobs: ``io_concurrency``
    (manifests fetched at once), ``decode_workers`` (threads decoding columnar manifests
    at once, or worker processes for fastavro decoding; 0: one thread; default: CPU count),
    ``split_size`` (split files along split offsets into
    tasks of about this many bytes; None: one task per file), ``include_column_stats``
    (keep every column's metrics on task files; default only the filter's columns),
    ``process_threshold_bytes`` (manifest bytes below which fastavro decoding stays in one
    thread), ``columnar`` (decode with the columnar decoder in ``decode_workers`` threads,
    falling back to fastavro per manifest; False: fastavro in worker processes),
    ``columnar_min_entries`` (manifests listing fewer entries are decoded in batches).
    ``limit`` stops planning once unfiltered, delete-free tasks hold that many rows.
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
        *,
        io_concurrency: int = 64,
        decode_workers: int | None = None,
        channel_size: int | None = None,
        split_size: int | None = None,
        include_column_stats: bool = False,
        cache: ManifestCache | None = None,
        manifest_list_cache: ManifestListCache | None = None,
        process_threshold_bytes: int = PROCESS_THRESHOLD_BYTES,
        columnar: bool = True,
        columnar_min_entries: int = COLUMNAR_MIN_ENTRIES,
    ) -> None:
        if io_concurrency < 1:
            raise ValidationError(f"io_concurrency must be >= 1, got {io_concurrency}")
        if split_size is not None and split_size <= 0:
            raise ValidationError(f"split_size must be positive, got {split_size}")
        if limit is not None and limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
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
        self.case_sensitive = case_sensitive
        self.selected_fields = tuple(selected_fields)
        self.limit = limit
        if isinstance(row_filter, str):
            row_filter = parse(row_filter) if row_filter.strip() else AlwaysTrue()
        self.row_filter: Expression = row_filter
        # SQL's rule for NULLs: a row for which the filter is NULL is not returned
        self.bound_filter: Expression = bind_row_filter(self.schema, row_filter, case_sensitive)
        self.io_concurrency = io_concurrency
        self.decode_workers = (os.cpu_count() or 1) if decode_workers is None else max(0, decode_workers)
        self.channel_size = channel_size if channel_size is not None else max(2, io_concurrency // 4)
        self.split_size = split_size
        self.process_threshold_bytes = process_threshold_bytes
        self.runtime = io.runtime
        self.columnar = columnar and columnar_available() and self.runtime.columnar_usable
        self.columnar_min_entries = columnar_min_entries
        self.cache = cache if cache is not None else self.runtime.manifest_cache
        self.manifest_list_cache = (
            manifest_list_cache if manifest_list_cache is not None else self.runtime.manifest_list_cache
        )
        stats = None if include_column_stats else frozenset(_referenced_ids(self.bound_filter))
        untrusted = unmapped_field_ids(self.schema, metadata.properties)
        self._ctx = PruneContext.build(
            self.schema,
            self.specs,
            self.bound_filter,
            case_sensitive,
            stats,
            untrusted,
            self.runtime.pause_gc,
        )
        self._manifest_evaluators: dict[int, ManifestEvaluator | None] = {}
        self._residuals: dict[int, ResidualEvaluator] = {}
        self._unknown_specs: dict[int, PartitionSpec] = {}
        # one residual object per partition tuple: files of a partition share it
        self._residual_by_partition: dict[tuple[int, tuple[Any, ...]], Expression] = {}
        self.metrics = ScanMetrics()  # the last plan started (each call also has its own)

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

    def _residual(self, f: DataFile) -> Expression:
        if isinstance(self.bound_filter, AlwaysTrue):
            return self.bound_filter
        key = (f.spec_id, f.partition)
        found = self._residual_by_partition.get(key)
        if found is not None:
            return found
        ev = self._residuals.get(f.spec_id)
        if ev is None:
            ev = self._residuals[f.spec_id] = ResidualEvaluator(
                self.schema, self._spec(f.spec_id), self.bound_filter, self.case_sensitive
            )
        residual = ev.residual_for(f.partition)
        if len(self._residual_by_partition) >= _RESIDUAL_MEMO:
            self._residual_by_partition.clear()
        try:
            self._residual_by_partition[key] = residual
        except TypeError:  # an unhashable partition value: not memoised
            pass
        return residual

    def _spec(self, spec_id: int) -> PartitionSpec:
        spec = self.specs.get(spec_id)
        if spec is None:  # not in the metadata: typed as unpartitioned (built once)
            spec = self._unknown_specs.get(spec_id)
            if spec is None:
                spec = self._unknown_specs[spec_id] = PartitionSpec(spec_id, ())
        return spec

    # -- stages ------------------------------------------------------------------------

    async def manifests(self, metrics: ScanMetrics | None = None) -> tuple[ManifestFile, ...]:
        """The snapshot's manifests (from the shared cache when this snapshot was planned)."""
        m = metrics if metrics is not None else ScanMetrics()
        snap = self.snapshot
        if snap is None:
            return ()
        # A v1 snapshot naming its manifests inline has no list: its paths are the key.
        listed = snap.manifest_list if snap.manifest_list is not None else "\n".join(snap.manifests)
        key = f"{self.io.store_key(listed)}\0{listed}"  # the same path in another store is another list
        found = self.manifest_list_cache.get(key, snap.snapshot_id)
        if found is not None:
            m.manifest_list_from_cache = True
            return found

        def fetched(size: int) -> None:
            m.bytes_fetched += size

        decoded = tuple(await snapshot_manifests(self.io, snap, fetched=fetched))
        self.manifest_list_cache.put(key, snap.snapshot_id, decoded)
        return decoded

    def _select(
        self, manifests: Iterable[ManifestFile], m: ScanMetrics
    ) -> tuple[list[ManifestFile], list[ManifestFile]]:
        """Drop manifests the summaries exclude and delete manifests older than all data."""
        data: list[ManifestFile] = []
        deletes: list[ManifestFile] = []
        for mf in manifests:
            m.manifests_total += 1
            if isinstance(self.bound_filter, AlwaysFalse):
                m.manifests_skipped_by_summaries += 1
                continue
            ev = self._manifest_evaluator(mf.partition_spec_id)
            if ev is not None and not ev.eval(mf.partitions):
                m.manifests_skipped_by_summaries += 1
                continue
            if not (mf.has_added_files() or mf.has_existing_files()):
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

    def _columnar_for(self, mf: ManifestFile) -> bool:
        n = _entry_count(mf)
        return n is None or n >= self.columnar_min_entries

    async def _load(
        self,
        mf: ManifestFile,
        lanes: _Lanes,
        io_limiter: anyio.CapacityLimiter,
        plan: _Plan,
        fetched: anyio.Event | None = None,
    ) -> CachedManifest:
        """The manifest's view, from the cache or fetched and decoded; ``fetched`` is set as
        soon as its bytes are in hand (before decoding)."""
        view = self._ctx.key
        key = manifest_cache_key(self.io, mf)
        found = self.cache.get(key, mf.manifest_length, view)
        m = plan.metrics
        if found is not None:
            m.manifests_from_cache += 1
            plan.cached_bytes += found.size
            if fetched is not None:
                fetched.set()
            return found
        async with io_limiter:
            data = await self.io.read(mf.manifest_path)
        if fetched is not None:
            fetched.set()
        m.bytes_fetched += len(data)
        columnar = lanes.columnar
        result: DecodeResult
        if columnar and not self._columnar_for(mf):
            result = await lanes.batches.decode(data, mf)  # small: decoded with its neighbours
        else:
            result = await self.runtime.decoder(self.decode_workers).decode(
                data,
                mf,
                self._ctx,
                processes=lanes.processes,
                thread_lane=lanes.columnar_lane if columnar else lanes.fastavro_lane,
                columnar=columnar,
            )
        del data
        m.manifests_read += 1
        if not result.in_process:
            m.decoded_in_processes += 1
        if result.columnar:
            m.decoded_columnar += 1
        elif result.refused and mf.content == ManifestContent.DATA:
            lanes.fell_back()
        m.entries_read += result.entries_read
        m.entries_skipped_by_partition += result.skipped_by_partition
        m.entries_skipped_by_metrics += result.skipped_by_metrics
        entries = tuple(result.entries)
        cached = CachedManifest(
            entries,
            result.entries_read,
            result.skipped_by_partition,
            result.skipped_by_metrics,
            estimate_size(entries),
        )
        # One plan holds at most half the shared cache (views it found there count too). A
        # plan bigger than that keeps its first manifests, which each repeat of it finds,
        # instead of evicting everything, its own first manifests included, in LRU order (a
        # repeat would find nothing); the rest of its entries are dropped once consumed.
        if plan.cached_bytes + cached.size <= self.cache.max_bytes // 2:
            plan.cached_bytes += cached.size
            self.cache.put(key, mf.manifest_length, view, cached)
        return cached

    async def _run_workers(
        self,
        data: list[ManifestFile],
        deletes: list[ManifestFile],
        queue: asyncio.Queue[CachedManifest | None],
        index: DeleteIndex,
        index_ready: anyio.Event,
        plan: _Plan,
    ) -> None:
        total_bytes = sum(mf.manifest_length for mf in data) + sum(mf.manifest_length for mf in deletes)
        lanes = _Lanes(self, total_bytes >= self.process_threshold_bytes)
        io_limiter = anyio.CapacityLimiter(self.io_concurrency)
        unpartitioned = {i for i, s in self.specs.items() if not s.fields}
        work: Iterator[ManifestFile] = iter([*deletes, *data])
        deletes_left = [len(deletes)]
        if not deletes:
            index_ready.set()

        async def worker(first: anyio.Event | None = None) -> None:
            for mf in work:
                loaded = await self._load(mf, lanes, io_limiter, plan, first)
                first = None
                if mf.content == ManifestContent.DELETES:
                    for entry in loaded.entries:
                        index.add(entry, unpartitioned)
                    deletes_left[0] -= 1
                    if deletes_left[0] == 0:
                        index_ready.set()
                elif loaded.entries:
                    await queue.put(loaded)

        n = min(self.io_concurrency, len(data) + len(deletes))
        async with anyio.create_task_group() as tg:
            # The first manifest is fetched alone, then the rest at full concurrency: its GET
            # does not queue behind a burst of others at the store, nor its decode behind
            # theirs, so the first task is about one fetch and one decode away (costs the
            # rest of the plan one round trip). A plan reading few manifests (a selective
            # filter) fetches them all at once: that round trip would be most of its time.
            first_fetched = anyio.Event()
            tg.start_soon(worker, first_fetched)
            if n > 1:
                if len(data) + len(deletes) > self.io_concurrency // 2:
                    await first_fetched.wait()
                for _ in range(n - 1):
                    tg.start_soon(worker)
        await queue.put(None)

    def _plain_tasks(self, entries: Sequence[ManifestEntry]) -> tuple[FileScanTask, ...]:
        """One delete-free, unsplit task per entry (the cached view keeps them)."""
        schema, new_task = self.schema, _new_task
        with self.runtime.gc_paused():
            return tuple(
                new_task(f, (), self._residual(f), self._spec(f.spec_id), schema, 0, None)
                for f in (e.data_file for e in entries)
            )

    def _tasks_for(self, entry: ManifestEntry, deletes: tuple[DataFile, ...]) -> list[FileScanTask]:
        f = entry.data_file
        spec = self._spec(f.spec_id)
        residual = self._residual(f)
        if self.split_size is None:
            return [_new_task(f, deletes, residual, spec, self.schema, 0, None)]
        ranges = _split_ranges(f, self.split_size)
        if len(ranges) == 1:
            return [_new_task(f, deletes, residual, spec, self.schema, ranges[0][0], None)]
        return [_new_task(f, deletes, residual, spec, self.schema, start, length) for start, length in ranges]

    async def plan_files(self, metrics: ScanMetrics | None = None) -> AsyncIterator[FileScanTask]:
        """Stream the scan's tasks as they are decided (see the module docstring).

        Each call counts into ``metrics`` (a fresh ``ScanMetrics`` if not given), so plans
        running at once on one scan keep theirs apart; ``self.metrics`` is the last started.
        Stopping early needs nothing special: ``break`` out of the loop, or close or drop
        the iterator from any task; the pipeline task is cancelled and awaited.
        """
        started = time.perf_counter()
        m = self.metrics = metrics if metrics is not None else ScanMetrics()
        plan = _Plan(m)
        if self.snapshot is None:
            m.planning_time_s = time.perf_counter() - started
            return
        data, deletes = self._select(await self.manifests(m), m)
        if not data:
            m.planning_time_s = time.perf_counter() - started
            return
        max_delete_seq = max((mf.sequence_number or 0 for mf in deletes), default=None)
        index = DeleteIndex()
        index_ready = anyio.Event()
        queue: asyncio.Queue[CachedManifest | None] = asyncio.Queue(self.channel_size)
        pipeline = asyncio.create_task(self._run_workers(data, deletes, queue, index, index_ready, plan))
        rows = 0
        delete_files: set[str] = set()
        # without delete manifests or splitting, a manifest's tasks are fixed by its cached
        # view: built once, kept with the view, and yielded as they are by every repeat
        plain = max_delete_seq is None and self.split_size is None
        try:
            while True:
                batch = await _next_batch(queue, pipeline)
                if batch is None:
                    break
                if plain:
                    tasks = batch.tasks
                    if tasks is None:
                        tasks = batch.tasks = self._plain_tasks(batch.entries)
                    if m.time_to_first_task_s is None:
                        m.time_to_first_task_s = time.perf_counter() - started
                    if self.limit is None:
                        for task in tasks:
                            m.tasks += 1
                            yield task
                        continue
                    for task in tasks:
                        m.tasks += 1
                        yield task
                        if isinstance(task.residual, AlwaysTrue):
                            rows += task.file.record_count
                            if rows >= self.limit:
                                return
                    continue
                for entry in batch.entries:
                    if max_delete_seq is not None and (entry.sequence_number or 0) <= max_delete_seq:
                        await _wait_or_fail(index_ready, pipeline)
                        found = index.for_data_file(entry.sequence_number, entry.data_file)
                    else:
                        found = ()
                    for task in self._tasks_for(entry, found):
                        if m.time_to_first_task_s is None:
                            m.time_to_first_task_s = time.perf_counter() - started
                        m.tasks += 1
                        if found:
                            delete_files.update(d.file_path for d in found)
                            m.delete_files = len(delete_files)
                        yield task
                    if self.limit is not None:
                        if found or not isinstance(self._residual(entry.data_file), AlwaysTrue):
                            continue
                        rows += entry.data_file.record_count
                        if rows >= self.limit:
                            return
        finally:
            await _stop(pipeline)
            m.planning_time_s = time.perf_counter() - started

    def __repr__(self) -> str:
        snap = self.snapshot.snapshot_id if self.snapshot is not None else None
        return f"TableScan(snapshot={snap}, filter={self.bound_filter})"


@dataclass(slots=True)
class _Plan:
    """What one ``plan_files()`` call counts: its metrics and the bytes it holds in the
    shared cache (found there or put)."""

    metrics: ScanMetrics
    cached_bytes: int = 0


class _Lanes:
    """How one plan decodes: columnar in threads (small manifests in batches) until a
    manifest needs fastavro, then fastavro (in worker processes when the plan is big
    enough) for the rest."""

    def __init__(self, scan: TableScan, big: bool) -> None:
        self._scan = scan
        self._big = big
        self.columnar = scan.columnar
        self.columnar_lane = anyio.CapacityLimiter(max(1, scan.decode_workers))
        self.batches = BatchLane(scan._ctx, self.columnar_lane)
        if self.columnar:
            scan.runtime.warm_columnar()  # while the first manifests are fetched
        self.fastavro_lane = anyio.CapacityLimiter(1)
        self.processes = False
        if not self.columnar:
            self._use_processes()

    def _use_processes(self) -> None:
        self.processes = self._scan.decode_workers > 0 and self._big
        if self.processes:
            self._scan.runtime.decoder(self._scan.decode_workers).start()

    def fell_back(self) -> None:
        """A manifest the columnar decoder could not read: its siblings likely cannot either."""
        if self.columnar:
            self.columnar = False
            self._use_processes()


async def _next_batch(
    queue: asyncio.Queue[CachedManifest | None], pipeline: asyncio.Task[None]
) -> CachedManifest | None:
    """The next manifest's surviving entries, or the pipeline's error as soon as it fails."""
    if not queue.empty():
        return queue.get_nowait()
    getter = asyncio.ensure_future(queue.get())
    try:
        await asyncio.wait({getter, pipeline}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return getter.result()
    _raise_failure(pipeline)
    return queue.get_nowait() if not queue.empty() else None


def _raise_failure(pipeline: asyncio.Task[None]) -> None:
    """Raise the pipeline's error (the first out of the workers' task group, unwrapped)."""
    error = pipeline.exception()
    if error is not None:
        raise_first(error)


async def _wait_or_fail(event: anyio.Event, pipeline: asyncio.Task[None]) -> None:
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter, pipeline}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiter.done():
            waiter.cancel()
    if not event.is_set():
        _raise_failure(pipeline)
        raise RuntimeError("planning pipeline ended before the delete index was ready")


async def _stop(pipeline: asyncio.Task[None]) -> None:
    """Cancel the pipeline task and wait until it has ended (its error, if any, is dropped
    only when the plan was closed early; a finished pipeline's error was already raised)."""
    if not pipeline.done():
        pipeline.cancel()
        await asyncio.wait({pipeline})
    if not pipeline.cancelled():
        pipeline.exception()  # retrieved, so asyncio does not log it
