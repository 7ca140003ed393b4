"""A column that neither a field id nor the name mapping resolves reads as NULL, and planning,
filtering and reading follow that one rule: a filter never drops a row the unfiltered read
shows as matching, nor keeps one it shows as not matching."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import aioiceberg
from aioiceberg.spec.name_mapping import (
    MappedField,
    NameMapping,
    create_mapping_from_schema,
    name_mapping_to_json,
    schema_as_read,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import IntegerType, ListType, LongType, NestedField, StructType

pytestmark = pytest.mark.anyio

INNER = pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.int64(), nullable=False)])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("opt", pa.string()),
        pa.field("req", pa.int32(), nullable=False),
        pa.field("s", INNER, nullable=False),
    ]
)

# (filter, Arrow expression over the unfiltered read: what the filter must keep)
FILTERS: list[tuple[str, pc.Expression]] = [
    ("req IS NULL", pc.field("req").is_null()),
    ("req IS NOT NULL", pc.field("req").is_valid()),
    ("req = 3", pc.field("req") == 3),
    ("opt IS NULL AND req IS NULL", pc.field("opt").is_null() & pc.field("req").is_null()),
    ("id < 3 OR req IS NULL", (pc.field("id") < 3) | pc.field("req").is_null()),
    ("NOT (req IS NULL) OR id = 1", pc.field("req").is_valid() | (pc.field("id") == 1)),
    ("s.y IS NULL AND s.x >= 10", pc.field("s", "y").is_null() & (pc.field("s", "x") >= 10)),
    ("s.y = 1", pc.field("s", "y") == 1),
    ("opt = 'v1'", pc.field("opt") == "v1"),
]


def _rows(k: int) -> pa.Table:
    ids = list(range(k * 10, k * 10 + 10))
    return pa.table(
        {
            "id": ids,
            "opt": [f"v{i % 3}" for i in ids],
            "req": pa.array([i % 5 for i in ids], pa.int32()),
            "s": pa.array([{"x": i, "y": i % 2} for i in ids], INNER),
        }
    )


async def _table(tmp_path: Path) -> aioiceberg.Table:
    """Two Parquet files without field ids added under a full mapping (so the manifests carry
    stats for every column), then a mapping that omits ``req`` and ``s.y``."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=SCHEMA)
    full = create_mapping_from_schema(table.schema())
    async with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": name_mapping_to_json(full)})
    paths = []
    for k in range(2):
        path = tmp_path / f"plain-{k}.parquet"
        pq.write_table(_rows(k), path)
        assert pq.read_schema(path).field("req").metadata is None  # no field ids in the file
        paths.append(str(path))
    await table.add_files(paths)
    partial = []
    for f in full:
        if f.names[0] == "req":
            continue
        if f.names[0] == "s":
            f = MappedField(f.field_id, f.names, tuple(c for c in f.fields if c.names[0] == "x"))
        partial.append(f)
    async with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": name_mapping_to_json(NameMapping(partial))})
    return table


async def test_plan_filter_and_read_agree_on_unresolved_columns(tmp_path: Path) -> None:
    table = await _table(tmp_path)
    everything = await table.scan().to_arrow()
    assert everything.num_rows == 20
    assert everything.column("req").null_count == 20  # required in the schema, yet unresolved
    assert pc.struct_field(everything.column("s"), [1]).null_count == 20
    assert everything.column("opt").null_count == 0 and everything.column("id").null_count == 0
    assert everything.schema.field("req").nullable and not everything.schema.field("id").nullable

    for text, expected in FILTERS:
        scan = table.scan(row_filter=text)
        want = sorted(everything.filter(expected).column("id").to_pylist())
        got = sorted((await scan.to_arrow()).column("id").to_pylist())
        assert got == want, text
        planned = sum(t.file.record_count for t in [t async for t in scan.plan_files()])
        assert planned >= len(want), text  # the stats of req and s.y prune nothing
    counts = {text: len(await table.scan(row_filter=text).to_arrow()) for text, _ in FILTERS[:3]}
    assert counts == {"req IS NULL": 20, "req IS NOT NULL": 0, "req = 3": 0}

    # a column chosen alone reads the same way
    only = await table.scan(selected_fields=("req",)).to_arrow()
    assert only.num_rows == 20 and only.column("req").null_count == 20


async def test_a_mapped_required_column_is_still_required(tmp_path: Path) -> None:
    """The rule touches only what the mapping leaves out: ``id`` keeps its stats and its
    ``IS NULL`` still folds to nothing planned."""
    table = await _table(tmp_path)
    assert [t async for t in table.scan(row_filter="id IS NULL").plan_files()] == []
    assert [t async for t in table.scan(row_filter="id > 100").plan_files()] == []
    assert table.schema().find_field("req").required  # the table's own schema is unchanged


def test_schema_as_read_relaxes_only_unresolved_required_fields() -> None:
    schema = Schema(
        NestedField(1, "a", IntegerType(), required=True),
        NestedField(2, "b", IntegerType(), required=True, initial_default=7),
        NestedField(3, "s", StructType(NestedField(4, "x", LongType(), required=True)), required=True),
        NestedField(5, "l", ListType(6, StructType(NestedField(7, "z", LongType(), required=True)))),
        schema_id=3,
        identifier_field_ids=[1],
    )
    mapping = NameMapping([MappedField(3, ("s",), (MappedField(4, ("x",)),)), MappedField(5, ("l",))])
    props = {"schema.name-mapping.default": name_mapping_to_json(mapping)}
    read = schema_as_read(schema, props)
    assert not read.find_field("a").required  # unresolved: reads as NULL
    assert read.find_field("b").required  # unresolved, but reads as its initial default
    assert read.find_field("s").required and read.find_field("s.x").required  # resolved
    assert not read.find_field(7).required  # under a mapped list whose element struct is not
    assert (read.schema_id, read.identifier_field_ids) == (3, (1,))
    assert schema_as_read(schema, {}) is schema  # no mapping: ids are the only way
    full = {"schema.name-mapping.default": name_mapping_to_json(create_mapping_from_schema(schema))}
    assert schema_as_read(schema, full) is schema
