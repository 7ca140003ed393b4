"""The one seam every commit protocol implements: load the latest state, swap version N for N+1.

Protocols differ only in where the commit point is (a create-only object, a DynamoDB
item); requirement checks, applying updates and the retry loop are shared.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.protocols.commit_point import COMMIT_POINT_PROPERTY, CommitPoint, commit_point_of
from aioiceberg.commit.requirements import TableRequirement, validate_requirements
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import CommitPointMismatchError, LocationNotAllowedError
from aioiceberg.io.base import FileIO
from aioiceberg.io.locations import is_within, normalized_location
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata

__all__ = [
    "CommitProtocol",
    "TableState",
    "metadata_dir",
    "parse_metadata_file",
    "version_hint_path",
    "version_path",
    "version_paths",
]


@dataclass(frozen=True, slots=True)
class TableState:
    """One committed version: its metadata, the file it lives in and the protocol's version number."""

    metadata: TableMetadata
    metadata_location: str
    version: int


def parse_metadata_file(io: FileIO, data: bytes, location: str) -> TableMetadata:
    """The metadata ``data`` read from ``location`` holds: a reload of the same bytes reuses
    the runtime's parse (~1 ms a load of a small table, measured: later steps also reuse what
    they derived from the same object)."""
    return io.runtime.metadata_files.get_or_parse(location, data, parse_table_metadata)


def metadata_dir(table_location: str) -> str:
    return f"{table_location.rstrip('/')}/metadata"


def version_path(table_location: str, version: int, *, gzip: bool = False) -> str:
    """Where we write version ``version``: Java's name for it, ``v{N}.gz.metadata.json`` when gzip."""
    return f"{metadata_dir(table_location)}/v{version}{'.gz' if gzip else ''}.metadata.json"


def version_paths(table_location: str, version: int) -> tuple[str, ...]:
    """Every name version ``version`` may have, ours first: Java's HadoopTableOperations writes
    ``v{N}.gz.metadata.json`` under ``write.metadata.compression-codec=gzip`` (and once wrote
    ``v{N}.metadata.json.gz``), and reads all three."""
    plain = version_path(table_location, version)
    return plain, version_path(table_location, version, gzip=True), plain + ".gz"


def version_hint_path(table_location: str) -> str:
    return f"{metadata_dir(table_location)}/version-hint.text"


#: table properties that put the table's files somewhere (Java's names)
_PLACING_PROPERTIES = ("write.metadata.path", "write.data.path")


def placed_elsewhere(base: TableMetadata, metadata: TableMetadata) -> list[str]:
    """Where ``metadata`` puts files that ``base`` did not: a new location, or a new
    ``write.metadata.path`` / ``write.data.path`` outside the table's location."""
    places = []
    if metadata.location.rstrip("/") != base.location.rstrip("/"):
        places.append(metadata.location)
    for key in _PLACING_PROPERTIES:
        value = metadata.properties.get(key)
        if value and value != base.properties.get(key) and not _below(value, metadata.location):
            places.append(value)
    return places


def _below(location: str, table_location: str) -> bool:
    try:
        return is_within(normalized_location(location), normalized_location(table_location))
    except LocationNotAllowedError:  # no one spelling: the guard judges (and refuses) it
        return False


class CommitProtocol(abc.ABC):
    """Swaps table versions atomically on some store.

    ``commit_table`` raises ``CommitFailedError`` (retryable) when another writer took the
    version, ``CommitConflictError`` when a requirement no longer holds, and
    ``CommitStateUnknownError`` when the outcome could not be settled.
    """

    io: FileIO
    #: awaited with (the table's location, the new place) for each place a commit would put the
    #: table's files that it did not before (:func:`placed_elsewhere`): the catalog that hands
    #: out this protocol refuses places outside its roots (``Catalog.confine``)
    location_guard: Callable[[str, str], Awaitable[None]] | None = None

    @property
    @abc.abstractmethod
    def commit_point(self) -> CommitPoint:
        """What this protocol records in the tables it commits (see ``commit_point``)."""

    def accepts(self, metadata: TableMetadata) -> bool:
        """Whether ``metadata`` names this commit point (or none: another engine's table)."""
        recorded = commit_point_of(metadata)
        return recorded is None or recorded.same_as(self.commit_point)

    def check_commit_point(self, metadata: TableMetadata, table_location: str) -> None:
        recorded = commit_point_of(metadata)
        if recorded is not None and not recorded.same_as(self.commit_point):
            raise CommitPointMismatchError(
                f"{table_location} commits through {recorded}, not {self.commit_point}: "
                f"committing here would fork its history; {recorded.how_to_write()}"
            )

    def stamped(self, metadata: TableMetadata) -> TableMetadata:
        """``metadata`` naming this commit point, so that every later load finds it."""
        value = str(self.commit_point)
        if metadata.properties.get(COMMIT_POINT_PROPERTY) == value:
            return metadata
        return metadata.replace(properties={**metadata.properties, COMMIT_POINT_PROPERTY: value})

    def reader_files(self, state: TableState) -> list[str]:
        """Objects this protocol writes beside the metadata so that other readers find the
        table (besides ``version-hint.text``): never orphans, though no metadata names them."""
        return []

    async def publish_for_readers(self, state: TableState) -> None:
        """Bring what readers without this protocol look at (the version hint, copies) up to
        ``state``: a writer killed between its commit point and those writes leaves them behind,
        and readers by location would see an older version until the next commit."""
        return None

    @abc.abstractmethod
    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        """The latest committed state (``TableNotFoundError`` if none); ``since`` is a known lower bound."""

    @abc.abstractmethod
    async def create(self, table_location: str, metadata: TableMetadata) -> TableState:
        """Commit version 1; ``TableAlreadyExistsError`` when the table exists."""

    @abc.abstractmethod
    async def _swap(self, base: TableState, metadata: TableMetadata) -> TableState:
        """Make ``metadata`` version ``base.version + 1`` or fail as described on the class."""

    async def commit_table(
        self, base: TableState, requirements: list[TableRequirement], updates: list[TableUpdate]
    ) -> TableState:
        self.check_commit_point(base.metadata, base.metadata.location)
        validate_requirements(requirements, base.metadata)
        metadata = apply_updates(base.metadata, updates, base_location=base.metadata_location)
        if self.location_guard is not None:
            for place in placed_elsewhere(base.metadata, metadata):
                await self.location_guard(base.metadata.location, place)
        return await self._swap(base, self.stamped(metadata))

    #: whether a table's files may move to another location (its commit point moves with
    #: them); a commit point kept elsewhere, keyed by the location, cannot follow
    moves_with_files: bool = True

    async def forget_table(self, table_location: str) -> None:
        """Drop what this protocol keeps about a dropped table outside its files (nothing,
        unless the commit point lives elsewhere)."""
        return None

    async def aclose(self) -> None:
        return None
