"""The batch halves of the ``aioiceberg`` data source: options, reader, writer and commit.

The data source (``source.py``) hands Spark these; the streaming reader and writer
(``streaming.py``) run on them too, so they sit below both.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import ReadOnlyTableError, ValidationError
from aioiceberg.expressions import AlwaysTrue, and_, parse
from aioiceberg.expressions.arrow_filter import field_paths, to_arrow_expression
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.io.resolve import S3_SCHEMES, resolve_io, scheme_of
from aioiceberg.io.s3_client import S3_OPTION_ALIASES
from aioiceberg.rowlevel.touched_files import sql_filter
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.filters import translate_filter
from aioiceberg.spark.task_json import group_tasks, read_tasks_json
from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.metadata import MAIN_BRANCH
from aioiceberg.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.scan_tasks import content_file_from_json, content_file_to_json, file_scan_task_to_json
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import (
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
)
from aioiceberg.write import LocationProvider, write_data_files

__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "SOURCE_NAME",
    "WRITE_ID_PROPERTY",
    "AioIcebergCommitMessage",
    "AioIcebergPushdownReader",
    "AioIcebergReader",
    "AioIcebergWriter",
    "SourceOptions",
    "WriteJob",
    "read_partition",
    "spark_arrow_schema",
    "write_job",
]

SOURCE_NAME = "aioiceberg"
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# snapshot summary key naming the Spark job that wrote a snapshot (abort checks it)
WRITE_ID_PROPERTY = "aioiceberg.spark.write-id"
SPLIT_SIZE_PROPERTY = TableProperties.split_target_size.key
OPEN_FILE_COST_PROPERTY = TableProperties.split_open_file_cost.key

_READ_OPTIONS = frozenset(
    {"snapshot-id", "as-of-timestamp", "branch", "tag", "split-size", "open-file-cost", "filter", "columns"}
)
_WRITE_OPTIONS = frozenset({"overwrite-mode", "overwrite-filter", "idempotency-key"})
SNAPSHOT_PROPERTY_PREFIX = "snapshot-property."
# snapshot summary key of a write's idempotency key: a job whose key is in the history is a no-op
IDEMPOTENCY_KEY_PROPERTY = "aioiceberg.spark.idempotency-key"
# storage options: aioiceberg's dotted ones, the S3 aliases; other undotted keys only for
# fsspec stores (whose arguments they are); s3a.<key>: S3A settings (read_table)
_STORAGE_PREFIXES = ("s3.", "s3a.", "dynamodb.", "local.", "client.", "gcs.", "adls.")
_S3_ALIASES = frozenset(a for names in S3_OPTION_ALIASES.values() for a in names)


def _check_option(key: str, location: str, writing: bool, extra: frozenset[str] = frozenset()) -> None:
    if key in ("path", "lock") or key in extra or (key.startswith(SNAPSHOT_PROPERTY_PREFIX) and writing):
        return
    if key in _READ_OPTIONS:
        if writing and key not in ("branch",):
            raise ValidationError(f"option {key!r} is a read option; writes go to the current state")
        return
    if key in _WRITE_OPTIONS or key.startswith(SNAPSHOT_PROPERTY_PREFIX):
        if not writing:
            raise ValidationError(f"option {key!r} is a write option; it means nothing to a read")
        return
    if key.startswith(_STORAGE_PREFIXES) or key in _S3_ALIASES:
        return
    if "." not in key and scheme_of(location) not in ("file", *S3_SCHEMES):
        return  # an argument of the fsspec filesystem for this scheme
    raise ValidationError(
        f"unknown option {key!r}: the aioiceberg source knows "
        f"{', '.join(sorted(_READ_OPTIONS | _WRITE_OPTIONS | extra | {'lock'}))}, "
        f"'{SNAPSHOT_PROPERTY_PREFIX}<name>', and storage options (s3.*, dynamodb.*, ...)"
    )


@dataclass(frozen=True)
class SourceOptions:
    """A read's or write's options, parsed once; the streaming source parses its own with them."""

    location: str
    storage_options: dict[str, str]
    lock: str | None = None
    snapshot_id: int | None = None
    ref: str | None = None
    as_of: int | None = None
    split_size: int | None = None
    open_file_cost: int | None = None
    row_filter: str | None = None
    columns: tuple[str, ...] | None = None  # the read's columns (Spark tells a Python source none)
    overwrite_mode: str = "static"
    overwrite_filter: str | None = None
    idempotency_key: str | None = None
    snapshot_properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(
        cls, options: Mapping[str, str], *, writing: bool = False, extra: frozenset[str] = frozenset()
    ) -> SourceOptions:
        """``extra``: more keys to accept and keep out of the storage options (a stream's own)."""
        opts = {str(k).lower(): v for k, v in options.items()}
        location = opts.get("path")
        if not location:
            raise ValidationError("the aioiceberg source needs a table location: .load(location)")
        for key in opts:
            _check_option(key, location, writing, extra)
        mode = (opts.get("overwrite-mode") or "static").lower()
        if mode not in ("static", "dynamic"):
            raise ValidationError(f"option 'overwrite-mode' must be 'static' or 'dynamic', not {mode!r}")
        if mode == "dynamic" and opts.get("overwrite-filter"):
            raise ValidationError("give 'overwrite-filter' or overwrite-mode 'dynamic', not both")
        branch, tag = opts.get("branch"), opts.get("tag")
        if branch and tag:
            raise ValidationError("give at most one of the 'branch' and 'tag' options")

        def number(key: str) -> int | None:
            value = opts.get(key)
            try:
                return int(value) if value not in (None, "") else None
            except ValueError as e:
                raise ValidationError(f"option {key!r} must be an integer, got {value!r}") from e

        return cls(
            location=location,
            storage_options={
                k: v
                for k, v in opts.items()
                if k not in _READ_OPTIONS | _WRITE_OPTIONS | extra | {"path", "lock"}
                and not k.startswith(SNAPSHOT_PROPERTY_PREFIX)
            },
            lock=opts.get("lock") or None,
            snapshot_id=number("snapshot-id"),
            ref=branch or tag or None,
            as_of=number("as-of-timestamp"),
            split_size=number("split-size"),
            open_file_cost=number("open-file-cost"),
            row_filter=opts.get("filter") or None,
            columns=_column_list(opts.get("columns")),
            overwrite_mode=mode,
            overwrite_filter=opts.get("overwrite-filter") or None,
            idempotency_key=opts.get("idempotency-key") or None,
            snapshot_properties={
                k[len(SNAPSHOT_PROPERTY_PREFIX) :]: v
                for k, v in options.items()
                if str(k).lower().startswith(SNAPSHOT_PROPERTY_PREFIX)
            },
        )

    def load(self) -> sync.Table:
        return sync.load_table(self.location, self.storage_options or None, self.lock)

    def scan(self, table: sync.Table, **kwargs: Any) -> sync.TableScan:
        return table.scan(snapshot_id=self.snapshot_id, ref=self.ref, as_of=self.as_of, **kwargs)


def _column_list(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise ValidationError(f"option 'columns' must name distinct columns, comma-separated: {text!r}")
    return names


def _spark_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark can hold for ``t``: no fixed-size binary, nanoseconds or 64-bit offsets."""
    if isinstance(t, pa.BaseExtensionType):  # uuid (a built-in extension) included
        return _spark_type(t.storage_type)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz is not None else None)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_spark_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_spark_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_spark_type(t.key_type)), t.item_field.with_type(_spark_type(t.item_type))
        )
    return t


def spark_arrow_schema(schema: Schema, columns: Sequence[str] | None = None) -> pa.Schema:
    """The Arrow form of an Iceberg schema in types Spark accepts (no field ids), of only
    ``columns`` (top-level names, in that order) when given."""
    arrow = schema_to_arrow(schema, include_field_ids=False)
    fields = [f.with_type(_spark_type(f.type)) for f in arrow]
    if columns is None:
        return pa.schema(fields)
    by_name = {f.name: f for f in fields}
    if unknown := [c for c in columns if c not in by_name]:
        raise ValidationError(
            f"option 'columns' names {', '.join(map(repr, unknown))}, not top-level columns of the table "
            f"({', '.join(by_name)})"
        )
    return pa.schema([by_name[c] for c in columns])


def read_partition(
    value: Mapping[str, Any], storage_options: Mapping[str, str], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of one planned partition (``tasks``, ``projected``, ``table_schema``,
    ``name_mapping``), as Arrow batches of the Spark schema ``target``."""
    mapping = value.get("name_mapping")
    batches = read_tasks_json(
        value["tasks"],
        storage_options=storage_options,
        projected_schema=schema_from_json(json.loads(value["projected"])),
        table_schema=schema_from_json(json.loads(value["table_schema"])),
        name_mapping=mapping if mapping else None,
    )
    for batch in batches:
        yield pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in target], schema=target)


