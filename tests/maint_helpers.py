"""Shared test helpers: event data, independent readers (PyIceberg, DuckDB), store listings."""

from __future__ import annotations

import datetime as dt
import glob
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from aioiceberg.catalog import Catalog
from aioiceberg.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("region", pa.string()),
    ]
)


def rows(start: int, count: int, hours_apart: int = 5) -> pa.Table:
    """Rows ``start`` to ``start + count`` of SCHEMA: ids, timestamps ``hours_apart`` apart, 3 regions."""
    base = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": list(range(start, start + count)),
            "ts": [base + dt.timedelta(hours=hours_apart * i) for i in range(start, start + count)],
            "region": [("eu", "us", "ap")[i % 3] for i in range(start, start + count)],
        },
        schema=SCHEMA,
    )


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def duckdb_connection() -> Any:
    """A DuckDB connection with the avro, httpfs and iceberg extensions loaded from their wheels."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    site = Path(pa.__file__).parent.parent
    for name in ("avro", "httpfs", "iceberg"):
        (path,) = glob.glob(
            str(site / f"duckdb_extension_{name}" / "extensions" / "*" / f"{name}.duckdb_extension")
        )
        con.execute(f"LOAD '{path}'")
    return con


def duckdb_ids(metadata_location: str, endpoint: str | None = None) -> list[int]:
    con = duckdb_connection()
    if endpoint is not None:
        host = endpoint.split("://", 1)[-1]
        con.execute(
            "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'x', REGION 'us-east-1', "
            f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )
    result = con.execute(f"SELECT id FROM iceberg_scan('{metadata_location}')").fetchall()
    return sorted(r[0] for r in result)


def pyiceberg_table(table: Table, properties: dict[str, str] | None = None) -> Any:
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(table.metadata_location, properties=properties or {})


def pyiceberg_ids(
    table: Table, snapshot_id: int | None = None, properties: dict[str, str] | None = None
) -> list[int]:
    static = pyiceberg_table(table, properties)
    return ids(static.scan(snapshot_id=snapshot_id).to_arrow())


async def assert_readers_agree(
    table: Table, expected: list[int], endpoint: str | None = None, properties: dict[str, str] | None = None
) -> None:
    """Ours, PyIceberg and DuckDB all read exactly ``expected`` ids from the current snapshot."""
    assert ids(await table.scan().to_arrow()) == expected
    assert pyiceberg_ids(table, properties=properties) == expected
    assert duckdb_ids(table.metadata_location, endpoint) == expected


async def listing(table: Table) -> set[str]:
    return {info.location async for info in table.io.list(table.location + "/")}


async def appended_table(
    catalog: Catalog, appends: int, size: int, partition_by: Sequence[str] | None = None
) -> Table:
    """``db.t`` after ``appends`` appends of ``size`` rows each (ids from 0): one manifest each."""
    table = await catalog.create_table("db.t", schema=SCHEMA, partition_by=partition_by)
    for i in range(appends):
        await table.append(rows(i * size, size))
    return table


async def compacted_under_a_stale_handle(catalog: Catalog) -> tuple[Table, Table]:
    """``db.t`` (20 rows) compacted, and a handle loaded before that: a compaction through the
    stale handle conflicts (its files are gone)."""
    table = await appended_table(catalog, 4, 5)
    stale = await catalog.load_table("db.t")
    await table.rewrite_data_files()
    return table, stale
