"""Reshape file columns into a table schema, matching by field id.

Iceberg columns are identified by id, never by name or position, so a file written
before a rename, reorder, drop, add or type promotion still reads correctly: each
target field takes the source field with the same id (cast when the type was
promoted), and a field the file lacks takes a constant (an identity partition value,
its ``initial-default``) or null.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from aioiceberg.errors import ValidationError
from aioiceberg.read.shredded_variant import is_shredded_variant, unshred_variant
from aioiceberg.spec.arrow import arrow_type_for, field_id_of, schema_to_arrow
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DateType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
    VariantType,
)

__all__ = ["arrow_scalar", "field_ids_in", "project_batch", "project_columns"]


def field_ids_in(arrow_type: pa.DataType | pa.Schema) -> set[int]:
    """Every field id present in an Arrow schema or type, nested ones included."""
    out: set[int] = set()

    def visit(fields: list[pa.Field]) -> None:
        for f in fields:
            fid = field_id_of(f)
            if fid is not None:
                out.add(fid)
            visit(_children(f.type))

    visit(list(arrow_type) if isinstance(arrow_type, pa.Schema) else _children(arrow_type))
    return out


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return []


def arrow_scalar(value: Any, t: IcebergType, arrow_type: pa.DataType) -> pa.Scalar:
    """An Arrow scalar for an Iceberg value as the spec layer holds it (days, micros, ...)."""
    if value is None:
        return pa.scalar(None, type=arrow_type)
    if isinstance(t, DateType) and isinstance(value, int):
        value = dt.date(1970, 1, 1) + dt.timedelta(days=value)
    elif isinstance(t, TimestampType | TimestamptzType) and isinstance(value, int):
        return pa.scalar(value, type=pa.int64()).cast(arrow_type)
    elif isinstance(t, TimestampNanoType | TimestamptzNanoType) and isinstance(value, int):
        return pa.scalar(value, type=pa.int64()).cast(arrow_type)
    elif isinstance(t, TimeType) and isinstance(value, int):
        return pa.scalar(value, type=pa.int64()).cast(arrow_type)
    elif isinstance(t, UUIDType):
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        storage = pa.scalar(raw, type=pa.binary(16))
        if isinstance(arrow_type, pa.BaseExtensionType):
            return pa.ExtensionScalar.from_storage(arrow_type, storage)
        return storage
    return pa.scalar(value, type=arrow_type)


def _constant(value: Any, t: IcebergType, arrow_type: pa.DataType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, type=arrow_type)
    scalar = arrow_scalar(value, t, arrow_type)
    if isinstance(arrow_type, pa.BaseExtensionType):
        storage = pa.repeat(scalar.value, n)
        return pa.ExtensionArray.from_storage(arrow_type, storage)
    return pa.repeat(scalar, n)


def _cast(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    if isinstance(target, pa.BaseExtensionType):
        if isinstance(arr.type, pa.BaseExtensionType):
            arr = arr.storage
        return pa.ExtensionArray.from_storage(target, _cast(arr, target.storage_type))
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(target)


def _by_id(fields: list[pa.Field]) -> dict[int, int]:
    out: dict[int, int] = {}
    for i, f in enumerate(fields):
        fid = field_id_of(f)
        if fid is not None:
            out[fid] = i
    return out


def _project_struct_children(
    arrays: list[pa.Array],
    fields: list[pa.Field],
    target: tuple[NestedField, ...],
    n: int,
    constants: Mapping[int, Any],
    path: str,
    keep_dictionary: frozenset[int] = frozenset(),
) -> list[pa.Array]:
    positions = _by_id(fields)
    out: list[pa.Array] = []
    for tf in target:
        arrow_type = arrow_type_for(tf.field_type)
        pos = positions.get(tf.field_id)
        if pos is not None and tf.field_id in keep_dictionary and pa.types.is_dictionary(arrays[pos].type):
            out.append(arrays[pos])  # decoded by a later projection, once rows are filtered
        elif pos is not None:
            out.append(_project(arrays[pos], fields[pos], tf.field_type, arrow_type, constants, path))
        elif tf.field_id in constants:
            out.append(_constant(constants[tf.field_id], tf.field_type, arrow_type, n))
        elif tf.initial_default is not None:
            out.append(_constant(tf.initial_default, tf.field_type, arrow_type, n))
        elif tf.required:
            raise ValidationError(
                f"{path}: required field {tf.name!r} (id {tf.field_id}) is missing and has no initial default"
            )
        else:
            out.append(pa.nulls(n, type=arrow_type))
    return out


def _project(
    arr: pa.Array,
    source: pa.Field,
    t: IcebergType,
    arrow_type: pa.DataType,
    constants: Mapping[int, Any],
    path: str,
) -> pa.Array:
    st = source.type
    if pa.types.is_dictionary(st):
        arr = arr.dictionary_decode()
        st = arr.type
    if isinstance(t, VariantType) and is_shredded_variant(st):
        arr = unshred_variant(arr, f"{path}: field {source.name!r}")
        st = arr.type
    if isinstance(t, StructType):
        if not pa.types.is_struct(st):
            raise ValidationError(f"{path}: field {source.name!r} is {st} in the file, expected a struct")
        children = [arr.field(i) for i in range(st.num_fields)]
        src_fields = [st.field(i) for i in range(st.num_fields)]
        projected = _project_struct_children(children, src_fields, t.fields, len(arr), constants, path)
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(projected, fields=list(arrow_type), mask=mask)
    if isinstance(t, ListType):
        if not (pa.types.is_list(st) or pa.types.is_large_list(st)):
            raise ValidationError(f"{path}: field {source.name!r} is {st} in the file, expected a list")
        elem_field = arrow_type.value_field
        values = _project(arr.values, st.value_field, t.element_type, elem_field.type, constants, path)
        offsets = arr.offsets
        mask = arr.is_null() if arr.null_count else None
        cls = pa.LargeListArray if pa.types.is_large_list(arrow_type) else pa.ListArray
        if pa.types.is_large_list(arrow_type) != pa.types.is_large_list(st):
            offsets = offsets.cast(pa.int64() if pa.types.is_large_list(arrow_type) else pa.int32())
        return cls.from_arrays(offsets, values, type=arrow_type, mask=mask)
    if isinstance(t, MapType):
        if not pa.types.is_map(st):
            raise ValidationError(f"{path}: field {source.name!r} is {st} in the file, expected a map")
        keys = _project(arr.keys, st.key_field, t.key_type, arrow_type.key_type, constants, path)
        items = _project(arr.items, st.item_field, t.value_type, arrow_type.item_type, constants, path)
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=arrow_type, mask=mask)
    return _cast(arr, arrow_type)


def project_columns(
    columns: list[pa.Array],
    fields: list[pa.Field],
    target: Schema,
    num_rows: int,
    *,
    constants: Mapping[int, Any] | None = None,
    where: str = "file",
    keep_dictionary: frozenset[int] = frozenset(),
) -> list[pa.Array]:
    """Arrays for ``target``'s top-level fields from source arrays whose fields carry ids.

    ``fields`` are the source Arrow fields (ids in ``PARQUET:field_id`` metadata, nested
    ones too); ``constants`` gives values by field id for fields the source lacks.
    Top-level fields in ``keep_dictionary`` that are dictionary arrays stay so (another
    projection to the same type decodes them).
    """
    return _project_struct_children(
        columns, fields, target.fields, num_rows, constants or {}, where, keep_dictionary
    )


def project_batch(
    batch: pa.RecordBatch,
    target: Schema,
    *,
    source_schema: pa.Schema | None = None,
    constants: Mapping[int, Any] | None = None,
    where: str = "file",
) -> pa.RecordBatch:
    """``batch`` reshaped to ``target`` (as ``schema_to_arrow`` gives it), by field id.

    ``source_schema`` overrides the batch's own schema as the source of ids (a file
    schema with ids from a name mapping).
    """
    source = source_schema if source_schema is not None else batch.schema
    arrays = project_columns(
        list(batch.columns), list(source), target, batch.num_rows, constants=constants, where=where
    )
    return pa.RecordBatch.from_arrays(arrays, schema=schema_to_arrow(target))
