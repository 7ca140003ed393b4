"""Schemas of every Iceberg type, and the same schema built with PyIceberg's classes, for the
tests that compare our Arrow schemas and name mappings with PyIceberg's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg import schema as ps
from pyiceberg import types as pt

from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

# every primitive type with the Arrow type it maps to
PRIMITIVES: list[tuple[PrimitiveType, pa.DataType]] = [
    (BooleanType(), pa.bool_()),
    (IntegerType(), pa.int32()),
    (LongType(), pa.int64()),
    (FloatType(), pa.float32()),
    (DoubleType(), pa.float64()),
    (DecimalType(9, 2), pa.decimal128(9, 2)),
    (DecimalType(38, 10), pa.decimal128(38, 10)),
    (DateType(), pa.date32()),
    (TimeType(), pa.time64("us")),
    (TimestampType(), pa.timestamp("us")),
    (TimestamptzType(), pa.timestamp("us", tz="UTC")),
    (TimestampNanoType(), pa.timestamp("ns")),
    (TimestamptzNanoType(), pa.timestamp("ns", tz="UTC")),
    (StringType(), pa.string()),
    (UUIDType(), pa.uuid()),
    (FixedType(7), pa.binary(7)),
    (BinaryType(), pa.binary()),
    (UnknownType(), pa.null()),
]


def rich_schema() -> Schema:
    """Every type, nested three ways, required and optional, with docs."""
    fields: list[NestedField] = []
    next_id = 100
    for i, (t, _) in enumerate(PRIMITIVES):
        required = i % 2 == 0 and not isinstance(t, UnknownType)
        fields.append(
            NestedField(i + 1, f"c_{t.name}_{i}", t, required, doc=f"doc {i}" if i % 3 == 0 else None)
        )
    point = StructType(
        NestedField(next_id, "x", DoubleType(), True, doc="east"),
        NestedField(next_id + 1, "y", DoubleType(), False),
    )
    fields.append(NestedField(50, "location", point, False, doc="where"))
    fields.append(NestedField(51, "tags", ListType(102, StringType(), True), True))
    fields.append(NestedField(52, "points", ListType(103, point_copy(104), False), False))
    fields.append(NestedField(53, "props", MapType(106, StringType(), 107, LongType(), False), False))
    fields.append(
        NestedField(
            54,
            "nested",
            MapType(
                108,
                StructType(NestedField(110, "k", IntegerType(), True)),
                109,
                ListType(111, MapType(112, StringType(), 113, UUIDType(), True), False),
                True,
            ),
            True,
            doc="map of struct to list of map",
        )
    )
    return Schema(*fields, schema_id=3)


def point_copy(start: int) -> StructType:
    return StructType(NestedField(start, "px", FloatType(), True), NestedField(start + 1, "py", FloatType()))


def to_pyiceberg(schema: Schema) -> Any:
    """``schema`` as PyIceberg's, field for field."""

    def conv_type(t: IcebergType) -> Any:
        if isinstance(t, StructType):
            return pt.StructType(*(conv_field(f) for f in t.fields))
        if isinstance(t, ListType):
            return pt.ListType(t.element_id, conv_type(t.element_type), t.element_required)
        if isinstance(t, MapType):
            return pt.MapType(
                t.key_id, conv_type(t.key_type), t.value_id, conv_type(t.value_type), t.value_required
            )
        if isinstance(t, DecimalType):
            return pt.DecimalType(t.precision, t.scale)
        if isinstance(t, FixedType):
            return pt.FixedType(t.length)
        simple = {
            "boolean": pt.BooleanType,
            "int": pt.IntegerType,
            "long": pt.LongType,
            "float": pt.FloatType,
            "double": pt.DoubleType,
            "date": pt.DateType,
            "time": pt.TimeType,
            "timestamp": pt.TimestampType,
            "timestamptz": pt.TimestamptzType,
            "timestamp_ns": pt.TimestampNanoType,
            "timestamptz_ns": pt.TimestamptzNanoType,
            "string": pt.StringType,
            "uuid": pt.UUIDType,
            "binary": pt.BinaryType,
            "unknown": pt.UnknownType,
        }
        return simple[str(t)]()

    def conv_field(f: NestedField) -> Any:
        return pt.NestedField(f.field_id, f.name, conv_type(f.field_type), f.required, f.doc)

    return ps.Schema(*(conv_field(f) for f in schema.fields), schema_id=schema.schema_id)
