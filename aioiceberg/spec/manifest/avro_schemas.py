"""On-disk Avro schemas of manifests and manifest lists, per format version.

Field ids (``field-id``, ``element-id``) and record names follow the spec and what Java and
PyIceberg write (``manifest_entry``, ``r2``, ``r102``, ``k117_v118``, ``manifest_file``,
``r508``), so the files we write are indistinguishable from theirs to any reader.
"""

from __future__ import annotations

from typing import Any

from aioiceberg.errors import UnsupportedFormatVersionError, ValidationError
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
    LongType,
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

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "SUPPORTED_FORMAT_VERSIONS",
    "manifest_entry_schema",
    "manifest_list_schema",
    "partition_record_schema",
]

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
# v1 data files must carry block_size_in_bytes; its value is meaningless, this is Java's default.
DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024

AvroSchema = dict[str, Any]


def _check_version(format_version: int) -> None:
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(f"format version {format_version} is not supported")


def _required(name: str, field_id: int, avro_type: Any, **extra: Any) -> AvroSchema:
    return {"name": name, "type": avro_type, "field-id": field_id, **extra}


def _optional(name: str, field_id: int, avro_type: Any) -> AvroSchema:
    return {"name": name, "type": ["null", avro_type], "default": None, "field-id": field_id}


def _int_map(name: str, field_id: int, key_id: int, value_id: int, value_type: str) -> AvroSchema:
    # Iceberg maps with non-string keys are arrays of key/value records marked logicalType map.
    record = {
        "type": "record",
        "name": f"k{key_id}_v{value_id}",
        "fields": [
            {"name": "key", "type": "int", "field-id": key_id},
            {"name": "value", "type": value_type, "field-id": value_id},
        ],
    }
    return _optional(name, field_id, {"type": "array", "items": record, "logicalType": "map"})


def _list(name: str, field_id: int, element_id: int, element_type: str) -> AvroSchema:
    return _optional(name, field_id, {"type": "array", "items": element_type, "element-id": element_id})


