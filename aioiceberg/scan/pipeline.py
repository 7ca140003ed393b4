"""One plan as stages joined by bounded anyio memory streams (iceberg-rust's ``plan_files``).

    manifest list -> [manifests] -> fetch+decode workers -> [decoded] -> build tasks
                  -> [task batches] -> the caller

Every ``plan_files()`` call gets its own :class:`PlanContext` (metrics, cache budget,
decode lanes, delete index), so plans running at once on one scan never share state. What
the stages work with is given to that context by whoever plans (:class:`PlanParts`: the
scan's manifest chooser, manifest loader and task builder, its options and limit); no
stage reaches back to the planner.
Stages never raise into their task group: an error travels down the streams as a
:class:`Failed` item and the caller raises it as itself, in order, never as an
ExceptionGroup. A stage whose downstream is gone (``BrokenResourceError``) just ends.

Who owns the task group:
- ``async with scan.plan_files() as tasks:`` - the caller's ``async with`` (structured:
  leaving the block cancels and awaits every stage);
- ``async for task in scan.plan_files():`` - one pipeline task started on first use; a
  ``break``, ``aclose()`` (from any task) or dropping the iterator closes the caller's end
  of the last stream, which ends every stage in turn.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Awaitable, Iterator, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import TypeAlias, overload

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aioiceberg._concurrency import task_group
from aioiceberg.errors import PlanInterruptedError
from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.scan.cache import CachedManifest, DecodedManifest
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.scan.manifest_choice import ManifestChooser
from aioiceberg.scan.manifest_loader import LoadState, ManifestLoader
from aioiceberg.scan.options import PlanOptions
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.scan.task_builder import TaskBuilder
from aioiceberg.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestFile
from aioiceberg.spec.manifest.columnar import ColumnarRows
from aioiceberg.spec.scan_tasks import FileScanTask

__all__ = ["Failed", "PlanContext", "PlanParts", "PlanStream"]


@dataclass(frozen=True, slots=True)
class Failed:
    """An error sent down the streams as an item."""

    error: BaseException


Decoded: TypeAlias = CachedManifest | Failed
Batch: TypeAlias = Sequence[FileScanTask] | Failed


@dataclass(frozen=True, slots=True)
class PlanParts:
    """What the stages of every plan of one scan work with, built once by the planner: the
    filter is bound in them already (``limit``: stop once unfiltered, delete-free tasks hold
    that many rows; ``unpartitioned_spec_ids``: the specs whose deletes apply table-wide)."""

    chooser: ManifestChooser
    loader: ManifestLoader
    tasks: TaskBuilder
    options: PlanOptions
    limit: int | None
    unpartitioned_spec_ids: frozenset[int]
    # the spec the table writes new files with (its recent manifests'), prepared for (None: all)
    default_spec_id: int | None = None

    def prepare(self) -> None:
        """Build the evaluators a plan reads (choosing manifests, pruning entries, residuals)
        for the default spec before its first choice, decode and task need them: run in a
        worker thread while the manifest list is in flight, when the loop has nothing else to
        do. Each is a cache the plan would fill on first use; one that cannot be built is left
        for the plan to build, and fail on, where it does."""
        specs = self.chooser.specs
        spec_ids = list(specs) if self.default_spec_id is None else [self.default_spec_id]
        spec_ids = [i for i in spec_ids if i in specs]
        for step in (self.chooser.prepare, self.loader.prune_context.prepare, self.tasks.prepare):
            try:
                step(spec_ids)
            except Exception:  # raised again, in its place, by the plan's own use
                continue


class Demand:
    """The caller asking for its next batch: the task builder waits for it before joining
    the views decoded by then (:func:`_with_waiting`), so a caller slower than the decodes
    takes them in few batches, not one a manifest."""

    def __init__(self) -> None:
        self._asked = anyio.Event()

    def ask(self) -> None:
        self._asked.set()

    async def wait(self) -> None:
        await self._asked.wait()
        self._asked = anyio.Event()


class PlanContext(LoadState):
    """What one ``plan_files()`` call owns (its loads' metrics, cache bytes and lanes
    included), beside the scan's parts it plans with."""

    def __init__(self, parts: PlanParts, metrics: PlanMetrics) -> None:
        super().__init__(metrics)
        self.parts = parts
        self.started = time.perf_counter()
        self.index = DeleteIndex()
        self.index_ready = anyio.Event()
        self.index_error: BaseException | None = None
        self.max_delete_seq: int | None = None
        self.deletes_left = 0  # delete manifests not yet in the index
        self.complete = False  # every stage ran to its end
        self.error: BaseException | None = None  # what ended the stages, if not an item
        # set by a caller that takes Arrow task batches (``PlanStream.batches(joined=True)``):
        # the task builder then hands over what is decoded as the caller asks, joined
        self.demand: Demand | None = None

    def finish(self) -> None:
        if self.lanes is not None:
            self.lanes.close()
        m = self.metrics
        if m.planning_time_s is None:
            m.planning_time_s = time.perf_counter() - self.started
            # every manifest the plan needed (if any) was found decoded: nothing fetched
            m.from_cache = self.complete and m.manifest_list_from_cache and m.manifests_read == 0


