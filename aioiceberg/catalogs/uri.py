"""Which catalog a ``connect()`` URI names: a warehouse root, or a catalog service.

The service catalogs are imported only when used (each pulls in its client library).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from aioiceberg.extras import require

if TYPE_CHECKING:
    from aioiceberg.catalogs.base import Catalog
    from aioiceberg.runtime import Runtime

__all__ = ["SERVICE_SCHEMES", "CatalogFactory", "catalog_class"]

SERVICE_SCHEMES: dict[str, str] = {
    "glue": "aioiceberg.catalogs.glue:GlueCatalog",
    "s3tables": "aioiceberg.catalogs.s3tables:S3TablesCatalog",
    "sqlite": "aioiceberg.catalogs.sql:SqlCatalog",
    "postgresql": "aioiceberg.catalogs.sql:SqlCatalog",
    "postgres": "aioiceberg.catalogs.sql:SqlCatalog",
    "rest+http": "aioiceberg.catalogs.rest:RestCatalog",
    "rest+https": "aioiceberg.catalogs.rest:RestCatalog",
}
"""URI scheme -> the catalog class that serves it (``module:Class``)."""

NEEDS: dict[str, tuple[str, str]] = {
    "glue": ("aiobotocore", "s3"),
    "s3tables": ("aiobotocore", "s3"),
    "rest+http": ("aiohttp", "rest"),
    "rest+https": ("aiohttp", "rest"),
    "postgresql": ("asyncpg", "postgres"),
    "postgres": ("asyncpg", "postgres"),
}
"""URI scheme -> the optional library its catalog needs and the extra that installs it."""


class CatalogFactory(Protocol):
    def from_uri(
        self,
        uri: str,
        *,
        warehouse: str | None,
        storage_options: Mapping[str, Any] | None,
        runtime: Runtime | None,
    ) -> Catalog: ...


def catalog_class(uri: str) -> CatalogFactory | None:
    """The service catalog ``uri`` names, or None for a warehouse root (a path or a store URL)."""
    # the scheme ends at the first ':' ("s3tables:arn:...", "glue://"): a later "://" may be
    # an option's URL ("s3tables:arn:...?endpoint=http://host")
    scheme, sep, _ = uri.partition(":")
    if not sep:
        return None
    target = SERVICE_SCHEMES.get(scheme.lower())
    if target is None:
        return None
    if scheme.lower() in NEEDS:
        library, extra = NEEDS[scheme.lower()]
        require(library, extra, f"the {scheme.lower()} catalog")
    module, _, name = target.partition(":")
    factory: CatalogFactory = getattr(importlib.import_module(module), name)
    return factory
