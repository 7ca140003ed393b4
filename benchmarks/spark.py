"""Spark through the aioiceberg data source vs Spark reading the same Parquet files by path.

    python benchmarks/spark.py            # 2M rows in 16 files, local FS, local[2]
    python benchmarks/spark.py --tiny     # smoke run (used by the tests)

Direct ``spark.read.parquet(files)`` is the floor: same files, Spark's own vectorized
reader, no planning or Python. Each cell is the best of ``--rounds`` runs, in one session.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

import aioiceberg.spark  # noqa: E402
from aioiceberg import sync  # noqa: E402


def best(rounds: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows, files, rounds = (20_000, 4, 1) if args.tiny else (args.rows, args.files, args.rounds)

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        schema = pa.schema([("id", pa.int64()), ("day", pa.int32()), ("value", pa.float64())])
        table = sync.connect(str(Path(tmp) / "wh")).create_table("db.bench", schema=schema)
        per = rows // files
        for f in range(files):
            ids = pa.array(range(f * per, (f + 1) * per), pa.int64())
            table.append(
                pa.table({"id": ids, "day": pa.array([f] * per, pa.int32()), "value": ids.cast(pa.float64())})
            )
        paths = [t.file.file_path for t in table.scan().plan_files()]
        selective = f"id >= {rows // 2} AND id < {rows // 2 + per // 10}"  # inside one file

        # untimed warm-up: Python worker start and imports would otherwise land in the first cell
        aioiceberg.spark.register(spark)
        spark.read.format("aioiceberg").load(table.location).count()
        spark.read.parquet(*paths).count()
        results: list[tuple[str, str, float, int]] = []
        for pushdown in (False, True):
            aioiceberg.spark.register(spark, filter_pushdown=pushdown)
            label = "aioiceberg source" + (" (pushdown)" if pushdown else "")
            secs, n = best(rounds, lambda: spark.read.format("aioiceberg").load(table.location).count())
            if not pushdown:
                results.append(("count()", label, secs, n))
            secs, n = best(
                rounds, lambda: spark.read.format("aioiceberg").load(table.location).filter(selective).count()
            )
            results.append(("selective filter", label, secs, n))
        secs, n = best(rounds, lambda: spark.read.parquet(*paths).count())
        results.append(("count()", "spark.read.parquet (floor)", secs, n))
        secs, n = best(rounds, lambda: spark.read.parquet(*paths).filter(selective).count())
        results.append(("selective filter", "spark.read.parquet (floor)", secs, n))
    spark.stop()

    print(f"{rows} rows in {files} files, local FS, local[2], best of {rounds}")
    print("| query | reader | seconds | rows |")
    print("| --- | --- | --- | --- |")
    for query, reader, secs, n in sorted(results, key=lambda r: (r[0], r[1])):
        print(f"| {query} | {reader} | {secs:.2f} | {n} |")
    floor = {q: s for q, r, s, _ in results if "floor" in r}
    for query, reader, secs, _ in results:
        if "floor" not in reader:
            print(f"{query}: {reader} is {secs / floor[query]:.1f}x the floor")


if __name__ == "__main__":
    main()
