"""What a conditional-write probe found, and the results a runtime keeps by store (apart
from the probe itself, so a runtime holds them without depending on the FileIO contract)."""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProbeResult:
    create_only: bool
    replace_if_match: bool
    delete_if_match: bool
    detail: str = ""

    @property
    def safe_for_commits(self) -> bool:
        return self.create_only and self.replace_if_match


class ProbeCache:
    """Probe results by store, owned by a runtime: one probe per store and runtime."""

    def __init__(self) -> None:
        self.results: dict[str, ProbeResult] = {}
        # one probe at a time per store and loop; locks of finished loops go with them
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )

    def lock(self, key: str) -> asyncio.Lock:
        locks = self._locks.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(key, asyncio.Lock())

    def clear(self) -> None:
        self.results.clear()
        self._locks.clear()
