"""Catalogs that keep a pointer per table (Glue, S3 Tables, SQL): the table operations they share.

Each such catalog says how to reach one table's pointer (:meth:`PointerCatalog.pointer`),
where a new table goes, and how its namespaces are kept; creating, loading, registering and
dropping tables are the same for all of them.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from aioiceberg.catalogs.base import Catalog, identifier_parts, identifier_text
from aioiceberg.commit.protocols.commit_point import CATALOG, CommitPoint
from aioiceberg.commit.protocols.pointer import MetadataPointer, PointerProtocol
from aioiceberg.errors import StoreError, TableNotFoundError, ValidationError
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.table import Table

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema

__all__ = ["PointerCatalog", "split_identifier"]


def split_identifier(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    """(namespace parts, table name); the namespace must not be empty."""
    parts = identifier_parts(identifier, "table identifier")
    if len(parts) < 2:
        raise ValidationError(f"table identifier {identifier!r} needs a namespace and a name")
    return tuple(parts[:-1]), parts[-1]


class PointerCatalog(Catalog):
    """A catalog whose tables commit by swapping a pointer the catalog keeps."""

    #: recorded in the tables this catalog commits ("glue", "s3tables", "sql")
    kind: str

    @abc.abstractmethod
    def pointer(self, namespace: tuple[str, ...], name: str) -> MetadataPointer:
        """The pointer of table ``name`` in ``namespace``."""

    @abc.abstractmethod
    async def new_table_location(self, namespace: tuple[str, ...], name: str) -> str:
        """Where a new table goes (checking that its namespace exists)."""

    async def abandon_new_table(self, namespace: tuple[str, ...], name: str) -> None:
        """Undo what ``new_table_location`` reserved when creating the table failed after it."""
        return None

    def protocol_for(self, namespace: tuple[str, ...], name: str, location: str) -> PointerProtocol:
        return PointerProtocol(
            self.io_for(location), self.pointer(namespace, name), CommitPoint(CATALOG, self.kind)
        )

    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        from aioiceberg.catalog import first_metadata

        namespace, name = split_identifier(identifier)
        place = first_metadata(schema, partition_by, properties, format_version, sort_order)
        location = (await self.new_table_location(namespace, name)).rstrip("/")
        try:
            metadata = place(location)
            protocol = self.protocol_for(namespace, name, location)
            state = await protocol.create(location, metadata)
        except BaseException:
            with contextlib.suppress(StoreError):
                await self.abandon_new_table(namespace, name)
            raise
        return Table(identifier_text(identifier), location, state, protocol.io, protocol)

    async def load_table(self, identifier: str | Sequence[str]) -> Table:
        namespace, name = split_identifier(identifier)
        pointer = self.pointer(namespace, name)
        found = await pointer.read()
        if found is None:
            raise TableNotFoundError(f"{pointer.name} does not exist")
        io = self.io_for(found.metadata_location)
        protocol = PointerProtocol(io, pointer, CommitPoint(CATALOG, self.kind))
        state = await protocol.state_at(found)
        location = state.metadata.location
        if not protocol.accepts(state.metadata):
            from aioiceberg.commit.protocols.commit_point import commit_point_of

            point = commit_point_of(state.metadata)
            reason = (
                f"{pointer.name} is a table that commits through {point}, not this catalog: "
                f"committing here would fork its history; opened read-only"
            )
            return Table(identifier_text(identifier), location, state, io, None, read_only_reason=reason)
        return Table(identifier_text(identifier), location, state, io, protocol)

    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        namespace, name = split_identifier(identifier)
        return await self.pointer(namespace, name).read() is not None

    async def register_table(self, identifier: str | Sequence[str], metadata_location: str) -> Table:
        namespace, name = split_identifier(identifier)
        io = self.io_for(metadata_location)
        protocol = PointerProtocol(io, self.pointer(namespace, name), CommitPoint(CATALOG, self.kind))
        state = await protocol.register(metadata_location)
        return Table(identifier_text(identifier), state.metadata.location, state, io, protocol)

    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """Remove the table from the catalog; with ``purge`` also every object under its location."""
        namespace, name = split_identifier(identifier)
        pointer = self.pointer(namespace, name)
        found = await pointer.read()
        if found is None:
            raise TableNotFoundError(f"{pointer.name} does not exist")
        location: str | None = None
        if purge:
            protocol = PointerProtocol(
                self.io_for(found.metadata_location), pointer, CommitPoint(CATALOG, self.kind)
            )
            with contextlib.suppress(TableNotFoundError):
                location = (await protocol.state_at(found)).metadata.location
        await pointer.delete()
        if purge and location:
            io = self.io_for(location)
            await io.delete_many([info.location async for info in io.list(location.rstrip("/") + "/")])
            return None
        return found.metadata_location
