"""One background event loop that runs the async API for blocking callers.

The async API never creates an event loop; only the blocking facade owns one, through
the default runtime. It is a daemon thread started on first use, shared by every thread
of the process (clients are per event loop, so all blocking callers share one set of
connections), restarted in a child after ``fork`` (the parent's loop thread does not
exist there), and shut down at interpreter exit after closing the clients it opened.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["DEFAULT_PREFETCH", "BlockingLoop"]

# Items an iterator may run ahead of its consumer: enough to hide the thread hop, few
# enough that a stream of large record batches stays bounded in memory.
DEFAULT_PREFETCH = 8


class BlockingLoop:
    """The background loop and its thread; the default runtime owns the one the blocking
    API uses. Clients opened on the loop close with its async generators at shutdown (the
    runtime's client registry parks one on every loop it serves)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None  # set: the loop's root task returns
        self._root: asyncio.Task[Any] | None = None
        # Loops (and through them clients) inherited from the parent across fork: kept
        # referenced so their sockets are never closed or garbage collected in the child.
        self._inherited: list[object] = []
        ref = weakref.ref(self)
        atexit.register(_shutdown_at_exit, ref)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _forked(ref))

    def _start(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and self._thread is not None and self._thread.is_alive():
            return loop
        with self._lock:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            roots: list[asyncio.Task[Any]] = []  # the loop's root task, once it runs
            stopping = asyncio.Event()  # bound to the loop on first use, in its thread

            def main() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                # A root task that lives as long as the loop: anyio ties its worker threads to
                # the root task, which under ``run_forever`` was each call's own task, so every
                # blocking call that decoded started a thread and stopped it at its end.
                root = loop.create_task(stopping.wait())
                roots.append(root)
                loop.run_until_complete(root)

            thread = threading.Thread(target=main, name="aioiceberg-sync-loop", daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread, self._stopping = loop, thread, stopping
            self._root = roots[0]
            return loop

    @property
    def thread(self) -> threading.Thread | None:
        """The background loop's thread, if it runs (for tests and diagnostics)."""
        return self._thread

    def _check_caller(self) -> asyncio.AbstractEventLoop:
        loop = self._start()
        if self._thread is threading.current_thread():
            raise RuntimeError(
                "aioiceberg.sync called from inside its own event loop; use the async API there"
            )
        return loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the background loop and wait for its result.

        Safe from any thread, including one that already runs its own event loop
        (a notebook): the work happens on the background loop, never on the caller's.
        """
        try:
            loop = self._check_caller()
        except BaseException:
            coro.close()
            raise
        return _wait(asyncio.run_coroutine_threadsafe(coro, loop))

    def iterate(self, make: Callable[[], AsyncIterator[T]], prefetch: int = DEFAULT_PREFETCH) -> Iterator[T]:
        """Turn an async iterator into a plain generator, still streaming.

        A pump task on the loop pulls items into a queue that the caller drains, so each
        item costs no thread round trip, and the producer runs at most ``prefetch`` items
        ahead. Closing the generator early (``break``) cancels the pump and closes the
        async iterator on the loop.
        """
        loop = self._check_caller()
        return _iterate(loop, make, prefetch, batched=False)

    def iterate_batches(
        self, make: Callable[[], AsyncIterator[Sequence[T]]], prefetch: int = DEFAULT_PREFETCH
    ) -> Iterator[T]:
        """:meth:`iterate` over an async iterator of sequences, yielding their items: each
        sequence crosses to the caller's thread in one handoff (a plan's 1000 tasks of a
        manifest cost one queue put, not 1000), and is iterated there, so a lazy sequence
        builds its items in the caller's thread, one at a time. ``prefetch`` counts items:
        a sequence longer than that crosses alone, once the caller has taken all before it.
        """
        loop = self._check_caller()
        return _iterate(loop, make, prefetch, batched=True)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Close the loop's async generators (and with them its clients), then stop it."""
        with self._lock:
            loop, thread, stopping, root = self._loop, self._thread, self._stopping, self._root
            self._loop, self._thread, self._stopping, self._root = None, None, None, None
        if loop is None or thread is None or not thread.is_alive():
            return

        async def close_all() -> None:
            # The tasks first, as ``asyncio.run`` ends: a stream its caller never finished (a
            # batch reader left open, a DuckDB view) has a task suspended inside it, which
            # closes it in that task as it is cancelled. Closed from here instead, its async
            # generators raced with that task ("already running", a cancel scope exited in
            # another task), each error printed at the interpreter's exit.
            await _cancel_tasks(loop, {asyncio.current_task(), root}, timeout / 2)  # (within the wait)
            await loop.shutdown_asyncgens()
            # let transports finish closing (aiohttp connectors close their sockets on the next tick)
            await asyncio.sleep(0)

        try:
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout=timeout)
        except Exception:
            pass
        loop.call_soon_threadsafe(stopping.set if stopping is not None else loop.stop)
        thread.join(timeout=timeout)
        if not loop.is_running():
            loop.close()

    def _after_fork_in_child(self) -> None:
        # The loop thread did not survive the fork: forget it and its clients without touching
        # them (their sockets belong to the parent), and take a fresh lock in case one was held.
        if self._loop is not None:
            self._inherited.append(self._loop)
        self._lock = threading.Lock()
        self._loop, self._thread, self._stopping, self._root = None, None, None, None


