"""What every catalog offers, whatever keeps its tables: the warehouse root, Glue, S3 Tables,
a SQL database or a REST catalog service.

A catalog owns a runtime (clients, caches, workers) unless it was handed one to share, and
closes what it owns with itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from aioiceberg.errors import (
    LocationNotAllowedError,
    StoreError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.locations import Roots, normalized_location
from aioiceberg.io.resolve import resolve_io
from aioiceberg.runtime import Runtime
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.spec.sorting import UNSORTED, SortOrder

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.commit.protocols.base import CommitProtocol
    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema
    from aioiceberg.table import Table

__all__ = [
    "METADATA_SUFFIXES",
    "Catalog",
    "dotted_namespace",
    "identifier_parts",
    "identifier_text",
    "register_not_found",
]

R = TypeVar("R", bound="CommitProtocol")

#: how metadata files end (plain or gzip, Java's two spellings)
METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")
#: the longest name part, in UTF-8 bytes: a path segment on most file systems and object stores
MAX_PART_BYTES = 255
_CONTROL = frozenset(chr(c) for c in range(32)) | {"\x7f"}


def identifier_parts(name: str | Sequence[str], what: str) -> list[str]:
    """``"db.events"`` or ``("db", "events")`` as parts.

    Parts become path segments under a catalog's roots, so each must stay one segment: non-empty,
    without '/', a leading '.' (so no '..'), control characters, or more than 255 UTF-8 bytes.
    """
    parts = name.split(".") if isinstance(name, str) else list(name)
    if any(not isinstance(p, str) for p in parts):
        raise ValidationError(f"{what}: parts must be strings")
    shown = _shown(name)
    if any(not p or "/" in p or p.startswith(".") for p in parts):
        raise ValidationError(f"{what} {shown}: parts must be non-empty, without '/' or a leading '.'")
    if any(not _CONTROL.isdisjoint(p) for p in parts):
        raise ValidationError(f"{what} {shown}: parts must not hold control characters")
    for p in parts:
        try:
            size = len(p.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: no file name can hold it
            raise ValidationError(f"{what} {shown}: parts must be valid Unicode text") from None
        if size > MAX_PART_BYTES:
            raise ValidationError(
                f"{what} {shown}: parts must be at most {MAX_PART_BYTES} bytes (UTF-8) long"
            )
    return parts


def _shown(name: str | Sequence[str]) -> str:
    """A name as an error shows it: bounded, whatever a client sent."""
    text = repr(name if isinstance(name, str) else ".".join(str(p) for p in name))
    return text if len(text) <= 200 else text[:197] + "..."


def identifier_text(identifier: str | Sequence[str]) -> str:
    return identifier if isinstance(identifier, str) else ".".join(identifier)


def dotted_namespace(namespace: str | Sequence[str]) -> str:
    """The namespace as one dotted name, for catalogs that store it so (SQL, Glue): a level
    holding '.' is refused, as it would be listed back as several levels."""
    parts = identifier_parts(namespace, "namespace")
    dotted = [p for p in parts if "." in p]
    if dotted and not isinstance(namespace, str):
        raise ValidationError(
            f"namespace level {_shown(dotted[0])} holds '.', which this catalog stores between "
            f"levels: it would come back as {len(dotted[0].split('.'))} levels"
        )
    return ".".join(parts)


def register_not_found(metadata_location: str) -> str:
    """One answer for a metadata file ``register`` cannot read: missing, unreadable or not allowed."""
    return f"no readable metadata file at {_shown(metadata_location)} in this catalog"


class Catalog(abc.ABC):
    """Namespaces and tables; each table commits through the one commit point it records.

    ``root`` is where the catalog puts new tables (its warehouse), or the catalog's own URI
    when the service decides; ``io`` reaches the files under it.
    """

    root: str
    storage_options: dict[str, Any]
    runtime: Runtime
    io: FileIO
    #: the protocol every table of this catalog commits through, when there is one for all
    #: (a warehouse's); None where each table has its own pointer in the service
    protocol: CommitProtocol | None = None

    def __init__(
        self,
        root: str,
        *,
        files: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        """``files``: where the catalog's own FileIO points when ``root`` is not a store (a
        service's URI names the catalog, and its tables' files live elsewhere)."""
        self.root = root
        self.storage_options = dict(storage_options or {})
        self._own_runtime = runtime is None
        if runtime is None:
            runtime = Runtime()
        self.runtime = runtime
        self.io = resolve_io(root if files is None else files, self.storage_options, runtime=self.runtime)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    async def __aenter__(self) -> Catalog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def io_for(self, location: str) -> FileIO:
        """The FileIO for a table's files (a catalog's tables may live in several buckets)."""
        return resolve_io(location, self.storage_options, runtime=self.runtime)

    async def _close_clients(self) -> None:
        """Release what the catalog itself holds beside its runtime (service clients)."""
        return None

    async def aclose(self) -> None:
        await self._close_clients()
        await self.io.aclose()
        if self._own_runtime:
            await self.runtime.aclose()

    # -- locations ---------------------------------------------------------------------------
    def root_locations(self) -> tuple[str, ...]:
        """Where this catalog may create, write and delete files: its warehouse, and what its
        service assigns. A subclass names them; none means nothing may be created or purged."""
        return ()

    @property
    def roots(self) -> Roots:
        """:meth:`root_locations`, normalized: every location a client names is checked against them."""
        return Roots(self.root_locations())

    async def check_new_table(self, identifier: str | Sequence[str], location: str) -> str:
        """``location`` normalized, when a new table ``identifier`` may live there; checked
        before anything of the table is written. Here: inside the roots; a catalog that can
        see its other tables' locations also refuses nesting (``LocationNotAllowedError``)."""
        return self.roots.require(location, f"the location of table {identifier_text(identifier)}")

    async def check_location_change(self, table_location: str, new_location: str) -> None:
        """Refuse a commit that moves the table at ``table_location`` to ``new_location``
        (``LocationNotAllowedError``): here, anywhere outside the roots."""
        self.roots.require(new_location, f"the new location of the table at {table_location}")

    def confine(self, protocol: R) -> R:
        """``protocol``, checking every location change it commits with this catalog's rules:
        every protocol a catalog hands to a table passes through here, so the Python API and
        the server refuse the same moves."""
        protocol.location_guard = self.check_location_change
        return protocol

    async def purge_location(self, io: FileIO, location: str) -> bool:
        """Delete what lies under a table's ``location`` and belongs to no other table.

        Subdirectories holding another table's ``metadata/*.metadata.json`` (tables nested
        before nesting was refused) are kept whole. Nothing is deleted, and False returned,
        when ``location`` is not strictly inside the roots: a table living elsewhere is only
        unregistered.
        """
        if not self.roots.contains(location):
            return False
        prefix = location.rstrip("/") + "/"
        keys = [info.location async for info in io.list(prefix) if info.location.startswith(prefix)]
        others = {
            "/".join(pieces[:-2]) + "/"
            for pieces in (key[len(prefix) :].split("/") for key in keys)
            if len(pieces) >= 3 and pieces[-2] == "metadata" and pieces[-1].endswith(METADATA_SUFFIXES)
        }
        await io.delete_many(
            [key for key in keys if not any(key[len(prefix) :].startswith(d) for d in others)]
        )
        await io.remove_empty_folders(prefix)  # a local disk: no folder (or lock file) left
        return True

    def register_source(self, metadata_location: str) -> str:
        """``metadata_location`` normalized, when ``register`` may read it: under the roots,
        so through this catalog's own stores and scheme. Otherwise the answer a missing file
        gets, before anything is read: a client cannot probe what lies elsewhere."""
        if not self.roots.contains(metadata_location):
            raise TableNotFoundError(register_not_found(metadata_location))
        return normalized_location(metadata_location)

    async def read_for_register(self, metadata_location: str) -> tuple[str, TableMetadata]:
        """The metadata file ``register`` adopts, read only when :meth:`register_source` allows,
        whose own ``location`` lies under the roots.

        Missing and unreadable files get one answer, and a file that is not table metadata
        is refused without showing its content.
        """
        source = self.register_source(metadata_location)
        io = self.io_for(source)
        data: bytes | None = None
        try:
            data = await io.read(source)
        except StoreError as exc:
            if exc.retryable or exc.throttled:
                raise
        if data is None:  # raised outside the handler: the store's words would tell missing from unreadable
            raise TableNotFoundError(register_not_found(metadata_location))
        try:
            metadata = parse_table_metadata(data, source)
        except Exception as exc:  # any failure on foreign bytes means the same
            raise ValidationError(
                f"{_shown(metadata_location)} is not an Iceberg table metadata file"
            ) from exc
        if not self.roots.contains(metadata.location):
            raise LocationNotAllowedError(
                f"{_shown(metadata_location)} describes a table outside this catalog's roots",
                location=metadata.location,
            )
        return source, metadata

    def table_location(self, identifier: str | Sequence[str]) -> str:
        """Where a new table of that name goes."""
        # the class, not the repr: a served catalog's repr names its database file
        raise UnsupportedError(
            f"a {type(self).__name__} decides where tables go: create the table and read its location"
        )

    def namespace_location(self, namespace: str | Sequence[str]) -> str:
        raise UnsupportedError(f"a {type(self).__name__} has no namespace locations")

    # -- tables --------------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        """A new table (its first version); ``TableAlreadyExistsError`` if the name is taken."""

    @abc.abstractmethod
    async def load_table(self, identifier: str | Sequence[str]) -> Table:
        """The table's latest version (``TableNotFoundError`` if none)."""

    @abc.abstractmethod
    async def table_exists(self, identifier: str | Sequence[str]) -> bool: ...

    @abc.abstractmethod
    async def register_table(self, identifier: str | Sequence[str], metadata_location: str) -> Table:
        """Adopt an existing metadata file as a table of this catalog."""

    @abc.abstractmethod
    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        """Tables directly in ``namespace`` (dotted identifiers, sorted)."""

    @abc.abstractmethod
    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """Remove a table from the catalog, and with ``purge`` delete its files; returns the
        metadata file that still describes it (None when purged or not kept)."""

    async def purge_table(self, identifier: str | Sequence[str]) -> None:
        """``drop_table(identifier, purge=True)``, by its PyIceberg name."""
        await self.drop_table(identifier, purge=True)

    @abc.abstractmethod
    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table: ...

    # -- namespaces ----------------------------------------------------------------------------
    @abc.abstractmethod
    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None: ...

    @abc.abstractmethod
    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool: ...

    @abc.abstractmethod
    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        """Namespaces directly below ``parent`` (the top level by default), dotted, sorted."""

    async def list_namespace_levels(self, parent: str | Sequence[str] = ()) -> list[tuple[str, ...]]:
        """:meth:`list_namespaces`, each namespace as its levels: a level holding '.' comes back
        whole where the catalog keeps levels apart. Here the dotted names are split, which is
        exact for catalogs that refuse such levels (:func:`dotted_namespace`)."""
        return [tuple(name.split(".")) for name in await self.list_namespaces(parent)]

    @abc.abstractmethod
    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]: ...

    @abc.abstractmethod
    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Remove then set properties; returns the namespace's properties after the change."""

    @abc.abstractmethod
    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Drop an empty namespace (``NamespaceNotEmptyError`` while it holds tables)."""
