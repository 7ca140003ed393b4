"""Commits through a catalog that keeps one pointer per table: its current metadata file.

Glue, S3 Tables and the SQL catalog all work this way: a writer writes a new metadata
file under a fresh name, then asks the catalog to move the pointer from the file it read
to the new one, guarded by what the catalog offers (a version id, a version token, the
previous location in a ``WHERE`` clause). The file names are PyIceberg's and Java's
(``{N:05d}-{uuid}.metadata.json``), so those engines and we read each other's tables.

Each catalog supplies a :class:`MetadataPointer` for one table; the file writing, the
clean-up of a refused commit and the resolution of an unanswered swap are shared here.
"""

from __future__ import annotations

import abc
import contextlib
import re
import uuid
from dataclasses import dataclass
from typing import Any

from aioiceberg.commit.protocols.base import CommitProtocol, TableState, parse_metadata_file
from aioiceberg.commit.protocols.commit_point import CommitPoint
from aioiceberg.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    ObjectNotFoundError,
    StoreError,
    TableNotFoundError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import serialize_table_metadata
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "MetadataPointer",
    "Pointer",
    "PointerProtocol",
    "new_metadata_location",
    "version_of",
]

_NUMBERED = re.compile(r"/(\d+)-[^/]*\.metadata\.json(?:\.gz)?$")


@dataclass(frozen=True, slots=True)
class Pointer:
    """What a catalog holds for a table: its metadata file, and the token a swap must present
    (Glue's VersionId, S3 Tables' version token; None where the location itself is the guard)."""

    metadata_location: str
    token: Any = None


class MetadataPointer(abc.ABC):
    """One table's pointer in one catalog.

    ``swap`` raises ``CommitFailedError`` when the catalog definitely refused (another writer
    moved the pointer) and ``CommitStateUnknownError`` or ``WriteOutcomeUnknownError`` when
    it may have applied the swap. Any other error from ``create`` or ``swap`` (a refusal such
    as AccessDenied, a locked database) means nothing was applied.
    """

    #: the table, as messages name it ("glue table db.events")
    name: str

    @abc.abstractmethod
    async def read(self) -> Pointer | None:
        """The current pointer; None when the catalog has no such table."""

    @abc.abstractmethod
    async def create(self, metadata_location: str, metadata: TableMetadata) -> Pointer:
        """Register the table pointing at ``metadata_location``; ``TableAlreadyExistsError``
        when it exists."""

    @abc.abstractmethod
    async def swap(self, expected: Pointer, metadata_location: str, metadata: TableMetadata) -> Pointer:
        """Move the pointer from ``expected`` to ``metadata_location``."""

    @abc.abstractmethod
    async def delete(self) -> None:
        """Remove the table from the catalog (its files stay); ``TableNotFoundError`` if absent."""


def version_of(metadata_location: str, metadata: TableMetadata) -> int:
    """The version number in a ``{N:05d}-...`` file name, else the metadata log's length."""
    m = _NUMBERED.search(metadata_location)
    return int(m.group(1)) if m is not None else len(metadata.metadata_log)


def new_metadata_location(metadata: TableMetadata, version: int) -> str:
    """Where version ``version`` goes: ``write.metadata.path`` when the table sets it."""
    name = f"{version:05d}-{uuid.uuid4()}.metadata.json"
    return TableProperties.of(metadata.properties).metadata_file(metadata.location, name)