def _decimal_size(precision: int) -> int:
    """Smallest number of bytes whose two's complement holds every unscaled value of ``precision``."""
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def _partition_value_type(t: IcebergType, named: set[str]) -> Any:
    """Avro type of one partition value; named types are defined once and then referenced."""

    def fixed(name: str, size: int, **extra: Any) -> Any:
        if name in named:
            return name
        named.add(name)
        return {"type": "fixed", "name": name, "size": size, **extra}

    if isinstance(t, BooleanType):
        return "boolean"
    if isinstance(t, IntegerType):
        return "int"
    if isinstance(t, LongType):
        return "long"
    if isinstance(t, FloatType):
        return "float"
    if isinstance(t, DoubleType):
        return "double"
    if isinstance(t, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(t, TimeType):
        return {"type": "long", "logicalType": "time-micros"}
    if isinstance(t, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    if isinstance(t, TimestamptzType):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    if isinstance(t, TimestampNanoType):
        return {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False}
    if isinstance(t, TimestamptzNanoType):
        return {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True}
    if isinstance(t, StringType):
        return "string"
    if isinstance(t, UUIDType):
        return fixed("uuid_fixed", 16, logicalType="uuid")
    if isinstance(t, FixedType):
        return fixed(f"fixed_{t.length}", t.length)
    if isinstance(t, BinaryType):
        return "bytes"
    if isinstance(t, DecimalType):
        return fixed(
            f"decimal_{t.precision}_{t.scale}",
            _decimal_size(t.precision),
            logicalType="decimal",
            precision=t.precision,
            scale=t.scale,
        )
    if isinstance(t, UnknownType):
        return "null"
    raise ValidationError(f"partition fields must be primitive, got {t}")


def partition_record_schema(partition_type: StructType) -> AvroSchema:
    """The ``r102`` record holding a file's partition tuple, one optional field per spec field."""
    named: set[str] = set()
    fields: list[AvroSchema] = []
    for f in partition_type.fields:
        avro_type = _partition_value_type(f.field_type, named)
        if avro_type == "null":
            fields.append({"name": f.name, "type": "null", "default": None, "field-id": f.field_id})
        else:
            fields.append(_optional(f.name, f.field_id, avro_type))
    return {"type": "record", "name": "r102", "fields": fields}


def _data_file_schema(format_version: int, partition_type: StructType) -> AvroSchema:
    fields: list[AvroSchema] = []
    if format_version >= 2:
        fields.append(_required("content", 134, "int"))
    fields += [
        _required("file_path", 100, "string"),
        _required("file_format", 101, "string"),
        _required("partition", 102, partition_record_schema(partition_type)),
        _required("record_count", 103, "long"),
        _required("file_size_in_bytes", 104, "long"),
    ]
    if format_version == 1:
        fields.append(_required("block_size_in_bytes", 105, "long", default=DEFAULT_BLOCK_SIZE))
    fields += [
        _int_map("column_sizes", 108, 117, 118, "long"),
        _int_map("value_counts", 109, 119, 120, "long"),
        _int_map("null_value_counts", 110, 121, 122, "long"),
        _int_map("nan_value_counts", 137, 138, 139, "long"),
        _int_map("lower_bounds", 125, 126, 127, "bytes"),
        _int_map("upper_bounds", 128, 129, 130, "bytes"),
        _optional("key_metadata", 131, "bytes"),
        _list("split_offsets", 132, 133, "long"),
    ]
    if format_version >= 2:
        fields.append(_list("equality_ids", 135, 136, "int"))
    fields.append(_optional("sort_order_id", 140, "int"))
    if format_version >= 3:
        fields += [
            _optional("first_row_id", 142, "long"),
            _optional("referenced_data_file", 143, "string"),
            _optional("content_offset", 144, "long"),
            _optional("content_size_in_bytes", 145, "long"),
        ]
    return {"type": "record", "name": "r2", "fields": fields}


def manifest_entry_schema(format_version: int, partition_type: StructType) -> AvroSchema:
    """Schema of a manifest file's rows (``manifest_entry``) for a partition struct."""
    _check_version(format_version)
    fields: list[AvroSchema] = [_required("status", 0, "int")]
    if format_version == 1:
        fields.append(_required("snapshot_id", 1, "long"))
    else:
        fields += [
            _optional("snapshot_id", 1, "long"),
            _optional("sequence_number", 3, "long"),
            _optional("file_sequence_number", 4, "long"),
        ]
    fields.append(_required("data_file", 2, _data_file_schema(format_version, partition_type)))
    return {"type": "record", "name": "manifest_entry", "fields": fields}


def _field_summary() -> AvroSchema:
    return {
        "type": "record",
        "name": "r508",
        "fields": [
            _required("contains_null", 509, "boolean"),
            _optional("contains_nan", 518, "boolean"),
            _optional("lower_bound", 510, "bytes"),
            _optional("upper_bound", 511, "bytes"),
        ],
    }


def manifest_list_schema(format_version: int) -> AvroSchema:
    """Schema of a manifest list's rows (``manifest_file``)."""
    _check_version(format_version)
    v1 = format_version == 1
    count = _optional if v1 else _required
    fields: list[AvroSchema] = [
        _required("manifest_path", 500, "string"),
        _required("manifest_length", 501, "long"),
        _required("partition_spec_id", 502, "int"),
    ]
    if not v1:
        fields += [
            _required("content", 517, "int"),
            _required("sequence_number", 515, "long"),
            _required("min_sequence_number", 516, "long"),
        ]
    fields += [
        _required("added_snapshot_id", 503, "long"),
        count("added_files_count", 504, "int"),
        count("existing_files_count", 505, "int"),
        count("deleted_files_count", 506, "int"),
        count("added_rows_count", 512, "long"),
        count("existing_rows_count", 513, "long"),
        count("deleted_rows_count", 514, "long"),
        _optional("partitions", 507, {"type": "array", "items": _field_summary(), "element-id": 508}),
        _optional("key_metadata", 519, "bytes"),
    ]
    if format_version >= 3:
        fields.append(_optional("first_row_id", 520, "long"))
    return {"type": "record", "name": "manifest_file", "fields": fields}
