"""Decode manifests and prune their entries off the event loop.

Two decoders give identical results. The columnar one (Avro -> Arrow columns by the compiled
decoder, or by polars where the extension is missing; pruned by
:mod:`aioiceberg.scan.columnar_prune`) decodes several times faster than fastavro, releases
the GIL while decoding and builds entries only for rows that survive pruning, so it runs in
threads of the planning process: nothing is pickled. Manifests it cannot decode exactly
(v1, some partition types, damage) fall back to fastavro, which decides what is corrupt.

fastavro holds the GIL while it decodes (~25-30k entries/s per core here), so threads
add no throughput: big plans decode in worker processes. A worker decodes *and* prunes
(partition, then metrics) and returns only the surviving entries, trimmed to the stats
the filter reads, so little crosses the process boundary. Expressions do not pickle,
so a worker rebuilds its evaluators from a :class:`PruneContext` (schema and specs as
JSON, the bound filter as expression JSON) and keeps them by the context's key.

Process start-up costs ~0.3-1 s, so small plans decode in one thread, and a plan that
starts while the pool warms up decodes in the thread until the workers answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
import numpy as np

from aioiceberg.expressions import InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.parser import parse
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.gc_pause import collector_paused
from aioiceberg.scan.cache import DecodedManifest, DecodedPart
from aioiceberg.scan.columnar_prune import prune_rows
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    iter_manifest_entries,
    write_manifest,
)
from aioiceberg.spec.manifest.avro_blocks import header_length
from aioiceberg.spec.manifest.columnar import (
    AvroLayout,
    ColumnarRows,
    SharedRows,
    avro_layout,
    joined_rows,
    open_columnar,
    open_columnar_batch,
    split_blocks,
)
from aioiceberg.spec.manifest.entry_rows import EntryRows, Row
from aioiceberg.spec.manifest.native_decode import native_available
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import (
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
)
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import LongType, NestedField
from aioiceberg.spec.values import to_bytes

__all__ = [
    "BatchLane",
    "DecodeResult",
    "Decoder",
    "PruneContext",
    "decode_and_prune",
    "decode_and_prune_batch",
]

FILE_PATH_FIELD_ID = 2147483546


@dataclass(frozen=True)
class PruneContext:
    """Everything a worker needs to rebuild the evaluators, as picklable text.

    ``stats_columns`` are the field ids whose metrics are kept on returned data files
    (None: keep all); delete files always keep ``file_path`` bounds for delete matching.
    Metrics of the ``untrusted`` field ids never prune (columns a name mapping cannot resolve).
    """

    schema_json: str
    specs_json: Mapping[int, str]
    filter_json: str
    case_sensitive: bool
    stats_columns: frozenset[int] | None
    untrusted: frozenset[int] = frozenset()
    key: str = field(default="", compare=False)
    pause_gc: bool = field(default=False, compare=False)
    vectorized: bool = True
    native_decoder: bool = True

    def evaluators(self) -> _Evaluators:
        """Built once per context object (a plan's threads share them; a worker process
        rebuilds them for the copy it receives)."""
        found: _Evaluators | None = self.__dict__.get("_evaluators")
        if found is None:
            found = _Evaluators(self)
            self.__dict__["_evaluators"] = found
        return found

    def prepare(self, spec_ids: Iterable[int]) -> None:
        """Build the evaluators and these specs' partition evaluators now (asked while a
        plan's manifest list is in flight), not in the plan's first decode (~0.5-0.7 ms there)."""
        ev = self.evaluators()
        for spec_id in spec_ids:
            ev.partition(spec_id)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_evaluators", None)  # holds a lock; rebuilt where it is needed
        return state

    @staticmethod
    def build(
        schema: Schema,
        specs: Mapping[int, PartitionSpec],
        bound_filter: Expression,
        case_sensitive: bool,
        stats_columns: frozenset[int] | None,
        untrusted: frozenset[int] = frozenset(),
        pause_gc: bool = False,
        vectorized: bool = True,
        native_decoder: bool = True,
    ) -> PruneContext:
        schema_json = json.dumps(schema_to_json(schema), sort_keys=True)
        specs_json = {i: json.dumps(partition_spec_to_json(s), sort_keys=True) for i, s in specs.items()}
        filter_json = json.dumps(expression_to_json(bound_filter), sort_keys=True)
        digest = hashlib.sha256()
        for part in (schema_json, json.dumps(specs_json, sort_keys=True), filter_json, str(case_sensitive)):
            digest.update(part.encode())
            digest.update(b"\0")
        digest.update(repr(sorted(stats_columns) if stats_columns is not None else None).encode())
        digest.update(repr(sorted(untrusted)).encode())
        digest.update(b"vectorized" if vectorized else b"per-entry")
        return PruneContext(
            schema_json,
            specs_json,
            filter_json,
            case_sensitive,
            stats_columns,
            untrusted,
            digest.hexdigest(),
            pause_gc,
            vectorized,
            native_decoder,
        )

    @functools.cached_property
    def is_trivial(self) -> bool:
        """The filter is ``true``: nothing to prune, no evaluator to build (parsed once: the
        loader asks it for every manifest it fetches, on the event loop)."""
        return bool(json.loads(self.filter_json) == {"type": "true"})

    def reads_no_stats(self, manifest: ManifestFile) -> bool:
        """Neither pruning nor the entries handed out read ``manifest``'s metrics: a data
        manifest, no filter, no stats kept (the default of an unfiltered plan)."""
        return (
            manifest.content == ManifestContent.DATA
            and self.stats_columns is not None
            and not self.stats_columns
            and self.is_trivial
        )


@dataclass(frozen=True, slots=True)
class DecodeResult:
    entries: Sequence[ManifestEntry]  # EntryRows from the columnar decoder
    entries_read: int
    skipped_by_partition: int
    skipped_by_metrics: int
    in_worker_process: bool = False  # decoded by the process pool, not in this process
    columnar: bool = False
    refused: bool = False  # the columnar decoder was asked and could not read it (v1, say)
    # the manifest's columns with every stat, for the cache to prune later filters from
    decoded: tuple[DecodedPart, ...] | None = None


class _Evaluators:
    """The evaluators of one context, built once per process and shared by its manifests."""

    def __init__(self, ctx: PruneContext) -> None:
        self.schema = schema_from_json(json.loads(ctx.schema_json))
        self.specs = {i: partition_spec_from_json(json.loads(s)) for i, s in ctx.specs_json.items()}
        self.trivial = ctx.is_trivial
        self.expr: Expression = (
            AlwaysTrue() if self.trivial else expression_from_json(json.loads(ctx.filter_json), self.schema)
        )
        self.case_sensitive = ctx.case_sensitive
        self.metrics = (
            None
            if self.trivial
            else InclusiveMetricsEvaluator(
                self.schema, self.expr, ctx.case_sensitive, untrusted=ctx.untrusted
            )
        )
        self._partition: dict[int, PartitionEvaluator | None] = {}
        self._lock = threading.Lock()

    def partition(self, spec_id: int) -> PartitionEvaluator | None:
        """None when the filter cannot reject any partition of this spec."""
        with self._lock:
            if spec_id not in self._partition:
                spec = self.specs.get(spec_id)
                if self.trivial or spec is None or not spec.fields:
                    self._partition[spec_id] = None
                else:
                    ev = PartitionEvaluator(self.schema, spec, self.expr, self.case_sensitive)
                    self._partition[spec_id] = None if isinstance(ev.partition_filter, AlwaysTrue) else ev
            return self._partition[spec_id]


def _collector_paused(ctx: PruneContext) -> AbstractContextManager[None]:
    return collector_paused_if(ctx.pause_gc)


def collector_paused_if(pause: bool) -> AbstractContextManager[None]:
    """The cycle collector paused while building many small objects, when the runtime says so."""
    if not pause:
        return contextlib.nullcontext()
    return collector_paused()


def decode_and_prune(
    data: bytes, manifest: ManifestFile, ctx: PruneContext, columnar: bool = True, skip_stats: bool = False
) -> DecodeResult:
    """Live entries of one manifest that may match the filter (runs in a worker or a thread).

    ``columnar`` tries the columnar decoder first (the result says whether it was used).
    ``skip_stats`` (a plan that reads no metrics, see :meth:`PruneContext.reads_no_stats`):
    the columnar decoder reads the metric maps past, and the result offers no columns to the
    cache (they could not serve a filter).
    """
    with _collector_paused(ctx):
        return _decode_and_prune(data, manifest, ctx, columnar, skip_stats)


def _decode_and_prune(
    data: bytes, manifest: ManifestFile, ctx: PruneContext, columnar: bool, skip_stats: bool = False
) -> DecodeResult:
    ev = ctx.evaluators()
    columns = stats_columns_for(ctx, manifest)
    part = ev.partition(manifest.partition_spec_id)
    metrics = ev.metrics
    if columnar:
        found = _columnar(data, manifest, ctx, columns, skip_stats=skip_stats)
        if found is not None:
            return found
    kept: list[ManifestEntry] = []
    read = by_partition = by_metrics = 0
    for entry in iter_manifest_entries(data, manifest, columns_needed=columns, discard_deleted=True):
        read += 1
        f: DataFile = entry.data_file
        if part is not None and not part.eval(f.partition):
            by_partition += 1
            continue
        if metrics is not None and not metrics.eval(f):
            by_metrics += 1
            continue
        kept.append(entry)
    return DecodeResult(kept, read, by_partition, by_metrics, refused=columnar)


def stats_columns_for(ctx: PruneContext, manifest: ManifestFile) -> frozenset[int] | None:
    """The metrics kept on the entries a plan gets: the filter's columns (None: all), and
    ``file_path`` bounds on delete files, which matching deletes to data files reads."""
    columns = ctx.stats_columns
    if manifest.content == ManifestContent.DELETES and columns is not None:
        columns = columns | {FILE_PATH_FIELD_ID}
    return columns


def _columnar(
    data: bytes,
    manifest: ManifestFile,
    ctx: PruneContext,
    columns: frozenset[int] | None,
    part: bool = False,
    skip_stats: bool = False,
) -> DecodeResult | None:
    """Decoded and pruned by the columnar decoder, or None when the fastavro reader must
    decide (header problems raise as that reader's do). The columns keep every stat (for
    the cache) unless ``skip_stats``; the entries returned, ``columns``'."""
    skip_stats = skip_stats and ctx.reads_no_stats(manifest)
    cm = open_columnar(
        data,
        manifest,
        columns_needed=None,
        discard_deleted=True,
        part=part,
        native=ctx.native_decoder,
        skip_stats=skip_stats,
    )
    if cm is None:
        return None
    ev = ctx.evaluators()
    try:
        pruned = prune_rows(
            cm, ev.partition(manifest.partition_spec_id), ev.metrics, ctx.vectorized, columns=columns
        )
    except Exception:  # never trusted over the reference decoder
        return None
    cm.nbytes  # noqa: B018 - sized here, off the loop, which sizes every decoded manifest for the cache
    return DecodeResult(
        pruned.entries,
        len(cm.rows),
        len(pruned.by_partition),
        len(pruned.by_metrics),
        columnar=True,
        decoded=None if skip_stats else ((cm, cm.rows),),
    )


