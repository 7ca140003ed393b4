"""``read_table``: an Iceberg table as a Spark DataFrame that Spark's own Parquet reader reads.

The ``aioiceberg`` data source moves every row through Python workers, and Spark's
Python data source API cannot prune columns: a query of 2 columns of 40 still carries
all 40. Here the driver plans with aioiceberg (snapshot, filter, metrics and partition
pruning), and hands the files Spark can read exactly (``native_files``) to
``spark.read.parquet`` with field-id matching, so Spark prunes columns, pushes filters
into row groups and reads vectorized. Files it cannot read exactly (delete files, no
field ids, identity partition values or defaults it would miss, types it does not hold,
a store it cannot reach) are read by aioiceberg through a data source that reads the
task groups planned here, and the two
parts are one DataFrame. The rows are the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from aioiceberg.errors import ValidationError
from aioiceberg.expressions import AlwaysTrue
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.io.local import local_path
from aioiceberg.io.resolve import scheme_of
from aioiceberg.spark.batch import SourceOptions, read_partition, spark_arrow_schema
from aioiceberg.spark.columns import UntranslatableFilter, spark_column_filter
from aioiceberg.spark.native_files import native_file, spark_holds_exactly, spark_read_schema
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

FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
PLANNED_SOURCE_NAME = "aioiceberg-planned"
_AWKWARD_CHARS = frozenset("*?[]{}\\:")  # Spark globs its paths; Hadoop refuses ':' in them
_FOOTER_THREADS = 8


def _local_path(file_path: str) -> str | None:
    """The local file system path of a data file Spark can be handed, or None."""
    if scheme_of(file_path) != "file":
        return None
    try:
        path = local_path(file_path)
    except ValueError:
        return None
    return None if _AWKWARD_CHARS.intersection(path) else path


def _footer_schema(path: str) -> pa.Schema | None:
    try:
        return pq.read_schema(path)
    except Exception:  # unreadable here: aioiceberg's reader reports it properly
        return None


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
    """The table at ``location`` as a DataFrame, planned now, on this driver.

    ``options`` are the data source's read options (``filter``, ``snapshot-id``,
    ``as-of-timestamp``, ``branch`` / ``tag``, ``split-size``, ``open-file-cost``) and
    storage options. The snapshot is fixed when this is called: the DataFrame reads it
    however often it is evaluated. ``native=False`` reads every file through aioiceberg.
    Sets ``spark.sql.parquet.fieldId.read.enabled`` on the session when Spark reads files
    itself (it only affects reads whose schema carries Parquet field ids).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    opts = SourceOptions.parse({**(options or {}), "path": location})
    table = opts.load()
    typed = TableProperties(table.properties)
    split = opts.split_size or typed.split_target_size
    cost = opts.open_file_cost or typed.split_open_file_cost
    scan = opts.scan(table, row_filter=opts.row_filter or AlwaysTrue(), split_size=split)
    schema = scan.snapshot_schema
    arrow = spark_arrow_schema(schema)
    spark_schema = from_arrow_schema(arrow, prefer_timestamp_ntz=True)
    tasks = list(scan.plan_files())

    row_filter: Any = None
    can_native = native and spark_holds_exactly(schema.as_struct)
    if can_native and opts.row_filter:
        try:
            row_filter = spark_column_filter(schema, bind_row_filter(schema, opts.row_filter))
        except UntranslatableFilter:
            can_native = False

    native_paths: dict[str, str] = {}  # data file -> local path, in plan order
    if can_native:
        candidates: dict[str, str] = {}
        for task in tasks:
            local = _local_path(task.file.file_path)
            if local is not None and not task.delete_files and task.file.file_format.upper() == "PARQUET":
                candidates.setdefault(task.file.file_path, local)
        specs = {t.file.file_path: t.spec for t in tasks}
        paths = list(candidates.items())
        if len(paths) <= _FOOTER_THREADS:  # a few local footers: threads cost more than they save
            footers = [_footer_schema(local) for _, local in paths]
        else:
            with ThreadPoolExecutor(_FOOTER_THREADS) as pool:
                footers = list(pool.map(_footer_schema, [local for _, local in paths]))
        for (file_path, local), footer in zip(paths, footers, strict=True):
            if footer is not None and native_file(schema, specs[file_path], footer):
                native_paths[file_path] = local

    parts: list[Any] = []
    if native_paths:
        spark.conf.set(FIELD_ID_READ_CONF, "true")
        df = spark.read.schema(spark_read_schema(schema, spark_schema)).parquet(
            *("file://" + local for local in native_paths.values())
        )
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
    return result
