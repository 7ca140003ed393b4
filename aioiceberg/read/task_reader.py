"""Planned file scan tasks to Arrow record batches.

Per file: open (Parquet: footer only), choose row groups (task byte range, then row-group
statistics against the residual), fetch the needed column chunks concurrently, and decode,
reshape by field id, drop deleted rows and apply the residual exactly in a worker thread.
A bounded number of files is in flight, each holding at most a couple of decoded batches,
so a scan consumed batch by batch stays within memory whatever the table size. Batches
come out in task order.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from concurrent.futures import Executor
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aioiceberg._concurrency import hosted, task_group
from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.expressions.arrow_filter import RowMask, field_paths
from aioiceberg.expressions.binding import bind_row_filter, reject_null_rows
from aioiceberg.expressions.evaluators import InclusiveMetricsEvaluator
from aioiceberg.expressions.lineage import lineage_fields_named
from aioiceberg.expressions.tree import AlwaysFalse, AlwaysTrue, Expression, and_
from aioiceberg.expressions.visitor import is_bound, referenced_field_ids
from aioiceberg.io.base import FileIO
from aioiceberg.read.column_projection import field_ids_in, project_columns
from aioiceberg.read.deletes import DeleteCache, TaskDeletes, deleted_mask
from aioiceberg.read.formats import decode_file, decoding
from aioiceberg.read.late import LatePayoff, LateSplit, read_late
from aioiceberg.read.parquet_ranges import ParquetSource, open_parquet
from aioiceberg.scan.options import DEFAULT_BATCH_ROWS, DEFAULT_FILES_IN_FLIGHT
from aioiceberg.scan.plan_metrics import ReadMetrics
from aioiceberg.spec.arrow import field_id_of, schema_to_arrow
from aioiceberg.spec.manifest.data_file import FileFormat
from aioiceberg.spec.name_mapping import NameMapping, apply_name_mapping
from aioiceberg.spec.row_lineage import (
    LAST_UPDATED_SEQUENCE_NUMBER_ID,
    LINEAGE_FIELDS,
    LINEAGE_IDS,
    ROW_ID_ID,
    with_lineage,
)
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema, prune_columns
from aioiceberg.spec.transforms import IdentityTransform

__all__ = [
    "FILE_COLUMN_ID",
    "POS_COLUMN_ID",
    "ReadMetrics",
    "output_arrow_schema",
    "read_tasks",
    "read_to_table",
]

FILE_COLUMN_ID = 2147483646
POS_COLUMN_ID = 2147483645
_POS = "\x00pos"


def output_arrow_schema(
    projected: Schema, include_file: bool = False, include_pos: bool = False
) -> pa.Schema:
    """The Arrow schema of every batch: the projection, then ``_file`` and ``_pos`` if asked."""
    schema = schema_to_arrow(projected)
    if include_file:
        schema = schema.append(pa.field("_file", pa.string(), False, {b"PARQUET:field_id": b"2147483646"}))
    if include_pos:
        schema = schema.append(pa.field("_pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483645"}))
    return schema


@dataclass(frozen=True, slots=True)
class _FilePlan:
    """Everything the decoding thread needs for one file."""

    task: FileScanTask
    read_schema: Schema
    read_arrow: pa.Schema
    projected: Schema
    out_schema: pa.Schema
    filter: RowMask | None
    constants: dict[int, Any]
    name_mapping: NameMapping | None
    include_file: bool
    include_pos: bool
    batch_rows: int
    # v3 row lineage asked for: (index in read_schema of _row_id or None, of
    # _last_updated_sequence_number or None); empty when not asked for
    lineage: tuple[int | None, int | None] | None = None


def _source_fields(schema: pa.Schema, mapping: NameMapping | None, location: str) -> list[pa.Field]:
    if not len(schema) or any(field_id_of(f) is not None for f in schema):
        return list(schema)  # (no column read, for a scan that selects none: nothing to map)
    if mapping is None:
        raise ValidationError(
            f"{location}: the file has no field ids and the table has no name mapping "
            "(schema.name-mapping.default)"
        )
    return list(apply_name_mapping(schema, mapping))


def _with_types(fields: Iterable[pa.Field], columns: Iterable[Any]) -> pa.Schema:
    """``fields`` retyped where their column is not of their type (a dictionary read)."""
    pairs = zip(fields, columns, strict=True)
    return pa.schema([f if c.type == f.type else f.with_type(c.type) for f, c in pairs])


def _process(
    plan: _FilePlan,
    table: pa.Table,
    first_row: int,
    deletes: TaskDeletes,
    keep_dictionary: frozenset[int] = frozenset(),
    matched: pa.Array | None = None,
) -> list[pa.RecordBatch]:
    """Decode-side work for one chunk of a file: reshape, delete, filter, project.

    ``keep_dictionary``: field ids the filter does not read whose dictionary arrays pass
    the filter as they are; the last projection decodes only the rows that survive.
    ``matched``: the filter's result over ``table``'s rows when already computed (no deletes).
    """
    assert matched is None or (deletes.empty and len(matched) == table.num_rows)
    offset = 0
    out: list[pa.RecordBatch] = []
    fields = _source_fields(table.schema, plan.name_mapping, plan.task.file.file_path)
    # a filter runs once over each chunk as read (a row group), not once per output batch:
    # each call has a fixed cost (an Acero plan), and a selective filter leaves little to cut
    chunk_rows = None if plan.filter is not None else plan.batch_rows
    for batch in table.to_batches(max_chunksize=chunk_rows):
        n = batch.num_rows
        if n == 0:
            continue
        columns = project_columns(
            list(batch.columns),
            fields,
            plan.read_schema,
            n,
            constants=plan.constants,
            where=plan.task.file.file_path,
            keep_dictionary=keep_dictionary,
        )
        read_arrow = _with_types(plan.read_arrow, columns) if keep_dictionary else plan.read_arrow
        # row positions ride along through the deletes and the filter when asked for, or
        # when there is no column to carry the row count
        positions = plan.include_pos or not columns or plan.lineage is not None
        if positions:
            columns.append(pa.array(np.arange(first_row, first_row + n, dtype=np.int64)))
            read_arrow = read_arrow.append(pa.field(_POS, pa.int64(), False))
            if plan.lineage is not None:
                _fill_lineage(plan, columns)
        read = pa.RecordBatch.from_arrays(columns, schema=read_arrow)
        if not deletes.empty:
            by_id = {
                fid: read.column(i)
                for i, f in enumerate(plan.read_schema.fields)
                if (fid := f.field_id) in {x for ids, _ in deletes.equality for x in ids}
            }
            mask = deleted_mask(deletes, first_row, n, by_id)
            if mask is not None and mask.any():
                read = read.filter(pa.array(~mask))
        first_row += n
        if matched is not None:
            read = read.filter(matched.slice(offset, n))
            offset += n
        elif plan.filter is not None and read.num_rows:
            read = plan.filter.filter(read)
        if read.num_rows == 0:
            continue
        read_columns = read.columns[:-1] if positions else read.columns
        arrays = project_columns(
            list(read_columns), list(plan.read_arrow), plan.projected, read.num_rows, where="projection"
        )
        if plan.include_file:
            arrays.append(pa.repeat(pa.scalar(plan.task.file.file_path, pa.string()), read.num_rows))
        if plan.include_pos:
            arrays.append(read.column(read.num_columns - 1))
        done = pa.RecordBatch.from_arrays(arrays, schema=plan.out_schema)
        out.extend(done.slice(i, plan.batch_rows) for i in range(0, done.num_rows, plan.batch_rows))
    return out


def _fill_lineage(plan: _FilePlan, columns: list[pa.Array]) -> None:
    """The row lineage columns of a chunk, as the spec derives them where the file stores none
    (or a null): ``_row_id`` = the file's ``first_row_id`` + the row's position in the file
    (``columns[-1]``, taken before any row is dropped), ``_last_updated_sequence_number`` = the
    file's data sequence number; both null when the file has no ``first_row_id`` (data from
    before v3, read in a snapshot without row lineage)."""
    assert plan.lineage is not None
    row_id_at, seq_at = plan.lineage
    first_row_id, seq = plan.task.file.first_row_id, plan.task.data_sequence_number
    if first_row_id is None:
        return
    if row_id_at is not None:
        derived = pc.add(columns[-1], pa.scalar(first_row_id, pa.int64()))
        columns[row_id_at] = _coalesce(columns[row_id_at], derived)
    if seq_at is not None and seq is not None:
        columns[seq_at] = _coalesce(columns[seq_at], pa.scalar(seq, pa.int64()))


def _coalesce(stored: pa.Array, derived: pa.Array | pa.Scalar) -> pa.Array:
    if stored.null_count == 0:
        return stored
    if stored.null_count == len(stored) and isinstance(derived, pa.Array):
        return derived
    out = pc.coalesce(stored.cast(pa.int64()), derived)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def _late_split(
    plan: _FilePlan, fields: list[pa.Field], tops: list[int], filtered: frozenset[int]
) -> LateSplit | None:
    """How a filtered read of this file splits ``tops`` for a late read, or None when it cannot
    skip anything (the filter reads every column read, or none of them)."""
    filter_tops = [i for i in tops if _any_id(fields[i]) & filtered]
    other_tops = [i for i in tops if i not in filter_tops]
    if not filter_tops or not other_tops:
        return None
    schema = prune_columns(
        plan.read_schema, set(filtered & plan.read_schema.field_ids()), select_full_types=True
    )
    return LateSplit(filter_tops, other_tops, schema, schema_to_arrow(schema))


def _read_late(
    plan: _FilePlan,
    split: LateSplit,
    source: ParquetSource,
    fields: list[pa.Field],
    rg: int,
    first_row: int,
    as_dictionary: list[int],
    keep: frozenset[int],
    helpers: Executor | None,
) -> tuple[list[pa.RecordBatch], bool]:
    """``_process`` over row group ``rg`` read late (``aioiceberg/read/late.py``), and whether
    that paid: at least half the rows the filter drops were never decoded past its columns
    (true when none matched). From a worker thread."""
    assert plan.filter is not None
    row_filter = plan.filter

    def evaluate(arrays: list[pa.Array]) -> pa.Array | pa.Scalar:
        columns = project_columns(
            arrays,
            list(_with_types([fields[i] for i in split.filter_tops], arrays)),
            split.schema,
            len(arrays[0]),
            constants=plan.constants,
            where=plan.task.file.file_path,
        )
        return row_filter(pa.RecordBatch.from_arrays(columns, schema=split.arrow))

    got = read_late(source, split, rg, as_dictionary, evaluate, helpers)
    if got is None:
        return [], True
    by_top, mask = got
    tops = sorted(by_top)
    table = pa.Table.from_arrays(
        [by_top[i] for i in tops], schema=_with_types([fields[i] for i in tops], (by_top[i] for i in tops))
    )
    n, stop = source.metadata.row_group(rg).num_rows, table.num_rows
    paid = 2 * (n - stop) >= n - (stop if mask is None else mask.true_count)
    return _process(plan, table, first_row, TaskDeletes(None, ()), keep, mask), paid


class _Reader:
    def __init__(
        self,
        fio: FileIO,
        projected: Schema,
        *,
        row_filter: Expression | str | None,
        table_schema: Schema | None,
        name_mapping: NameMapping | None,
        case_sensitive: bool,
        include_file: bool,
        include_pos: bool,
        batch_rows: int,
        stats: ReadMetrics,
    ) -> None:
        self.io = fio
        self.projected = projected
        self.row_filter = row_filter
        self.table_schema = table_schema
        self.name_mapping = name_mapping
        self.case_sensitive = case_sensitive
        self.include_file = include_file
        self.include_pos = include_pos
        self.batch_rows = batch_rows
        self.stats = stats
        self.out_schema = output_arrow_schema(projected, include_file, include_pos)
        self._decoding = 0  # row groups of this read being decoded now
        self._late_payoff = LatePayoff()
        self._deletes: DeleteCache | None = None
        self._bound_row_filter: tuple[Schema, Expression] | None = None  # row_filter, bound once

    def deletes(self, schema: Schema) -> DeleteCache:
        if self._deletes is None:
            self._deletes = DeleteCache(self.io, schema, self.name_mapping)
        return self._deletes

    def _bound_filter(self, task: FileScanTask, schema: Schema) -> Expression:
        expr: Expression = task.residual if task.residual is not None else AlwaysTrue()
        # a planned task's residual is bound, SQL's rule for NULLs included: applied as it is
        if not task.residual_null_safe:
            if not is_bound(expr):  # a task read from JSON
                expr = bind_row_filter(schema, expr, self.case_sensitive)
            else:  # a task built by hand: SQL's rule for NULLs (idempotent)
                expr = reject_null_rows(expr)
        if self.row_filter is not None:
            expr = and_(expr, self._row_filter_for(schema))
        return expr

    def _row_filter_for(self, schema: Schema) -> Expression:
        """``row_filter`` bound to ``schema``: once per read, not once per file, as every task
        of a scan shares one schema."""
        assert self.row_filter is not None
        if self._bound_row_filter is None or self._bound_row_filter[0] is not schema:
            # the row lineage columns it names bind as metadata columns (a scan's planner checks
            # the format version; here a file without lineage reads them as null)
            named = lineage_fields_named(schema, self.row_filter, self.case_sensitive)
            bound_to = with_lineage(schema, named) if named else schema
            self._bound_row_filter = schema, bind_row_filter(bound_to, self.row_filter, self.case_sensitive)
        return self._bound_row_filter[1]

    def plan(self, task: FileScanTask) -> tuple[_FilePlan, Expression]:
        schema = self.table_schema or task.schema
        expr = self._bound_filter(task, schema)
        eq_ids = {fid for d in task.delete_files for fid in (d.equality_ids or ())}
        wanted = {f.field_id for f in self.projected.all_fields()} | referenced_field_ids(expr) | eq_ids
        read_schema = prune_columns(schema, wanted & schema.field_ids(), select_full_types=True)
        lineage = None
        # selected, or named by the filter (then computed, filtered on and projected away)
        asked = [f for f in LINEAGE_FIELDS if f.field_id in wanted]
        if asked:  # read as stored where the file has them, derived in _process where not
            read_schema = with_lineage(read_schema, asked)
            at = {f.field_id: i for i, f in enumerate(read_schema.fields)}
            lineage = (at.get(ROW_ID_ID), at.get(LAST_UPDATED_SEQUENCE_NUMBER_ID))
        constants: dict[int, Any] = {}
        partition_fields = task.spec.fields
        for pf, value in zip(partition_fields, task.file.partition, strict=False):
            if isinstance(pf.transform, IdentityTransform) and pf.source_id in wanted:
                constants[pf.source_id] = value
        arrow_filter = None
        if not isinstance(expr, AlwaysTrue):
            arrow_filter = RowMask(expr, field_paths(read_schema))
        plan = _FilePlan(
            task,
            read_schema,
            schema_to_arrow(read_schema),
            self.projected,
            self.out_schema,
            arrow_filter,
            constants,
            self.name_mapping,
            self.include_file,
            self.include_pos,
            self.batch_rows,
            lineage,
        )
        return plan, expr

    async def read_file(self, task: FileScanTask, send: MemoryObjectSendStream[pa.RecordBatch]) -> None:
        async with send:
            with decoding(task.file.file_path):
                await self._read_file(task, send)

    async def _read_file(self, task: FileScanTask, send: MemoryObjectSendStream[pa.RecordBatch]) -> None:
        plan, expr = self.plan(task)
        if isinstance(expr, AlwaysFalse):
            return
        self.stats.files += 1
        deletes = TaskDeletes(None, ())
        if task.delete_files:
            cache = self.deletes(plan.read_schema if self.table_schema is None else self.table_schema)
            cache.table_schema = self.table_schema or task.schema
            deletes = await cache.for_task(task.file, task.delete_files)
            self.stats.delete_files_read = cache.files_read
        fmt = task.file.file_format
        if fmt == FileFormat.PARQUET:
            await self._read_parquet(task, plan, expr, deletes, send)
            return
        if fmt not in (FileFormat.AVRO, FileFormat.ORC):
            raise UnsupportedError(f"cannot read {fmt} data files: {task.file.file_path}")
        data = await self.io.read(task.file.file_path)
        self.stats.bytes_fetched += len(data)

        def work() -> list[pa.RecordBatch]:
            return _process(plan, decode_file(data, fmt, task.file.file_path), 0, deletes)

        for batch in await anyio.to_thread.run_sync(work):
            await send.send(batch)

    async def _read_parquet(
        self,
        task: FileScanTask,
        plan: _FilePlan,
        expr: Expression,
        deletes: TaskDeletes,
        send: MemoryObjectSendStream[pa.RecordBatch],
    ) -> None:
        source: ParquetSource = await open_parquet(
            self.io, task.file.file_path, task.file.file_size_in_bytes or None
        )
        schema = self.table_schema or task.schema
        evaluator = None
        filtered: frozenset[int] = frozenset()
        if not isinstance(expr, AlwaysTrue):
            # a stored lineage column's stats leave out the rows whose values are derived
            evaluator = InclusiveMetricsEvaluator(
                schema, expr, self.case_sensitive, include_empty_files=False, untrusted=LINEAGE_IDS
            )
            filtered = frozenset(referenced_field_ids(expr))
        row_groups = source.select_row_groups(task.start, task.length, evaluator, schema, filtered)
        self.stats.row_groups_total += source.metadata.num_row_groups
        fields = _source_fields(source.arrow_schema, self.name_mapping, task.file.file_path)
        wanted = plan.read_schema.field_ids()
        tops = [i for i, f in enumerate(fields) if _any_id(f) & wanted]
        # strings the filter does not read stay dictionary-encoded through it (see _process)
        offered: dict[int, int] = {}  # top-level index -> field id
        if plan.filter is not None and deletes.empty:
            ids = ((i, field_id_of(fields[i])) for i in tops)
            offered = {i: fid for i, fid in ids if fid is not None and fid not in filtered}
        as_dictionary, keep = list(offered), frozenset(offered.values())
        # a filtered read without deletes decodes the filter's columns first (see late.py)
        late = (
            _late_split(plan, fields, tops, filtered)
            if plan.filter is not None and deletes.empty and plan.lineage is None
            else None
        )
        helpers = self.io.runtime.read_helpers if late is not None else None
        odds = self._late_payoff
        for run in source.group_row_groups(row_groups, tops):
            await source.prefetch(run, tops)
            for rg in run:
                self.stats.row_groups_read += 1
                first_row = source.row_group_first_row[rg]

                lone = self._decoding == 0
                split = late if late is not None and odds.worth_trying(lone) else None
                # a helper thread only for a lone decode: beside others, the cores are taken
                # and a helper's one-core decode of a whole row group is slower than pyarrow's
                helper = helpers if lone else None

                def work(
                    rg: int = rg,
                    first_row: int = first_row,
                    split: LateSplit | None = split,
                    helper: Executor | None = helper,
                ) -> tuple[list[pa.RecordBatch], bool | None]:
                    if split is not None:
                        return _read_late(
                            plan, split, source, fields, rg, first_row, as_dictionary, keep, helper
                        )
                    table = source.read_row_group(rg, tops, as_dictionary)
                    if tops:  # with no column (none resolvable) the row count is all there is
                        with_ids = _with_types([fields[i] for i in tops], table.columns)
                        table = pa.Table.from_arrays(table.columns, schema=with_ids)
                    return _process(plan, table, first_row, deletes, keep), None

                self._decoding += 1
                try:
                    batches, paid = await anyio.to_thread.run_sync(work)
                finally:
                    self._decoding -= 1
                if paid is not None:
                    odds.record(paid)
                for batch in batches:
                    await send.send(batch)
            source.release()
        self.stats.bytes_fetched += source.file.size


def _any_id(field: pa.Field) -> set[int]:
    own = field_id_of(field)
    return field_ids_in(field.type) | ({own} if own is not None else set())


async def _iterate(
    tasks: AsyncIterable[FileScanTask] | Iterable[FileScanTask],
) -> AsyncGenerator[FileScanTask, None]:
    if isinstance(tasks, AsyncIterable):
        async for t in tasks:
            yield t
    else:
        for t in tasks:
            yield t


def read_tasks(
    io: FileIO,
    tasks: AsyncIterable[FileScanTask] | Iterable[FileScanTask],
    projected_schema: Schema,
    *,
    row_filter: Expression | str | None = None,
    table_schema: Schema | None = None,
    name_mapping: NameMapping | None = None,
    case_sensitive: bool = True,
    limit: int | None = None,
    files_in_flight: int = DEFAULT_FILES_IN_FLIGHT,
    include_file_column: bool = False,
    include_pos_column: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    stats: ReadMetrics | None = None,
) -> AsyncGenerator[pa.RecordBatch, None]:
    """Stream the rows of ``tasks`` as batches of ``projected_schema`` (plus ``_file``/``_pos``).

    Each task's residual is applied exactly (``row_filter``, if given, is applied too);
    ``table_schema`` types residuals and partition values (default: each task's schema);
    ``name_mapping`` gives ids to files written without them. Stop iterating (or use
    ``limit``) and the remaining reads are cancelled.

    The reads run in a task of their own (see :func:`~aioiceberg._concurrency.hosted`): their
    task group is held across the batches, and a stream left without closing it (``break``
    out of ``async for``) is closed by the loop's finalizer in another task, which would
    otherwise cancel the task that iterated it.
    """
    return hosted(
        lambda: _read_tasks(
            io,
            tasks,
            projected_schema,
            row_filter=row_filter,
            table_schema=table_schema,
            name_mapping=name_mapping,
            case_sensitive=case_sensitive,
            limit=limit,
            files_in_flight=files_in_flight,
            include_file_column=include_file_column,
            include_pos_column=include_pos_column,
            batch_rows=batch_rows,
            stats=stats,
        )
    )


async def _read_tasks(
    io: FileIO,
    tasks: AsyncIterable[FileScanTask] | Iterable[FileScanTask],
    projected_schema: Schema,
    *,
    row_filter: Expression | str | None,
    table_schema: Schema | None,
    name_mapping: NameMapping | None,
    case_sensitive: bool,
    limit: int | None,
    files_in_flight: int,
    include_file_column: bool,
    include_pos_column: bool,
    batch_rows: int,
    stats: ReadMetrics | None,
) -> AsyncGenerator[pa.RecordBatch, None]:
    """:func:`read_tasks` in the task that iterates it (it holds a task group across yields)."""
    for name, value in (("files_in_flight", files_in_flight), ("batch_rows", batch_rows)):
        if value < 1:
            raise ValidationError(f"cannot read scan tasks: read option {name!r} must be >= 1, got {value!r}")
    if limit is not None and limit <= 0:
        return
    reader = _Reader(
        io,
        projected_schema,
        row_filter=row_filter,
        table_schema=table_schema,
        name_mapping=name_mapping,
        case_sensitive=case_sensitive,
        include_file=include_file_column,
        include_pos=include_pos_column,
        batch_rows=batch_rows,
        stats=stats if stats is not None else ReadMetrics(),
    )
    order_send, order_recv = anyio.create_memory_object_stream[MemoryObjectReceiveStream[pa.RecordBatch]](
        max(0, files_in_flight - 1)
    )

    # Every file's pair of streams is closed whichever way the read ends (one left unclosed
    # warns when collected): its ``send`` by its read, its ``recv`` by the consumer; the ones
    # neither took (a read the cancelled scope never started, a ``recv`` still queued or lost
    # in a cancelled handover) are closed here at the end.
    untaken: set[MemoryObjectSendStream[pa.RecordBatch] | MemoryObjectReceiveStream[pa.RecordBatch]] = set()

    async def read_one(task: FileScanTask, send: MemoryObjectSendStream[pa.RecordBatch]) -> None:
        untaken.discard(send)  # (no checkpoint before ``read_file`` holds it)
        await reader.read_file(task, send)

    async def produce() -> None:
        try:
            async with order_send, aclosing(_iterate(tasks)) as it:
                async for task in it:
                    send, recv = anyio.create_memory_object_stream[pa.RecordBatch](2)
                    untaken.update((send, recv))
                    await order_send.send(recv)
                    tg.start_soon(read_one, task, send)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the consumer stopped early

    remaining = limit
    try:
        async with task_group() as tg:
            tg.start_soon(produce)
            try:
                async for recv in order_recv:
                    untaken.discard(recv)
                    with recv:
                        async for batch in recv:
                            if remaining is not None:
                                if batch.num_rows >= remaining:
                                    yield batch.slice(0, remaining)
                                    return
                                remaining -= batch.num_rows
                            yield batch
            finally:
                tg.cancel_scope.cancel()
                order_recv.close()
    finally:
        for stream in untaken:
            stream.close()
        untaken.clear()


async def read_to_table(
    io: FileIO,
    tasks: AsyncIterable[FileScanTask] | Iterable[FileScanTask],
    projected_schema: Schema,
    *,
    row_filter: Expression | str | None = None,
    table_schema: Schema | None = None,
    name_mapping: NameMapping | None = None,
    case_sensitive: bool = True,
    limit: int | None = None,
    files_in_flight: int = DEFAULT_FILES_IN_FLIGHT,
    include_file_column: bool = False,
    include_pos_column: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    stats: ReadMetrics | None = None,
) -> pa.Table:
    """All rows of ``tasks`` in one table (see :func:`read_tasks` for the arguments)."""
    batches: list[pa.RecordBatch] = []
    # read whole, in this task, and closed here: no task of its own needed (see read_tasks)
    rows = _read_tasks(
        io,
        tasks,
        projected_schema,
        row_filter=row_filter,
        table_schema=table_schema,
        name_mapping=name_mapping,
        case_sensitive=case_sensitive,
        limit=limit,
        files_in_flight=files_in_flight,
        include_file_column=include_file_column,
        include_pos_column=include_pos_column,
        batch_rows=batch_rows,
        stats=stats,
    )
    async with aclosing(rows) as it:
        async for batch in it:
            batches.append(batch)
    schema = output_arrow_schema(projected_schema, include_file_column, include_pos_column)
    return pa.Table.from_batches(batches, schema=schema)