def prune_decoded(decoded: DecodedManifest, manifest: ManifestFile, ctx: PruneContext) -> DecodeResult:
    """A plan's view of a manifest kept decoded: its parts pruned under the plan's filter."""
    with _collector_paused(ctx):
        ev = ctx.evaluators()
        part_ev = ev.partition(manifest.partition_spec_id)
        columns = stats_columns_for(ctx, manifest)
        pieces: list[EntryRows] = []
        spec_id: int | None = None
        by_part = by_metrics = 0
        for cm, part_rows in decoded.parts:
            pruned = prune_rows(cm, part_ev, ev.metrics, ctx.vectorized, part_rows, columns)
            pieces.append(pruned.entries)
            spec_id = pruned.entries.spec_id if spec_id is None else spec_id
            by_part += len(pruned.by_partition)
            by_metrics += len(pruned.by_metrics)
        entries = joined_rows(pieces, spec_id if spec_id is not None else manifest.partition_spec_id)
        return DecodeResult(entries, decoded.entries_read, by_part, by_metrics, columnar=True)


def _decode_blocks_columnar(part: bytes, manifest: ManifestFile, ctx: PruneContext) -> DecodeResult | None:
    try:
        return _columnar(part, manifest, ctx, stats_columns_for(ctx, manifest), part=True)
    except Exception:  # the whole manifest's decode decides what is wrong
        return None


