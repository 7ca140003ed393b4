"""What a request must show before a handler runs: that it comes from a client, not a web
page (``Host``, ``Origin``, content type), then who sends it and that they may.

A web page the user visits can make the browser send requests to a server on the user's
machine; it cannot choose the ``Host`` a browser sends to the address it reached (DNS
rebinding shows the attacker's name), cannot hide its ``Origin`` on a cross-origin POST,
and cannot send ``application/json`` cross-origin without a preflight we never answer.
Iceberg REST clients (PyIceberg, DuckDB, Java) send the address they connect to as
``Host``, no ``Origin``, and JSON bodies.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from aioiceberg.server.auth import Access, Principal
from aioiceberg.server.error_model import RestError, error_response
from aioiceberg.server.request_parsing import identifier_from_json, json_body, namespace_from_text
from aioiceberg.server.state import served
from aioiceberg.server.tokens import TOKEN_PATH, TokenRejected, principal_for_token

__all__ = ["authorize", "host_allowed", "same_origin"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _forbidden(message: str) -> RestError:
    return RestError(403, "ForbiddenException", message)


def _split_host(value: str) -> tuple[str, int | None]:
    """``name:port`` / ``[v6]:port`` / ``name`` -> (lower-case name without brackets, port)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    else:
        name, port_text = value, ""
    if not port_text:
        return name, None
    return name, int(port_text) if port_text.isdigit() else -1


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def host_allowed(host: str, local: tuple[str, int] | None, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` header names this server.

    Accepted: a name given with ``--allowed-host`` (``name`` for any port, ``name:port``
    for one), or, with the port the connection arrived on, ``localhost``, a loopback
    address, or the very address the connection arrived on. An address literal cannot be
    produced by DNS rebinding: a browser sends it only when it connected to that address.
    """
    name, port = _split_host(host)
    for entry in allowed:
        want_name, want_port = _split_host(entry)
        if name == want_name and (want_port is None or want_port == (port or 80)):
            return True
    if local is None:
        return False
    local_ip, local_port = _ip(local[0]), local[1]
    if (port or 80) != local_port:
        return False
    if name == "localhost":
        return True
    address = _ip(name)
    return address is not None and (address.is_loopback or address == local_ip)


def _local_address(request: web.Request) -> tuple[str, int] | None:
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(sockname[0]), int(sockname[1])
    return None


def _origin_allowed(origin: str, host: str) -> bool:
    """An ``Origin`` is accepted only when it is this server itself (``http(s)://`` + ``Host``)."""
    scheme, sep, netloc = origin.strip().lower().partition("://")
    return bool(sep) and scheme in ("http", "https") and netloc == host.strip().lower()


@web.middleware
async def same_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse what a browser sends on a web page's behalf: a foreign ``Host`` (DNS
    rebinding), a foreign ``Origin``, a mutation whose body is not JSON."""
    host = request.headers.get("Host")
    if host is not None:
        if not host_allowed(host, _local_address(request), served(request).allowed_hosts):
            raise _forbidden(
                f"Host {host!r} is not this server's address; a server behind a proxy "
                "accepts the proxy's name when started with --allowed-host NAME"
            )
        origin = request.headers.get("Origin")
        if origin is not None and not _origin_allowed(origin, host):
            raise _forbidden(f"cross-origin requests are refused (Origin {origin!r})")
    elif "Origin" in request.headers:
        raise _forbidden("cross-origin requests are refused (an Origin without a Host)")
    if request.headers.get("Sec-Fetch-Site", "").lower() in ("cross-site", "same-site"):
        raise _forbidden("cross-site requests are refused (Sec-Fetch-Site)")
    needs_json = request.method == "POST" or (request.method not in _SAFE_METHODS and request.body_exists)
    if needs_json and request.path != TOKEN_PATH and request.content_type != "application/json":
        raise RestError(
            415,
            "BadRequestException",
            f"{request.method} {request.path}: the body must be application/json, "
            f"not {request.content_type or 'untyped'}",
        )
    return await handler(request)


def _unauthorized(message: str) -> web.Response:
    response = error_response(RestError(401, "NotAuthorizedException", message))
    response.headers["WWW-Authenticate"] = 'Bearer realm="aioiceberg"'
    return response


def _bearer(request: web.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


@web.middleware
async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authenticate the bearer token (401), then check the grants the route needs (403)."""
    config = served(request).auth
    if config is None or request.path == TOKEN_PATH:
        return await handler(request)
    token = _bearer(request)
    if token is None:
        return _unauthorized(
            "this server needs a bearer token (token=, or credential= for the OAuth2 exchange)"
        )
    try:
        principal = principal_for_token(config, token)
    except TokenRejected as exc:
        return _unauthorized(str(exc))
    if request.match_info.http_exception is not None:
        return await handler(request)  # no such route: the handler answers 404 / 405
    pattern = request.match_info.route.resource.canonical if request.match_info.route.resource else ""
    if pattern == "/v1/namespaces" and request.method == "GET":
        return await _list_namespaces(request, handler, principal)
    for namespace, access in await _needs(request, pattern):
        _require(principal, namespace, access)
    return await handler(request)


def _require(principal: Principal, namespace: Sequence[str], access: Access) -> None:
    if principal.access(namespace) >= access:
        return
    verb = "write" if access == Access.WRITE else "read"
    shown = ".".join(namespace) or "*"
    raise _forbidden(f"principal {principal.name!r} may not {verb} namespace {shown}")


async def _needs(request: web.Request, pattern: str) -> list[tuple[tuple[str, ...], Access]]:
    """The namespaces a request touches and the access each needs; unknown routes are refused
    until given a rule here."""
    read = request.method in ("GET", "HEAD")
    if pattern == "/v1/config" and read:
        return []  # any authenticated principal
    if "{namespace}" in pattern:
        return [(namespace_from_text(request.match_info["namespace"]), Access.READ if read else Access.WRITE)]
    if pattern == "/v1/namespaces" and request.method == "POST":
        levels = (await json_body(request)).get("namespace")
        if not isinstance(levels, list) or not levels or not all(isinstance(v, str) and v for v in levels):
            raise RestError(
                400, "BadRequestException", "create namespace: 'namespace' must be a non-empty list"
            )
        return [(tuple(levels), Access.WRITE)]
    if pattern in ("/v1/tables/rename", "/v1/views/rename") and request.method == "POST":
        body = await json_body(request)
        source = identifier_from_json(body.get("source"), "rename: source")
        destination = identifier_from_json(body.get("destination"), "rename: destination")
        return [(source[:-1], Access.WRITE), (destination[:-1], Access.WRITE)]
    if pattern == "/v1/transactions/commit" and request.method == "POST":
        changes = (await json_body(request)).get("table-changes")
        if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
            raise RestError(400, "BadRequestException", "commit transaction: 'table-changes' must be a list")
        identifiers = [
            identifier_from_json(c.get("identifier"), "commit transaction: identifier") for c in changes
        ]
        return [(identifier[:-1], Access.WRITE) for identifier in identifiers]
    raise _forbidden(f"{request.method} {request.path} is not open to principals")


async def _list_namespaces(
    request: web.Request, handler: Handler, principal: Principal
) -> web.StreamResponse:
    """A listing shows only namespaces the principal may read, or must pass to reach one."""
    raw_parent = request.query.get("parent")
    parent = namespace_from_text(raw_parent, "parent") if raw_parent else ()
    if parent and not principal.sees(parent):
        _require(principal, parent, Access.READ)
    response = await handler(request)
    if response.status != 200 or not isinstance(response, web.Response) or response.body is None:
        return response
    body = json.loads(bytes(response.body))  # type: ignore[arg-type]
    body["namespaces"] = [ns for ns in body.get("namespaces", []) if principal.sees(ns)]
    return web.json_response(body)
