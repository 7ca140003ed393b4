"""Commits by create-only writes: ``metadata/v{N}.metadata.json`` is created with If-None-Match.

Exactly one writer can create each version file, on S3 (conditional PUT) and on a local
disk (an atomic link), so no catalog service is needed. The latest version is found
from ``version-hint.text`` and then by probing forward until a version is absent, so
nothing is listed. Version numbers are never reused: a lost version is simply skipped.
"""

from __future__ import annotations

import asyncio
import gzip

from aioiceberg.commit.protocols.base import (
    CommitProtocol,
    TableState,
    parse_metadata_file,
    version_hint_path,
    version_path,
    version_paths,
)
from aioiceberg.commit.protocols.commit_point import CONDITIONAL, CommitPoint
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.probe import require_conditional_writes
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import serialize_table_metadata

__all__ = [
    "ConditionalWriteProtocol",
    "find_latest_version",
    "locate_version",
    "read_version_hint",
    "resolve_unknown_create",
    "update_version_hint",
]

_RESOLVE_ATTEMPTS = 3


async def read_version_hint(io: FileIO, table_location: str) -> int | None:
    try:
        text = (await io.read(version_hint_path(table_location))).decode("utf-8", "replace").strip()
    except ObjectNotFoundError:
        return None
    try:
        return int(text.removeprefix("v").split(".")[0])
    except ValueError:
        return None


async def locate_version(io: FileIO, table_location: str, version: int) -> str | None:
    """The file of version ``version`` under any of its names (see ``version_paths``), or None.

    The names are probed at once, so an absent version costs one round trip.
    """
    paths = version_paths(table_location, version)
    found = await asyncio.gather(*(io.exists(p) for p in paths))
    return next((p for p, ok in zip(paths, found, strict=True) if ok), None)


async def _exists(io: FileIO, table_location: str, version: int) -> bool:
    return await locate_version(io, table_location, version) is not None


async def find_latest_version(io: FileIO, table_location: str, start: int | None = None) -> int | None:
    """The highest ``v{N}.metadata.json`` (or gzip name): hint (or ``start``), then probe
    forward until absent.

    Without a hint, gallop (1, 2, 4, ...) and bisect, so an old table costs O(log N) probes.
    """
    hint = await read_version_hint(io, table_location)
    known = max(v for v in (hint, start, 0) if v is not None)
    if known > (start or 0) and not await _exists(io, table_location, known):
        known = start or 0  # a hint ahead of the files (a foreign writer): fall back
    if known == 0:
        if not await _exists(io, table_location, 1):
            return None
        low, step = 1, 1
        while await _exists(io, table_location, low + step):
            low, step = low + step, step * 2
        high = low + step  # absent
        while high - low > 1:
            mid = (low + high) // 2
            if await _exists(io, table_location, mid):
                low = mid
            else:
                high = mid
        known = low
    while await _exists(io, table_location, known + 1):
        known += 1
    return known


async def update_version_hint(io: FileIO, table_location: str, version: int) -> None:
    """Best effort, never backwards: If-Match on the hint we read, give up on a newer one."""
    path = version_hint_path(table_location)
    for _ in range(3):
        try:
            try:
                block = await io.read_block(path, 0, 64)
            except ObjectNotFoundError:
                await io.write_if_absent(path, str(version).encode())
                return
            etag = block.etag if block.etag else (await io.head(path)).etag
            try:
                current = int(block.data.decode("utf-8", "replace").strip().removeprefix("v"))
            except ValueError:
                current = None
            if current is not None and current >= version:
                return
            await io.write_if_match(path, str(version).encode(), etag)
            return
        except (PreconditionFailedError, ObjectNotFoundError):
            continue
        except StoreError:
            return


async def resolve_unknown_create(io: FileIO, location: str, data: bytes) -> bool:
    """After an unacknowledged create-only write: True if our bytes are there, False if another
    writer's are. Re-sending the same create is safe (it can only land once); raises
    CommitStateUnknownError when the store never answers clearly."""
    last: Exception | None = None
    for _ in range(_RESOLVE_ATTEMPTS):
        try:
            return await io.read(location) == data
        except ObjectNotFoundError:
            pass
        except StoreError as exc:
            last = exc
            continue
        try:
            await io.write_if_absent(location, data)
            return True
        except PreconditionFailedError:
            continue
        except StoreError as exc:  # WriteOutcomeUnknownError included: look again
            last = exc
    raise CommitStateUnknownError(f"{location}: could not learn whether the commit landed ({last})")


