"""A small table for the row-level change tests, and reading it back three ways: the rows
of every result are compared in plain Python with what our scan, PyIceberg and DuckDB read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maint_helpers import duckdb_connection
from pyiceberg.table import StaticTable

import aioiceberg
from aioiceberg.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)
REGIONS = ("eu", "us", "ap")
BASE_TS = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
Row = tuple[Any, ...]


def row(i: int, n: int | None = None) -> Row:
    """Row i: region cycles, n = i (None every 7th row), ts a day per 10 ids."""
    return (
        i,
        REGIONS[i % 3],
        (None if i % 7 == 6 else i) if n is None else n,
        BASE_TS + dt.timedelta(days=i // 10),
    )


def to_table(rows: list[Row]) -> pa.Table:
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in SCHEMA]
    return pa.table({f.name: list(c) for f, c in zip(SCHEMA, cols, strict=True)}, schema=SCHEMA)


def rows_of(table: pa.Table) -> list[Row]:
    cols = [table.column(f.name).to_pylist() for f in SCHEMA]
    out = []
    for r in zip(*cols, strict=True):
        ts = r[3].astimezone(dt.UTC) if r[3] is not None else None
        out.append((r[0], r[1], r[2], ts))
    return sorted(out)


def duckdb_rows(metadata_location: str) -> list[Row]:
    query = f"SELECT id, region, n, ts FROM iceberg_scan('{metadata_location}')"
    got = duckdb_connection().execute(query).arrow()
    return rows_of(pa.table(got) if not isinstance(got, pa.Table) else got)


async def assert_reads(
    table: Table, expected: list[Row], *, duckdb: bool = True, pyiceberg: bool = True
) -> None:
    """Our scan, PyIceberg's and DuckDB's all return exactly ``expected``.

    PyIceberg 0.12 refuses tables with equality deletes (``pyiceberg=False`` checks that).
    """
    want = sorted(expected)
    ours = await table.scan().to_arrow()
    assert ours.schema.names == SCHEMA.names
    assert rows_of(ours) == want
    if pyiceberg:
        py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert py.schema.names == SCHEMA.names
        assert rows_of(py) == want
    else:
        with pytest.raises(ValueError, match="equality deletes"):
            StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    if duckdb:
        assert duckdb_rows(table.metadata_location) == want


async def new_table(
    tmp_path: Path,
    rows: list[Row],
    *,
    partition_by: list[str] | None = None,
    format_version: int = 2,
    properties: dict[str, str] | None = None,
    batches: int = 2,
) -> Table:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table(
        "db.t",
        schema=SCHEMA,
        partition_by=partition_by,
        format_version=format_version,
        properties=properties or {},
    )
    step = max(1, len(rows) // batches)
    for start in range(0, len(rows), step):
        await table.append(to_table(rows[start : start + step]))
    return table


ROWS = [row(i) for i in range(60)]
