"""``make_app(catalog)``: the Iceberg REST catalog protocol over any :class:`Catalog`.

One catalog (and its runtime) per application, closed when the application shuts down.
Every error leaves as the REST error object, never as an HTML page or a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from aiohttp import web

from aioiceberg.catalogs.base import Catalog
from aioiceberg.server.auth import AuthConfig
from aioiceberg.server.commits import commit_routes
from aioiceberg.server.error_model import RestError, error_response, rest_error_for
from aioiceberg.server.guard import authorize, same_origin
from aioiceberg.server.namespaces import namespace_routes
from aioiceberg.server.request_parsing import MAX_BODY_BYTES, ClientHungUp
from aioiceberg.server.state import SERVED, Served, served
from aioiceberg.server.tables import table_routes
from aioiceberg.server.tokens import oauth_routes
from aioiceberg.server.views import VIEW_ENDPOINTS, view_routes
from aioiceberg.view import ViewCatalog

__all__ = ["ENDPOINTS", "make_app"]

log = logging.getLogger("aioiceberg.server")

#: what ``/v1/config`` advertises, spelled exactly as the REST spec does: clients that read
#: the list call only these (and use HEAD for existence checks)
ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/tables/rename",
)

_HTTP_KINDS = {404: "NotFoundException", 405: "MethodNotAllowedException", 413: "BadRequestException"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _rest_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # aiohttp's own answers: unknown route, wrong method
        if exc.status < 400:
            raise
        fallback = "BadRequestException" if exc.status < 500 else "ServiceFailureException"
        message = f"{request.method} {request.path}: {exc.reason}"
        response = error_response(RestError(exc.status, _HTTP_KINDS.get(exc.status, fallback), message))
    except ClientHungUp as exc:
        # no answer can reach the client and nothing of the server's failed, so no incident
        # with a traceback (any client could fill the log with them; re-raised, aiohttp logs
        # one too). A connection reset anywhere else (the store's) is still an incident.
        log.debug("%s", exc)
        return web.Response(status=400)
    except Exception as exc:
        response = error_response(rest_error_for(exc, f"{request.method} {request.path}"))
    if log.isEnabledFor(logging.DEBUG):
        elapsed_ms = (time.perf_counter() - started) * 1000
        log.debug("%s %s -> %d (%.1f ms)", request.method, request.path_qs, response.status, elapsed_ms)
    return response


async def _config(request: web.Request) -> web.Response:
    endpoints = list(ENDPOINTS)
    if isinstance(served(request).catalog, ViewCatalog):
        endpoints += VIEW_ENDPOINTS
    return web.json_response({"defaults": {}, "overrides": {}, "endpoints": endpoints})


def make_app(
    catalog: Catalog,
    *,
    table_config: Mapping[str, str] | None = None,
    close_catalog: bool = True,
    auth: AuthConfig | None = None,
    allowed_hosts: Sequence[str] = (),
) -> web.Application:
    """An application serving ``catalog``; with ``close_catalog`` it closes the catalog on cleanup.

    ``table_config`` goes to clients as ``config`` with every table they load (FileIO
    settings such as ``s3.endpoint``): the server hands out no credentials of its own.
    With ``auth`` every request needs a bearer token and the grants its route needs;
    ``allowed_hosts`` are ``Host`` names accepted besides the server's own address.
    """
    middlewares = [_rest_errors, same_origin] + ([authorize] if auth is not None else [])
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    app[SERVED] = Served(catalog, dict(table_config or {}), auth, tuple(allowed_hosts))
    app.router.add_get("/v1/config", _config, allow_head=False)
    app.router.add_routes([*namespace_routes(), *table_routes(), *commit_routes(), *view_routes()])
    if auth is not None:
        app.router.add_routes(oauth_routes())
    if close_catalog:

        async def close(app: web.Application) -> None:
            await catalog.aclose()

        app.on_cleanup.append(close)
    return app
