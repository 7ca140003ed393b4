"""The default runtime's background loop, for the blocking faces (``aioiceberg.sync``, Spark).

Only the faces reach for the default runtime: the loop itself (``runner.BlockingLoop``)
is owned by a runtime and imports none.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from aioiceberg._sync.runner import DEFAULT_PREFETCH, BlockingLoop
from aioiceberg.runtime import default_runtime

T = TypeVar("T")

__all__ = ["DEFAULT_PREFETCH", "iterate", "iterate_batches", "loop_thread", "run", "shutdown"]


def _default() -> BlockingLoop:
    return default_runtime().blocking


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the default runtime's background loop and wait for its result."""
    return _default().run(coro)


def iterate(make: Callable[[], AsyncIterator[T]], prefetch: int = DEFAULT_PREFETCH) -> Iterator[T]:
    """Stream an async iterator to a blocking caller through the default runtime's loop."""
    return _default().iterate(make, prefetch)


def iterate_batches(
    make: Callable[[], AsyncIterator[Sequence[T]]], prefetch: int = DEFAULT_PREFETCH
) -> Iterator[T]:
    """Stream the items of an async iterator of sequences, a sequence per handoff (see
    :meth:`BlockingLoop.iterate_batches`), through the default runtime's loop."""
    return _default().iterate_batches(make, prefetch)


def loop_thread() -> threading.Thread | None:
    """The default runtime's background loop thread, if it runs."""
    return _default().thread


def shutdown(timeout: float = 10.0) -> None:
    """Close what the default runtime's background loop opened and stop it."""
    _default().shutdown(timeout)
