"""The async FileIO contract every storage backend implements.

Everything above ``io`` talks to storage only through :class:`FileIO`, so the commit
protocol can rely on the same conditional-write semantics on S3, local disks and memory.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

import anyio

from aioiceberg._concurrency import task_group
from aioiceberg.errors import (
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    ValidationError,
    WriteOutcomeUnknownError,
)

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime

DEFAULT_CHUNK_SIZE = 1 << 20


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a HEAD or a listing says about one object.

    ``etag`` is the opaque version token that :meth:`FileIO.write_if_match` compares.
    """

    location: str
    size: int
    etag: str
    last_modified: float | None = None  # POSIX seconds


@dataclass(frozen=True, slots=True)
class RangeResult:
    """Bytes of one ranged read plus the object's total size, learnt from the same response."""

    data: bytes
    start: int
    total_size: int
    etag: str | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which conditional operations a backend implements (the probe checks servers honour them)."""

    conditional_create: bool
    conditional_replace: bool
    conditional_delete: bool


class Outcome(enum.Enum):
    """The three distinct results of a conditional write."""

    WRITTEN = "written"
    PRECONDITION_FAILED = "precondition-failed"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, error: BaseException | None) -> Outcome:
        """Classify the error a conditional write raised (``None`` means it returned)."""
        if error is None:
            return cls.WRITTEN
        if isinstance(error, PreconditionFailedError | ObjectNotFoundError):
            return cls.PRECONDITION_FAILED
        if isinstance(error, WriteOutcomeUnknownError):
            return cls.UNKNOWN
        raise error


class FileIO(abc.ABC):
    """Async object storage addressed by URI.

    Conditional writes raise :class:`PreconditionFailedError` when they lose (or
    :class:`ObjectNotFoundError` when a write-if-match target is gone), and
    :class:`WriteOutcomeUnknownError` when the request may have landed unseen.
    """

    capabilities: Capabilities = Capabilities(True, True, True)
    # Reads cross a network: readers keep small data files they fetched for the next read
    # (aioiceberg/io/data_cache.py); local and in-memory stores gain nothing from a copy.
    remote: bool = False
    _runtime: Runtime | None = None

    @property
    def runtime(self) -> Runtime:
        """The runtime whose clients, caches and pools this FileIO and its users share: the
        one its maker gave it (a catalog its own; a face the default runtime)."""
        if self._runtime is None:
            raise ValidationError(
                f"{type(self).__name__} has no runtime: make it with runtime=... or bind_runtime(...)"
            )
        return self._runtime

    def bind_runtime(self, runtime: Runtime) -> Self:
        """Use ``runtime``; before first use only."""
        self._runtime = runtime
        return self

    # -- reads -------------------------------------------------------------
    @abc.abstractmethod
    async def read(self, location: str) -> bytes:
        """Read a whole object in one request."""

    @abc.abstractmethod
    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        """Read ``length`` bytes at ``start`` (a negative ``start`` reads the last ``-start`` bytes).

        Ranges past the end are clamped; the result carries the object's size so callers
        need no extra HEAD.
        """

    async def read_range(self, location: str, start: int, length: int) -> bytes:
        """Read ``length`` bytes from offset ``start`` (clamped at the end of the object)."""
        if start < 0 or length < 0:
            raise ValueError("start and length must be >= 0")
        if length == 0:
            return b""
        return (await self.read_block(location, start, length)).data

    async def read_expecting(self, location: str, size: int) -> bytes:
        """The whole object, whose size a manifest recorded: one ranged read a byte past
        ``size`` (clamped at the end; on S3 one hand-over to the loop where ``read`` takes
        two), and a second, whole read only when the object is longer than recorded."""
        data = await self.read_range(location, 0, max(size, 0) + 1)
        return data if len(data) <= size else await self.read(location)

    async def read_tail(self, location: str, length: int) -> bytes:
        """Read the last ``length`` bytes (a Parquet footer, say) without knowing the size."""
        if length <= 0:
            return b""
        return (await self.read_block(location, -length, length)).data

    async def stream(
        self, location: str, *, chunk_size: int = DEFAULT_CHUNK_SIZE, start: int = 0
    ) -> AsyncIterator[bytes]:
        """Yield an object's bytes in chunks, one ranged request per chunk."""
        offset = start
        while True:
            block = await self.read_block(location, offset, chunk_size)
            if block.data:
                yield block.data
            offset += len(block.data)
            if offset >= block.total_size or not block.data:
                return

    # -- metadata ----------------------------------------------------------
    @abc.abstractmethod
    async def head(self, location: str) -> ObjectInfo:
        """Size, version token and mtime; :class:`ObjectNotFoundError` if absent."""

    async def exists(self, location: str) -> bool:
        try:
            await self.head(location)
        except ObjectNotFoundError:
            return False
        return True

    @abc.abstractmethod
    def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        """Every object whose location starts with ``prefix``, in key order, fetched page by page."""

    async def list_incomplete(self, prefix: str) -> AsyncIterator[ObjectInfo]:
        """What writers that died mid-write left under ``prefix`` and ``list`` does not show
        (a local store's temp files); cleanup removes the old ones with ``delete``."""
        nothing: tuple[ObjectInfo, ...] = ()
        for info in nothing:
            yield info

    async def list_with_incomplete(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        """What ``list`` and ``list_incomplete`` yield for ``prefix``, each once, in no promised
        order: for callers that want both (cleanup), from one listing where a store can (a
        local disk walks its tree once)."""
        async for info in self.list(prefix, page_size=page_size):
            yield info
        async for info in self.list_incomplete(prefix):
            yield info

    # -- writes ------------------------------------------------------------
    @abc.abstractmethod
    async def write(self, location: str, data: bytes) -> ObjectInfo:
        """Create or replace an object atomically (readers see old or new bytes, never a mix)."""

    @abc.abstractmethod
    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        """Create an object only if no object exists at ``location``."""

    @abc.abstractmethod
    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        """Replace an object only if its current version token is ``etag``."""

    @abc.abstractmethod
    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        """Delete an object; a missing object is not an error unless ``if_match`` is given."""

    async def delete_many(self, locations: Iterable[str], *, concurrency: int = 16) -> None:
        """Delete many objects; raises one :class:`StoreError` naming the failures."""
        failures: list[str] = []
        limiter = anyio.Semaphore(concurrency)

        async def one(location: str) -> None:
            async with limiter:
                try:
                    await self.delete(location)
                except StoreError as exc:
                    failures.append(f"{location}: {exc}")

        async with task_group() as tg:
            for location in locations:
                tg.start_soon(one, location)
        if failures:
            raise StoreError(f"{len(failures)} deletes failed: " + "; ".join(failures[:5]))

    async def remove_empty_folders(self, prefix: str) -> None:
        """Remove folders under ``prefix`` that hold no objects any more, where a store has
        folders of its own (a local disk); object stores have none: nothing to do."""
        return None

    # -- lifecycle ---------------------------------------------------------
    def store_key(self, location: str) -> str:
        """Identity of the store holding ``location``, for caching per-store facts (the probe)."""
        return f"{type(self).__name__}:{id(self)}"

    async def aclose(self) -> None:
        """Release connections held for the running event loop (the object stays usable)."""
        return None

    async def __aenter__(self) -> FileIO:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def unsupported(location: str, what: str, backend: str) -> ConditionalWritesUnsupportedError:
    return ConditionalWritesUnsupportedError(
        f"{backend} cannot do {what} atomically; use a store with conditional writes for commits",
        location=location,
    )
