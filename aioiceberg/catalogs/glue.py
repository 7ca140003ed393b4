"""AWS Glue as an Iceberg catalog, table for table compatible with PyIceberg's and Java's.

Namespaces are Glue databases (one level). A table is a Glue table of type
``EXTERNAL_TABLE`` whose Parameters say ``table_type=ICEBERG`` and name the current
metadata file (``metadata_location``, ``previous_metadata_location``); its
StorageDescriptor carries the location and the columns, so Athena and other Glue
consumers see the schema.

A commit writes a new metadata file, re-reads the Glue table, refuses if it no longer
points at the file the commit started from, and sends UpdateTable with the VersionId
that read returned. Real Glue refuses a stale VersionId (ConcurrentModificationException),
which closes the race between that read and the update; a Glue that ignores VersionId
(moto does) leaves it open between writers that do not share a runtime. Writers sharing
one (one catalog, or catalogs handed the same runtime) take turns per table either way.

Views are kept as Java's Hive catalog keeps them (and as the Glue view support proposed for
Java's GlueCatalog does): a Glue table of type ``VIRTUAL_VIEW`` whose Parameters say
``table_type=ICEBERG-VIEW`` (read case-blind) and name the view's metadata file, with the
current SQL as its view text. Tables and views share the database's one name space; a view's
commit is guarded like a table's (the file it was read from, then Glue's VersionId).

Options come from the ``glue://?...`` URI, then the ``glue.*`` storage options (PyIceberg's
names), then the standard AWS configuration (environment, including
``AWS_ENDPOINT_URL_GLUE`` / ``AWS_ENDPOINT_URL``, profiles, the credential chain).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aioiceberg.catalogs.base import dotted_namespace, identifier_text
from aioiceberg.catalogs.pointer_catalog import PointerViewCatalog, TablePlaces, split_identifier
from aioiceberg.commit.protocols.commit_point import parse_boolean, uri_options
from aioiceberg.commit.protocols.pointer_swap import MetadataPointer, Pointer
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    IcebergError,
    InvalidMetadataError,
    InvalidPropertyError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.aws_calls import AwsAnswer, AwsService
from aioiceberg.io.aws_connection import AwsConnection, service_connection
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.view_metadata import (
    SqlRepresentation,
    ViewMetadata,
)
from aioiceberg.view import View

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.runtime import Runtime
    from aioiceberg.spec.metadata import TableMetadata
    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.table import Table

__all__ = ["GLUE_URI_OPTIONS", "GlueCatalog", "GlueOptions", "GluePointer"]

GLUE_URI_OPTIONS = {
    "endpoint": "the Glue endpoint URL",
    "region": "an AWS region name",
    "profile": "an AWS profile name",
    "catalog_id": "the Glue catalog id (an AWS account id)",
    "skip_archive": "true or false",
}
"""The options a ``glue://?...`` URI may carry, with what each allows."""

# Parameters and types as PyIceberg 0.12 and Java's GlueCatalog write them.
TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
LOCATION = "location"
DESCRIPTION = "Description"
# Views as Java's Hive catalog writes them (Java's proposed Glue views write "iceberg-view").
VIRTUAL_VIEW = "VIRTUAL_VIEW"
ICEBERG_VIEW = "ICEBERG-VIEW"


# What GetTable returns that TableInput takes back (UpdateTable replaces the whole definition:
# what is left out is lost, so another tool's settings are carried over).
_TABLE_FIELDS = ("Owner", "Description", "Retention", "PartitionKeys", "TargetTable")
_STORAGE_FIELDS = (
    "Columns",
    "Location",
    "AdditionalLocations",
    "InputFormat",
    "OutputFormat",
    "Compressed",
    "NumberOfBuckets",
    "SerdeInfo",
    "BucketColumns",
    "SortColumns",
    "Parameters",
    "SkewedInfo",
    "StoredAsSubDirectories",
    "SchemaReference",
)
_DATABASE_FIELDS = ("CreateTableDefaultPermissions", "TargetDatabase", "FederatedDatabase")


