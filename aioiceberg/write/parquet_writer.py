"""Arrow -> Parquet data and delete files, with the DataFile entries that describe them.

Encoding is CPU work and runs in worker threads (pyarrow releases the GIL while it
encodes and compresses), at most ``cpu_workers`` at a time; uploads are I/O and run as
tasks on the event loop, at most ``io_concurrency`` at a time. The two are separate knobs
because object-store latency, not CPU, bounds small writes and the reverse holds for big
ones.

Each partition has one open file at a time, fed whole row groups. A row group is written
as soon as it is complete, so the file's size is known exactly after every row group and
files roll close to ``write.target-file-size-bytes``; row groups are sized from the bytes
per row seen so far, so a small target still splits the data.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
import anyio.abc
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg._concurrency import raise_first
from aioiceberg.errors import ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import COLUMN_METRICS_PREFIX, TableProperties
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DoubleType,
    FloatType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
)
from aioiceberg.write.column_stats import DataFileMetrics, count_nans, metrics_from_parquet
from aioiceberg.write.conform import conform_to_schema
from aioiceberg.write.location_provider import LocationProvider, partition_path
from aioiceberg.write.partition_split import split_by_partition

__all__ = [
    "DELETE_FILE_PATH",
    "DELETE_POS",
    "POSITION_DELETE_SCHEMA",
    "ParquetOptions",
    "data_file_from_metrics",
    "write_data_files",
    "write_equality_delete_file",
    "write_position_delete_file",
]

ArrowData: TypeAlias = (
    pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch] | AsyncIterable[pa.RecordBatch]
)

DELETE_FILE_PATH = NestedField(2147483546, "file_path", StringType(), required=True)
DELETE_POS = NestedField(2147483545, "pos", LongType(), required=True)
POSITION_DELETE_SCHEMA = Schema(DELETE_FILE_PATH, DELETE_POS)


@dataclass(frozen=True, slots=True)
class ParquetOptions:
    """Writer settings from table properties; defaults are Java's and PyIceberg's."""

    target_file_size: int = TableProperties.target_file_size.default
    row_group_bytes: int = TableProperties.parquet_row_group_bytes.default
    row_group_rows: int = TableProperties.parquet_row_group_rows.default
    page_size: int = TableProperties.parquet_page_bytes.default
    page_rows: int = TableProperties.parquet_page_rows.default
    dictionary_page_size: int = TableProperties.parquet_dict_bytes.default
    compression: str = TableProperties.parquet_compression.default
    compression_level: int | None = TableProperties.parquet_compression_level.default

    @classmethod
    def from_properties(cls, properties: TableProperties | Mapping[str, str] | None) -> ParquetOptions:
        props = TableProperties.of(properties)
        return cls(
            target_file_size=props.target_file_size,
            row_group_bytes=props.parquet_row_group_bytes,
            row_group_rows=props.parquet_row_group_rows,
            page_size=props.parquet_page_bytes,
            page_rows=props.parquet_page_rows,
            dictionary_page_size=props.parquet_dict_bytes,
            compression=props.parquet_compression,
            compression_level=props.parquet_compression_level,
        )

    def writer_kwargs(self) -> dict[str, Any]:
        return {
            "compression": self.compression,
            "compression_level": self.compression_level,
            "data_page_size": self.page_size,
            "dictionary_pagesize_limit": self.dictionary_page_size,
            "write_batch_size": self.page_rows,
            "store_decimal_as_integer": True,  # Appendix A: decimal(P<=9) int32, P<=18 int64
            "use_compliant_nested_type": True,  # 3-level lists with "element"
        }


class _OpenFile:
    """One Parquet file being encoded into memory; only ever touched from one thread at a time."""

    def __init__(
        self, location: str, arrow_schema: pa.Schema, iceberg_schema: Schema, options: ParquetOptions
    ):
        self.location = location
        self.schema = iceberg_schema
        self.sink = pa.BufferOutputStream()
        self.writer = pq.ParquetWriter(self.sink, arrow_schema, **options.writer_kwargs())
        self.rows = 0
        self.nans: dict[int, int] = {}
        self.has_floats = any(
            isinstance(f.field_type, FloatType | DoubleType) for f in iceberg_schema.all_fields()
        )

    def write(self, chunk: pa.Table) -> int:
        self.writer.write_table(chunk, row_group_size=max(chunk.num_rows, 1))
        self.rows += chunk.num_rows
        if self.has_floats:
            for fid, n in count_nans(chunk, self.schema).items():
                self.nans[fid] = self.nans.get(fid, 0) + n
        return int(self.sink.tell())

    def close(self) -> tuple[bytes, pq.FileMetaData]:
        self.writer.close()
        buffer = self.sink.getvalue()
        inner = getattr(self.writer, "writer", None)
        metadata = getattr(inner, "metadata", None)
        if metadata is None:
            metadata = pq.read_metadata(pa.BufferReader(buffer))
        return buffer.to_pybytes(), metadata


def data_file_from_metrics(
    location: str,
    size: int,
    metrics: DataFileMetrics,
    *,
    partition: tuple[Any, ...],
    spec_id: int,
    content: DataFileContent = DataFileContent.DATA,
    equality_ids: tuple[int, ...] | None = None,
    referenced_data_file: str | None = None,
    sort_order_id: int | None = None,
) -> DataFile:
    return DataFile(
        content=content,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=metrics.record_count,
        file_size_in_bytes=size,
        column_sizes=metrics.column_sizes,
        value_counts=metrics.value_counts,
        null_value_counts=metrics.null_value_counts,
        nan_value_counts=metrics.nan_value_counts,
        lower_bounds=metrics.lower_bounds,
        upper_bounds=metrics.upper_bounds,
        split_offsets=tuple(metrics.split_offsets) or None,
        equality_ids=equality_ids,
        sort_order_id=sort_order_id,
        referenced_data_file=referenced_data_file,
        spec_id=spec_id,
    )


@dataclass
class _Partition:
    index: int
    values: tuple[Any, ...]
    path: str
    send: Any  # MemoryObjectSendStream[pa.Table]
    receive: Any  # MemoryObjectReceiveStream[pa.Table]: its worker's
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0
    file_bytes: int = 0  # bytes in the open file so far


class _Writer:
    """One ``write_data_files`` call: per-partition workers, a CPU limiter and an upload limiter."""

    def __init__(
        self,
        io: FileIO,
        schema: Schema,
        spec: PartitionSpec,
        locations: LocationProvider,
        properties: TableProperties,
        io_concurrency: int,
        cpu_workers: int,
        task_id: int,
        sort_order_id: int | None,
    ) -> None:
        self.io = io
        self.schema = schema
        self.spec = spec
        self.locations = locations
        self.properties = properties
        self.options = ParquetOptions.from_properties(properties)
        self.arrow_schema = schema_to_arrow(schema)
        self.cpu = anyio.CapacityLimiter(cpu_workers)
        self.uploads = anyio.Semaphore(io_concurrency)
        self.task_id = task_id
        self.sort_order_id = sort_order_id
        self.partitions: dict[tuple[Any, ...], _Partition] = {}
        self.results: list[tuple[int, int, DataFile]] = []
        self.written: list[str] = []
        self.bytes_per_row: float | None = None  # encoded bytes per row, learnt as files fill
        self._seq = 0
        self._rows_seen = 0
        self._bytes_seen = 0

    # -- sizing -------------------------------------------------------------
    def _row_group_rows(self, part: _Partition) -> int:
        """Rows for the next row group: bounded by the row limit, the row-group byte size
        and what is left of the target file size, using the best estimate of bytes per row."""
        o = self.options
        per_row = self.bytes_per_row
        if per_row is None:  # nothing encoded yet: Arrow's in-memory size is an upper estimate
            per_row = part.pending_bytes / max(part.pending_rows, 1)
        per_row = max(per_row, 1e-3)
        left = max(o.target_file_size - part.file_bytes, 0)
        by_bytes = min(o.row_group_bytes, left if left > 0 else o.target_file_size)
        return max(1, min(o.row_group_rows, math.floor(by_bytes / per_row)))

    def _learn(self, rows: int, encoded: int) -> None:
        if rows <= 0:
            return
        self._rows_seen += rows
        self._bytes_seen += encoded
        self.bytes_per_row = self._bytes_seen / self._rows_seen

    # -- the pipeline -------------------------------------------------------
    async def run(self, data: ArrowData) -> list[DataFile]:
        try:
            async with anyio.create_task_group() as tg, aclosing(_batches(data)) as batches:
                async for batch in batches:
                    if batch.num_rows == 0:
                        continue
                    parts = await anyio.to_thread.run_sync(self._prepare, batch, limiter=self.cpu)
                    for values, rows in parts:
                        await self._add(tg, values, rows)
                for part in self.partitions.values():
                    await self._drain(part, final=True)
                    await part.send.aclose()
        except BaseException as e:
            # a cancelled or failed write: each partition's streams closed here (a worker the
            # cancelled scope never started would leave its ``receive`` unclosed, which warns)
            for part in self.partitions.values():
                part.send.close()
                part.receive.close()
            with anyio.CancelScope(shield=True):
                await self._cleanup()
            raise_first(e)
        self.results.sort(key=lambda r: (r[0], r[1]))
        return [r[2] for r in self.results]

    def _prepare(self, batch: pa.RecordBatch | pa.Table) -> list[tuple[tuple[Any, ...], pa.Table]]:
        table = conform_to_schema(batch, self.schema)
        return split_by_partition(table, self.schema, self.spec)

    async def _add(self, tg: anyio.abc.TaskGroup, values: tuple[Any, ...], rows: pa.Table) -> None:
        part = self.partitions.get(values)
        if part is None:
            send, receive = anyio.create_memory_object_stream[pa.Table](1)
            part = _Partition(
                len(self.partitions), values, partition_path(self.spec, values, self.schema), send, receive
            )
            self.partitions[values] = part
            tg.start_soon(self._worker, part, receive)
        part.pending.append(rows)
        part.pending_rows += rows.num_rows
        part.pending_bytes += rows.nbytes
        await self._drain(part, final=False)

    async def _drain(self, part: _Partition, *, final: bool) -> None:
        while part.pending_rows and (final or part.pending_rows >= self._row_group_rows(part)):
            n = min(part.pending_rows, self._row_group_rows(part))
            pending = pa.concat_tables(part.pending) if len(part.pending) > 1 else part.pending[0]
            chunk, rest = pending.slice(0, n), pending.slice(n)
            part.pending = [rest] if rest.num_rows else []
            part.pending_rows = rest.num_rows
            part.pending_bytes = rest.nbytes if rest.num_rows else 0
            await part.send.send(chunk)

    async def _worker(self, part: _Partition, receive: Any) -> None:
        current: _OpenFile | None = None
        async with receive:
            async for chunk in receive:
                if current is not None and self.bytes_per_row is not None:
                    # Roll before a row group that would push the file well past the target.
                    estimate = part.file_bytes + chunk.num_rows * self.bytes_per_row
                    if estimate > self.options.target_file_size * 1.1:
                        await self._finish(part, current)
                        current = None
                if current is None:
                    name = self.locations.new_file_name(task=self.task_id, partition_index=part.index)
                    location = self.locations.new_data_location(name, part.path)
                    current = _OpenFile(location, self.arrow_schema, self.schema, self.options)
                    part.file_bytes = 0
                before = part.file_bytes
                size = await anyio.to_thread.run_sync(current.write, chunk, limiter=self.cpu)
                self._learn(chunk.num_rows, size - before)
                part.file_bytes = size
                if size >= self.options.target_file_size:
                    await self._finish(part, current)
                    current = None
                    part.file_bytes = 0
        if current is not None:
            await self._finish(part, current)

    async def _finish(self, part: _Partition, current: _OpenFile) -> None:
        data, metadata = await anyio.to_thread.run_sync(current.close, limiter=self.cpu)
        metrics = metrics_from_parquet(metadata, self.schema, self.properties, current.nans)
        data_file = data_file_from_metrics(
            current.location,
            len(data),
            metrics,
            partition=part.values,
            spec_id=self.spec.spec_id,
            sort_order_id=self.sort_order_id,
        )
        self._seq += 1
        seq = self._seq
        async with self.uploads:
            self.written.append(current.location)
            await self.io.write(current.location, data)
        self.results.append((part.index, seq, data_file))

    async def _cleanup(self) -> None:
        """Best effort: files of a failed write are garbage nobody will commit."""
        if self.written:
            try:
                await self.io.delete_many(self.written)
            except Exception:
                pass


async def _batches(data: ArrowData) -> Any:
    """Record batches from any of the accepted input shapes, as an async iterator."""
    if isinstance(data, pa.Table):
        for batch in data.to_batches():
            yield batch
    elif isinstance(data, pa.RecordBatch):
        yield data
    elif isinstance(data, AsyncIterable):
        async for batch in data:
            yield batch
    else:
        for batch in data:
            yield batch


async def write_data_files(
    io: FileIO,
    table_schema: Schema,
    spec: PartitionSpec,
    arrow_data: ArrowData,
    location_provider: LocationProvider,
    properties: TableProperties | Mapping[str, str] | None = None,
    *,
    io_concurrency: int | None = None,
    cpu_workers: int | None = None,
    task_id: int = 0,
    sort_order_id: int | None = None,
) -> list[DataFile]:
    """Write ``arrow_data`` as Parquet data files of the table and describe them.

    The data is validated and cast to ``table_schema`` (see ``conform``), split by
    ``spec``, and written under ``location_provider``; nothing is committed. On error the
    files already uploaded are deleted (best effort) and the error is raised. Uploads at
    once and encoding threads default to ``io``'s runtime (``write_io_concurrency``,
    ``write_cpu_workers``): they are this process's knobs, not the table's.
    """
    if io_concurrency is None:
        io_concurrency = io.runtime.write_io_concurrency
    if io_concurrency < 1:
        raise ValidationError("io_concurrency must be at least 1")
    workers = cpu_workers if cpu_workers is not None else io.runtime.write_cpu_workers
    if workers < 1:
        raise ValidationError("cpu_workers must be at least 1")
    writer = _Writer(
        io,
        table_schema,
        spec,
        location_provider,
        TableProperties.of(properties),
        io_concurrency,
        workers,
        task_id,
        sort_order_id,
    )
    return await writer.run(arrow_data)


def _encode(table: pa.Table, schema: Schema, properties: TableProperties) -> tuple[bytes, DataFileMetrics]:
    options = ParquetOptions.from_properties(properties)
    f = _OpenFile("", schema_to_arrow(schema), schema, options)
    rows = max(1, min(options.row_group_rows, table.num_rows))
    for start in range(0, max(table.num_rows, 1), rows):
        f.write(table.slice(start, rows))
    data, metadata = f.close()
    return data, metrics_from_parquet(metadata, schema, properties, f.nans)


async def write_position_delete_file(
    io: FileIO,
    location_provider: LocationProvider,
    deletes: pa.Table,
    *,
    table_schema: Schema,
    spec: PartitionSpec,
    partition: tuple[Any, ...] = (),
    properties: TableProperties | Mapping[str, str] | None = None,
) -> DataFile:
    """Write a position delete file from a ``file_path`` / ``pos`` table (any order).

    Rows are sorted by path then position, as the spec requires. Bounds are kept in full
    for both columns so readers can tell which data files a delete file can touch; when
    all rows name one data file it is recorded as ``referenced_data_file``.
    """
    missing = {"file_path", "pos"} - set(deletes.column_names)
    if missing:
        raise ValidationError(f"position deletes need columns file_path and pos; missing {sorted(missing)}")
    table = conform_to_schema(deletes.select(["file_path", "pos"]), POSITION_DELETE_SCHEMA)
    table = table.sort_by([("file_path", "ascending"), ("pos", "ascending")])
    # Full bounds on both columns, whatever the table's metrics modes say.
    raw = TableProperties.of(properties).raw
    full = {k: v for k, v in raw.items() if not k.startswith(COLUMN_METRICS_PREFIX)}
    props = TableProperties({**full, TableProperties.metrics_default.key: "full"})
    data, metrics = await anyio.to_thread.run_sync(_encode, table, POSITION_DELETE_SCHEMA, props)
    paths = table.column("file_path")
    referenced = paths[0].as_py() if table.num_rows and paths.unique().__len__() == 1 else None
    return await _upload_delete(
        io,
        location_provider,
        data,
        metrics,
        table_schema=table_schema,
        spec=spec,
        partition=partition,
        content=DataFileContent.POSITION_DELETES,
        referenced_data_file=referenced,
    )


async def write_equality_delete_file(
    io: FileIO,
    location_provider: LocationProvider,
    rows: pa.Table,
    equality_ids: Sequence[int],
    *,
    table_schema: Schema,
    spec: PartitionSpec,
    partition: tuple[Any, ...] = (),
    properties: TableProperties | Mapping[str, str] | None = None,
) -> DataFile:
    """Write an equality delete file holding the ``equality_ids`` columns of ``rows``.

    Any row of the table whose values equal a row here (null equal to null) is deleted
    for data with an older sequence number. Other columns of ``rows`` are dropped.
    """
    if not equality_ids:
        raise ValidationError("equality deletes need at least one equality field id")
    names: list[str] = []
    for fid in equality_ids:
        if fid not in table_schema.field_ids():
            raise ValidationError(f"equality field id {fid} is not in the table schema")
        ftype = table_schema.find_type(fid)
        if not isinstance(ftype, PrimitiveType):
            raise ValidationError(f"equality field {fid} must be a primitive column, not {ftype}")
        parent = table_schema.parent_id(fid)
        while parent is not None:
            if isinstance(table_schema.find_type(parent), ListType | MapType):
                raise ValidationError(f"equality field {fid} is inside a list or map")
            parent = table_schema.parent_id(parent)
        name = table_schema.find_column_name(fid)
        assert name is not None
        names.append(name)
    delete_schema = table_schema.select(*names)
    top = [f.name for f in delete_schema.fields]
    missing = [n for n in top if n not in rows.column_names]
    if missing:
        raise ValidationError(f"equality delete rows lack columns {missing}")
    table = conform_to_schema(rows.select(top), delete_schema)
    props = TableProperties.of(properties)
    data, metrics = await anyio.to_thread.run_sync(_encode, table, delete_schema, props)
    return await _upload_delete(
        io,
        location_provider,
        data,
        metrics,
        table_schema=table_schema,
        spec=spec,
        partition=partition,
        content=DataFileContent.EQUALITY_DELETES,
        equality_ids=tuple(equality_ids),
    )


async def _upload_delete(
    io: FileIO,
    location_provider: LocationProvider,
    data: bytes,
    metrics: DataFileMetrics,
    *,
    table_schema: Schema,
    spec: PartitionSpec,
    partition: tuple[Any, ...],
    content: DataFileContent,
    equality_ids: tuple[int, ...] | None = None,
    referenced_data_file: str | None = None,
) -> DataFile:
    if len(partition) != len(spec.fields):
        raise ValidationError(
            f"partition tuple has {len(partition)} values, spec has {len(spec.fields)} fields"
        )
    name = location_provider.new_file_name(extension="parquet")
    location = location_provider.new_data_location(
        name.replace(".parquet", "-deletes.parquet"), partition_path(spec, partition, table_schema)
    )
    await io.write(location, data)
    return data_file_from_metrics(
        location,
        len(data),
        metrics,
        partition=tuple(partition),
        spec_id=spec.spec_id,
        content=content,
        equality_ids=equality_ids,
        referenced_data_file=referenced_data_file,
    )
