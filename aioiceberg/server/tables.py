"""Table routes other than commits: list, create (and stage), load, exists, drop, rename, register."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
from aiohttp import web

from aioiceberg.catalogs.base import Catalog
from aioiceberg.errors import (
    InvalidMetadataError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.server.error_model import RestError, bad_request
from aioiceberg.server.request_parsing import (
    identifier_from_json,
    json_body,
    namespace_of,
    optional_field,
    page,
    query_flag,
    required_field,
    string_map,
    table_identifier_of,
)
from aioiceberg.server.state import served
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import new_table_metadata, table_metadata_to_dict
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema_json import partition_spec_from_json, schema_from_json, sort_order_from_json
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.view import ViewCatalog

__all__ = ["require_namespace", "table_response", "table_routes", "where_new_table_goes"]


async def table_response(
    metadata: TableMetadata, metadata_location: str | None, config: dict[str, str] | None
) -> web.Response:
    """``{metadata-location, metadata[, config]}``, encoded off the event loop (metadata grows
    with every snapshot)."""

    def encode() -> bytes:
        out: dict[str, Any] = {"metadata-location": metadata_location}
        out["metadata"] = table_metadata_to_dict(metadata)
        if config is not None:
            out["config"] = config
        return json.dumps(out, ensure_ascii=False).encode()

    body = await anyio.to_thread.run_sync(encode)
    return web.Response(body=body, content_type="application/json")


async def require_namespace(catalog: Catalog, namespace: Sequence[str]) -> None:
    if not await catalog.namespace_exists(namespace):
        raise NamespaceNotFoundError(f"namespace {'.'.join(namespace)!r} does not exist")


def where_new_table_goes(catalog: Catalog, identifier: tuple[str, ...], why: str) -> str:
    """The location the catalog gives a new table now, before creating it."""
    try:
        return catalog.table_location(identifier).rstrip("/")
    except UnsupportedError as exc:
        raise UnsupportedError(f"{why} needs the table's location before it exists: {exc}") from exc


async def list_tables(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    catalog = served(request).catalog
    await require_namespace(catalog, namespace)
    prefix = ".".join(namespace) + "."
    names = [
        n[len(prefix) :] if n.startswith(prefix) else n.rsplit(".", 1)[-1]
        for n in await catalog.list_tables(namespace)
    ]
    items, token = page(request, [{"namespace": list(namespace), "name": n} for n in names])
    return web.json_response({"identifiers": items, "next-page-token": token})


def _spec_parts(body: dict[str, Any]) -> tuple[Any, PartitionSpec, SortOrder]:
    what = "create table"
    try:
        schema = schema_from_json(required_field(body, "schema", dict, what))
        spec_json = optional_field(body, "partition-spec", dict, what)
        spec = partition_spec_from_json(spec_json) if spec_json is not None else PartitionSpec(0, ())
        order_json = optional_field(body, "write-order", dict, what)
        order = sort_order_from_json(order_json) if order_json is not None else UNSORTED
    except (ValidationError, InvalidMetadataError, UnsupportedError) as exc:
        raise bad_request(f"{what}: {exc}") from None
    return schema, spec, order


async def create_table(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    body = await json_body(request)
    what = "create table"
    name = required_field(body, "name", str, what)
    if not name:
        raise bad_request(f"{what}: the name is empty")
    identifier = (*namespace, name)
    schema, spec, order = _spec_parts(body)
    properties = string_map(body, "properties", what)
    try:
        format_version = int(properties.pop("format-version", "2"))
    except ValueError:
        raise bad_request(f"{what}: format-version must be a number") from None
    location = optional_field(body, "location", str, what)
    stage = bool(optional_field(body, "stage-create", bool, what))
    server = served(request)
    catalog = server.catalog
    await require_namespace(catalog, namespace)
    if location is not None:
        expected = where_new_table_goes(catalog, identifier, "a create request naming a location")
        if location.rstrip("/") != expected:
            raise bad_request(
                f"{what}: this catalog puts {'.'.join(identifier)} at {expected}, not {location}; "
                "omit 'location'"
            )
    if stage:
        # Nothing is written: the commit carrying assert-create creates the table.
        if isinstance(catalog, ViewCatalog) and await catalog.view_exists(identifier):
            raise TableAlreadyExistsError(
                f"cannot create table {'.'.join(identifier)}: a view of that name exists"
            )
        where = where_new_table_goes(catalog, identifier, "stage-create")
        if await catalog.table_exists(identifier):
            raise TableAlreadyExistsError(f"table {'.'.join(identifier)} already exists")
        await catalog.check_new_table(identifier, where)
        metadata = new_table_metadata(schema, spec, order, where, properties, format_version)
        return await table_response(metadata, None, server.table_config)
    table = await catalog.create_table(identifier, schema, spec, properties, format_version, order)
    return await table_response(table.metadata, table.metadata_location, server.table_config)


async def load_table(request: web.Request) -> web.Response:
    server = served(request)
    table = await server.catalog.load_table(table_identifier_of(request))
    return await table_response(table.metadata, table.metadata_location, server.table_config)


async def table_exists(request: web.Request) -> web.Response:
    found = await served(request).catalog.table_exists(table_identifier_of(request))
    return web.Response(status=204 if found else 404)


async def drop_table(request: web.Request) -> web.Response:
    purge = query_flag(request, "purgeRequested")
    await served(request).catalog.drop_table(table_identifier_of(request), purge=purge)
    return web.Response(status=204)


async def rename_table(request: web.Request) -> web.Response:
    body = await json_body(request)
    source = identifier_from_json(body.get("source"), "rename: source")
    destination = identifier_from_json(body.get("destination"), "rename: destination")
    catalog = served(request).catalog
    await require_namespace(catalog, destination[:-1])
    await catalog.rename_table(source, destination)
    return web.Response(status=204)


async def register_table(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    body = await json_body(request)
    what = "register table"
    identifier = (*namespace, required_field(body, "name", str, what))
    metadata_location = required_field(body, "metadata-location", str, what)
    server = served(request)
    catalog = server.catalog
    await require_namespace(catalog, namespace)
    if optional_field(body, "overwrite", bool, what) and await catalog.table_exists(identifier):
        raise RestError(
            501,
            "UnsupportedOperationException",
            f"{what}: overwrite=true over the existing table {'.'.join(identifier)} is not supported; "
            "drop it first",
        )
    table = await catalog.register_table(identifier, metadata_location)
    return await table_response(table.metadata, table.metadata_location, server.table_config)


def table_routes() -> list[web.RouteDef]:
    tables = "/v1/namespaces/{namespace}/tables"
    table = tables + "/{table}"
    return [
        web.get(tables, list_tables, allow_head=False),
        web.post(tables, create_table),
        web.get(table, load_table, allow_head=False),
        web.head(table, table_exists),
        web.delete(table, drop_table),
        web.post("/v1/tables/rename", rename_table),
        web.post("/v1/namespaces/{namespace}/register", register_table),
    ]
