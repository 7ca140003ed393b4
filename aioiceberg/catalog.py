"""A minimal warehouse catalog: tables at ``{root}/{namespace path}/{table}``, protocol chosen by URI.

No catalog service: the table directory is the table. ``lock=None`` commits by
conditional writes on the store itself (S3 If-None-Match, atomic local create);
``lock="dynamodb://TABLE"`` commits through a DynamoDB table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aioiceberg.commit.protocols.base import CommitProtocol, TableState, metadata_dir
from aioiceberg.commit.protocols.conditional import ConditionalWriteProtocol
from aioiceberg.errors import (
    ObjectNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io, scheme_of
from aioiceberg.spec.metadata_json import new_table_metadata, parse_table_metadata
from aioiceberg.spec.partitioning import (
    PARTITION_DATA_ID_START,
    PartitionField,
    PartitionSpec,
    default_partition_name,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.spec.transforms import UnknownTransform, parse_transform
from aioiceberg.table import Table

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Catalog", "connect", "load_table", "parse_partition_by"]

_TRANSFORM = re.compile(r"^\s*(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([^()]+?)\s*\)\s*(?:as\s+(\w+))?\s*$", re.I)
_SIMPLE_NAME = re.compile(r"^\s*([^()\s]+)\s*$")


def parse_partition_by(items: Sequence[str] | PartitionSpec | None, schema: Schema) -> PartitionSpec:
    """``["day(ts)", "bucket(16, id)", "region"]`` -> a spec against ``schema``'s ids."""
    if items is None:
        return PartitionSpec(0, ())
    if isinstance(items, PartitionSpec):
        return items
    fields: list[PartitionField] = []
    for i, text in enumerate(items):
        m = _TRANSFORM.match(text)
        if m is not None:
            name, arg, column, alias = m.group(1).lower(), m.group(2), m.group(3), m.group(4)
            transform = parse_transform(f"{name}[{arg}]" if arg is not None else name)
        elif (s := _SIMPLE_NAME.match(text)) is not None:
            column, alias, transform = s.group(1), None, parse_transform("identity")
        else:
            raise ValidationError(f"cannot parse partition field {text!r}")
        if isinstance(transform, UnknownTransform):
            raise ValidationError(f"unknown transform in partition field {text!r}")
        source = schema.find_field(column)
        fields.append(
            PartitionField(
                (source.field_id,),
                PARTITION_DATA_ID_START + i,
                transform,
                alias or default_partition_name(transform, column),
            )
        )
    return PartitionSpec(0, tuple(fields))


def _to_schema(schema: pa.Schema | Schema) -> Schema:
    if isinstance(schema, Schema):
        return schema
    from aioiceberg.spec.arrow import arrow_to_schema_assign_ids

    return arrow_to_schema_assign_ids(schema)


def _root(root: str) -> str:
    if scheme_of(root) == "file" and not root.startswith("file:"):
        import os

        return os.path.abspath(root).rstrip("/")
    return root.rstrip("/")


def _protocol(
    io: FileIO, root: str, lock: str | None, storage_options: Mapping[str, Any] | None
) -> CommitProtocol:
    if lock is None:
        return ConditionalWriteProtocol(io, probe_base=root)
    if lock.startswith("dynamodb://"):
        from aioiceberg.commit.protocols.dynamodb import DynamoDbOptions, DynamoDbProtocol

        return DynamoDbProtocol(io, DynamoDbOptions.from_uri(lock, storage_options))
    raise ValidationError(f"unknown lock {lock!r}: use None or 'dynamodb://TABLE'")


