"""v3 row lineage between the two implementations: Spark's ``SELECT id, _row_id,
_last_updated_sequence_number`` equals ours on a table Java wrote and changed (UPDATE, MERGE,
DELETE, ``rewrite_data_files``), and on a table we wrote, changed and compacted, every step.

Tables are shared through Java's Hadoop catalog layout on a tmp directory (our warehouse
catalog reads and writes the same ``v<N>.metadata.json`` and ``version-hint.text``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
import pyarrow as pa
import pytest
from servers.java_spark import JavaSpark

import aioiceberg
from aioiceberg.table import Table

pytestmark = pytest.mark.xdist_group("java")

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
COLUMNS = ("id", "_row_id", "_last_updated_sequence_number")
Row = tuple[Any, ...]


def rows(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "v": [i % 5 for i in ids]}, schema=SCHEMA)


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def theirs(java: JavaSpark, name: str) -> list[Row]:
    await java_sql(java, f"REFRESH TABLE {name}")
    got = await anyio.to_thread.run_sync(java.arrow, f"SELECT {', '.join(COLUMNS)} FROM {name}")
    return sorted(zip(*(got.column(c).to_pylist() for c in COLUMNS), strict=True))


async def ours(table: Table) -> list[Row]:
    await table.refresh()
    got = await table.scan(selected_fields=COLUMNS).to_arrow()
    return sorted(zip(*(got.column(c).to_pylist() for c in COLUMNS), strict=True))


async def agree(java: JavaSpark, name: str, table: Table) -> list[Row]:
    mine, spark = await ours(table), await theirs(java, name)
    assert mine == spark
    row_ids = [r[1] for r in mine]
    assert None not in row_ids and len(set(row_ids)) == len(row_ids)
    return mine


def fresh(java: JavaSpark, tmp_path: Path) -> tuple[str, Path, str]:
    warehouse = tmp_path / "warehouse"
    cat = java.catalog(f"rl_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(warehouse))
    return cat, warehouse, f"db_{uuid.uuid4().hex[:8]}"


@pytest.mark.anyio
async def test_we_read_javas_row_lineage_through_update_merge_and_rewrite(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    cat, warehouse, ns = fresh(java_spark, tmp_path)
    name = f"{cat}.{ns}.t"
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(
        java_spark,
        f"CREATE TABLE {name} (id BIGINT NOT NULL, v BIGINT) USING iceberg TBLPROPERTIES ("
        "'format-version'='3', 'write.update.mode'='copy-on-write', "
        "'write.merge.mode'='merge-on-read', 'write.delete.mode'='merge-on-read')",
    )
    await java_sql(java_spark, f"INSERT INTO {name} SELECT id, id % 5 FROM range(0, 40)")
    await java_sql(java_spark, f"INSERT INTO {name} SELECT id, id % 5 FROM range(40, 60)")
    async with aioiceberg.connect(str(warehouse)) as cat_here:
        table = await cat_here.load_table(f"{ns}.t")
        before = await agree(java_spark, name, table)
        assert [r[1] for r in before] == list(range(60))

        # copy-on-write UPDATE: the updated rows keep their ids, get the new sequence number
        await java_sql(java_spark, f"UPDATE {name} SET v = -1 WHERE id IN (3, 45)")
        updated = {r[0]: r for r in await agree(java_spark, name, table)}
        assert updated[3][1] == 3 and updated[45][1] == 45
        assert updated[3][2] > before[3][2] and updated[4][2] == before[4][2]

        # merge-on-read MERGE: matched rows keep their ids, inserted rows get new ones
        await java_sql(
            java_spark,
            f"MERGE INTO {name} t USING (SELECT id FROM range(55, 65)) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = 100 WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 7)",
        )
        merged = {r[0]: r for r in await agree(java_spark, name, table)}
        assert merged[56][1] == 56 and merged[62][1] >= 60

        await java_sql(java_spark, f"DELETE FROM {name} WHERE id IN (10, 11)")
        deleted = await agree(java_spark, name, table)

        await java_sql(java_spark, f"CALL {cat}.system.rewrite_data_files(table => '{ns}.t')")
        assert await agree(java_spark, name, table) == deleted

        # and our own changes on Java's table keep the ids Java gave
        await table.refresh()
        await table.append(rows(range(100, 105)))
        await table.refresh()
        await table.delete("id IN (20, 101)")
        after = {r[0]: r for r in await agree(java_spark, name, table)}
        assert all(after[i] == r for i, r in ((r[0], r) for r in deleted) if i != 20)


@pytest.mark.anyio
async def test_java_reads_our_row_lineage_through_deletes_and_compaction(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    cat, warehouse, ns = fresh(java_spark, tmp_path)
    name = f"{cat}.{ns}.t"
    async with aioiceberg.connect(str(warehouse)) as cat_here:
        table = await cat_here.create_table(
            f"{ns}.t", schema=SCHEMA, format_version=3, properties={"write.delete.mode": "copy-on-write"}
        )
        await table.append(rows(range(0, 30)))
        await table.refresh()
        await table.append(rows(range(30, 50)))
        first = await agree(java_spark, name, table)
        assert [r[1] for r in first] == list(range(50))

        await table.refresh()
        await table.delete("id IN (2, 33) OR v = 4")  # copy-on-write: moved rows keep their ids
        kept = await agree(java_spark, name, table)
        assert {r[0]: r for r in kept}.items() <= {r[0]: r for r in first}.items()

        await table.refresh()
        await table.set_properties({"write.delete.mode": "merge-on-read"})
        await table.refresh()
        await table.delete("id = 40")  # a deletion vector
        await table.refresh()
        await table.rewrite_data_files()
        compacted = await agree(java_spark, name, table)
        assert compacted == [r for r in kept if r[0] != 40]

        # our copy-on-write upsert: the updated row keeps its id, Java reads it so
        await table.refresh()
        await table.set_properties({"write.merge.mode": "copy-on-write"})
        await table.refresh()
        await table.upsert(pa.table({"id": [5, 70], "v": [-5, -5]}, schema=SCHEMA), ["id"])
        upserted = {r[0]: r for r in await agree(java_spark, name, table)}
        assert upserted[5][1] == {r[0]: r for r in compacted}[5][1] and 70 in upserted

        # Java's update of our compacted file keeps our ids
        await java_sql(java_spark, f"UPDATE {name} SET v = 9 WHERE id = 41")
        final = {r[0]: r for r in await agree(java_spark, name, table)}
        assert final[41][1] == {r[0]: r for r in compacted}[41][1]
