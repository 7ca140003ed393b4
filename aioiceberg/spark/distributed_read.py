"""``read_table`` planned on executors: the plan stays a Spark DataFrame of tasks.

Above a size (``distributed-planning-threshold`` data files, counted from the manifest
list alone) ``read_table`` plans as ``plan_files`` does (``actions.distributed_plan``:
executors read and prune the manifests) and never turns the tasks into Python objects on
the driver. With Spark's Parquet reader in play, the same executors then read each
candidate file's footer and mark the files Spark reads exactly (the driver path's rule,
``native_files``); that DataFrame is checkpointed on the executors (planned once), the
marked files' URLs are collected into the driver's JVM (never into Python) and handed to
``spark.read.parquet``, and the other tasks are read by aioiceberg's reader on the
executors, straight from the DataFrame (``mapInArrow``). Without Spark's reader nothing
runs before an action: each action plans on the executors and reads what it planned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import ValidationError
from aioiceberg.expressions.serde import expression_from_json
from aioiceberg.read import read_tasks
from aioiceberg.spark.actions.distributed_plan import PreparedPlan, plan_frame
from aioiceberg.spark.actions.reach import TableStore
from aioiceberg.spark.native_files import (
    FIELD_ID_READ_CONF,
    local_footers,
    native_file,
    spark_local_path,
    spark_read_schema,
    spark_s3a_url,
    store_footers,
)
from aioiceberg.spark.s3a import s3a_read_options
from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY, name_mapping_from_json
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask, content_file_from_json
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import (
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
)

__all__ = [
    "DEFAULT_PLANNING_THRESHOLD",
    "PLANNING_OPTION",
    "THRESHOLD_OPTION",
    "URL_COLUMN",
    "Planning",
    "ReadContext",
    "classic_session",
    "mark_native",
    "planning_options",
    "read_on_executors",
    "read_task_rows",
    "task_of_row",
]

PLANNING_OPTION = "distributed-planning"  # auto | true | false
THRESHOLD_OPTION = "distributed-planning-threshold"  # data files, by the manifest list
# where planning on executors began to pay for read_table on local[2] (docs/spark.md)
DEFAULT_PLANNING_THRESHOLD = 20_000
URL_COLUMN = "spark_url"  # the marked task DataFrame's: the URL Spark reads the file by
_MODES = ("auto", "true", "false")
_DELETE_CONTENT = {1: "position-deletes", 2: "equality-deletes"}


@dataclass(frozen=True)
class Planning:
    """Where ``read_table`` plans: ``mode`` auto (by ``threshold``), true (executors), false (driver)."""

    mode: str = "auto"
    threshold: int = DEFAULT_PLANNING_THRESHOLD

    def on_executors(self, data_files: int) -> bool:
        return self.mode == "true" or (self.mode == "auto" and data_files >= self.threshold)


def planning_options(options: Mapping[str, str]) -> tuple[Planning, dict[str, str]]:
    """A read's planning options and its other options."""
    rest: dict[str, str] = {}
    mode, threshold = "auto", DEFAULT_PLANNING_THRESHOLD
    for key, value in options.items():
        name = str(key).lower()
        if name == PLANNING_OPTION:
            mode = str(value).strip().lower()
            if mode not in _MODES:
                raise ValidationError(
                    f"option {PLANNING_OPTION!r} must be auto, true or false, not {value!r}"
                )
        elif name == THRESHOLD_OPTION:
            try:
                threshold = int(value)
            except ValueError:
                threshold = -1
            if threshold < 0:
                raise ValidationError(
                    f"option {THRESHOLD_OPTION!r} must be a number of data files (>= 0), not {value!r}"
                )
        else:
            rest[key] = value
    return Planning(mode, threshold), rest


