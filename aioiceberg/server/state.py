"""What every handler of one server shares: the catalog it serves, the table config it hands
out, and who may use it."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from aioiceberg.catalogs.base import Catalog
from aioiceberg.server.auth import AuthConfig

__all__ = ["SERVED", "Served", "served"]


@dataclass(frozen=True, slots=True)
class Served:
    """The one catalog (and its runtime) of a server process, closed with the application."""

    catalog: Catalog
    #: returned as ``config`` with every table (client FileIO settings, say), the same for all
    table_config: dict[str, str] = field(default_factory=dict)
    #: principals and grants; ``None`` serves everyone (loopback only, see ``run.serve``)
    auth: AuthConfig | None = None
    #: ``Host`` names accepted besides the address a connection arrived on (a proxy's name)
    allowed_hosts: tuple[str, ...] = ()


SERVED = web.AppKey("served", Served)


def served(request: web.Request) -> Served:
    return request.app[SERVED]
