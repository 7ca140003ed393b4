"""Iceberg views between Spark (Java's ``RESTCatalog``) and ``aioiceberg serve`` over a SQL
catalog: Spark SQL creates, lists, queries, replaces and drops views through our server and
we load what it wrote; a view we create is listed and queried by Spark.

One server process for the module; each test its own catalog name in the Java session and
its own namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from servers.java_spark import JavaPeerError, JavaSpark
from servers.rest import RestServer

from aioiceberg.catalogs.sql import SqlCatalog
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import DoubleType, LongType, NestedField
from aioiceberg.spec.view_metadata import SqlRepresentation, ViewVersion

pytestmark = pytest.mark.xdist_group("java")


@dataclass
class Served:
    database: Path
    warehouse: Path
    name: str  # the catalog_name column: Java's JDBC catalog of that name shares the rows
    url: str

    def catalog(self) -> SqlCatalog:
        """The served catalog opened directly, as another process would."""
        return SqlCatalog(str(self.database), catalog_name=self.name, warehouse=str(self.warehouse))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("java-views")
    database, warehouse = base / "catalog.db", base / "warehouse"
    warehouse.mkdir()
    name = fresh("jdbc")
    with RestServer(f"sqlite:///{database}?catalog={name}", tables_in=str(warehouse)) as rest:
        yield Served(database, warehouse, name, rest.url)


def fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def with_events(java: JavaSpark, served: Served) -> tuple[str, str]:
    """A fresh Java catalog over our server and a namespace holding ``events``."""
    cat = java.catalog(fresh("rest"), type="rest", uri=served.url)
    ns = fresh("db")
    await sql(java, f"CREATE NAMESPACE {cat}.{ns}")
    await sql(java, f"CREATE TABLE {cat}.{ns}.events (id bigint, region string, v double) USING iceberg")
    await sql(java, f"INSERT INTO {cat}.{ns}.events VALUES (1,'eu',1.0),(2,'us',2.0),(3,'eu',3.0)")
    return cat, ns


@pytest.mark.anyio
async def test_spark_views_through_our_server(java_spark: JavaSpark, served: Served) -> None:
    cat, ns = await with_events(java_spark, served)
    await sql(
        java_spark, f"CREATE VIEW {cat}.{ns}.eu AS SELECT id, v FROM {cat}.{ns}.events WHERE region = 'eu'"
    )
    assert await sql(java_spark, f"SHOW VIEWS IN {cat}.{ns}") == [[ns, "eu", False]]
    assert await sql(java_spark, f"SHOW TABLES IN {cat}.{ns}") == [[ns, "events", False]]
    assert sorted(await sql(java_spark, f"SELECT * FROM {cat}.{ns}.eu")) == [[1, 1.0], [3, 3.0]]

    await sql(
        java_spark,
        f"CREATE OR REPLACE VIEW {cat}.{ns}.eu AS SELECT id FROM {cat}.{ns}.events WHERE region <> 'eu'",
    )
    assert await sql(java_spark, f"SELECT * FROM {cat}.{ns}.eu") == [[2]]

    ours = served.catalog()
    async with ours:  # what Spark wrote, read here
        view = await ours.load_view((ns, "eu"))
        assert view.metadata.current_version_id == 2
        assert [v.version_id for v in view.metadata.versions] == [1, 2]
        assert "region <> 'eu'" in (view.sql or "")
        assert [f.name for f in view.metadata.current_schema.fields] == ["id"]
        assert view.metadata_location.startswith(f"{served.warehouse}/{ns}/eu/metadata/00001-")
        assert await ours.list_tables(ns) == [f"{ns}.events"]

    await sql(java_spark, f"DROP VIEW {cat}.{ns}.eu")
    assert await sql(java_spark, f"SHOW VIEWS IN {cat}.{ns}") == []


@pytest.mark.anyio
async def test_a_view_we_create_is_listed_and_queried_by_spark(java_spark: JavaSpark, served: Served) -> None:
    cat, ns = await with_events(java_spark, served)
    schema = Schema(NestedField(1, "id", LongType(), False), NestedField(2, "v", DoubleType(), False))
    version = ViewVersion(
        version_id=1,
        timestamp_ms=1_700_000_000_000,
        schema_id=0,
        summary={"engine-name": "aioiceberg"},
        representations=(SqlRepresentation("SELECT id, v * 10 AS v FROM events WHERE id > 1", "spark"),),
        default_namespace=(ns,),
        default_catalog=cat,
    )
    ours = served.catalog()
    async with ours:
        await ours.create_view((ns, "tens"), schema, version, {"comment": "ours"})
    assert await sql(java_spark, f"SHOW VIEWS IN {cat}.{ns}") == [[ns, "tens", False]]
    assert sorted(await sql(java_spark, f"SELECT * FROM {cat}.{ns}.tens")) == [[2, 20.0], [3, 30.0]]
    # Java's JDBC catalog on the same database reads the row and the file itself
    jdbc = java_spark.catalog(
        served.name,
        type="jdbc",
        uri=f"jdbc:sqlite:{served.database}",
        warehouse=str(served.warehouse),
        **{"jdbc.schema-version": "V1"},
    )
    assert await sql(java_spark, f"SHOW VIEWS IN {jdbc}.{ns}") == [[ns, "tens", False]]
    assert sorted(await sql(java_spark, f"SELECT id FROM {jdbc}.{ns}.tens")) == [[2], [3]]
    # a table cannot take the view's name, in Spark either
    with pytest.raises(JavaPeerError, match=r"(?i)already exists"):
        await sql(java_spark, f"CREATE TABLE {cat}.{ns}.tens (id bigint) USING iceberg")
