"""Variant columns between the two implementations: Spark (Iceberg 1.12, v3) writes
``parse_json(...)`` values and we read their metadata/value bytes; we write those bytes
and Spark's ``to_json(v)`` gives back the JSON it started from.

Tables are shared through Java's Hadoop catalog layout on a tmp directory.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from servers.java_spark import JavaSpark

import aioiceberg
from aioiceberg.spec.arrow import variant_arrow_type
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField, VariantType

pytestmark = pytest.mark.xdist_group("java")

JSON = {0: '{"a":1}', 1: None, 2: '{"b":"x","c":[1,2]}', 3: "7"}


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


def fresh(java: JavaSpark, tmp_path: Path) -> tuple[str, Path, str]:
    warehouse = tmp_path / "warehouse"
    cat = java.catalog(f"var_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(warehouse))
    return cat, warehouse, f"db_{uuid.uuid4().hex[:8]}"


def values_sql() -> str:
    rows = ", ".join(f"({i}, {'NULL' if j is None else repr(j)})" for i, j in JSON.items())
    return f"SELECT id, parse_json(j) FROM VALUES {rows} AS src(id, j)"


@pytest.mark.anyio
async def test_variant_both_ways(java_spark: JavaSpark, tmp_path: Path) -> None:
    cat, warehouse, ns = fresh(java_spark, tmp_path)
    theirs = f"{cat}.{ns}.theirs"
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(
        java_spark,
        f"CREATE TABLE {theirs} (id BIGINT NOT NULL, v VARIANT) USING iceberg "
        "TBLPROPERTIES ('format-version'='3')",
    )
    await java_sql(java_spark, f"INSERT INTO {theirs} {values_sql()}")

    async with aioiceberg.connect(str(warehouse)) as here:
        table = await here.load_table(f"{ns}.theirs")
        assert table.schema().find_field("v").field_type == VariantType()
        got = (await table.scan().to_arrow()).sort_by("id")
        assert got.column("v").type == variant_arrow_type()
        read = got.column("v").to_pylist()
        assert [r is None for r in read] == [j is None for j in JSON.values()]
        first = read[0]
        assert first is not None and b"a" in first["metadata"]

        # Their bytes written by us: Spark decodes them back to the same JSON.
        schema = Schema(NestedField(1, "id", LongType(), True), NestedField(2, "v", VariantType(), False))
        mine = await here.create_table(f"{ns}.ours", schema=schema, format_version=3)
        await mine.append(pa.table({"id": got.column("id"), "v": got.column("v")}))

    ours = f"{cat}.{ns}.ours"
    await java_sql(java_spark, f"REFRESH TABLE {ours}")
    spark_rows = await java_sql(java_spark, f"SELECT id, to_json(v) FROM {ours} ORDER BY id")
    assert {r[0]: r[1] for r in spark_rows} == JSON
    nulls = await java_sql(java_spark, f"SELECT id FROM {ours} WHERE v IS NULL")
    assert [r[0] for r in nulls] == [1]


def shredded_rows() -> list[tuple[int, str | None]]:
    """Objects at the top (Java shreds a top-level variant only when its rows share one type):
    an int field mostly int8 but typed int32 (int8 rows fall to the residual), strings short,
    long and null (null keeps the field unshredded), int arrays, an array of objects, a nested
    object partially shredded, a rare field pruned into the residual, an empty object."""
    out: list[tuple[int, str | None]] = []
    for i in range(40):
        o: dict[str, Any] = {"a": i if i % 5 else 300000 + i}
        o["b"] = (
            None
            if i % 10 == 9
            else f"s{i}"
            if i % 4
            else f"a long string, longer than sixty-four bytes, number {i}"
        )
        if i % 3 == 0:
            o["c"] = [i, i + 1, -i]
        if i % 2 == 0:
            o["d"] = {"e": i / 4, "f": "g" if i % 6 else i}
        if i % 4 == 1:
            o["arr"] = [{"k": k, **({"m": f"m{k}"} if k % 2 else {})} for k in range(i % 3 + 1)]
        if i == 7:
            o["rare"] = True
        out.append((i, None if i == 5 else "{}" if i == 11 else json.dumps(o)))
    return out


TYPED = """to_variant_object(named_struct(
    'd', date_add(DATE'2024-01-01', CAST(id AS int)),
    'ts', TIMESTAMP'2024-01-01 00:00:00' + make_dt_interval(0, CAST(id AS int), 0, 0.123456),
    'ntz', TIMESTAMP_NTZ'2024-02-01 00:00:00' + make_dt_interval(0, 0, CAST(id AS int), 0),
    'f', CAST(id AS float) / 8, 'dbl', CAST(id AS double) / 3, 'bin', unhex(hex(id * 7919)),
    'flag', id % 2 = 0, 'dec', CAST(id AS decimal(20, 4)) / 7, 'small', CAST(id AS smallint),
    'tiny', CAST(id AS tinyint), 'big', id * 10000000000,
    'maybe', CASE WHEN id % 3 = 0 THEN NULL ELSE concat('x', id) END,
    'fl', CAST(CAST(id AS double) / 8 AS float),
    'd8', CAST(id AS decimal(20, 2)) * 1000000000 + 0.25BD,
    'd16', CAST(id AS decimal(38, 1)) * 100000000000000000000BD + 0.5BD))"""
TYPED_KINDS = {
    "fl": pa.float32(),
    "d8": pa.decimal128(13, 2),
    "d16": pa.decimal128(23, 1),
    "ts": pa.timestamp("us", tz="UTC"),
    "ntz": pa.timestamp("us"),
    "d": pa.date32(),
    "bin": pa.binary(),
}
"""Shredded types of ``TYPED``'s fields in Java's file (the variant kinds they stand for)."""


@pytest.mark.anyio
async def test_java_shredded_variants_read_whole(java_spark: JavaSpark, tmp_path: Path) -> None:
    """Java writes with ``write.parquet.shred-variants``: its files hold typed_value columns, and
    the variants we reassemble from them, written back unshredded, are Spark's values again."""
    cat, warehouse, ns = fresh(java_spark, tmp_path)
    theirs = f"{cat}.{ns}.shredded"
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(
        java_spark,
        f"CREATE TABLE {theirs} (id BIGINT NOT NULL, j VARIANT, w VARIANT) USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'write.parquet.shred-variants'='true')",
    )
    rows = ", ".join(f"({i}, {'NULL' if j is None else repr(j)})" for i, j in shredded_rows())
    await java_sql(
        java_spark,
        f"INSERT INTO {theirs} SELECT /*+ COALESCE(1) */ id, parse_json(j), "
        f"CASE WHEN id = 6 THEN NULL ELSE {TYPED} END FROM VALUES {rows} AS src(id, j)",
    )

    async with aioiceberg.connect(str(warehouse)) as here:
        table = await here.load_table(f"{ns}.shredded")
        files = [task.file.file_path async for task in table.scan().plan_files()]
        for path in files:
            group = pq.ParquetFile(path.removeprefix("file:")).schema_arrow
            for column in ("j", "w"):
                variant = group.field(column).type
                assert variant.get_field_index("typed_value") >= 0, (column, variant)
            typed = group.field("w").type.field("typed_value").type
            kinds = {typed.field(k).name: typed.field(k).type.field("typed_value").type for k in TYPED_KINDS}
            assert kinds == TYPED_KINDS
        got = (await table.scan().to_arrow()).sort_by("id")
        assert got.column("j").type == variant_arrow_type()
        schema = Schema(
            NestedField(1, "id", LongType(), True),
            NestedField(2, "j", VariantType(), False),
            NestedField(3, "w", VariantType(), False),
        )
        mine = await here.create_table(f"{ns}.unshredded", schema=schema, format_version=3)
        await mine.append(got.select(["id", "j", "w"]))

    query = "SELECT id, to_json(j), to_json(w) FROM {} ORDER BY id"
    want = await java_sql(java_spark, query.format(theirs))
    assert len(want) == 40 and want[5][1] is None and want[6][2] is None
    assert await java_sql(java_spark, query.format(f"{cat}.{ns}.unshredded")) == want
