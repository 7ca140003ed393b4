"""``read_table``: an Iceberg table as a Spark DataFrame that Spark's own Parquet reader reads.

The ``aioiceberg`` data source moves every row through Python workers, and Spark's
Python data source API cannot prune columns: a query of 2 columns of 40 still carries
all 40. Here the driver plans with aioiceberg (snapshot, filter, metrics and partition
pruning), and hands the files Spark can read exactly (``native_files``) to
``spark.read.parquet`` with field-id matching, so Spark prunes columns, pushes filters
into row groups and reads vectorized. Files on S3 go to Spark as ``s3a://`` URLs when
the session has Spark's S3A connector (``s3a.py``), with the table's storage options as
that read's per-bucket S3A settings; the sizes our footer reads saw go to Spark's file index,
so Spark does not check and list each file again (``native_files.known_files_frame``).
Files it cannot read exactly (delete files, no
field ids, identity partition values or defaults it would miss, types it does not hold,
a store it cannot reach) are read by aioiceberg through a data source that reads the
task groups planned here, and the two
parts are one DataFrame. The rows are the same either way. A table whose manifest list
counts more data files than a threshold is planned on the executors instead, the plan
kept as a DataFrame of tasks (``distributed_read``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from aioiceberg._sync import default_loop
from aioiceberg.errors import ValidationError
from aioiceberg.expressions import AlwaysTrue
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.io.resolve import S3_SCHEMES, scheme_of
from aioiceberg.spark.actions.distributed_plan import prepare_plan
from aioiceberg.spark.batch import SourceOptions, read_partition, spark_arrow_schema
from aioiceberg.spark.columns import UntranslatableFilter, spark_column_filter
from aioiceberg.spark.distributed_read import (
    PLANNING_OPTION,
    classic_session,
    planning_options,
    read_on_executors,
)
from aioiceberg.spark.native_files import (
    FIELD_ID_READ_CONF,
    known_files_frame,
    local_footers,
    native_file,
    spark_holds_exactly,
    spark_local_path,
    spark_read_schema,
    spark_s3a_url,
    store_footers,
)
from aioiceberg.spark.s3a import s3a_available, s3a_read_options
from aioiceberg.spark.task_json import group_tasks
from aioiceberg.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.scan_tasks import FileScanTask, file_scan_task_to_json
from aioiceberg.spec.schema_json import schema_to_json

__all__ = [
    "FIELD_ID_READ_CONF",
    "PLANNED_SOURCE_NAME",
    "PlannedTasksReader",
    "PlannedTasksSource",
    "read_table",
]

PLANNED_SOURCE_NAME = "aioiceberg-planned"


class _Phases:
    """Seconds per phase of one ``read_table`` call, logged at debug level (where the time
    before an action goes: loading, planning, footers, Spark's file index)."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self.last
        self.last = now

    def log(self, location: str, what: str) -> None:
        logger = logging.getLogger("aioiceberg.spark")
        if logger.isEnabledFor(logging.DEBUG):
            phases = ", ".join(f"{k} {v:.3f}s" for k, v in self.seconds.items())
            logger.debug("read_table %s: %s: %s", location, what, phases)


def _s3a_usable(spark: Any, location: str, storage_options: Mapping[str, str]) -> bool:
    """Whether files on S3 may go to Spark's reader when planning on executors (which cannot
    count them first: a table on S3 that cannot is named in a warning)."""
    if s3a_read_options(set(), storage_options) is None:
        why = "the storage options hold half an access key"
    elif not s3a_available(spark):
        why = "this session has no S3A connector (hadoop-aws; see docs/spark.md)"
    else:
        return True
    if scheme_of(location) in S3_SCHEMES:
        logging.getLogger("aioiceberg.spark").warning(
            "read_table: data files on S3 are read through aioiceberg, not Spark's Parquet reader: %s", why
        )
    return False


def _s3a_options(
    spark: Any, urls: Mapping[str, str], storage_options: Mapping[str, str]
) -> dict[str, str] | None:
    """The S3A settings of a Parquet read of ``urls``, or None (logged) when Spark cannot read them."""
    why = None
    options = None
    if not s3a_available(spark):
        why = "this session has no S3A connector (hadoop-aws; see docs/spark.md)"
    else:
        buckets = {url.removeprefix("s3a://").split("/", 1)[0] for url in urls.values()}
        options = s3a_read_options(buckets, storage_options)
        if options is None:
            why = "the storage options hold half an access key"
    if why is not None:
        logging.getLogger("aioiceberg.spark").warning(
            "read_table: %d data files on S3 are read through aioiceberg's data source, not "
            "Spark's Parquet reader: %s",
            len(urls),
            why,
        )
    return options


class PlannedTasksSource(DataSource):
    """Reads task groups planned on the driver (``read_table``'s aioiceberg part).

    Not for direct use: ``read_table`` registers it and passes the plan in options.
    """

    @classmethod
    def name(cls) -> str:
        return PLANNED_SOURCE_NAME

    def schema(self) -> StructType:
        raise ValidationError(
            f"the {PLANNED_SOURCE_NAME!r} source reads what aioiceberg.spark.read_table planned"
        )

    def reader(self, schema: StructType) -> PlannedTasksReader:
        return PlannedTasksReader(self.options, schema)


class PlannedTasksReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.plan: dict[str, Any] = json.loads(options["plan"])
        self.storage_options: dict[str, str] = json.loads(options["storage"])
        self.target = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        shared = self.plan["shared"]
        return [InputPartition({**shared, "tasks": group}) for group in self.plan["groups"]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(partition.value, self.storage_options, self.target)


def read_table(
    spark: Any, location: str, options: Mapping[str, str] | None = None, *, native: bool = True
) -> Any:
    """The table at ``location`` as a DataFrame, planned now, on this driver or, for a large
    table, on the executors (``distributed_read``).

    ``options`` are the data source's read options (``filter``, ``snapshot-id``,
    ``as-of-timestamp``, ``branch`` / ``tag``, ``split-size``, ``open-file-cost``), storage
    options, and ``distributed-planning`` (``auto``, ``true``, ``false``) with
    ``distributed-planning-threshold`` (data files by the manifest list; ``auto`` plans on
    executors at or above it). The snapshot is fixed when this is called: the DataFrame reads it
    however often it is evaluated. ``native=False`` reads every file through aioiceberg.
    Sets ``spark.sql.parquet.fieldId.read.enabled`` on the session when Spark reads files
    itself (it only affects reads whose schema carries Parquet field ids).
    """
    from pyspark.sql.pandas.types import from_arrow_schema  # pyspark: optional (the spark extra)

    clock = _Phases()
    planning, given = planning_options(options or {})
    opts = SourceOptions.parse({**given, "path": location})
    table = opts.load()
    clock("load")
    typed = TableProperties(table.properties)
    split = opts.split_size or typed.split_target_size
    cost = opts.open_file_cost or typed.split_open_file_cost
    scan = opts.scan(table, row_filter=opts.row_filter or AlwaysTrue(), split_size=split)
    schema = scan.snapshot_schema
    arrow = spark_arrow_schema(schema)
    spark_schema = from_arrow_schema(arrow, prefer_timestamp_ntz=True)

    row_filter: Any = None
    can_native = native and spark_holds_exactly(schema.as_struct)
    if can_native and opts.row_filter:
        try:
            row_filter = spark_column_filter(schema, bind_row_filter(schema, opts.row_filter))
        except UntranslatableFilter:
            can_native = False

    if planning.mode != "false" and classic_session(spark):
        prepared = prepare_plan(spark, table, scan, opts)
        clock("manifest list")
        on_executors = planning.on_executors(prepared.data_files)
        logging.getLogger("aioiceberg.spark").debug(
            "read_table %s: planning on %s (%d data files in %d manifests by the manifest list, "
            "threshold %d, %s=%s)",
            location,
            "executors" if on_executors else "the driver",
            prepared.data_files,
            prepared.data_manifests,
            planning.threshold,
            PLANNING_OPTION,
            planning.mode,
        )
        if on_executors:
            s3a = can_native and _s3a_usable(spark, table.location, opts.storage_options)
            result = read_on_executors(
                spark,
                table,
                prepared,
                schema,
                spark_schema,
                storage_options=opts.storage_options,
                native=can_native,
                s3a=s3a,
                row_filter=row_filter,
            )
            clock("plan on executors")
            clock.log(location, "planned on executors")
            return result
    tasks = list(scan.plan_files())
    clock("plan")

    native_paths: dict[str, str] = {}  # data file -> the URL Spark reads it by, in plan order
    sizes: dict[str, int] = {}  # URL -> the file's size, as its store answered our footer read
    s3a_options: dict[str, str] = {}
    if can_native:
        # a file one of whose tasks carries deletes is aioiceberg's, every split of it
        with_deletes = {t.file.file_path for t in tasks if t.delete_files}
        local: dict[str, str] = {}  # data file -> local path
        remote: dict[str, str] = {}  # data file -> s3a:// URL
        for task in tasks:
            file_path = task.file.file_path
            if file_path in with_deletes or task.file.file_format.upper() != "PARQUET":
                continue
            if (path := spark_local_path(file_path)) is not None:
                local.setdefault(file_path, path)
            elif (url := spark_s3a_url(file_path)) is not None:
                remote.setdefault(file_path, url)
        if remote:
            found = _s3a_options(spark, remote, opts.storage_options)
            if found is None:
                remote = {}
            else:
                s3a_options = found
            clock("s3a options")
        footers = dict(zip(local, local_footers(list(local.values())), strict=True))
        if remote:
            found_store = default_loop.run(store_footers(table.io, list(remote)))
            for file_path, found_footer in zip(remote, found_store, strict=True):
                if found_footer is not None:
                    footers[file_path], sizes[remote[file_path]] = found_footer
        urls = {**{f: "file://" + p for f, p in local.items()}, **remote}
        specs = {t.file.file_path: t.spec for t in tasks}
        for task in tasks:
            file_path = task.file.file_path
            footer = footers.get(file_path)
            if file_path in native_paths or footer is None:
                continue
            if native_file(schema, specs[file_path], footer):
                native_paths[file_path] = urls[file_path]
        clock("footers")

    parts: list[Any] = []
    if native_paths:
        spark.conf.set(FIELD_ID_READ_CONF, "true")
        read_schema = spark_read_schema(schema, spark_schema)
        on_s3a = any(url.startswith("s3a://") for url in native_paths.values())
        read_options = s3a_options if on_s3a else {}
        df = None
        if all(url in sizes for url in native_paths.values()):
            df = known_files_frame(
                spark, {u: sizes[u] for u in native_paths.values()}, read_schema, read_options
            )
        if df is None:
            df = spark.read.schema(read_schema).options(**read_options).parquet(*native_paths.values())
        clock("spark's relation")
        parts.append(df if row_filter is None else df.filter(row_filter))
    rest: list[FileScanTask] = [t for t in tasks if t.file.file_path not in native_paths]
    if rest:
        groups = group_tasks(rest, split, cost)
        shared = {
            "projected": json.dumps(schema_to_json(schema)),
            "table_schema": json.dumps(schema_to_json(schema)),
            "name_mapping": table.properties.get(DEFAULT_NAME_MAPPING_PROPERTY),
        }
        plan = {
            "shared": shared,
            "groups": [[json.dumps(file_scan_task_to_json(t)) for t in g] for g in groups],
        }
        spark.dataSource.register(PlannedTasksSource)
        reader = spark.read.format(PLANNED_SOURCE_NAME).schema(spark_schema)
        reader = reader.option("plan", json.dumps(plan)).option("storage", json.dumps(opts.storage_options))
        parts.append(reader.load())
    if not parts:
        return spark.createDataFrame([], spark_schema)
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    clock("aioiceberg part")
    clock.log(location, f"{len(tasks)} tasks, {len(native_paths)} files to Spark")
    return result