Selected: TypeAlias = tuple[list[ManifestFile], list[ManifestFile]]
# More manifest-list rows than this to build for a plan's choice (~3 us each) go to a thread.
BUILD_ON_LOOP_MAX = 64
# A plan decided without stages prunes at most this many entries of manifests kept decoded
# on the loop (a selective filter: ~1-2 ms); more go through the stages and their threads.
PRUNE_ON_LOOP_MAX_ENTRIES = 4000


def decide_from_cache(ctx: PlanContext) -> tuple[list[Sequence[FileScanTask]] | None, Selected | None]:
    """The plan's task batches when the shared caches hold its manifest list and every view it
    needs: decided here, without stages (a hot table's plan: ~0.2 ms, not ~1 ms of tasks and
    streams). Else (None, the manifests chosen, when the list was cached: the stages go on
    from that choice) or (None, None)."""
    parts, m = ctx.parts, ctx.metrics
    loader, chooser = parts.loader, parts.chooser
    try:
        listing = loader.cached_manifests(m)
        if listing is None:
            return None, None
        choice = chooser.bulk_choice(listing)
        if len(choice.unbuilt) > BUILD_ON_LOOP_MAX:
            return None, None  # the stages build them in a worker thread first
        data, deletes = chooser.select(choice, m)
    except Exception:  # the stages decide again and report it as they do
        return None, None
    if deletes or parts.options.split_size is not None:
        return None, (data, deletes)
    held = loader.held_in_memory(data)
    if held is None:
        return None, (data, deletes)
    to_prune = sum(h.entries_read for h in held if isinstance(h, DecodedManifest))
    if to_prune > PRUNE_ON_LOOP_MAX_ENTRIES:  # the stages prune them in a worker thread
        return None, (data, deletes)
    try:
        views = loader.views_from_memory(data, held, ctx)
    except Exception:  # the stages decide again and report it as they do
        return None, (data, deletes)
    limit, rows = parts.limit, 0
    batches: list[Sequence[FileScanTask]] = []
    for view in views:
        entries = parts.tasks.kept(view.entries)
        if not entries:
            continue
        tasks: Sequence[FileScanTask] = LazyTasks(parts.tasks, entries)
        if limit is not None:
            tasks, rows = _up_to_limit(tuple(tasks), rows, limit)
        batches.append(tasks)
        if limit is not None and rows >= limit:
            break
    ctx.complete = True
    return batches, None


