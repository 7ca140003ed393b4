"""Variant columns between the two implementations: Spark (Iceberg 1.12, v3) writes
``parse_json(...)`` values and we read their metadata/value bytes; we write those bytes
and Spark's ``to_json(v)`` gives back the JSON it started from.

Tables are shared through Java's Hadoop catalog layout on a tmp directory.
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
