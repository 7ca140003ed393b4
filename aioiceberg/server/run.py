"""Running the server: bind, say where, serve until SIGINT / SIGTERM, close the catalog."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from aioiceberg.catalog import connect
from aioiceberg.catalogs.base import Catalog
from aioiceberg.errors import ValidationError
from aioiceberg.server.app import make_app
from aioiceberg.server.auth import AuthConfig

__all__ = ["UnsafeBindError", "check_bind", "is_loopback", "run_server", "serve"]


class UnsafeBindError(ValidationError):
    """A server without authentication asked to listen beyond this machine."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (names other than ``localhost``
    are not resolved: they could point anywhere)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, auth: AuthConfig | None) -> None:
    """Refuse to listen beyond loopback without authentication."""
    if auth is None and not is_loopback(host):
        raise UnsafeBindError(
            f"refusing to serve on {host or 'every address'} without authentication: anyone who "
            "reaches it could change or delete every table; configure principals (--auth-file, "
            "AIOICEBERG_SERVE_TOKEN) or listen on 127.0.0.1"
        )


def _url(host: str, port: int) -> str:
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


async def serve(
    catalog: Catalog,
    host: str = "127.0.0.1",
    port: int = 8181,
    *,
    table_config: Mapping[str, str] | None = None,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    auth: AuthConfig | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve ``catalog`` until ``stop`` is set (or SIGINT / SIGTERM), then close it.

    ``port=0`` binds a free port; ``ready`` gets the URL once the server answers. Without
    ``auth`` only a loopback ``host`` is accepted: anyone who reaches the port could
    otherwise read, change and delete every table.
    """
    try:
        check_bind(host, auth)
    except UnsafeBindError:
        await catalog.aclose()
        raise
    app = make_app(catalog, table_config=table_config, auth=auth, allowed_hosts=allowed_hosts)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    try:
        await runner.setup()
    except BaseException:
        await catalog.aclose()
        raise
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1] if runner.addresses else port
        if stop is None:
            stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                handled.append(sig)
        if ready is not None:
            ready(_url(host, bound))
        try:
            await stop.wait()
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
    finally:
        await runner.cleanup()  # on_cleanup closes the catalog


def run_server(
    root: str,
    *,
    lock: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int = 8181,
    table_config: Mapping[str, str] | None = None,
    ready: Callable[[str], None] | None = None,
    warehouse: str | None = None,
    auth: AuthConfig | None = None,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """``aioiceberg serve``: one event loop, one catalog over ``root`` (any ``connect`` URI;
    ``warehouse`` is where a catalog service puts new tables)."""
    check_bind(host, auth)  # before opening the catalog

    async def main() -> None:
        catalog = connect(root, lock, storage_options or None, warehouse=warehouse)
        await serve(
            catalog,
            host,
            port,
            table_config=table_config,
            ready=ready,
            auth=auth,
            allowed_hosts=allowed_hosts,
        )

    asyncio.run(main())
