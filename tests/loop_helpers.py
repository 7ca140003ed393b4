"""A probe of the event loop: counts its passes while a test runs something on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class Ticks:
    """How many times a task beside the test got to run (once a loop pass at most)."""

    count = 0


@asynccontextmanager
async def loop_ticks() -> AsyncIterator[Ticks]:
    ticks = Ticks()

    async def ticker() -> None:
        while True:
            ticks.count += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        yield ticks
        tg.cancel_scope.cancel()
