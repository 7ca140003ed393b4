"""PySpark integration: the ``aioiceberg`` data source and task helpers for Spark drivers.

    import aioiceberg.spark
    aioiceberg.spark.register(spark)
    df = spark.read.format("aioiceberg").load("s3://bucket/warehouse/db/events")
    df = aioiceberg.spark.read_table(spark, location)   # planned here, read by Spark's Parquet reader
    df.write.format("aioiceberg").mode("append").save("s3://bucket/warehouse/db/events")
    spark.readStream.format("aioiceberg").load(location)   # appended files, snapshot by snapshot
    stream.writeStream.format("aioiceberg").option("checkpointLocation", ck).start(location)

Filter pushdown needs ``spark.sql.python.filterPushdown.enabled=true`` (off by default
in Spark); ``register`` turns it on where Spark keeps pushed plans per query (see
``register``). Without it Spark reads every file and filters rows itself; the
``filter`` read option (an Iceberg filter string) prunes explicitly either way, and the
``columns`` read option is the only way to read fewer columns (Spark tells a Python
source no query's columns).
Options, write modes and streaming guarantees: docs/spark.md.
"""

from __future__ import annotations

from typing import Any

from aioiceberg.extras import require
from aioiceberg.spark.task_json import group_tasks, plan_partitions, read_task_json, read_tasks_json
from aioiceberg.spark.workers import check_workers

__all__ = [
    "AioIcebergDataSource",
    "caches_read_plan_per_relation",
    "group_tasks",
    "plan_partitions",
    "read_table",
    "read_task_json",
    "read_tasks_json",
    "register",
]


def register(spark: Any, filter_pushdown: bool | None = None) -> None:
    """Register the ``aioiceberg`` data source on a SparkSession.

    ``filter_pushdown``: whether Spark hands this source its filters. ``None`` (the
    default) pushes only when this Spark scopes a pushed-down read plan to its own query:
    builds that cache the plan on the DataFrame's relation (4.1 to 4.3 at least) reuse a
    filtered plan for a later unfiltered query on the same DataFrame and return too few
    rows, so there filters stay in Spark (prune explicitly with the ``filter`` read option
    instead). ``True`` pushes anyway: then build a fresh DataFrame per filtered query.
    Pushing sets the session's ``spark.sql.python.filterPushdown.enabled`` to true, which
    every Python data source of the session sees (their own ``pushFilters`` run, with the
    same caveat); not pushing leaves that setting as it was.

    The first call on a SparkContext runs one tiny job to check that Spark's Python
    workers can import aioiceberg (they run ``PYSPARK_PYTHON``, not necessarily this
    Python); ``aioiceberg.errors.SparkSetupError`` says which Python they run and how to
    fix it.
    """
    # pyspark: optional (the spark extra)
    from aioiceberg.spark.source import FILTER_PUSHDOWN_CONF, AioIcebergDataSource, AioIcebergScanOnlySource

    check_workers(spark)  # before anything is registered: a session that cannot read is left as it was

    enable = filter_pushdown if filter_pushdown is not None else not caches_read_plan_per_relation(spark)
    # Spark refuses a reader with pushFilters while pushdown is off: register the matching one
    spark.dataSource.register(AioIcebergDataSource if enable else AioIcebergScanOnlySource)
    if enable:  # a session (SQL) conf: other sessions of the application keep theirs
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")


def caches_read_plan_per_relation(spark: Any) -> bool:
    """Whether this Spark keeps one read plan per relation (``PythonDataSourceV2.setReadInfo``)."""
    try:
        cls = spark._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
        )
        return any(m.getName() == "setReadInfo" for m in cls.getMethods())
    except Exception:
        return True  # cannot tell (e.g. Spark Connect): assume the unsafe kind


def __getattr__(name: str) -> Any:
    if name in ("read_table", "AioIcebergDataSource"):
        require("pyspark", "spark", f"aioiceberg.spark.{name}")
    if name == "read_table":
        from aioiceberg.spark.dataframe import read_table  # pyspark: optional (the spark extra)

        return read_table
    if name == "AioIcebergDataSource":
        from aioiceberg.spark.source import AioIcebergDataSource  # pyspark: optional (the spark extra)

        return AioIcebergDataSource
    raise AttributeError(name)
