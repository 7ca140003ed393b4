"""The blocking API's handoff: the caller wakes a waiting pump once half the limit is free,
not after each sequence it takes (one wake-up per sequence cost a warm 100k-task plan's loop
thread ~0.3 CPU-s), and never leaves it waiting once everything handed over was taken."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from aioiceberg._sync.runner import BlockingLoop, _Credit


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join(5)
    running.close()


def _waiting_pump(loop: asyncio.AbstractEventLoop, credit: _Credit, n: int) -> asyncio.Future[None]:
    """Start ``credit.take(n)`` on the loop; it must be waiting (the limit is used up)."""
    fut = asyncio.run_coroutine_threadsafe(credit.take(n), loop)
    for _ in range(200):
        if credit.waiter is not None:
            break
        threading.Event().wait(0.005)
    assert credit.waiter is not None and not fut.done()
    return fut  # type: ignore[return-value]


def test_the_pump_is_woken_at_half_the_limit(loop: asyncio.AbstractEventLoop) -> None:
    credit = _Credit(loop, 8)
    credit.handed = 8
    fut = _waiting_pump(loop, credit, 1)
    credit.give(1)
    credit.give(2)  # 5 still queued: more than half
    threading.Event().wait(0.05)
    assert not fut.done()
    credit.give(1)  # 4 queued: half
    fut.result(timeout=5)  # type: ignore[union-attr]
    assert credit.handed == 9


def test_a_sequence_longer_than_the_limit_waits_for_an_empty_queue(loop: asyncio.AbstractEventLoop) -> None:
    credit = _Credit(loop, 8)
    credit.handed = 8
    fut = _waiting_pump(loop, credit, 20)
    for _ in range(7):
        credit.give(1)
    threading.Event().wait(0.05)
    assert not fut.done()
    credit.give(1)  # nothing queued: the long sequence goes
    fut.result(timeout=5)  # type: ignore[union-attr]
    assert credit.handed == 28


async def _sequences(count: int, size: int) -> AsyncIterator[list[int]]:
    for i in range(count):
        yield list(range(i * size, (i + 1) * size))
        await asyncio.sleep(0)


@pytest.mark.parametrize(("prefetch", "size"), [(1, 1), (2, 3), (64, 5), (64, 200), (4096, 50)])
def test_every_item_arrives_in_order(prefetch: int, size: int) -> None:
    runner = BlockingLoop()
    try:
        got = list(runner.iterate_batches(lambda: _sequences(300, size), prefetch=prefetch))
    finally:
        runner.shutdown()
    assert got == list(range(300 * size))
