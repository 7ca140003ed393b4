"""Namespace routes: list, create, load, exists, drop, update properties."""

from __future__ import annotations

from aiohttp import web

from aioiceberg.errors import NamespaceNotFoundError
from aioiceberg.server.error_model import RestError
from aioiceberg.server.request_parsing import (
    json_body,
    namespace_from_text,
    namespace_levels,
    namespace_of,
    page,
    string_list,
    string_map,
)
from aioiceberg.server.state import served

__all__ = ["namespace_routes"]


async def list_namespaces(request: web.Request) -> web.Response:
    catalog = served(request).catalog
    raw_parent = request.query.get("parent")
    parent = namespace_from_text(raw_parent, "parent") if raw_parent else ()
    if parent and not await catalog.namespace_exists(parent):
        raise NamespaceNotFoundError(f"namespace {'.'.join(parent)!r} does not exist")
    names = [list(levels) for levels in await catalog.list_namespace_levels(parent)]
    items, token = page(request, names)
    return web.json_response({"namespaces": items, "next-page-token": token})


async def create_namespace(request: web.Request) -> web.Response:
    body = await json_body(request)
    levels = namespace_levels(string_list(body, "namespace", "create namespace"), "create namespace")
    properties = string_map(body, "properties", "create namespace")
    await served(request).catalog.create_namespace(levels, properties)
    return web.json_response({"namespace": list(levels), "properties": properties})


async def load_namespace(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    properties = await served(request).catalog.load_namespace_properties(namespace)
    return web.json_response({"namespace": list(namespace), "properties": properties})


async def namespace_exists(request: web.Request) -> web.Response:
    found = await served(request).catalog.namespace_exists(namespace_of(request))
    return web.Response(status=204 if found else 404)


async def drop_namespace(request: web.Request) -> web.Response:
    await served(request).catalog.drop_namespace(namespace_of(request))
    return web.Response(status=204)


async def update_properties(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    body = await json_body(request)
    removals = string_list(body, "removals", "update namespace properties")
    updates = string_map(body, "updates", "update namespace properties")
    both = sorted(set(removals) & set(updates))
    if both:
        raise RestError(422, "UnprocessableEntityException", f"keys both removed and updated: {both}")
    catalog = served(request).catalog
    before = await catalog.load_namespace_properties(namespace)
    await catalog.update_namespace_properties(namespace, removals, updates)
    return web.json_response(
        {
            "updated": sorted(updates),
            "removed": sorted(k for k in set(removals) if k in before),
            "missing": sorted(k for k in set(removals) if k not in before),
        }
    )


def namespace_routes() -> list[web.RouteDef]:
    ns = "/v1/namespaces/{namespace}"
    return [
        web.get("/v1/namespaces", list_namespaces, allow_head=False),
        web.post("/v1/namespaces", create_namespace),
        web.get(ns, load_namespace, allow_head=False),
        web.head(ns, namespace_exists),
        web.delete(ns, drop_namespace),
        web.post(ns + "/properties", update_properties),
    ]
