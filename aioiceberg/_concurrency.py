"""Task groups whose failures reach the caller as themselves, not as an ExceptionGroup.

anyio wraps whatever its tasks raise in an ExceptionGroup, so ``except IcebergError``
around a public call would miss a corrupt file found by one of its workers. Every task
group on a public path goes through :func:`task_group`, which re-raises the first real
error; the others (if several tasks failed) become notes on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import NoReturn

import anyio
import anyio.abc

__all__ = ["first_error", "raise_first", "task_group"]


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for e in error.exceptions:
            yield from _leaves(e)
    else:
        yield error


def first_error(error: BaseException) -> BaseException:
    """The error a caller can act on: a group's first failure that is not a cancellation
    (the group itself when every member is one), the others added to it as notes."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    real = [e for e in _leaves(error) if not isinstance(e, asyncio.CancelledError)]
    if not real:
        return error
    first = real[0]
    for other in real[1:]:
        if other is not first:
            first.add_note(f"also failed: {type(other).__name__}: {other}")
    return first


def raise_first(error: BaseException) -> NoReturn:
    """Raise ``first_error(error)``, keeping the chaining it was raised with."""
    chosen = first_error(error)
    if chosen is error:
        raise error
    context, suppress = chosen.__context__, chosen.__suppress_context__
    try:
        raise chosen
    finally:
        # re-raising inside ``except`` would chain the group as context: keep the original
        chosen.__context__, chosen.__suppress_context__ = context, suppress


@asynccontextmanager
async def task_group() -> AsyncIterator[anyio.abc.TaskGroup]:
    """``anyio.create_task_group()`` that raises its first real error unwrapped.

    Cancellation behaves as in anyio: a group holding only cancellations propagates as is.
    """
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        raise_first(group)
