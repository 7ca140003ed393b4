"""Java's v2 position delete files turned into deletion vectors here: Java writes a v2
merge-on-read table (file- and partition-scoped position delete files) and upgrades it to
v3 (``format-version`` bumped); our ``rewrite_position_delete_files`` rewrites the delete
files into vectors, and Java, DuckDB and our reader read the same rows before and after.
Java then deletes more rows, merging into our vectors."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
import dv_differential as dv
import pyarrow as pa
import pytest
from position_delete_vectors import assert_converted, delete_state, deleted_positions
from read_helpers import duckdb_connection
from servers.java_spark import JavaSpark

import aioiceberg

pytestmark = pytest.mark.xdist_group("java")

Row = tuple[Any, ...]


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def java_rows(java: JavaSpark, table: str) -> list[Row]:
    await java_sql(java, f"REFRESH TABLE {table}")
    got: pa.Table = await anyio.to_thread.run_sync(java.arrow, f"SELECT id, part, v FROM {table}")
    return dv.rows_of(got)


def values(rows: list[Row]) -> str:
    return ", ".join(f"({i}, '{p}', {'NULL' if v is None else v})" for i, p, v in rows)


@pytest.mark.anyio
async def test_javas_position_deletes_become_vectors_java_reads(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    cat = java_spark.catalog(f"pd_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(warehouse))
    ns = f"db_{uuid.uuid4().hex[:8]}"
    name = f"{cat}.{ns}.t"
    rows = dv.make_rows(120)
    await java_sql(
        java_spark,
        f"CREATE TABLE {name} (id BIGINT NOT NULL, part STRING, v BIGINT) USING iceberg "
        "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')",
    )
    for start in (0, 60):  # two data files per partition
        await java_sql(java_spark, f"INSERT INTO {name} VALUES {values(rows[start : start + 60])}")
    gone = {0, 3, 63, 66, 1, 4, 7, 9, 90}  # a file-scoped delete file per data file (Java's default)
    await java_sql(java_spark, f"DELETE FROM {name} WHERE id IN ({', '.join(map(str, sorted(gone)))})")
    await java_sql(
        java_spark, f"ALTER TABLE {name} SET TBLPROPERTIES ('write.delete.granularity'='partition')"
    )
    await java_sql(java_spark, f"DELETE FROM {name} WHERE id IN (12, 72, 13, 73)")  # one per partition
    gone |= {12, 72, 13, 73}
    await java_sql(java_spark, f"ALTER TABLE {name} SET TBLPROPERTIES ('format-version'='3')")
    expected = sorted(r for r in rows if r[0] not in gone)
    assert await java_rows(java_spark, name) == expected

    async with aioiceberg.connect(str(warehouse)) as ours:
        table = await ours.load_table(f"{ns}.t")
        assert table.metadata.format_version == 3
        before = await delete_state(table)
        assert len(before.v2_files) == 5 and not before.vectors  # 3 file-, 2 partition-scoped
        positions = await deleted_positions(table, before)

        result = await table.rewrite_position_delete_files()

        after = await delete_state(table)
        assert_converted(before, after)
        assert len(after.vectors) == len(positions) == 4 and result.groups == 2  # parts a and b
        assert await deleted_positions(table, after) == positions
        assert await dv.our_rows(table) == expected
        assert dv.duckdb_rows(table.metadata_location, duckdb_connection()) == expected
        assert await java_rows(java_spark, name) == expected
        formats = await java_sql(java_spark, f"SELECT DISTINCT file_format FROM {name}.delete_files")
        assert formats == [["PUFFIN"]]

        # Java deletes more on v3: it merges into our vectors, one per data file still
        await java_sql(java_spark, f"DELETE FROM {name} WHERE id IN (6, 66, 69, 100)")
        expected = [r for r in expected if r[0] not in {6, 66, 69, 100}]
        assert await java_rows(java_spark, name) == expected
        await table.refresh()
        assert await dv.our_rows(table) == expected
        state = await delete_state(table)
        targets = [v.referenced_data_file for v in state.vectors]
        assert not state.v2_files and len(targets) == len(set(targets))
