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
``filter`` read option (an Iceberg filter string) prunes explicitly either way.
Options, write modes and streaming guarantees: docs/spark.md.
"""

from __future__ import annotations

from typing import Any

from aioiceberg.spark.task_json import group_tasks, plan_partitions, read_task_json, read_tasks_json

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

    ``filter_pushdown`` sets ``spark.sql.python.filterPushdown.enabled``. ``None`` (the
    default) enables it only when this Spark scopes a pushed-down read plan to its own
    query: builds that cache the plan on the DataFrame's relation reuse a filtered plan
    for a later unfiltered query on the same DataFrame and return too few rows, so there
    filters stay in Spark (prune explicitly with the ``filter`` read option instead).
    ``True`` enables it anyway: then build a fresh DataFrame per filtered query.

    The first call on a SparkContext runs one tiny job to check that Spark's Python
    workers can import aioiceberg (they run ``PYSPARK_PYTHON``, not necessarily this
    Python); ``aioiceberg.errors.SparkSetupError`` says which Python they run and how to
    fix it.
    """
    from aioiceberg.spark.source import FILTER_PUSHDOWN_CONF, AioIcebergDataSource, AioIcebergScanOnlySource
    from aioiceberg.spark.workers import check_workers

    check_workers(spark)  # before anything is registered: a session that cannot read is left as it was

    enable = filter_pushdown if filter_pushdown is not None else not caches_read_plan_per_relation(spark)
    # Spark refuses a reader with pushFilters while pushdown is off: register the matching one
    spark.dataSource.register(AioIcebergDataSource if enable else AioIcebergScanOnlySource)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true" if enable else "false")


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
        from aioiceberg.extras import require

        require("pyspark", "spark", f"aioiceberg.spark.{name}")
    if name == "read_table":
        from aioiceberg.spark.dataframe import read_table

        return read_table
    if name == "AioIcebergDataSource":
        from aioiceberg.spark.source import AioIcebergDataSource

        return AioIcebergDataSource
    raise AttributeError(name)