async def _cancel_tasks(
    loop: asyncio.AbstractEventLoop, keep: set[asyncio.Task[Any] | None], timeout: float
) -> None:
    """Cancel every task of ``loop`` but ``keep``, each once, and wait for them, up to ``timeout``.

    A task that has not taken its first step is let take it before it is cancelled: one
    cancelled before then never runs its coroutine, and a task group's child wraps its own
    (anyio >= 4.14), which is then collected unawaited ("coroutine ... was never awaited"
    at the interpreter's exit). Tasks started while others wind down are cancelled too.
    """
    deadline = loop.time() + timeout
    cancelled: set[asyncio.Task[Any]] = set()
    while (left := deadline - loop.time()) > 0:
        pending = [t for t in asyncio.all_tasks(loop) if t not in keep and not t.done()]
        if not pending:
            return
        unstarted = False
        for task in pending:
            if task in cancelled:
                continue
            if _started(task):
                task.cancel()
                cancelled.add(task)
            else:
                unstarted = True
        if unstarted:
            await asyncio.sleep(0)  # one step for the new ones, then round again
        else:
            await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)


def _started(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    return not inspect.iscoroutine(coro) or inspect.getcoroutinestate(coro) != inspect.CORO_CREATED


def _shutdown_at_exit(ref: weakref.ReferenceType[BlockingLoop]) -> None:
    found = ref()
    if found is not None:
        found.shutdown()


def _forked(ref: weakref.ReferenceType[BlockingLoop]) -> None:
    found = ref()
    if found is not None:
        found._after_fork_in_child()


def _wait(future: Future[T]) -> T:
    try:
        return future.result()
    except BaseException:
        # Ctrl-C (or any interruption) in the caller: stop the work instead of orphaning it.
        future.cancel()
        raise


_END = object()


class _Credit:
    """How many items the pump may hand over before the caller takes some: the bound of the
    handoff queue, in items.

    The pump (on the loop) adds what it hands over to ``handed``; the caller's thread adds
    what it has taken to ``taken``; each field has one writer. The caller wakes the loop
    only when the pump waits, once per wait and once half the limit is free (see
    :meth:`give`), not per sequence: each ``call_soon_threadsafe``
    is a write to the loop's self-pipe that releases the caller's GIL, and a loop iteration
    that must win the GIL back from whichever thread holds it (up to a switch interval, 5
    ms, from a busy one): a 100k-task plan of 2000 manifests cost 2000 of them given back
    per sequence, and 4 this way. No wake-up is lost: the pump publishes its waiter before
    it checks the counters again, and the caller moves ``taken`` before it looks for a
    waiter.
    """

    __slots__ = ("handed", "limit", "loop", "taken", "waiter", "woken")

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self.handed = 0
        self.taken = 0
        self.waiter: asyncio.Future[None] | None = None
        self.woken: asyncio.Future[None] | None = None  # the waiter a wake-up is on its way to

    def _full(self, n: int) -> bool:
        # a sequence longer than the limit waits for everything before it to be taken
        return self.limit - (self.handed - self.taken) < min(n, self.limit)

    async def take(self, n: int) -> None:
        """On the loop: wait until ``n`` more items fit, then count them handed."""
        while self._full(n):
            waiter = self.loop.create_future()
            self.waiter = waiter
            try:
                if self._full(n):  # the caller may have taken some before it saw the waiter
                    await waiter
            finally:
                self.waiter = None
        self.handed += n

    def give(self, n: int) -> None:
        """In the caller's thread: ``n`` items were taken; wake the pump if it waits and at
        most half the limit is still queued (at the latest when nothing is). Woken as soon as
        one sequence fitted, the pump handed that one and waited again: one wake-up per
        sequence (2000 in a warm 100k-task plan, whose loop thread then spent ~0.3 CPU-s on
        them beside the caller); from half, one per half a limit."""
        self.taken += n
        waiter = self.waiter
        if waiter is not None and waiter is not self.woken and self.handed - self.taken <= self.limit // 2:
            self.woken = waiter
            self.loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _iterate(
    loop: asyncio.AbstractEventLoop, make: Callable[[], AsyncIterator[Any]], prefetch: int, batched: bool
) -> Iterator[Any]:
    items: queue.SimpleQueue[tuple[object, Any]] = queue.SimpleQueue()
    credit = _Credit(loop, max(1, prefetch))

    async def pump() -> None:
        agen = make()
        take, put = credit.take, items.put
        try:
            async for got in agen:
                batch = got if batched else (got,)
                n = len(batch)
                if n:
                    await take(n)
                    put((None, batch))
        except BaseException as exc:
            put((_END, exc))
            if not isinstance(exc, Exception):
                raise
        else:
            put((_END, None))
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                await aclose()

    task_future = asyncio.run_coroutine_threadsafe(pump(), loop)
    # The caller's wait is a blocking ``get`` (a lock wait, the GIL released: no polling);
    # items already queued are taken without waiting.
    give, get = credit.give, items.get
    finished = False
    try:
        while True:
            marker, value = get()
            if marker is _END:
                finished = True
                if isinstance(value, BaseException):
                    raise value
                return
            yield from value
            give(len(value))
    finally:
        if not finished and not task_future.done():
            task_future.cancel()
            try:
                task_future.result(timeout=30)
            except BaseException:
                pass
