"""Structured Streaming through the ``aioiceberg`` source: appended files in, one commit per epoch out.

    spark.readStream.format("aioiceberg").load(location)
    df.writeStream.format("aioiceberg").option("checkpointLocation", ck).start(location)

Reading: an offset names a snapshot of the branch and how many of the data files it
appended have been read (files in path order). A micro-batch reads exactly the files
the snapshots after the last offset appended, walking the branch's ancestry; admission
control may stop inside a snapshot. ``replace`` snapshots (compaction) add no rows and are
passed over; ``delete`` and ``overwrite`` snapshots stop the stream unless the user asks
to skip them. The stream reader lives in one driver-side worker for the whole run (so it
may cache a snapshot's files between calls) and is pickled to executors for ``read``.

Writing: every epoch is one append (a replace of all rows in complete mode) through the
batch writer's job; its snapshot carries the query id and epoch id, and an epoch whose
(query, epoch) is already in the table's history (a replay after a restart) commits
nothing. Spark makes a new stream writer per micro-batch and again for its commit, so
the write id of an epoch attempt and the query id travel in the commit messages.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import NotFoundError, UnsupportedError, ValidationError
from aioiceberg.expressions import AlwaysFalse
from aioiceberg.spark.batch import (
    AioIcebergCommitMessage,
    AioIcebergReader,
    AioIcebergWriter,
    SourceOptions,
    WriteJob,
    write_job,
)
from aioiceberg.spark.stream_options import (
    BATCH_ONLY_WRITE_OPTIONS,
    CHECKPOINT_OPTION,
    SKIP_DELETE,
    SKIP_OVERWRITE,
    STREAM_READ_OPTIONS,
    StreamOptions,
)
from aioiceberg.spark.task_json import group_tasks
from aioiceberg.spec.manifest import DataFile, DataFileContent, added_files
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.scan_tasks import FileScanTask, file_scan_task_to_json
from aioiceberg.spec.schema_json import schema_to_json

if TYPE_CHECKING:
    from aioiceberg.io.base import FileIO

__all__ = [
    "EPOCH_ID_PROPERTY",
    "QUERY_ID_PROPERTY",
    "AioIcebergStreamCommitMessage",
    "AioIcebergStreamReader",
    "AioIcebergStreamWriter",
    "StreamOffset",
    "appended_data_files",
]

# snapshot summary keys of a streaming epoch (Java Iceberg's, so either engine's history reads alike)
QUERY_ID_PROPERTY = "spark.sql.streaming.queryId"
EPOCH_ID_PROPERTY = "spark.sql.streaming.epochId"
# the task-local property Spark sets to the running streaming query's id
_QUERY_ID_LOCAL_PROPERTY = "sql.streaming.queryId"

ALL = -1  # StreamOffset.position: every file of the snapshot read
NOTHING_READ = -1  # StreamOffset.snapshot_id: the stream starts at the branch's oldest snapshot


@dataclass(frozen=True)
class StreamOffset:
    """Every snapshot of the branch before ``snapshot_id`` read, and the first ``position``
    data files ``snapshot_id`` appended (``ALL``: all of them)."""

    snapshot_id: int
    position: int = 0

    def to_json(self) -> dict[str, int]:
        return {"snapshot_id": self.snapshot_id, "position": self.position}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StreamOffset:
        try:
            return cls(int(value["snapshot_id"]), int(value["position"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValidationError(
                f"offset {value!r} is not an aioiceberg stream offset (a checkpoint of another source?)"
            ) from e


async def appended_data_files(io: FileIO, snapshot: Snapshot) -> tuple[DataFile, ...]:
    """The data files ``snapshot`` added, in path order (the order offsets count in)."""
    files = [f for f in await added_files(io, snapshot) if f.content == DataFileContent.DATA]
    return tuple(sorted(files, key=lambda f: f.file_path))


@dataclass
class _Limit:
    files: int | None = None
    rows: int | None = None


class AioIcebergStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Offsets and planning in the driver-side worker; ``read`` on executors, as the batch reader."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = SourceOptions.parse(options, extra=STREAM_READ_OPTIONS)
        self.stream = StreamOptions.parse(options)
        self.branch = self.options.ref or MAIN_BRANCH
        self.reader = AioIcebergReader(self.options, schema)  # reads a partition as a batch read does
        self._files: dict[int, tuple[DataFile, ...]] = {}  # snapshots are immutable: safe to keep
        self._metadata: TableMetadata | None = None
        self._target: int | None = None  # Trigger.AvailableNow: the head when the run started

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_files"], state["_metadata"] = {}, None  # executors need neither
        return state

    # -- offsets ----------------------------------------------------------------------

    def _load(self) -> sync.Table:
        table = self.options.load()
        self._metadata = table.metadata
        return table

    def _head(self, md: TableMetadata) -> Snapshot | None:
        head = md.snapshot_by_ref(self.branch)
        if head is None and self.branch != MAIN_BRANCH:
            raise NotFoundError(f"branch {self.branch!r} not found in {self.options.location}")
        return head

    def initialOffset(self) -> dict[str, int]:
        table = self._load()
        md = table.metadata
        head = self._head(md)
        chain = md.ancestors_of(head.snapshot_id) if head is not None else ()
        start_id, from_ts = self.stream.from_snapshot_id, self.stream.from_timestamp_ms
        if start_id is not None:
            if all(s.snapshot_id != start_id for s in chain):
                raise ValidationError(
                    f"stream-from-snapshot-id {start_id} is not in the history of branch "
                    f"{self.branch!r} of {table.location}"
                )
            return StreamOffset(start_id).to_json()
        if from_ts is not None and head is not None:
            first = next((s for s in reversed(chain) if s.timestamp_ms >= from_ts), None)
            found = StreamOffset(first.snapshot_id) if first else StreamOffset(head.snapshot_id, ALL)
            return found.to_json()
        return StreamOffset(NOTHING_READ).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.stream.max_files is not None:
            return ReadMaxFiles(self.stream.max_files)
        if self.stream.max_rows is not None:
            return ReadMaxRows(self.stream.max_rows)
        return ReadAllAvailable()

    def _limit(self, limit: ReadLimit) -> _Limit:
        """Spark passes one limit: the default, or all-available (which overrides the options)."""
        if isinstance(limit, ReadAllAvailable):
            return _Limit()
        return _Limit(
            files=limit.max_files if isinstance(limit, ReadMaxFiles) else self.stream.max_files,
            rows=limit.max_rows if isinstance(limit, ReadMaxRows) else self.stream.max_rows,
        )

    def prepareForTriggerAvailableNow(self) -> None:
        head = self._head(self._load().metadata)
        self._target = head.snapshot_id if head is not None else NOTHING_READ

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        table = self._load()
        if self._target is not None:
            head_id = self._target
        else:
            head = self._head(table.metadata)
            head_id = head.snapshot_id if head is not None else NOTHING_READ
        if head_id == NOTHING_READ:
            return start
        end, _ = self._walk(
            table, StreamOffset.from_json(start), StreamOffset(head_id, ALL), self._limit(limit)
        )
        return end.to_json()

    def commit(self, end: dict[str, int]) -> None:
        """Forget the files of snapshots read to the end."""
        offset, md = StreamOffset.from_json(end), self._metadata
        if md is None or offset.snapshot_id == NOTHING_READ:
            return
        for snap in md.ancestors_of(offset.snapshot_id):
            if snap.snapshot_id != offset.snapshot_id or offset.position == ALL:
                self._files.pop(snap.snapshot_id, None)

    # -- the walk ---------------------------------------------------------------------

    def _pending(self, md: TableMetadata, head_id: int, start: StreamOffset) -> list[tuple[Snapshot, int]]:
        """Snapshots from ``start`` to ``head_id``, oldest first, each with its files already read."""
        chain = md.ancestors_of(head_id)
        if start.snapshot_id == NOTHING_READ:
            return [(s, 0) for s in reversed(chain)]
        at = next((i for i, s in enumerate(chain) if s.snapshot_id == start.snapshot_id), None)
        if at is None:
            raise ValidationError(
                f"snapshot {start.snapshot_id}, where this stream stands, is no longer in the history of "
                f"branch {self.branch!r} of {self.options.location} (expired, or the branch was rolled "
                "back): start the query again from a new checkpoint"
            )
        newer = [(s, 0) for s in reversed(chain[:at])]
        return newer if start.position == ALL else [(chain[at], start.position), *newer]

    def _snapshot_files(self, table: sync.Table, snap: Snapshot, moved: bool) -> tuple[DataFile, ...] | None:
        """The files ``snap`` appended; () for one with no new rows to read; None to stop before
        a snapshot the stream refuses when rows before it are still to be delivered."""
        op = snap.operation
        if op is Operation.APPEND:
            files = self._files.get(snap.snapshot_id)
            if files is None:
                files = self._files[snap.snapshot_id] = default_loop.run(
                    appended_data_files(table.aio.io, snap)
                )
            return files
        if op is Operation.REPLACE:  # compaction: the same rows in new files
            return ()
        skip, option = (
            {
                Operation.DELETE: (self.stream.skip_delete, SKIP_DELETE),
                Operation.OVERWRITE: (self.stream.skip_overwrite, SKIP_OVERWRITE),
            }.get(op, (False, None))
            if op is not None
            else (False, None)
        )
        if skip:
            return ()
        if moved:
            return None
        what = f"a {op.value} snapshot" if op is not None else "a snapshot with no operation"
        hint = f"; to pass over such snapshots, set option {option!r} to 'true'" if option else ""
        raise UnsupportedError(
            f"snapshot {snap.snapshot_id} of {table.location} is {what}: a stream reads appended "
            f"rows only and cannot follow rows changed or removed{hint}"
        )

    def _walk(
        self, table: sync.Table, start: StreamOffset, end: StreamOffset, limit: _Limit
    ) -> tuple[StreamOffset, list[DataFile]]:
        """The offset a batch from ``start`` ends at (no further than ``end``) and its files."""
        taken: list[DataFile] = []
        rows = 0
        at = start
        for snap, first in self._pending(table.metadata, end.snapshot_id, start):
            if taken and limit.files is not None and len(taken) >= limit.files:
                break
            files = self._snapshot_files(table, snap, moved=at != start)
            if files is None:
                break
            last = end.position if snap.snapshot_id == end.snapshot_id and end.position != ALL else len(files)
            for i in range(first, last):
                f = files[i]
                if taken and (
                    (limit.files is not None and len(taken) >= limit.files)
                    or (limit.rows is not None and rows + f.record_count > limit.rows)
                ):
                    return StreamOffset(snap.snapshot_id, i), taken
                taken.append(f)
                rows += f.record_count
            at = StreamOffset(snap.snapshot_id, ALL if last == len(files) else last)
        return at, taken

    # -- planning and reading -----------------------------------------------------------

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = StreamOffset.from_json(start), StreamOffset.from_json(end)
        if first == last:
            return []
        table = self._load()
        _, files = self._walk(table, first, last, _Limit())
        if not files:
            return []
        opts = self.options
        scan = opts.scan(table, row_filter=opts.row_filter or "", selected_fields=tuple(self.reader.columns))
        planner, schema, props = scan.planner, scan.snapshot_schema, table.properties
        # each file's residual from its partition, as a plan gives it: files it rules out are skipped
        tasks = [
            FileScanTask(f, (), residual, planner.spec(f.spec_id), schema)
            for f in files
            if not isinstance(residual := planner.residual(f), AlwaysFalse)
        ]
        typed = TableProperties(props)
        split = opts.split_size or typed.split_target_size
        cost = opts.open_file_cost or typed.split_open_file_cost
        shared = {
            "projected": json.dumps(schema_to_json(scan.projection())),
            "table_schema": json.dumps(schema_to_json(schema)),
            "name_mapping": props.get(DEFAULT_NAME_MAPPING_PROPERTY),
        }
        return [
            InputPartition({**shared, "tasks": [json.dumps(file_scan_task_to_json(t)) for t in group]})
            for group in group_tasks(tasks, split, cost)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.reader.read(partition)


@dataclass
class AioIcebergStreamCommitMessage(AioIcebergCommitMessage):
    """A write task's files, with the epoch attempt's write id and the query id."""

    write_id: str | None = None
    query_id: str | None = None


class AioIcebergStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """An epoch through the batch writer's ``write``, ``commit`` (keyed by query and epoch) and ``abort``."""

    def __init__(self, job: WriteJob) -> None:
        self.job = job

    @classmethod
    def for_source(cls, source: DataSource, schema: StructType, overwrite: bool) -> AioIcebergStreamWriter:
        given = {str(k).lower() for k, v in source.options.items() if v}
        for key in BATCH_ONLY_WRITE_OPTIONS:
            if key in given:
                raise ValidationError(
                    f"option {key!r} is for batch writes: a stream appends each epoch (or, in complete "
                    "mode, replaces the table's rows) and keys it by query id and epoch"
                )
        batch = {k: v for k, v in source.options.items() if str(k).lower() != CHECKPOINT_OPTION}
        return cls(write_job(batch, overwrite))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AioIcebergStreamCommitMessage:
        from pyspark import TaskContext  # pyspark: optional (the spark extra)

        context = TaskContext.get()
        query_id = context.getLocalProperty(_QUERY_ID_LOCAL_PROPERTY) if context is not None else None
        written = AioIcebergWriter(self.job).write(iterator)
        return AioIcebergStreamCommitMessage(
            written.data_files, write_id=self.job.write_id, query_id=query_id
        )

    def _epoch_job(self, messages: Sequence[WriterCommitMessage | None], epoch: int) -> WriteJob | None:
        """The job of the attempt that sent ``messages``, keyed by (query, epoch); None: none reported."""
        ours = [m for m in messages if isinstance(m, AioIcebergStreamCommitMessage)]
        write_id = next((m.write_id for m in ours if m.write_id), None)
        if write_id is None:
            return None
        query_id = next((m.query_id for m in ours if m.query_id), None)
        if query_id is None:
            raise ValidationError(
                f"epoch {epoch} of a stream into {self.job.location}: Spark named no streaming query id"
            )
        return dataclasses.replace(
            self.job,
            write_id=write_id,
            idempotency_key=f"{query_id}:{epoch}",
            snapshot_properties={
                **self.job.snapshot_properties,
                QUERY_ID_PROPERTY: query_id,
                EPOCH_ID_PROPERTY: str(epoch),
            },
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        job = self._epoch_job(messages, batchId)
        if job is None:
            return  # no task ran: nothing to commit
        if not job.overwrite and not any(
            m.data_files for m in messages if isinstance(m, AioIcebergStreamCommitMessage)
        ):
            return  # an empty epoch makes no snapshot
        AioIcebergWriter(job).commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Delete the attempt's files; when no task reported, its write id is unknown here and
        whatever its tasks wrote is left for orphan removal."""
        job = self._epoch_job(messages, batchId)
        if job is not None:
            AioIcebergWriter(job).abort(messages)
