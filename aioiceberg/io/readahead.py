"""A seekable reader over ranged reads with a bounded read-ahead.

Each fetch reads at least ``block_size`` bytes, so small objects are read once in full
and many small reads (Avro blocks, Parquet pages) do not become many requests. When
reads are sequential, the next block is fetched in the background; at most one block
is held ahead, which bounds memory.
"""

from __future__ import annotations

import asyncio

from aioiceberg.io.base import FileIO, RangeResult

DEFAULT_BLOCK_SIZE = 4 << 20


class InputFile:
    def __init__(
        self, io: FileIO, location: str, *, size: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE
    ) -> None:
        self.io = io
        self.location = location
        self.block_size = block_size
        self._size = size
        self._pos = 0
        self._block: RangeResult | None = None
        self._ahead: asyncio.Task[RangeResult] | None = None
        self.requests = 0  # fetches made, for tests and metrics

    async def size(self) -> int:
        if self._size is None:
            await self._fetch(0)
        assert self._size is not None
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 2:
            if self._size is None:
                raise ValueError("seek from end before the size is known; await size() first")
            offset += self._size
        elif whence == 1:
            offset += self._pos
        self._pos = max(0, offset)
        return self._pos

    async def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = await self.size() - self._pos
        data = await self.read_at(self._pos, n)
        self._pos += len(data)
        return data

    async def read_tail(self, n: int) -> bytes:
        """Last ``n`` bytes; with an unknown size one suffix request learns both."""
        if self._size is None:
            result = await self._request(-max(n, self.block_size), max(n, self.block_size))
            self._block = result
            return result.data[-n:] if n else b""
        return await self.read_at(max(0, self._size - n), n)

    async def read_at(self, offset: int, n: int) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            if self._size is not None and offset >= self._size:
                break
            block = self._cached(offset) or await self._fetch(offset)
            begin = offset - block.start
            piece = block.data[begin : begin + n]
            if not piece:
                break
            parts.append(piece)
            offset += len(piece)
            n -= len(piece)
        return b"".join(parts)

    def _cached(self, offset: int) -> RangeResult | None:
        block = self._block
        if block is not None and block.start <= offset < block.start + len(block.data):
            return block
        return None

    async def _fetch(self, offset: int) -> RangeResult:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            result = await ahead
            if result.start <= offset < result.start + len(result.data):
                self._block = result
                self._schedule_next()
                return result
        sequential = self._block is not None and offset == self._block.start + len(self._block.data)
        self._block = await self._request(offset, self.block_size)
        if sequential:
            self._schedule_next()
        return self._block

    def _schedule_next(self) -> None:
        block = self._block
        if block is None or self._size is None:
            return
        following = block.start + len(block.data)
        if following < self._size:
            self._ahead = asyncio.ensure_future(self._request(following, self.block_size))

    async def _request(self, start: int, length: int) -> RangeResult:
        self.requests += 1
        result = await self.io.read_block(self.location, start, length)
        self._size = result.total_size
        return result

    async def aclose(self) -> None:
        if self._ahead is not None:
            self._ahead.cancel()
            try:
                await self._ahead
            except (asyncio.CancelledError, Exception):
                pass
            self._ahead = None

    async def __aenter__(self) -> InputFile:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
