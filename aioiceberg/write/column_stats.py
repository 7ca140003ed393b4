"""Column metrics for a Parquet data file, taken from its footer.

Iceberg keeps per-column counts and bounds in manifests so planning can prune files
without opening them. The modes follow the table properties
``write.metadata.metrics.default`` and ``write.metadata.metrics.column.<name>``:
``none``, ``counts``, ``truncate(N)`` (the default is ``truncate(16)``) and ``full``.

Rules, as Java's ``ParquetUtil.footerMetrics`` applies them:

* ``column_sizes`` are kept in every mode, ``none`` included (Java and PyIceberg do).
* Bounds are kept for top-level and struct-nested columns, never for columns inside a
  list or a map (their statistics describe elements, not rows). PyIceberg drops bounds of
  struct-nested columns too; Java keeps them, and so do we.
* A column with a row group lacking statistics gets no null count and no bounds.
* ``truncate(N)`` shortens only string and binary bounds; the upper bound is bumped so
  it stays an upper bound (Java's ``UnicodeUtil`` / ``BinaryUtil``).
* When ``write.metadata.metrics.default`` is not set and the table has more top-level
  columns than ``write.metadata.metrics.max-inferred-column-defaults`` (100), only the
  first 100 primitive columns (breadth first) get the default mode, as in Java.
* Parquet footers carry no NaN counts: writers pass them in from ``count_nans``.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from aioiceberg.spec import values
from aioiceberg.spec.arrow import field_id_of
from aioiceberg.spec.metrics_mode import DEFAULT, NONE, MetricsMode, parse_metrics_mode
from aioiceberg.spec.name_mapping import NameMapping
from aioiceberg.spec.properties import COLUMN_METRICS_PREFIX, TableProperties
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestamptzNanoType,
    UnknownType,
    UUIDType,
    VariantType,
)

__all__ = [
    "COLUMN_MODE_PREFIX",
    "DEFAULT_MODE_PROPERTY",
    "MAX_INFERRED_COLUMNS_PROPERTY",
    "DataFileMetrics",
    "MetricsMode",
    "count_nans",
    "metrics_from_parquet",
    "metrics_modes",
    "parse_metrics_mode",
    "split_offsets",
]

DEFAULT_MODE_PROPERTY = TableProperties.metrics_default.key
COLUMN_MODE_PREFIX = COLUMN_METRICS_PREFIX
MAX_INFERRED_COLUMNS_PROPERTY = TableProperties.metrics_max_inferred_columns.key


@dataclass(slots=True)
class DataFileMetrics:
    record_count: int
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)
    split_offsets: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Leaf:
    type: PrimitiveType
    repeated: bool  # inside a list or map: no bounds


def _leaves(schema: Schema) -> dict[int, _Leaf]:
    """Every primitive field of the table schema by id, marking those inside lists and maps."""
    out: dict[int, _Leaf] = {}

    def visit(t: IcebergType, fid: int, repeated: bool) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                visit(f.field_type, f.field_id, repeated)
        elif isinstance(t, ListType):
            visit(t.element_type, t.element_id, True)
        elif isinstance(t, MapType):
            visit(t.key_type, t.key_id, True)
            visit(t.value_type, t.value_id, True)
        elif isinstance(t, PrimitiveType):
            out[fid] = _Leaf(t, repeated)

    visit(schema.as_struct, 0, False)
    return out


def _inferred_default_ids(schema: Schema, limit: int) -> set[int]:
    """Java's ``MetricsConfig.limitFieldIds``: each struct's primitive fields, then its nested ones."""
    ids: set[int] = set()

    def struct(t: StructType) -> None:
        for f in t.fields:
            if len(ids) >= limit:
                return
            if isinstance(f.field_type, PrimitiveType):
                ids.add(f.field_id)
        for f in t.fields:
            if len(ids) >= limit:
                return
            nested(f.field_type)

    def nested(t: IcebergType) -> None:
        if isinstance(t, StructType):
            struct(t)
        elif isinstance(t, ListType):
            if isinstance(t.element_type, PrimitiveType):
                if len(ids) < limit:
                    ids.add(t.element_id)
            else:
                nested(t.element_type)
        elif isinstance(t, MapType):
            for fid, sub in ((t.key_id, t.key_type), (t.value_id, t.value_type)):
                if isinstance(sub, PrimitiveType):
                    if len(ids) < limit:
                        ids.add(fid)
                else:
                    nested(sub)

    struct(schema.as_struct)
    return ids


def metrics_modes(
    schema: Schema, properties: TableProperties | Mapping[str, str] | None = None
) -> dict[int, MetricsMode]:
    """The effective metrics mode of every primitive column (by field id)."""
    props = TableProperties.of(properties)
    leaves = _leaves(schema)
    explicit = props.metrics_default
    modes = dict.fromkeys(leaves, explicit or DEFAULT)
    if explicit is None and len(schema.fields) > props.metrics_max_inferred_columns:
        keep = _inferred_default_ids(schema, props.metrics_max_inferred_columns)
        modes = {fid: (DEFAULT if fid in keep else NONE) for fid in leaves}
    for name, mode in props.column_metrics.items():
        fid = schema.find_field_id(name)
        if fid is not None and fid in modes:
            modes[fid] = mode
    return modes


def _file_leaf_ids(
    file_schema: pa.Schema, table_schema: Schema, name_mapping: NameMapping | None
) -> list[tuple[int | None, bool]]:
    """Field id of each Parquet leaf column, in column order (depth first, as Parquet lays them out),
    and whether its values and nulls count for that field.

    Ids come from the file; a file without them takes them from ``name_mapping``, and
    with neither, from the table schema by name (our own files always carry ids).
    A variant is one field stored as a group: every leaf of the group adds to its size,
    and its required ``metadata`` leaf, null exactly where the variant is, gives its counts.
    """
    out: list[tuple[int | None, bool]] = []
    variant_ids = {fid for fid, leaf in _leaves(table_schema).items() if isinstance(leaf.type, VariantType)}

    def variant(t: pa.DataType, fid: int, counted: bool) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                child = t.field(i)
                variant(child.type, fid, counted and child.name == "metadata")
        elif pa.types.is_map(t):
            variant(t.key_field.type, fid, False)
            variant(t.item_field.type, fid, False)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            variant(t.value_field.type, fid, False)
        else:
            out.append((fid, counted))

    def lookup(f: pa.Field, path: tuple[str, ...]) -> int | None:
        fid = field_id_of(f)
        if fid is not None and fid >= 0:
            return fid
        if name_mapping is not None:
            mapped = name_mapping.find(*path)
            return mapped.field_id if mapped is not None else None
        return table_schema.find_field_id(".".join(path))

    def visit(t: pa.DataType, fid: int | None, path: tuple[str, ...]) -> None:
        if fid in variant_ids and pa.types.is_struct(t):
            variant(t, fid, True)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                child = t.field(i)
                cpath = (*path, child.name)
                visit(child.type, lookup(child, cpath), cpath)
        elif pa.types.is_map(t):
            kpath, vpath = (*path, "key"), (*path, "value")
            visit(t.key_field.type, lookup(t.key_field, kpath), kpath)
            visit(t.item_field.type, lookup(t.item_field, vpath), vpath)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            epath = (*path, "element")
            visit(t.value_field.type, lookup(t.value_field, epath), epath)
        else:
            out.append((fid, True))

    for f in file_schema:
        visit(f.type, lookup(f, (f.name,)), (f.name,))
    return out


def split_offsets(parquet_metadata: pq.FileMetaData) -> list[int]:
    """Row-group start offsets (dictionary page if it comes first), ascending, as Java writes them."""
    offsets: list[int] = []
    for rg_index in range(parquet_metadata.num_row_groups):
        rg = parquet_metadata.row_group(rg_index)
        if not rg.num_columns:
            continue
        first = rg.column(0)
        start = first.data_page_offset
        dictionary = first.dictionary_page_offset
        if first.has_dictionary_page and dictionary is not None and dictionary < start:
            start = dictionary
        offsets.append(start)
    return sorted(offsets)


def metrics_from_parquet(
    parquet_metadata: pq.FileMetaData,
    schema: Schema,
    properties: TableProperties | Mapping[str, str] | None = None,
    nan_counts: Mapping[int, int] | None = None,
    *,
    name_mapping: NameMapping | None = None,
) -> DataFileMetrics:
    """Aggregate row-group statistics into Iceberg metrics for the table ``schema``.

    Columns are matched to the schema by the file's field ids (or ``name_mapping``), and
    bounds are encoded in the table's type, so a file with an ``int`` column added to a
    ``long`` column gets 8-byte bounds. ``nan_counts`` come from the data (``count_nans``).
    """
    modes = metrics_modes(schema, properties)
    leaves = _leaves(schema)
    column_ids = _file_leaf_ids(parquet_metadata.schema.to_arrow_schema(), schema, name_mapping)
    result = DataFileMetrics(
        record_count=parquet_metadata.num_rows, split_offsets=split_offsets(parquet_metadata)
    )
    mins: dict[int, Any] = {}
    maxs: dict[int, Any] = {}
    no_stats: set[int] = set()
    no_bounds: set[int] = set()

    for rg_index in range(parquet_metadata.num_row_groups):
        rg = parquet_metadata.row_group(rg_index)
        for col_index in range(rg.num_columns):
            fid, counted = column_ids[col_index] if col_index < len(column_ids) else (None, False)
            leaf = leaves.get(fid) if fid is not None else None
            if fid is None or leaf is None:
                continue  # not a column of this table schema
            col = rg.column(col_index)
            result.column_sizes[fid] = result.column_sizes.get(fid, 0) + col.total_compressed_size
            mode = modes[fid]
            if not mode.counts or not counted:
                continue
            result.value_counts[fid] = result.value_counts.get(fid, 0) + col.num_values
            stats = col.statistics if col.is_stats_set else None
            if stats is None or not stats.has_null_count:
                no_stats.add(fid)
                continue
            result.null_value_counts[fid] = result.null_value_counts.get(fid, 0) + stats.null_count
            if not mode.bounds or leaf.repeated or isinstance(leaf.type, UnknownType | VariantType):
                continue  # variant bounds are optional (spec); unshredded files give none
            if not stats.has_min_max:
                # Values but no bounds: unknown, unless they are NaNs (Parquet bounds skip NaN).
                if stats.null_count < col.num_values and not isinstance(leaf.type, FloatType | DoubleType):
                    no_bounds.add(fid)
                continue
            try:
                lo, hi = _bound(stats, "min", leaf.type), _bound(stats, "max", leaf.type)
            except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
                lo = hi = None
            if lo is None or hi is None:
                no_bounds.add(fid)
                continue
            if fid not in mins or lo < mins[fid]:
                mins[fid] = lo
            if fid not in maxs or hi > maxs[fid]:
                maxs[fid] = hi

    for fid in no_stats:
        result.null_value_counts.pop(fid, None)
    if nan_counts:
        for fid, n in nan_counts.items():
            if fid in result.value_counts and isinstance(leaves[fid].type, FloatType | DoubleType):
                result.nan_value_counts[fid] = n

    for fid, lo in mins.items():
        if fid in no_stats or fid in no_bounds:
            continue
        leaf_type = leaves[fid].type
        width = modes[fid].truncate
        lower = truncate_lower_bound(lo, leaf_type, width)
        upper = truncate_upper_bound(maxs[fid], leaf_type, width)
        result.lower_bounds[fid] = values.to_bytes(lower, leaf_type)
        if upper is not None:
            result.upper_bounds[fid] = values.to_bytes(upper, leaf_type)
    return result


_TO_MICROS = {"milliseconds": 1000, "microseconds": 1, "nanoseconds": 1}
_TO_NANOS = {"milliseconds": 1_000_000, "microseconds": 1000, "nanoseconds": 1}
_UNIT = re.compile(r"timeUnit=(\w+)")


def _bound(stats: Any, which: str, t: PrimitiveType) -> Any:
    """A statistics bound in the project's value convention for table type ``t``, or None.

    Temporal bounds come from the raw integers with the file's unit; a nanosecond file
    bound for a microsecond column rounds outwards so it still bounds every value.
    """
    physical = stats.physical_type
    if physical == "INT96":
        return None  # legacy timestamps: Java keeps no bounds for them either
    logical = str(stats.logical_type)
    if physical in ("INT32", "INT64") and (logical.startswith("Timestamp") or logical.startswith("Time(")):
        raw = int(getattr(stats, f"{which}_raw"))
        m = _UNIT.search(logical)
        unit = m.group(1) if m else "microseconds"
        if isinstance(t, TimestampNanoType | TimestamptzNanoType):
            return raw * _TO_NANOS[unit]
        if unit == "nanoseconds":
            return raw // 1000 if which == "min" else -(-raw // 1000)
        return raw * _TO_MICROS[unit]
    if physical in ("INT32", "INT64") and logical.startswith("Date"):
        return int(getattr(stats, f"{which}_raw"))
    if physical in ("INT32", "INT64") and isinstance(t, DecimalType):
        raw = getattr(stats, which)
        if isinstance(raw, decimal.Decimal):
            return raw
        return values.unscaled_to_decimal(int(getattr(stats, f"{which}_raw")), t.scale)
    return _logical(getattr(stats, which), t)


def _logical(value: Any, t: PrimitiveType) -> Any:
    """Convert a pyarrow statistics value to the project's value convention."""
    if value is None:
        return None
    if isinstance(t, FloatType | DoubleType):
        return None if math.isnan(value) else float(value)
    if isinstance(value, datetime.datetime):
        epoch = datetime.datetime(1970, 1, 1, tzinfo=value.tzinfo)
        delta = value - epoch
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros * 1000 if isinstance(t, TimestampNanoType | TimestamptzNanoType) else micros
    if isinstance(value, datetime.date):
        return (value - datetime.date(1970, 1, 1)).days
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(t, DecimalType):
        if isinstance(value, decimal.Decimal):
            return value
        if isinstance(value, bytes | bytearray):
            return values.unscaled_to_decimal(int.from_bytes(value, "big", signed=True), t.scale)
        return decimal.Decimal(value)
    if isinstance(t, UUIDType):
        return (
            uuid.UUID(bytes=bytes(value)) if isinstance(value, bytes | bytearray) else uuid.UUID(str(value))
        )
    if isinstance(t, StringType):
        return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def truncate_lower_bound(value: Any, t: PrimitiveType, width: int | None) -> Any:
    """A prefix is always <= the value: strings by code point, binary by byte."""
    if width is None or not isinstance(t, StringType | BinaryType):
        return value
    return value[:width]


