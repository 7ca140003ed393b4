"""Reading REST requests: JSON bodies, namespaces in paths and query strings, identifiers.

Every malformed piece becomes a 400 naming the field, so a client's bug reads as one line;
nothing a client sends (a NUL in a name, JSON nested ten thousand deep, a 1 GiB body) reaches
the catalog as something it would answer with a 500.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import anyio.to_thread
from aiohttp import web

from aioiceberg.catalogs.base import identifier_parts
from aioiceberg.errors import ValidationError
from aioiceberg.server.error_model import RestError, bad_request

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_NAMESPACE_BYTES",
    "NAMESPACE_SEPARATOR",
    "ClientHungUp",
    "identifier_from_json",
    "json_body",
    "json_type",
    "namespace_from_text",
    "namespace_levels",
    "namespace_of",
    "optional_field",
    "page",
    "query_flag",
    "request_form",
    "required_field",
    "string_list",
    "string_map",
    "table_identifier_of",
]

#: how multi-level namespaces are joined in paths and ``parent=`` (the REST default, ``%1F``)
NAMESPACE_SEPARATOR = "\x1f"

#: the largest request body (the application's ``client_max_size``): commits carry changes,
#: not whole metadata, so this is far above any real request and far below a memory problem
MAX_BODY_BYTES = 16 * 1024 * 1024
#: the longest namespace, its levels joined, in UTF-8 bytes: what every catalog can hold (a
#: SQL catalog's namespace column is VARCHAR(255), a Glue database name 255 characters);
#: each level is also at most 255 bytes and free of control characters (``identifier_parts``)
MAX_NAMESPACE_BYTES = 255

# Bodies larger than this are decoded in a worker thread: a commit may carry big metadata.
_THREAD_BODY_BYTES = 64 * 1024
# A \uD800-\uDFFF escape: valid JSON syntax, but alone it is no character any store can write.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_type(value: Any) -> str:
    """What a decoded JSON value was, in JSON's words (a client sent JSON, not Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number"}
    return names.get(type(value), type(value).__name__)


def _too_large(request: web.Request) -> RestError:
    limit = f"{MAX_BODY_BYTES // (1024 * 1024)} MiB"
    message = f"{request.method} {request.path}: the request body is larger than {limit}"
    return RestError(413, "BadRequestException", message)


def _decode(data: bytes) -> Any:
    body = json.loads(data)
    if _SURROGATE_ESCAPE.search(data) is not None:
        json.dumps(body, ensure_ascii=False).encode("utf-8")  # pairs decode to one character
    return body


# Where a request keeps its decoded body: a typed key where aiohttp has them (3.14+, which warns
# on every request that stores under a plain string), the string on older releases.
_BODY_KEY: Any = (
    web.RequestKey("aioiceberg.json_body", dict) if hasattr(web, "RequestKey") else "aioiceberg.json_body"
)


class ClientHungUp(Exception):
    """The client closed its connection while its request's body was read: no answer can
    reach it, and nothing of the server's failed (see ``app._rest_errors``)."""


async def _read_body(request: web.Request) -> bytes:
    """``request.read()``, a client gone mid-body raised as :class:`ClientHungUp`."""
    try:
        return await request.read()
    except ConnectionResetError as exc:
        raise ClientHungUp(f"{request.method} {request.path}: the client hung up mid-body") from exc


