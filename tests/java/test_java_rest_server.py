"""Apache Iceberg's Java ``RESTCatalog`` as a client of ``aioiceberg serve``: Spark SQL's DDL
and DML land through our server, our clients (our REST client and the warehouse read
directly) see the same tables and rows, and our refusals reach Java as the exception its
REST client maps from the status (never ``ServiceFailureException``, Java's name for a 500).

One server process for the module over a fresh warehouse; each test its own catalog name
in the Java session and its own namespace, so no table is shared between tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio.to_thread
import pytest
from servers.java_spark import JavaPeerError, JavaSpark
from servers.rest import RestServer

import aioiceberg

pytestmark = pytest.mark.xdist_group("java")

COLUMNS = "id, region, v"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    with RestServer(str(tmp_path_factory.mktemp("java-rest") / "warehouse")) as rest:
        yield rest


def fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def java_catalog(java: JavaSpark, server: RestServer) -> str:
    """A catalog of its own in the Java session, over our server."""
    return java.catalog(fresh("rest"), type="rest", uri=server.url)


async def sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    """A statement on the Java peer, off the event loop."""
    return await anyio.to_thread.run_sync(java.sql, statement)


async def java_rows(java: JavaSpark, table: str, columns: str = COLUMNS) -> list[dict[str, Any]]:
    arrow = await anyio.to_thread.run_sync(java.arrow, f"SELECT {columns} FROM {table}")
    return sorted(arrow.to_pylist(), key=lambda r: r["id"])


async def our_rows(table: aioiceberg.Table, columns: str = COLUMNS) -> list[dict[str, Any]]:
    arrow = await table.scan(selected_fields=tuple(c.strip() for c in columns.split(","))).to_arrow()
    return sorted(arrow.to_pylist(), key=lambda r: r["id"])


def refused(excinfo: pytest.ExceptionInfo[JavaPeerError]) -> str:
    """What Java said, checked to be no server failure (a 500 would read ServiceFailure)."""
    text = f"{excinfo.value.kind}: {excinfo.value.message}"
    assert "ServiceFailure" not in text and "CommitStateUnknown" not in text, text
    return text


@pytest.mark.anyio
async def test_spark_ddl_and_dml_through_our_server(java_spark: JavaSpark, server: RestServer) -> None:
    cat = java_catalog(java_spark, server)
    ns = fresh("db")
    await sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await sql(
        java_spark,
        f"CREATE TABLE {cat}.{ns}.events (id bigint, region string, v double) USING iceberg "
        "PARTITIONED BY (region) TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    )
    # renamed before it has files Java wrote (see the next test for why)
    await sql(java_spark, f"ALTER TABLE {cat}.{ns}.events RENAME TO {ns}.renamed")
    assert await sql(java_spark, f"SHOW TABLES IN {cat}.{ns}") == [[ns, "renamed", False]]
    table = f"{cat}.{ns}.renamed"
    await sql(java_spark, f"INSERT INTO {table} VALUES (1,'eu',1.0),(2,'us',2.0),(3,'eu',3.0),(4,'ap',4.0)")
    await sql(java_spark, f"UPDATE {table} SET v = 10.0 WHERE id = 1")
    await sql(java_spark, f"DELETE FROM {table} WHERE id = 2")
    await sql(java_spark, f"ALTER TABLE {table} ADD COLUMN note string")
    await sql(java_spark, f"INSERT INTO {table} VALUES (5,'us',5.0,'late')")

    expected = [
        {"id": 1, "region": "eu", "v": 10.0, "note": None},
        {"id": 3, "region": "eu", "v": 3.0, "note": None},
        {"id": 4, "region": "ap", "v": 4.0, "note": None},
        {"id": 5, "region": "us", "v": 5.0, "note": "late"},
    ]
    columns = "id, region, v, note"
    assert await java_rows(java_spark, table, columns) == expected

    async with aioiceberg.connect(f"rest+{server.url}") as ours:
        assert ns in await ours.list_namespaces()
        assert await ours.list_tables(ns) == [f"{ns}.renamed"]
        assert not await ours.table_exists(f"{ns}.events")
        loaded = await ours.load_table(f"{ns}.renamed")
        assert [f.name for f in loaded.schema().fields] == ["id", "region", "v", "note"]
        assert [f.name for f in loaded.spec().fields] == ["region"]
        # merge-on-read: the UPDATE and DELETE left position deletes, which we apply
        operations = [str(s.summary.operation) for s in loaded.snapshots() if s.summary is not None]
        assert operations.count("overwrite") + operations.count("delete") == 2
        assert await our_rows(loaded, columns) == expected
        direct = await aioiceberg.load_table(loaded.metadata.location)
        assert direct.metadata_location == loaded.metadata_location
        assert await our_rows(direct, columns) == expected

        # our warehouse names a table's directory by its name, and position deletes hold
        # absolute paths: that rename is refused as unsupported, not failed
        with pytest.raises(JavaPeerError) as unsupported:
            await sql(java_spark, f"ALTER TABLE {table} RENAME TO {ns}.again")
        assert "UnsupportedOperationException" in refused(unsupported)

        await sql(java_spark, f"DROP TABLE {table}")
        assert await ours.list_tables(ns) == []
        assert await sql(java_spark, f"SHOW TABLES IN {cat}.{ns}") == []
        await sql(java_spark, f"DROP NAMESPACE {cat}.{ns}")
        assert ns not in await ours.list_namespaces()


@pytest.mark.anyio
async def test_our_refusals_reach_java_as_its_exceptions(java_spark: JavaSpark, server: RestServer) -> None:
    cat = java_catalog(java_spark, server)
    ns = fresh("db")
    await sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await sql(java_spark, f"CREATE TABLE {cat}.{ns}.t (id bigint, region string, v double) USING iceberg")
    await sql(java_spark, f"INSERT INTO {cat}.{ns}.t VALUES (1,'eu',1.0)")

    with pytest.raises(JavaPeerError) as missing:  # 404 NoSuchTableException
        await sql(java_spark, f"SELECT * FROM {cat}.{ns}.absent")
    assert "TABLE_OR_VIEW_NOT_FOUND" in refused(missing)
    with pytest.raises(JavaPeerError) as no_namespace:  # 404 NoSuchNamespaceException
        await sql(java_spark, f"CREATE TABLE {cat}.{fresh('nowhere')}.t (id bigint) USING iceberg")
    assert "NoSuchNamespaceException" in refused(no_namespace) or "SCHEMA_NOT_FOUND" in refused(no_namespace)
    with pytest.raises(JavaPeerError) as exists:  # 409 AlreadyExistsException
        await sql(java_spark, f"CREATE TABLE {cat}.{ns}.t (id bigint) USING iceberg")
    assert "ALREADY_EXISTS" in refused(exists)
    with pytest.raises(JavaPeerError) as not_empty:  # 409 NamespaceNotEmptyException
        await sql(java_spark, f"DROP NAMESPACE {cat}.{ns}")
    assert "NamespaceNotEmpty" in refused(not_empty) or "SCHEMA_NOT_EMPTY" in refused(not_empty)
    with pytest.raises(JavaPeerError) as outside:  # the server keeps tables inside its warehouse
        await sql(java_spark, f"ALTER TABLE {cat}.{ns}.t SET LOCATION '/tmp/{fresh('elsewhere')}'")
    assert "ForbiddenException" in refused(outside) or "BadRequestException" in refused(outside)


@pytest.mark.anyio
async def test_java_reads_a_table_after_our_rename(java_spark: JavaSpark, server: RestServer) -> None:
    cat = java_catalog(java_spark, server)
    ns = fresh("db")
    await sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await sql(java_spark, f"CREATE TABLE {cat}.{ns}.t (id bigint, region string, v double) USING iceberg")
    await sql(java_spark, f"INSERT INTO {cat}.{ns}.t VALUES (1,'eu',1.0),(2,'us',2.0)")
    await sql(java_spark, f"ALTER TABLE {cat}.{ns}.t RENAME TO {ns}.moved")
    async with aioiceberg.connect(f"rest+{server.url}") as ours:
        expected = await our_rows(await ours.load_table(f"{ns}.moved"))
    assert [r["id"] for r in expected] == [1, 2]
    assert await java_rows(java_spark, f"{cat}.{ns}.moved") == expected
