"""The ``aioiceberg`` PySpark data source: Spark reads and writes Iceberg tables through aioiceberg.

Spark calls each method in a Python worker process, never the driver's own: ``schema``,
``pushFilters`` and ``partitions`` in a planning worker, ``read`` and ``write`` on
executors, ``commit`` / ``abort`` in yet another worker. So nothing here keeps state
between calls except what travels pickled in the reader / writer and in the partitions
and commit messages: plain strings and dicts (task JSON, content-file JSON, schema JSON).

Reading: the planning worker plans with the blocking API, packs the file scan tasks
into partitions of about ``split-size`` bytes, and each executor reads its tasks
(deletes, schema evolution and residual filters applied) as Arrow batches.

Writing: executors write Parquet data files and return their content-file JSON; the
job commits once, atomically (an append snapshot; for overwrite a delete of every row
then the append, in one transaction); an aborted job deletes the files its tasks wrote, unless the snapshot
carrying the job's write id made it into the table.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from aioiceberg.spark.batch import (
    FILTER_PUSHDOWN_CONF,
    SOURCE_NAME,
    WRITE_ID_PROPERTY,
    AioIcebergCommitMessage,
    AioIcebergPushdownReader,
    AioIcebergReader,
    AioIcebergWriter,
    SourceOptions,
    WriteJob,
    read_partition,
    spark_arrow_schema,
    write_job,
)
from aioiceberg.spark.stream_options import STREAM_READ_OPTIONS
from aioiceberg.spark.streaming import AioIcebergStreamReader, AioIcebergStreamWriter

__all__ = [
    "FILTER_PUSHDOWN_CONF",
    "SOURCE_NAME",
    "WRITE_ID_PROPERTY",
    "AioIcebergCommitMessage",
    "AioIcebergDataSource",
    "AioIcebergPushdownReader",
    "AioIcebergReader",
    "AioIcebergScanOnlySource",
    "AioIcebergWriter",
    "SourceOptions",
    "WriteJob",
    "read_partition",
    "spark_arrow_schema",
]


class AioIcebergDataSource(DataSource):
    """``spark.read.format("aioiceberg").load(location)`` / ``df.write.format("aioiceberg")``.

    Read options: ``snapshot-id``, ``as-of-timestamp`` (ms), ``branch`` or ``tag``,
    ``split-size`` and ``open-file-cost`` (bytes; default the table's
    ``read.split.target-size`` / ``read.split.open-file-cost``), ``filter`` (an Iceberg
    filter string: rows outside it are never read, whatever Spark pushes down),
    ``columns`` (comma-separated top-level columns: the DataFrame has only these, and
    only these are read; Spark's Python source API tells a source no query's columns);
    any other option is a storage option (``s3.endpoint``, ``s3.region``, ...).
    """

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(self.options)

    def schema(self) -> StructType:
        opts = SourceOptions.parse(self.options, extra=STREAM_READ_OPTIONS)  # a stream's too
        scan = opts.scan(opts.load())
        arrow = spark_arrow_schema(scan.snapshot_schema, opts.columns)
        return from_arrow_schema(arrow, prefer_timestamp_ntz=True)

    def reader(self, schema: StructType) -> AioIcebergReader:
        return AioIcebergPushdownReader(self._options(), schema)

    def writer(self, schema: StructType, overwrite: bool) -> AioIcebergWriter:
        return AioIcebergWriter(write_job(self.options, overwrite))

    # the streaming classes on use: a batch job needs none of pyspark's streaming API
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return AioIcebergStreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return AioIcebergStreamWriter.for_source(self, schema, overwrite)


class AioIcebergScanOnlySource(AioIcebergDataSource):
    """The source registered when filter pushdown is off: its reader has no ``pushFilters``."""

    def reader(self, schema: StructType) -> AioIcebergReader:
        return AioIcebergReader(self._options(), schema)