async def run_stages(
    ctx: PlanContext,
    tg: anyio.abc.TaskGroup,
    out: MemoryObjectSendStream[Batch],
    selected: Selected | None = None,
) -> None:
    """Select the manifests (unless ``selected``), then start the workers and the task
    builder in ``tg``. Of a long list whose rows are mostly unbuilt, the first manifest read
    is chosen first and fetched while the others are built and chosen (see
    :meth:`ManifestChooser.select_first`)."""
    parts = ctx.parts
    loader, chooser = parts.loader, parts.chooser
    if loader.columnar:
        loader.runtime.warm_columnar()  # during the manifest list's round trip
    if selected is None and loader.io.remote and loader.snapshot is not None:
        tg.start_soon(_prepare, parts)  # also: its thread starts once the list's request is out
    try:
        with out:
            listing, rest = None, None  # rows still to build and choose, after the first manifest
            try:
                if selected is None:
                    choice = chooser.bulk_choice(await loader.manifests(ctx.metrics))
                    if len(choice.unbuilt) > BUILD_ON_LOOP_MAX:
                        first = chooser.select_first(choice, ctx.metrics, BUILD_ON_LOOP_MAX)
                        if first is not None:
                            listing, (head, rest) = choice.listing, first
                            selected = ([head], [])
                        else:
                            # rows of a columnar list are built as read: many are built off the loop
                            await anyio.to_thread.run_sync(choice.listing.build, choice.unbuilt)
                    if selected is None:
                        selected = chooser.select(choice, ctx.metrics)
                data, deletes = selected
            except Exception as e:
                await out.send(Failed(e))
                return
            if not data:
                ctx.complete = True
                return
            if not deletes and rest is None and await _from_memory(ctx, tg, out, data):
                return
            if deletes:
                ctx.max_delete_seq = max(mf.sequence_number or 0 for mf in deletes)
            else:
                ctx.index_ready.set()
            todo = [*deletes, *data]  # the delete index first: data files may wait for it
            count = len(todo) + (len(rest) if rest else 0)  # at most
            total_bytes = sum(mf.manifest_length for mf in todo)
            if listing is not None and rest:
                total_bytes += listing.total_length(rest)
            ctx.lanes = loader.lanes(total_bytes)
            manifests_in, manifests_out = anyio.create_memory_object_stream[ManifestFile](count)
            decoded_in, decoded_out = anyio.create_memory_object_stream[Decoded](
                parts.options.buffered_manifests
            )
            with manifests_in:
                for mf in todo:
                    manifests_in.send_nowait(mf)
                tg.start_soon(build_tasks, ctx, decoded_out, out.clone())
                if listing is None or not rest:
                    manifests_in.close()
                    await start_workers(ctx, tg, manifests_out, decoded_in, count, len(deletes))
                    return
                tg.start_soon(start_workers, ctx, tg, manifests_out, decoded_in, count, 0)
                try:
                    await anyio.to_thread.run_sync(listing.build, listing.unbuilt(rest))
                    for mf in chooser.select_rest(listing, rest, ctx.metrics):
                        manifests_in.send_nowait(mf)
                except Exception as e:
                    await out.send(Failed(e))
    except anyio.BrokenResourceError:
        pass


async def _prepare(parts: PlanParts) -> None:
    await anyio.to_thread.run_sync(parts.prepare)


async def _from_memory(
    ctx: PlanContext, tg: anyio.abc.TaskGroup, out: MemoryObjectSendStream[Batch], data: list[ManifestFile]
) -> bool:
    """When the shared cache holds every manifest the plan reads (a view or the whole
    decode), their views come from one pass over all of them in a worker thread, and the
    task builder takes them as any; False (nothing done) when one must be fetched."""
    loader = ctx.parts.loader
    held = loader.held_in_memory(data)
    if held is None:
        return False
    try:
        views = await anyio.to_thread.run_sync(
            loader.views_from_memory, data, held, ctx, limiter=loader.runtime.prune_lane()
        )
    except Exception as e:
        await out.send(Failed(e))
        return True
    decoded_in, decoded_out = anyio.create_memory_object_stream[Decoded](len(views))
    with decoded_in:
        for view in views:
            if view.entries:
                decoded_in.send_nowait(view)
    tg.start_soon(build_tasks, ctx, decoded_out, out.clone())
    return True


async def start_workers(
    ctx: PlanContext,
    tg: anyio.abc.TaskGroup,
    manifests: MemoryObjectReceiveStream[ManifestFile],
    decoded: MemoryObjectSendStream[Decoded],
    count: int,
    deletes: int,
) -> None:
    """``io_concurrency`` fetch+decode workers. The first starts alone and the rest once its
    request is out: its GET is first in line, not queued behind a burst of others, and the
    loop has issued the rest (63 requests: ~4 ms of it) before its bytes land; its decode
    runs alone (``Lanes.first_alone``), so the first task is about one fetch and one decode
    away. The rest once waited for that decode too, a round trip and a decode (~25 ms) that
    every big plan paid before its other manifests were asked for. A plan reading few
    manifests (a selective filter) starts them all at once."""
    io_concurrency = ctx.parts.options.io_concurrency
    n = min(io_concurrency, count)
    if ctx.lanes is not None and count <= io_concurrency:
        ctx.lanes.batches.gather = True  # every fetch starts at once: decode the burst together
    ctx.deletes_left = deletes
    with manifests, decoded:
        first_done = anyio.Event()
        first_request = ctx.first_request = anyio.Event() if n > 1 and count > io_concurrency // 2 else None
        tg.start_soon(fetch_and_decode, ctx, manifests.clone(), decoded.clone(), first_done)
        if n > 1:
            if first_request is not None:
                await first_request.wait()  # set as its request goes out, or as its load ends
            for _ in range(n - 1):
                tg.start_soon(fetch_and_decode, ctx, manifests.clone(), decoded.clone(), None)