@dataclass(frozen=True, slots=True, kw_only=True)
class GlueOptions(AwsConnection):
    """How to reach Glue; unset connection fields come from the standard AWS configuration."""

    catalog_id: str | None = None
    skip_archive: bool = True

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> GlueOptions:
        """``glue://?region=...&endpoint=...&profile=...&catalog_id=...&skip_archive=false``;
        an unknown or repeated option is an error naming it (a typo must not mean the default)."""
        parts = urlsplit(uri)
        if parts.scheme.lower() != "glue" or parts.netloc or parts.path.strip("/"):
            raise ValidationError(
                f"{uri!r} is not a Glue catalog URI: expected 'glue://' with options after '?' "
                f"(one of {', '.join(GLUE_URI_OPTIONS)})"
            )
        given = uri_options(parts.query, GLUE_URI_OPTIONS, uri)
        options = dict(storage_options or {})
        skip_text = given.get("skip_archive") or options.get("glue.skip-archive")
        skip_archive = True
        if skip_text is not None and str(skip_text):
            found = parse_boolean(str(skip_text))
            if found is None:
                subject = f"{uri!r}: option" if "skip_archive" in given else "storage option"
                key = "skip_archive" if "skip_archive" in given else "glue.skip-archive"
                raise InvalidPropertyError(key, skip_text, GLUE_URI_OPTIONS["skip_archive"], subject=subject)
            skip_archive = found
        connection, s3 = service_connection(
            "glue",
            options,
            endpoint=given.get("endpoint"),
            region=given.get("region"),
            profile=given.get("profile"),
        )
        connection["region"] = connection["region"] or s3.region or _configured_region(connection["profile"])
        catalog_id = given.get("catalog_id") or options.get("glue.id")
        return cls(
            **connection,
            catalog_id=str(catalog_id) if catalog_id is not None and str(catalog_id) else None,
            skip_archive=skip_archive,
        )


def _configured_region(profile: str | None) -> str | None:
    """AWS_REGION, else botocore's own lookup (AWS_DEFAULT_REGION, the profile's region):
    botocore reads no AWS_REGION, and Glue, unlike S3, cannot start without a region."""
    if os.environ.get("AWS_REGION"):
        return os.environ["AWS_REGION"]
    # botocore: optional (the s3 extra)
    import botocore.exceptions
    import botocore.session

    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except botocore.exceptions.BotoCoreError:
        return None  # an unknown profile: creating the client says so
    return str(region) if region else None


# -- calls ---------------------------------------------------------------------------------------
_Answer = AwsAnswer


