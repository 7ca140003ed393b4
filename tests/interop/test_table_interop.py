"""Tables appended here read back identically through PyIceberg and DuckDB, and vice versa."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pytest
from maint_helpers import SCHEMA, duckdb_connection, rows

import aioiceberg


def events(start: int, count: int) -> pa.Table:
    return rows(start, count, hours_apart=7)


def sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    cols = [table.column(n).to_pylist() for n in ("id", "ts", "region")]
    return sorted(zip(*cols, strict=True))


@pytest.mark.anyio
@pytest.mark.parametrize("format_version", [1, 2])
@pytest.mark.parametrize("partition_by", [None, ["day(ts)", "bucket(4, id)"]])
async def test_appended_table_reads_identically_in_pyiceberg_and_duckdb(
    tmp_path: Path, format_version: int, partition_by: list[str] | None
) -> None:
    from pyiceberg.table import StaticTable

    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table(
        "db.events", schema=SCHEMA, partition_by=partition_by, format_version=format_version
    )
    expected = pa.concat_tables([events(0, 40), events(40, 25)])
    await table.append(events(0, 40))
    await table.append(events(40, 25))
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary["total-records"] == "65"

    ours = sorted_rows(expected)
    py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert sorted_rows(py) == ours
    con = duckdb_connection()
    for target in (table.location, table.metadata_location):
        got = con.execute(  # type: ignore[attr-defined]
            f"SELECT id, ts, region FROM iceberg_scan('{target}')"
        ).arrow()
        got = pa.table(got) if not isinstance(got, pa.Table) else got
        assert (
            sorted(
                zip(
                    got.column("id").to_pylist(),
                    [t.astimezone(dt.UTC) for t in got.column("ts").to_pylist()],
                    got.column("region").to_pylist(),
                    strict=True,
                )
            )
            == ours
        )


@pytest.mark.anyio
async def test_table_created_by_pyiceberg_loads_by_its_metadata_file(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "py"
    warehouse.mkdir()
    py_catalog = SqlCatalog("py", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=f"file://{warehouse}")
    py_catalog.create_namespace("db")
    py_table = py_catalog.create_table("db.events", schema=SCHEMA)
    py_table.append(events(0, 10))
    location = py_table.metadata_location
    table = await aioiceberg.load_table(location)
    assert table.metadata_location == location
    assert table.read_only
    assert table.current_snapshot() is not None
    assert table.current_snapshot().summary["total-records"] == "10"  # type: ignore[union-attr,index]
    by_dir = await aioiceberg.load_table(os.path.dirname(os.path.dirname(location.removeprefix("file://"))))
    assert by_dir.current_snapshot() == table.current_snapshot()
