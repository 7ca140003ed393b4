"""Split Arrow data by partition, vectorised.

Each partition field's transform runs over the whole source column at once
(``Transform.apply_arrow``); pyarrow's hash group-by then finds the distinct partition
tuples and the rows of each, so no Python code runs per row (bucket and truncate on a
few types excepted, see ``transforms``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import ListType, MapType, UUIDType

__all__ = ["partition_keys", "split_by_partition"]

_ROW = "__aioiceberg_row"


def _source_column(table: pa.Table, schema: Schema, source_id: int) -> pa.ChunkedArray:
    """The column a partition field reads, found by walking struct names from the field id."""
    path: list[str] = []
    fid: int | None = source_id
    while fid is not None:
        parent = schema.parent_id(fid)
        if parent is not None and isinstance(schema.find_type(parent), ListType | MapType):
            raise ValidationError(f"partition source field {source_id} is inside a list or map")
        path.append(schema.find_field(fid).name)
        fid = parent
    path.reverse()
    if path[0] not in table.column_names:
        raise ValidationError(f"partition source column {'.'.join(path)!r} is missing from the data")
    column = table.column(path[0])
    for name in path[1:]:
        column = pc.struct_field(column, name)
    return column


def _key_array(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Keys in a form pyarrow can group and that maps straight to the value convention."""
    t = column.type
    if isinstance(t, pa.BaseExtensionType):
        return pa.chunked_array([c.storage for c in column.chunks], type=t.storage_type)
    if pa.types.is_date32(t):
        return column.cast(pa.int32())
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return column.cast(pa.int64())
    return column


def partition_keys(table: pa.Table, schema: Schema, spec: PartitionSpec) -> list[pa.ChunkedArray]:
    """The transformed partition column of each spec field (void fields: all null)."""
    keys: list[pa.ChunkedArray] = []
    for f in spec.fields:
        if f.transform.is_unknown:
            raise UnsupportedError(
                f"cannot write to partition field {f.name!r}: unknown transform {f.transform}"
            )
        if len(f.source_ids) != 1:
            raise UnsupportedError(f"cannot write multi-argument partition field {f.name!r}")
        if f.transform.is_void:
            keys.append(pa.chunked_array([pa.nulls(table.num_rows)]))
            continue
        source_type = schema.find_type(f.source_id)
        column = _source_column(table, schema, f.source_id)
        keys.append(_key_array(f.transform.apply_arrow(column, source_type)))
    return keys


def _to_value(value: Any, result_type: Any) -> Any:
    if value is not None and isinstance(result_type, UUIDType):
        return uuid.UUID(bytes=value)
    return value


def split_by_partition(
    table: pa.Table | pa.RecordBatch, schema: Schema, spec: PartitionSpec
) -> list[tuple[tuple[Any, ...], pa.Table]]:
    """``(partition tuple, rows)`` pairs, in order of first appearance.

    Partition values follow the project's value convention (days / micros as ints,
    ``uuid.UUID``, ``Decimal``, ``bytes``); void fields give None. Rows keep their
    relative order within each partition.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not spec.fields:
        return [((), table)]
    keys = partition_keys(table, schema, spec)
    result_types = [f.transform.result_type(schema.find_type(f.source_id)) for f in spec.fields]
    if table.num_rows == 0:
        return []
    names = [f"k{i}" for i in range(len(keys))]
    key_table = pa.table([*keys, pa.array(range(table.num_rows), pa.int64())], names=[*names, _ROW])
    non_null = [n for n, k in zip(names, keys, strict=True) if k.null_count < len(k)]
    if not non_null:  # only void / all-null fields: one partition
        return [(tuple(None for _ in keys), table)]
    grouped = key_table.group_by(non_null, use_threads=False).aggregate([(_ROW, "list")])
    rows = grouped.column(f"{_ROW}_list")
    columns = {n: grouped.column(n).to_pylist() for n in non_null}
    out: list[tuple[tuple[Any, ...], pa.Table]] = []
    for g in range(grouped.num_rows):
        partition = tuple(
            _to_value(columns[n][g], t) if n in columns else None
            for n, t in zip(names, result_types, strict=True)
        )
        if grouped.num_rows == 1:
            out.append((partition, table))
        else:
            out.append((partition, table.take(rows[g].values)))
    return out