def truncate_upper_bound(value: Any, t: PrimitiveType, width: int | None) -> Any:
    """A truncated upper bound must still be >= every value: bump the last unit that can
    be bumped and drop what follows it, or give no bound (None) when none can."""
    if width is None or not isinstance(t, StringType | BinaryType):
        return value
    if len(value) <= width:
        return value
    if isinstance(t, StringType):
        chars = value[:width]
        for i in range(len(chars) - 1, -1, -1):
            code = ord(chars[i]) + 1
            if 0xD800 <= code <= 0xDFFF:  # surrogates are not characters: skip past them
                code = 0xE000
            if code <= 0x10FFFF:
                return chars[:i] + chr(code)
        return None
    data = bytearray(value[:width])
    for i in range(len(data) - 1, -1, -1):
        if data[i] < 0xFF:
            data[i] += 1
            return bytes(data[: i + 1])
    return None


def count_nans(table: pa.Table | pa.RecordBatch, schema: Schema) -> dict[int, int]:
    """NaN counts of every float/double column, nested ones included (Parquet footers lack them)."""
    out: dict[int, int] = {}

    def visit(arr: pa.Array | pa.ChunkedArray, t: IcebergType, fid: int) -> None:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        if isinstance(t, FloatType | DoubleType):
            n = pc.sum(pc.is_nan(arr), min_count=0).as_py() if len(arr) else 0
            out[fid] = out.get(fid, 0) + int(n or 0)
        elif isinstance(t, StructType):
            for f in t.fields:
                if arr.type.get_field_index(f.name) >= 0:
                    visit(pc.struct_field(arr, f.name), f.field_type, f.field_id)
        elif isinstance(t, ListType):
            visit(pc.list_flatten(arr), t.element_type, t.element_id)
        elif isinstance(t, MapType):
            for fid_, sub, child in _map_children(arr, t):
                visit(child, sub, fid_)

    names = set(table.column_names)
    for f in schema.fields:
        if f.name in names:
            visit(table.column(f.name), f.field_type, f.field_id)
    return out


def _map_children(arr: Any, t: MapType) -> Iterator[tuple[int, IcebergType, Any]]:
    offsets = arr.offsets  # slice aware, unlike keys / items
    start, stop = (offsets[0].as_py(), offsets[-1].as_py()) if len(offsets) else (0, 0)
    yield t.key_id, t.key_type, arr.keys.slice(start, stop - start)
    yield t.value_id, t.value_type, arr.items.slice(start, stop - start)