class _Glue(AwsService):
    """Glue calls through the runtime's shared client (with the catalog id, when given)."""

    def __init__(self, options: GlueOptions, runtime: Runtime) -> None:
        fixed = {"CatalogId": options.catalog_id} if options.catalog_id else {}
        super().__init__(
            runtime,
            options.client_options(),
            service="glue",
            label="Glue",
            fixed=fixed,
            invalid=frozenset({"InvalidInputException"}),
        )
        self.options = options

    async def get_table(self, database: str, name: str) -> dict[str, Any] | None:
        try:
            found = await self.read("get_table", DatabaseName=database, Name=name)
        except _Answer as answer:
            if answer.code == "EntityNotFoundException":
                return None
            raise answer.fallback(f"glue table {database}.{name}") from None
        table: dict[str, Any] = found["Table"]
        return table

    async def get_database(self, database: str) -> dict[str, Any]:
        try:
            found = await self.read("get_database", Name=database)
        except _Answer as answer:
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {database!r} does not exist") from None
            raise answer.fallback(f"glue database {database!r}") from None
        db: dict[str, Any] = found["Database"]
        return db

    async def tables(self, database: str, max_results: int | None = None) -> list[dict[str, Any]]:
        """The database's tables (every page, or the first ``max_results``)."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"DatabaseName": database}
            if token:
                kwargs["NextToken"] = token
            if max_results is not None:
                kwargs["MaxResults"] = max_results
            try:
                page = await self.read("get_tables", **kwargs)
            except _Answer as answer:
                if answer.code == "EntityNotFoundException":
                    raise NamespaceNotFoundError(f"glue database {database!r} does not exist") from None
                raise answer.fallback(f"glue database {database!r}") from None
            out.extend(page.get("TableList", []))
            token = page.get("NextToken")
            if not token or (max_results is not None and len(out) >= max_results):
                return out

    async def settle_create(
        self, database: str, name: str, what: str, metadata_location: str, exc: WriteOutcomeUnknownError
    ) -> dict[str, Any] | None:
        """CreateTable got no answer: the entry when it points at our file, None when another
        writer's does; absent, the request may still be applied (``CommitStateUnknownError``).
        ``what`` is "table" or "view"."""
        label = f"glue {what} {database}.{name}"
        try:
            found = await self.get_table(database, name)
        except StoreError as again:
            raise CommitStateUnknownError(
                f"{label}: no answer to CreateTable ({exc}) and it cannot be read back ({again})"
            ) from exc
        if found is None:
            raise CommitStateUnknownError(
                f"{label}: no answer to CreateTable ({exc}); the {what} does not exist yet but the "
                "request may still be applied"
            ) from exc
        return found if (found.get("Parameters") or {}).get(METADATA_LOCATION) == metadata_location else None

    async def entry_before_swap(self, database: str, name: str, what: str) -> dict[str, Any] | None:
        """The entry a swap starts from; a failed read sent nothing, so it is a refusal the
        commit may retry (``CommitFailedError``)."""
        try:
            return await self.get_table(database, name)
        except StoreError as exc:
            raise CommitFailedError(
                f"glue {what} {database}.{name}: cannot read the {what} before the swap: {exc}"
            ) from exc

    async def update_entry(
        self,
        database: str,
        label: str,
        entry: Mapping[str, Any],
        current: Mapping[str, Any],
        gone: IcebergError,
    ) -> None:
        """UpdateTable with the VersionId ``current`` was read at (Glue's optimistic lock: refused,
        ``CommitFailedError``, when the entry changed since that read); ``gone`` when it no longer
        exists."""
        kwargs: dict[str, Any] = {
            "DatabaseName": database,
            "TableInput": entry,
            "SkipArchive": self.options.skip_archive,
        }
        version_id = current.get("VersionId")
        if version_id:
            kwargs["VersionId"] = version_id
        try:
            await self.write("update_table", **kwargs)
        except _Answer as answer:
            if answer.code == "ConcurrentModificationException" or (
                answer.code == "InvalidInputException" and "version" in answer.message.lower()
            ):
                raise CommitFailedError(
                    f"{label} changed since version {version_id} was read: {answer.message}"
                ) from None
            if answer.code == "EntityNotFoundException":
                raise gone from None
            raise answer.fallback(label) from None

    async def delete_entry(self, database: str, name: str, what: str, gone: IcebergError) -> None:
        """DeleteTable of a ``what`` ("table" or "view"); ``gone`` when there is no such entry.
        Unanswered, it is read back: still there, a ``StoreError``."""
        label = f"glue {what} {database}.{name}"
        try:
            await self.write("delete_table", DatabaseName=database, Name=name)
        except _Answer as answer:
            if answer.code == "EntityNotFoundException":
                raise gone from None
            raise answer.fallback(label) from None
        except WriteOutcomeUnknownError as exc:
            if await self.get_table(database, name) is not None:
                raise StoreError(f"{label}: no answer to DeleteTable and the {what} is still there") from exc

    async def rename_entry(
        self,
        found: Mapping[str, Any],
        source: tuple[str, str],
        target: tuple[str, str],
        what: str,
        *,
        fields: Sequence[str],
        default_type: str,
        pointed: Callable[[Mapping[str, Any]], str | None],
        taken: IcebergError,
        missing: type[IcebergError],
    ) -> None:
        """Glue has no rename: a new entry with ``found``'s definition (its ``fields``) under the
        target name, then the source deleted once it is seen still pointing where ``found`` did
        (``pointed``); if that fails the new entry is removed again and the source stays.
        ``taken`` when the target name is; ``missing`` names the error for a source gone."""
        (source_db, source_name), (target_db, target_name) = source, target
        source_label, target_label = (
            f"glue {what} {source_db}.{source_name}",
            f"glue {what} {target_db}.{target_name}",
        )
        entry = {
            **_carried(found, fields),
            "Name": target_name,
            "TableType": found.get("TableType") or default_type,
            "Parameters": dict(found.get("Parameters") or {}),
            "StorageDescriptor": _carried(found.get("StorageDescriptor") or {}, _STORAGE_FIELDS),
        }
        try:
            await self.write("create_table", DatabaseName=target_db, TableInput=entry)
        except _Answer as answer:
            if answer.code == "AlreadyExistsException":
                raise taken from None
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {target_db!r} does not exist") from None
            raise answer.fallback(target_label) from None
        try:
            now = await self.get_table(source_db, source_name)
            if now is None or pointed(now) != pointed(found):
                raise CommitFailedError(f"{source_label} changed during the rename; try again")
            await self.delete_entry(source_db, source_name, what, missing(f"{source_label} does not exist"))
        except BaseException as exc:
            try:  # the source stays what it was
                await self.delete_entry(
                    target_db, target_name, what, missing(f"{target_label} does not exist")
                )
            except IcebergError as undo:
                exc.add_note(f"{target_label} could not be removed again ({undo}): delete it by hand")
            raise


# -- Glue structures -----------------------------------------------------------------------------
_PRIMITIVES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "bigint",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimeType: "string",
    StringType: "string",
    UUIDType: "string",
    TimestampType: "timestamp",
    TimestamptzType: "timestamp",
    FixedType: "binary",
    BinaryType: "binary",
}


def glue_type(t: IcebergType) -> str:
    """The Hive type name Glue shows for an Iceberg type (PyIceberg's mapping)."""
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{f.name}:{glue_type(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"array<{glue_type(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{glue_type(t.key_type)},{glue_type(t.value_type)}>"
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return _PRIMITIVES.get(type(t)) or str(t)


def _column(f: NestedField, is_current: bool) -> dict[str, Any]:
    column: dict[str, Any] = {
        "Name": f.name,
        "Type": glue_type(f.field_type),
        "Parameters": {
            "iceberg.field.id": str(f.field_id),
            "iceberg.field.optional": str(f.optional).lower(),
            "iceberg.field.current": str(is_current).lower(),
        },
    }
    if f.doc:
        column["Comment"] = f.doc
    return column


def glue_columns(metadata: TableMetadata) -> list[dict[str, Any]]:
    """The current schema's columns, then columns only older schemas have (marked not current)."""
    columns: dict[str, dict[str, Any]] = {}
    current = metadata.schema()
    others = [s for s in metadata.schemas if s.schema_id != current.schema_id]
    for schema, is_current in [(current, True), *((s, False) for s in others)]:
        for f in schema.fields:
            if f.name not in columns:
                columns[f.name] = _column(f, is_current)
    return list(columns.values())


def _carried(found: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    return {k: found[k] for k in fields if found.get(k) is not None}


def _entry_input(
    name: str,
    types: tuple[str, str],
    metadata_location: str,
    properties: Mapping[str, str],
    storage_place: tuple[str, list[dict[str, Any]]],
    current: Mapping[str, Any] | None,
    previous_metadata_location: str | None,
    removed_properties: Sequence[str] = (),
) -> dict[str, Any]:
    """The TableInput for a version of an Iceberg table or view (``types``: its Glue TableType
    and ``table_type`` parameter): the current Glue entry's other settings kept, its
    Parameters updated with the pointer and the properties (``removed_properties`` dropped),
    its StorageDescriptor with ``storage_place``'s location and columns."""
    found = current or {}
    table_type, iceberg_type = types
    parameters = dict(found.get("Parameters") or {})
    for key in removed_properties:
        parameters.pop(key, None)
    parameters.update({TABLE_TYPE: iceberg_type, METADATA_LOCATION: metadata_location})
    if previous_metadata_location:
        parameters[PREVIOUS_METADATA_LOCATION] = previous_metadata_location
    parameters.update({k: str(v) for k, v in properties.items()})
    location, columns = storage_place
    storage = _carried(found.get("StorageDescriptor") or {}, _STORAGE_FIELDS)
    storage.update(Columns=columns, Location=location)
    return {
        **_carried(found, _TABLE_FIELDS),
        "Name": name,
        "TableType": table_type,
        "Parameters": parameters,
        "StorageDescriptor": storage,
    }


def table_input(
    name: str,
    metadata_location: str,
    metadata: TableMetadata,
    current: Mapping[str, Any] | None = None,
    previous_metadata_location: str | None = None,
) -> dict[str, Any]:
    """The TableInput for a version of an Iceberg table (:func:`_entry_input`)."""
    out = _entry_input(
        name,
        (EXTERNAL_TABLE, ICEBERG),
        metadata_location,
        metadata.properties,
        (metadata.location, glue_columns(metadata)),
        current,
        previous_metadata_location,
    )
    if DESCRIPTION in metadata.properties:
        out["Description"] = metadata.properties[DESCRIPTION]
    return out


def is_iceberg(table: Mapping[str, Any]) -> bool:
    return str((table.get("Parameters") or {}).get(TABLE_TYPE, "")).lower() == ICEBERG.lower()


def is_iceberg_view(table: Mapping[str, Any]) -> bool:
    return str((table.get("Parameters") or {}).get(TABLE_TYPE, "")).lower() == ICEBERG_VIEW.lower()


def view_input(
    name: str,
    metadata_location: str,
    metadata: ViewMetadata,
    current: Mapping[str, Any] | None = None,
    previous_metadata_location: str | None = None,
    removed_properties: Sequence[str] = (),
) -> dict[str, Any]:
    """The TableInput for a version of an Iceberg view (:func:`_entry_input`), its view text
    the current SQL, so Glue consumers see the query."""
    out = _entry_input(
        name,
        (VIRTUAL_VIEW, ICEBERG_VIEW),
        metadata_location,
        metadata.properties,
        (metadata.location, [_column(f, True) for f in metadata.current_schema.fields]),
        current,
        previous_metadata_location,
        removed_properties,
    )
    sql = next(
        (r.sql for r in metadata.current_version.representations if isinstance(r, SqlRepresentation)), None
    )
    if sql is not None:
        out["ViewOriginalText"] = out["ViewExpandedText"] = sql
    return out


def pointed_metadata(table: Mapping[str, Any], subject: str) -> str:
    """The metadata file an Iceberg Glue table points at; a clear error for any other table."""
    parameters = table.get("Parameters") or {}
    kind = parameters.get(TABLE_TYPE)
    if not is_iceberg(table):
        raise TableNotFoundError(
            f"{subject} is not an Iceberg table: its Parameters have table_type={kind!r}, not 'ICEBERG'"
        )
    location = parameters.get(METADATA_LOCATION)
    if not location:
        raise InvalidMetadataError(f"{subject} is an Iceberg table without a {METADATA_LOCATION} parameter")
    return str(location)


def database_input(
    name: str, properties: Mapping[str, str], current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """PyIceberg's mapping: ``Description`` and ``location`` are the database's own fields,
    every other property a Parameter."""
    out: dict[str, Any] = {**_carried(current or {}, _DATABASE_FIELDS), "Name": name}
    parameters: dict[str, str] = {}
    for key, value in properties.items():
        if key == DESCRIPTION:
            out["Description"] = value
        elif key == LOCATION:
            out["LocationUri"] = value
        else:
            parameters[key] = value
    out["Parameters"] = parameters
    return out


def database_properties(database: Mapping[str, Any]) -> dict[str, str]:
    properties = {str(k): str(v) for k, v in (database.get("Parameters") or {}).items()}
    if database.get("LocationUri"):
        properties[LOCATION] = str(database["LocationUri"])
    if database.get("Description"):
        properties[DESCRIPTION] = str(database["Description"])
    return properties


def _check_values(properties: Mapping[str, Any], what: str) -> None:
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValidationError(f"{what}: property {key!r}={value!r}: keys and values must be strings")


# -- the pointer ---------------------------------------------------------------------------------
class GluePointer(MetadataPointer):
    """One Glue table's ``metadata_location`` parameter; the token is the Glue VersionId read."""

    def __init__(self, glue: _Glue, database: str, table: str) -> None:
        self.glue = glue
        self.database = database
        self.table = table
        self.name = f"glue table {database}.{table}"

    async def read(self) -> Pointer | None:
        found = await self.glue.get_table(self.database, self.table)
        if found is None:
            return None
        return Pointer(pointed_metadata(found, self.name), found.get("VersionId"))

    async def create(self, metadata_location: str, metadata: TableMetadata) -> Pointer:
        try:
            await self.glue.write(
                "create_table",
                DatabaseName=self.database,
                TableInput=table_input(self.table, metadata_location, metadata),
            )
        except _Answer as answer:
            if answer.code == "AlreadyExistsException":
                raise TableAlreadyExistsError(f"{self.name} already exists") from None
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {self.database!r} does not exist") from None
            raise answer.fallback(self.name) from None
        except WriteOutcomeUnknownError as exc:
            return await self._settle_create(metadata_location, exc)
        return Pointer(metadata_location)

    async def _settle_create(self, metadata_location: str, exc: WriteOutcomeUnknownError) -> Pointer:
        found = await self.glue.settle_create(self.database, self.table, "table", metadata_location, exc)
        if found is not None:
            return Pointer(metadata_location, found.get("VersionId"))
        raise TableAlreadyExistsError(f"{self.name} already exists (created by another writer)") from exc

    async def swap(self, expected: Pointer, metadata_location: str, metadata: TableMetadata) -> Pointer:
        current = await self.glue.entry_before_swap(self.database, self.table, "table")
        if current is None:
            raise TableNotFoundError(f"{self.name} no longer exists")
        found = pointed_metadata(current, self.name)
        if found != expected.metadata_location:
            raise CommitFailedError(f"{self.name} moved on from {expected.metadata_location} to {found}")
        entry = table_input(self.table, metadata_location, metadata, current, found)
        gone = TableNotFoundError(f"{self.name} no longer exists")
        await self.glue.update_entry(self.database, self.name, entry, current, gone)
        return Pointer(metadata_location)

    async def delete(self) -> None:
        gone = TableNotFoundError(f"{self.name} does not exist")
        await self.glue.delete_entry(self.database, self.table, "table", gone)


# -- the catalog ---------------------------------------------------------------------------------
def _view_label(database: str, name: str) -> str:
    return f"glue view {database}.{name}"


def _kind(entry: Mapping[str, Any]) -> str:
    return "view" if is_iceberg_view(entry) else "table"


def _warehouse(warehouse: str) -> str:
    if "://" not in warehouse and not warehouse.startswith("file:"):
        return os.path.abspath(warehouse).rstrip("/")
    return warehouse.rstrip("/")


class GlueCatalog(PointerViewCatalog):
    """Iceberg tables in AWS Glue: ``aioiceberg.connect("glue://", warehouse="s3://bucket/wh")``.

    New tables go to their database's location (``LocationUri``) when it has one, else to
    ``{warehouse}/{database}.db/{table}``, as PyIceberg places them.
    """

    kind = "glue"

    def __init__(
        self,
        options: GlueOptions | None = None,
        *,
        warehouse: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
        uri: str = "glue://",
    ) -> None:
        self.warehouse = _warehouse(warehouse) if warehouse else None
        # without a warehouse, where tables go is each database's to say and the root is the URI
        super().__init__(
            self.warehouse or uri,
            files=self.warehouse or "file:///",
            storage_options=storage_options,
            runtime=runtime,
        )
        self.options = options or GlueOptions.from_uri("glue://", storage_options)
        self.glue = _Glue(self.options, self.runtime)

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        warehouse: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> GlueCatalog:
        return cls(
            GlueOptions.from_uri(uri, storage_options),
            warehouse=warehouse,
            storage_options=storage_options,
            runtime=runtime,
            uri=uri,
        )

    async def _close_clients(self) -> None:
        await self.glue.release()

    def root_locations(self) -> tuple[str, ...]:
        return (self.warehouse,) if self.warehouse else ()

    # -- names ---------------------------------------------------------------------------------
    @staticmethod
    def _database(namespace: str | Sequence[str]) -> str:
        parts = dotted_namespace(namespace).split(".")
        if len(parts) != 1:
            raise ValidationError(
                f"namespace {identifier_text(namespace)!r}: Glue namespaces are databases, one level deep"
            )
        return parts[0]

    def _split(self, identifier: str | Sequence[str]) -> tuple[str, str]:
        namespace, name = split_identifier(identifier)
        if len(namespace) != 1:
            raise ValidationError(
                f"table identifier {identifier_text(identifier)!r}: Glue tables are 'database.table'"
            )
        return namespace[0], name

    def pointer(self, namespace: tuple[str, ...], name: str) -> GluePointer:
        return GluePointer(self.glue, *self._split((*namespace, name)))

    async def new_table_location(self, namespace: tuple[str, ...], name: str) -> str:
        database = self._database(namespace)
        location = (await self.glue.get_database(database)).get("LocationUri")
        if self.warehouse is None:
            raise self._no_roots(f"cannot create {database}.{name}")
        if location:
            try:
                self.check_namespace_location(database, str(location))
            except LocationNotAllowedError as exc:  # set by another tool: no table goes there
                raise LocationNotAllowedError(
                    f"cannot create {database}.{name}: {exc}", location=str(location)
                ) from None
            return f"{str(location).rstrip('/')}/{name}"
        return f"{self.warehouse}/{database}.db/{name}"

    async def table_places(self) -> list[TablePlaces]:
        """Every Glue table of the catalog, Iceberg or not (a Hive table's files are someone's
        too), placed by its StorageDescriptor location and, for Iceberg tables, its metadata file."""
        out: list[TablePlaces] = []
        for database in await self.list_namespaces():
            try:
                tables = await self.glue.tables(database)
            except NamespaceNotFoundError:
                continue  # dropped since it was listed
            for table in tables:
                name = str(table["Name"])
                location = (table.get("StorageDescriptor") or {}).get("Location")
                metadata_location = (table.get("Parameters") or {}).get(METADATA_LOCATION)
                if is_iceberg(table) and metadata_location:
                    places = await self.places_of(str(metadata_location), str(location or "") or None)
                    if location:
                        places = (*places, *await self.places_of(str(metadata_location)))
                    out.append(TablePlaces(f"glue table {database}.{name}", (database, name), places))
                elif is_iceberg_view(table) and metadata_location:
                    places = await self.places_of(str(metadata_location), str(location or "") or None)
                    out.append(TablePlaces(_view_label(database, name), None, places))
                elif location:
                    out.append(
                        TablePlaces(
                            f"glue table {database}.{name}", None, await self.places_of(None, str(location))
                        )
                    )
        return out

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
        """Refused when a view has the name (tables and views share one name space)."""
        database, name = self._split(identifier)
        found = await self.glue.get_table(database, name)
        if found is not None and is_iceberg_view(found):
            raise TableAlreadyExistsError(
                f"cannot create table {database}.{name}: a view of that name exists"
            )
        return await super().create_table(
            identifier, schema, partition_by, properties, format_version, sort_order
        )

    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        """False for a missing table and for a Glue table that is not an Iceberg table."""
        try:
            return await super().table_exists(identifier)
        except TableNotFoundError:
            return False

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        """The database's Iceberg tables (other Glue tables are not listed)."""
        database = self._database(namespace)
        return sorted(f"{database}.{t['Name']}" for t in await self.glue.tables(database) if is_iceberg(t))

    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table:
        """Glue has no rename: a new entry with the same definition, then the old one deleted
        (PyIceberg's way). A commit to the old name between the two is refused or lost only
        if it lands after the check that the old entry still points where it did."""
        source_db, source_name = self._split(from_identifier)
        target_db, target_name = self._split(to_identifier)
        label = f"glue table {source_db}.{source_name}"
        found = await self.glue.get_table(source_db, source_name)
        if found is None:
            raise TableNotFoundError(f"{label} does not exist")
        pointed_metadata(found, label)  # an Iceberg table, pointing at a file
        await self.glue.rename_entry(
            found,
            (source_db, source_name),
            (target_db, target_name),
            "table",
            fields=_TABLE_FIELDS,
            default_type=EXTERNAL_TABLE,
            pointed=lambda entry: pointed_metadata(entry, label),
            taken=TableAlreadyExistsError(f"glue table {target_db}.{target_name} already exists"),
            missing=TableNotFoundError,
        )
        return await self.load_table((target_db, target_name))

    # -- namespaces ----------------------------------------------------------------------------
    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        database = self._database(namespace)
        _check_values(properties or {}, f"glue database {database!r}")
        if (properties or {}).get(LOCATION):
            self.check_namespace_location(database, str((properties or {})[LOCATION]))
        try:
            await self.glue.write("create_database", DatabaseInput=database_input(database, properties or {}))
        except _Answer as answer:
            if answer.code == "AlreadyExistsException":
                raise NamespaceAlreadyExistsError(f"glue database {database!r} already exists") from None
            raise answer.fallback(f"glue database {database!r}") from None
        except WriteOutcomeUnknownError as exc:
            if not await self.namespace_exists(database):
                raise StoreError(f"glue database {database!r}: no answer to CreateDatabase") from exc

    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        try:
            await self.glue.get_database(self._database(namespace))
        except NamespaceNotFoundError:
            return False
        return True

    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        """Every database; a database has no namespaces below it (Glue has one level)."""
        if parent:
            await self.glue.get_database(self._database(parent))  # NamespaceNotFoundError
            return []
        names: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"NextToken": token} if token else {}
            try:
                page = await self.glue.read("get_databases", **kwargs)
            except _Answer as answer:
                raise answer.fallback("glue databases") from None
            names.extend(str(d["Name"]) for d in page.get("DatabaseList", []))
            token = page.get("NextToken")
            if not token:
                return sorted(names)

    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        """The database's Parameters, with ``location`` (LocationUri) and ``Description``."""
        return database_properties(await self.glue.get_database(self._database(namespace)))

    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Remove then set; Glue replaces the whole definition, so a concurrent update of the
        same database may be lost (Glue has no condition for UpdateDatabase)."""
        database = self._database(namespace)
        _check_values(updates or {}, f"glue database {database!r}")
        if (updates or {}).get(LOCATION):
            self.check_namespace_location(database, str((updates or {})[LOCATION]))
        found = await self.glue.get_database(database)
        properties = database_properties(found)
        for key in removals:
            properties.pop(key, None)
        properties.update(updates or {})
        try:
            await self.glue.write(
                "update_database", Name=database, DatabaseInput=database_input(database, properties, found)
            )
        except _Answer as answer:
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {database!r} does not exist") from None
            raise answer.fallback(f"glue database {database!r}") from None
        return properties

    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Refused while the database holds any table, Iceberg or not: Glue's DeleteDatabase
        would delete them with it."""
        database = self._database(namespace)
        tables = await self.glue.tables(database, max_results=5)
        if tables:
            names = ", ".join(f"{database}.{t['Name']}" for t in tables[:5])
            raise NamespaceNotEmptyError(f"glue database {database!r} is not empty: it holds {names}")
        try:
            await self.glue.write("delete_database", Name=database)
        except _Answer as answer:
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {database!r} does not exist") from None
            raise answer.fallback(f"glue database {database!r}") from None
        except WriteOutcomeUnknownError as exc:
            if await self.namespace_exists(database):
                raise StoreError(f"glue database {database!r}: no answer to DeleteDatabase") from exc

    # -- views ---------------------------------------------------------------------------------
    def _view_key(self, identifier: str | Sequence[str]) -> tuple[str, str]:
        return self._split(identifier)

    def _view_name(self, namespace: str, name: str) -> str:
        return _view_label(namespace, name)

    def _check_view_properties(self, label: str, properties: Mapping[str, str]) -> None:
        _check_values(properties, label)

    async def _view_entry(self, database: str, name: str) -> tuple[dict[str, Any], str]:
        """A view's Glue entry and the metadata file it points at (``ViewNotFoundError`` when
        the name holds nothing, or a table)."""
        label = _view_label(database, name)
        found = await self.glue.get_table(database, name)
        if found is None:
            raise ViewNotFoundError(f"{label} does not exist")
        if not is_iceberg_view(found):
            kind = (found.get("Parameters") or {}).get(TABLE_TYPE)
            raise ViewNotFoundError(
                f"{label} does not exist: the name holds a table (table_type={kind!r}, not {ICEBERG_VIEW!r})"
            )
        location = (found.get("Parameters") or {}).get(METADATA_LOCATION)
        if not location:
            raise InvalidMetadataError(f"{label} is an Iceberg view without a {METADATA_LOCATION} parameter")
        return found, str(location)

    async def _view_taken_by(self, namespace: str, name: str) -> str | None:
        await self.glue.get_database(namespace)  # NamespaceNotFoundError
        found = await self.glue.get_table(namespace, name)
        return None if found is None else _kind(found)

    async def _view_pointer(self, namespace: str, name: str) -> str:
        return (await self._view_entry(namespace, name))[1]

    async def _add_view_entry(
        self, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        database, label = namespace, _view_label(namespace, name)
        taken = f"cannot create view {database}.{name}: the name was just taken"
        try:
            await self.glue.write(
                "create_table",
                DatabaseName=database,
                TableInput=view_input(name, metadata_location, metadata),
            )
        except _Answer as answer:
            await self._forget_file(metadata_location)
            if answer.code == "AlreadyExistsException":
                raise ViewAlreadyExistsError(taken) from None
            if answer.code == "EntityNotFoundException":
                raise NamespaceNotFoundError(f"glue database {database!r} does not exist") from None
            raise answer.fallback(label) from None
        except WriteOutcomeUnknownError as exc:
            if await self.glue.settle_create(database, name, "view", metadata_location, exc) is None:
                await self._forget_file(metadata_location)
                raise ViewAlreadyExistsError(taken) from exc
        except BaseException:
            await self._forget_file(metadata_location)
            raise

    async def view_exists(self, identifier: str | Sequence[str]) -> bool:
        found = await self.glue.get_table(*self._split(identifier))
        return found is not None and is_iceberg_view(found)

    async def list_views(self, namespace: str | Sequence[str]) -> list[str]:
        """The database's Iceberg views (tables and other Glue views are not listed)."""
        database = self._database(namespace)
        return sorted(
            f"{database}.{t['Name']}" for t in await self.glue.tables(database) if is_iceberg_view(t)
        )

    async def drop_view(self, identifier: str | Sequence[str]) -> None:
        """Forget the view; its metadata files stay (as Java's catalogs leave them)."""
        database, name = self._split(identifier)
        await self._view_entry(database, name)
        gone = ViewNotFoundError(f"{_view_label(database, name)} does not exist")
        await self.glue.delete_entry(database, name, "view", gone)

    async def rename_view(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> View:
        """Another name for the view; refused when a table or view has it. Glue has no rename:
        a new entry with the same definition, then the old one deleted (as for tables)."""
        source_db, source_name = self._split(from_identifier)
        target_db, target_name = self._split(to_identifier)
        found, _ = await self._view_entry(source_db, source_name)
        await self.glue.rename_entry(
            found,
            (source_db, source_name),
            (target_db, target_name),
            "view",
            fields=(*_TABLE_FIELDS, "ViewOriginalText", "ViewExpandedText"),
            default_type=VIRTUAL_VIEW,
            pointed=lambda entry: (entry.get("Parameters") or {}).get(METADATA_LOCATION),
            taken=ViewAlreadyExistsError(
                f"cannot rename view {source_db}.{source_name} to {target_db}.{target_name}: "
                "a table or view of that name exists"
            ),
            missing=ViewNotFoundError,
        )
        return await self.load_view((target_db, target_name))

    async def _point_view(
        self, view: View, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        """Guarded by the file ``view`` was read from and the entry's VersionId."""
        database, label = namespace, _view_label(namespace, name)
        based = f"this commit was based on {view.metadata_location}"
        current = await self.glue.entry_before_swap(database, name, "view")
        if current is None or not is_iceberg_view(current):
            raise CommitFailedError(f"{label} was dropped or renamed ({based})")
        found = (current.get("Parameters") or {}).get(METADATA_LOCATION)
        if found != view.metadata_location:
            raise CommitFailedError(f"{label} moved on to {found} ({based})")
        removed = sorted(set(view.metadata.properties) - set(metadata.properties))
        entry = view_input(name, metadata_location, metadata, current, found, removed)
        try:
            await self.glue.update_entry(
                database, label, entry, current, CommitFailedError(f"{label} was dropped ({based})")
            )
        except WriteOutcomeUnknownError as exc:
            with contextlib.suppress(StoreError):
                again = await self.glue.get_table(database, name)
                if (
                    again is not None
                    and (again.get("Parameters") or {}).get(METADATA_LOCATION) == metadata_location
                ):
                    return
            raise CommitStateUnknownError(
                f"{label}: no answer to UpdateTable ({exc}); the view may or may not point at "
                f"{metadata_location}"
            ) from exc
