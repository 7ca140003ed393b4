"""The one seam every commit protocol implements: load the latest state, swap version N for N+1.

Protocols differ only in where the commit point is (a create-only object, a DynamoDB
item, a catalog's pointer, a REST server); the template ``CommitProtocol.commit_table``
(the commit point check, requirement checks, applying updates, the location guard) and the
retry loop are shared, and no protocol overrides them. A protocol implements a small
interface: ``commit_point``, ``load``, and either ``swap`` (the change is checked and applied
here, then one version is swapped in) or, when ``server_applies``, ``apply_remotely`` (a
server holding the commit point checks and applies the change itself).
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, final

from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.protocols.commit_point import COMMIT_POINT_PROPERTY, CommitPoint, commit_point_of
from aioiceberg.commit.requirements import TableRequirement, validate_requirements
from aioiceberg.commit.updates import AddSnapshot, TableUpdate
from aioiceberg.errors import (
    CommitPointMismatchError,
    CommitStateUnknownError,
    IcebergError,
    LocationNotAllowedError,
    UnsupportedError,
    WriteOutcomeUnknownError,
)
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

    The template (``commit_table``, ``accepts``, ``check_commit_point``, ``stamped``) is the
    same for every protocol and final; a protocol fills in the interface below it.
    """

    io: FileIO
    #: awaited with (the table's location, the new place) for each place a commit would put the
    #: table's files that it did not before (:func:`placed_elsewhere`): the catalog that hands
    #: out this protocol refuses places outside its roots (``Catalog.confine``)
    location_guard: Callable[[str, str], Awaitable[None]] | None = None

    #: whether the commit point is a server that validates the requirements and applies the
    #: updates itself (a REST catalog): the change is then sent as it is (``apply_remotely``),
    #: and the server, not the table's metadata, says which commit point the table has
    server_applies: ClassVar[bool] = False

    #: whether a table's files may move to another location (its commit point moves with
    #: them); a commit point kept elsewhere, keyed by the location, cannot follow
    moves_with_files: bool = True

    # -- the template ------------------------------------------------------------------------
    @final
    async def commit_table(
        self, base: TableState, requirements: list[TableRequirement], updates: list[TableUpdate]
    ) -> TableState:
        """Version ``base.version + 1`` with ``updates`` applied, provided ``requirements`` hold."""
        if self.server_applies:  # the server checks (confinement included) and applies it
            return await self._commit_remotely(base, requirements, updates)
        self.check_commit_point(base.metadata, base.metadata.location)
        validate_requirements(requirements, base.metadata)
        metadata = apply_updates(base.metadata, updates, base_location=base.metadata_location)
        if self.location_guard is not None:
            for place in placed_elsewhere(base.metadata, metadata):
                await self.location_guard(base.metadata.location, place)
        return await self.swap(base, self.stamped(metadata))

    @final
    async def _commit_remotely(
        self, base: TableState, requirements: list[TableRequirement], updates: list[TableUpdate]
    ) -> TableState:
        """Send the change; a request that went without an answer counts as landed only when
        reading the table back shows every snapshot it added."""
        try:
            return await self.apply_remotely(base, requirements, updates)
        except WriteOutcomeUnknownError as exc:
            landed = await self._landed_remotely(base, updates)
            if landed is None:
                raise CommitStateUnknownError(f"{exc}; it may have landed: nothing was deleted") from exc
            return landed

    @final
    async def _landed_remotely(self, base: TableState, updates: list[TableUpdate]) -> TableState | None:
        """The table, when reading it back shows every snapshot the commit added; None when
        that cannot be told (no snapshot to look for, or the read fails)."""
        ids = [u.snapshot.snapshot_id for u in updates if isinstance(u, AddSnapshot)]
        if not ids:
            return None
        try:
            state = await self.load(base.metadata.location)
        except IcebergError:
            return None
        if all(state.metadata.snapshot_by_id(i) is not None for i in ids):
            return state
        return None

    @final
    def accepts(self, metadata: TableMetadata) -> bool:
        """Whether ``metadata`` names this commit point (or none: another engine's table); a
        server that applies commits holds the commit point, whatever the metadata records."""
        if self.server_applies:
            return True
        recorded = commit_point_of(metadata)
        return recorded is None or recorded.same_as(self.commit_point)

    @final
    def check_commit_point(self, metadata: TableMetadata, table_location: str) -> None:
        if self.server_applies:
            return
        recorded = commit_point_of(metadata)
        if recorded is not None and not recorded.same_as(self.commit_point):
            raise CommitPointMismatchError(
                f"{table_location} commits through {recorded}, not {self.commit_point}: "
                f"committing here would fork its history; {recorded.how_to_write()}"
            )

    @final
    def stamped(self, metadata: TableMetadata) -> TableMetadata:
        """``metadata`` naming this commit point, so that every later load finds it."""
        value = str(self.commit_point)
        if metadata.properties.get(COMMIT_POINT_PROPERTY) == value:
            return metadata
        return metadata.replace(properties={**metadata.properties, COMMIT_POINT_PROPERTY: value})

    # -- the interface a protocol implements ---------------------------------------------------
    @property
    @abc.abstractmethod
    def commit_point(self) -> CommitPoint:
        """What this protocol records in the tables it commits (see ``commit_point``)."""

    @abc.abstractmethod
    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        """The latest committed state (``TableNotFoundError`` if none); ``since`` is a known lower bound."""

    async def swap(self, base: TableState, metadata: TableMetadata) -> TableState:
        """Make ``metadata`` (checked, applied and stamped by the template) version
        ``base.version + 1`` or fail as described on the class; every protocol that does not
        set ``server_applies`` implements it."""
        raise UnsupportedError(
            f"{self.commit_point}: the server applies commits; there is no version swap here"
        )

    async def apply_remotely(
        self, base: TableState, requirements: list[TableRequirement], updates: list[TableUpdate]
    ) -> TableState:
        """Send the change to the server holding the commit point, which checks the
        requirements and applies the updates; the state it answers with. Raises
        ``WriteOutcomeUnknownError`` when the request went without an answer (the template
        settles it by reading the table back), else fails as described on the class. Every
        protocol that sets ``server_applies`` implements it."""
        raise UnsupportedError(f"{self.commit_point}: commits are checked and applied here, not sent")

    async def create(self, table_location: str, metadata: TableMetadata) -> TableState:
        """Commit version 1; ``TableAlreadyExistsError`` when the table exists. A server that
        applies commits creates tables through its catalog (``create_table``), not here."""
        raise UnsupportedError(f"{self.commit_point}: tables are created through the catalog (create_table)")

    def reader_files(self, state: TableState) -> list[str]:
        """Objects this protocol writes beside the metadata so that other readers find the
        table (besides ``version-hint.text``): never orphans, though no metadata names them."""
        return []

    async def publish_for_readers(self, state: TableState) -> None:
        """Bring what readers without this protocol look at (the version hint, copies) up to
        ``state``: a writer killed between its commit point and those writes leaves them behind,
        and readers by location would see an older version until the next commit."""
        return None

    async def forget_table(self, table_location: str) -> None:
        """Drop what this protocol keeps about a dropped table outside its files (nothing,
        unless the commit point lives elsewhere)."""
        return None

    async def aclose(self) -> None:
        return None
