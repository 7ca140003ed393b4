"""An Iceberg REST catalog server over any :class:`~aioiceberg.catalogs.base.Catalog`
(``aioiceberg serve``); needs aiohttp (``pip install 'aioiceberg[server]'``)."""

from aioiceberg.server.app import ENDPOINTS, make_app
from aioiceberg.server.run import run_server, serve

__all__ = ["ENDPOINTS", "make_app", "run_server", "serve"]
