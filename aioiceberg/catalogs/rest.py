"""A catalog behind the Iceberg REST protocol (``rest+http://HOST:PORT[/path]``), over aiohttp.

The server holds each table's commit point: a commit sends requirements and updates and
the server validates and applies them. Table files (data, manifests, manifest lists) are
written here, with the storage options of the catalog and what the server hands out.

Reads (GET, HEAD) are retried on 5xx, 429 and transport errors; writes are sent once,
since a write whose answer was lost may have been applied. A commit that gets no clear
answer is reported as ``CommitStateUnknownError`` unless reading the table back shows
that it landed. Requests authenticate as ``rest_auth`` says (``token=``, ``credential=``,
``sigv4=true``); a 401 is answered before anything runs, so a renewed token resends it once.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from aioiceberg.catalogs.base import Catalog, identifier_parts, identifier_text
from aioiceberg.catalogs.new_table import first_metadata
from aioiceberg.catalogs.rest_auth import BearerToken, ClientCredentials, NoAuth, RestAuth, SigV4
from aioiceberg.commit.protocols.commit_point import parse_boolean, uri_options
from aioiceberg.commit.protocols.rest import RestProtocol, rest_table_name, state_from_reply
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    IcebergError,
    InvalidMetadataError,
    InvalidPropertyError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    NotAuthorizedError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io
from aioiceberg.retrying import Backoff, retry
from aioiceberg.spec.schema_json import partition_spec_to_json, schema_to_json, sort_order_to_json
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.spec.view_metadata import (
    ViewMetadata,
    ViewVersion,
    view_metadata_from_dict,
    view_metadata_to_dict,
    view_version_to_json,
)
from aioiceberg.spec.view_updates import check_dialects_kept
from aioiceberg.table import Table
from aioiceberg.view import View

if TYPE_CHECKING:
    import aiohttp
    import pyarrow as pa

    from aioiceberg.runtime import Runtime
    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema

__all__ = ["REST_URI_OPTIONS", "RestCatalog", "RestUri"]

REST_URI_OPTIONS = {
    "prefix": "a path prefix inserted as /v1/{prefix}/... (the server's config may set one)",
    "warehouse": "the warehouse the server should serve (sent to GET /v1/config)",
    "token": "a bearer token sent with every request",
    "credential": "CLIENT_ID:SECRET, exchanged for a bearer token (OAuth2 client credentials)",
    "oauth2-server-uri": "the OAuth2 token endpoint for credential= (default {base}/v1/oauth/tokens)",
    "scope": "the OAuth2 scope asked for with credential= (default catalog)",
    "sigv4": "true to sign every request with AWS SigV4 (AWS credentials from the standard chain)",
    "signing-region": "the AWS region SigV4 signs for (default: the endpoint's, AWS_REGION, the profile's)",
    "signing-name": "the AWS service name SigV4 signs for (default glue; s3tables for S3 Tables)",
    "rest.sigv4-enabled": "the same as sigv4 (PyIceberg's and Java's name)",
    "rest.signing-region": "the same as signing-region (PyIceberg's and Java's name)",
    "rest.signing-name": "the same as signing-name (PyIceberg's and Java's name)",
    "timeout": "seconds one request may take, a positive number",
}
"""The options a ``rest+http://`` URI may carry, with what each allows."""

_SECRET_OPTIONS = frozenset({"token", "credential"})
_ALIASES = {
    "rest.sigv4-enabled": "sigv4",
    "rest.signing-region": "signing-region",
    "rest.signing-name": "signing-name",
}
DEFAULT_SCOPE = "catalog"
DEFAULT_SIGNING_NAME = "glue"

DEFAULT_TIMEOUT_S = 60.0
_READS = Backoff("REST read", base_delay_s=0.1, max_delay_s=2.0, max_attempts=5)
_DEFAULT_SEPARATOR = "%1F"

# Endpoints as the spec (and a config's "endpoints" list) spells them.
CONFIG = "GET /v1/config"
LIST_NAMESPACES = "GET /v1/{prefix}/namespaces"
CREATE_NAMESPACE = "POST /v1/{prefix}/namespaces"
LOAD_NAMESPACE = "GET /v1/{prefix}/namespaces/{namespace}"
NAMESPACE_EXISTS = "HEAD /v1/{prefix}/namespaces/{namespace}"
DROP_NAMESPACE = "DELETE /v1/{prefix}/namespaces/{namespace}"
UPDATE_NAMESPACE = "POST /v1/{prefix}/namespaces/{namespace}/properties"
LIST_TABLES = "GET /v1/{prefix}/namespaces/{namespace}/tables"
CREATE_TABLE = "POST /v1/{prefix}/namespaces/{namespace}/tables"
REGISTER_TABLE = "POST /v1/{prefix}/namespaces/{namespace}/register"
LOAD_TABLE = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"
TABLE_EXISTS = "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}"
UPDATE_TABLE = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}"
DROP_TABLE = "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}"
RENAME_TABLE = "POST /v1/{prefix}/tables/rename"
LIST_VIEWS = "GET /v1/{prefix}/namespaces/{namespace}/views"
CREATE_VIEW = "POST /v1/{prefix}/namespaces/{namespace}/views"
LOAD_VIEW = "GET /v1/{prefix}/namespaces/{namespace}/views/{view}"
VIEW_EXISTS = "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}"
REPLACE_VIEW = "POST /v1/{prefix}/namespaces/{namespace}/views/{view}"
DROP_VIEW = "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}"
RENAME_VIEW = "POST /v1/{prefix}/views/rename"