class AioIcebergReader(DataSourceReader):
    """Plans in the planning worker (``partitions``) and reads task groups on executors (``read``).

    Pushed filters live on this reader only, never on the data source, and every plan
    is made from them afresh: a reader built for a filtered query cannot leak its
    filters into another query's plan through shared state.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.columns: list[str] = list(schema.fieldNames())
        self.arrow_schema: pa.Schema = to_arrow_schema(schema, timezone="UTC")
        self.pushed: list[dict[str, Any]] = []  # expression JSON of the filters planning uses
        self._table: sync.Table | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_table"] = None  # a loaded table holds clients bound to this process's loop
        return state

    def _loaded(self) -> sync.Table:
        if self._table is None:
            self._table = self.options.load()
        return self._table

    def _row_filter(self) -> Any:
        parts: list[Any] = [expression_from_json(e) for e in self.pushed]
        if self.options.row_filter:
            parts.append(parse(self.options.row_filter))
        return and_(*parts) if parts else AlwaysTrue()

    def partitions(self) -> list[InputPartition]:
        table = self._loaded()
        props = table.properties
        typed = TableProperties(props)
        split = self.options.split_size or typed.split_target_size
        cost = self.options.open_file_cost or typed.split_open_file_cost
        scan = self.options.scan(
            table, row_filter=self._row_filter(), selected_fields=tuple(self.columns), split_size=split
        )
        tasks = list(scan.plan_files())
        shared = {
            "projected": json.dumps(schema_to_json(scan.projection())),
            "table_schema": json.dumps(schema_to_json(scan.snapshot_schema)),
            "name_mapping": props.get(DEFAULT_NAME_MAPPING_PROPERTY),
        }
        return [
            InputPartition({**shared, "tasks": [json.dumps(file_scan_task_to_json(t)) for t in group]})
            for group in group_tasks(tasks, split, cost)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        value = partition.value
        if not value or not value.get("tasks"):
            return
        yield from read_partition(value, self.options.storage_options, self.arrow_schema)


class AioIcebergPushdownReader(AioIcebergReader):
    """The reader when filter pushdown is on (Spark rejects a ``pushFilters`` reader when it is off)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        """Claim the filters Iceberg answers exactly; yield the rest back to Spark."""
        schema = self.options.scan(self._loaded()).snapshot_schema
        self.pushed = []
        for f in filters:
            found = translate_filter(f, schema, case_sensitive=True)
            if found is not None:
                self.pushed.append(expression_to_json(found.expression))
            if found is None or not found.exact:
                yield f


