"""Deletion vectors between the two implementations, on v3 tables shared through Java's Hadoop
catalog layout (our warehouse catalog writes the same ``v<N>.metadata.json`` and
``version-hint.text``): Java reads the DVs we write, Java's merge-on-read DELETE merges its
positions into our DV (one DV per data file afterwards), and we read Java's merged DVs and
merge into them again, every step reading equal rows on both sides.

The DV differential with Java: the random deletes of ``dv_differential`` on a v3 table (our
DVs) and a v2 table (our position delete files) read the same in our reader, Java's and
DuckDB's after every round; and Java's own random merge-on-read DELETEs on a v3 table (its
DVs, merged round after round) read the same here and in DuckDB as in Java.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
import dv_differential as dv
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from read_helpers import duckdb_connection
from servers.java_spark import JavaSpark

import aioiceberg
from aioiceberg.spec.manifest import read_manifest, read_manifest_list
from aioiceberg.table import Table

pytestmark = pytest.mark.xdist_group("java")

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("part", pa.string()),
        pa.field("v", pa.int64()),
    ]
)
Row = tuple[Any, ...]


def make_rows(start: int, n: int) -> list[Row]:
    return [(i, "abc"[i % 3], None if i % 13 == 4 else (i * 37) % 101) for i in range(start, start + n)]


def rows_of(table: pa.Table) -> list[Row]:
    return sorted(zip(*(table.column(n).to_pylist() for n in ("id", "part", "v")), strict=True))


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def java_rows(java: JavaSpark, table: str) -> list[Row]:
    await java_sql(java, f"REFRESH TABLE {table}")
    return rows_of(await anyio.to_thread.run_sync(java.arrow, f"SELECT id, part, v FROM {table}"))


async def our_dvs(table: Table) -> dict[str, tuple[int, int]]:
    """Live DVs of the current snapshot: referenced data file -> (record count, entries)."""
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    out: dict[str, tuple[int, int]] = {}
    for mf in read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list):
        for e in read_manifest(await table.io.read(mf.manifest_path), mf).entries:
            f = e.data_file
            if e.is_live and f.is_deletion_vector:
                assert f.referenced_data_file is not None
                count, seen = out.get(f.referenced_data_file, (0, 0))
                out[f.referenced_data_file] = (count + f.record_count, seen + 1)
    return out


def bare(path: str) -> str:
    return path.removeprefix("file:").removeprefix("//")


@pytest.mark.anyio
async def test_java_reads_our_dvs_and_merges_its_deletes_into_them(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    cat = java_spark.catalog(f"dv_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(warehouse))
    ns = f"db_{uuid.uuid4().hex[:8]}"
    name = f"{cat}.{ns}.t"
    rows = make_rows(0, 300)
    async with aioiceberg.connect(str(warehouse)) as ours:
        table = await ours.create_table(
            f"{ns}.t",
            schema=SCHEMA,
            format_version=3,
            properties={
                "write.delete.mode": "merge-on-read",
                "write.update.mode": "merge-on-read",
                "write.merge.mode": "merge-on-read",
            },
        )
        for start in (0, 150):
            await table.append(
                pa.Table.from_pylist(
                    [dict(zip(SCHEMA.names, r, strict=True)) for r in rows[start : start + 150]],
                    schema=SCHEMA,
                )
            )
        expected = set(rows)

        async def delete_here(text: str, gone: Any) -> None:
            await table.refresh()
            await table.delete(text)
            expected.difference_update({r for r in rows if gone(r)})

        await delete_here("id IN (3, 4, 5, 160, 161)", lambda r: r[0] in (3, 4, 5, 160, 161))
        await delete_here("v < 10", lambda r: r[2] is not None and r[2] < 10)  # merges with the first
        want = sorted(expected)
        assert rows_of(await table.scan().to_arrow()) == want
        assert await java_rows(java_spark, name) == want
        dvs = await our_dvs(table)
        assert dvs and all(seen == 1 for _, seen in dvs.values())
        # Java parses our entries as we wrote them
        theirs = await java_sql(
            java_spark,
            f"SELECT referenced_data_file, record_count, file_format, content FROM {name}.delete_files",
        )
        assert sorted((bare(p), n, fmt, c) for p, n, fmt, c in theirs) == sorted(
            (bare(p), n, "PUFFIN", 1) for p, (n, _) in dvs.items()
        )
        positions = await java_sql(java_spark, f"SELECT count(*) FROM {name}.position_deletes")
        assert positions == [[sum(n for n, _ in dvs.values())]]

        # Java deletes more (merge-on-read): its DVs replace ours, one per data file
        await java_sql(java_spark, f"DELETE FROM {name} WHERE id % 7 = 0 OR id = 162")
        expected.difference_update({r for r in rows if r[0] % 7 == 0 or r[0] == 162})
        await java_sql(java_spark, f"UPDATE {name} SET v = -1 WHERE id IN (20, 21, 201)")
        updated = {r for r in expected if r[0] in (20, 21, 201)}
        expected = (expected - updated) | {(r[0], r[1], -1) for r in updated}
        want = sorted(expected)
        assert await java_rows(java_spark, name) == want
        await table.refresh()
        assert rows_of(await table.scan().to_arrow()) == want
        dvs = await our_dvs(table)
        assert all(seen == 1 for _, seen in dvs.values())
        spark_dv_counts = await java_sql(
            java_spark, f"SELECT referenced_data_file, record_count FROM {name}.delete_files"
        )
        assert sorted((bare(p), n) for p, n in spark_dv_counts) == sorted(
            (bare(p), n) for p, (n, _) in dvs.items()
        )

        # and we merge into Java's DVs in turn
        await delete_here("id >= 280 OR id = 1", lambda r: r[0] >= 280 or r[0] == 1)
        want = sorted(expected)
        assert rows_of(await table.scan().to_arrow()) == want
        assert await java_rows(java_spark, name) == want
        assert all(seen == 1 for _, seen in (await our_dvs(table)).values())


ROUNDS = 6


def java_values(rows: list[dv.Row]) -> str:
    return ", ".join(f"({i}, '{p}', {'NULL' if v is None else v})" for i, p, v in rows)


def removed_dvs(table: Table, counted: set[int]) -> int:
    """DVs the current snapshot replaced (merged into), unless ``counted`` has it already."""
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    if snap.snapshot_id in counted:
        return 0  # the last delete matched nothing
    counted.add(snap.snapshot_id)
    return int(snap.summary.get("removed-dvs") or "0")


@pytest.mark.anyio
async def test_our_random_deletes_through_dvs_and_position_deletes_read_equal_in_java_and_duckdb(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    """Both paths of ours, after every round: our rows, Java's and DuckDB's equal plain Python's."""
    ns = f"db_{uuid.uuid4().hex[:8]}"
    rows = dv.make_rows(240, seed=11)
    tables = {
        "dv": await dv.new_table(tmp_path, rows, version=3, props=dv.MOR, name=f"{ns}.dv"),
        "pos": await dv.new_table(tmp_path, rows, version=2, props=dv.MOR, name=f"{ns}.pos"),
    }
    cat = java_spark.catalog(
        f"dvd_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(tmp_path / "wh"), cache_enabled="false"
    )
    union = " UNION ALL ".join(f"SELECT '{k}' AS t, id, part, v FROM {cat}.{ns}.{k}" for k in tables)
    duck = duckdb_connection()
    rnd = random.Random(4242)
    expected = list(rows)
    merged, counted = 0, set[int]()
    for _ in range(ROUNDS):
        text = dv.random_filter(rnd, len(rows))
        for t in tables.values():
            await t.delete(text)
        expected = [r for r in expected if not dv.matches(r, text)]
        want = sorted(expected)
        merged += removed_dvs(tables["dv"], counted)
        theirs = await anyio.to_thread.run_sync(java_spark.arrow, union)
        for key, t in tables.items():
            assert await dv.our_rows(t) == want, (key, text)
            assert dv.rows_of(theirs.filter(pc.equal(theirs["t"], key))) == want, (key, text)
            assert dv.duckdb_rows(t.metadata_location, duck) == want, (key, text)
    assert merged, "no round deleted from a file that already had a DV"
    dvs = await our_dvs(tables["dv"])
    assert dvs and all(seen == 1 for _, seen in dvs.values())
    assert not await our_dvs(tables["pos"])


