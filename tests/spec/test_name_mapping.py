"""Name mappings: JSON (checked against PyIceberg), lookup, and ids for Parquet files without them."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from schema_samples import rich_schema, to_pyiceberg

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec.arrow import FIELD_ID_KEY, arrow_to_schema, field_id_of, schema_to_arrow
from aioiceberg.spec.name_mapping import (
    MappedField,
    NameMapping,
    apply_name_mapping,
    create_mapping_from_schema,
    name_mapping_from_json,
    name_mapping_to_json,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

SPEC_EXAMPLE = """
[ { "field-id": 1, "names": ["id", "record_id"] },
  { "field-id": 2, "names": ["data"] },
  { "field-id": 3, "names": ["location"], "fields": [
      { "field-id": 4, "names": ["latitude", "lat"] },
      { "field-id": 5, "names": ["longitude", "long"] }
  ] } ]
"""


def test_spec_example_and_lookup() -> None:
    mapping = name_mapping_from_json(SPEC_EXAMPLE)
    assert len(mapping) == 3
    assert mapping.find("id") == mapping.find("record_id") == MappedField(1, ("id", "record_id"))
    found = mapping.find("location", "lat")
    assert found is not None and found.field_id == 4
    assert mapping.find("location", "longitude") == MappedField(5, ("longitude", "long"))
    assert mapping.find("location", "altitude") is None
    assert mapping.find("data", "x") is None
    assert mapping.find("nope") is None
    assert mapping.find() is None


def test_json_round_trip_and_optional_members() -> None:
    text = (
        '[{"names":["a"]},{"field-id":2,"names":["b"],"fields":null},{"field-id":null,"names":["c"],"x":1}]'
    )
    mapping = name_mapping_from_json(text)
    assert mapping == NameMapping(
        [MappedField(None, ("a",)), MappedField(2, ("b",)), MappedField(None, ("c",))]
    )
    assert name_mapping_to_json(mapping) == '[{"names":["a"]},{"names":["b"],"field-id":2},{"names":["c"]}]'
    assert name_mapping_from_json(name_mapping_to_json(mapping)) == mapping
    assert name_mapping_from_json(json.loads(SPEC_EXAMPLE)) == name_mapping_from_json(SPEC_EXAMPLE.encode())


def test_create_from_schema() -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), True),
        NestedField(2, "l", ListType(3, StructType(NestedField(4, "x", DoubleType())))),
        NestedField(5, "m", MapType(6, StringType(), 7, IntegerType())),
    )
    mapping = create_mapping_from_schema(schema)
    assert mapping == NameMapping(
        [
            MappedField(1, ("id",)),
            MappedField(2, ("l",), (MappedField(3, ("element",), (MappedField(4, ("x",)),)),)),
            MappedField(5, ("m",), (MappedField(6, ("key",)), MappedField(7, ("value",)))),
        ]
    )
    x = mapping.find("l", "element", "x")
    assert x is not None and x.field_id == 4


def test_json_equals_pyiceberg_both_ways() -> None:
    from pyiceberg.table.name_mapping import create_mapping_from_schema as py_create
    from pyiceberg.table.name_mapping import parse_mapping_from_json

    schema = rich_schema()
    ours = create_mapping_from_schema(schema)
    theirs = py_create(to_pyiceberg(schema))
    ours_json = name_mapping_to_json(ours)
    assert ours_json == theirs.model_dump_json()  # byte-identical
    assert parse_mapping_from_json(ours_json) == theirs
    assert name_mapping_from_json(theirs.model_dump_json()) == ours

    aliases = name_mapping_from_json(SPEC_EXAMPLE)
    assert parse_mapping_from_json(name_mapping_to_json(aliases)) == parse_mapping_from_json(SPEC_EXAMPLE)


BAD_JSON: list[Any] = [
    "not json",
    "{}",
    '{"field-id": 1, "names": ["a"]}',
    "[1]",
    '[{"field-id": 1}]',
    '[{"field-id": 1, "names": []}]',
    '[{"field-id": 1, "names": [1]}]',
    '[{"field-id": 1, "names": "a"}]',
    '[{"field-id": "1", "names": ["a"]}]',
    '[{"field-id": true, "names": ["a"]}]',
    '[{"field-id": 1.5, "names": ["a"]}]',
    '[{"field-id": 1, "names": ["a"], "fields": {}}]',
    '[{"field-id": 1, "names": ["a"], "fields": [{"names": ["b"], "field-id": "x"}]}]',
    '[{"field-id": 1, "names": ["a"]}, {"field-id": 2, "names": ["b", "a"]}]',
    '[{"field-id": 1, "names": ["a"]}, {"field-id": 1, "names": ["b"]}]',
    '[{"field-id": 1, "names": ["a"], "fields": [{"field-id": 2, "names": ["x"]}, {"names": ["x"]}]}]',
    {"not": "a list"},
]


@pytest.mark.parametrize("bad", BAD_JSON)
def test_bad_json(bad: Any) -> None:
    with pytest.raises(InvalidMetadataError, match=r"schema\.name-mapping\.default"):
        name_mapping_from_json(bad)


def test_nested_error_says_where() -> None:
    with pytest.raises(InvalidMetadataError, match=r"mapping\[0\]\.fields\[0\]"):
        name_mapping_from_json(
            '[{"field-id": 1, "names": ["a"], "fields": [{"names": ["b"], "field-id": "x"}]}]'
        )


def test_constructor_validates() -> None:
    with pytest.raises(ValidationError):
        MappedField(1, ())
    with pytest.raises(ValidationError):
        NameMapping([MappedField(1, ("a",)), MappedField(2, ("a",))])


# ---------------------------------------------------------------------------
# Applying a mapping to a Parquet file written without field ids
# ---------------------------------------------------------------------------

TABLE_SCHEMA = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(
        2, "location", StructType(NestedField(3, "lat", DoubleType()), NestedField(4, "lon", DoubleType()))
    ),
    NestedField(5, "tags", ListType(6, StringType(), False)),
    NestedField(
        7,
        "props",
        MapType(8, StringType(), 9, StructType(NestedField(10, "v", IntegerType())), False),
    ),
)


def _write_plain_parquet(table: pa.Table) -> pa.Schema:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    schema = pq.read_schema(buf)
    assert "field_id=-1" in str(pq.ParquetFile(io.BytesIO(buf.getvalue())).schema)  # really no ids
    return schema


def _plain_table() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "location": pa.array(
                [{"lat": 1.0, "lon": 2.0, "alt": 3.0}, None],
                pa.struct([("lat", pa.float64()), ("lon", pa.float64()), ("alt", pa.float64())]),
            ),
            "tags": pa.array([["a"], []], pa.list_(pa.string())),
            "props": pa.array([[("k", {"v": 1})], []], pa.map_(pa.string(), pa.struct([("v", pa.int32())]))),
            "extra": pa.array(["x", "y"]),
        }
    )


def _ids(t: pa.DataType, path: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    children: list[tuple[str, pa.Field]] = []
    if pa.types.is_struct(t):
        children = [(t.field(i).name, t.field(i)) for i in range(t.num_fields)]
    elif pa.types.is_map(t):
        children = [("key", t.key_field), ("value", t.item_field)]
    elif pa.types.is_list(t):
        children = [("element", t.value_field)]
    for name, f in children:
        out[f"{path}.{name}"] = field_id_of(f)
        out.update(_ids(f.type, f"{path}.{name}"))
    return out


def test_parquet_without_ids_gets_ids_from_mapping() -> None:
    file_schema = _write_plain_parquet(_plain_table())
    assert all(field_id_of(f) is None for f in file_schema)
    mapping = create_mapping_from_schema(TABLE_SCHEMA)

    applied = apply_name_mapping(file_schema, mapping)
    ids: dict[str, int | None] = {}
    for f in applied:
        ids[f.name] = field_id_of(f)
        ids.update(_ids(f.type, f.name))
    assert ids == {
        "id": 1,
        "location": 2,
        "location.lat": 3,
        "location.lon": 4,
        "location.alt": None,  # not in the mapping: a reader skips it
        "tags": 5,
        "tags.element": 6,
        "props": 7,
        "props.key": 8,
        "props.value": 9,
        "props.value.v": 10,
        "extra": None,
    }
    assert applied.field("tags").type.value_field.metadata == {FIELD_ID_KEY: b"6"}

    # The same columns through arrow_to_schema with the mapping, without the unmapped ones.
    mapped_only = pa.schema([f for f in file_schema if f.name != "extra"])
    mapped_only = mapped_only.set(
        1, mapped_only.field("location").with_type(pa.struct([("lat", pa.float64()), ("lon", pa.float64())]))
    )
    got = arrow_to_schema(mapped_only, mapping)
    assert [f.field_id for f in got.all_fields()] == [f.field_id for f in TABLE_SCHEMA.all_fields()]
    assert arrow_to_schema(apply_name_mapping(mapped_only, mapping)) == got

    # Data cast to the applied schema writes real Parquet field ids.
    table = _plain_table().cast(applied)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    parquet_schema = str(pq.ParquetFile(io.BytesIO(buf.getvalue())).schema)
    assert "field_id=10 v" in parquet_schema and "field_id=6 element" in parquet_schema


def test_aliases_and_existing_ids() -> None:
    mapping = name_mapping_from_json(SPEC_EXAMPLE)
    arrow = pa.schema(
        [
            pa.field("record_id", pa.int64()),
            pa.field("location", pa.struct([("lat", pa.float64()), ("long", pa.float64())])),
            pa.field("data", pa.string(), metadata={FIELD_ID_KEY: b"99", b"doc": b"kept"}),
        ],
        metadata={b"k": b"v"},
    )
    applied = apply_name_mapping(arrow, mapping)
    assert field_id_of(applied.field("record_id")) == 1
    loc = applied.field("location").type
    assert [field_id_of(loc.field(i)) for i in range(2)] == [4, 5]
    assert applied.field("data").metadata == {FIELD_ID_KEY: b"99", b"doc": b"kept"}
    assert applied.metadata == {b"k": b"v"}


def test_agrees_with_pyiceberg_name_mapping_projection() -> None:
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.table.name_mapping import create_mapping_from_schema as py_create

    schema = rich_schema()
    plain = schema_to_arrow(schema, include_field_ids=False)
    mapping = create_mapping_from_schema(schema)
    theirs = pyarrow_to_schema(plain, name_mapping=py_create(to_pyiceberg(schema)), format_version=3)
    assert arrow_to_schema(plain, mapping).fields == schema.fields
    assert arrow_to_schema(apply_name_mapping(plain, mapping)).fields == schema.fields
    assert theirs == to_pyiceberg(Schema(*schema.fields))


def test_list_kinds_keep_their_arrow_type() -> None:
    mapping = NameMapping([MappedField(1, ("l",), (MappedField(2, ("element",)),))])
    for t in (
        pa.list_(pa.int32()),
        pa.large_list(pa.int32()),
        pa.list_(pa.int32(), 2),
        pa.list_view(pa.int32()),
    ):
        applied = apply_name_mapping(pa.schema([pa.field("l", t)]), mapping).field("l")
        assert type(applied.type) is type(t)
        assert field_id_of(applied.type.value_field) == 2


@pytest.mark.anyio
async def test_schema_evolution_keeps_the_mapping_resolving_like_pyiceberg(tmp_path: Any) -> None:
    """Adds, renames, nested adds and a column added under a dropped column's name: the
    stored mapping after our evolution equals PyIceberg's after the same steps."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import DoubleType as PyDouble
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import StringType as PyString

    import aioiceberg

    arrow = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("name", pa.string()),
            pa.field("loc", pa.struct([pa.field("lat", pa.float64())])),
        ]
    )
    prop = "schema.name-mapping.default"
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    ours = await catalog.create_table("db.t", schema=arrow)
    initial = name_mapping_to_json(create_mapping_from_schema(ours.schema()))
    async with ours.transaction() as tx:
        tx.set_properties({prop: initial})
    py_catalog = SqlCatalog("py", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/pywh")
    py_catalog.create_namespace("db")
    theirs = py_catalog.create_table("db.t", schema=arrow, properties={prop: initial})

    async with ours.update_schema() as u:
        u.add_column("extra", "long")
        u.add_column(("loc", "lon"), "double")
        u.rename_column("name", "full_name")
    async with ours.update_schema() as u:
        u.delete_column("id")
    async with ours.update_schema() as u:
        u.add_column("id", "string")
        u.rename_column("full_name", "name2")

    with theirs.update_schema() as pu:
        pu.add_column("extra", PyLong())
        pu.add_column(("loc", "lon"), PyDouble())
        pu.rename_column("name", "full_name")
    with theirs.update_schema() as pu:
        pu.delete_column("id")
    with theirs.update_schema() as pu:
        pu.add_column("id", PyString())
        pu.rename_column("full_name", "name2")

    mine = json.loads((await catalog.load_table("db.t")).properties[prop])
    expected = json.loads(theirs.properties[prop])
    assert mine == expected
    assert name_mapping_from_json(json.dumps(mine)).find("name")  # files from before keep resolving
    new_id = name_mapping_from_json(json.dumps(mine)).find("id")
    assert new_id is not None and new_id.field_id != 1  # the old "id" no longer claims the name