# What a server that lists no endpoints offers (the spec's default set: no HEAD checks).
_DEFAULT_ENDPOINTS = frozenset(
    {
        LIST_NAMESPACES,
        CREATE_NAMESPACE,
        LOAD_NAMESPACE,
        DROP_NAMESPACE,
        UPDATE_NAMESPACE,
        LIST_TABLES,
        CREATE_TABLE,
        REGISTER_TABLE,
        LOAD_TABLE,
        UPDATE_TABLE,
        DROP_TABLE,
        RENAME_TABLE,
    }
)


@dataclass(frozen=True, slots=True)
class RestUri:
    """``rest+http://HOST:PORT[/path]?prefix=...&warehouse=...&token=...&timeout=...``, parsed.
    An unknown option is an error naming it: a typo must not quietly mean the default.
    Secrets (``token``, ``credential``) are left out of the repr."""

    base_url: str
    prefix: str | None = None
    warehouse: str | None = None
    token: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    credential: str | None = field(default=None, repr=False)
    oauth2_server_uri: str | None = None
    scope: str = DEFAULT_SCOPE
    sigv4: bool = False
    signing_region: str | None = None
    signing_name: str = DEFAULT_SIGNING_NAME

    @classmethod
    def parse(cls, uri: str) -> RestUri:
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        if scheme not in ("rest+http", "rest+https") or not parts.netloc:
            raise ValidationError(
                f"{_redacted(uri)!r} is not a REST catalog URI: expected 'rest+http://HOST:PORT[/path]'"
            )
        shown = _redacted(uri)

        def bad(key: str, value: str, allowed: str, what: str) -> InvalidPropertyError:
            value = "***" if key in _SECRET_OPTIONS else value
            return InvalidPropertyError(key, value, allowed, subject=f"{shown!r}: {what}")

        options = uri_options(parts.query, REST_URI_OPTIONS, shown, secret=_SECRET_OPTIONS)
        for alias, key in _ALIASES.items():
            if alias in options:
                if key in options:
                    raise bad(alias, options[alias], f"either {key} or {alias}, not both", "option")
                options[key] = options.pop(alias)
        timeout_s = DEFAULT_TIMEOUT_S
        if "timeout" in options:
            try:
                timeout_s = float(options["timeout"])
            except ValueError:
                timeout_s = -1.0
            if not timeout_s > 0:
                raise bad("timeout", options["timeout"], REST_URI_OPTIONS["timeout"], "option")
        sigv4 = False
        if "sigv4" in options:
            flag = parse_boolean(options["sigv4"])
            if flag is None:
                raise bad("sigv4", options["sigv4"], "true or false", "option")
            sigv4 = flag
        if "token" in options and "credential" in options:
            raise ValidationError(f"{shown!r}: give token= or credential=, not both")
        if sigv4 and ("token" in options or "credential" in options):
            raise ValidationError(f"{shown!r}: sigv4 signs with AWS credentials: drop token= / credential=")
        for key in ("oauth2-server-uri", "scope"):
            if key in options and "credential" not in options:
                raise bad(key, options[key], "credential= beside it", "option")
        for key in ("signing-region", "signing-name"):
            if key in options and not sigv4:
                raise bad(key, options[key], "sigv4=true beside it", "option")
        server_uri = options.get("oauth2-server-uri")
        if server_uri is not None and (
            urlsplit(server_uri).scheme not in ("http", "https") or not urlsplit(server_uri).netloc
        ):
            raise bad("oauth2-server-uri", server_uri, "an http:// or https:// URL", "option")
        if "credential" in options:
            client_id, colon, secret = options["credential"].partition(":")
            if not (client_id and colon and secret):
                raise bad("credential", "***", "CLIENT_ID:SECRET, both parts non-empty", "option")
        base = f"{scheme.removeprefix('rest+')}://{parts.netloc}{parts.path.rstrip('/')}"
        prefix = options.get("prefix")
        return cls(
            base,
            prefix.strip("/") if prefix else None,
            options.get("warehouse"),
            options.get("token"),
            timeout_s,
            credential=options.get("credential"),
            oauth2_server_uri=server_uri,
            scope=options.get("scope", DEFAULT_SCOPE),
            sigv4=sigv4,
            signing_region=options.get("signing-region"),
            signing_name=options.get("signing-name", DEFAULT_SIGNING_NAME),
        )

    def auth(self) -> RestAuth:
        """How requests to this catalog authenticate."""
        if self.credential is not None:
            token_url = self.oauth2_server_uri or f"{self.base_url}/v1/oauth/tokens"
            return ClientCredentials.parse(self.credential, token_url, self.scope)
        if self.token is not None:
            return BearerToken(self.token)
        if self.sigv4:
            host = urlsplit(self.base_url).hostname or ""
            return SigV4(host, region=self.signing_region, service=self.signing_name)
        return NoAuth()