def decode_first_blocks(
    data: bytes, manifest: ManifestFile, ctx: PruneContext, rows: int
) -> tuple[DecodeResult, bytes] | None:
    """A data manifest's first blocks (at least ``rows`` rows) decoded apart, and a container
    of its other blocks for :func:`decode_part`; None when they cannot be (the whole manifest
    is then decoded as usual). Runs in a thread: the split copies the manifest's blocks."""
    with _collector_paused(ctx):
        parts = split_blocks(data, rows)
        if parts is None:
            return None
        head = _decode_blocks_columnar(parts[0], manifest, ctx)
        return None if head is None else (head, parts[1])


def decode_part(part: bytes, manifest: ManifestFile, ctx: PruneContext) -> DecodeResult | None:
    """The live entries that may match among some of a data manifest's blocks (``part``, a
    container of them under its header), or None as :func:`decode_first_blocks`. Runs in a
    thread."""
    with _collector_paused(ctx):
        return _decode_blocks_columnar(part, manifest, ctx)


def joined(first: DecodeResult, second: DecodeResult) -> DecodeResult:
    """Two parts' results as one manifest's, in file order."""
    a, b = first.entries, second.entries
    entries: Sequence[ManifestEntry] | EntryRows
    if isinstance(a, EntryRows) and isinstance(b, EntryRows) and a.spec_id == b.spec_id:
        entries = joined_rows([a, b], a.spec_id)
    else:
        entries = [*a, *b]
    decoded = None
    if first.decoded is not None and second.decoded is not None:
        decoded = first.decoded + second.decoded
    return DecodeResult(
        entries,
        first.entries_read + second.entries_read,
        first.skipped_by_partition + second.skipped_by_partition,
        first.skipped_by_metrics + second.skipped_by_metrics,
        columnar=True,
        decoded=decoded,
    )