async def fetch_and_decode(
    ctx: PlanContext,
    manifests: MemoryObjectReceiveStream[ManifestFile],
    decoded: MemoryObjectSendStream[Decoded],
    first_done: anyio.Event | None,
) -> None:
    """One worker: manifests in, decoded views out (delete manifests go to the index).
    ``first_done`` (the plan's first worker): set once its first manifest is decoded, or
    its first blocks' view sent ahead."""
    loader, unpartitioned = ctx.parts.loader, ctx.parts.unpartitioned_spec_ids
    with manifests, decoded:
        try:
            async for mf in manifests:
                early = None
                if first_done is not None:  # the plan's first manifest may send its first blocks' view ahead
                    early = functools.partial(_send_ahead, decoded, first_done)
                try:
                    loaded = await loader.load(mf, ctx, early)
                except Exception as e:
                    if mf.content == ManifestContent.DELETES:
                        ctx.index_error = e
                        ctx.index_ready.set()
                    await decoded.send(Failed(e))
                    return
                finally:
                    if first_done is not None:
                        ctx.request_started()  # (a manifest found in memory needs no request)
                        first_done.set()
                        first_done = None
                if mf.content == ManifestContent.DELETES:
                    for entry in loaded.entries:
                        ctx.index.add(entry, unpartitioned)
                    ctx.deletes_left -= 1
                    if ctx.deletes_left == 0:
                        ctx.index_ready.set()
                elif loaded.entries:
                    await decoded.send(loaded)
                del loaded  # a consumed view must not live on while this worker fetches the next
        except anyio.BrokenResourceError:
            pass


async def _send_ahead(
    decoded: MemoryObjectSendStream[Decoded], done: anyio.Event, view: CachedManifest
) -> None:
    await decoded.send(view)
    done.set()


async def build_tasks(
    ctx: PlanContext, decoded: MemoryObjectReceiveStream[Decoded], out: MemoryObjectSendStream[Batch]
) -> None:
    """Decoded manifests in, one batch of tasks per manifest out; stops at the scan's limit."""
    with decoded, out:
        try:
            await _build(ctx, decoded, out)
            ctx.complete = True
        except anyio.BrokenResourceError:
            pass  # the caller is gone
        except Exception as e:
            with suppress(anyio.BrokenResourceError):
                await out.send(Failed(e))


async def _build(
    ctx: PlanContext, decoded: MemoryObjectReceiveStream[Decoded], out: MemoryObjectSendStream[Batch]
) -> None:
    parts = ctx.parts
    builder, limit = parts.tasks, parts.limit
    # without delete manifests or splitting, a manifest's tasks follow from its view alone
    plain = ctx.max_delete_seq is None and parts.options.split_size is None
    rows = 0
    handed = 0  # batches handed over
    delete_files: set[str] = set()
    async for item in decoded:
        if isinstance(item, Failed):
            raise item.error
        entries = builder.kept(item.entries)
        if plain:
            if limit is None and ctx.demand is not None:
                at_least = 0
                if _joinable(entries):
                    await ctx.demand.wait()
                    # the first batch goes at once (the first task's latency); later ones
                    # wait for a few manifests' views when the decodes lag the caller
                    at_least = JOIN_MIN_ROWS if handed else 0
                handed += 1
                failed = None
                for ready in await _with_waiting(decoded, entries, builder, at_least):
                    if isinstance(ready, Failed):
                        failed = ready  # raised once what was decoded before it is sent
                    else:
                        await out.send(LazyTasks(builder, ready))
                if failed is not None:
                    raise failed.error
                continue
            tasks: Sequence[FileScanTask] = LazyTasks(builder, entries)
            if limit is not None:  # counted and cut here, so built here, once
                tasks, rows = _up_to_limit(tuple(tasks), rows, limit)
            await out.send(tasks)
            if limit is not None and rows >= limit:
                return
            continue
        if ctx.max_delete_seq is not None:
            await ctx.index_ready.wait()
            if ctx.index_error is not None:
                raise ctx.index_error
        batch: list[FileScanTask] = []
        for entry in entries:
            found: tuple[DataFile, ...] = ()
            if ctx.max_delete_seq is not None and (entry.sequence_number or 0) <= ctx.max_delete_seq:
                found = ctx.index.for_data_file(entry.sequence_number, entry.data_file)
                delete_files.update(d.file_path for d in found)
            batch.extend(builder.tasks_for(entry, found))
            if limit is not None and not found and isinstance(builder.residual(entry.data_file), AlwaysTrue):
                rows += entry.data_file.record_count
                if rows >= limit:
                    break
        ctx.metrics.delete_files = len(delete_files)
        await out.send(batch)
        if limit is not None and rows >= limit:
            return


