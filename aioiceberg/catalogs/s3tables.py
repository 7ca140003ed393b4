"""Amazon S3 Tables as an Iceberg catalog: one table bucket, its namespaces and tables.

``aioiceberg.connect("s3tables://arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME")``.

S3 Tables decides where a table's files go: CreateTable reserves the name and assigns the
table its own storage (``warehouseLocation``, an S3 bucket of the service's), and the
table has no metadata until UpdateTableMetadataLocation first points it at a metadata
file written there. Every later commit writes a new metadata file and moves the pointer
with UpdateTableMetadataLocation, presenting the version token read with the pointer: the
service refuses a stale token (ConflictException), so of two writers that started from
the same version exactly one wins, whichever process or engine they run in. The loser
rebases and retries.

The storage accepts object reads and writes but no listing and no deletes (S3 Tables
removes unreferenced files itself, by its maintenance): the metadata file of a refused
commit stays behind until then, a table cannot be found by listing its location, and
dropping a table (DeleteTable) deletes its files with it, so there is no drop that keeps
them, and nothing to register back.

Options come from the URI (``?endpoint=...&region=...&profile=...``), then the
``s3tables.*`` storage options (credentials fall back to the ``s3.*`` ones), then the
standard AWS configuration (``AWS_ENDPOINT_URL_S3TABLES`` / ``AWS_ENDPOINT_URL``, profiles,
the credential chain); the region defaults to the ARN's. ``s3.*`` options reach the files.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aioiceberg.catalogs.base import identifier_parts, identifier_text
from aioiceberg.catalogs.pointer_catalog import PointerCatalog, split_identifier
from aioiceberg.commit.protocols.commit_point import uri_options
from aioiceberg.commit.protocols.pointer_swap import MetadataPointer, Pointer
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    ListingStalledError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.aws_calls import AwsAnswer, AwsService
from aioiceberg.io.aws_connection import AwsConnection, service_connection
from aioiceberg.io.locations import Roots, normalized_location

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime
    from aioiceberg.spec.metadata import TableMetadata
    from aioiceberg.table import Table

__all__ = ["S3TABLES_URI_OPTIONS", "S3TablesCatalog", "S3TablesOptions", "S3TablesPointer"]

S3TABLES_URI_OPTIONS = {
    "endpoint": "the S3 Tables endpoint URL",
    "region": "an AWS region name",
    "profile": "an AWS profile name",
}
"""The options an ``s3tables://ARN?...`` URI may carry, with what each allows."""

_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):s3tables:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"bucket/(?P<bucket>[a-z0-9][a-z0-9_-]*)$"
)
_SHAPE = "'s3tables://arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME' (the table bucket's ARN)"