def _redacted(uri: str) -> str:
    return re.sub(r"((?:token|credential)=)[^&]*", r"\1***", uri)


def _split_table(identifier: str | Sequence[str]) -> tuple[tuple[str, ...], str]:
    parts = identifier_parts(identifier, "table identifier")
    if len(parts) < 2:
        raise ValidationError(f"table identifier {identifier!r} needs a namespace and a name")
    return tuple(parts[:-1]), parts[-1]


def _namespace(namespace: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(identifier_parts(namespace, "namespace"))


def _error_body(data: bytes) -> tuple[str, str]:
    """(message, type) of a spec error body ``{"error": {"message", "type", "code"}}``."""
    try:
        body = json.loads(data)
        error = body["error"]
        return str(error.get("message") or ""), str(error.get("type") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        text = data[:200].decode("utf-8", "replace").strip()
        return text, ""


@dataclass(frozen=True, slots=True)
class _Failure:
    """How one call reads an error status: what a bare 404 / 409 means, and whether the call
    was a commit (5xx: the server may have applied it) or another write (not retried)."""

    not_found: type[IcebergError] = TableNotFoundError
    conflict: type[IcebergError] = CommitFailedError
    write: bool = False
    commit: bool = False


def _answer(status: int, data: bytes | None, what: str, failure: _Failure) -> Any:
    """A reply's JSON (None when it has no body, or ``data`` is None: a HEAD), or its error."""
    if not 200 <= status < 300:
        raise _error(status, data or b"", what, failure)
    if status == 204 or not data:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise InvalidMetadataError(f"{what}: the server's answer is not JSON ({exc})") from exc


def _error(status: int, data: bytes, what: str, failure: _Failure) -> IcebergError:
    """The typed error for a non-2xx answer, named by status and the body's ``type``."""
    message, kind = _error_body(data)
    detail = f"{what}: {message or 'no message'} (HTTP {status}{', ' + kind if kind else ''})"
    if status == 404:
        if kind == "NoSuchNamespaceException":
            return NamespaceNotFoundError(detail)
        if kind == "NoSuchTableException":
            return TableNotFoundError(detail)
        if kind == "NoSuchViewException":
            return ViewNotFoundError(detail)
        return failure.not_found(detail)
    if status == 409:
        if kind == "NamespaceNotEmptyException":
            return NamespaceNotEmptyError(detail)
        if kind == "CommitFailedException":
            return CommitFailedError(detail)
        return failure.conflict(detail)
    if status in (400, 422):
        return ValidationError(detail)
    if status in (401, 403, 419):
        return NotAuthorizedError(f"not authorised: {detail}")
    if status in (406, 501):
        return UnsupportedError(detail)
    if status == 429:
        return StoreError(detail, retryable=True, throttled=True)  # refused, not applied
    if status >= 500:
        if failure.commit:
            return CommitStateUnknownError(f"{detail}; the commit may have landed: nothing was deleted")
        if failure.write:
            return StoreError(f"{detail}; it may have been applied: check before repeating it")
        return StoreError(detail, retryable=True, throttled=status == 503)
    return StoreError(f"unexpected answer: {detail}", retryable=False)


class _Sent(Exception):
    """A transport error after the request may have reached the server."""


class _Sessions:
    """One aiohttp session per running loop (aiohttp sessions belong to a loop), each closed
    with the catalog or, if it is never closed, when its loop shuts down."""

    def __init__(self, headers: Mapping[str, str], timeout_s: float) -> None:
        self._headers = dict(headers)
        self._timeout_s = timeout_s
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, AsyncGenerator[None]]
        ] = weakref.WeakKeyDictionary()

    async def get(self) -> aiohttp.ClientSession:
        import aiohttp  # aiohttp: optional (the rest and server extras)

        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is not None:
            return found[0]
        session = aiohttp.ClientSession(
            headers=self._headers, timeout=aiohttp.ClientTimeout(total=self._timeout_s)
        )
        # aiohttp resends an idempotent request (DELETE) once on a dropped connection: a drop
        # of a table would then be sent twice. Every repetition belongs to our own retries.
        session._retry_connection = False
        closer = self._closed_at_shutdown(loop)
        self._loops[loop] = (session, closer)  # before any await: concurrent first uses share it
        await closer.__anext__()
        return session

    async def _closed_at_shutdown(self, loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None]:
        """Parked for the loop's lifetime: ``shutdown_asyncgens`` closes the session."""
        try:
            yield
        finally:
            found = self._loops.pop(loop, None)
            if found is not None:
                await found[0].close()

    async def close(self) -> None:
        found = self._loops.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found[0].close()
            await found[1].aclose()