class Catalog:
    """Tables under one warehouse root; every table commits through the same protocol."""

    def __init__(
        self, root: str, *, lock: str | None = None, storage_options: Mapping[str, Any] | None = None
    ):
        self.root = _root(root)
        self.storage_options = dict(storage_options or {})
        self.io = resolve_io(self.root, self.storage_options)
        self.protocol = _protocol(self.io, self.root, lock, self.storage_options)

    async def __aenter__(self) -> Catalog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.protocol.aclose()
        await self.io.aclose()

    def table_location(self, identifier: str | Sequence[str]) -> str:
        parts = identifier.split(".") if isinstance(identifier, str) else list(identifier)
        if len(parts) < 2 or any(not p or "/" in p for p in parts):
            raise ValidationError(f"table identifier {identifier!r} needs a namespace and a name")
        return "/".join([self.root, *parts])

    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        location = self.table_location(identifier)
        iceberg_schema = _to_schema(schema)
        spec = parse_partition_by(partition_by, iceberg_schema)
        metadata = new_table_metadata(
            iceberg_schema, spec, sort_order, location, dict(properties or {}), format_version
        )
        state = await self.protocol.create(location, metadata)
        return Table(_name(identifier), location, state, self.io, self.protocol)

    async def load_table(self, identifier: str | Sequence[str]) -> Table:
        location = self.table_location(identifier)
        state = await self.protocol.load(location)
        return Table(_name(identifier), location, state, self.io, self.protocol)

    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        try:
            await self.protocol.load(self.table_location(identifier))
        except TableNotFoundError:
            return False
        return True

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        """Tables directly in ``namespace``: directories holding ``metadata/v1.metadata.json``."""
        parts = namespace.split(".") if isinstance(namespace, str) else list(namespace)
        prefix = "/".join([self.root, *parts]) + "/"
        names: set[str] = set()
        async for info in self.io.list(prefix):
            rest = info.location[len(prefix) :] if info.location.startswith(prefix) else ""
            pieces = rest.split("/")
            if len(pieces) == 3 and pieces[1] == "metadata" and pieces[2] == "v1.metadata.json":
                names.add(".".join([*parts, pieces[0]]))
        return sorted(names)

    async def drop_table_metadata_only(self, identifier: str) -> None:  # pragma: no cover - later issue
        raise TableAlreadyExistsError("dropping tables is not supported yet")


def _name(identifier: str | Sequence[str]) -> str:
    return identifier if isinstance(identifier, str) else ".".join(identifier)


def connect(root: str, lock: str | None = None, storage_options: Mapping[str, Any] | None = None) -> Catalog:
    """A catalog over ``root`` (a directory or ``s3://bucket/prefix``)."""
    return Catalog(root, lock=lock, storage_options=storage_options)


async def load_table(
    location_or_metadata_file: str, storage_options: Mapping[str, Any] | None = None
) -> Table:
    """The latest version of the table at a location, or one metadata file (read-only).

    A location without ``v{N}.metadata.json`` files (written by another engine) opens
    read-only at its highest-numbered metadata file.
    """
    target = _root(location_or_metadata_file)
    io = resolve_io(target, storage_options)
    if target.endswith(".metadata.json"):
        return await _static(io, target)
    protocol = ConditionalWriteProtocol(io)
    try:
        state = await protocol.load(target)
    except TableNotFoundError:
        newest = await _newest_metadata_file(io, target)
        if newest is None:
            raise
        return await _static(io, newest)
    return Table(None, target, state, io, protocol)


async def _static(io: FileIO, metadata_file: str) -> Table:
    try:
        data = await io.read(metadata_file)
    except ObjectNotFoundError as exc:
        raise TableNotFoundError(f"no metadata file at {metadata_file}") from exc
    metadata = parse_table_metadata(data, metadata_file)
    return Table(None, metadata.location, TableState(metadata, metadata_file, 0), io, None)


async def _newest_metadata_file(io: FileIO, table_location: str) -> str | None:
    best: tuple[int, str] | None = None
    async for info in io.list(metadata_dir(table_location) + "/"):
        name = info.location.rsplit("/", 1)[-1]
        m = re.match(r"^(\d+)-[^/]*\.metadata\.json$", name)
        if m is not None and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), info.location)
    return best[1] if best is not None else None
