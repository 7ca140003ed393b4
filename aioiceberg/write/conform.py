"""Make user Arrow data match a table schema before it is written.

Columns match by name (nested struct fields too), because that is how users build Arrow
data; the written file then carries the table's field ids. Only lossless changes are
made: widening (int -> long, float -> double, decimal precision), the other string and
binary layouts, dictionary decoding, coarser timestamp units, and nanosecond timestamps
into microsecond columns when no value has sub-microsecond digits. Anything else is a
``ValidationError`` naming the column, raised before a byte is written.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.arrow import arrow_to_iceberg_type, schema_to_arrow
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
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
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UnknownType,
    UUIDType,
)

__all__ = ["can_promote", "conform_to_schema"]


def can_promote(source: IcebergType, target: IcebergType) -> bool:
    """Whether values of ``source`` can be written to (or read as) a ``target`` column losslessly."""
    if source == target or isinstance(source, UnknownType):
        return True
    if isinstance(source, IntegerType) and isinstance(target, LongType):
        return True
    if isinstance(source, FloatType) and isinstance(target, DoubleType):
        return True
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return source.scale == target.scale and source.precision <= target.precision
    if isinstance(source, FixedType) and isinstance(target, UUIDType):
        return source.length == 16
    return False


def _writable_from(source: IcebergType, target: IcebergType) -> bool:
    """``can_promote`` plus the value-checked nanosecond -> microsecond timestamp cast."""
    if can_promote(source, target):
        return True
    return (isinstance(source, TimestampNanoType) and isinstance(target, TimestampType)) or (
        isinstance(source, TimestamptzNanoType) and isinstance(target, TimestamptzType)
    )


def conform_to_schema(data: pa.Table | pa.RecordBatch, schema: Schema) -> pa.Table:
    """``data`` cast to the table schema's Arrow form (field ids in the field metadata).

    Missing optional columns become nulls; missing required columns, nulls in required
    columns, columns the table lacks and incompatible types raise ``ValidationError``.
    """
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    target = schema_to_arrow(schema)
    _check_extra(table.schema.names, schema.fields, "")
    if table.schema.equals(target, check_metadata=False):
        _check_required_top_level(table, schema)
        return pa.Table.from_arrays(table.columns, schema=target)
    arrays: list[pa.ChunkedArray] = []
    for f, tf in zip(schema.fields, target, strict=True):
        if f.name in table.column_names:
            column = table.column(f.name)
            chunks = [_conform(c, f, tf, f.name, None) for c in column.chunks]
            arrays.append(pa.chunked_array(chunks, type=tf.type))
        elif f.required:
            raise ValidationError(f"required column {f.name!r} is missing from the data")
        else:
            arrays.append(pa.chunked_array([pa.nulls(table.num_rows, tf.type)], type=tf.type))
    return pa.Table.from_arrays(arrays, schema=target)


def _check_extra(names: list[str], fields: tuple[NestedField, ...], prefix: str) -> None:
    known = {f.name for f in fields}
    extra = [n for n in names if n not in known]
    if extra:
        shown = ", ".join(repr(prefix + n) for n in extra)
        raise ValidationError(f"columns not in the table schema: {shown}")
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValidationError(
            f"duplicate column names in the data: {', '.join(repr(prefix + d) for d in dupes)}"
        )


def _check_required_top_level(table: pa.Table, schema: Schema) -> None:
    for f in schema.fields:
        if f.required and table.column(f.name).null_count:
            raise ValidationError(f"required column {f.name!r} has {table.column(f.name).null_count} nulls")
        if not isinstance(f.field_type, PrimitiveType):
            for chunk in table.column(f.name).chunks:
                _check_nested_required(chunk, f.field_type, f.name)


def _check_nested_required(arr: pa.Array, t: IcebergType, path: str) -> None:
    if isinstance(t, StructType):
        for f in t.fields:
            child = arr.field(f.name)
            _required_in_parent(child, arr, f, f"{path}.{f.name}")
            if not isinstance(f.field_type, PrimitiveType):
                _check_nested_required(child, f.field_type, f"{path}.{f.name}")
    elif isinstance(t, ListType):
        values = _list_values(arr)
        if t.element_required and values.null_count:
            raise ValidationError(f"required list element {path}.element has nulls")
        if not isinstance(t.element_type, PrimitiveType):
            _check_nested_required(values, t.element_type, f"{path}.element")
    elif isinstance(t, MapType):
        keys, items = _map_children(arr)
        if keys.null_count:
            raise ValidationError(f"map keys {path}.key have nulls")
        if t.value_required and items.null_count:
            raise ValidationError(f"required map value {path}.value has nulls")
        for sub, child, name in ((t.key_type, keys, "key"), (t.value_type, items, "value")):
            if not isinstance(sub, PrimitiveType):
                _check_nested_required(child, sub, f"{path}.{name}")


def _required_in_parent(child: pa.Array, parent: pa.Array | None, f: NestedField, path: str) -> None:
    """A required field may be null only where its enclosing struct is null."""
    if not f.required or not child.null_count:
        return
    if parent is None or not parent.null_count:
        bad = child.null_count
    else:
        bad = int(pc.sum(pc.and_(child.is_null(), parent.is_valid()), min_count=0).as_py() or 0)
    if bad:
        raise ValidationError(f"required column {path!r} has {bad} nulls")


def _list_values(arr: pa.Array) -> pa.Array:
    offsets = arr.offsets
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    return arr.values.slice(start, stop - start)


def _map_children(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    offsets = arr.offsets
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    return arr.keys.slice(start, stop - start), arr.items.slice(start, stop - start)


def _rebased_offsets(arr: pa.Array) -> pa.Array:
    offsets = arr.offsets
    rebased = pc.subtract(offsets, offsets[0])
    return rebased.cast(pa.int32()) if rebased.type != pa.int32() else rebased


def _conform(arr: pa.Array, f: NestedField, target: pa.Field, path: str, parent: pa.Array | None) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = f.field_type
    _required_in_parent(arr, parent, f, path)
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), target.type)
    if isinstance(t, StructType):
        if not pa.types.is_struct(arr.type):
            raise ValidationError(f"column {path!r} is {arr.type} in the data, the table has {t}")
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        _check_extra(names, t.fields, f"{path}.")
        children = []
        for child_field, child_target in zip(t.fields, target.type, strict=True):
            child_path = f"{path}.{child_field.name}"
            if child_field.name in names:
                children.append(
                    _conform(arr.field(child_field.name), child_field, child_target, child_path, arr)
                )
            elif child_field.required and (len(arr) - arr.null_count):
                raise ValidationError(f"required column {child_path!r} is missing from the data")
            else:
                children.append(pa.nulls(len(arr), child_target.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target.type), mask=mask)
    if isinstance(t, ListType):
        if pa.types.is_fixed_size_list(arr.type):
            arr = arr.cast(pa.list_(arr.type.value_field))
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise ValidationError(f"column {path!r} is {arr.type} in the data, the table has {t}")
        values = _conform(
            _list_values(arr), t.element_field, target.type.value_field, f"{path}.element", None
        )
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(_rebased_offsets(arr), values, type=target.type, mask=mask)
    if isinstance(t, MapType):
        if not pa.types.is_map(arr.type):
            raise ValidationError(f"column {path!r} is {arr.type} in the data, the table has {t}")
        keys, items = _map_children(arr)
        keys = _conform(keys, t.key_field, target.type.key_field, f"{path}.key", None)
        items = _conform(items, t.value_field, target.type.item_field, f"{path}.value", None)
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(_rebased_offsets(arr), keys, items, type=target.type, mask=mask)
    return _cast_primitive(arr, t, target.type, path)


def _cast_primitive(arr: pa.Array, t: IcebergType, target: pa.DataType, path: str) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        source = arrow_to_iceberg_type(arr.type)
    except UnsupportedError as e:
        raise ValidationError(f"column {path!r}: {e}") from None
    if not _writable_from(source, t):
        raise ValidationError(f"column {path!r} is {source} ({arr.type}) in the data, the table has {t}")
    if isinstance(target, pa.BaseExtensionType):
        storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
        return pa.ExtensionArray.from_storage(target, storage.cast(target.storage_type))
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValidationError(
            f"column {path!r}: cannot cast {arr.type} to {target} losslessly: {e}"
        ) from None
