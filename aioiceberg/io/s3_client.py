"""AWS client options and the one-client-per-event-loop registry (S3, DynamoDB, ...).

aiobotocore clients hold an aiohttp connection pool bound to the loop that created
them, so a runtime's registry caches them per (running loop, service, options), shared
by all the loop's tasks, and closes them when the loop shuts down. Every service gets
the same no-resend HTTP session and SDK retries switched off: a conditional write (S3
PUT, DynamoDB PutItem) must never be repeated blindly.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from aioiceberg.extras import require
from aioiceberg.retrying import Backoff

_ALIASES: dict[str, tuple[str, ...]] = {
    "endpoint_url": ("s3.endpoint", "endpoint_url", "endpoint", "client_kwargs.endpoint_url"),
    "region": ("s3.region", "region", "region_name", "client.region"),
    "access_key_id": ("s3.access-key-id", "aws_access_key_id", "key", "access_key_id"),
    "secret_access_key": ("s3.secret-access-key", "aws_secret_access_key", "secret", "secret_access_key"),
    "session_token": ("s3.session-token", "aws_session_token", "token", "session_token"),
    "profile": ("s3.profile-name", "profile", "profile_name"),
    "path_style": ("s3.path-style-access", "path_style", "s3.force-virtual-addressing"),
    "max_concurrency": ("s3.max-concurrency", "max_concurrency"),
    "max_attempts": ("s3.retry-max-attempts", "retry_max_attempts"),
    "connect_timeout": ("s3.connect-timeout", "connect_timeout"),
    "read_timeout": ("s3.read-timeout", "read_timeout"),
}


STORE_REQUESTS = Backoff("store request", base_delay_s=0.05, max_delay_s=5.0, max_attempts=10)
"""The default policy of an object store's calls (``s3.retry-max-attempts`` sets its attempts)."""

S3_OPTION_ALIASES = _ALIASES
"""Every storage-option spelling the S3 client understands, by setting."""


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class S3Options:
    """Explicit overrides; anything left ``None`` comes from the standard AWS configuration."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile: str | None = None
    path_style: bool | None = None
    max_concurrency: int = 64
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    backoff: Backoff = STORE_REQUESTS

    @classmethod
    def from_storage_options(cls, options: Mapping[str, Any] | None) -> S3Options:
        """Accept PyIceberg-style (``s3.endpoint``) and boto-style (``endpoint_url``) keys."""
        found: dict[str, Any] = {}
        for name, keys in _ALIASES.items():
            for key in keys:
                if options and key in options and options[key] is not None:
                    found[name] = options[key]
                    if key == "s3.force-virtual-addressing":
                        found[name] = not _truthy(options[key])
                    break
        attempts = int(found.pop("max_attempts", STORE_REQUESTS.max_attempts))
        backoff = replace(STORE_REQUESTS, max_attempts=attempts)
        if "path_style" in found and not isinstance(found["path_style"], bool):
            found["path_style"] = _truthy(found["path_style"])
        for name, kind in (("max_concurrency", int), ("connect_timeout", float), ("read_timeout", float)):
            if name in found:
                found[name] = kind(found[name])
        return cls(backoff=backoff, **found)

    def client_key(self) -> tuple[object, ...]:
        return (
            self.endpoint_url,
            self.region,
            self.access_key_id,
            self.secret_access_key,
            self.session_token,
            self.profile,
            self.path_style,
            self.max_concurrency,
            self.connect_timeout,
            self.read_timeout,
        )


class _LoopClients:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.clients: dict[tuple[object, ...], tuple[Any, Any]] = {}  # key -> (context, client)
        self.holders: dict[tuple[object, ...], set[int]] = {}  # key -> ids of objects using it
        self.closer: AsyncGenerator[None] | None = None

    async def close(self) -> None:
        clients, self.clients = self.clients, {}
        self.holders.clear()
        for context, _client in clients.values():
            await context.__aexit__(None, None, None)


async def _closed_at_loop_shutdown(
    registry: ClientRegistry, loop: asyncio.AbstractEventLoop
) -> AsyncGenerator[None]:
    """Parked at its ``yield`` for the loop's lifetime: ``asyncio.run`` (and every runner that
    calls ``loop.shutdown_asyncgens()``) closes it before closing the loop, and its clean-up
    closes the loop's clients while the loop still runs. No "Unclosed client session" at exit."""
    try:
        yield
    finally:
        entry = registry._loops.pop(loop, None)
        if entry is not None:
            await entry.close()


