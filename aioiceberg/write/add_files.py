"""DataFile entries for Parquet files that already exist (``add_files``).

Only the footer is read: one ranged read of the file's tail, usually enough for the whole
footer, and a second one when the footer is bigger. Columns are matched to the table by
the field ids in the file or, for files written without them, by the table's name
mapping. Partition values come from column bounds: a file may be added only when every
partition field has a single value across the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg._concurrency import task_group
from aioiceberg.errors import CorruptFileError, UnsupportedError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec import values
from aioiceberg.spec.arrow import arrow_to_schema
from aioiceberg.spec.manifest.data_file import DataFile
from aioiceberg.spec.name_mapping import NameMapping
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import PrimitiveType
from aioiceberg.write.column_stats import metrics_from_parquet
from aioiceberg.write.conform import can_promote
from aioiceberg.write.parquet_writer import data_file_from_metrics

__all__ = ["NAME_MAPPING_PROPERTY", "data_files_from_parquet", "read_parquet_footer"]

NAME_MAPPING_PROPERTY = TableProperties.name_mapping.key
_FIRST_READ = 64 * 1024
_MAGIC = b"PAR1"


async def read_parquet_footer(io: FileIO, location: str) -> tuple[pq.FileMetaData, int]:
    """The footer of a Parquet file and the file's size, from one or two tail reads."""
    block = await io.read_block(location, -_FIRST_READ, _FIRST_READ)
    data, size = block.data, block.total_size
    if len(data) < 12 or data[-4:] != _MAGIC:
        raise CorruptFileError("not a Parquet file (no PAR1 footer magic)", location=location)
    footer_len = int.from_bytes(data[-8:-4], "little")
    if footer_len + 12 > size:
        raise CorruptFileError(f"footer length {footer_len} exceeds the file size {size}", location=location)
    if footer_len + 8 > len(data):
        data = (await io.read_block(location, -(footer_len + 8), footer_len + 8)).data
    footer = data[-(footer_len + 8) :]
    try:
        # The footer alone parses: pyarrow only needs a leading magic in front of it.
        metadata = pq.read_metadata(pa.BufferReader(_MAGIC + footer))
    except (pa.ArrowException, OSError) as e:
        raise CorruptFileError(f"cannot parse the Parquet footer: {e}", location=location) from None
    return metadata, size


def _check_columns(file_schema: Schema, table_schema: Schema, location: str) -> None:
    table_ids = table_schema.field_ids()
    for f in file_schema.all_fields():
        if f.field_id not in table_ids:
            raise ValidationError(
                f"{location}: column {f.name!r} (field id {f.field_id}) is not in the table"
            )
        target = table_schema.find_type(f.field_id)
        if isinstance(f.field_type, PrimitiveType) and not can_promote(f.field_type, target):
            raise ValidationError(
                f"{location}: column {table_schema.find_column_name(f.field_id)!r} is {f.field_type} "
                f"in the file, {target} in the table"
            )
    file_ids = file_schema.field_ids()
    for f in table_schema.fields:
        if f.required and f.field_id not in file_ids:
            raise ValidationError(f"{location}: required column {f.name!r} is missing from the file")


def _infer_partition(
    spec: PartitionSpec, schema: Schema, metadata: pq.FileMetaData, mapping: NameMapping | None, location: str
) -> tuple[Any, ...]:
    if not spec.fields:
        return ()
    full_metrics = TableProperties({TableProperties.metrics_default.key: "full"})
    full = metrics_from_parquet(metadata, schema, full_metrics, name_mapping=mapping)
    out: list[Any] = []
    for f in spec.fields:
        if f.transform.is_void:
            out.append(None)
            continue
        if f.transform.is_unknown:
            raise UnsupportedError(f"cannot add files to partition field {f.name!r}: unknown transform")
        source_type = schema.find_type(f.source_id)
        if not isinstance(source_type, PrimitiveType):
            raise ValidationError(f"partition source of {f.name!r} is not a primitive column")
        count = full.value_counts.get(f.source_id)
        nulls = full.null_value_counts.get(f.source_id)
        if metadata.num_rows == 0 or (count is not None and nulls == count):
            out.append(None)  # every value null: the null partition
            continue
        if nulls:
            raise ValidationError(
                f"{location}: column {schema.find_column_name(f.source_id)!r} has nulls and values, "
                f"so the file spans several {f.name!r} partitions"
            )
        lo_raw, hi_raw = full.lower_bounds.get(f.source_id), full.upper_bounds.get(f.source_id)
        if lo_raw is None or hi_raw is None:
            raise ValidationError(
                f"{location}: no statistics for {schema.find_column_name(f.source_id)!r}, "
                f"cannot infer partition field {f.name!r}"
            )
        lo = f.transform.apply(values.from_bytes(lo_raw, source_type), source_type)
        hi = f.transform.apply(values.from_bytes(hi_raw, source_type), source_type)
        if lo != hi:
            raise ValidationError(
                f"{location}: partition field {f.name!r} ranges over {lo!r}..{hi!r}; "
                "a file must hold a single partition to be added"
            )
        out.append(lo)
    return tuple(out)


async def data_files_from_parquet(
    io: FileIO,
    paths: Iterable[str],
    table_schema: Schema,
    spec: PartitionSpec,
    properties: TableProperties | Mapping[str, str] | None = None,
    *,
    name_mapping: NameMapping | None = None,
    concurrency: int = 16,
) -> list[DataFile]:
    """DataFile entries (in ``paths`` order) for existing Parquet files, reading only footers.

    ``name_mapping`` defaults to the table's ``schema.name-mapping.default`` property; a
    file with neither field ids nor a mapping is refused. NaN counts are unknown (not in
    footers) and left out, as Java's importer does.
    """
    props = TableProperties.of(properties)
    mapping = name_mapping if name_mapping is not None else props.name_mapping
    locations = list(paths)
    results: list[DataFile | None] = [None] * len(locations)
    limiter = anyio.Semaphore(concurrency)

    async def one(i: int, location: str) -> None:
        async with limiter:
            metadata, size = await read_parquet_footer(io, location)
        try:
            file_schema = arrow_to_schema(metadata.schema.to_arrow_schema(), mapping)
        except (ValidationError, UnsupportedError) as e:  # they name the column, not the file
            raise type(e)(f"{location}: {e}") from None
        _check_columns(file_schema, table_schema, location)
        partition = _infer_partition(spec, table_schema, metadata, mapping, location)
        metrics = metrics_from_parquet(metadata, table_schema, props, name_mapping=mapping)
        results[i] = data_file_from_metrics(
            location, size, metrics, partition=partition, spec_id=spec.spec_id
        )

    async with task_group() as tg:
        for i, location in enumerate(locations):
            tg.start_soon(one, i, location)
    return [r for r in results if r is not None]
