"""The SQL catalog on PostgreSQL, beyond the catalog contract (``test_catalog_contract.py`` runs
that on it): the URI, the schema PyIceberg and Java share, and typed failures."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from catalog_contract import SCHEMA, rows
from servers.moto import free_port
from servers.postgres import PostgresServer

import aioiceberg
from aioiceberg.catalogs.sql import SqlCatalog, SqlStoreError
from aioiceberg.errors import ValidationError


@pytest.mark.anyio
async def test_both_schemes_share_one_database_in_pyicebergs_schema(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    pg = postgres_server
    database = pg.create_database()
    uri = pg.uri(database)
    async with aioiceberg.connect(f"{uri}?catalog=a", warehouse=f"{tmp_path}/wh") as first:
        assert isinstance(first, SqlCatalog) and first.catalog_name == "a"
        await first.create_namespace("ns")
        table = await first.create_table("ns.t", SCHEMA)
        await table.append(rows([1, 2]))
    other = uri.replace("postgresql://", "postgres://", 1)
    async with aioiceberg.connect(f"{other}?catalog=a", warehouse=f"{tmp_path}/wh") as second:
        assert await second.list_tables("ns") == ["ns.t"]
        assert (await (await second.load_table("ns.t")).scan().to_arrow()).num_rows == 2
    conn = await asyncpg.connect(uri)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
        )
        found = await conn.fetch("SELECT catalog_name, table_namespace, table_name FROM iceberg_tables")
    finally:
        await conn.close()
    assert [(r["table_name"], r["column_name"]) for r in columns] == [
        ("iceberg_namespace_properties", "catalog_name"),
        ("iceberg_namespace_properties", "namespace"),
        ("iceberg_namespace_properties", "property_key"),
        ("iceberg_namespace_properties", "property_value"),
        ("iceberg_tables", "catalog_name"),
        ("iceberg_tables", "table_namespace"),
        ("iceberg_tables", "table_name"),
        ("iceberg_tables", "metadata_location"),
        ("iceberg_tables", "previous_metadata_location"),
        ("iceberg_tables", "iceberg_type"),
    ]
    assert [tuple(r) for r in found] == [("a", "ns", "t")]


def test_the_password_is_never_shown() -> None:
    catalog = SqlCatalog("postgresql://me:s3cret@127.0.0.1:1/db", catalog_name="c")
    assert "s3cret" not in repr(catalog) and "s3cret" not in catalog.uri
    with pytest.raises(ValidationError, match="names catalog 'x'") as caught:
        SqlCatalog("postgresql://me:s3cret@127.0.0.1:1/db?catalog=x", catalog_name="c")
    assert "s3cret" not in str(caught.value)


@pytest.mark.anyio
async def test_no_server_is_a_typed_retryable_error(tmp_path: Path) -> None:
    uri = f"postgresql://postgres@127.0.0.1:{free_port()}/db"
    async with aioiceberg.connect(uri, warehouse=f"{tmp_path}/wh") as catalog:
        with pytest.raises(SqlStoreError, match="list namespaces") as caught:
            await catalog.list_namespaces()
    assert caught.value.retryable and caught.value.definite
