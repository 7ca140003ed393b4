"""The warehouse catalog: namespaces and tables as prefixes under one root, on any store.

There is no catalog service: the table directory *is* the table. A table lives at
``{root}/{namespace path}/{name}`` and exists while ``metadata/v{N}.metadata.json``
files exist there (the version chain the commit protocol swaps). A namespace exists
while it has a properties file (``{namespace path}/.namespace.json``) or holds a table.

``lock=None`` commits by conditional writes on the store itself (S3 If-None-Match, an
atomic local create); ``lock="dynamodb://TABLE"`` commits through a DynamoDB table.

Dropping a table without ``purge`` *unregisters* it: the latest metadata is kept as
``metadata/{N:05d}-dropped-{uuid}.metadata.json`` and only the version chain
(``v*.metadata.json``, ``version-hint.text``) is deleted. Data files, manifests and
statistics stay, the table stays readable (read-only) through that file or its
location, and :meth:`Catalog.register_table` brings it back. See docs/catalog.md.
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import fastavro

from aioiceberg.catalogs.base import Catalog, identifier_parts, identifier_text
from aioiceberg.catalogs.new_table import first_metadata, parse_partition_by, to_schema
from aioiceberg.catalogs.uri import catalog_class
from aioiceberg.commit.protocols.base import (
    CommitProtocol,
    TableState,
    metadata_dir,
    parse_metadata_file,
    version_hint_path,
)
from aioiceberg.commit.protocols.commit_point import CATALOG, commit_point_of
from aioiceberg.commit.protocols.select import OpenedTable, open_table_state, protocol_for_lock, reopen
from aioiceberg.errors import (
    IcebergError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.local import local_path
from aioiceberg.io.locations import normalized_location
from aioiceberg.io.resolve import resolve_io, scheme_of
from aioiceberg.runtime import Runtime, default_runtime
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.table import Table

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "NAMESPACE_FILE",
    "Catalog",
    "NamespaceNotEmptyError",
    "WarehouseCatalog",
    "connect",
    "first_metadata",
    "load_table",
    "parse_partition_by",
    "to_schema",
]

NAMESPACE_FILE = ".namespace.json"

# Java's gzip names count too: v{N}.gz.metadata.json and the older v{N}.metadata.json.gz.
_VERSION_FILE = re.compile(r"^v(\d+)(?:\.gz)?\.metadata\.json(?:\.gz)?$")
_METADATA_FILE = (".metadata.json", ".metadata.json.gz")


def _root(root: str) -> str:
    if scheme_of(root) == "file" and not root.startswith("file:"):
        return os.path.abspath(root).rstrip("/")
    return root.rstrip("/")


_parts = identifier_parts
_name = identifier_text


class WarehouseCatalog(Catalog):
    """Namespaces and tables under one warehouse root; every table commits through one protocol.

    Clients, caches and worker pools come from a runtime: one the catalog makes and closes
    with itself (``aclose()`` / ``async with``), or ``runtime``, which several catalogs may
    share and its owner closes.
    """

    def __init__(
        self,
        root: str,
        *,
        lock: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ):
        super().__init__(_root(root), storage_options=storage_options, runtime=runtime)
        self.protocol: CommitProtocol = self.confine(
            protocol_for_lock(self.io, lock, self.storage_options, probe_base=self.root)
        )

    def __repr__(self) -> str:
        return f"Catalog({self.root!r})"

    async def _close_clients(self) -> None:
        await self.protocol.aclose()

    # -- locations ---------------------------------------------------------------------------
    def root_locations(self) -> tuple[str, ...]:
        return (self.root,)

    def table_location(self, identifier: str | Sequence[str]) -> str:
        parts = _parts(identifier, "table identifier")
        if len(parts) < 2:
            raise ValidationError(f"table identifier {identifier!r} needs a namespace and a name")
        return "/".join([self.root, *parts])

    def namespace_location(self, namespace: str | Sequence[str]) -> str:
        parts = _parts(namespace, "namespace")
        if not parts:
            raise ValidationError("the namespace is empty")
        return "/".join([self.root, *parts])

    async def _keys(self, prefix: str) -> list[str]:
        """Every object key below ``prefix`` (ending in ``/``), relative to it."""
        return [
            info.location[len(prefix) :]
            async for info in self.io.list(prefix)
            if info.location.startswith(prefix)
        ]

    async def check_new_table(self, identifier: str | Sequence[str], location: str) -> str:
        """Also refuses nesting: a table's directory holds all of it (a purge deletes it), so
        no table may live inside another's, nor where a namespace holds tables or properties."""
        normal = await super().check_new_table(identifier, location)
        expected = normalized_location(self.table_location(identifier))
        if normal != expected:  # the name's directory is the table: no place of one's choosing
            raise LocationNotAllowedError(
                f"table {_name(identifier)} lives at {expected}, where its name puts it, not at {location}",
                location=location,
            )
        parts = _parts(identifier, "table identifier")
        for i in range(2, len(parts)):
            if await self._version_files("/".join([self.root, *parts[:i]])):
                raise LocationNotAllowedError(
                    f"table {_name(identifier)} would lie inside table {'.'.join(parts[:i])}'s directory",
                    location=location,
                )
        below = await self._tables_below(parts)
        if below:
            raise LocationNotAllowedError(
                f"table {_name(identifier)} would hold other tables in its directory: "
                + ", ".join(".".join([*parts, *t.split("/")]) for t in below[:5]),
                location=location,
            )
        if await self.io.exists(self._namespace_file(parts)):
            raise LocationNotAllowedError(
                f"{_name(identifier)} is a namespace: a table of that name would share its directory",
                location=location,
            )
        return normal

    async def check_location_change(self, table_location: str, new_location: str) -> None:
        """A warehouse table is its directory: its location follows its name, never a commit,
        and its files stay inside it (``write.*.path`` may only point there)."""
        raise LocationNotAllowedError(
            f"the table at {table_location} keeps its files in its directory, where its name puts "
            f"it: a commit cannot place them at {new_location!r} (set-location is refused; rename "
            "the table to move it)",
            location=new_location,
        )

    async def _version_files(self, location: str) -> list[tuple[int, str]]:
        """The table's version chain, oldest first (empty: no table here)."""
        prefix = metadata_dir(location) + "/"
        found = []
        for key in await self._keys(prefix):
            m = _VERSION_FILE.match(key)
            if m is not None:
                found.append((int(m.group(1)), prefix + key))
        return sorted(found)

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
        """A new table (version 1). Its name makes its namespace, which need not have been
        created first (as in Java's HadoopCatalog): tables written by other tools or older
        versions have no namespace file."""
        location = self.table_location(identifier)
        metadata = first_metadata(schema, partition_by, properties, format_version, sort_order)(location)
        await self.check_new_table(identifier, location)
        await self._refuse_leftovers(location)
        state = await self.protocol.create(location, metadata)
        return Table(_name(identifier), location, state, self.io, self.protocol)

    async def _refuse_leftovers(self, location: str) -> None:
        # A drop that stopped midway leaves v2..vN without v1: a new v1 would inherit them.
        if await self._version_files(location):
            raise TableAlreadyExistsError(
                f"a table exists at {location} (or its drop did not finish: drop it again)"
            )

    async def load_table(self, identifier: str | Sequence[str]) -> Table:
        """The table's latest version, committing through the commit point it records (see
        docs/commit-protocols.md): the catalog's own for the tables it created."""
        location = self.table_location(identifier)
        opened = await open_table_state(
            self.io, location, self.protocol, self.storage_options, probe_base=self.root
        )
        if opened.protocol is not None:
            self.confine(opened.protocol)
        return _table(_name(identifier), location, opened, self.io)

    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        try:
            await self.protocol.load(self.table_location(identifier))
        except TableNotFoundError:
            return False
        return True

    async def register_table(self, identifier: str | Sequence[str], metadata_location: str) -> Table:
        """Adopt one metadata file (a dropped table's, another engine's) as version 1 of a table.

        The file's own ``location`` must be the identifier's: paths inside a table are
        absolute, so the catalog cannot move a table by registering it elsewhere. Only files
        under the warehouse are read (:meth:`Catalog.read_for_register`).
        """
        location = self.table_location(identifier)
        await self.check_new_table(identifier, location)
        source, metadata = await self.read_for_register(metadata_location)
        if normalized_location(metadata.location) != normalized_location(location):
            raise ValidationError(
                f"{source} belongs to the table at {metadata.location}, "
                f"not {location}; register it under the identifier of that location"
            )
        await self._refuse_leftovers(location)
        state = await self.protocol.create(location, metadata)
        return Table(_name(identifier), location, state, self.io, self.protocol)

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        """Tables directly in ``namespace`` (dotted identifiers, sorted); a namespace with
        neither a properties file nor anything below it does not exist (``NamespaceNotFoundError``)."""
        parts = _parts(namespace, "namespace")
        prefix = "/".join([self.root, *parts]) + "/"
        names: set[str] = set()
        for key in await self._keys(prefix):
            pieces = key.split("/")
            if len(pieces) == 3 and pieces[1] == "metadata" and _VERSION_FILE.match(pieces[2]):
                names.add(".".join([*parts, pieces[0]]))
        if not names and not await self.namespace_exists(parts):
            raise NamespaceNotFoundError(f"namespace {_name(namespace)!r} does not exist")
        return sorted(names)

    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """Unregister a table, or with ``purge`` delete the objects under its location.

        Without purge, returns the kept metadata file (pass it to :meth:`register_table`
        to undo). Files a table references outside its location (``add_files``) are never
        deleted, nor subdirectories holding another table's metadata (a table nested inside
        it before nesting was refused). Not atomic against concurrent commits to the same
        table: stop writers first.
        """
        location = self.table_location(identifier)
        versions = await self._version_files(location)
        if not versions:
            raise TableNotFoundError(f"no table at {location}")
        kept: str | None = None
        if not purge:
            try:
                state: TableState | None = await self.protocol.load(location)
            except TableNotFoundError:  # an earlier drop stopped midway
                state = None
            if state is not None:
                kept = f"{metadata_dir(location)}/{state.version:05d}-dropped-{uuid.uuid4()}.metadata.json"
                await self.io.write_if_absent(kept, await self.io.read(state.metadata_location))
        # hint first, then v1: without both, every reader sees no table, so a crash from
        # here on leaves an unregistered table and later versions for the next drop to finish.
        await self.io.delete(version_hint_path(location))
        for _, path in versions:
            await self.io.delete(path)
        if purge:
            await self.purge_location(self.io, location)
        await self.protocol.forget_table(location)
        return kept

    async def purge_table(self, identifier: str | Sequence[str]) -> None:
        """``drop_table(identifier, purge=True)``, by its PyIceberg name."""
        await self.drop_table(identifier, purge=True)

    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table:
        """Move a table to another name: local warehouses only (a directory rename).

        Paths inside a table are absolute, so the metadata files, manifest lists and
        manifests are rewritten to the new location after the move. On object stores this
        would mean copying every data file, so it is refused there.
        """
        if scheme_of(self.root) != "file":
            raise UnsupportedError(
                f"renaming tables is not supported on {scheme_of(self.root)}:// warehouses: it would "
                "mean copying every file and rewriting the absolute paths inside its metadata"
            )
        if not self.protocol.moves_with_files:
            raise UnsupportedError(
                f"renaming tables is not supported with {type(self.protocol).__name__}: "
                "its commit point does not move with the files"
            )
        source = self.table_location(from_identifier)
        target = self.table_location(to_identifier)
        await self.protocol.load(source)  # TableNotFoundError
        await self.check_new_table(to_identifier, target)

        src_dir, dst_dir = local_path(source), local_path(target)

        if os.path.exists(dst_dir):
            raise TableAlreadyExistsError(f"{target} already exists")
        rewritten = await _rewrite_table_paths(self.io, source, target)
        os.makedirs(os.path.dirname(dst_dir), exist_ok=True)
        os.rename(src_dir, dst_dir)
        for relative, data in rewritten.items():
            await self.io.write(f"{target}/{relative}", data)
            _drop_stale_checksum(os.path.join(dst_dir, relative))
        return await self.load_table(to_identifier)

    # -- namespaces ----------------------------------------------------------------------------
    def _namespace_file(self, namespace: str | Sequence[str]) -> str:
        return f"{self.namespace_location(namespace)}/{NAMESPACE_FILE}"

    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        """Write the namespace's properties file; refused when the namespace exists already."""
        if await self.namespace_exists(namespace):
            raise NamespaceAlreadyExistsError(f"namespace {_name(namespace)!r} already exists")
        parts = _parts(namespace, "namespace")
        for i in range(1, len(parts) + 1):
            if len(parts[:i]) >= 2 and await self.table_exists(parts[:i]):
                raise ValidationError(f"{'.'.join(parts[:i])} is a table, not a namespace")
        body = json.dumps({"properties": dict(properties or {})}, indent=2, sort_keys=True).encode()
        try:
            await self.io.write_if_absent(self._namespace_file(namespace), body)
        except PreconditionFailedError as exc:
            raise NamespaceAlreadyExistsError(f"namespace {_name(namespace)!r} already exists") from exc

    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        if await self.io.exists(self._namespace_file(namespace)):
            return True
        return await self._implied(namespace)

    async def _implied(self, namespace: str | Sequence[str]) -> bool:
        """Whether tables or namespaces below make ``namespace`` exist (it is listed then)."""
        return bool(await self._tables_below(namespace) or await self.list_namespace_levels(namespace))

    async def _tables_below(self, namespace: str | Sequence[str]) -> list[str]:
        prefix = self.namespace_location(namespace) + "/"
        found = set()
        for key in await self._keys(prefix):
            pieces = key.split("/")
            if len(pieces) >= 3 and pieces[-2] == "metadata" and _VERSION_FILE.match(pieces[-1]):
                found.add("/".join(pieces[:-2]))
        return sorted(found)

    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        """The namespace's properties ({} for one that exists only through what lies below it)."""
        try:
            data = await self.io.read(self._namespace_file(namespace))
        except ObjectNotFoundError:
            if await self._implied(namespace):
                return {}
            raise NamespaceNotFoundError(f"namespace {_name(namespace)!r} does not exist") from None
        try:
            props = json.loads(data)["properties"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError(f"{self._namespace_file(namespace)} is not a namespace file") from exc
        return {str(k): str(v) for k, v in props.items()}

    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Remove then set properties, atomically (a conditional write, retried on a race)."""
        path = self._namespace_file(namespace)
        for _ in range(10):
            try:
                info = await self.io.head(path)
            except ObjectNotFoundError:
                info = None
            current = await self.load_namespace_properties(namespace)
            for key in removals:
                current.pop(key, None)
            current.update({k: str(v) for k, v in (updates or {}).items()})
            body = json.dumps({"properties": current}, indent=2, sort_keys=True).encode()
            try:
                if info is None:
                    await self.io.write_if_absent(path, body)
                else:
                    await self.io.write_if_match(path, body, info.etag)
            except (PreconditionFailedError, ObjectNotFoundError):
                continue
            return current
        raise NamespaceAlreadyExistsError(f"namespace {_name(namespace)!r} kept changing; try again")

    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        """Namespaces directly below ``parent`` (the root by default), dotted, sorted."""
        return [".".join(levels) for levels in await self.list_namespace_levels(parent)]

    async def list_namespace_levels(self, parent: str | Sequence[str] = ()) -> list[tuple[str, ...]]:
        """Namespaces directly below ``parent``, as levels: each level is a directory, so one
        holding '.' comes back whole."""
        parts = _parts(parent, "namespace") if parent else []
        prefix = "/".join([self.root, *parts]) + "/"
        tables: set[tuple[str, ...]] = set()
        children: set[str] = set()
        for key in await self._keys(prefix):
            pieces = key.split("/")
            if pieces[0].startswith("."):
                continue
            if len(pieces) >= 3 and pieces[-2] == "metadata" and _VERSION_FILE.match(pieces[-1]):
                tables.add(tuple(pieces[:-2]))
                if len(pieces) >= 4:
                    children.add(pieces[0])
            elif len(pieces) >= 2 and pieces[-1] == NAMESPACE_FILE:
                children.add(pieces[0])
        children -= {t[0] for t in tables if len(t) == 1}
        return sorted((*parts, c) for c in children)

    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Delete an empty namespace's properties file; refused while it holds tables."""
        if not await self.namespace_exists(namespace):
            raise NamespaceNotFoundError(f"namespace {_name(namespace)!r} does not exist")
        tables = await self._tables_below(namespace)
        children = await self.list_namespaces(namespace)
        if tables or children:
            raise NamespaceNotEmptyError(
                f"namespace {_name(namespace)!r} is not empty: "
                + ", ".join([*(f"table {t.replace('/', '.')}" for t in tables), *children][:5])
            )
        await self.io.delete(self._namespace_file(namespace))


def connect(
    root: str,
    lock: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    runtime: Runtime | None = None,
    warehouse: str | None = None,
) -> Catalog:
    """A catalog over ``root``, with a runtime of its own or sharing ``runtime``'s clients
    and caches.

    ``root`` is a warehouse (a directory, ``s3://bucket/prefix`` or any fsspec URL: tables
    commit by conditional writes, or through ``lock``), or a catalog service's URI
    (``glue://``, ``s3tables://ARN``, ``sqlite:///PATH``, ``rest+http://HOST``: see
    docs/catalog.md), for which ``warehouse`` says where new tables go.
    """
    service = catalog_class(root)
    if service is not None:
        if lock is not None:
            raise ValidationError(
                f"lock={lock!r} applies to warehouse catalogs; {root!r} commits through the catalog itself"
            )
        return service.from_uri(root, warehouse=warehouse, storage_options=storage_options, runtime=runtime)
    if warehouse is not None and _root(warehouse) != _root(root):
        raise ValidationError(f"warehouse={warehouse!r} differs from the warehouse root {root!r}")
    return WarehouseCatalog(root, lock=lock, storage_options=storage_options, runtime=runtime)


async def load_table(
    location_or_metadata_file: str,
    storage_options: Mapping[str, Any] | None = None,
    lock: str | None = None,
    runtime: Runtime | None = None,
) -> Table:
    """The latest version of the table at a location, or one metadata file (read-only).

    The table commits through the commit point it records (conditional writes, or the
    DynamoDB table it names, reached with the standard AWS configuration or the
    ``dynamodb.*`` storage options); ``lock`` overrides where it lives, as in
    :func:`connect`. When that commit point cannot be reached the table opens read-only
    and a write says which option to pass. A location without ``v{N}.metadata.json``
    files (written by another engine, or a dropped table) opens at its highest-numbered
    metadata file, read-only unless its commit point has it.
    """
    target = _root(location_or_metadata_file)
    io = resolve_io(target, storage_options, runtime=runtime if runtime is not None else default_runtime())
    if target.endswith(_METADATA_FILE):
        return await _static(io, target)
    opener = protocol_for_lock(io, lock, storage_options)
    try:
        opened = await open_table_state(io, target, opener, storage_options)
    except TableNotFoundError:
        try:
            newest = await _newest_metadata_file(io, target)
        except StoreError as exc:
            if exc.retryable:
                raise
            raise StoreError(
                f"{target}: no version files found and its metadata folder cannot be listed ({exc}); "
                "a table whose storage refuses listing (S3 Tables) loads through its catalog, or "
                "read-only by its metadata file"
            ) from exc
        if newest is None:
            raise
        state = await _read_state(io, newest)
        if state.metadata.location.rstrip("/") != target:
            return _read_only(io, state)
        # read-only when its commit point cannot be reached: the reason says which (a catalog's)
        opened = await reopen(io, target, state, storage_options)
    return _table(None, target, opened, io)


def _table(identifier: str | None, location: str, opened: OpenedTable, io: FileIO) -> Table:
    return Table(
        identifier, location, opened.state, io, opened.protocol, read_only_reason=opened.read_only_reason
    )


async def _read_state(io: FileIO, metadata_file: str) -> TableState:
    try:
        data = await io.read(metadata_file)
    except ObjectNotFoundError as exc:
        raise TableNotFoundError(f"no metadata file at {metadata_file}") from exc
    return TableState(parse_metadata_file(io, data, metadata_file), metadata_file, 0)


def _read_only(io: FileIO, state: TableState) -> Table:
    advice = "load the table by its location to write"
    try:
        point = commit_point_of(state.metadata)
    except IcebergError:  # an unreadable commit point property: the generic advice
        point = None
    if point is not None and point.kind == CATALOG:  # its location does not hold its version
        advice = f"it commits through {point}: to write, {point.how_to_write()}"
    reason = f"{state.metadata_location} was opened by its metadata file and is read-only; {advice}"
    return Table(None, state.metadata.location, state, io, None, read_only_reason=reason)


async def _static(io: FileIO, metadata_file: str) -> Table:
    return _read_only(io, await _read_state(io, metadata_file))


async def _newest_metadata_file(io: FileIO, table_location: str) -> str | None:
    best: tuple[int, str] | None = None
    async for info in io.list(metadata_dir(table_location) + "/"):
        name = info.location.rsplit("/", 1)[-1]
        m = re.match(r"^(\d+)-[^/]*\.metadata\.json(?:\.gz)?$", name)
        if m is not None and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), info.location)
    return best[1] if best is not None else None


