"""Catalogs that keep a pointer per table (Glue, S3 Tables, SQL): the table operations they share,
and (:class:`PointerViewCatalog`) the view operations of those that keep views too (Glue, SQL).

Each such catalog says how to reach one table's pointer (:meth:`PointerCatalog.pointer`),
where a new table goes, and how its namespaces are kept; creating, loading, registering and
dropping tables are the same for all of them.

Confinement: a table is created, registered or moved only inside the catalog's roots and
never inside (or around) another table of the catalog, whose locations the catalog lists
(:meth:`PointerCatalog.table_places`). Tables other engines put elsewhere (foreign tables)
load and commit as before, but a purge only unregisters them; a purge inside the roots
deletes only what lies under the table's location and belongs to no other table.
"""

from __future__ import annotations

import abc
import contextlib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from aioiceberg.catalogs.base import METADATA_SUFFIXES, Catalog, identifier_parts, identifier_text
from aioiceberg.catalogs.new_table import first_metadata
from aioiceberg.commit.protocols.base import parse_metadata_file
from aioiceberg.commit.protocols.commit_point import CATALOG, CommitPoint, commit_point_of
from aioiceberg.commit.protocols.pointer_swap import MetadataPointer, PointerProtocol
from aioiceberg.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    IcebergError,
    LocationNotAllowedError,
    NamespaceNotFoundError,
    ObjectNotFoundError,
    StoreError,
    TableNotFoundError,
    ValidationError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.locations import is_within, normalized_location
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.spec.view_metadata import (
    ViewMetadata,
    ViewVersion,
    parse_view_metadata,
    serialize_view_metadata,
)
from aioiceberg.spec.view_updates import LAST_ADDED, ViewChanges, check_dialects_kept, new_view_metadata
from aioiceberg.table import Table
from aioiceberg.view import View

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema

__all__ = ["PointerCatalog", "PointerViewCatalog", "TablePlaces", "implied_location", "split_identifier"]

_NUMBERED_FILE = re.compile(r"/(\d+)-[^/]*\.metadata\.json$")


