"""Views in the Glue catalog, on moto's Glue and S3: kept as Java's Hive catalog keeps them
(``VIRTUAL_VIEW`` entries with ``table_type=ICEBERG-VIEW`` and ``metadata_location``), one
name space with tables, commits guarded by the file read, and served by ``aioiceberg serve``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from glue_helpers import fresh_database, glue_database, glue_entry
from pyiceberg.catalog import load_catalog
from servers.backends import create_bucket
from servers.rest import request_json_async, serve_in_process

import aioiceberg
from aioiceberg.catalogs.glue import GlueCatalog
from aioiceberg.errors import (
    CommitFailedError,
    LocationNotAllowedError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ViewAlreadyExistsError,
    ViewDialectDroppedError,
    ViewNotFoundError,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField
from aioiceberg.spec.view_metadata import SqlRepresentation, ViewVersion
from aioiceberg.view import ViewCatalog

pytestmark = pytest.mark.usefixtures("aws_clients_closed")

SCHEMA = Schema(NestedField(1, "id", LongType(), False))


def version(sql: str, ts: int = 1000, *dialects: str) -> ViewVersion:
    representations = tuple(SqlRepresentation(sql, d) for d in dialects or ("spark",))
    return ViewVersion(1, ts, 0, {"engine-name": "test"}, representations, ("db",))


async def _metadata_files(catalog: GlueCatalog, location: str) -> list[str]:
    prefix = f"{location}/metadata/"
    return sorted([info.location async for info in catalog.io_for(prefix).list(prefix)])


@pytest.mark.anyio
async def test_views_share_the_name_space_with_tables(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, warehouse, db):
        assert isinstance(catalog, ViewCatalog)
        await catalog.create_table(f"{db}.t", SCHEMA)
        view = await catalog.create_view(f"{db}.v", SCHEMA, version("SELECT id FROM t"), {"owner": "a"})
        assert view.identifier == f"{db}.v"
        assert view.metadata_location.startswith(f"{warehouse}/{db}.db/v/metadata/00000-")
        entry = await glue_entry(catalog, db, "v")
        assert entry["TableType"] == "VIRTUAL_VIEW"
        assert entry["Parameters"]["table_type"] == "ICEBERG-VIEW"
        assert entry["Parameters"]["metadata_location"] == view.metadata_location
        assert entry["Parameters"]["owner"] == "a"
        assert entry["ViewOriginalText"] == "SELECT id FROM t"
        assert entry["StorageDescriptor"]["Location"] == f"{warehouse}/{db}.db/v"
        assert [c["Name"] for c in entry["StorageDescriptor"]["Columns"]] == ["id"]

        assert await catalog.list_tables(db) == [f"{db}.t"]
        assert await catalog.list_views(db) == [f"{db}.v"]
        assert await catalog.view_exists(f"{db}.v") and not await catalog.view_exists(f"{db}.t")
        assert not await catalog.table_exists(f"{db}.v")
        assert (await catalog.load_view(f"{db}.v")).metadata == view.metadata
        with pytest.raises(ViewAlreadyExistsError, match="a table of that name"):
            await catalog.create_view(f"{db}.t", SCHEMA, version("SELECT 1"))
        with pytest.raises(ViewAlreadyExistsError, match="a view of that name"):
            await catalog.create_view(f"{db}.v", SCHEMA, version("SELECT 1"))
        with pytest.raises(TableAlreadyExistsError, match="a view of that name"):
            await catalog.create_table(f"{db}.v", SCHEMA)
        with pytest.raises(ViewAlreadyExistsError):
            await catalog.rename_view(f"{db}.v", f"{db}.t")
        with pytest.raises(TableAlreadyExistsError):
            await catalog.rename_table(f"{db}.t", f"{db}.v")
        with pytest.raises(ViewNotFoundError, match="holds a table"):
            await catalog.load_view(f"{db}.t")
        with pytest.raises(ViewNotFoundError):
            await catalog.drop_view(f"{db}.t")
        with pytest.raises(TableNotFoundError):
            await catalog.load_table(f"{db}.v")
        with pytest.raises(TableNotFoundError):
            await catalog.drop_table(f"{db}.v")
        with pytest.raises(NamespaceNotFoundError):
            await catalog.create_view("nowhere.v", SCHEMA, version("SELECT 1"))
        with pytest.raises(NamespaceNotFoundError):
            await catalog.list_views("nowhere")

        # PyIceberg's Glue catalog lists the view as no table either
        py = load_catalog(
            "py",
            type="glue",
            **{"glue.endpoint": moto_endpoint, "glue.region": "us-east-1"},
            **{"glue.access-key-id": "testing", "glue.secret-access-key": "testing"},
        )
        assert py.list_tables(db) == [(db, "t")]

        await catalog.drop_table(f"{db}.t")
        with pytest.raises(NamespaceNotEmptyError):
            await catalog.drop_namespace(db)
        await catalog.drop_view(f"{db}.v")
        assert await catalog.list_views(db) == [] and not await catalog.view_exists(f"{db}.v")
        with pytest.raises(ViewNotFoundError):
            await catalog.drop_view(f"{db}.v")
        await catalog.drop_namespace(db)


@pytest.mark.anyio
async def test_replace_and_commits_guarded_by_the_file_read(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, _, db):
        created = await catalog.create_view(f"{db}.v", SCHEMA, version("SELECT 1 AS id"), {"k": "1"})
        second = await catalog.load_view(f"{db}.v")
        replaced = await catalog.replace_view(f"{db}.v", SCHEMA, version("SELECT 2 AS id", 2000), {"j": "2"})
        assert "/metadata/00001-" in replaced.metadata_location
        assert replaced.metadata.current_version_id == 2 and replaced.sql == "SELECT 2 AS id"
        assert [e.version_id for e in replaced.metadata.version_log] == [1, 2]
        entry = await glue_entry(catalog, db, "v")
        assert entry["Parameters"]["metadata_location"] == replaced.metadata_location
        assert entry["Parameters"]["previous_metadata_location"] == created.metadata_location
        assert entry["ViewOriginalText"] == "SELECT 2 AS id"

        # the same query again: the earlier version becomes current, no new version
        again = await catalog.replace_view(f"{db}.v", SCHEMA, version("SELECT 1 AS id", 3000))
        assert again.metadata.current_version_id == 1 and len(again.metadata.versions) == 2

        # a property the view no longer has leaves the entry's Parameters too
        md = again.metadata
        trimmed = await catalog.commit_view(again, replace(md, properties={"k": "1"}))
        parameters = (await glue_entry(catalog, db, "v"))["Parameters"]
        assert parameters["k"] == "1" and "j" not in parameters

        # a writer that read an older file is refused, and its file is not left behind
        before = await _metadata_files(catalog, md.location)
        with pytest.raises(CommitFailedError, match="moved on"):
            await catalog.commit_view(second, replaced.metadata)
        assert await _metadata_files(catalog, md.location) == before
        assert (await catalog.load_view(f"{db}.v")).metadata_location == trimmed.metadata_location

        await catalog.drop_view(f"{db}.v")
        with pytest.raises(CommitFailedError, match="dropped"):
            await catalog.commit_view(trimmed, replaced.metadata)
        with pytest.raises(ViewNotFoundError):
            await catalog.replace_view(f"{db}.v", SCHEMA, version("SELECT 3 AS id"))


@pytest.mark.anyio
async def test_rename_locations_and_dialects(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, warehouse, db):
        other = fresh_database()
        await catalog.create_namespace(other)
        view = await catalog.create_view(f"{db}.v", SCHEMA, version("SELECT 1 AS id", 1000, "spark", "trino"))
        moved = await catalog.rename_view(f"{db}.v", f"{other}.w")
        assert moved.identifier == f"{other}.w" and moved.metadata_location == view.metadata_location
        assert await catalog.list_views(db) == [] and await catalog.list_views(other) == [f"{other}.w"]
        assert (await glue_entry(catalog, other, "w"))["TableType"] == "VIRTUAL_VIEW"
        with pytest.raises(ViewNotFoundError):
            await catalog.rename_view(f"{db}.v", f"{db}.x")
        with pytest.raises(NamespaceNotFoundError):
            await catalog.rename_view(f"{other}.w", "nowhere.x")
        assert await catalog.view_exists(f"{other}.w")

        # a replace that drops a dialect is refused unless the view allows it
        with pytest.raises(ViewDialectDroppedError, match=rf"{other}\.w.*trino") as err:
            await catalog.replace_view(f"{other}.w", SCHEMA, version("SELECT 2 AS id", 2000, "spark"))
        assert err.value.dropped == ["trino"]
        assert (await catalog.load_view(f"{other}.w")).metadata_location == view.metadata_location
        allowed = await catalog.replace_view(
            f"{other}.w",
            SCHEMA,
            version("SELECT 2 AS id", 2000, "spark"),
            {"replace.drop-dialect.allowed": "true"},
        )
        assert allowed.metadata.current_version.sql_for("trino") is None

        outside = f"s3://{await create_bucket(moto_endpoint)}/elsewhere"
        for location in (outside, f"{warehouse}/../x", warehouse):
            with pytest.raises(LocationNotAllowedError):
                await catalog.create_view(f"{db}.v", SCHEMA, version("SELECT 1"), location=location)
        await catalog.create_table(f"{db}.t", SCHEMA)
        with pytest.raises(LocationNotAllowedError, match=rf"nests with glue table {db}\.t"):
            await catalog.create_view(
                f"{db}.v", SCHEMA, version("SELECT 1"), location=f"{warehouse}/{db}.db/t/v"
            )
        with pytest.raises(LocationNotAllowedError, match=rf"nests with glue view {other}\.w"):
            await catalog.create_view(
                f"{db}.v", SCHEMA, version("SELECT 1"), location=f"{allowed.metadata.location}/inner"
            )
        assert await catalog.list_views(db) == []


@pytest.mark.anyio
async def test_glue_views_through_the_server(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, _, db):
        async with serve_in_process(catalog) as url:
            status, config = await request_json_async(url, "GET", "/v1/config")
            assert status == 200 and "POST /v1/{prefix}/views/rename" in config["endpoints"]
            async with aioiceberg.connect(f"rest+{url}") as client:
                assert isinstance(client, ViewCatalog)
                created = await client.create_view(f"{db}.v", SCHEMA, version("SELECT 1 AS id"))
                assert await client.list_views(db) == [f"{db}.v"]
                replaced = await client.replace_view(f"{db}.v", SCHEMA, version("SELECT 2 AS id", 2000))
                assert replaced.metadata.current_version_id == 2
                assert replaced.metadata.view_uuid == created.metadata.view_uuid
            status, answer = await request_json_async(url, "GET", f"/v1/namespaces/{db}/views/v")
            assert status == 200 and answer["metadata-location"] == replaced.metadata_location
        assert (await catalog.load_view(f"{db}.v")).metadata_location == replaced.metadata_location