# views joined into one batch of tasks at most: this many rows, this many views
JOIN_ROWS_MAX = 4096
JOIN_VIEWS_MAX = 32
# ...and a batch after the first waits for views until it holds this many rows
JOIN_MIN_ROWS = 2048


def _joinable(entries: Sequence[ManifestEntry]) -> bool:
    return isinstance(entries, ColumnarRows) and not entries.built


class _Joined:
    """Views' columns joined into one view (see :func:`_with_waiting`). A view that is a
    range of a :class:`SharedRows` (a manifest decoded in one call with its neighbours)
    joins only the next range of the same call: together they are one range of it, whose
    task batch is a slice of the call's, built once. Handed over one range a manifest, a
    500 x 1000 plan made ~460 batches of ~1000 rows, each with its own handoff and slice."""

    def __init__(self, entries: ColumnarRows) -> None:
        self.first = entries
        self.parts = list(entries.parts)
        self.rows = len(entries)
        self.shared = entries.shared

    def has_room(self) -> bool:
        return self.rows < JOIN_ROWS_MAX and len(self.parts) < JOIN_VIEWS_MAX

    def add(self, more: Sequence[ManifestEntry]) -> bool:
        if not (_joinable(more) and isinstance(more, ColumnarRows) and more.spec_id == self.first.spec_id):
            return False
        if self.shared is not None or more.shared is not None:
            return self._add_range(more)
        self.parts.extend(more.parts)
        self.rows += len(more)
        return True

    def _add_range(self, more: ColumnarRows) -> bool:
        if self.shared is None or more.shared is None:
            return False
        group, start, stop = self.shared
        follows, begins, ends = more.shared
        if follows is not group or begins != stop:
            return False
        self.shared = (group, start, ends)
        self.rows += len(more)
        return True

    def entries(self) -> ColumnarRows:
        first = self.first
        if self.shared is not None:
            if self.shared == first.shared:
                return first
            group, start, stop = self.shared
            cm, at, wanted = group.part
            return ColumnarRows(((cm, at[start:stop], wanted),), first.spec_id, self.shared)
        return first if len(self.parts) == len(first.parts) else ColumnarRows(self.parts, first.spec_id)


async def _with_waiting(
    decoded: MemoryObjectReceiveStream[Decoded],
    entries: Sequence[ManifestEntry],
    builder: TaskBuilder,
    at_least: int = 0,
) -> list[Sequence[ManifestEntry] | Failed]:
    """``entries``, joined with the views already waiting behind it (decoded while the
    consumer took the last batch) when both are columns of one spec: a consumer of task
    batches (:mod:`aioiceberg.scan.task_batches`) pays ~30 Arrow and numpy calls a batch
    whatever its rows, so a plan whose decodes run ahead of its consumer hands over fewer,
    bigger batches. Views not decoded yet are waited for until the batch holds ``at_least``
    rows (or the plan has no more). In the order decoded; a :class:`Failed` ends the list."""
    if not isinstance(entries, ColumnarRows) or not _joinable(entries):
        return [entries]
    joined = _Joined(entries)
    rest: list[Sequence[ManifestEntry] | Failed] = []
    while joined.has_room():
        try:
            item = decoded.receive_nowait()
        except anyio.WouldBlock:
            if joined.rows >= at_least:
                break
            try:
                item = await decoded.receive()
            except anyio.EndOfStream:
                break
        except anyio.EndOfStream:
            break
        if isinstance(item, Failed):
            rest.append(item)
            break
        more = builder.kept(item.entries)
        if more and not joined.add(more):
            rest.append(more)  # after what is joined so far, in order
            break
    return [joined.entries(), *rest]