def classic_session(spark: Any) -> bool:
    """Whether the session has a SparkContext (planning on executors needs one: not Spark Connect)."""
    try:
        spark.sparkContext  # noqa: B018 - raises on Spark Connect
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class ReadContext:
    """What every executor task of a distributed read gets (broadcast)."""

    store: TableStore
    schema: str  # the snapshot's schema JSON
    specs: dict[int, str]  # partition spec JSON by id
    name_mapping: str | None
    s3a: bool  # files on S3 may go to Spark's reader (it has S3A and the options suit it)

    def parsed(self) -> tuple[Schema, dict[int, PartitionSpec]]:
        schema = schema_from_json(json.loads(self.schema))
        return schema, {i: partition_spec_from_json(json.loads(s)) for i, s in self.specs.items()}


def _rows(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    found = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(found) if found else None


def mark_native(ctx: ReadContext, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: one planning partition's tasks with :data:`URL_COLUMN`, the URL Spark
    reads the file by on one task of each file Spark's reader returns exactly as aioiceberg
    would (its other splits dropped: Spark reads it whole), null on the tasks aioiceberg reads.

    A partition holds whole manifests (``plan_frame``: one share each), so every task of a
    file is here: a file one of whose tasks carries deletes stays aioiceberg's, every split.
    """
    tasks = _rows(batches)
    if tasks is None:
        return
    paths: list[str] = tasks.column("file_path").to_pylist()
    formats: list[str] = tasks.column("file_format").to_pylist()
    spec_ids: list[int] = tasks.column("spec_id").to_pylist()
    deletes: list[int] = pc.list_value_length(tasks.column("delete_files")).to_pylist()
    with_deletes = {p for p, n in zip(paths, deletes, strict=True) if n}
    local: dict[str, str] = {}
    remote: dict[str, str] = {}
    for path, file_format in zip(paths, formats, strict=True):
        if path in with_deletes or file_format.upper() != "PARQUET":
            continue
        if (found := spark_local_path(path)) is not None:
            local.setdefault(path, found)
        elif ctx.s3a and (url := spark_s3a_url(path)) is not None:
            remote.setdefault(path, url)
    footers = dict(zip(local, local_footers(list(local.values())), strict=True))
    if remote:
        in_store = default_loop.run(store_footers(ctx.store.open(), list(remote)))
        for path, footer in zip(remote, in_store, strict=True):
            footers[path] = footer[0] if footer is not None else None
    urls = {**{f: "file://" + p for f, p in local.items()}, **remote}
    schema, specs = ctx.parsed()
    spec_of = dict(zip(paths, spec_ids, strict=True))
    native = {
        path: urls[path]
        for path, footer in footers.items()
        if footer is not None and native_file(schema, specs[spec_of[path]], footer)
    }
    keep: list[bool] = []
    marks: list[str | None] = []
    seen: set[str] = set()
    for path in paths:
        url = native.get(path)
        if url is None:
            keep.append(True)
            marks.append(None)
        elif path in seen:  # a further split of a file Spark reads whole
            keep.append(False)
        else:
            seen.add(path)
            keep.append(True)
            marks.append(url)
    out = tasks.filter(pa.array(keep)).append_column(URL_COLUMN, pa.array(marks, pa.string()))
    yield from out.to_batches()


def task_of_row(row: Mapping[str, Any], schema: Schema, specs: Mapping[int, PartitionSpec]) -> FileScanTask:
    """A task row (``TASK_SCHEMA``'s columns) as the ``FileScanTask`` it was planned as.

    Delete files carry no partition in a row: a reader needs none (position deletes name
    their data file, equality deletes were matched when planning).
    """
    spec_id = int(row["spec_id"])
    spec = specs[spec_id]
    data = content_file_from_json(
        {
            "content": "data",
            "file-path": row["file_path"],
            "file-format": row["file_format"],
            "spec-id": spec_id,
            "partition": json.loads(row["partition"]),
            "record-count": row["record_count"],
            "file-size-in-bytes": row["file_size_in_bytes"],
            "first-row-id": row["first_row_id"],
        },
        specs,
        schema,
    )
    deletes: list[DataFile] = []
    for d in row["delete_files"]:
        obj = {
            "content": _DELETE_CONTENT[int(d["content"])],
            "file-path": d["file_path"],
            "file-format": d["file_format"],
            "spec-id": spec_id,
            "record-count": d["record_count"],
            "file-size-in-bytes": d["file_size_in_bytes"],
            "referenced-data-file": d["referenced_data_file"],
            "content-offset": d["content_offset"],
            "content-size-in-bytes": d["content_size_in_bytes"],
            "equality-ids": d["equality_ids"],
        }
        deletes.append(content_file_from_json({k: v for k, v in obj.items() if v is not None}, specs, schema))
    residual = expression_from_json(json.loads(row["residual"]), schema, what="task residual")
    return FileScanTask(data, tuple(deletes), residual, spec, schema, row["start"] or 0, row["length"])


def read_task_rows(
    ctx: ReadContext, target: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: the rows of the tasks in ``batches`` (task rows; those with a
    :data:`URL_COLUMN` are Spark's and skipped), read by aioiceberg (deletes and residuals
    applied), as batches of the Spark schema ``target``."""
    tasks = _rows(batches)
    if tasks is None:
        return
    rows = tasks.to_pylist()
    schema, specs = ctx.parsed()
    planned = [task_of_row(r, schema, specs) for r in rows if r.get(URL_COLUMN) is None]
    if not planned:
        return
    io = ctx.store.open()
    mapping = name_mapping_from_json(ctx.name_mapping) if ctx.name_mapping else None

    def read() -> Any:
        return read_tasks(io, planned, schema, table_schema=schema, name_mapping=mapping)

    for batch in default_loop.iterate(read):
        yield pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in target], schema=target)


def read_on_executors(
    spark: Any,
    table: sync.Table,
    prepared: PreparedPlan,
    schema: Schema,
    spark_schema: StructType,
    *,
    storage_options: Mapping[str, str],
    native: bool,
    s3a: bool,
    row_filter: Any = None,
) -> Any:
    """The DataFrame of ``read_table`` when planning on executors (see the module's doc).

    ``native``: Spark's reader may read files (marked on the executors; the DataFrame of
    tasks is checkpointed there and the marked URLs collected into the JVM now);
    ``row_filter``: the Spark expression of the read's filter, for Spark's part.
    """
    ctx = ReadContext(
        store=TableStore(table.location, dict(storage_options)),
        schema=json.dumps(schema_to_json(schema)),
        specs={s.spec_id: json.dumps(partition_spec_to_json(s)) for s in table.metadata.partition_specs},
        name_mapping=table.properties.get(DEFAULT_NAME_MAPPING_PROPERTY),
        s3a=s3a,
    )
    shared = spark.sparkContext.broadcast(ctx)
    target = to_arrow_schema(spark_schema, timezone="UTC")

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from read_task_rows(shared.value, target, batches)

    tasks = plan_frame(spark, prepared)
    if not native or prepared.plan is None:
        return tasks.mapInArrow(read, spark_schema)

    def mark(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from mark_native(shared.value, batches)

    marked_schema = StructType([*tasks.schema.fields, StructField(URL_COLUMN, StringType())])
    marked = tasks.mapInArrow(mark, marked_schema).localCheckpoint(eager=True)
    parts: list[Any] = []
    spark_urls = marked.where(F.col(URL_COLUMN).isNotNull()).select(URL_COLUMN)
    jvm = spark.sparkContext._jvm
    urls = getattr(spark_urls._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING()).collectAsList()
    if not urls.isEmpty():
        read_options: dict[str, str] = {}
        if s3a:
            bucket = F.regexp_extract(F.col(URL_COLUMN), r"^s3a://([^/]+)/", 1).alias("bucket")
            on_s3 = spark_urls.where(F.col(URL_COLUMN).startswith("s3a://")).select(bucket).distinct()
            buckets = {str(r[0]) for r in on_s3.collect()}  # a few bucket names
            if buckets:
                read_options = s3a_read_options(buckets, storage_options) or {}
        spark.conf.set(FIELD_ID_READ_CONF, "true")
        reader = spark.read.schema(spark_read_schema(schema, spark_schema)).options(**read_options)
        files = DataFrame(reader._jreader.parquet(jvm.PythonUtils.toSeq(urls)), spark)
        parts.append(files if row_filter is None else files.filter(row_filter))
    parts.append(marked.where(F.col(URL_COLUMN).isNull()).mapInArrow(read, spark_schema))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result
