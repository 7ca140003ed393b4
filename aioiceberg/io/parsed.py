"""Objects parsed from files that never change once written, reused when a read returns the
same bytes again.

A table's metadata file is such a file, yet every load reads it (it may have been removed):
when the bytes are the ones parsed last time at that location, the parse is reused. The key is
the location and the content both, so a rewritten file (a store that allows it) is parsed anew.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ParsedFiles"]

T = TypeVar("T")


class ParsedFiles(Generic[T]):
    """The last parse of each of the most recently read ``max_items`` locations, holding at
    most ``max_bytes`` of their bytes (a larger file is parsed every time)."""

    def __init__(self, max_bytes: int, max_items: int) -> None:
        self.max_bytes = max_bytes
        self.max_items = max_items
        self._items: OrderedDict[str, tuple[bytes, T]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get_or_parse(self, location: str, data: bytes, parse: Callable[[bytes, str], T]) -> T:
        with self._lock:
            found = self._items.get(location)
            if found is not None and found[0] == data:
                self._items.move_to_end(location)
                return found[1]
        parsed = parse(data, location)
        if len(data) <= self.max_bytes:
            with self._lock:
                old = self._items.pop(location, None)
                if old is not None:
                    self._bytes -= len(old[0])
                self._items[location] = (data, parsed)
                self._bytes += len(data)
                while self._bytes > self.max_bytes or len(self._items) > self.max_items:
                    _, (evicted, _) = self._items.popitem(last=False)
                    self._bytes -= len(evicted)
        return parsed

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