class LazyTasks(Sequence[FileScanTask]):
    """A view's delete-free, unsplit tasks, built as they are taken: a caller that drops
    each task before taking the next never holds more than one (nor its data file), so none
    lives long enough for the cycle collector to promote it (measured: 2-3 s of an 8 s plan
    of 500k tasks went to full collections when views kept their tasks)."""

    __slots__ = ("_builder", "_entries")

    def __init__(self, builder: TaskBuilder, entries: Sequence[ManifestEntry]) -> None:
        self._builder = builder
        self._entries = entries

    @property
    def entries(self) -> Sequence[ManifestEntry]:
        return self._entries

    @property
    def builder(self) -> TaskBuilder:
        return self._builder

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[FileScanTask]:
        return self._builder.iter_plain_tasks(self._entries)

    @overload
    def __getitem__(self, index: int) -> FileScanTask: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[FileScanTask, ...]: ...

    def __getitem__(self, index: int | slice) -> FileScanTask | tuple[FileScanTask, ...]:
        if isinstance(index, slice):
            return tuple(self._builder.iter_plain_tasks(self._entries[index]))
        return next(self._builder.iter_plain_tasks([self._entries[index]]))


def _up_to_limit(tasks: Sequence[FileScanTask], rows: int, limit: int) -> tuple[Sequence[FileScanTask], int]:
    """The tasks up to the one whose unfiltered rows reach ``limit``, and the rows so far."""
    for i, task in enumerate(tasks):
        if isinstance(task.residual, AlwaysTrue):
            rows += task.file.record_count
            if rows >= limit:
                return tasks[: i + 1], rows
    return tasks, rows


async def _stages_in_own_task(
    ctx: PlanContext, out: MemoryObjectSendStream[Batch], selected: Selected | None
) -> None:
    """The pipeline task of a plan iterated without ``async with``: it owns the task group."""
    try:
        async with task_group() as tg:
            tg.start_soon(run_stages, ctx, tg, out, selected)
    except Exception as e:  # a stage's bug (their errors are items): the caller raises it
        ctx.error = e


class PlanStream:
    """The tasks of one plan, as they are decided: an async iterator, and an async context
    manager that owns the plan's task group (see the module docstring)."""

    def __init__(self, ctx: PlanContext) -> None:
        self._ctx = ctx
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._tasks: AsyncGenerator[FileScanTask, None] | None = None
        self._batches: AsyncGenerator[Sequence[FileScanTask], None] | None = None

    @property
    def metrics(self) -> PlanMetrics:
        return self._ctx.metrics

    async def __aenter__(self) -> PlanStream:
        if self._tasks is not None:
            raise RuntimeError("plan_files(): enter the plan before iterating it")
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(task_group())
        self._stack, self._tg = stack, tg
        decided, selected = decide_from_cache(self._ctx)
        if decided is not None:
            self._tasks = _consume_decided(self._ctx, decided)
            return self
        out, receive = anyio.create_memory_object_stream[Batch](1)
        stack.callback(receive.close)
        tg.start_soon(run_stages, self._ctx, tg, out, selected)
        self._tasks = _consume(self._ctx, receive, None)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stack is not None and self._tg is not None and self._tasks is not None
        self._tg.cancel_scope.cancel()
        try:
            await self._tasks.aclose()
        finally:
            await self._stack.__aexit__(None, None, None)
            self._ctx.finish()

    def __aiter__(self) -> AsyncGenerator[FileScanTask, None]:
        # ``async for`` steps the generator itself, not through ``__anext__`` (~1 us a task)
        return self._iterator()

    def _iterator(self) -> AsyncGenerator[FileScanTask, None]:
        if self._tasks is None:  # no ``async with``: a pipeline task owns the stages
            decided, selected = decide_from_cache(self._ctx)
            if decided is not None:
                self._tasks = _consume_decided(self._ctx, decided)
                return self._tasks
            out, receive = anyio.create_memory_object_stream[Batch](1)
            host = asyncio.get_running_loop().create_task(_stages_in_own_task(self._ctx, out, selected))
            self._tasks = _consume(self._ctx, receive, host)
        return self._tasks

    def __anext__(self) -> Awaitable[FileScanTask]:
        return self._iterator().__anext__()

    def batches(self, joined: bool = False) -> AsyncGenerator[Sequence[FileScanTask], None]:
        """The plan's tasks in sequences, one per manifest as it is decided, for a consumer in
        another thread that takes a sequence per handoff, not a task (the blocking API). A
        sequence may build its tasks as they are taken, in the taker's thread. Used instead
        of iterating the plan (not both), and outside ``async with``. ``joined``: for a
        consumer that turns each sequence into one Arrow batch (``plan_batches``), the
        manifests decided by the time it asks come joined (see :class:`Demand`): a batch
        costs as many calls whatever its size. Not for tasks taken one by one: a bigger
        sequence crosses to the blocking API's caller later, and nothing is saved."""
        if self._tasks is not None or self._batches is not None:
            raise RuntimeError("plan_files(): batches() on a plan already iterated or entered")
        decided, selected = decide_from_cache(self._ctx)
        if decided is not None:
            self._batches = _batches_decided(self._ctx, decided)
        else:
            out, receive = anyio.create_memory_object_stream[Batch](1)
            if joined:
                self._ctx.demand = Demand()
            host = asyncio.get_running_loop().create_task(_stages_in_own_task(self._ctx, out, selected))
            self._batches = _batches(self._ctx, receive, host)
        return self._batches

    async def aclose(self) -> None:
        if self._tasks is not None:
            await self._tasks.aclose()
        if self._batches is not None:
            await self._batches.aclose()