# S3 Tables' naming rules for namespaces and tables (the service refuses anything else).
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_]{0,253}[a-z0-9])?$")
_NAME_RULE = (
    "1 to 255 lowercase letters, digits and underscores, beginning and ending with a letter "
    "or digit, not starting with 'aws'"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class S3TablesOptions(AwsConnection):
    """Which table bucket, and how to reach S3 Tables; unset connection fields come from the
    standard AWS configuration."""

    table_bucket_arn: str

    @property
    def bucket(self) -> str:
        """The table bucket's name (the ARN's last part)."""
        return self.table_bucket_arn.rsplit("/", 1)[-1]

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> S3TablesOptions:
        """``s3tables://ARN?endpoint=...&region=...&profile=...`` (or ``s3tables:ARN``); an
        unknown or repeated option is an error naming it (a typo must not mean the default)."""
        scheme, _, rest = uri.partition(":")
        if scheme.lower() != "s3tables":
            raise ValidationError(f"{uri!r} is not an S3 Tables catalog URI: expected {_SHAPE}")
        if rest.startswith("//"):
            rest = rest[2:]
        arn_text, _, query = rest.partition("?")
        arn = unquote(arn_text).rstrip("/")
        found = _ARN.match(arn)
        if found is None:
            raise ValidationError(
                f"{uri!r} is not an S3 Tables catalog URI: expected {_SHAPE}, with options after "
                f"'?' (one of {', '.join(S3TABLES_URI_OPTIONS)})"
            )
        given = uri_options(query, S3TABLES_URI_OPTIONS, uri)
        connection, _ = service_connection(
            "s3tables",
            storage_options,
            endpoint=given.get("endpoint"),
            region=given.get("region"),
            profile=given.get("profile"),
        )
        # the bucket lives in the ARN's region: the S3 region applies to the files only
        connection["region"] = connection["region"] or found.group("region")
        return cls(table_bucket_arn=arn, **connection)


def check_name(kind: str, value: str) -> str:
    """Refuse a name S3 Tables would refuse, saying its rule (the service's own message is
    terser, and moto checks nothing)."""
    if not _NAME.match(value) or value.startswith("aws"):
        raise ValidationError(f"S3 Tables {kind} name {value!r} is not valid: it must be {_NAME_RULE}")
    return value


# -- calls ---------------------------------------------------------------------------------------
_Answer = AwsAnswer


class _S3Tables(AwsService):
    """S3 Tables calls on one table bucket through the runtime's shared client."""

    def __init__(self, options: S3TablesOptions, runtime: Runtime) -> None:
        super().__init__(
            runtime,
            options.client_options(),
            service="s3tables",
            label="S3 Tables",
            fixed={"tableBucketARN": options.table_bucket_arn},
            invalid=frozenset({"BadRequestException", "ValidationException"}),
        )
        self.options = options
        #: the storage the service assigned each table seen, by (namespace, name)
        self.assigned: dict[tuple[str, str], str] = {}

    async def pages(self, method: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        """Every entry of a paged listing (``continuationToken``). A service that hands back a
        token it was given before, or the same page again for a new token, raises
        ListingStalledError instead of paging forever."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        sent: set[str] = set()
        previous: list[dict[str, Any]] = []
        while True:
            page = await self.read(method, **kwargs, **({"continuationToken": token} if token else {}))
            entries: list[dict[str, Any]] = page.get(key, [])
            if token and entries and entries == previous:
                raise ListingStalledError(
                    f"{self._listing(method, kwargs)}: the service answered continuation token "
                    f"{token!r} with the page it had already sent, so the listing would never end",
                    location=self.options.table_bucket_arn,
                )
            out.extend(entries)
            previous = entries
            if token:
                sent.add(token)
            token = page.get("continuationToken")
            if not token:
                return out
            if token in sent:
                raise ListingStalledError(
                    f"{self._listing(method, kwargs)}: the service repeats its continuation token "
                    f"{token!r}, so the listing would never end",
                    location=self.options.table_bucket_arn,
                )

    def _listing(self, method: str, kwargs: Mapping[str, Any]) -> str:
        """The listing an error names: the call, its table bucket and its arguments."""
        given = "".join(f", {name} {value!r}" for name, value in kwargs.items())
        return f"{self.label} {method} of table bucket {self.options.bucket!r}{given}"

    async def metadata_location(self, namespace: str, name: str) -> dict[str, Any] | None:
        """``{versionToken, metadataLocation, warehouseLocation}``; None for no such table."""
        try:
            found = await self.read("get_table_metadata_location", namespace=namespace, name=name)
        except _Answer as answer:
            if answer.code == "NotFoundException":
                self.assigned.pop((namespace, name), None)
                return None
            raise answer.fallback(f"s3tables table {namespace}.{name}") from None
        if found.get("warehouseLocation"):
            self.assigned[(namespace, name)] = str(found["warehouseLocation"])
        return found

    def namespace_missing(self, namespace: str) -> NamespaceNotFoundError:
        return NamespaceNotFoundError(
            f"s3tables namespace {namespace!r} does not exist in table bucket {self.options.bucket!r}"
        )


# -- the pointer ---------------------------------------------------------------------------------
class S3TablesPointer(MetadataPointer):
    """One S3 Tables table's metadata location; the token is its version token.

    ``reserved`` holds the version tokens of tables this catalog reserved with CreateTable
    and has not yet given a metadata file (shared with the catalog, keyed by name).
    """

    def __init__(
        self, service: _S3Tables, namespace: str, table: str, reserved: dict[tuple[str, str], str]
    ) -> None:
        self.service = service
        self.namespace = namespace
        self.table = table
        self.reserved = reserved
        self.name = f"s3tables table {namespace}.{table}"

    def _where(self) -> dict[str, str]:
        return {"namespace": self.namespace, "name": self.table}

    async def read(self) -> Pointer | None:
        found = await self.service.metadata_location(self.namespace, self.table)
        if found is None:
            return None
        location = found.get("metadataLocation")
        if not location:
            raise TableNotFoundError(
                f"{self.name} exists in S3 Tables without metadata: it is being created, or its "
                "creation failed (drop it to reuse the name)"
            )
        return Pointer(str(location), found.get("versionToken"))

    async def create(self, metadata_location: str, metadata: TableMetadata) -> Pointer:
        """Give the table reserved by CreateTable its first metadata file."""
        key = (self.namespace, self.table)
        token = self.reserved.pop(key, None)
        if token is None:
            raise UnsupportedError(
                f"{self.name}: S3 Tables tables are made with create_table, which has the service "
                "assign their storage; an existing metadata file cannot be adopted"
            )
        try:
            answer = await self.service.write(
                "update_table_metadata_location",
                **self._where(),
                versionToken=token,
                metadataLocation=metadata_location,
            )
        except _Answer as refused:
            if refused.code == "ConflictException":  # another writer set it: not ours to undo
                raise TableAlreadyExistsError(
                    f"{self.name} was given metadata by another writer while being created"
                ) from None
            if refused.code == "NotFoundException":
                raise TableNotFoundError(f"{self.name} was dropped while being created") from None
            self.reserved[key] = token  # refused for good: the reservation may be undone
            raise refused.fallback(self.name) from None
        except WriteOutcomeUnknownError as exc:
            return await self._settle_create(metadata_location, token, exc)
        return Pointer(metadata_location, answer.get("versionToken"))

    async def _settle_create(self, metadata_location: str, token: str, exc: StoreError) -> Pointer:
        """The first UpdateTableMetadataLocation got no answer: ours if the table points at our
        file; still without metadata, the request may yet be applied, so unknown."""
        try:
            found = await self.service.metadata_location(self.namespace, self.table)
        except StoreError as again:
            raise CommitStateUnknownError(
                f"{self.name}: no answer to the first UpdateTableMetadataLocation ({exc}) and it "
                f"cannot be read back ({again})"
            ) from exc
        if found is None:
            raise TableNotFoundError(f"{self.name} was dropped while being created") from exc
        if found.get("metadataLocation") == metadata_location:
            return Pointer(metadata_location, found.get("versionToken"))
        if found.get("metadataLocation"):
            raise TableAlreadyExistsError(
                f"{self.name} was given metadata by another writer while being created"
            ) from exc
        raise CommitStateUnknownError(
            f"{self.name}: no answer to the first UpdateTableMetadataLocation ({exc}); the table "
            f"has no metadata yet but the request may still be applied (if it stays so, drop it)"
        ) from exc

    async def swap(self, expected: Pointer, metadata_location: str, metadata: TableMetadata) -> Pointer:
        token = expected.token
        if token is None:  # no token kept from the load: read it, refusing a moved pointer
            current = await self.read()
            if current is None:
                raise TableNotFoundError(f"{self.name} no longer exists")
            if current.metadata_location != expected.metadata_location:
                raise CommitFailedError(
                    f"{self.name} moved on from {expected.metadata_location} to {current.metadata_location}"
                )
            token = current.token
        try:
            answer = await self.service.write(
                "update_table_metadata_location",
                **self._where(),
                versionToken=token,
                metadataLocation=metadata_location,
            )
        except _Answer as refused:
            if refused.code == "ConflictException":
                raise CommitFailedError(
                    f"{self.name} moved on from {expected.metadata_location} (S3 Tables refused "
                    f"its version token: {refused.message})"
                ) from None
            if refused.code == "NotFoundException":
                raise TableNotFoundError(f"{self.name} no longer exists") from None
            raise refused.fallback(self.name) from None
        except WriteOutcomeUnknownError as exc:
            raise CommitStateUnknownError(
                f"{self.name}: no answer to UpdateTableMetadataLocation ({exc})"
            ) from exc
        return Pointer(metadata_location, answer.get("versionToken"))

    async def delete(self) -> None:
        """DeleteTable: S3 Tables deletes the table's files with it."""
        try:
            await self.service.write("delete_table", **self._where())
        except _Answer as refused:
            if refused.code == "NotFoundException":
                raise TableNotFoundError(f"{self.name} does not exist") from None
            raise refused.fallback(self.name) from None
        except WriteOutcomeUnknownError as exc:
            if await self.service.metadata_location(self.namespace, self.table) is not None:
                raise StoreError(
                    f"{self.name}: no answer to DeleteTable and the table is still there"
                ) from exc


# -- the catalog ---------------------------------------------------------------------------------
class S3TablesCatalog(PointerCatalog):
    """The tables of one S3 Tables table bucket:
    ``aioiceberg.connect("s3tables://arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME")``.

    Namespaces are one level deep and carry no properties; the service places each table's
    files, so there is no warehouse.
    """

    kind = "s3tables"

    def __init__(
        self,
        options: S3TablesOptions,
        *,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        # where tables go is the service's to say: the root is the bucket's URI
        super().__init__(
            f"s3tables://{options.table_bucket_arn}",
            files="file:///",
            storage_options=storage_options,
            runtime=runtime,
        )
        self.options = options
        self.service = _S3Tables(options, self.runtime)
        self._reserved: dict[tuple[str, str], str] = {}

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        warehouse: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> S3TablesCatalog:
        options = S3TablesOptions.from_uri(uri, storage_options)
        if warehouse is not None:
            raise ValidationError(
                f"warehouse={warehouse!r}: S3 Tables places every table's files itself; "
                f"connect to {uri!r} without a warehouse"
            )
        return cls(options, storage_options=storage_options, runtime=runtime)

    async def _close_clients(self) -> None:
        await self.service.release()

    # -- locations -----------------------------------------------------------------------------
    def root_locations(self) -> tuple[str, ...]:
        """The storage S3 Tables assigned the tables this catalog has seen: the service, not
        a client, decides where a table's files go."""
        return tuple(sorted(set(self.service.assigned.values())))

    @property
    def roots(self) -> Roots:
        """Each root is one table's own storage, so a table's location (equal to its root)
        lies inside them."""
        return Roots(self.root_locations(), tables_at_roots=True)

    async def check_new_table(self, identifier: str | Sequence[str], location: str) -> str:
        """Only the storage the service has just assigned the table."""
        key = self._split(identifier)
        assigned = self.service.assigned.get(key)
        normal = normalized_location(location, f"the location of s3tables table {'.'.join(key)}")
        if assigned is None or normalized_location(assigned) != normal:
            raise LocationNotAllowedError(
                f"s3tables table {'.'.join(key)} cannot live at {location!r}: S3 Tables places every "
                "table's files in the storage it assigns",
                location=location,
            )
        return normal

    async def _check_move(
        self, identifier: tuple[str, ...] | None, table_location: str, new_location: str
    ) -> None:
        raise LocationNotAllowedError(
            f"the table at {table_location} cannot move to {new_location!r}: S3 Tables keeps every "
            "table's files in the storage it assigned",
            location=new_location,
        )

    # -- names ---------------------------------------------------------------------------------
    @staticmethod
    def _namespace(namespace: str | Sequence[str]) -> str:
        parts = identifier_parts(namespace, "namespace")
        if len(parts) != 1:
            raise ValidationError(
                f"namespace {identifier_text(namespace)!r}: S3 Tables namespaces are one level deep"
            )
        return check_name("namespace", parts[0])

    def _split(self, identifier: str | Sequence[str]) -> tuple[str, str]:
        namespace, name = split_identifier(identifier)
        if len(namespace) != 1:
            raise ValidationError(
                f"table identifier {identifier_text(identifier)!r}: S3 Tables tables are 'namespace.table'"
            )
        return check_name("namespace", namespace[0]), check_name("table", name)

    def pointer(self, namespace: tuple[str, ...], name: str) -> S3TablesPointer:
        return S3TablesPointer(self.service, *self._split((*namespace, name)), self._reserved)

    async def new_table_location(self, namespace: tuple[str, ...], name: str) -> str:
        """Reserve the name with CreateTable; the service answers with the table's storage."""
        ns, table = self._split((*namespace, name))
        subject = f"s3tables table {ns}.{table}"
        try:
            created = await self.service.write("create_table", namespace=ns, name=table, format="ICEBERG")
        except _Answer as refused:
            if refused.code == "ConflictException":
                raise TableAlreadyExistsError(f"{subject} already exists") from None
            if refused.code == "NotFoundException":
                if "bucket" in refused.message.lower():
                    raise StoreError(
                        f"{subject}: {refused.message} ({self.options.table_bucket_arn})"
                    ) from None
                raise self.service.namespace_missing(ns) from None
            raise refused.fallback(subject) from None
        except WriteOutcomeUnknownError as exc:
            raise CommitStateUnknownError(
                f"{subject}: no answer to CreateTable ({exc}); the table may exist without metadata "
                "(drop it, or create it again)"
            ) from exc
        self._reserved[(ns, table)] = str(created["versionToken"])
        try:
            found = await self.service.metadata_location(ns, table)
            if found is None or not found.get("warehouseLocation"):
                raise StoreError(f"{subject}: S3 Tables assigned the new table no storage location")
        except BaseException:  # the caller undoes only what follows: give the name back here
            with contextlib.suppress(StoreError):
                await self.abandon_new_table(namespace, name)
            raise
        return str(found["warehouseLocation"])

    async def abandon_new_table(self, namespace: tuple[str, ...], name: str) -> None:
        """Delete the reservation, with its version token: never a table another writer has
        since given metadata."""
        ns, table = self._split((*namespace, name))
        token = self._reserved.pop((ns, table), None)
        self.service.assigned.pop((ns, table), None)
        if token is None:
            return
        try:
            await self.service.write("delete_table", namespace=ns, name=table, versionToken=token)
        except _Answer:
            return

    # -- tables --------------------------------------------------------------------------------
    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        """False also for a table still without metadata (being created)."""
        try:
            return await super().table_exists(identifier)
        except TableNotFoundError:
            return False

    async def register_table(self, identifier: str | Sequence[str], metadata_location: str) -> Table:
        """S3 Tables has no register call: a table's metadata must lie in the storage the
        service assigns when creating it, and an existing table's files name their own place."""
        self._split(identifier)
        raise UnsupportedError(
            f"register_table({identifier_text(identifier)!r}, {metadata_location!r}): S3 Tables cannot "
            "adopt an existing metadata file (it accepts only files inside the storage it assigns a "
            "new table); create the table and append the data instead"
        )

    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """DeleteTable, with or without ``purge``: S3 Tables deletes the table's files with it,
        so no metadata file is kept to register back (None)."""
        ns, table = self._split(identifier)
        await self.pointer((ns,), table).delete()
        self._reserved.pop((ns, table), None)
        self.service.assigned.pop((ns, table), None)
        return None

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        ns = self._namespace(namespace)
        try:
            tables = await self.service.pages("list_tables", "tables", namespace=ns)
        except _Answer as refused:
            if refused.code == "NotFoundException":
                raise self.service.namespace_missing(ns) from None
            raise refused.fallback(f"s3tables namespace {ns!r}") from None
        return sorted(f"{ns}.{t['name']}" for t in tables)

    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table:
        """RenameTable: the table keeps its files, its storage and its version."""
        source_ns, source = self._split(from_identifier)
        target_ns, target = self._split(to_identifier)
        subject = f"s3tables table {source_ns}.{source}"
        kwargs: dict[str, str] = {}
        if target_ns != source_ns:
            kwargs["newNamespaceName"] = target_ns
        if target != source:
            kwargs["newName"] = target
        if not kwargs:
            raise ValidationError(f"rename of {subject} to itself")
        try:
            await self.service.write("rename_table", namespace=source_ns, name=source, **kwargs)
        except _Answer as refused:
            if refused.code == "ConflictException":
                raise TableAlreadyExistsError(f"s3tables table {target_ns}.{target} already exists") from None
            if refused.code == "NotFoundException":
                if not await self.namespace_exists(target_ns):
                    raise self.service.namespace_missing(target_ns) from None
                raise TableNotFoundError(f"{subject} does not exist") from None
            raise refused.fallback(subject) from None
        except WriteOutcomeUnknownError as exc:
            if await self.service.metadata_location(target_ns, target) is None:
                raise StoreError(f"{subject}: no answer to RenameTable, and it has not been renamed") from exc
        return await self.load_table((target_ns, target))

    # -- namespaces ----------------------------------------------------------------------------
    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = self._namespace(namespace)
        if properties:
            raise UnsupportedError(
                f"s3tables namespace {ns!r}: S3 Tables namespaces carry no properties "
                f"(given {sorted(properties)})"
            )
        try:
            await self.service.write("create_namespace", namespace=[ns])
        except _Answer as refused:
            if refused.code == "ConflictException":
                raise NamespaceAlreadyExistsError(f"s3tables namespace {ns!r} already exists") from None
            raise refused.fallback(f"s3tables namespace {ns!r}") from None
        except WriteOutcomeUnknownError as exc:
            if not await self.namespace_exists(ns):
                raise StoreError(f"s3tables namespace {ns!r}: no answer to CreateNamespace") from exc

    async def _get_namespace(self, ns: str) -> dict[str, Any]:
        try:
            return await self.service.read("get_namespace", namespace=ns)
        except _Answer as refused:
            if refused.code == "NotFoundException":
                raise self.service.namespace_missing(ns) from None
            raise refused.fallback(f"s3tables namespace {ns!r}") from None

    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        try:
            await self._get_namespace(self._namespace(namespace))
        except NamespaceNotFoundError:
            return False
        return True

    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        """Every namespace of the bucket; none lies below another (one level)."""
        if parent:
            await self._get_namespace(self._namespace(parent))
            return []
        try:
            found = await self.service.pages("list_namespaces", "namespaces")
        except _Answer as refused:
            raise refused.fallback(f"table bucket {self.options.bucket!r}") from None
        return sorted(".".join(n["namespace"]) for n in found)

    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        """Always empty: S3 Tables namespaces carry no properties."""
        await self._get_namespace(self._namespace(namespace))
        return {}

    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Refused when there is anything to change: S3 Tables namespaces carry no properties."""
        ns = self._namespace(namespace)
        if removals or updates:
            raise UnsupportedError(
                f"s3tables namespace {ns!r}: S3 Tables namespaces carry no properties to update"
            )
        return await self.load_namespace_properties(ns)

    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Refused while the namespace holds any table (S3 Tables refuses too; moto does not)."""
        ns = self._namespace(namespace)
        try:
            page = await self.service.read("list_tables", namespace=ns, maxTables=5)
        except _Answer as refused:
            if refused.code == "NotFoundException":
                raise self.service.namespace_missing(ns) from None
            raise refused.fallback(f"s3tables namespace {ns!r}") from None
        tables = page.get("tables", [])
        if tables:
            names = ", ".join(f"{ns}.{t['name']}" for t in tables)
            raise NamespaceNotEmptyError(f"s3tables namespace {ns!r} is not empty: it holds {names}")
        try:
            await self.service.write("delete_namespace", namespace=ns)
        except _Answer as refused:
            if refused.code == "NotFoundException":
                raise self.service.namespace_missing(ns) from None
            if refused.code == "ConflictException":
                raise NamespaceNotEmptyError(
                    f"s3tables namespace {ns!r} is not empty: {refused.message}"
                ) from None
            raise refused.fallback(f"s3tables namespace {ns!r}") from None
        except WriteOutcomeUnknownError as exc:
            if await self.namespace_exists(ns):
                raise StoreError(f"s3tables namespace {ns!r}: no answer to DeleteNamespace") from exc
