"""Reading REST requests: JSON bodies, namespaces in paths and query strings, identifiers.

Every malformed piece becomes a 400 naming the field, so a client's bug reads as one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from aiohttp import web

from aioiceberg.server.errors import bad_request

__all__ = [
    "NAMESPACE_SEPARATOR",
    "identifier_from_json",
    "json_body",
    "namespace_from_text",
    "namespace_of",
    "optional_field",
    "page",
    "query_flag",
    "required_field",
    "string_list",
    "string_map",
    "table_identifier_of",
]

#: how multi-level namespaces are joined in paths and ``parent=`` (the REST default, ``%1F``)
NAMESPACE_SEPARATOR = "\x1f"

# Bodies larger than this are decoded in a worker thread: a commit may carry big metadata.
_THREAD_BODY_BYTES = 64 * 1024


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object (400 when the body is missing, not JSON or not an object)."""
    data = await request.read()
    if not data:
        raise bad_request(f"{request.method} {request.path}: the request needs a JSON body")
    try:
        if len(data) > _THREAD_BODY_BYTES:
            body = await anyio.to_thread.run_sync(json.loads, data)
        else:
            body = json.loads(data)
    except ValueError as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def namespace_from_text(text: str, what: str = "namespace") -> tuple[str, ...]:
    """``a%1Fb`` (already unquoted) -> ``("a", "b")``; every level must be non-empty."""
    parts = tuple(text.split(NAMESPACE_SEPARATOR))
    if not text or any(not p for p in parts):
        raise bad_request(f"{what} {text!r}: every level must be non-empty")
    return parts


def namespace_of(request: web.Request) -> tuple[str, ...]:
    return namespace_from_text(request.match_info["namespace"])


def table_identifier_of(request: web.Request) -> tuple[str, ...]:
    name = request.match_info["table"]
    if not name:
        raise bad_request("the table name is empty")
    return (*namespace_of(request), name)


def required_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj or obj[key] is None:
        raise bad_request(f"{what}: missing field {key!r}")
    return _typed(obj[key], key, kind, what)


def optional_field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    return None if value is None else _typed(value, key, kind, what)


def _typed(value: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(f"{what}: field {key!r} has the wrong type ({type(value).__name__})")
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
            raise bad_request(f"{what}: {key}[{k!r}] must be a string, got {type(v).__name__}")
    return out


def identifier_from_json(value: Any, what: str) -> tuple[str, ...]:
    """``{"namespace": ["a", "b"], "name": "t"}`` -> ``("a", "b", "t")``."""
    if not isinstance(value, dict):
        raise bad_request(f"{what} must be an object with 'namespace' and 'name'")
    namespace = string_list(value, "namespace", what)
    name = required_field(value, "name", str, what)
    if not namespace or not name or not all(namespace):
        raise bad_request(f"{what}: namespace and name must be non-empty")
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
