"""In-memory backend for unit tests of pure logic: same semantics, no I/O.

Each operation completes without awaiting in between its check and its change, so
conditional writes are atomic with respect to other tasks on the loop.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator

import anyio

from aioiceberg.errors import ObjectNotFoundError, PreconditionFailedError
from aioiceberg.io.base import FileIO, ObjectInfo, RangeResult
from aioiceberg.io.memory_objects import MemoryObjects, _Entry


class MemoryFileIO(FileIO):
    """Objects in a dict keyed by location (``store``: shared with other instances)."""

    def __init__(self, store: MemoryObjects | None = None) -> None:
        self._store = store if store is not None else MemoryObjects()
        self._objects = self._store.objects
        self._generation = self._store.generation

    def _get(self, location: str) -> _Entry:
        entry = self._objects.get(location)
        if entry is None:
            raise ObjectNotFoundError(location=location)
        return entry

    def _put(self, location: str, data: bytes) -> ObjectInfo:
        # md5 like S3, plus a generation so replacing with identical bytes is still a new version
        etag = f"{hashlib.md5(data).hexdigest()}-{next(self._generation)}"
        entry = self._objects[location] = _Entry(bytes(data), etag, time.time())
        return ObjectInfo(location, len(data), entry.etag, entry.modified)

    async def read(self, location: str) -> bytes:
        await anyio.lowlevel.checkpoint()
        return self._get(location).data

    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        await anyio.lowlevel.checkpoint()
        entry = self._get(location)
        size = len(entry.data)
        first = max(0, size + start) if start < 0 else min(start, size)
        return RangeResult(entry.data[first : first + max(0, length)], first, size, entry.etag)

    async def head(self, location: str) -> ObjectInfo:
        await anyio.lowlevel.checkpoint()
        entry = self._get(location)
        return ObjectInfo(location, len(entry.data), entry.etag, entry.modified)

    async def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        keys = sorted(k for k in self._objects if k.startswith(prefix))
        for i in range(0, len(keys), page_size):
            await anyio.lowlevel.checkpoint()
            for key in keys[i : i + page_size]:
                entry = self._objects.get(key)
                if entry is not None:
                    yield ObjectInfo(key, len(entry.data), entry.etag, entry.modified)

    async def write(self, location: str, data: bytes) -> ObjectInfo:
        await anyio.lowlevel.checkpoint()
        return self._put(location, data)

    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        await anyio.lowlevel.checkpoint()
        if location in self._objects:
            raise PreconditionFailedError(location=location)
        return self._put(location, data)

    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        await anyio.lowlevel.checkpoint()
        if self._get(location).etag != etag:
            raise PreconditionFailedError(location=location)
        return self._put(location, data)

    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        await anyio.lowlevel.checkpoint()
        if if_match is not None and self._get(location).etag != if_match:
            raise PreconditionFailedError(location=location)
        self._objects.pop(location, None)

    def store_key(self, location: str) -> str:
        return f"memory:{id(self._store)}"
