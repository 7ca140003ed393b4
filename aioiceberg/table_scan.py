"""The scan users hold: planning (``aioiceberg.scan``) joined to reading (``aioiceberg.read``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Unpack

import pyarrow as pa

from aioiceberg._concurrency import hosted
from aioiceberg.conversions import ArrowStream, polars_lazy_frame, require
from aioiceberg.errors import ValidationError
from aioiceberg.expressions.tree import Expression
from aioiceberg.io import FileIO
from aioiceberg.read import output_arrow_schema, read_tasks, read_to_table
from aioiceberg.scan.options import ScanOptions, split_scan_options
from aioiceberg.scan.pipeline import PlanStream
from aioiceberg.scan.plan_metrics import PlanMetrics, ReadMetrics
from aioiceberg.scan.planner import Planner
from aioiceberg.scan.task_batches import Rendered, task_batch
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.name_mapping import NameMapping
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.row_lineage import lineage_field, with_lineage
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import NestedField

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import polars as pl
    from duckdb import DuckDBPyConnection


__all__ = ["TableScan"]


class TableScan:
    """A configured scan: ``plan_files()`` streams tasks, ``to_batches()`` / ``to_arrow()`` rows.

    Options (typed by :class:`~aioiceberg.scan.options.ScanOptions`, checked here) go to the
    planner (``io_concurrency``, ``decode_workers``, ``split_size``, ...) or to the reader
    (``files_in_flight``, ``batch_rows``, ``include_file_column``, ``include_pos_column``).
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        row_filter: str | Expression = "",
        *,
        selected_fields: Sequence[str] = ("*",),
        case_sensitive: bool = True,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: int | dt.datetime | None = None,
        limit: int | None = None,
        **options: Unpack[ScanOptions],
    ) -> None:
        plan, self.read_options = split_scan_options(options)
        self.planner = Planner(
            io,
            metadata,
            row_filter,
            selected_fields=selected_fields,
            case_sensitive=case_sensitive,
            snapshot_id=snapshot_id,
            ref=ref,
            as_of=as_of,
            limit=limit,
            options=plan,
        )
        self.io = io
        self.metadata = metadata
        self.read_stats = ReadMetrics()

    @property
    def metrics(self) -> PlanMetrics:
        """Planning metrics of the last plan started (``plan_files()``, or the one a read ran):
        what it skipped, also when the cache served it; ``str()`` is a short summary."""
        return self.planner.metrics

    @property
    def snapshot_schema(self) -> Schema:
        """The schema rows are bound and read with: the snapshot's own (time travel), else the
        current one (the planner decides, so plan and read agree)."""
        return self.planner.schema

    def projection(self) -> Schema:
        """The selected columns; an unknown one is named with the table, the schema it was
        looked up in and the columns spelled alike."""
        schema, case_sensitive = self.snapshot_schema, self.planner.case_sensitive
        names: list[str] = []
        lineage: list[NestedField] = []  # v3 row lineage columns, selected by name as Spark does
        for name in self.planner.selected_fields:
            if name != "*" and schema.find_field_id(name, case_sensitive) is None:
                if (found := lineage_field(name, case_sensitive)) is not None:
                    lineage.append(found)
                    continue
                current = schema.schema_id == self.metadata.current_schema_id
                which = "its current schema" if current else "the schema of the snapshot scanned"
                raise ValidationError(
                    f"cannot select column {name!r}: table {self.metadata.location} has no such "
                    f"column in {which} (id {schema.schema_id}){schema.did_you_mean(name, case_sensitive)}"
                )
            names.append(name)
        if not lineage:
            return schema.select(*names, case_sensitive=case_sensitive)
        return with_lineage(schema.select(*names, case_sensitive=case_sensitive), lineage)

    def _name_mapping(self) -> NameMapping | None:
        return TableProperties(self.metadata.properties).name_mapping

    def plan_files(self, metrics: PlanMetrics | None = None) -> PlanStream:
        """Stream the tasks; ``metrics`` (optional) counts this call alone. ``async for``
        it, or ``async with scan.plan_files() as tasks:`` to own the plan's task group."""
        return self.planner.plan_files(metrics)

    async def plan_batches(self, metrics: PlanMetrics | None = None) -> AsyncIterator[pa.RecordBatch]:
        """The plan's tasks as Arrow record batches, a manifest's as it is decided (or, for a
        caller slower than the decodes, those of the manifests decided meanwhile), with
        the columns of :data:`aioiceberg.scan.task_batches.TASK_SCHEMA` (path, format,
        partition and residual as JSON, counts, byte range, delete files): for a consumer
        that takes the file list whole (Arrow, DuckDB, Polars, Spark), without a
        ``FileScanTask`` per file."""
        planner = self.planner
        rendered = Rendered(planner)  # partition values rendered once for the plan
        async with aclosing(self.plan_files(metrics).batches(joined=True)) as batches:
            async for tasks in batches:
                yield task_batch(planner, tasks, rendered)

    async def to_batches(self) -> AsyncIterator[pa.RecordBatch]:
        """Stream the matching rows as Arrow batches; memory stays bounded by the files in flight.

        The plan and the reads run in a task of their own (see :func:`hosted`): a caller that
        breaks out without closing the stream is not cancelled when the loop collects it."""
        projection, limit = self.projection(), self.planner.limit
        async with aclosing(hosted(lambda: self._read(projection, limit))) as batches:
            async for batch in batches:
                yield batch

    async def to_arrow(self) -> pa.Table:
        opts = self.read_options
        async with self.plan_files() as tasks:
            return await read_to_table(
                self.io,
                tasks,
                self.projection(),
                table_schema=self.snapshot_schema,
                name_mapping=self._name_mapping(),
                case_sensitive=self.planner.case_sensitive,
                limit=self.planner.limit,
                files_in_flight=opts.files_in_flight,
                include_file_column=opts.include_file_column,
                include_pos_column=opts.include_pos_column,
                batch_rows=opts.batch_rows,
                stats=self.read_stats,
            )

    # -- conversions, under PyIceberg's names ------------------------------------------------

    async def to_pandas(self, /, **kwargs: Any) -> pd.DataFrame:
        """The rows as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        require("pandas", "pandas", "to_pandas()")
        return (await self.to_arrow()).to_pandas(**kwargs)

    async def to_polars(self) -> pl.DataFrame:
        """The rows as a polars DataFrame, read eagerly (``to_polars_lazy()`` streams)."""
        require("polars", "polars", "to_polars()")
        import polars as pl  # polars: loaded only when used (~0.15 s to import, and not fork-safe)

        frame = pl.from_arrow(await self.to_arrow())
        return frame.to_frame() if isinstance(frame, pl.Series) else frame

    def to_polars_lazy(self) -> pl.LazyFrame:
        """A polars LazyFrame that reads nothing until collected, then streams the scan's
        batches: only the columns the query uses are read and a ``head()`` stops the read;
        polars' own filters apply per batch (the scan's ``row_filter`` prunes files). Each
        ``collect()`` reads again."""
        require("polars", "polars", "to_polars_lazy()")
        return polars_lazy_frame(self._arrow_stream().schema, self._blocking_batches)

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        """The rows as a ``pyarrow.RecordBatchReader``, streamed: batches are read on the
        runtime's background loop as the reader asks for them, so any thread can consume it
        (from async code, read it in a worker thread rather than block the loop). One pass."""
        return self._arrow_stream().reader()

    def to_duckdb(self, table_name: str, connection: DuckDBPyConnection | None = None) -> DuckDBPyConnection:
        """Register the scan in ``connection`` (a new in-memory one if None) as the view
        ``table_name`` and return the connection. The view streams, it is not a copy: every
        query over it plans and reads the scan again, as the query pulls rows."""
        duckdb = require("duckdb", "duckdb", "to_duckdb()")
        con: DuckDBPyConnection = connection if connection is not None else duckdb.connect()
        con.register(table_name, self._arrow_stream())
        return con

    def _arrow_stream(self) -> ArrowStream:

        opts = self.read_options
        schema = output_arrow_schema(self.projection(), opts.include_file_column, opts.include_pos_column)
        return ArrowStream(schema, self._blocking_batches)

    def _blocking_batches(self, columns: list[str] | None, limit: int | None) -> Iterator[pa.RecordBatch]:
        """The rows of ``columns`` (None: all selected), at most ``limit`` of them (and never more
        than the scan's own limit), for a blocking consumer; nothing runs until the first batch
        is asked for."""
        projection = self.projection()
        if columns is not None:
            projection = projection.select(*columns)
        if self.planner.limit is not None:
            limit = self.planner.limit if limit is None else min(limit, self.planner.limit)
        return self.io.runtime.blocking.iterate(lambda: self._read(projection, limit))

    async def _read(self, projection: Schema, limit: int | None) -> AsyncGenerator[pa.RecordBatch, None]:
        """The rows of a new plan, columns of ``projection``, at most ``limit`` of them."""
        async with (
            self.plan_files() as tasks,
            aclosing(self._read_tasks(tasks, projection, limit)) as batches,
        ):
            async for batch in batches:
                yield batch

    def _read_tasks(
        self, tasks: AsyncIterable[FileScanTask], projection: Schema, limit: int | None
    ) -> AsyncGenerator[pa.RecordBatch, None]:
        opts = self.read_options
        return read_tasks(
            self.io,
            tasks,
            projection,
            table_schema=self.snapshot_schema,
            name_mapping=self._name_mapping(),
            case_sensitive=self.planner.case_sensitive,
            limit=limit,
            files_in_flight=opts.files_in_flight,
            include_file_column=opts.include_file_column,
            include_pos_column=opts.include_pos_column,
            batch_rows=opts.batch_rows,
            stats=self.read_stats,
        )

    def __repr__(self) -> str:
        return f"TableScan({self.planner!r})"
