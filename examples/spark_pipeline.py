"""A PySpark ETL pipeline on an aioiceberg table: idempotent appends, a partition overwrite, reads.

A local SparkSession whose Python workers run this interpreter (so they can import aioiceberg,
whatever ``python3`` is first on PATH), the ``aioiceberg`` data source registered on it, and a
table made with the blocking API. Each daily load is written with an idempotency key, so a
re-run of the same load commits nothing; a correction replaces exactly the partitions it holds;
``read_table`` lets Spark's own Parquet reader read what aioiceberg planned. Needs Java 17+ and
``pip install 'aioiceberg[spark]'``. Run: ``python examples/spark_pipeline.py``.
"""

import os
import sys
import tempfile

import pyarrow as pa
from pyspark.sql import SparkSession

import aioiceberg.spark
from aioiceberg import sync

os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers: this interpreter
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")


def load(location: str, day: int, rows: int) -> None:
    """One day's load; the key makes a re-run of the same day a no-op."""
    df = spark.createDataFrame(
        [(day * 1000 + i, ("eu", "us", "ap")[i % 3], float(i)) for i in range(rows)],
        "id long, region string, v double",
    )
    df.write.format("aioiceberg").mode("append").option("idempotency-key", f"load-day-{day}").save(location)


with tempfile.TemporaryDirectory() as warehouse:
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("v", pa.float64())])
    table = sync.connect(warehouse).create_table("db.events", schema=schema, partition_by=["region"])
    location = table.location  # a table's directory (or s3://...): all the data source needs
    aioiceberg.spark.register(spark)
    df = spark.read.format("aioiceberg").load(location)  # the table as it is at each action
    for day in (1, 2, 2):  # day 2 twice: the re-run is in the table's history, nothing committed
        load(location, day, rows=30)
    assert df.count() == 60 and len(table.refresh().history()) == 2

    df = spark.createDataFrame([(9000, "eu", -1.0)], "id long, region string, v double")  # a late row
    df.write.format("aioiceberg").mode("append").save(location)
    fix = spark.createDataFrame([(9001, "eu", 1.0)], "id long, region string, v double")
    fix.write.format("aioiceberg").mode("overwrite").option("overwrite-mode", "dynamic").save(location)
    df = aioiceberg.spark.read_table(spark, location)  # Spark's own Parquet reader, by field id
    counts = {r["region"]: r["count"] for r in df.groupBy("region").count().collect()}
    print("rows by region after the eu correction:", counts)
    assert counts == {"eu": 1, "us": 20, "ap": 20}
    print("snapshots:", [s.operation and s.operation.value for s in table.refresh().history()])
spark.stop()
