"""``POST /v1/namespaces/{ns}/tables/{t}``: a client's requirements and updates, committed
through the table's own commit point.

The server holds no state of its own: every commit goes through ``CommitProtocol.commit_table``
(the same seam our writers use), so the server, other servers and direct writers of the same
table race safely. Tasks of this server take turns per table; a version taken by a writer
outside it is reloaded and the request retried while its requirements still hold. A failed
requirement is 409 CommitFailedException, which clients answer by rebasing.
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from typing import Any

import anyio
import anyio.to_thread
from aiohttp import web

from aioiceberg.catalogs.base import Catalog
from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.protocols.base import TableState, metadata_dir
from aioiceberg.commit.requirements import AssertCreate, TableRequirement
from aioiceberg.commit.rest_json import requirement_from_json, update_from_json
from aioiceberg.commit.updates import (
    AddSchema,
    AssignUUID,
    SetCurrentSchema,
    SetLocation,
    TableUpdate,
    UpgradeFormatVersion,
)
from aioiceberg.errors import (
    CommitConflictError,
    CommitFailedError,
    InvalidMetadataError,
    LocationNotAllowedError,
    ReadOnlyTableError,
    StoreError,
    TableAlreadyExistsError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.server.error_model import bad_request
from aioiceberg.server.request_parsing import json_body, table_identifier_of
from aioiceberg.server.state import served
from aioiceberg.server.tables import require_namespace, table_response, where_new_table_goes
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import serialize_table_metadata
from aioiceberg.spec.partitioning import PARTITION_DATA_ID_START
from aioiceberg.table import Table

__all__ = ["MAX_ATTEMPTS", "commit_routes"]

log = logging.getLogger("aioiceberg.server")

#: attempts at one request when writers outside this server keep taking the version
MAX_ATTEMPTS = 8


def parse_changes(body: dict[str, Any]) -> tuple[list[TableRequirement], list[TableUpdate]]:
    """The request's requirements and updates; anything we cannot read or apply is a 400."""
    out_requirements: list[TableRequirement] = []
    out_updates: list[TableUpdate] = []
    for key, parse, out in (
        ("requirements", requirement_from_json, out_requirements),
        ("updates", update_from_json, out_updates),
    ):
        items = body.get(key, [])
        if not isinstance(items, list):
            raise bad_request(f"commit: {key!r} must be a list")
        for i, item in enumerate(items):
            try:
                out.append(parse(item))  # type: ignore[arg-type]
            except (ValidationError, InvalidMetadataError, UnsupportedError) as exc:
                raise bad_request(f"commit: {key}[{i}]: {exc}") from None
    return out_requirements, out_updates


async def commit_with_retries(
    table: Table, requirements: list[TableRequirement], updates: list[TableUpdate]
) -> TableState:
    """Commit on the latest version, reloading after each version another writer took.

    The requirements are judged on the version this request loaded; when they fail there,
    they are judged again on the latest one, so a writer outside the server that moved the
    table on between the load and the commit costs a reload, not a client round trip.
    """
    protocol = table.protocol
    if protocol is None:
        raise ReadOnlyTableError(table.read_only_reason or f"{table.location} is open read-only")
    state = TableState(table.metadata, table.metadata_location, table.version)
    turn = protocol.io.runtime.commit_turn(table.location)
    waited = turn.locked()
    async with turn:
        if waited:  # others of this server committed while we waited: start from the latest
            state = await protocol.load(table.location, since=state)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await protocol.commit_table(state, requirements, updates)
            except CommitFailedError:
                if attempt == MAX_ATTEMPTS:
                    raise
                log.debug("%s: a writer outside the server took the version; retrying", table.location)
                await anyio.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))
                state = await protocol.load(table.location, since=state)
            except (CommitConflictError, ValidationError) as exc:
                latest = await protocol.load(table.location, since=state)
                if latest.metadata_location != state.metadata_location and attempt < MAX_ATTEMPTS:
                    state = latest
                    continue
                if (
                    isinstance(exc, ValidationError)
                    and not isinstance(exc, LocationNotAllowedError)
                    and attempt > 1
                ):
                    # the updates held on the version the client saw, not on the one that won
                    raise CommitConflictError(f"the table changed under the request: {exc}") from exc
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _empty_metadata() -> TableMetadata:
    """What a staged create's updates build on: no schema, spec, order or uuid yet."""
    return TableMetadata(
        format_version=1,
        table_uuid=None,
        location="",
        last_sequence_number=0,
        last_updated_ms=0,
        last_column_id=0,
        schemas=(),
        current_schema_id=-1,
        partition_specs=(),
        default_spec_id=-1,
        last_partition_id=PARTITION_DATA_ID_START - 1,
    )


