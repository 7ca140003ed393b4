"""Views in the SQL catalog (Java's and PyIceberg's ``iceberg_type = 'VIEW'`` rows), on SQLite
and PostgreSQL: one name space with tables, metadata files under the view's location,
commits guarded like a table's, and the failures a shared database can show."""

from __future__ import annotations

import gzip
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from servers.postgres import PostgresServer

from aioiceberg.catalogs.sql import SqlCatalog
from aioiceberg.errors import (
    CommitFailedError,
    CorruptFileError,
    LocationNotAllowedError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    UnsupportedError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField
from aioiceberg.spec.view_metadata import SqlRepresentation, ViewVersion

SCHEMA = Schema(NestedField(1, "id", LongType(), False))


def version(sql: str, ts: int = 1000) -> ViewVersion:
    return ViewVersion(1, ts, 0, {"engine-name": "test"}, (SqlRepresentation(sql, "spark"),), ("ns",))


@pytest.fixture(params=["sqlite", "postgres"])
async def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlCatalog]:
    if request.param == "sqlite":
        database = str(tmp_path / "catalog.db")
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        database = pg.uri(pg.create_database())
    found = SqlCatalog(database, warehouse=str(tmp_path / "wh"))
    async with found:
        await found.create_namespace("ns")
        yield found


@pytest.mark.anyio
async def test_views_share_the_name_space_with_tables(catalog: SqlCatalog) -> None:
    await catalog.create_table("ns.t", SCHEMA)
    view = await catalog.create_view("ns.v", SCHEMA, version("SELECT id FROM t"))
    assert view.metadata_location.startswith(f"{catalog.warehouse}/ns/v/metadata/00000-")
    assert await catalog.list_tables("ns") == ["ns.t"]
    assert await catalog.list_views("ns") == ["ns.v"]
    assert not await catalog.table_exists("ns.v") and not await catalog.view_exists("ns.t")
    with pytest.raises(ViewAlreadyExistsError, match="a table of that name"):
        await catalog.create_view("ns.t", SCHEMA, version("SELECT 1"))
    with pytest.raises(TableAlreadyExistsError, match="a view of that name"):
        await catalog.create_table("ns.v", SCHEMA)
    with pytest.raises(ViewAlreadyExistsError):
        await catalog.rename_view("ns.v", "ns.t")
    with pytest.raises(TableAlreadyExistsError):
        await catalog.rename_table("ns.t", "ns.v")
    with pytest.raises(ViewNotFoundError):
        await catalog.load_view("ns.t")
    with pytest.raises(NamespaceNotFoundError):
        await catalog.create_view("nowhere.v", SCHEMA, version("SELECT 1"))
    with pytest.raises(NamespaceNotEmptyError):
        await catalog.drop_table("ns.t")
        await catalog.drop_namespace("ns")
    await catalog.drop_view("ns.v")
    await catalog.drop_namespace("ns")


@pytest.mark.anyio
async def test_commits_are_guarded_by_the_file_read(catalog: SqlCatalog) -> None:
    await catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id"))
    first, second = await catalog.load_view("ns.v"), await catalog.load_view("ns.v")
    replaced = await catalog.replace_view("ns.v", SCHEMA, version("SELECT 2 AS id", 2000))
    assert "/metadata/00001-" in replaced.metadata_location
    assert replaced.metadata.current_version_id == 2
    stale = replaced.metadata
    metadata_dir = Path(f"{catalog.warehouse}/ns/v/metadata")
    before = sorted(metadata_dir.glob("*.metadata.json"))
    with pytest.raises(CommitFailedError, match="moved on"):
        await catalog.commit_view(second, stale)
    assert sorted(metadata_dir.glob("*.metadata.json")) == before  # the loser's file is gone
    assert (await catalog.load_view("ns.v")).metadata_location == replaced.metadata_location
    assert first.metadata.current_version_id == 1


@pytest.mark.anyio
async def test_locations_are_confined(catalog: SqlCatalog, tmp_path: Path) -> None:
    for location in (str(tmp_path / "elsewhere"), f"{catalog.warehouse}/../x", str(catalog.warehouse)):
        with pytest.raises(LocationNotAllowedError):
            await catalog.create_view("ns.v", SCHEMA, version("SELECT 1"), location=location)
    await catalog.create_table("ns.t", SCHEMA)
    with pytest.raises(LocationNotAllowedError, match=r"nests with table ns\.t"):
        await catalog.create_view("ns.v", SCHEMA, version("SELECT 1"), location=f"{catalog.warehouse}/ns/t/v")
    assert await catalog.list_views("ns") == []


@pytest.mark.anyio
async def test_damaged_view_file_and_old_schema(tmp_path: Path) -> None:
    database = tmp_path / "catalog.db"
    catalog = SqlCatalog(str(database), warehouse=str(tmp_path / "wh"))
    async with catalog:
        await catalog.create_namespace("ns")
        view = await catalog.create_view("ns.v", SCHEMA, version("SELECT 1"))
        Path(view.metadata_location).write_bytes(b'{"format-version": 1, "view-uuid": ')
        with pytest.raises(CorruptFileError) as err:
            await catalog.load_view("ns.v")
        assert view.metadata_location in str(err.value)
    old = tmp_path / "old.db"  # PyIceberg's first schema: no iceberg_type column
    with sqlite3.connect(old) as conn:
        conn.execute(
            "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
            "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
            "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        )
    conn.close()
    catalog = SqlCatalog(str(old), warehouse=str(tmp_path / "wh-old"))
    async with catalog:
        await catalog.create_namespace("ns")
        assert await catalog.list_views("ns") == []
        with pytest.raises(UnsupportedError, match="iceberg_type"):
            await catalog.create_view("ns.v", SCHEMA, version("SELECT 1"))


@pytest.mark.anyio
async def test_gzip_view_metadata_reads(tmp_path: Path) -> None:
    """Java writes view metadata gzip-compressed by default (``write.metadata.compression-codec``)."""
    catalog = SqlCatalog(str(tmp_path / "catalog.db"), warehouse=str(tmp_path / "wh"))
    async with catalog:
        await catalog.create_namespace("ns")
        view = await catalog.create_view("ns.v", SCHEMA, version("SELECT 1"))
        plain = Path(view.metadata_location).read_bytes()
        Path(view.metadata_location).write_bytes(gzip.compress(plain))
        assert (await catalog.load_view("ns.v")).metadata == view.metadata
        Path(view.metadata_location).write_bytes(gzip.compress(plain)[:-12])
        with pytest.raises(CorruptFileError, match="gzip"):
            await catalog.load_view("ns.v")
