"""Catalogs: the warehouse root (``aioiceberg.catalog``) and the catalog services users already have."""

from aioiceberg.catalogs.base import Catalog

__all__ = ["Catalog"]
