"""What every catalog offers, whatever keeps its tables: the warehouse root, Glue, S3 Tables,
a SQL database or a REST catalog service.

A catalog owns a runtime (clients, caches, workers) unless it was handed one to share, and
closes what it owns with itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.io.locations import Roots
from aioiceberg.io.resolve import resolve_io
from aioiceberg.spec.sorting import UNSORTED, SortOrder

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.commit.protocols.base import CommitProtocol
    from aioiceberg.runtime import Runtime
    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema
    from aioiceberg.table import Table

__all__ = ["Catalog", "identifier_parts", "identifier_text"]


def identifier_parts(name: str | Sequence[str], what: str) -> list[str]:
    """``"db.events"`` or ``("db", "events")`` as parts, each non-empty, without '/' or a leading '.'."""
    parts = name.split(".") if isinstance(name, str) else list(name)
    if any(not p or "/" in p or p.startswith(".") for p in parts):
        raise ValidationError(f"{what} {name!r}: parts must be non-empty, without '/' or a leading '.'")
    return parts


def identifier_text(identifier: str | Sequence[str]) -> str:
    return identifier if isinstance(identifier, str) else ".".join(identifier)


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
            from aioiceberg.runtime import Runtime

            runtime = Runtime()
        self.runtime = runtime
        self.io = resolve_io(root if files is None else files, self.storage_options, self.runtime)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    async def __aenter__(self) -> Catalog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def io_for(self, location: str) -> FileIO:
        """The FileIO for a table's files (a catalog's tables may live in several buckets)."""
        return resolve_io(location, self.storage_options, self.runtime)

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

    def table_location(self, identifier: str | Sequence[str]) -> str:
        """Where a new table of that name goes."""
        raise UnsupportedError(f"{self!r} decides where tables go: create the table and read its location")

    def namespace_location(self, namespace: str | Sequence[str]) -> str:
        raise UnsupportedError(f"{self!r} has no namespace locations")

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