class PointerProtocol(CommitProtocol):
    """The commit protocol of one catalog table: write a file, then swap the pointer."""

    moves_with_files = False

    def __init__(self, io: FileIO, pointer: MetadataPointer, point: CommitPoint) -> None:
        self.io = io
        self.pointer = pointer
        self._point = point
        self._tokens: dict[str, Pointer] = {}

    @property
    def commit_point(self) -> CommitPoint:
        return self._point

    async def read_metadata(self, metadata_location: str) -> TableMetadata:
        try:
            data = await self.io.read(metadata_location)
        except ObjectNotFoundError as exc:
            raise TableNotFoundError(
                f"{self.pointer.name} points at {metadata_location}, which does not exist"
            ) from exc
        return parse_metadata_file(self.io, data, metadata_location)

    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        pointer = await self.pointer.read()
        if pointer is None:
            raise TableNotFoundError(f"{self.pointer.name} does not exist")
        return await self.state_at(pointer, since)

    async def state_at(self, pointer: Pointer, since: TableState | None = None) -> TableState:
        """The state ``pointer`` (just read from the catalog) names, without reading it again."""
        self._tokens[pointer.metadata_location] = pointer
        if since is not None and since.metadata_location == pointer.metadata_location:
            return since
        where = pointer.metadata_location
        metadata = await self.read_metadata(where)
        return TableState(metadata, where, version_of(where, metadata))

    async def create(self, table_location: str, metadata: TableMetadata) -> TableState:
        metadata = self.stamped(metadata)
        location = new_metadata_location(metadata, 0)
        await self.io.write(location, serialize_table_metadata(metadata))
        try:
            pointer = await self.pointer.create(location, metadata)
        except (CommitStateUnknownError, WriteOutcomeUnknownError):
            raise  # the catalog may point at the file
        except BaseException:
            with contextlib.suppress(StoreError):
                await self.io.delete(location)
            raise
        self._tokens[location] = pointer
        return TableState(metadata, location, 0)

    async def register(self, metadata_location: str, metadata: TableMetadata | None = None) -> TableState:
        """Adopt an existing metadata file as the table's current version; ``metadata`` is the
        file as already read and checked (registered as checked, not read a second time)."""
        if metadata is None:
            metadata = await self.read_metadata(metadata_location)
        pointer = await self.pointer.create(metadata_location, metadata)
        self._tokens[metadata_location] = pointer
        return TableState(metadata, metadata_location, version_of(metadata_location, metadata))

    async def _expected(self, base: TableState) -> Pointer:
        known = self._tokens.get(base.metadata_location)
        if known is not None:
            return known
        current = await self.pointer.read()
        if current is None:
            raise TableNotFoundError(f"{self.pointer.name} no longer exists")
        self._tokens[current.metadata_location] = current
        if current.metadata_location != base.metadata_location:
            raise CommitFailedError(f"{self.pointer.name} moved on to {current.metadata_location}")
        return current

    async def swap(self, base: TableState, metadata: TableMetadata) -> TableState:
        expected = await self._expected(base)
        version = base.version + 1
        location = new_metadata_location(metadata, version)
        await self.io.write(location, serialize_table_metadata(metadata))
        try:
            pointer = await self.pointer.swap(expected, location, metadata)
        except CommitFailedError:
            await self._discard(base, location)
            raise
        except (CommitStateUnknownError, WriteOutcomeUnknownError) as exc:
            if not await self._landed(location):
                raise CommitStateUnknownError(
                    f"{self.pointer.name}: no answer to the swap to {location}, and it cannot be "
                    f"told whether it landed ({exc}); the file was kept"
                ) from exc
            pointer = Pointer(location)
        except StoreError as exc:  # a refusal (AccessDenied, throttled, never sent): not applied
            await self._discard(base, location)
            if exc.retryable:
                raise CommitFailedError(f"{self.pointer.name}: {exc}") from exc
            raise CommitConflictError(
                f"{self.pointer.name}: the catalog refused the commit, and the table is unchanged: {exc}"
            ) from exc
        self._tokens.pop(base.metadata_location, None)
        if pointer.token is not None:
            self._tokens[location] = pointer
        return TableState(metadata, location, version)

    async def _discard(self, base: TableState, location: str) -> None:
        """A swap to ``location`` definitely did not land: its file goes, and the base's token
        with it (the next attempt reads the pointer again)."""
        self._tokens.pop(base.metadata_location, None)
        with contextlib.suppress(StoreError):
            await self.io.delete(location)

    async def _landed(self, location: str) -> bool:
        """Whether an unanswered swap to ``location`` took: the pointer names it, or a later
        version's log does. Anything else stays unknown (the request may still be applied)."""
        try:
            current = await self.pointer.read()
            if current is None:
                return False
            if current.metadata_location == location:
                return True
            metadata = await self.read_metadata(current.metadata_location)
        except (StoreError, TableNotFoundError):
            return False
        return any(entry.metadata_file == location for entry in metadata.metadata_log)

    async def forget_table(self, table_location: str) -> None:
        await self.pointer.delete()
