"""One background event loop that runs the async API for blocking callers.

The async API never creates an event loop; only the blocking facade owns one. It is a
daemon thread started on first use, shared by every thread of the process (clients
are per event loop, so all blocking callers share one set of connections), restarted
in a child after ``fork`` (the parent's loop thread does not exist there), and shut
down at interpreter exit after closing the clients it opened.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["add_closer", "iterate", "run", "shutdown"]

# Items an iterator may run ahead of its consumer: enough to hide the thread hop, few
# enough that a stream of large record batches stays bounded in memory.
DEFAULT_PREFETCH = 8

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_closers: list[Callable[[], Awaitable[None]]] = []
# Loops (and through them clients) inherited from the parent across fork: kept referenced so
# their sockets are never closed or garbage collected (with warnings) in the child.
_inherited: list[object] = []


def _start() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    loop = _loop
    if loop is not None and _thread is not None and _thread.is_alive():
        return loop
    with _lock:
        if _loop is not None and _thread is not None and _thread.is_alive():
            return _loop
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=main, name="aioiceberg-sync-loop", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread = loop, thread
        return loop


def loop_thread() -> threading.Thread | None:
    """The background loop's thread, if it runs (for tests and diagnostics)."""
    return _thread


def add_closer(closer: Callable[[], Awaitable[None]]) -> None:
    """Register an async cleanup (e.g. closing clients) to run on the loop at shutdown."""
    if closer not in _closers:
        _closers.append(closer)


def _check_caller() -> asyncio.AbstractEventLoop:
    loop = _start()
    if _thread is threading.current_thread():
        raise RuntimeError("aioiceberg.sync called from inside its own event loop; use the async API there")
    return loop


def _wait(future: Future[T]) -> T:
    try:
        return future.result()
    except BaseException:
        # Ctrl-C (or any interruption) in the caller: stop the work instead of orphaning it.
        future.cancel()
        raise


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the background loop and wait for its result.

    Safe from any thread, including one that already runs its own event loop
    (a notebook): the work happens on the background loop, never on the caller's.
    """
    try:
        loop = _check_caller()
    except BaseException:
        coro.close()
        raise
    return _wait(asyncio.run_coroutine_threadsafe(coro, loop))


_END = object()


def iterate(make: Callable[[], AsyncIterator[T]], prefetch: int = DEFAULT_PREFETCH) -> Iterator[T]:
    """Turn an async iterator into a plain generator, still streaming.

    A pump task on the loop pulls items into a bounded queue that the caller drains, so
    each item costs no thread round trip, and the producer runs at most ``prefetch``
    items ahead. Closing the generator early (``break``) cancels the pump and closes
    the async iterator on the loop.
    """
    loop = _check_caller()
    items: queue.SimpleQueue[tuple[object, Any]] = queue.SimpleQueue()
    started = threading.Event()
    state: dict[str, Any] = {}

    async def pump() -> None:
        slots = asyncio.Semaphore(max(1, prefetch))
        state["slots"] = slots
        started.set()
        agen = make()
        try:
            async for item in agen:
                await slots.acquire()
                items.put((None, item))
        except BaseException as exc:
            items.put((_END, exc))
            if not isinstance(exc, Exception):
                raise
        else:
            items.put((_END, None))
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                await aclose()

    task_future = asyncio.run_coroutine_threadsafe(pump(), loop)
    started.wait()
    slots: asyncio.Semaphore = state["slots"]
    finished = False
    try:
        while True:
            marker, value = items.get()
            if marker is _END:
                finished = True
                if isinstance(value, BaseException):
                    raise value
                return
            loop.call_soon_threadsafe(slots.release)
            yield value
    finally:
        if not finished and not task_future.done():
            task_future.cancel()
            try:
                task_future.result(timeout=30)
            except BaseException:
                pass


def shutdown(timeout: float = 10.0) -> None:
    """Close registered clients and stop the loop; called at interpreter exit."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop, _thread = None, None
    if loop is None or thread is None or not thread.is_alive():
        return

    async def close_all() -> None:
        for closer in reversed(_closers):
            try:
                await closer()
            except Exception:
                pass
        await loop.shutdown_asyncgens()
        # let transports finish closing (aiohttp connectors close their sockets on the next tick)
        await asyncio.sleep(0)

    try:
        asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout=timeout)
    except Exception:
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=timeout)
    if not loop.is_running():
        loop.close()


def _after_fork_in_child() -> None:
    # The loop thread did not survive the fork: forget it and its clients without touching
    # them (their sockets belong to the parent), and take a fresh lock in case one was held.
    # Closers stay registered: they close whatever the child's own loop opens.
    global _loop, _thread, _lock
    if _loop is not None:
        _inherited.append(_loop)
    _lock = threading.Lock()
    _loop, _thread = None, None


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
