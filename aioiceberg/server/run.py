"""Running the server: bind, say where, serve until SIGINT / SIGTERM, close the catalog."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from aioiceberg.catalogs.base import Catalog
from aioiceberg.server.app import make_app

__all__ = ["run_server", "serve"]


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
) -> None:
    """Serve ``catalog`` until ``stop`` is set (or SIGINT / SIGTERM), then close it.

    ``port=0`` binds a free port; ``ready`` gets the URL once the server answers.
    """
    app = make_app(catalog, table_config=table_config)
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
) -> None:
    """``aioiceberg serve``: one event loop, one catalog over ``root`` (any ``connect`` URI;
    ``warehouse`` is where a catalog service puts new tables)."""
    from aioiceberg.catalog import connect

    async def main() -> None:
        catalog = connect(root, lock, storage_options or None, warehouse=warehouse)
        await serve(catalog, host, port, table_config=table_config, ready=ready)

    asyncio.run(main())
