"""Pauses of the cyclic garbage collector while planning builds many small objects.

The collector is the process's, whichever runtime asks, so its pauses are counted here,
once per process (nested and concurrent pauses end with the last one). Lower than the
runtime, so the decoders pause it without reaching for the runtime.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = ["GcPause", "collector_paused"]


class GcPause:
    """Counted pauses of the cyclic collector (nested and concurrent ones end with the last)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pauses = 0
        self._was_enabled = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._pauses == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._pauses -= 1
                if self._pauses == 0 and self._was_enabled:
                    gc.enable()


# the process's one count: the collector it pauses is the process's too
_PAUSES = GcPause()


def collector_paused() -> AbstractContextManager[None]:
    """Pause the process's cyclic collector until the block ends."""
    return _PAUSES.paused()