@dataclass
class AioIcebergCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one write task produced: the content-file JSON of its data files."""

    data_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WriteJob:
    """What every task of one write needs, sent to executors; a streaming sink builds one per epoch."""

    location: str
    storage_options: dict[str, str]
    lock: str | None
    schema_json: str
    spec_json: str
    properties: dict[str, str]
    write_id: str
    overwrite: bool
    overwrite_mode: str = "static"
    overwrite_filter: str | None = None
    idempotency_key: str | None = None
    snapshot_properties: dict[str, str] = field(default_factory=dict)
    done_before: bool = False  # the idempotency key is in the table's history: write nothing
    branch: str = MAIN_BRANCH

    def schema(self) -> Schema:
        return schema_from_json(json.loads(self.schema_json))

    def spec(self) -> Any:
        return partition_spec_from_json(json.loads(self.spec_json))


def _abort_marker(job: WriteJob) -> str:
    """Written by an aborted job before it removes its files; an orphan, removed with them by
    orphan removal later."""
    data_path = LocationProvider(job.location, job.properties).data_path
    return f"{data_path}/aioiceberg-aborted-{job.write_id}"


def _written_before(table: sync.Table, key: str | None) -> bool:
    """Whether a snapshot of the table's history carries the write's idempotency key."""
    if key is None:
        return False
    for snapshot in table.history():
        summary = snapshot.summary
        if summary is not None and summary.properties.get(IDEMPOTENCY_KEY_PROPERTY) == key:
            return True
    return False


def write_job(options: Mapping[str, str], overwrite: bool) -> WriteJob:
    """What every task of a write of ``options`` gets; checked here, before any task runs."""
    opts = SourceOptions.parse(options, writing=True)
    table = opts.load()
    if table.read_only:
        raise ReadOnlyTableError(table.read_only_reason or f"{opts.location} opened read-only")
    if not overwrite and (opts.overwrite_filter or opts.overwrite_mode != "static"):
        raise ValidationError("'overwrite-mode' and 'overwrite-filter' go with mode('overwrite')")
    if opts.overwrite_filter:
        sql_filter(table.schema(), opts.overwrite_filter)  # a bad filter fails before any task runs
    if overwrite and opts.ref is not None and opts.ref != MAIN_BRANCH:
        raise ValidationError(
            f"option 'branch' ({opts.ref!r}) goes with mode('append'): overwrites commit to main only"
        )
    metadata = table.metadata
    return WriteJob(
        location=table.location,
        storage_options=opts.storage_options,
        lock=opts.lock,
        schema_json=json.dumps(schema_to_json(table.schema())),
        spec_json=json.dumps(partition_spec_to_json(table.spec(), metadata.format_version)),
        properties=dict(table.properties),
        write_id=uuid.uuid4().hex,
        overwrite=overwrite,
        overwrite_mode=opts.overwrite_mode,
        overwrite_filter=opts.overwrite_filter,
        idempotency_key=opts.idempotency_key,
        snapshot_properties=opts.snapshot_properties,
        done_before=_written_before(table, opts.idempotency_key),
        branch=opts.ref or MAIN_BRANCH,
    )


def _check_rows(batch: pa.RecordBatch, expr: Any, names: Any, filter_text: str) -> None:
    """Every row an overwrite by filter writes must match the filter (else it would be lost
    to the next overwrite of the same filter, or resurrect rows it replaced)."""
    matches = to_arrow_expression(expr, names)
    outside = pa.Table.from_batches([batch]).filter(~matches | matches.is_null())
    if outside.num_rows:
        raise ValidationError(
            f"{outside.num_rows} written row(s) do not match overwrite-filter {filter_text!r}, e.g. "
            f"{outside.slice(0, 1).to_pylist()[0]}"
        )


async def _pulled(batches: Iterator[pa.RecordBatch]) -> AsyncIterator[pa.RecordBatch]:
    """Spark's input batches, each awaited in a thread. Spark's iterator blocks until its next
    batch arrives (from an upstream stage or UDF that may take minutes): called on the event
    loop, it would hold up the encoding and uploads of the batches before it, so a task's
    finished files would reach storage only when more input came, or at its end."""
    end = object()
    while True:
        batch = await anyio.to_thread.run_sync(next, batches, end)
        if batch is end:
            return
        yield batch


class AioIcebergWriter(DataSourceArrowWriter):
    """Executors write data files; ``commit`` makes one snapshot; ``abort`` cleans up."""

    def __init__(self, job: WriteJob) -> None:
        self.job = job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AioIcebergCommitMessage:
        from pyspark import TaskContext  # pyspark: optional (the spark extra)

        context = TaskContext.get()
        # Spark's task attempt id, unique in the application (Java Iceberg's choice too): every
        # attempt of a task writes files of its own. Named by partition, a retry rewrote the
        # files of the attempt before it, and a speculative or zombie attempt could overwrite
        # (or, failing, delete) the files of the attempt whose message was committed.
        task_id = context.taskAttemptId() if context is not None else 0
        job = self.job
        if job.done_before:
            return AioIcebergCommitMessage([])
        schema, spec = job.schema(), job.spec()
        io = resolve_io(job.location, job.storage_options or None, runtime=default_runtime())
        batches: Iterator[pa.RecordBatch] = iterator
        if job.overwrite_filter:
            expr, names, text = (
                sql_filter(schema, job.overwrite_filter),
                field_paths(schema),
                job.overwrite_filter,
            )

            def checked() -> Iterator[pa.RecordBatch]:
                for batch in iterator:
                    _check_rows(batch, expr, names, text)
                    yield batch

            batches = checked()
        files = default_loop.run(
            write_data_files(
                io,
                schema,
                spec,
                _pulled(batches),
                LocationProvider(job.location, job.properties, write_id=job.write_id),
                job.properties,
                cpu_workers=1,  # an executor's parallelism is Spark's tasks
                task_id=task_id,
            )
        )
        # A task that finished after its job was aborted (a straggler Spark did not stop in
        # time) takes its own files away: abort wrote the marker before it listed the job's
        # files, so either abort saw these files or this task sees the marker.
        marker = _abort_marker(job)
        if default_loop.run(io.exists(marker)):
            default_loop.run(io.delete_many([f.file_path for f in files]))
            return AioIcebergCommitMessage([])
        return AioIcebergCommitMessage([json.dumps(content_file_to_json(f, spec, schema)) for f in files])

    def _files(self, messages: Sequence[WriterCommitMessage | None]) -> list[Any]:
        schema, spec = self.job.schema(), self.job.spec()
        return [
            content_file_from_json(json.loads(text), {spec.spec_id: spec}, schema)
            for m in messages
            if isinstance(m, AioIcebergCommitMessage)
            for text in m.data_files
        ]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        job = self.job
        if job.done_before:
            return
        files = self._files(messages)
        table = sync.load_table(job.location, job.storage_options or None, job.lock)
        if _written_before(table, job.idempotency_key):  # a run with the same key landed meanwhile
            default_loop.run(
                resolve_io(job.location, job.storage_options or None, runtime=default_runtime()).delete_many(
                    [f.file_path for f in files]
                )
            )
            return
        props = {**job.snapshot_properties, WRITE_ID_PROPERTY: job.write_id}
        if job.idempotency_key:
            props[IDEMPOTENCY_KEY_PROPERTY] = job.idempotency_key
        with table.transaction() as tx:
            if job.overwrite and job.overwrite_mode == "dynamic":
                tx.replace_partitions(files, props)
            elif job.overwrite:
                tx.overwrite_data_files(files, job.overwrite_filter or AlwaysTrue(), props)
            else:
                tx.append_data_files(files, props, owns_files=True, branch=job.branch)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the job's files: those reported, and any other file named with the job's
        write id (a task that finished after the failure never reports its files)."""
        job = self.job
        reported = [f.file_path for f in self._files(messages)]
        try:
            table = sync.load_table(job.location, job.storage_options or None, job.lock)
        except Exception:
            return  # cannot tell whether the commit landed: leave the files (orphans are harmless)
        for snap in table.snapshots():
            summary = snap.summary
            if summary is not None and summary.properties.get(WRITE_ID_PROPERTY) == job.write_id:
                return  # the commit landed after all: the files belong to the table now
        io = resolve_io(job.location, job.storage_options or None, runtime=default_runtime())
        data_path = LocationProvider(job.location, job.properties).data_path
        marker = _abort_marker(job)
        default_loop.run(io.write(marker, b"aborted"))  # first: tasks still running see it (see write)

        async def job_files() -> list[str]:
            return [
                o.location
                async for o in io.list(f"{data_path}/")
                if job.write_id in o.location and o.location != marker
            ]

        leftovers = set(reported) | set(default_loop.run(job_files()))
        default_loop.run(io.delete_many(sorted(leftovers)))
