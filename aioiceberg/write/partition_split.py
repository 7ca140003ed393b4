"""Split Arrow data by partition, vectorised.

Each partition field's transform runs over the whole source column at once
(``Transform.apply_arrow``); one stable sort of the keys then brings each partition's
rows together, so a single ``take`` of the table and zero-copy slices give every
partition, and no Python code runs per row (bucket and truncate on a few types
excepted, see ``transforms``). Key types the sort lacks fall back to a hash group-by.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
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

    One stable sort of the keys and one ``take`` of the table put each partition's rows
    together; the partitions are then zero-copy slices of that one table.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not spec.fields:
        return [((), table)]
    keys = partition_keys(table, schema, spec)
    result_types = [f.transform.result_type(schema.find_type(f.source_id)) for f in spec.fields]
    n = table.num_rows
    if n == 0:
        return []
    live = [i for i, k in enumerate(keys) if k.null_count < len(k)]
    if not live:  # only void / all-null fields: one partition
        return [(tuple(None for _ in keys), table)]
    try:
        order, starts, firsts = _sorted_groups([keys[i] for i in live], n)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        order, starts, firsts = _grouped_by_hash([keys[i] for i in live], n)
    bounds = [*starts.tolist(), n]
    # Each group's first row in sorted order is its first row in the input (the sort is
    # stable), so ordering groups by it gives the order of first appearance.
    first_rows = order.take(pa.array(starts)).to_numpy()
    by_appearance = np.argsort(first_rows, kind="stable").tolist()
    columns = dict(zip(live, firsts, strict=True))
    rows = table if len(starts) == 1 else table.take(order)
    out: list[tuple[tuple[Any, ...], pa.Table]] = []
    for g in by_appearance:
        partition = tuple(
            _to_value(columns[i][g], t) if i in columns else None for i, t in enumerate(result_types)
        )
        out.append((partition, rows.slice(bounds[g], bounds[g + 1] - bounds[g])))
    return out


def _sorted_groups(keys: list[pa.ChunkedArray], n: int) -> tuple[pa.Array, np.ndarray, list[list[Any]]]:
    """A stable sort order of the rows by ``keys``, where each run of equal keys starts in
    that order (nulls equal nulls, NaN equals NaN), and each key's value in each run."""
    names = [f"k{i}" for i in range(len(keys))]
    order = pc.sort_indices(pa.table(keys, names=names), sort_keys=[(m, "ascending") for m in names])
    differs = np.zeros(n, dtype=bool)
    differs[0] = True
    ordered: list[pa.Array] = []
    for key in keys:
        column = key.take(order)
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        ordered.append(column)
        a, b = column.slice(1), column.slice(0, n - 1)
        change = pc.fill_null(pc.not_equal(a, b), False)
        if column.null_count:
            change = pc.or_(change, pc.not_equal(a.is_null(), b.is_null()))
        if pa.types.is_floating(column.type):
            both_nan = pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False))
            change = pc.and_(change, pc.invert(both_nan))
        differs[1:] |= change.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(differs)
    at = pa.array(starts)
    return order, starts, [column.take(at).to_pylist() for column in ordered]


def _grouped_by_hash(keys: list[pa.ChunkedArray], n: int) -> tuple[pa.Array, np.ndarray, list[list[Any]]]:
    """The same as ``_sorted_groups`` through a hash group-by, for key types sort lacks."""
    names = [f"k{i}" for i in range(len(keys))]
    key_table = pa.table([*keys, pa.array(np.arange(n, dtype=np.int64))], names=[*names, _ROW])
    grouped = key_table.group_by(names, use_threads=False).aggregate([(_ROW, "list")])
    lists = grouped.column(f"{_ROW}_list").combine_chunks()
    offsets = lists.offsets.to_numpy()
    return lists.flatten(), offsets[:-1].astype(np.int64), [grouped.column(m).to_pylist() for m in names]
