"""Spark reading an Iceberg table through aioiceberg vs Spark reading the same Parquet files by path.

    python benchmarks/spark.py            # 2M rows x 40 columns in 16 files, local FS, local[2]
    python benchmarks/spark.py --tiny     # smoke run (used by the tests)

Readers, each in the same session and run:
- ``read_table``: ``aioiceberg.spark.read_table`` (the driver plans with aioiceberg, Spark's
  Parquet reader reads the files by field id); planning is inside the clock;
- the ``aioiceberg`` data source (``spark.read.format``): every row through a Python worker;
- the floor, ``spark.read.parquet(<the table's data files>)``: Spark's own vectorized
  reader, no planning, no Iceberg.

Queries: ``count()``, a selective filter (a range inside one file), and a query of 2 of
the 40 columns. Each cell is the best of ``--rounds``; results must be equal across readers.
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

COLUMNS = 40


def best(rounds: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def wide_rows(first: int, count: int, day: int) -> pa.Table:
    """``count`` rows of a 40-column table: id, day, then doubles, longs and strings."""
    ids = pa.array(range(first, first + count), pa.int64())
    columns: dict[str, pa.Array] = {"id": ids, "day": pa.array([day] * count, pa.int32())}
    for c in range(2, COLUMNS):
        if c % 3 == 0:
            columns[f"c{c:02d}"] = pa.array([(i * c) % 1000 for i in range(first, first + count)], pa.int64())
        elif c % 3 == 1:
            columns[f"c{c:02d}"] = pa.array(
                [f"v{(i + c) % 97}" for i in range(first, first + count)], pa.string()
            )
        else:
            columns[f"c{c:02d}"] = ids.cast(pa.float64())
    return pa.table(columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows, files, rounds = (20_000, 4, 1) if args.tiny else (args.rows, args.files, args.rounds)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

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
        per = rows // files
        first = wide_rows(0, per, 0)
        table = sync.connect(str(Path(tmp) / "wh")).create_table("db.bench", schema=first.schema)
        table.append(first)
        for f in range(1, files):
            table.append(wide_rows(f * per, per, f))
        paths = [t.file.file_path for t in table.scan().plan_files()]
        lo, hi = rows // 2, rows // 2 + per // 10  # inside one file
        selective = f"id >= {lo} AND id < {hi}"

        def two_columns(df: Any) -> Any:
            return tuple(df.select(F.sum("id"), F.sum("c02")).collect()[0])

        queries: dict[str, Callable[[Callable[[], Any]], Any]] = {
            "count()": lambda make: make().count(),
            "selective filter": lambda make: make().filter(selective).count(),
            "2 of 40 columns": lambda make: two_columns(make()),
        }
        readers: dict[str, Callable[[], Any]] = {
            "spark.read.parquet (floor)": lambda: spark.read.parquet(*paths),
            "read_table": lambda: aioiceberg.spark.read_table(spark, table.location),
            "aioiceberg source": lambda: spark.read.format("aioiceberg").load(table.location),
        }
        aioiceberg.spark.register(spark)
        for make in readers.values():  # untimed warm-up: JVM code paths, Python workers, imports
            make().count()
        results: list[tuple[str, str, float, Any]] = []
        for query, run in queries.items():
            for reader, make in readers.items():

                def once(
                    run: Callable[[Callable[[], Any]], Any] = run, make: Callable[[], Any] = make
                ) -> Any:
                    return run(make)

                secs, answer = best(rounds, once)
                results.append((query, reader, secs, answer))
            if query == "selective filter":  # the filter given to read_table: planning prunes files too
                secs, answer = best(
                    rounds,
                    lambda: aioiceberg.spark.read_table(spark, table.location, {"filter": selective}).count(),
                )
                results.append((query, "read_table, filter option", secs, answer))
    spark.stop()

    print(f"{rows} rows x {COLUMNS} columns in {files} files, local FS, local[2], best of {rounds}")
    print("| query | reader | seconds | result | vs floor |")
    print("| --- | --- | --- | --- | --- |")
    floor = {q: (s, a) for q, r, s, a in results if "floor" in r}
    for query, reader, secs, answer in results:
        f_secs, f_answer = floor[query]
        if answer != f_answer:
            raise SystemExit(f"{reader} answered {answer!r} to {query}, the floor {f_answer!r}")
        print(f"| {query} | {reader} | {secs:.2f} | {answer} | {secs / f_secs:.2f}x the floor |")


if __name__ == "__main__":
    main()
