"""The Spark benchmark runs end to end in its tiny mode (no timing assertions): one table on
moto S3 read by Spark's Parquet reader over s3a://, ``read_table`` and the data source, and
appended through the data source. The tiny mode leaves out the Java peer (its JVM start would
double the run); the full run has it."""

from __future__ import annotations

import pytest
from benchmark_runs import run_tiny, table_lines


@pytest.mark.timeout(480)  # Spark's start and S3A's first use: 68 s at load 6-10, 201 s at 20+
def test_spark_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    out = run_tiny("spark.py", timeout=420)
    readers = {line.split(" | ")[1] for line in table_lines(out)}
    assert {"spark.read.parquet (floor)", "read_table", "aioiceberg source (append)"} <= readers
    assert "Java Iceberg: left out of --tiny" in out
