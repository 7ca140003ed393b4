"""Glue catalogs on the suite's moto server (Glue and S3 on one endpoint), for the Glue
catalog's tests: a fresh bucket for the warehouse and a fresh database per test, since moto's
Glue lives as long as the session's server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.catalogs.glue import GlueCatalog

__all__ = ["fresh_database", "glue_catalog", "glue_database", "glue_entry", "glue_options"]


def glue_options(endpoint: str) -> dict[str, str]:
    """Storage options reaching moto's S3 and Glue at ``endpoint``."""
    return {**s3_storage_options(endpoint), "glue.endpoint": endpoint}


def fresh_database() -> str:
    return f"db_{uuid.uuid4().hex[:10]}"


async def glue_catalog(endpoint: str, **extra: str) -> tuple[GlueCatalog, str]:
    """A Glue catalog whose warehouse is a new bucket, and that warehouse."""
    warehouse = f"s3://{await create_bucket(endpoint)}/wh"
    catalog = aioiceberg.connect(
        "glue://", warehouse=warehouse, storage_options={**glue_options(endpoint), **extra}
    )
    assert isinstance(catalog, GlueCatalog)
    return catalog, warehouse


@asynccontextmanager
async def glue_database(endpoint: str, **extra: str) -> AsyncIterator[tuple[GlueCatalog, str, str]]:
    """(catalog, warehouse, database): an open catalog as :func:`glue_catalog` makes it, with a
    new database created in it."""
    catalog, warehouse = await glue_catalog(endpoint, **extra)
    database = fresh_database()
    async with catalog:
        await catalog.create_namespace(database)
        yield catalog, warehouse, database


async def glue_entry(catalog: GlueCatalog, database: str, name: str) -> dict[str, Any]:
    """The Glue entry (table or view) as GetTable returns it; it must exist."""
    found = await catalog.glue.get_table(database, name)
    assert found is not None
    return found
