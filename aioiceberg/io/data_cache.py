"""Bytes of data files fetched from remote stores, kept for the next read (bounded, LRU).

Iceberg data and delete files are immutable: a file is written once under a fresh name and
never rewritten in place, so the bytes fetched for a path are the bytes of that path for
as long as any snapshot lists it. A service reading the same hot files again (a dashboard's
selective query every few seconds) then pays no GET and no transfer for them, as DuckDB's
external file cache does. The key is the store, the path *and* the size the manifest
records, so a path reused with other contents of another size is a miss, never a stale hit.

Only whole small files are kept (the reader fetches files up to ``WHOLE_FILE_MAX`` in one
GET), only from stores whose reads cross a network (local files have the OS page cache),
and no file larger than an eighth of the bound, so one big read cannot empty the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["DEFAULT_DATA_CACHE_BYTES", "DataFileCache"]

DEFAULT_DATA_CACHE_BYTES = 128 << 20

Key = tuple[str, str, int]  # (store key, path, size recorded in the manifest)


class DataFileCache:
    """A thread-safe LRU of file bytes, bounded by their total size (0 disables it)."""

    def __init__(self, max_bytes: int = DEFAULT_DATA_CACHE_BYTES) -> None:
        self.max_bytes = max(0, max_bytes)
        self._items: OrderedDict[Key, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Key) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return data

    def put(self, key: Key, data: bytes) -> None:
        """Keep ``data`` unless it is over an eighth of the bound (or it is not the size the
        key records: a truncated read is never kept)."""
        if not self.max_bytes or len(data) != key[2] or len(data) > self.max_bytes // 8:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
