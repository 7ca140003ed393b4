"""``hosted``: a public async generator whose body holds a task group across its yields,
driven by a task of its own so that a caller may leave it unclosed."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from aioiceberg._concurrency import hosted, task_group
from aioiceberg.errors import CorruptFileError, PlanInterruptedError

pytestmark = pytest.mark.anyio


class _Source:
    """An async generator holding a task group across its yields, as a scan's reads do."""

    def __init__(self, items: int = 10_000, fail_at: int | None = None) -> None:
        self.items, self.fail_at = items, fail_at
        self.closed_in: asyncio.Task[Any] | None = None
        self.started_in: asyncio.Task[Any] | None = None
        self.sent = 0
        self.worker_cancelled = False

    async def __call__(self) -> AsyncGenerator[int, None]:
        self.started_in = asyncio.current_task()
        try:
            async with task_group() as tg:

                async def worker() -> None:
                    try:
                        await anyio.sleep_forever()
                    except BaseException:
                        self.worker_cancelled = True
                        raise

                tg.start_soon(worker)
                for i in range(self.items):
                    if i == self.fail_at:
                        raise CorruptFileError("manifest is damaged", location="s3://b/m.avro")
                    await anyio.sleep(0)
                    self.sent += 1
                    yield i
                tg.cancel_scope.cancel()
        finally:
            self.closed_in = asyncio.current_task()


async def _settle() -> None:
    for _ in range(3):
        gc.collect()
        for _ in range(20):
            await asyncio.sleep(0)


async def test_items_arrive_in_order_and_the_source_ends_in_its_own_task() -> None:
    source = _Source(items=50)
    got = [i async for i in hosted(source)]
    assert got == list(range(50))
    assert source.started_in is not None and source.started_in is not asyncio.current_task()
    assert source.closed_in is source.started_in


async def test_an_error_reaches_the_caller_as_raised() -> None:
    source = _Source(fail_at=7)
    got: list[int] = []
    with pytest.raises(CorruptFileError, match="damaged") as err:
        async for i in hosted(source):
            got.append(i)
    assert got == list(range(7))
    assert err.value.location == "s3://b/m.avro"
    assert source.worker_cancelled


async def test_a_stream_left_unclosed_neither_cancels_its_caller_nor_runs_on() -> None:
    """``break`` without ``aclosing``: the loop's finalizer closes the relay in another task.
    The caller goes on (it was cancelled when the source's task group was left there), the
    source is closed in its own task, and its work stops."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    source = _Source()
    try:
        stream = hosted(source)
        async for i in stream:
            if i == 3:
                break
        del stream
        await _settle()
        await asyncio.sleep(0.01)  # the caller is still running: not cancelled
    finally:
        loop.set_exception_handler(previous)
    assert errors == []
    assert source.closed_in is source.started_in
    assert source.worker_cancelled
    sent = source.sent
    await _settle()
    assert source.sent == sent < source.items


async def test_closing_the_stream_stops_the_source_at_once() -> None:
    source = _Source()
    async with aclosing(hosted(source)) as stream:
        async for i in stream:
            if i == 2:
                break
    # aclose waited for the driving task: the source is closed already
    assert source.closed_in is source.started_in
    assert source.worker_cancelled
    assert source.sent <= 4


async def test_a_cancelled_caller_cancels_the_source() -> None:
    source = _Source()
    reached = anyio.Event()

    async def consume() -> None:
        async with aclosing(hosted(source)) as stream:
            async for i in stream:
                if i == 5:
                    reached.set()
                    await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await reached.wait()
        tg.cancel_scope.cancel()
    assert source.closed_in is source.started_in
    assert source.worker_cancelled


async def test_a_source_task_cancelled_from_outside_is_no_end_of_stream() -> None:
    """Its task cancelled by someone else (the loop shutting down, say): the caller is told
    the stream was cut, not handed a short stream as if it were whole."""
    source = _Source()
    got: list[int] = []
    with pytest.raises(PlanInterruptedError):
        async with aclosing(hosted(source)) as stream:
            async for i in stream:
                got.append(i)
                if i == 3:
                    assert source.started_in is not None
                    source.started_in.cancel()
    assert 4 <= len(got) < source.items
    assert source.closed_in is source.started_in
