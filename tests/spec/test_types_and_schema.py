"""Types, schemas and their JSON forms, checked against PyIceberg's model of the same objects."""

from __future__ import annotations

import json

import pytest
from pyiceberg.schema import Schema as PySchema

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec.schema import Schema, assign_fresh_ids, prune_columns
from aioiceberg.spec.schema_json import schema_from_json, schema_to_json, type_from_json
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    parse_primitive,
)


def rich_schema() -> Schema:
    return Schema(
        NestedField(1, "id", LongType(), required=True, doc="row id"),
        NestedField(2, "flag", BooleanType()),
        NestedField(3, "i", IntegerType()),
        NestedField(4, "f", FloatType()),
        NestedField(5, "d", DoubleType()),
        NestedField(6, "amount", DecimalType(9, 2)),
        NestedField(7, "day", DateType()),
        NestedField(8, "t", TimeType()),
        NestedField(9, "ts", TimestampType()),
        NestedField(10, "tstz", TimestamptzType()),
        NestedField(11, "s", StringType()),
        NestedField(12, "u", UUIDType()),
        NestedField(13, "fx", FixedType(16)),
        NestedField(14, "b", BinaryType()),
        NestedField(
            15,
            "loc",
            StructType(
                NestedField(16, "lat", DoubleType(), True), NestedField(17, "lon", DoubleType(), True)
            ),
        ),
        NestedField(18, "tags", ListType(19, StringType(), element_required=False)),
        NestedField(
            20,
            "props",
            MapType(
                21, StringType(), 22, StructType(NestedField(23, "v", IntegerType())), value_required=True
            ),
        ),
        schema_id=3,
        identifier_field_ids=[1],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("decimal(9,2)", DecimalType(9, 2)),
        ("decimal( 38 , 0 )", DecimalType(38, 0)),
        ("fixed[16]", FixedType(16)),
        ("timestamp_ns", TimestampNanoType()),
        ("timestamptz_ns", TimestamptzNanoType()),
        ("unknown", UnknownType()),
        ("uuid", UUIDType()),
    ],
)
def test_primitive_type_strings_parse(text: str, expected: object) -> None:
    assert parse_primitive(text) == expected


@pytest.mark.parametrize("text", ["decimal(39,2)", "fixed[-1]", "varchar", "decimal(9)"])
def test_bad_primitive_type_strings_are_rejected(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_primitive(text)


def test_schema_json_is_read_by_pyiceberg_field_for_field() -> None:
    ours = rich_schema()
    theirs = PySchema.model_validate_json(json.dumps(schema_to_json(ours)))
    assert theirs.schema_id == 3
    assert list(theirs.identifier_field_ids) == [1]
    assert theirs.highest_field_id == ours.highest_field_id == 23
    for name in ("id", "amount", "loc.lat", "tags.element", "props.value.v", "fx", "tstz"):
        assert theirs.find_field(name).field_id == ours.find_field(name).field_id
        assert str(theirs.find_field(name).field_type) == str(ours.find_field(name).field_type)
        assert theirs.find_field(name).required == ours.find_field(name).required


def test_pyiceberg_schema_json_reads_back_equal() -> None:
    ours = rich_schema()
    theirs = PySchema.model_validate_json(json.dumps(schema_to_json(ours)))
    assert schema_from_json(json.loads(theirs.model_dump_json())) == ours


def test_lookup_by_name_is_case_insensitive_on_request() -> None:
    schema = rich_schema()
    assert schema.find_field("LOC.LAT", case_sensitive=False).field_id == 16
    with pytest.raises(ValidationError, match=r"LOC\.LAT"):
        schema.find_field("LOC.LAT")


def test_short_names_skip_element_and_value() -> None:
    schema = rich_schema()
    assert schema.find_field_id("props.v") == 23
    assert schema.find_field_id("props.value.v") == 23
    assert schema.find_column_name(23) == "props.value.v"
    assert schema.find_column_name(19) == "tags.element"


def test_projection_keeps_parents_of_selected_fields() -> None:
    pruned = prune_columns(rich_schema(), {17, 1})
    assert [f.name for f in pruned.fields] == ["id", "loc"]
    assert pruned.find_field("loc").field_type == StructType(NestedField(17, "lon", DoubleType(), True))
    assert rich_schema().select("props").find_field("props.value.v").field_id == 23


def test_identifier_fields_must_be_required_primitives() -> None:
    rich_schema().validate_identifier_fields()
    bad = Schema(NestedField(1, "x", DoubleType(), True), identifier_field_ids=[1])
    with pytest.raises(ValidationError, match="float or double"):
        bad.validate_identifier_fields()
    optional = Schema(NestedField(1, "x", LongType(), False), identifier_field_ids=[1])
    with pytest.raises(ValidationError, match="required"):
        optional.validate_identifier_fields()


def test_fresh_ids_are_assigned_depth_first_like_pyiceberg() -> None:
    from pyiceberg.schema import assign_fresh_schema_ids

    ours = assign_fresh_ids(rich_schema())
    theirs = assign_fresh_schema_ids(PySchema.model_validate_json(json.dumps(schema_to_json(rich_schema()))))
    assert schema_to_json(ours)["fields"] == json.loads(theirs.model_dump_json())["fields"]


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "struct"},
        {"type": "struct", "fields": [{"id": "1", "name": "x", "required": True, "type": "long"}]},
        {"type": "struct", "fields": [{"id": 1, "name": "x", "required": True, "type": "varchar"}]},
        {"type": "struct", "fields": [{"id": 1, "name": "x", "required": True, "type": {"type": "list"}}]},
        [],
    ],
)
def test_malformed_schema_json_raises_invalid_metadata(bad: object) -> None:
    with pytest.raises(InvalidMetadataError):
        schema_from_json(bad)


def test_nested_type_json_round_trips() -> None:
    t = rich_schema().find_type("props")
    from aioiceberg.spec.schema_json import type_to_json

    assert type_from_json(type_to_json(t)) == t
