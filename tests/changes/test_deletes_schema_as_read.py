"""Deletes bind the schema as a scan reads it: a column that no field id and no name mapping
resolves reads as NULL, so ``delete(f)`` removes exactly the rows ``scan(f)`` returns (before,
``a IS NULL`` on a required such column was folded to false and deleted nothing)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from maint_helpers import duckdb_connection

import aioiceberg
from aioiceberg.errors import ValidationError
from aioiceberg.spec.name_mapping import NameMapping, create_mapping_from_schema, name_mapping_to_json
from aioiceberg.table import Table

pytestmark = pytest.mark.anyio

MAPPING = "schema.name-mapping.default"
ROWS = 2_000


async def _unmapped_table(tmp_path: Path, keep: tuple[str, ...] = ()) -> Table:
    """DuckDB's ``column_mapping_delete`` shape (its data/persistent/name_mapping, version 3.2):
    a v1 table, ``a`` required and ``b`` optional, one Parquet file without field ids added
    under a full mapping (so the manifest has stats for both), then the mapping emptied of
    every field but ``keep``."""
    schema = pa.schema([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.int64())])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema, format_version=1)
    full = create_mapping_from_schema(table.schema())
    async with table.transaction() as tx:
        tx.set_properties({MAPPING: name_mapping_to_json(full)})
    path = tmp_path / "no-ids.parquet"
    data = pa.table({"a": pa.array(range(ROWS), pa.int32()), "b": [i % 100 for i in range(ROWS)]})
    pq.write_table(data, path)
    await table.add_files([str(path)])
    async with table.transaction() as tx:
        tx.set_properties(
            {MAPPING: name_mapping_to_json(NameMapping([f for f in full if f.names[0] in keep]))}
        )
    await table.refresh()
    return table


def _rows(table: pa.Table) -> Counter[tuple[object, ...]]:
    return Counter(tuple(r.values()) for r in table.to_pylist())


async def _delete_as_scanned(table: Table, text: str) -> tuple[int, int]:
    """Delete by ``text``, checking the rows left are the rows before minus those the scan
    with ``text`` returns (as multisets): (rows matched, rows left)."""
    before = await table.scan().to_arrow()
    hits = await table.scan(text).to_arrow()
    await table.delete(text)
    await table.refresh()
    after = await table.scan().to_arrow()
    assert _rows(after) == _rows(before) - _rows(hits), text
    assert after.num_rows == before.num_rows - hits.num_rows, text
    return hits.num_rows, after.num_rows


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("a IS NULL", ROWS),
        ("a IS NULL AND b IS NULL", ROWS),
        ("a < 100 OR b IS NULL", ROWS),
        ("a IS NOT NULL", 0),
        ("b = 0", 0),
    ],
)
async def test_delete_on_a_table_no_column_of_which_resolves(tmp_path: Path, text: str, matched: int) -> None:
    table = await _unmapped_table(tmp_path)
    assert table.schema().find_field("a").required
    assert await _delete_as_scanned(table, text) == (matched, ROWS - matched)
    (count,) = (
        duckdb_connection()
        .execute(f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}')")
        .fetchone()
    )
    assert count == ROWS - matched


@pytest.mark.parametrize(
    ("version", "mode"), [(2, "merge-on-read"), (3, "merge-on-read"), (2, "copy-on-write")]
)
async def test_partly_matching_delete_of_an_unresolved_column(
    tmp_path: Path, version: int, mode: str
) -> None:
    """``b`` resolves, required ``a`` does not: ``a IS NULL AND b < 10`` deletes a tenth of
    the rows, through deletion vectors or position deletes. Copy-on-write would write the
    kept rows' NULL ``a`` into a required column: refused, naming it, the table unchanged."""
    table = await _unmapped_table(tmp_path, keep=("b",))
    await table.upgrade_table_version(version)
    await table.set_properties({"write.delete.mode": mode})
    await table.refresh()
    text = "a IS NULL AND b < 10"
    if mode == "copy-on-write":
        with pytest.raises(ValidationError, match=r"required column 'a'.*no name mapping entry"):
            await table.delete(text)
        await table.refresh()
        assert (await table.scan().to_arrow()).num_rows == ROWS
        return
    assert await _delete_as_scanned(table, text) == (ROWS // 10, ROWS - ROWS // 10)
    left = await table.scan().to_arrow()
    assert min(left.column("b").to_pylist()) == 10 and left.column("a").null_count == left.num_rows
