"""Iceberg schemas to and from Apache Arrow schemas.

Field ids travel in Arrow field metadata under ``PARQUET:field_id`` because that is
the key pyarrow's Parquet writer turns into Parquet field ids (and its reader turns
back), so a schema from here writes spec-conformant files with no extra step. Docs
use the ``doc`` key, as PyIceberg does, so both read each other's Arrow schemas.

Arrow -> Iceberg type rules (one table for files read back and for new tables):

* ``int8/int16/int32/uint8/uint16`` -> ``int``; ``int64/uint32`` -> ``long`` (by value
  range, so no value overflows); ``uint64`` has no Iceberg type.
* ``float16/float32`` -> ``float`` (widening is lossless); ``float64`` -> ``double``.
* ``string/large_string/string_view`` -> ``string``; ``binary/large_binary/binary_view``
  -> ``binary``; ``fixed_size_binary(L)`` -> ``fixed[L]``; the ``arrow.uuid`` extension
  -> ``uuid``; dictionary- and run-end-encoded columns take their value type.
* ``timestamp`` with unit ``s``/``ms``/``us`` -> ``timestamp[tz]`` (micros: widening is
  lossless, writers cast the values); unit ``ns`` -> ``timestamp[tz]_ns`` (v3).
  Any time zone -> the ``tz`` variant: Arrow keeps zoned timestamps as UTC instants
  and the zone is display metadata only; the way back always says ``UTC``.
* ``time32(s|ms)/time64(us)`` -> ``time``; ``time64(ns)`` is refused (it would lose
  precision). ``date32/date64`` -> ``date``. ``decimal32/64/128`` and ``decimal256``
  with precision <= 38 -> ``decimal``. ``null`` -> ``unknown`` (v3).
* Durations, intervals, unions, other extension types: ``UnsupportedError``.

Format-version limits (``timestamp_ns``, ``unknown`` need v3) are checked by whoever
builds table metadata: every type carries ``min_format_version``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyarrow as pa

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.arrow_fields import (
    DOC_KEY,
    FIELD_ID_KEY,
    LIST_ELEMENT_NAME,
    MAP_KEY_NAME,
    MAP_VALUE_NAME,
    ORC_FIELD_ID_KEY,
    field_id_of,
)
from aioiceberg.spec.name_mapping import NameMapping
from aioiceberg.spec.schema import Schema, assign_fresh_ids
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
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)

__all__ = [
    "DOC_KEY",
    "FIELD_ID_KEY",
    "ORC_FIELD_ID_KEY",
    "arrow_to_iceberg_type",
    "arrow_to_schema",
    "arrow_to_schema_assign_ids",
    "arrow_type_for",
    "field_id_of",
    "schema_to_arrow",
    "variant_arrow_type",
]

# ---------------------------------------------------------------------------
# Iceberg -> Arrow
# ---------------------------------------------------------------------------

# pyarrow >= 18 has the canonical arrow.uuid extension (PyIceberg uses it too): its
# storage is fixed_size_binary(16) and Parquet writes it as FIXED[16] with the UUID
# annotation. Older pyarrow (the floor is 17) gets the bare storage type.
_UUID: pa.DataType = pa.uuid() if hasattr(pa, "uuid") else pa.binary(16)
_UUID_ARROW_TYPE: type | None = getattr(pa, "UuidType", None)

_SIMPLE_TO_ARROW: dict[type[IcebergType], pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    DateType: pa.date32(),
    TimeType: pa.time64("us"),
    TimestampType: pa.timestamp("us"),
    TimestamptzType: pa.timestamp("us", tz="UTC"),
    TimestampNanoType: pa.timestamp("ns"),
    TimestamptzNanoType: pa.timestamp("ns", tz="UTC"),
    UUIDType: _UUID,
    UnknownType: pa.null(),
}


def schema_to_arrow(
    schema: Schema, include_field_ids: bool = True, *, large_types: bool = False
) -> pa.Schema:
    """The Arrow schema of an Iceberg schema.

    ``large_types`` picks ``large_string`` / ``large_binary`` / ``large_list`` (64-bit
    offsets), which is what PyIceberg produces; the default keeps the common 32-bit
    forms, which every Arrow consumer accepts.
    """
    return pa.schema([_arrow_field(f, include_field_ids, large_types) for f in schema.fields])


def arrow_type_for(
    iceberg_type: IcebergType, *, include_field_ids: bool = True, large_types: bool = False
) -> pa.DataType:
    """The Arrow type of one Iceberg type (nested children carry their field ids)."""
    return _arrow_type(iceberg_type, include_field_ids, large_types)


def variant_arrow_type(large_types: bool = False) -> pa.DataType:
    """The Arrow form of an unshredded variant: the Parquet group's two binaries, by name.

    pyarrow's Parquet code knows the ``arrow.parquet.variant`` extension in C++ only;
    a Python-side registration of that name crashes its writer, so the bare storage
    struct is what we read and write (Java reads such a group as a variant by field id).
    """
    binary = pa.large_binary() if large_types else pa.binary()
    return pa.struct(
        [pa.field("metadata", binary, nullable=False), pa.field("value", binary, nullable=False)]
    )


def _arrow_field(field: NestedField, include_field_ids: bool, large_types: bool) -> pa.Field:
    metadata: dict[bytes, bytes] = {}
    if field.doc:
        metadata[DOC_KEY] = field.doc.encode()
    if include_field_ids:
        metadata[FIELD_ID_KEY] = str(field.field_id).encode()
    return pa.field(
        field.name,
        _arrow_type(field.field_type, include_field_ids, large_types),
        nullable=not field.required,
        metadata=metadata or None,
    )


def _arrow_type(t: IcebergType, ids: bool, large: bool) -> pa.DataType:
    simple = _SIMPLE_TO_ARROW.get(type(t))
    if simple is not None:
        return simple
    if isinstance(t, StringType):
        return pa.large_string() if large else pa.string()
    if isinstance(t, BinaryType):
        return pa.large_binary() if large else pa.binary()
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, VariantType):
        return variant_arrow_type(large)
    if isinstance(t, StructType):
        return pa.struct([_arrow_field(f, ids, large) for f in t.fields])
    if isinstance(t, ListType):
        element = _arrow_field(t.element_field, ids, large)
        return pa.large_list(element) if large else pa.list_(element)
    if isinstance(t, MapType):
        return pa.map_(_arrow_field(t.key_field, ids, large), _arrow_field(t.value_field, ids, large))
    raise UnsupportedError(f"no Arrow type for Iceberg type {t}")


# ---------------------------------------------------------------------------
# Arrow -> Iceberg
# ---------------------------------------------------------------------------

_IdSource = Callable[[pa.Field, tuple[str, ...]], int]


def arrow_to_schema(arrow_schema: pa.Schema, name_mapping: NameMapping | None = None) -> Schema:
    """The Iceberg schema of an Arrow schema that carries field ids (e.g. a data file's).

    A field without an id takes it from ``name_mapping`` (the table's
    ``schema.name-mapping.default``); with neither, ValidationError names the field.
    Ids in the metadata always win over the mapping.
    """

    def ids(field: pa.Field, path: tuple[str, ...]) -> int:
        fid = field_id_of(field)
        if fid is not None:
            return fid
        if name_mapping is not None:
            mapped = name_mapping.find(*path)
            if mapped is not None and mapped.field_id is not None:
                return mapped.field_id
            raise ValidationError(
                f"field {'.'.join(path)!r} has no field id and the name mapping does not map it"
            )
        raise ValidationError(
            f"field {'.'.join(path)!r} has no field id ({FIELD_ID_KEY.decode()} metadata) "
            "and no name mapping was given"
        )

    schema = Schema(*_struct_fields(arrow_schema, (), ids))
    schema.validate_unique_ids()
    return schema


def arrow_to_schema_assign_ids(arrow_schema: pa.Schema) -> Schema:
    """A new table's schema from an Arrow schema: any ids in it are ignored and fresh
    ones are assigned from 1, each struct's fields first and then their children (the
    order Java and PyIceberg use when creating a table)."""

    def placeholder(field: pa.Field, path: tuple[str, ...]) -> int:
        return -1

    return assign_fresh_ids(Schema(*_struct_fields(arrow_schema, (), placeholder)), start=1)


def arrow_to_iceberg_type(arrow_type: pa.DataType) -> IcebergType:
    """The Iceberg type of an Arrow type, with fresh ids from 1 for nested children."""
    wrapper = Schema(*_struct_fields([pa.field("_", arrow_type)], (), lambda field, path: -1))
    return assign_fresh_ids(wrapper, start=0).fields[0].field_type  # the wrapper takes id 0


def _struct_fields(fields: Iterable[pa.Field], path: tuple[str, ...], ids: _IdSource) -> list[NestedField]:
    return [_iceberg_field(f, (*path, f.name), ids) for f in fields]


def _iceberg_field(field: pa.Field, path: tuple[str, ...], ids: _IdSource) -> NestedField:
    doc_raw = field.metadata.get(DOC_KEY) if field.metadata else None
    return NestedField(
        ids(field, path),
        field.name,
        _iceberg_type(field.type, path, ids),
        required=not field.nullable,
        doc=doc_raw.decode(errors="replace") if doc_raw is not None else None,
    )


def _iceberg_type(t: pa.DataType, path: tuple[str, ...], ids: _IdSource) -> IcebergType:
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return _iceberg_type(t.value_type, path, ids)
    if pa.types.is_struct(t):
        return StructType(*_struct_fields((t.field(i) for i in range(t.num_fields)), path, ids))
    if pa.types.is_map(t):
        key_field, value_field = t.key_field, t.item_field
        key_path, value_path = (*path, MAP_KEY_NAME), (*path, MAP_VALUE_NAME)
        return MapType(
            ids(key_field, key_path),
            _iceberg_type(key_field.type, key_path, ids),
            ids(value_field, value_path),
            _iceberg_type(value_field.type, value_path, ids),
            value_required=not value_field.nullable,
        )
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        element = t.value_field
        element_path = (*path, LIST_ELEMENT_NAME)
        return ListType(
            ids(element, element_path),
            _iceberg_type(element.type, element_path, ids),
            element_required=not element.nullable,
        )
    return _iceberg_primitive(t, path)


def _iceberg_primitive(t: pa.DataType, path: tuple[str, ...]) -> IcebergType:
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            return _unsupported(t, path, "values above 2**63-1 do not fit an Iceberg long")
        signed = pa.types.is_signed_integer(t)
        return IntegerType() if t.bit_width < 32 or (signed and t.bit_width == 32) else LongType()
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal(t):
        if t.precision > 38:
            return _unsupported(t, path, "Iceberg decimals have at most 38 digits")
        return DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BinaryType()
    if _UUID_ARROW_TYPE is not None and isinstance(t, _UUID_ARROW_TYPE):
        return UUIDType()
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_date(t):
        return DateType()
    if pa.types.is_time32(t) or (pa.types.is_time64(t) and t.unit == "us"):
        return TimeType()
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return TimestamptzNanoType() if t.tz is not None else TimestampNanoType()
        return TimestamptzType() if t.tz is not None else TimestampType()
    if pa.types.is_null(t):
        return UnknownType()
    if pa.types.is_time64(t):
        return _unsupported(t, path, "Iceberg time has microsecond precision")
    return _unsupported(t, path, "no Iceberg equivalent")


def _unsupported(t: pa.DataType, path: tuple[str, ...], why: str) -> IcebergType:
    raise UnsupportedError(f"field {'.'.join(path)!r}: Arrow type {t} is not supported ({why})")