async def _consume(
    ctx: PlanContext, receive: MemoryObjectReceiveStream[Batch], host: asyncio.Task[None] | None
) -> AsyncGenerator[FileScanTask, None]:
    """The caller's end. Holds no reference to the :class:`PlanStream`, so dropping that
    drops this generator, whose ``finally`` (run by the loop's finaliser) ends the plan."""
    m = ctx.metrics
    try:
        with receive:
            async for batch in receive:
                if isinstance(batch, Failed):
                    raise batch.error
                if batch and m.time_to_first_task_s is None:
                    m.time_to_first_task_s = time.perf_counter() - ctx.started
                for task in batch:
                    m.tasks += 1
                    yield task
        if not ctx.complete:
            if ctx.error is not None:
                raise ctx.error
            raise PlanInterruptedError("planning was cancelled before its last task")
    finally:
        if host is not None and not host.done():
            host.cancel()
            await asyncio.wait({host})
        ctx.finish()


async def _consume_decided(
    ctx: PlanContext, batches: list[Sequence[FileScanTask]]
) -> AsyncGenerator[FileScanTask, None]:
    """The caller's end of a plan decided from the caches: the same metrics, and the loop is
    let run between batches as it is between the stages' items."""
    m = ctx.metrics
    try:
        for batch in batches:
            await anyio.lowlevel.checkpoint()
            if batch and m.time_to_first_task_s is None:
                m.time_to_first_task_s = time.perf_counter() - ctx.started
            for task in batch:
                m.tasks += 1
                yield task
    finally:
        ctx.finish()


async def _batches(
    ctx: PlanContext, receive: MemoryObjectReceiveStream[Batch], host: asyncio.Task[None]
) -> AsyncGenerator[Sequence[FileScanTask], None]:
    """:func:`_consume`, a batch at a time (its tasks are counted as the batch is handed on)."""
    m = ctx.metrics
    try:
        with receive:
            demand = ctx.demand
            while True:
                if demand is not None:
                    demand.ask()
                try:
                    batch = await receive.receive()
                except anyio.EndOfStream:
                    break
                if isinstance(batch, Failed):
                    raise batch.error
                if batch:
                    if m.time_to_first_task_s is None:
                        m.time_to_first_task_s = time.perf_counter() - ctx.started
                    m.tasks += len(batch)
                    yield batch
        if not ctx.complete:
            if ctx.error is not None:
                raise ctx.error
            raise PlanInterruptedError("planning was cancelled before its last task")
    finally:
        if not host.done():
            host.cancel()
            await asyncio.wait({host})
        ctx.finish()


async def _batches_decided(
    ctx: PlanContext, batches: list[Sequence[FileScanTask]]
) -> AsyncGenerator[Sequence[FileScanTask], None]:
    """:func:`_consume_decided`, a batch at a time."""
    m = ctx.metrics
    try:
        for batch in batches:
            await anyio.lowlevel.checkpoint()
            if batch:
                if m.time_to_first_task_s is None:
                    m.time_to_first_task_s = time.perf_counter() - ctx.started
                m.tasks += len(batch)
                yield batch
    finally:
        ctx.finish()
