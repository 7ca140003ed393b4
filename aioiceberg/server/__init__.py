"""An Iceberg REST catalog server over any :class:`~aioiceberg.catalogs.base.Catalog`
(``aioiceberg serve``); needs aiohttp (``pip install 'aioiceberg[server]'``)."""

from aioiceberg.extras import require

require("aiohttp", "server", "aioiceberg.server (aioiceberg serve)")

from aioiceberg.server.app import ENDPOINTS, make_app  # noqa: E402
from aioiceberg.server.run import run_server, serve  # noqa: E402

__all__ = ["ENDPOINTS", "make_app", "run_server", "serve"]