def split_identifier(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    """(namespace parts, table name); the namespace must not be empty."""
    parts = identifier_parts(identifier, "table identifier")
    if len(parts) < 2:
        raise ValidationError(f"table identifier {identifier!r} needs a namespace and a name")
    return tuple(parts[:-1]), parts[-1]


def implied_location(metadata_location: str) -> str | None:
    """The table location a metadata file's path implies: the folder above ``metadata/``
    (where every engine puts it unless ``write.metadata.path`` says otherwise); None when
    the file lies in a folder of another name."""
    folder, _, file = metadata_location.rpartition("/")
    table, _, last = folder.rpartition("/")
    if last == "metadata" and file.endswith(METADATA_SUFFIXES) and table and not table.endswith(":/"):
        return table
    return None


@dataclass(frozen=True, slots=True)
class TablePlaces:
    """Where one table of a catalog keeps files: its location and its metadata folder,
    normalized. ``identifier`` is None for an entry that is not a table of this catalog
    (a view, another catalog's row in the same database, a Glue table of another format)."""

    name: str
    identifier: tuple[str, ...] | None
    places: tuple[str, ...]


def _normalized(locations: Iterable[str | None]) -> tuple[str, ...]:
    out: list[str] = []
    for location in locations:
        if not location:
            continue
        with contextlib.suppress(LocationNotAllowedError):
            normal = normalized_location(location)
            if normal not in out:
                out.append(normal)
    return tuple(out)


def _other_tables_metadata_dirs(prefix: str, keys: Sequence[str]) -> list[str]:
    """Subfolders under ``prefix`` holding a ``metadata/*.metadata.json``: tables of other
    engines or catalogs that this catalog does not list, kept whole by a purge."""
    found: set[str] = set()
    for key in keys:
        pieces = key[len(prefix) :].split("/")
        if len(pieces) >= 3 and pieces[-2] == "metadata" and pieces[-1].endswith(METADATA_SUFFIXES):
            found.add(prefix + "/".join(pieces[:-2]) + "/")
    return sorted(found)


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

    # -- where tables are ----------------------------------------------------------------------
    async def table_places(self) -> list[TablePlaces]:
        """Every table the catalog keeps (and other entries with locations), with where its
        files lie: what nesting is judged against. None known here."""
        return []

    async def places_of(self, metadata_location: str | None, location: str | None = None) -> tuple[str, ...]:
        """A table's places from what the catalog records: ``location`` when given, else the
        one its metadata file's path implies, else the one the file itself names (read only
        then: a table whose ``write.metadata.path`` puts its metadata elsewhere); and the
        metadata file's folder. Unreadable or unusable ones are left out."""
        if not metadata_location:
            return _normalized([location])
        where = location or implied_location(metadata_location)
        if where is None:
            with contextlib.suppress(IcebergError, ValueError):
                io = self.io_for(metadata_location)
                where = parse_metadata_file(io, await io.read(metadata_location), metadata_location).location
        return _normalized([where, metadata_location.rpartition("/")[0]])

    async def _refuse_nesting(
        self, normal: str, what: str, shown: str, skip: Callable[[TablePlaces], bool]
    ) -> None:
        for other in await self.table_places():
            if skip(other):
                continue
            for place in other.places:
                if is_within(normal, place) or is_within(place, normal):
                    raise LocationNotAllowedError(
                        f"{what} {shown!r} nests with {other.name} at {place!r}: tables never lie "
                        "inside one another",
                        location=shown,
                    )

    def _no_roots(self, what: str) -> LocationNotAllowedError:
        return LocationNotAllowedError(
            f"{what}: this {self.kind} catalog has no warehouse, so it may create, move or purge "
            "no table files; "
            "pass warehouse='./dir' or 's3://bucket/prefix' to aioiceberg.connect (--tables-in for "
            "aioiceberg serve)"
        )

    def check_namespace_location(self, namespace: str, location: str) -> None:
        """A namespace's ``location`` property places its new tables, so it must lie inside
        the roots (or be one); refused wherever it enters (``LocationNotAllowedError``)."""
        what = f"the 'location' property of namespace {namespace!r}"
        if not self.roots:
            raise self._no_roots(what)
        if normalized_location(location, what) not in self.roots.locations:
            self.roots.require(location, what)

    async def check_new_table(self, identifier: str | Sequence[str], location: str) -> str:
        """Inside the roots, and neither inside another table of the catalog nor around one."""
        if not self.roots:
            raise self._no_roots(f"cannot place table {identifier_text(identifier)}")
        normal = await super().check_new_table(identifier, location)
        key = tuple(identifier_parts(identifier, "table identifier"))
        await self._refuse_nesting(
            normal,
            f"the location of table {identifier_text(identifier)}",
            location,
            lambda other: other.identifier == key,
        )
        return normal

    async def check_location_change(self, table_location: str, new_location: str) -> None:
        """A new place for a table's files (its location, a ``write.metadata.path`` or
        ``write.data.path`` outside it): inside the roots and nesting with no other table
        (the tables at ``table_location`` are the one moving)."""
        await self._check_move(None, table_location, new_location)

    async def _check_move(
        self, identifier: tuple[str, ...] | None, table_location: str, new_location: str
    ) -> None:
        what = f"the new place for files of the table at {table_location}"
        if not self.roots:
            raise self._no_roots(what)
        await super().check_location_change(table_location, new_location)
        normal = normalized_location(new_location, what)
        here = _normalized([table_location])

        def itself(other: TablePlaces) -> bool:
            if identifier is not None:
                return other.identifier == identifier
            return bool(here) and here[0] in other.places

        await self._refuse_nesting(normal, what, new_location, itself)

    def confined(self, protocol: PointerProtocol, identifier: tuple[str, ...]) -> PointerProtocol:
        """:meth:`confine`, with the table's own name: moving it judges nesting against the
        catalog's other tables."""
        self.confine(protocol)

        async def guard(table_location: str, new_location: str) -> None:
            await self._check_move(identifier, table_location, new_location)

        protocol.location_guard = guard
        return protocol

    def protocol_for(self, namespace: tuple[str, ...], name: str, location: str) -> PointerProtocol:
        return self.confined(
            PointerProtocol(
                self.io_for(location), self.pointer(namespace, name), CommitPoint(CATALOG, self.kind)
            ),
            (*namespace, name),
        )

    async def purge_location(self, io: FileIO, location: str) -> bool:
        """Delete what lies under ``location`` and belongs to no other table: other tables'
        places below it (from :meth:`table_places`) and folders holding another table's
        metadata are kept. Nothing is deleted (False) when ``location`` lies outside the roots
        or inside, or at, another table's places."""
        if not self.roots.contains(location):
            return False
        normal = normalized_location(location)
        inner: list[str] = []
        for other in await self.table_places():
            for place in other.places:
                if is_within(normal, place):
                    return False
                if is_within(place, normal):
                    inner.append(place + "/")
        prefix = location.rstrip("/") + "/"
        keys = [info.location async for info in io.list(prefix) if info.location.startswith(prefix)]
        kept = _other_tables_metadata_dirs(prefix, keys)
        doomed: list[str] = []
        for key in keys:
            if any(key.startswith(folder) for folder in kept):
                continue
            try:
                spelled = normalized_location(key)
            except LocationNotAllowedError:
                continue  # a name no comparison can place: left alone
            if is_within(spelled, normal) and not any(spelled.startswith(p) for p in inner):
                doomed.append(key)
        await io.delete_many(doomed)
        await io.remove_empty_folders(prefix)  # a local disk: no folder (or lock file) left
        return True

    # -- tables --------------------------------------------------------------------------------
    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        namespace, name = split_identifier(identifier)
        place = first_metadata(schema, partition_by, properties, format_version, sort_order)
        location = (await self.new_table_location(namespace, name)).rstrip("/")
        try:
            await self.check_new_table((*namespace, name), location)
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
        protocol = self.confined(
            PointerProtocol(io, pointer, CommitPoint(CATALOG, self.kind)), (*namespace, name)
        )
        state = await protocol.state_at(found)
        location = state.metadata.location
        if not protocol.accepts(state.metadata):
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
        """Adopt a metadata file lying inside the roots (read only then), describing a table
        inside them that nests with no other table of the catalog."""
        namespace, name = split_identifier(identifier)
        if not await self.namespace_exists(namespace):
            raise NamespaceNotFoundError(f"namespace {identifier_text(namespace)!r} does not exist")
        source, metadata = await self.read_for_register(metadata_location)
        await self.check_new_table((*namespace, name), metadata.location)
        await self._refuse_nesting(
            source,
            f"the metadata file registered as {identifier_text(identifier)}",
            metadata_location,
            lambda other: other.identifier == (*namespace, name),
        )
        io = self.io_for(source)
        protocol = self.confined(
            PointerProtocol(io, self.pointer(namespace, name), CommitPoint(CATALOG, self.kind)),
            (*namespace, name),
        )
        state = await protocol.register(source, metadata)
        return Table(identifier_text(identifier), state.metadata.location, state, io, protocol)

    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """Remove the table from the catalog. With ``purge``, also delete what lies under its
        location and belongs to no other table (:meth:`purge_location`), and return None.

        A table living outside the catalog's roots (put there by another engine) or sharing
        its place with another table is only unregistered by a purge: nothing is deleted and,
        as without ``purge``, the metadata file that still describes it is returned.
        """
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
        await pointer.delete()  # first: the table no longer counts among the others below
        if purge and location and await self.purge_location(self.io_for(location), location):
            return None
        return found.metadata_location


class PointerViewCatalog(PointerCatalog):
    """A pointer catalog that also keeps views (SQL, Glue): a view is an entry in the tables'
    name space pointing at a view metadata file, committed by a guarded swap as a table is.

    The steps every such catalog takes (names, placing, writing and reading view files,
    replace and commit) live here; each catalog fills in how its entries are read, added and
    swapped (the ``_view_*`` hooks), with its own errors where its storage differs.
    """

    @abc.abstractmethod
    def _view_key(self, identifier: str | Sequence[str]) -> tuple[str, str]:
        """(namespace, name) of a view, as the catalog keys its entries."""

    @abc.abstractmethod
    def _view_name(self, namespace: str, name: str) -> str:
        """How errors name the view (``sql view ns.v (catalog 'c')``, ``glue view db.v``)."""

    def _view_place_name(self, namespace: str, name: str) -> str:
        """The view's name among :meth:`table_places` (skipped when placing the view itself)."""
        return self._view_name(namespace, name)

    def _check_view_properties(self, label: str, properties: Mapping[str, str]) -> None:
        """Refuse properties the catalog's storage cannot keep (none here)."""
        return None

    @abc.abstractmethod
    async def _view_taken_by(self, namespace: str, name: str) -> str | None:
        """'table' or 'view' when an entry has the name, else None; ``NamespaceNotFoundError``
        where the catalog checks the namespace first."""

    @abc.abstractmethod
    async def _view_pointer(self, namespace: str, name: str) -> str:
        """The metadata file the view's entry points at (``ViewNotFoundError`` when none)."""

    @abc.abstractmethod
    async def _add_view_entry(
        self, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        """Add the view's entry pointing at its first file, deleting the file when the entry
        was definitely not added (``ViewAlreadyExistsError`` when the name was just taken)."""

    @abc.abstractmethod
    async def _point_view(
        self, view: View, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        """Move the entry from ``view.metadata_location`` to ``metadata_location``:
        ``CommitFailedError`` when another writer moved or dropped it, ``CommitStateUnknownError``
        when it cannot be told whether the swap landed (the file is then kept)."""

    # -- view files -----------------------------------------------------------------------------
    async def _read_view(self, identifier: str, metadata_location: str) -> View:
        try:
            data = await self.io_for(metadata_location).read(metadata_location)
        except ObjectNotFoundError as exc:
            raise ViewNotFoundError(
                f"view {identifier} points at {metadata_location}, which does not exist"
            ) from exc
        return View(identifier, metadata_location, parse_view_metadata(data, metadata_location))

    async def _write_view_metadata(self, metadata: ViewMetadata, version: int) -> str:
        location = f"{metadata.location.rstrip('/')}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
        await self.io_for(location).write_if_absent(location, serialize_view_metadata(metadata))
        return location

    async def _forget_file(self, location: str) -> None:
        with contextlib.suppress(StoreError):
            await self.io_for(location).delete(location)

    # -- views ----------------------------------------------------------------------------------
    async def check_view_location(self, identifier: str | Sequence[str], location: str) -> None:
        """A view's files go where a table's may: inside the roots, nesting with no table or
        other view (``LocationNotAllowedError``)."""
        namespace, name = self._view_key(identifier)
        shown = f"{namespace}.{name}"
        what = f"the location of view {shown}"
        if not self.roots:
            raise self._no_roots(what)
        normal = self.roots.require(location, what)
        itself = self._view_place_name(namespace, name)
        await self._refuse_nesting(normal, what, location, lambda other: other.name == itself)

    async def create_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> View:
        """A new view; refused when a table or view has the name. Without ``location`` it goes
        where a table of that name would."""
        namespace, name = self._view_key(identifier)
        shown = f"{namespace}.{name}"
        kind = await self._view_taken_by(namespace, name)
        if kind is not None:
            raise ViewAlreadyExistsError(f"cannot create view {shown}: a {kind} of that name exists")
        where = (location or await self.new_table_location(tuple(namespace.split(".")), name)).rstrip("/")
        await self.check_view_location(identifier, where)
        metadata = new_view_metadata(str(uuid.uuid4()), where, schema, version, properties)
        self._check_view_properties(self._view_name(namespace, name), metadata.properties)
        metadata_location = await self._write_view_metadata(metadata, 0)
        await self._add_view_entry(namespace, name, metadata_location, metadata)
        return View(shown, metadata_location, metadata)

    async def load_view(self, identifier: str | Sequence[str]) -> View:
        namespace, name = self._view_key(identifier)
        return await self._read_view(f"{namespace}.{name}", await self._view_pointer(namespace, name))

    async def replace_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
    ) -> View:
        """A new current version (or an earlier one again, when the query is the same)."""
        view = await self.load_view(identifier)
        changes = ViewChanges(view.metadata, view.identifier)
        changes.properties.update(properties or {})
        changes.add_schema(schema)
        changes.set_current(changes.add_version(replace(version, schema_id=LAST_ADDED)))
        return await self.commit_view(view, changes.build())

    async def commit_view(self, view: View, metadata: ViewMetadata) -> View:
        """Write ``metadata`` as the view's next file and point the view's entry at it, guarded
        by the file ``view`` was read from (``CommitFailedError`` when another writer moved it).
        The file is deleted again when the swap was refused, kept when its outcome is unknown."""
        namespace, name = self._view_key(view.identifier)
        if metadata.view_uuid != view.metadata.view_uuid:
            raise CommitConflictError(f"view {view.identifier}: the new metadata is of another view")
        check_dialects_kept(
            view.identifier, view.metadata.current_version, metadata.current_version, metadata.properties
        )
        self._check_view_properties(self._view_name(namespace, name), metadata.properties)
        if metadata.location.rstrip("/") != view.metadata.location.rstrip("/"):
            await self.check_view_location(view.identifier, metadata.location)
        m = _NUMBERED_FILE.search(view.metadata_location)
        number = (int(m.group(1)) if m else len(view.metadata.version_log)) + 1
        metadata_location = await self._write_view_metadata(metadata, number)
        try:
            await self._point_view(view, namespace, name, metadata_location, metadata)
        except CommitStateUnknownError:
            raise  # the file may be the view's now: kept
        except IcebergError:
            await self._forget_file(metadata_location)
            raise
        return View(view.identifier, metadata_location, metadata)