def decode_and_prune_batch(
    items: Sequence[tuple[bytes, ManifestFile]],
    ctx: PruneContext,
    columnar_alone: bool = False,
    skip_stats: bool = False,
) -> list[DecodeResult]:
    """:func:`decode_and_prune` of several manifests, small ones decoded together.

    Manifests that share a header (see :func:`open_columnar_batch`) are joined and decoded
    in one columnar call, pruned at once and split back per manifest; the rest, and any
    group the batch path refuses, decode one by one. Results are in the order of ``items``.
    ``columnar_alone``: a manifest decoded by itself takes the columnar decoder too (it
    releases the GIL while polars decodes, so the loop hands other responses over meanwhile;
    fastavro held it); else fastavro, which needs no warm polars. ``skip_stats``: as for
    :func:`decode_and_prune`.
    """
    with _collector_paused(ctx):
        return _decode_and_prune_batch(items, ctx, columnar_alone, skip_stats)


def _decode_and_prune_batch(
    items: Sequence[tuple[bytes, ManifestFile]], ctx: PruneContext, columnar_alone: bool, skip_stats: bool
) -> list[DecodeResult]:
    ev = ctx.evaluators()
    results: list[DecodeResult | None] = [None] * len(items)
    groups: dict[tuple[bytes, int, int], list[int]] = {}
    layouts: list[AvroLayout | None] = [None] * len(items)
    # the compiled decoder reads the blocks where they lie: grouped by header bytes alone, no
    # block is walked in Python (polars needs them located, to join them under one header)
    native = ctx.native_decoder and native_available()
    for i, (data, mf) in enumerate(items):
        header: bytes | None = None
        if len(items) > 1 and native:
            end = header_length(data)
            header = None if end is None else data[:end]
        elif len(items) > 1:
            layout = layouts[i] = avro_layout(data)
            header = None if layout is None else layout.header
        if header is None:
            results[i] = decode_and_prune(data, mf, ctx, columnar_alone, skip_stats)
            continue
        groups.setdefault((header, mf.content.value, mf.partition_spec_id), []).append(i)
    for members in groups.values():
        batch = [items[i] for i in members]
        batch_layouts = None if native else [layouts[i] for i in members]
        decoded = _decode_group(batch, batch_layouts, ctx, ev, skip_stats) if len(batch) > 1 else None
        if decoded is None:
            decoded = [
                decode_and_prune(data, mf, ctx, len(batch) > 1 or columnar_alone, skip_stats)
                for data, mf in batch
            ]
        for i, result in zip(members, decoded, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


def _decode_group(
    batch: list[tuple[bytes, ManifestFile]],
    layouts: list[AvroLayout | None] | None,
    ctx: PruneContext,
    ev: _Evaluators,
    skip_stats: bool = False,
) -> list[DecodeResult] | None:
    spec_id = batch[0][1].partition_spec_id
    columns = stats_columns_for(ctx, batch[0][1])
    skip_stats = skip_stats and ctx.reads_no_stats(batch[0][1])
    cm = open_columnar_batch(
        batch,
        columns_needed=None,
        discard_deleted=True,
        layouts=layouts,
        native=ctx.native_decoder,
        skip_stats=skip_stats,
    )
    if cm is None or cm.owner is None:
        return None
    try:
        pruned = prune_rows(cm, ev.partition(spec_id), ev.metrics, ctx.vectorized, columns=columns)
    except Exception:  # never trusted over the reference decoder
        return None
    k = len(batch)
    owner = cm.owner
    live_owner = owner[cm.rows]
    live = np.bincount(live_owner, minlength=k)
    # rows are in manifest order (owner never decreases): each manifest's are one range
    live_at = np.searchsorted(live_owner, np.arange(k + 1)).tolist()
    by_part = np.bincount(owner[pruned.by_partition], minlength=k)
    by_metrics = np.bincount(owner[pruned.by_metrics], minlength=k)
    spec = pruned.entries.spec_id
    kept: list[EntryRows]
    found = pruned.entries
    if isinstance(found, ColumnarRows) and not found.built and len(found.parts) == 1:
        # split unbuilt, by manifest: ranges of one shared build (see SharedRows)
        part = found.parts[0]
        _, at, wanted = part
        shared = SharedRows(part)
        bounds = np.searchsorted(owner[at], np.arange(k + 1)).tolist()
        kept = [
            ColumnarRows(((cm, at[a:b], wanted),), spec, (shared, a, b)) if b > a else EntryRows([], spec)
            for a, b in itertools.pairwise(bounds)
        ]
    elif isinstance(found, ColumnarRows) and not found.built:
        kept_owner = owner[pruned.rows]
        kept = [found.where(kept_owner == m) for m in range(k)]
    else:
        by_manifest: list[list[Row]] = [[] for _ in range(k)]
        for row, m in zip(found.rows, owner[pruned.rows].tolist(), strict=True):
            by_manifest[m].append(row)
        kept = [EntryRows(rows, spec) for rows in by_manifest]
    return [
        DecodeResult(
            kept[m],
            int(live[m]),
            int(by_part[m]),
            int(by_metrics[m]),
            columnar=True,
            decoded=None if skip_stats else ((cm, cm.rows[live_at[m] : live_at[m + 1]]),),
        )
        for m in range(k)
    ]


class BatchLane:
    """Decodes small manifests together: whatever has arrived while the lane's threads were
    busy is decoded in one call (see :func:`decode_and_prune_batch`).

    A manifest that arrives to an idle lane is decoded at once, alone, so the first task of
    a plan waits for one decode only; under load batches grow up to ``max_entries`` entries
    or ``max_manifests`` manifests, which bounds memory and keeps results streaming. A lane
    thread that ends a batch takes the next itself (see :meth:`_drain`), not through the loop.

    With ``gather`` (a plan that fetches its manifests in one burst), a manifest arriving
    after the first waits for the burst's other fetches to land, for at most as long as its
    own fetch took, and the lot is decoded in one call. Decoding each as it lands split the
    burst into several calls on threads that share one GIL with the loop, which then handed
    the next arrivals over late. 20 manifests of 50 entries at 20 ms a request: 0.068 s to
    plan in a warm process against 0.058 s gathered, 0.140 s against 0.132 s for a fresh
    process with ``load_table`` (medians of 10 and 8, interleaved).
    """

    def __init__(
        self,
        ctx: PruneContext,
        limiter: anyio.CapacityLimiter,
        *,
        max_entries: int = 4096,
        max_manifests: int = 64,
        columnar_alone: Callable[[], bool] = lambda: False,
    ) -> None:
        self.ctx = ctx
        self.limiter = limiter
        # asked at each call (see decode_and_prune_batch): polars warms up in the background;
        # 20 responses of a 1% plan landed over 7 ms beside fastavro's decode, 1-5 ms beside polars'
        self.columnar_alone = columnar_alone
        self.max_entries = max_entries
        self.max_manifests = max_manifests
        self._pending: collections.deque[_Item] = collections.deque()
        self.batches = 0  # decode calls made, for metrics and tests
        self.gather = False
        self._arrived = 0
        self._fetching = 0  # fetches under way whose manifests come to this lane
        self._drainers = 0  # waiters that take batches (see decode); the others wait for theirs
        self._landed = asyncio.Event()  # set while none is
        self._landed.set()

    def fetch_started(self) -> None:
        if self._fetching == 0:
            self._landed = asyncio.Event()
        self._fetching += 1

    def fetch_ended(self) -> None:
        """Its manifest arrives next (or its fetch failed, and nothing will)."""
        self._fetching -= 1
        if self._fetching == 0:
            self._landed.set()

    def _take(self, most: int) -> _Batch:
        """Up to ``most`` waiting manifests (``max_entries`` entries at most), from the loop
        or a lane thread: the deque's ``popleft`` is atomic, so the two race safely; waiters
        gone (cancelled) are skipped."""
        taken: _Batch = []
        entries = 0
        while len(taken) < most and entries < self.max_entries:
            try:
                item = self._pending.popleft()
            except IndexError:
                break
            if item.done.done():
                continue
            taken.append(item)
            entries += (item.manifest.added_files_count or 0) + (item.manifest.existing_files_count or 0)
        return taken

    async def decode(
        self, data: bytes, manifest: ManifestFile, fetch_s: float = 0.0, skip_stats: bool = False
    ) -> DecodeResult:
        """``fetch_s``: how long this manifest's fetch took (bounds the wait for the burst);
        ``skip_stats``: as for :func:`decode_and_prune`."""
        done: asyncio.Future[DecodeResult] = asyncio.get_running_loop().create_future()
        self._pending.append(_Item(data, manifest, done, skip_stats))
        self._arrived += 1
        # the burst's first arrival takes only itself: others landing meanwhile would make its
        # decode (and the plan's first task) wait for theirs
        most = 1 if self.gather and self._arrived == 1 else self.max_manifests
        if self.gather and self._arrived > 1 and self._fetching:
            with anyio.move_on_after(fetch_s):
                await self._landed.wait()
        if self.gather:
            async with self.limiter:
                while not done.done():
                    batch = self._take(most)
                    if not batch:
                        break
                    # a burst: what lands later waits for the burst, not for this
                    self.batches += 1
                    outcome = await anyio.to_thread.run_sync(self._decode, batch)
                    _resolve(batch, outcome)
            return await done
        if self._drainers >= self.limiter.total_tokens:
            # as many drainers as the lane has threads: one of them takes this manifest (they
            # stop only once they see nothing waiting, on the loop). Waiting for the limiter
            # here instead held this manifest's waiter until a drainer left, at the end of a
            # wave: the plan's fetch workers, each waiting on its decode, were set free all at
            # once and fetched their next manifests together, in waves with idle decoders.
            return await done
        self._drainers += 1
        try:
            async with self.limiter:
                loop = asyncio.get_running_loop()
                while batch := self._take(self.max_manifests):
                    self.batches += await anyio.to_thread.run_sync(self._drain, batch, loop)
        finally:
            self._drainers -= 1
        return await done

    def _decode(self, batch: _Batch) -> list[DecodeResult] | Exception:
        try:
            alone = self.columnar_alone()
            if all(item.skip_stats == batch[0].skip_stats for item in batch):
                return decode_and_prune_batch(
                    [(i.data, i.manifest) for i in batch], self.ctx, alone, batch[0].skip_stats
                )
            results: list[DecodeResult | None] = [None] * len(batch)
            for skip in (False, True):
                at = [k for k, item in enumerate(batch) if item.skip_stats == skip]
                found = decode_and_prune_batch(
                    [(batch[k].data, batch[k].manifest) for k in at], self.ctx, alone, skip
                )
                for k, result in zip(at, found, strict=True):
                    results[k] = result
            return [r for r in results if r is not None]
        except Exception as exc:  # each waiter raises it (a corrupt manifest, say)
            return exc

    def _drain(self, batch: _Batch, loop: asyncio.AbstractEventLoop) -> int:
        """In a lane thread: decode ``batch``, then whatever has arrived meanwhile, until
        nothing waits, each batch's results handed to the loop as it ends. Going back to the
        loop for each next batch left the thread idle until the loop (busy building task
        batches, or waiting for the GIL) took it up: in a 500x1000 plan one decode ran alone
        for ~0.3 s of ~1.1. Returns how many decode calls were made."""
        calls = 0
        while batch:
            calls += 1
            outcome = self._decode(batch)
            loop.call_soon_threadsafe(_resolve, batch, outcome)
            batch = self._take(self.max_manifests)
        return calls


class _Item(NamedTuple):
    """A manifest waiting in a :class:`BatchLane`."""

    data: bytes
    manifest: ManifestFile
    done: asyncio.Future[DecodeResult]
    skip_stats: bool


_Batch = list[_Item]


def _resolve(batch: _Batch, outcome: list[DecodeResult] | Exception) -> None:
    """On the loop: each waiter of ``batch`` gets its result, or the batch's error."""
    if isinstance(outcome, Exception):
        for item in batch:
            if not item.done.done():
                item.done.set_exception(outcome)
        return
    for item, result in zip(batch, outcome, strict=True):
        if not item.done.done():
            item.done.set_result(result)


def _warm() -> int:
    return os.getpid()


class Decoder:
    """A lazily started process pool plus a one-thread lane used while it warms up."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._warm = threading.Event()
        self._lock = threading.Lock()
        self._starting = False
        self._generation = 0  # bumped by shutdown(): a start still under way is abandoned

    @property
    def warm(self) -> bool:
        return self._warm.is_set()

    def start(self, wait: bool = False) -> None:
        """Start the workers (idempotent); jobs use them once they answer.

        Creating the pool waits until the forkserver has imported its preload (~0.4-0.5 s),
        which must not stall the event loop that asked, so it happens in a thread of its own
        unless ``wait`` is given.
        """
        if self.workers <= 0:
            return
        with self._lock:
            if self._pool is not None or self._starting:
                return
            self._starting = True
            generation = self._generation
        if wait:
            self._start_pool(generation)
        else:
            threading.Thread(
                target=self._start_pool, args=(generation,), name="aioiceberg-decoder-start", daemon=True
            ).start()

    def _start_pool(self, generation: int) -> None:
        try:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["aioiceberg.scan.decode"])
            pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
            futures = [pool.submit(_warm) for _ in range(self.workers)]
        except Exception:  # no worker processes: decoding stays in threads
            with self._lock:
                if self._generation == generation:
                    self._starting = False
            return
        with self._lock:
            current = self._generation == generation
            if current:
                self._pool = pool
                self._starting = False
        if not current:  # shut down while it was starting
            pool.shutdown(wait=False, cancel_futures=True)
            return
        # Callbacks are added outside ``self._lock`` and count under their own lock: a
        # future that is already done runs its callback right here, in this thread, and
        # taking ``self._lock`` again there deadlocked ``start()`` (seen under heavy load,
        # when the workers answered before the callbacks were added).
        remaining = [len(futures)]
        count_lock = threading.Lock()
        warm = self._warm

        def done(_: Future[int]) -> None:
            with count_lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last and self._pool is pool:
                warm.set()

        for fut in futures:
            fut.add_done_callback(done)

    async def decode(
        self,
        data: bytes,
        manifest: ManifestFile,
        ctx: PruneContext,
        *,
        processes: bool,
        thread_lane: anyio.CapacityLimiter,
        columnar: bool = False,
        threads: ThreadPoolExecutor | None = None,
        skip_stats: bool = False,
    ) -> DecodeResult:
        """Decode in a worker process when the pool is warm, else in a thread of ``thread_lane``.

        ``columnar`` decodes in the thread (the columnar decoder releases the GIL), one of
        ``threads`` when given (a plan's decode threads, see ``Lanes.decode_threads``).
        ``skip_stats``: as for :func:`decode_and_prune` (the columnar decoder only).
        """
        if columnar and threads is not None:
            job = threads.submit(decode_and_prune, data, manifest, ctx, True, skip_stats)
            return await asyncio.wrap_future(job)
        pool = self._pool
        if not columnar and processes and pool is not None and self._warm.is_set():
            fut = pool.submit(decode_and_prune, data, manifest, ctx, False)
            try:
                # completion is signalled to the loop directly: no thread parked per manifest
                result: DecodeResult = await asyncio.wrap_future(fut)
            finally:
                fut.cancel()
            return dataclasses.replace(result, in_worker_process=True)
        return await anyio.to_thread.run_sync(
            decode_and_prune, data, manifest, ctx, columnar, columnar and skip_stats, limiter=thread_lane
        )

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._generation += 1
            self._starting = False
            self._warm.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def warm_columnar_decoder() -> None:
    """Decode and prune two tiny manifests the way a plan does, so a plan's first columnar
    batch does not pay the process's one-time costs (polars' Avro set-up, pyarrow kernels'
    first calls: ~5-10 ms measured cold; no numpy.ma or pandas import any more, as the
    conversions go through :mod:`aioiceberg.spec.arrow_numpy`). Runs in a thread of its own
    (see :meth:`Runtime.warm_columnar`)."""

    schema = Schema(NestedField(1, "id", LongType(), required=False), schema_id=0)
    spec = PartitionSpec(0, (PartitionField((1,), 1000, parse_transform("bucket[2]"), "b"),))
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            DataFile(
                DataFileContent.DATA,
                f"warm-{i}.parquet",
                FileFormat.PARQUET,
                (i,),
                1,
                1,
                value_counts={1: 1},
                null_value_counts={1: 0},
                lower_bounds={1: to_bytes(i, LongType())},
                upper_bounds={1: to_bytes(i, LongType())},
                spec_id=0,
            ),
        )
        for i in range(2)
    ]
    data, mf = write_manifest(entries, spec, schema, 2, 1, manifest_path="warm.avro")
    mf = dataclasses.replace(mf, sequence_number=1, min_sequence_number=1)
    bound = bind_row_filter(schema, parse("id >= 0 and id < 5"), True)
    ctx = PruneContext.build(schema, {0: spec}, bound, True, frozenset({1}))
    decode_and_prune_batch([(data, mf), (data, mf)], ctx)
