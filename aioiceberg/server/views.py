"""View routes: list, create, load, exists, replace (commit), drop, rename.

Served for catalogs that keep views (:class:`ViewCatalog`); others answer 501, and
``/v1/config`` leaves the view endpoints out so clients do not call them. A view's location
is confined like a table's, and every change is checked by the view builder before the
catalog writes anything.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from aioiceberg.catalogs.base import identifier_parts
from aioiceberg.errors import CommitFailedError, InvalidMetadataError, UnsupportedError, ValidationError
from aioiceberg.server.error_model import RestError, bad_request
from aioiceberg.server.request_parsing import (
    identifier_from_json,
    json_body,
    namespace_of,
    optional_field,
    page,
    required_field,
    string_map,
)
from aioiceberg.server.state import served
from aioiceberg.server.tables import require_namespace
from aioiceberg.spec.schema_json import schema_from_json
from aioiceberg.spec.view_metadata import view_metadata_to_dict, view_version_from_json
from aioiceberg.spec.view_updates import ViewChanges
from aioiceberg.view import View, ViewCatalog

__all__ = ["VIEW_ENDPOINTS", "view_routes"]

#: advertised in ``/v1/config`` when the catalog keeps views, spelled as the REST spec does
VIEW_ENDPOINTS = (
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
)

#: updates in one commit: a replace sends four or five; far more is not a client's commit
_MAX_UPDATES = 1000


def _views(request: web.Request) -> ViewCatalog:
    catalog = served(request).catalog
    if not isinstance(catalog, ViewCatalog):
        raise RestError(
            501,
            "UnsupportedOperationException",
            f"this server's {type(catalog).__name__} does not keep views",
        )
    return catalog


def _view_identifier(request: web.Request) -> tuple[str, ...]:
    try:
        name = identifier_parts([request.match_info["view"]], "view name")[0]
    except ValidationError as exc:
        raise bad_request(str(exc)) from None
    return (*namespace_of(request), name)


def _view_response(view: View, config: dict[str, str]) -> web.Response:
    body: dict[str, Any] = {
        "metadata-location": view.metadata_location,
        "metadata": view_metadata_to_dict(view.metadata),
        "config": config,
    }
    return web.json_response(body)


async def list_views(request: web.Request) -> web.Response:
    catalog = _views(request)
    namespace = namespace_of(request)
    prefix = ".".join(namespace) + "."
    names = [n[len(prefix) :] if n.startswith(prefix) else n for n in await catalog.list_views(namespace)]
    items, token = page(request, [{"namespace": list(namespace), "name": n} for n in names])
    return web.json_response({"identifiers": items, "next-page-token": token})


async def create_view(request: web.Request) -> web.Response:
    catalog = _views(request)
    namespace = namespace_of(request)
    body = await json_body(request)
    what = "create view"
    name = required_field(body, "name", str, what)
    try:
        name = identifier_parts([name], f"{what}: name")[0]
        schema = schema_from_json(required_field(body, "schema", dict, what))
        version = view_version_from_json(required_field(body, "view-version", dict, what))
    except (ValidationError, InvalidMetadataError, UnsupportedError) as exc:
        raise bad_request(f"{what}: {exc}") from None
    properties = string_map(body, "properties", what)
    location = optional_field(body, "location", str, what)
    await require_namespace(served(request).catalog, namespace)
    view = await catalog.create_view((*namespace, name), schema, version, properties, location or None)
    return _view_response(view, served(request).table_config)


async def load_view(request: web.Request) -> web.Response:
    view = await _views(request).load_view(_view_identifier(request))
    return _view_response(view, served(request).table_config)


async def view_exists(request: web.Request) -> web.Response:
    found = await _views(request).view_exists(_view_identifier(request))
    return web.Response(status=204 if found else 404)


async def drop_view(request: web.Request) -> web.Response:
    await _views(request).drop_view(_view_identifier(request))
    return web.Response(status=204)


def _check_requirements(view: View, requirements: list[Any]) -> None:
    for requirement in requirements:
        if not isinstance(requirement, dict):
            raise bad_request("commit view: each requirement must be an object")
        kind = requirement.get("type")
        if kind != "assert-view-uuid":
            raise bad_request(f"commit view: unknown requirement {kind!r} (views take assert-view-uuid)")
        expected = requirement.get("uuid")
        if not isinstance(expected, str):
            raise bad_request("commit view: assert-view-uuid needs 'uuid' (a string)")
        if expected != view.metadata.view_uuid:
            raise CommitFailedError(
                f"view {view.identifier} has uuid {view.metadata.view_uuid}, not {expected}: "
                "it was dropped and created again"
            )


async def commit_view(request: web.Request) -> web.Response:
    catalog = _views(request)
    identifier = _view_identifier(request)
    body = await json_body(request)
    what = "commit view"
    if body.get("identifier") is not None and identifier_from_json(body["identifier"], what) != identifier:
        raise bad_request(f"{what}: the body's identifier is not the view of the path")
    requirements = optional_field(body, "requirements", list, what) or []
    updates = required_field(body, "updates", list, what)
    if len(updates) + len(requirements) > _MAX_UPDATES:
        raise bad_request(f"{what}: more than {_MAX_UPDATES} updates and requirements")
    view = await catalog.load_view(identifier)
    _check_requirements(view, requirements)
    changes = ViewChanges(view.metadata, ".".join(identifier))
    try:
        changes.apply_all(updates)
        metadata = changes.build()
    except (ValidationError, InvalidMetadataError, UnsupportedError) as exc:
        raise bad_request(f"{what} {'.'.join(identifier)}: {exc}") from None
    committed = await catalog.commit_view(view, metadata)
    return _view_response(committed, served(request).table_config)


async def rename_view(request: web.Request) -> web.Response:
    catalog = _views(request)
    body = await json_body(request)
    source = identifier_from_json(body.get("source"), "rename view: source")
    destination = identifier_from_json(body.get("destination"), "rename view: destination")
    await require_namespace(served(request).catalog, destination[:-1])
    await catalog.rename_view(source, destination)
    return web.Response(status=204)


def view_routes() -> list[web.RouteDef]:
    views = "/v1/namespaces/{namespace}/views"
    view = views + "/{view}"
    return [
        web.get(views, list_views, allow_head=False),
        web.post(views, create_view),
        web.get(view, load_view, allow_head=False),
        web.head(view, view_exists),
        web.post(view, commit_view),
        web.delete(view, drop_view),
        web.post("/v1/views/rename", rename_view),
    ]