class ClientRegistry:
    """aiobotocore clients, one per (running loop, service, options), shared by all the loop's
    tasks; owned by a :class:`~aioiceberg.runtime.Runtime`."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopClients] = (
            weakref.WeakKeyDictionary()
        )

    def _entry(self) -> _LoopClients:
        loop = asyncio.get_running_loop()
        entry = self._loops.get(loop)
        if entry is None:
            entry = self._loops[loop] = _LoopClients()
        return entry

    async def get(self, options: S3Options, service: str = "s3", holder: object | None = None) -> Any:
        """The shared client of ``service`` for the running loop and these options.

        A ``holder`` (e.g. a FileIO) is counted as a user: :meth:`release` closes the client
        only when its last holder lets go, so closing one catalog never breaks another's requests.
        """
        entry = self._entry()
        if entry.closer is None:
            # its first step registers it with the loop for shutdown_asyncgens, then parks
            entry.closer = _closed_at_loop_shutdown(self, asyncio.get_running_loop())
            await entry.closer.__anext__()
        key = (service, *options.client_key())
        if holder is not None:
            entry.holders.setdefault(key, set()).add(id(holder))
        found = entry.clients.get(key)
        if found is not None:
            return found[1]
        async with entry.lock:
            found = entry.clients.get(key)
            if found is not None:
                return found[1]
            context = _create_client_context(options, service)
            client = await context.__aenter__()
            entry.clients[key] = (context, client)
            return client

    async def release(self, holder: object, options: S3Options, service: str = "s3") -> None:
        """``holder`` is done with this loop's client; close it if no other holder uses it."""
        entry = self._loops.get(asyncio.get_running_loop())
        if entry is None:
            return
        key = (service, *options.client_key())
        holders = entry.holders.get(key)
        if holders is None:
            return
        holders.discard(id(holder))
        if not holders:
            del entry.holders[key]
            found = entry.clients.pop(key, None)
            if found is not None:
                await found[0].__aexit__(None, None, None)

    async def close_loop(self) -> None:
        """Close every client (any service) opened on the running loop."""
        entry = self._loops.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry.close()


def _no_resend_session_cls() -> type[Any]:
    """aiohttp (>= 3.10) silently resends an idempotent-method request (PUT, DELETE) once when
    the connection drops; for a conditional PUT that turns "landed, response lost" into a
    false 412. Switch that off: every retry belongs to aioiceberg.retrying."""
    from aiobotocore.httpsession import AIOHTTPSession  # aiobotocore: optional (the s3 extra)

    class NoResendAIOHTTPSession(AIOHTTPSession):  # type: ignore[misc]
        async def _get_session(self, proxy_url: Any) -> Any:
            session = await super()._get_session(proxy_url)
            if getattr(session, "_retry_connection", False):
                session._retry_connection = False
            return session

    return NoResendAIOHTTPSession


def iso_timestamp(value: Any) -> datetime:
    """A response timestamp: ISO 8601 (S3's XML, ``2026-11-19T13:25:08.000Z``) by
    ``datetime.fromisoformat``, any other form by botocore's own parser. botocore's goes
    through dateutil's generic parser, ~50 us a listed key: half of a listing's CPU time."""
    if isinstance(value, str) and len(value) >= 20 and value[10] == "T" and value[4] == "-":
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    # botocore: optional (the s3 extra); imported on this path only (~1 us a call otherwise)
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)  # type: ignore[no-any-return]


def _create_client_context(options: S3Options, service: str) -> Any:
    require("aiobotocore", "s3", f"the AWS {service} client")
    # aiobotocore: optional (the s3 extra)
    from aiobotocore.config import AioConfig
    from aiobotocore.session import AioSession

    from aioiceberg.io.s3_xml import install_fast_listing  # aiobotocore: optional (the s3 extra)

    session = AioSession(profile=options.profile) if options.profile else AioSession()
    # this session's parsers only: listing pages parsed from compiled shapes, fast timestamps
    install_fast_listing(session)
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
    s3_config: dict[str, str] = {}
    if options.path_style is not None:
        s3_config["addressing_style"] = "path" if options.path_style else "virtual"
    config = AioConfig(
        max_pool_connections=options.max_concurrency,
        connect_timeout=options.connect_timeout,
        read_timeout=options.read_timeout,
        # Retries live in aioiceberg.retrying: the SDK must never repeat a conditional PUT.
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3=(s3_config or None) if service == "s3" else None,
        http_session_cls=_no_resend_session_cls(),
    )
    kwargs: dict[str, Any] = {"config": config}
    if options.endpoint_url:
        kwargs["endpoint_url"] = options.endpoint_url
    if options.region:
        kwargs["region_name"] = options.region
    elif service != "s3" and not (os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")):
        # S3 resolves a bucket's region itself; regional services refuse to start without one
        kwargs["region_name"] = "us-east-1"
    if options.access_key_id and options.secret_access_key:
        kwargs["aws_access_key_id"] = options.access_key_id
        kwargs["aws_secret_access_key"] = options.secret_access_key
        if options.session_token:
            kwargs["aws_session_token"] = options.session_token
    return session.create_client(service, **kwargs)