class RestCatalog(Catalog):
    """Namespaces and tables of an Iceberg REST catalog service.

    The server's ``GET /v1/config`` is read once, on first use: its ``defaults`` and
    ``overrides`` may set the path ``prefix``, the namespace separator and ``s3.*`` storage
    settings (defaults below the caller's storage options, overrides above them, and the
    ``config`` of a table's load reply above all, as PyIceberg does).
    """

    def __init__(
        self,
        uri: RestUri,
        *,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.uri = uri
        # the root is the service; a warehouse given as a storage location is where files go
        warehouse = uri.warehouse
        files = warehouse if warehouse is not None and "://" in warehouse else "file:///"
        super().__init__(uri.base_url, files=files, storage_options=storage_options, runtime=runtime)
        self._headers = {
            "Content-Type": "application/json",
            "X-Iceberg-Access-Delegation": "vended-credentials",
        }
        self._auth = uri.auth()
        self._sessions = _Sessions(self._headers, uri.timeout_s)
        self._config: dict[str, str] | None = None
        self._config_lock: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._prefix = uri.prefix
        self._separator = _DEFAULT_SEPARATOR
        self._endpoints: frozenset[str] = _DEFAULT_ENDPOINTS
        self._config_storage: tuple[dict[str, str], dict[str, str]] = ({}, {})

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        warehouse: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
    ) -> RestCatalog:
        parsed = RestUri.parse(uri)
        try:
            # aiohttp: optional (the rest and server extras)
            import aiohttp  # noqa: F401
        except ImportError as exc:
            raise UnsupportedError(
                "the REST catalog client needs aiohttp: pip install 'aioiceberg[rest]' (or aiohttp)"
            ) from exc
        if warehouse is not None:
            if parsed.warehouse is not None and parsed.warehouse != warehouse:
                raise ValidationError(
                    f"warehouse={warehouse!r} differs from the URI's warehouse={parsed.warehouse!r}"
                )
            parsed = replace(parsed, warehouse=warehouse)
        return cls(parsed, storage_options=storage_options, runtime=runtime)

    def __repr__(self) -> str:
        return f"RestCatalog({self.root!r})"

    async def _close_clients(self) -> None:
        await self._sessions.close()

    # -- HTTP ----------------------------------------------------------------------------------
    async def _ensure_config(self) -> None:
        if self._config is not None:
            return
        lock = self._config_lock.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if self._config is not None:
                return
            params = {"warehouse": self.uri.warehouse} if self.uri.warehouse is not None else None
            what = f"REST catalog {self.root}: config"
            reply = await self._read_once(CONFIG, what, _Failure(not_found=StoreError), params)
            if not isinstance(reply, dict):
                raise InvalidMetadataError(
                    f"REST catalog {self.root}: GET /v1/config did not answer an object"
                )
            defaults = _string_map(reply.get("defaults"), "defaults", self.root)
            overrides = _string_map(reply.get("overrides"), "overrides", self.root)
            merged = {**defaults, **({"prefix": self.uri.prefix} if self.uri.prefix else {}), **overrides}
            prefix = merged.get("prefix")
            self._prefix = prefix.strip("/") if prefix else None
            self._separator = merged.get("namespace-separator") or _DEFAULT_SEPARATOR
            endpoints = reply.get("endpoints")
            if endpoints is not None:
                if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
                    raise InvalidMetadataError(
                        f"REST catalog {self.root}: config 'endpoints' must be a list of strings"
                    )
                self._endpoints = frozenset(" ".join(e.split()) for e in endpoints)
            self._config_storage = (
                {k: v for k, v in defaults.items() if k.startswith("s3.")},
                {k: v for k, v in overrides.items() if k.startswith("s3.")},
            )
            self._config = merged

    def _offers(self, endpoint: str) -> bool:
        return endpoint in self._endpoints

    def _url(
        self,
        endpoint: str,
        namespace: tuple[str, ...] | None = None,
        table: str | None = None,
    ) -> tuple[str, str]:
        """(method, URL) of ``endpoint``, its path parts percent-encoded."""
        method, _, path = endpoint.partition(" ")
        path = path.replace("{prefix}/", f"{self._prefix}/" if self._prefix else "")
        if namespace is not None:
            path = path.replace("{namespace}", self._separator.join(quote(p, safe="") for p in namespace))
        if table is not None:  # a view's name too
            path = path.replace("{table}", quote(table, safe="")).replace("{view}", quote(table, safe=""))
        return method, self.uri.base_url + path

    async def _exchange(
        self, method: str, url: str, params: Mapping[str, str] | None, body: Any
    ) -> tuple[int, bytes]:
        """One request; a transport error becomes a retryable ``StoreError`` when the request
        cannot have reached the server, else ``_Sent``.

        A 401 (or 419) is answered before anything runs, so after the authentication renews
        its token the request, read or write, is sent once more.
        """
        # aiohttp: optional (the rest and server extras); yarl: optional (comes with aiohttp, the rest extra)
        import aiohttp
        from yarl import URL

        session = await self._sessions.get()
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        # the query spelled here, as SigV4 signs it (RFC 3986: only A-Z a-z 0-9 -_.~ bare)
        if params:
            url += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
        for renewed in (False, True):
            headers = await self._auth.headers(session, method, url, data, self._headers)
            try:
                async with session.request(
                    method, URL(url, encoded=True), data=data, headers=headers
                ) as resp:
                    status, answer = resp.status, await resp.read()
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
                raise StoreError(f"{method} {url}: cannot connect ({exc})", retryable=True) from exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _Sent(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            if status not in (401, 419) or renewed or not await self._auth.renew(session, headers):
                break
        return status, answer

    async def _read_once(
        self,
        endpoint: str,
        what: str,
        failure: _Failure,
        params: Mapping[str, str] | None = None,
        *,
        namespace: tuple[str, ...] | None = None,
        table: str | None = None,
        head: bool = False,
    ) -> Any:
        method, url = self._url(endpoint, namespace, table)

        async def attempt() -> Any:
            try:
                status, data = await self._exchange(method, url, params, None)
            except _Sent as exc:  # a read changes nothing: try again
                raise StoreError(str(exc), retryable=True) from exc
            return _answer(status, None if head else data, what, failure)

        return await retry(attempt, _READS)

    async def _read(
        self,
        endpoint: str,
        what: str,
        failure: _Failure,
        params: Mapping[str, str] | None = None,
        *,
        namespace: tuple[str, ...] | None = None,
        table: str | None = None,
        head: bool = False,
    ) -> Any:
        await self._ensure_config()
        self._require(endpoint, what)
        return await self._read_once(
            endpoint, what, failure, params, namespace=namespace, table=table, head=head
        )

    async def _write(
        self,
        endpoint: str,
        what: str,
        failure: _Failure,
        body: Any,
        params: Mapping[str, str] | None = None,
        *,
        namespace: tuple[str, ...] | None = None,
        table: str | None = None,
    ) -> Any:
        """Send a write once: a lost answer raises ``_Sent`` (commits settle it) or, for other
        writes, a ``StoreError`` saying it may have been applied."""
        await self._ensure_config()
        self._require(endpoint, what)
        method, url = self._url(endpoint, namespace, table)
        try:
            status, data = await self._exchange(method, url, params, body)
        except _Sent as exc:
            if failure.commit:
                raise
            raise StoreError(
                f"{what}: no answer ({exc}); it may have been applied: check before repeating it"
            ) from exc
        return _answer(status, data, what, failure)

    def _require(self, endpoint: str, what: str) -> None:
        if not self._offers(endpoint):
            raise UnsupportedError(f"{what}: {self.root} does not offer {endpoint}")

    # -- tables --------------------------------------------------------------------------------
    async def load_table_reply(self, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
        """The server's load reply for one table: what its commit protocol reloads."""
        what = rest_table_name(namespace, name)
        reply = await self._read(
            LOAD_TABLE, what, _Failure(not_found=TableNotFoundError), namespace=namespace, table=name
        )
        if not isinstance(reply, dict):
            raise InvalidMetadataError(f"{what}: the load reply is not an object")
        return reply

    async def update_table(self, namespace: tuple[str, ...], name: str, body: dict[str, Any]) -> Any:
        """Send one table's commit request once (see ``RestTables.update_table``): a request
        that may have reached the server without an answer is ``WriteOutcomeUnknownError``,
        for its commit protocol to settle."""
        what = rest_table_name(namespace, name)
        failure = _Failure(not_found=TableNotFoundError, conflict=CommitFailedError, write=True, commit=True)
        try:
            return await self._write(UPDATE_TABLE, what, failure, body, namespace=namespace, table=name)
        except _Sent as exc:
            raise WriteOutcomeUnknownError(f"{what}: no answer to the commit ({exc})") from exc

    def _table_io(self, location: str, config: Any) -> FileIO:
        defaults, overrides = self._config_storage
        vended = (
            {k: str(v) for k, v in config.items() if isinstance(k, str) and k.startswith("s3.")}
            if isinstance(config, dict)
            else {}
        )
        options = {**defaults, **self.storage_options, **overrides, **vended}
        return resolve_io(location, options, runtime=self.runtime)

    def _table(self, identifier: str | Sequence[str], reply: dict[str, Any]) -> Table:
        namespace, name = _split_table(identifier)
        state = state_from_reply(reply, rest_table_name(namespace, name))
        location = state.metadata.location
        io = self._table_io(location, reply.get("config"))
        protocol = RestProtocol(self, namespace, name, io)
        return Table(identifier_text(identifier), location, state, io, protocol)

    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        """A new table where the server puts it; ids are assigned fresh, as every engine does."""
        namespace, name = _split_table(identifier)
        # fresh ids and checks (types for the format version) as for any new table; the
        # location is the server's to choose, so a placeholder stands in for it here
        fresh = first_metadata(schema, partition_by, properties, format_version, sort_order)(
            f"{self.root}/{name}"
        )
        body = {
            "name": name,
            "schema": schema_to_json(fresh.schema()),
            "partition-spec": partition_spec_to_json(fresh.spec(), fresh.format_version),
            "write-order": sort_order_to_json(fresh.sort_order()),
            "properties": {**fresh.properties, "format-version": str(fresh.format_version)},
            "stage-create": False,
        }
        what = f"REST table {'.'.join((*namespace, name))}"
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=TableAlreadyExistsError, write=True)
        reply = await self._write(CREATE_TABLE, what, failure, body, namespace=namespace)
        return self._table(identifier, reply)

    async def load_table(self, identifier: str | Sequence[str]) -> Table:
        namespace, name = _split_table(identifier)
        return self._table(identifier, await self.load_table_reply(namespace, name))

    async def table_exists(self, identifier: str | Sequence[str]) -> bool:
        namespace, name = _split_table(identifier)
        await self._ensure_config()
        try:
            if self._offers(TABLE_EXISTS):
                what = f"REST table {identifier_text(identifier)}"
                await self._read(TABLE_EXISTS, what, _Failure(), namespace=namespace, table=name, head=True)
            else:
                await self.load_table_reply(namespace, name)
        except (TableNotFoundError, NamespaceNotFoundError):
            return False
        return True

    async def register_table(self, identifier: str | Sequence[str], metadata_location: str) -> Table:
        namespace, name = _split_table(identifier)
        what = f"REST table {'.'.join((*namespace, name))}"
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=TableAlreadyExistsError, write=True)
        body = {"name": name, "metadata-location": metadata_location}
        reply = await self._write(REGISTER_TABLE, what, failure, body, namespace=namespace)
        return self._table(identifier, reply)

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        found: list[str] = []
        async for page in self._pages(LIST_TABLES, what, "identifiers", namespace=ns):
            for item in page:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise InvalidMetadataError(f"{what}: bad table identifier {item!r} in the listing")
                found.append(".".join((*_parts_of(item.get("namespace"), what), item["name"])))
        return sorted(found)

    async def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> str | None:
        """Drop the table; with ``purge`` the server deletes its files (``purgeRequested=true``).

        Returns None: the protocol's answer does not say which metadata file, if any, the
        server keeps (a warehouse behind our own server keeps a copy under another name).
        """
        namespace, name = _split_table(identifier)
        what = f"REST table {'.'.join((*namespace, name))}"
        failure = _Failure(not_found=TableNotFoundError, conflict=StoreError, write=True)
        params = {"purgeRequested": "true" if purge else "false"}
        await self._write(DROP_TABLE, what, failure, None, params, namespace=namespace, table=name)
        return None

    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table:
        source, source_name = _split_table(from_identifier)
        destination, destination_name = _split_table(to_identifier)
        body = {
            "source": {"namespace": list(source), "name": source_name},
            "destination": {"namespace": list(destination), "name": destination_name},
        }
        what = f"REST rename of {identifier_text(from_identifier)} to {identifier_text(to_identifier)}"
        failure = _Failure(not_found=TableNotFoundError, conflict=TableAlreadyExistsError, write=True)
        await self._write(RENAME_TABLE, what, failure, body)
        return await self.load_table(to_identifier)

    # -- namespaces ----------------------------------------------------------------------------
    async def _pages(
        self,
        endpoint: str,
        what: str,
        key: str,
        *,
        namespace: tuple[str, ...] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[list[Any]]:
        token: str | None = None
        while True:
            query = dict(params or {})
            if token:
                query["pageToken"] = token
            reply = await self._read(
                endpoint, what, _Failure(not_found=NamespaceNotFoundError), query or None, namespace=namespace
            )
            if not isinstance(reply, dict) or not isinstance(reply.get(key), list):
                raise InvalidMetadataError(f"{what}: the listing has no '{key}' list")
            yield reply[key]
            next_token = reply.get("next-page-token")
            if not next_token or not isinstance(next_token, str) or next_token == token:
                return
            token = next_token

    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=NamespaceAlreadyExistsError, write=True)
        body = {"namespace": list(ns), "properties": dict(properties or {})}
        await self._write(CREATE_NAMESPACE, what, failure, body)

    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        ns = _namespace(namespace)
        await self._ensure_config()
        try:
            if self._offers(NAMESPACE_EXISTS):
                what = f"REST namespace {'.'.join(ns)}"
                failure = _Failure(not_found=NamespaceNotFoundError)
                await self._read(NAMESPACE_EXISTS, what, failure, namespace=ns, head=True)
            else:
                await self.load_namespace_properties(ns)
        except NamespaceNotFoundError:
            return False
        return True

    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        return [".".join(levels) for levels in await self.list_namespace_levels(parent)]

    async def list_namespace_levels(self, parent: str | Sequence[str] = ()) -> list[tuple[str, ...]]:
        """As the service lists them: levels travel as JSON lists, so '.' inside one survives."""
        ns = _namespace(parent) if parent else ()
        what = f"REST namespaces under {'.'.join(ns) or 'the top level'}"
        params = {"parent": unquote(self._separator).join(ns)} if ns else {}
        found: list[tuple[str, ...]] = []
        async for page in self._pages(LIST_NAMESPACES, what, "namespaces", params=params):
            found.extend(_parts_of(item, what) for item in page)
        return sorted(found)

    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        reply = await self._read(
            LOAD_NAMESPACE, what, _Failure(not_found=NamespaceNotFoundError), namespace=ns
        )
        if not isinstance(reply, dict):
            raise InvalidMetadataError(f"{what}: the reply is not an object")
        return _string_map(reply.get("properties"), "properties", what)

    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        body = {"removals": list(removals), "updates": dict(updates or {})}
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=ValidationError, write=True)
        await self._write(UPDATE_NAMESPACE, what, failure, body, namespace=ns)
        return await self.load_namespace_properties(ns)

    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=NamespaceNotEmptyError, write=True)
        await self._write(DROP_NAMESPACE, what, failure, None, namespace=ns)

    # -- views ---------------------------------------------------------------------------------
    def _view(self, identifier: str | Sequence[str], reply: Any) -> View:
        what = f"REST view {identifier_text(identifier)}"
        if not isinstance(reply, dict) or not isinstance(reply.get("metadata-location"), str):
            raise InvalidMetadataError(f"{what}: the reply has no 'metadata-location'")
        try:
            metadata = view_metadata_from_dict(reply.get("metadata"))
        except InvalidMetadataError as exc:
            raise InvalidMetadataError(f"{what}: {exc}") from exc
        return View(identifier_text(identifier), reply["metadata-location"], metadata)

    async def create_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> View:
        """A new view where the server puts it (or at ``location``, when the server allows)."""
        namespace, name = _split_table(identifier)
        body: dict[str, Any] = {
            "name": name,
            "schema": schema_to_json(schema),
            "view-version": view_version_to_json(version),
            "properties": dict(properties or {}),
        }
        if location is not None:
            body["location"] = location
        what = f"REST view {identifier_text(identifier)}"
        failure = _Failure(not_found=NamespaceNotFoundError, conflict=ViewAlreadyExistsError, write=True)
        return self._view(
            identifier, await self._write(CREATE_VIEW, what, failure, body, namespace=namespace)
        )

    async def load_view(self, identifier: str | Sequence[str]) -> View:
        namespace, name = _split_table(identifier)
        what = f"REST view {identifier_text(identifier)}"
        failure = _Failure(not_found=ViewNotFoundError)
        return self._view(
            identifier, await self._read(LOAD_VIEW, what, failure, namespace=namespace, table=name)
        )

    async def view_exists(self, identifier: str | Sequence[str]) -> bool:
        namespace, name = _split_table(identifier)
        await self._ensure_config()
        try:
            if not self._offers(VIEW_EXISTS) and not self._offers(LOAD_VIEW):
                return False  # a server without views holds none
            if self._offers(VIEW_EXISTS):
                what = f"REST view {identifier_text(identifier)}"
                failure = _Failure(not_found=ViewNotFoundError)
                await self._read(VIEW_EXISTS, what, failure, namespace=namespace, table=name, head=True)
            else:
                await self.load_view(identifier)
        except (ViewNotFoundError, NamespaceNotFoundError):
            return False
        return True

    async def list_views(self, namespace: str | Sequence[str]) -> list[str]:
        ns = _namespace(namespace)
        what = f"REST namespace {'.'.join(ns)}"
        found: list[str] = []
        async for page in self._pages(LIST_VIEWS, what, "identifiers", namespace=ns):
            for item in page:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise InvalidMetadataError(f"{what}: bad view identifier {item!r} in the listing")
                found.append(".".join((*_parts_of(item.get("namespace"), what), item["name"])))
        return sorted(found)

    async def drop_view(self, identifier: str | Sequence[str]) -> None:
        namespace, name = _split_table(identifier)
        what = f"REST view {identifier_text(identifier)}"
        failure = _Failure(not_found=ViewNotFoundError, conflict=StoreError, write=True)
        await self._write(DROP_VIEW, what, failure, None, namespace=namespace, table=name)

    async def rename_view(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> View:
        source, source_name = _split_table(from_identifier)
        destination, destination_name = _split_table(to_identifier)
        body = {
            "source": {"namespace": list(source), "name": source_name},
            "destination": {"namespace": list(destination), "name": destination_name},
        }
        what = f"REST rename of view {identifier_text(from_identifier)} to {identifier_text(to_identifier)}"
        failure = _Failure(not_found=ViewNotFoundError, conflict=ViewAlreadyExistsError, write=True)
        await self._write(RENAME_VIEW, what, failure, body)
        return await self.load_view(to_identifier)

    async def _commit_view(self, view: View, updates: list[dict[str, Any]]) -> View:
        namespace, name = _split_table(view.identifier)
        body = {
            "requirements": [{"type": "assert-view-uuid", "uuid": view.metadata.view_uuid}],
            "updates": updates,
        }
        what = f"REST view {view.identifier}"
        failure = _Failure(not_found=ViewNotFoundError, conflict=CommitFailedError, write=True)
        reply = await self._write(REPLACE_VIEW, what, failure, body, namespace=namespace, table=name)
        return self._view(view.identifier, reply)

    async def replace_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
    ) -> View:
        """A new current version, its ids chosen by the server (Java's replace)."""
        view = await self.load_view(identifier)
        after = {**view.metadata.properties, **(properties or {})}
        check_dialects_kept(view.identifier, view.metadata.current_version, version, after)
        version_json = {**view_version_to_json(version), "schema-id": -1}
        updates: list[dict[str, Any]] = [
            {"action": "add-schema", "schema": schema_to_json(schema)},
            {"action": "add-view-version", "view-version": version_json},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
        if properties:
            updates.append({"action": "set-properties", "updates": dict(properties)})
        return await self._commit_view(view, updates)

    async def commit_view(self, view: View, metadata: ViewMetadata) -> View:
        """Send what ``metadata`` changes against ``view`` as the protocol's updates."""
        base, new = view_metadata_to_dict(view.metadata), view_metadata_to_dict(metadata)
        if base["view-uuid"] != new["view-uuid"]:
            raise ValidationError(f"view {view.identifier}: the new metadata is of another view")
        check_dialects_kept(
            view.identifier, view.metadata.current_version, metadata.current_version, metadata.properties
        )
        updates: list[dict[str, Any]] = []
        if base["location"] != new["location"]:
            updates.append({"action": "set-location", "location": new["location"]})
        removed = sorted(set(base["properties"]) - set(new["properties"]))
        if removed:
            updates.append({"action": "remove-properties", "removals": removed})
        changed = {k: v for k, v in new["properties"].items() if base["properties"].get(k) != v}
        if changed:
            updates.append({"action": "set-properties", "updates": changed})
        known_schemas = {s["schema-id"] for s in base["schemas"]}
        updates += [
            {"action": "add-schema", "schema": s}
            for s in new["schemas"]
            if s["schema-id"] not in known_schemas
        ]
        known_versions = {v["version-id"] for v in base["versions"]}
        updates += [
            {"action": "add-view-version", "view-version": v}
            for v in new["versions"]
            if v["version-id"] not in known_versions
        ]
        if base["current-version-id"] != new["current-version-id"]:
            updates.append(
                {"action": "set-current-view-version", "view-version-id": new["current-version-id"]}
            )
        return await self._commit_view(view, updates)

    async def check_view_location(self, identifier: str | Sequence[str], location: str) -> None:
        """The server judges locations."""
        return None


def _string_map(value: Any, key: str, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidMetadataError(f"{what}: '{key}' must be an object")
    return {str(k): str(v) for k, v in value.items() if v is not None}


def _parts_of(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise InvalidMetadataError(f"{what}: bad namespace {value!r} in the listing")
    return tuple(value)
