"""Leave an async stream after its first item, as a caller that breaks out without closing it
does, and see what the loop's finalizer does with it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any


async def first_then_settle(stream: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The stream's first item, and what reached the loop's exception handler while the
    stream, left after that item, was collected (the caller still running afterwards: not
    cancelled by it)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    first = None
    try:
        async for item in stream:
            first = item
            break
        del stream
        gc.collect()
        for _ in range(20):
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0.01)
    finally:
        loop.set_exception_handler(previous)
    return first, errors
