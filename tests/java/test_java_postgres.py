"""Three implementations of the SQL catalog on one PostgreSQL database: ours (asyncpg),
PyIceberg's ``SqlCatalog`` (SQLAlchemy, psycopg2) and Apache Iceberg's Java ``JdbcCatalog``
(Spark 4.1, Iceberg 1.12), under one catalog name, appending to one table at the same time.

Each commit of each is the same guarded ``UPDATE ... WHERE metadata_location = <read>``: a
writer that loses retries from the new version (ours and Java's through the table's
``commit.retry.*`` properties, PyIceberg's here, as its callers do). Afterwards every
acknowledged append's rows are there exactly once, the history is one chain of parents with one
snapshot per acknowledged append, the row in ``iceberg_tables`` names the last metadata file
and the one before it, and the three read the same rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import asyncpg
import pytest
from catalog_contract import RACING, SCHEMA, assert_linear, ids_of, rows
from servers.java_spark import JavaSpark
from servers.postgres import SUPERUSER, PostgresServer

import aioiceberg

pytestmark = pytest.mark.xdist_group("java")

NS, TABLE = "db", "events"
OUR_WRITERS, OUR_APPENDS = 2, 2
PYICEBERG_APPENDS = 5
JAVA_APPENDS = 3


def pyiceberg_appends(name: str, uri: str, warehouse: str, acknowledged: list[int]) -> None:
    """PyIceberg's appends, each retried from a fresh load when another writer won."""
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog
    from pyiceberg.exceptions import CommitFailedException

    catalog = PyIcebergSqlCatalog(name, uri=uri, warehouse=warehouse)
    try:
        for k in range(PYICEBERG_APPENDS):
            ids = [2000 + 10 * k, 2000 + 10 * k + 1]
            for _ in range(100):
                try:
                    catalog.load_table((NS, TABLE)).append(rows(ids))
                except CommitFailedException:
                    continue
                acknowledged.extend(ids)
                break
    finally:
        catalog.engine.dispose()


def java_appends(java: JavaSpark, table: str, acknowledged: list[int]) -> None:
    """Java's appends (its commit retries come from the table's properties)."""
    for k in range(JAVA_APPENDS):
        ids = [3000 + 10 * k, 3000 + 10 * k + 1]
        java.sql(f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, 'n{i}')" for i in ids))
        acknowledged.extend(ids)


@pytest.mark.anyio
async def test_three_implementations_append_to_one_table_at_once(
    postgres_server: PostgresServer, java_spark: JavaSpark, tmp_path: Path
) -> None:
    pg = postgres_server
    database = pg.create_database()
    name = f"pg_{uuid.uuid4().hex[:8]}"  # Java's JdbcCatalog takes Spark's catalog name as its own
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    java_spark.catalog(
        name,
        type="jdbc",
        uri=pg.jdbc_uri(database),
        warehouse=f"file://{warehouse}",
        cache_enabled="false",  # the other writers commit behind its back
        **{"jdbc.user": SUPERUSER, "jdbc.password": "unused", "jdbc.schema-version": "V1"},
    )
    acknowledged: dict[str, list[int]] = {"ours": [], "pyiceberg": [], "java": []}
    async with aioiceberg.connect(f"{pg.uri(database)}?catalog={name}", warehouse=str(warehouse)) as catalog:
        await catalog.create_namespace(NS)
        await catalog.create_table(f"{NS}.{TABLE}", SCHEMA, properties=RACING)

        # Java loads the table through its JdbcCatalog before the race (its first statement in a
        # session also pays for the JVM's warm-up, which would leave the others racing alone)
        spark_table = f"{name}.{NS}.{TABLE}"
        assert await anyio.to_thread.run_sync(java_spark.sql, f"SELECT count(*) FROM {spark_table}") == [[0]]

        async def ours(w: int) -> None:
            table = await catalog.load_table(f"{NS}.{TABLE}")
            for k in range(OUR_APPENDS):
                ids = [1000 + 100 * w + 10 * k, 1000 + 100 * w + 10 * k + 1]
                await table.append(rows(ids))
                acknowledged["ours"].extend(ids)

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                anyio.to_thread.run_sync,
                java_appends,
                java_spark,
                spark_table,
                acknowledged["java"],
            )
            tg.start_soon(
                anyio.to_thread.run_sync,
                pyiceberg_appends,
                name,
                pg.sqlalchemy_uri(database),
                f"file://{warehouse}",
                acknowledged["pyiceberg"],
            )
            for w in range(OUR_WRITERS):
                tg.start_soon(ours, w)

        assert [len(ids) // 2 for ids in acknowledged.values()] == [
            OUR_WRITERS * OUR_APPENDS,
            PYICEBERG_APPENDS,
            JAVA_APPENDS,
        ]
        everyone = sorted(i for ids in acknowledged.values() for i in ids)
        final = await catalog.load_table(f"{NS}.{TABLE}")
        assert await ids_of(final) == everyone  # each acknowledged row once, nothing else
        assert_linear(final, len(everyone) // 2)  # one snapshot per acknowledged append

        row = await _table_row(pg.uri(database), name)
        assert row["metadata_location"] == final.metadata_location
        assert row["previous_metadata_location"] == final.metadata.metadata_log[-1].metadata_file

        java_rows = await anyio.to_thread.run_sync(
            java_spark.arrow, f"SELECT id, name FROM {spark_table} ORDER BY id"
        )
        pyiceberg_rows = await anyio.to_thread.run_sync(
            _pyiceberg_read, name, pg.sqlalchemy_uri(database), f"file://{warehouse}"
        )
        our_rows = (await final.scan().to_arrow()).sort_by("id")
        expected = rows(everyone).to_pylist()
        assert our_rows.to_pylist() == expected
        assert pyiceberg_rows == expected
        assert java_rows.to_pylist() == expected


async def _table_row(uri: str, catalog: str) -> dict[str, Any]:
    """The table's row as the database holds it, read apart from every catalog."""
    conn = await asyncpg.connect(uri)
    try:
        found = await conn.fetch(
            "SELECT * FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2", catalog, NS
        )
    finally:
        await conn.close()
    assert len(found) == 1 and found[0]["table_name"] == TABLE
    return dict(found[0])


def _pyiceberg_read(name: str, uri: str, warehouse: str) -> list[dict[str, Any]]:
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    catalog = PyIcebergSqlCatalog(name, uri=uri, warehouse=warehouse)
    try:
        read: list[dict[str, Any]] = (
            catalog.load_table((NS, TABLE)).scan().to_arrow().sort_by("id").to_pylist()
        )
        return read
    finally:
        catalog.engine.dispose()