@pytest.mark.anyio
async def test_javas_random_deletes_read_equal_here_and_in_duckdb(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    """Java's merge-on-read DELETEs on its v3 table, round after round (its DVs merge): our rows
    and DuckDB's equal Java's and plain Python's."""
    warehouse = tmp_path / "wh"
    cat = java_spark.catalog(f"dvj_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(warehouse))
    ns = f"db_{uuid.uuid4().hex[:8]}"
    name = f"{cat}.{ns}.t"
    rows = dv.make_rows(240, seed=13)
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(
        java_spark,
        f"CREATE TABLE {name} (id BIGINT NOT NULL, part STRING, v BIGINT) USING iceberg "
        "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')",
    )
    for start in (0, 80, 160):
        await java_sql(java_spark, f"INSERT INTO {name} VALUES {java_values(rows[start : start + 80])}")
    duck = duckdb_connection()
    rnd = random.Random(99)
    expected = list(rows)
    merged, counted = 0, set[int]()
    async with aioiceberg.connect(str(warehouse)) as ours:
        table = await ours.load_table(f"{ns}.t")
        for _ in range(ROUNDS):
            text = dv.random_filter(rnd, len(rows))
            await java_sql(java_spark, f"DELETE FROM {name} WHERE {text}")
            expected = [r for r in expected if not dv.matches(r, text)]
            want = sorted(expected)
            assert await java_rows(java_spark, name) == want, text
            await table.refresh()
            merged += removed_dvs(table, counted)
            assert await dv.our_rows(table) == want, text
            assert dv.duckdb_rows(table.metadata_location, duck) == want, text
        dvs = await our_dvs(table)
        assert dvs and all(seen == 1 for _, seen in dvs.values())
        assert merged, "no Java round deleted from a file that already had a DV"