async def request_form(request: web.Request) -> Any:
    """``request.post()`` (a form body), a client gone mid-body raised as :class:`ClientHungUp`."""
    try:
        return await request.post()
    except ConnectionResetError as exc:
        raise ClientHungUp(f"{request.method} {request.path}: the client hung up mid-body") from exc


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (400 when the body is missing, not JSON or not an object;
    413 above :data:`MAX_BODY_BYTES`). Decoded once per request: the guard and the handler
    both ask for it."""
    cached = request.get(_BODY_KEY)
    if cached is not None:
        return cast(dict[str, Any], cached)
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise _too_large(request)
    try:
        data = await _read_body(request)
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(request) from None
    if not data:
        raise bad_request(f"{request.method} {request.path}: the request needs a JSON body")
    try:
        if len(data) > _THREAD_BODY_BYTES:
            body = await anyio.to_thread.run_sync(_decode, data)
        else:
            body = _decode(data)
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    except UnicodeEncodeError:
        raise bad_request("the request body holds a lone surrogate (\\uD800-\\uDFFF): not text") from None
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, got {json_type(body)}")
    request[_BODY_KEY] = body
    return body


def namespace_levels(levels: Sequence[str], what: str = "namespace") -> tuple[str, ...]:
    """``levels`` when every catalog could hold them as one namespace: at least one level, each
    a valid name part, at most :data:`MAX_NAMESPACE_BYTES` in all (else 400)."""
    if not levels:
        raise bad_request(f"{what}: a namespace needs at least one level")
    try:
        parts = tuple(identifier_parts(list(levels), what))
    except ValidationError as exc:
        raise bad_request(str(exc)) from None
    size = sum(len(p.encode("utf-8")) for p in parts) + len(parts) - 1
    if size > MAX_NAMESPACE_BYTES:
        raise bad_request(
            f"{what}: {len(parts)} levels of {size} bytes in all; a namespace is at most "
            f"{MAX_NAMESPACE_BYTES} bytes (UTF-8)"
        )
    return parts


def namespace_from_text(text: str, what: str = "namespace") -> tuple[str, ...]:
    """``a%1Fb`` (already unquoted) -> ``("a", "b")``, checked by :func:`namespace_levels`."""
    return namespace_levels(text.split(NAMESPACE_SEPARATOR) if text else [], what)


def namespace_of(request: web.Request) -> tuple[str, ...]:
    return namespace_from_text(request.match_info["namespace"])


def _table_name(name: str, what: str) -> str:
    try:
        return identifier_parts([name], what)[0]
    except ValidationError as exc:
        raise bad_request(str(exc)) from None


def table_identifier_of(request: web.Request) -> tuple[str, ...]:
    return (*namespace_of(request), _table_name(request.match_info["table"], "table name"))


def required_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj or obj[key] is None:
        raise bad_request(f"{what}: missing field {key!r}")
    return _typed(obj[key], key, kind, what)


def optional_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    return None if value is None else _typed(value, key, kind, what)


def _typed(value: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(f"{what}: field {key!r} has the wrong type ({json_type(value)})")
    return value


def string_list(obj: Mapping[str, Any], key: str, what: str) -> list[str]:
    values = optional_field(obj, key, list, what) or []
    if not all(isinstance(v, str) for v in values):
        raise bad_request(f"{what}: field {key!r} must be a list of strings")
    return list(values)


def string_map(obj: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    """A map of strings; numbers and booleans are accepted as their text (clients send them)."""
    values = optional_field(obj, key, dict, what) or {}
    out: dict[str, str] = {}
    for k, v in values.items():
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif isinstance(v, str | int | float):
            out[str(k)] = str(v)
        else:
            raise bad_request(f"{what}: {key}[{k!r}] must be a string, got {json_type(v)}")
    return out


def identifier_from_json(value: Any, what: str) -> tuple[str, ...]:
    """``{"namespace": ["a", "b"], "name": "t"}`` -> ``("a", "b", "t")``."""
    if not isinstance(value, dict):
        raise bad_request(f"{what} must be an object with 'namespace' and 'name'")
    namespace = namespace_levels(string_list(value, "namespace", what), f"{what}: namespace")
    name = _table_name(required_field(value, "name", str, what), f"{what}: name")
    return (*namespace, name)


def query_flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter: ``true`` / ``True`` / ``1`` (PyIceberg sends ``True``)."""
    raw = request.query.get(name)
    if raw is None or raw == "":
        return False
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise bad_request(f"query parameter {name}={raw!r} must be true or false")


def page(request: web.Request, items: list[Any]) -> tuple[list[Any], str | None]:
    """One page of ``items`` for ``pageToken`` / ``pageSize`` (the token is an offset)."""
    size_text = request.query.get("pageSize")
    token = request.query.get("pageToken") or "0"
    try:
        start = int(token)
        size = int(size_text) if size_text else None
    except ValueError:
        raise bad_request(f"bad page token {token!r} or page size {size_text!r}") from None
    if start < 0 or (size is not None and size <= 0):
        raise bad_request("pageToken must be >= 0 and pageSize > 0")
    if size is None:
        return items[start:], None
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)