# -- rename: rewrite absolute paths --------------------------------------------------------------
def _swap_prefix(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return new + value[len(old) :] if value == old or value.startswith(old + "/") else value
    if isinstance(value, dict):
        return {k: _swap_prefix(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap_prefix(v, old, new) for v in value]
    return value


def _rewrite_avro(data: bytes, old: str, new: str, lengths: Mapping[str, int]) -> tuple[bytes, bool]:
    """Re-encode one manifest or manifest list with paths moved; True if it lists position deletes."""
    reader = fastavro.reader(io.BytesIO(data))
    schema = json.loads(reader.metadata["avro.schema"])
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    records = []
    position_deletes = False
    for record in reader:
        moved = _swap_prefix(record, old, new)
        if "manifest_path" in moved and moved["manifest_path"] in lengths:
            moved["manifest_length"] = lengths[moved["manifest_path"]]
        data_file = moved.get("data_file")
        if isinstance(data_file, dict) and data_file.get("content") == 1:
            position_deletes = position_deletes or data_file.get("file_format") != "PUFFIN"
        records.append(moved)
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=reader.codec, metadata=meta)
    return out.getvalue(), position_deletes


def _avro_record_name(data: bytes) -> str:
    return str(json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"]).get("name", ""))


def _drop_stale_checksum(path: str) -> None:
    """Removes the checksum Hadoop's local file system keeps beside a file we just rewrote.

    Java Iceberg on ``file://`` tables writes through Hadoop, which keeps ``.<name>.crc``
    beside every file and refuses to read a file that no longer matches it.
    """
    folder, name = os.path.split(path)
    with suppress(FileNotFoundError):
        os.remove(os.path.join(folder, f".{name}.crc"))


async def _rewrite_table_paths(io: FileIO, old: str, new: str) -> dict[str, bytes]:
    """New bytes for every metadata object of the table at ``old`` (keyed by relative path)."""
    prefix = metadata_dir(old) + "/"
    keys = [info.location[len(prefix) :] async for info in io.list(prefix)]
    out: dict[str, bytes] = {}
    lists: list[str] = []
    lengths: dict[str, int] = {}
    for key in keys:
        if not key.endswith(".avro"):
            continue
        data = await io.read(prefix + key)
        if _avro_record_name(data) == "manifest_file":
            lists.append(key)
            continue
        new_bytes, position_deletes = _rewrite_avro(data, old, new, {})
        if position_deletes:
            raise UnsupportedError(
                f"{old} has position-delete files, which hold absolute data file paths: "
                "renaming it is not supported (rewrite or compact its deletes first)"
            )
        out[f"metadata/{key}"] = new_bytes
        lengths[f"{metadata_dir(new)}/{key}"] = len(new_bytes)
    for key in lists:
        out[f"metadata/{key}"] = _rewrite_avro(await io.read(prefix + key), old, new, lengths)[0]
    for key in keys:
        if key.endswith(".metadata.json"):
            document = json.loads(await io.read(prefix + key))
            out[f"metadata/{key}"] = json.dumps(_swap_prefix(document, old, new)).encode()
    return out