class ConditionalWriteProtocol(CommitProtocol):
    """S3 conditional writes or local atomic creates; the store must pass the capability probe."""

    def __init__(self, io: FileIO, *, probe_base: str | None = None) -> None:
        self.io = io
        self.probe_base = probe_base

    @property
    def commit_point(self) -> CommitPoint:
        return CommitPoint(CONDITIONAL)

    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        if since is None:
            at_hint = await self._load_at_hint(table_location)
            if at_hint is not None:
                return at_hint
        start = since.version if since is not None else None
        version = await find_latest_version(self.io, table_location, start)
        if version is None:
            raise TableNotFoundError(f"no table at {table_location}")
        location = await locate_version(self.io, table_location, version)
        if location is None:
            raise TableNotFoundError(f"version {version} of {table_location} vanished while loading")
        if since is not None and since.version == version and since.metadata_location == location:
            return since
        try:
            data = await self.io.read(location)
        except ObjectNotFoundError as exc:
            raise TableNotFoundError(f"{location} vanished while loading") from exc
        return TableState(parse_metadata_file(self.io, data, location), location, version)

    async def publish_for_readers(self, state: TableState) -> None:
        await update_version_hint(self.io, state.metadata.location, state.version)

    async def _load_at_hint(self, table_location: str) -> TableState | None:
        """The usual case in two round trips: the hint, then ``v{hint}`` read while
        ``v{hint+1}`` is probed. None when the hint is missing, stale or ahead of the files."""
        hint = await read_version_hint(self.io, table_location)
        if hint is None or hint < 1:
            return None
        plain = version_path(table_location, hint)

        async def read() -> tuple[str, bytes] | None:
            try:
                return plain, await self.io.read(plain)
            except ObjectNotFoundError:
                pass
            location = await locate_version(self.io, table_location, hint)  # a gzip name
            if location is None:
                return None
            try:
                return location, await self.io.read(location)
            except ObjectNotFoundError:
                return None

        found, newer = await asyncio.gather(read(), _exists(self.io, table_location, hint + 1))
        if found is None or newer:
            return None
        location, data = found
        return TableState(parse_metadata_file(self.io, data, location), location, hint)

    async def _require(self, table_location: str) -> None:
        await require_conditional_writes(self.io, self.probe_base or table_location)

    async def create(self, table_location: str, metadata: TableMetadata) -> TableState:
        await self._require(table_location)
        if await find_latest_version(self.io, table_location) is not None:
            raise TableAlreadyExistsError(f"a table exists at {table_location}")
        metadata = self.stamped(metadata)
        location = version_path(table_location, 1)
        data = serialize_table_metadata(metadata)
        try:
            await self.io.write_if_absent(location, data)
        except PreconditionFailedError as exc:
            raise TableAlreadyExistsError(f"a table exists at {table_location}") from exc
        except WriteOutcomeUnknownError:
            if not await resolve_unknown_create(self.io, location, data):
                raise TableAlreadyExistsError(f"a table exists at {table_location}") from None
        await update_version_hint(self.io, table_location, 1)
        return TableState(metadata, location, 1)

    async def swap(self, base: TableState, metadata: TableMetadata) -> TableState:
        table_location = base.metadata.location
        await self._require(table_location)
        version = base.version + 1
        # A table whose versions carry Java's gzip name keeps it, so a Java writer racing
        # for the same version contends for the same object.
        compressed = base.metadata_location.endswith((".gz.metadata.json", ".metadata.json.gz"))
        location = version_path(table_location, version, gzip=compressed)
        data = serialize_table_metadata(metadata)
        if compressed:
            data = gzip.compress(data, mtime=0)
        try:
            await self.io.write_if_absent(location, data)
        except PreconditionFailedError as exc:
            raise CommitFailedError(
                f"version {version} of {table_location} was committed by another writer"
            ) from exc
        except WriteOutcomeUnknownError:
            if not await resolve_unknown_create(self.io, location, data):
                raise CommitFailedError(
                    f"version {version} of {table_location} was committed by another writer"
                ) from None
        await update_version_hint(self.io, table_location, version)
        return TableState(metadata, location, version)