def _schema_first(updates: list[TableUpdate]) -> list[TableUpdate]:
    """A new table's updates with the format version, then the schema, before the rest.

    Specs bind to the current schema, but DuckDB sets the current schema last; on an empty
    table nothing else depends on the order, so this changes only what can be checked when.
    """

    def rank(update: TableUpdate) -> int:
        if isinstance(update, AssignUUID | UpgradeFormatVersion):
            return 0
        return 1 if isinstance(update, AddSchema | SetCurrentSchema) else 2

    return sorted(updates, key=rank)  # stable: each group keeps the client's order


async def create_by_commit(
    catalog: Catalog,
    identifier: tuple[str, ...],
    requirements: list[TableRequirement],
    updates: list[TableUpdate],
) -> Table:
    """A staged create's commit (``assert-create``): the table's first version is the updates
    applied to nothing, registered atomically (a concurrent create of the name wins or loses whole)."""
    if any(not isinstance(r, AssertCreate) for r in requirements):
        raise bad_request("commit: assert-create cannot be combined with requirements on an existing table")
    await require_namespace(catalog, identifier[:-1])
    location = where_new_table_goes(catalog, identifier, "creating a table by commit (assert-create)")
    try:
        metadata = apply_updates(_empty_metadata(), _schema_first(updates))
    except ValidationError as exc:
        raise bad_request(f"commit: the updates do not make a table: {exc}") from None
    if metadata.location.rstrip("/") != location:
        raise bad_request(
            f"commit: this catalog puts {'.'.join(identifier)} at {location}, not {metadata.location!r}"
        )
    if await catalog.table_exists(identifier):
        raise CommitConflictError(f"requirement failed: table {'.'.join(identifier)} already exists")
    await catalog.check_new_table(identifier, location)  # before the staged file is written
    io = catalog.io_for(location)
    staged = f"{metadata_dir(location)}/00000-{uuid.uuid4()}.metadata.json"
    await io.write_if_absent(staged, await anyio.to_thread.run_sync(serialize_table_metadata, metadata))
    try:
        table = await catalog.register_table(identifier, staged)
    except TableAlreadyExistsError as exc:
        with contextlib.suppress(StoreError):
            await io.delete(staged)
        raise CommitConflictError(f"requirement failed: {exc}") from exc
    except ValidationError:  # refused before the catalog registered anything
        with contextlib.suppress(StoreError):
            await io.delete(staged)
        raise
    if table.metadata_location != staged:  # the catalog committed a copy of its own
        with contextlib.suppress(StoreError):
            await io.delete(staged)
    return table


async def commit_table(request: web.Request) -> web.Response:
    identifier = table_identifier_of(request)
    body = await json_body(request)
    requirements, updates = await anyio.to_thread.run_sync(parse_changes, body)
    catalog = served(request).catalog
    for update in updates:  # also checked where the table's protocol commits; refused here first
        if isinstance(update, SetLocation):
            catalog.roots.require(update.location, f"set-location of {'.'.join(identifier)}")
    if any(isinstance(r, AssertCreate) for r in requirements):
        table = await create_by_commit(catalog, identifier, requirements, updates)
        return await table_response(table.metadata, table.metadata_location, None)
    table = await catalog.load_table(identifier)
    state = await commit_with_retries(table, requirements, updates)
    return await table_response(state.metadata, state.metadata_location, None)


async def commit_transaction(request: web.Request) -> web.Response:
    raise UnsupportedError(
        "multi-table transactions are not supported: each table commits through its own commit "
        "point, so changes to several tables cannot land atomically; commit each table on its own"
    )


def commit_routes() -> list[web.RouteDef]:
    return [
        web.post("/v1/namespaces/{namespace}/tables/{table}", commit_table),
        web.post("/v1/transactions/commit", commit_transaction),
    ]
