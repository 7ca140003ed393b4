"""Compaction of one table of many small files: in one process (``Table.rewrite_data_files``),
on Spark executors (``aioiceberg.spark.actions.rewrite_data_files``: local[2], then a
standalone cluster of two one-core workers) and with Java Iceberg's ``rewrite_data_files``
procedure (Spark 4.1, Iceberg 1.12, local[2]), bin-pack and sort, beside a floor.

    python benchmarks/compaction.py                       # 2,000 files of 500 rows, local disk
    python benchmarks/compaction.py --files 500 --store moto --no-java
    python benchmarks/compaction.py --tiny                # smoke run (used by the tests): 40
                                                          # files, no cluster, no Java

The table (8 identity partitions, zstd) is written once by aioiceberg's writer as ``--files``
files of ``--rows-per-file`` rows; every run compacts a copy of its own: a table that
appends the same data files (its own metadata, the files shared: a ``replace`` snapshot
deletes nothing). Java reaches its copies through a Hadoop catalog on the same warehouse
(our warehouse layout is a Hadoop catalog's), so it runs on the local store only.

Each run's clock covers the compaction only (planning, rewriting, commit); Spark and Java
start outside it, and each engine first compacts (untimed, both strategies) a copy of a
twentieth of the files, so first-call costs, the JVM's compilation and the Python workers'
imports are behind it (not in --tiny). After each run the table is read back with
aioiceberg's reader: row count and an order-free checksum (the sum of polars' row hashes)
must equal the source's. The floor reads every file and writes each partition's rows once
(sorted for the sort run) with pyarrow on the runtime's CPU threads, in one process,
through the same store: no table work at all.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import io as bytes_io
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from aioiceberg import sync  # noqa: E402
from aioiceberg._sync import default_loop  # noqa: E402
from aioiceberg.io.base import FileIO  # noqa: E402
from aioiceberg.spec.manifest import DataFile  # noqa: E402
from aioiceberg.write.location_provider import LocationProvider  # noqa: E402
from aioiceberg.write.parquet_writer import write_data_files  # noqa: E402

PARTITIONS = 8
NS = "db"
JAVA_CATALOG = "jcompact"
PROPERTIES = {"write.parquet.compression-codec": "zstd"}
SORT_ORDER = "id"  # the sort run's order (Java: the same text)
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("part", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)
STRATEGIES = ("binpack", "sort")


@dataclass
class Outcome:
    """One run: its wall time and the table's data files before and after."""

    seconds: float
    before: int
    after: int
    load: str


def file_rows(index: int, rows: int) -> pa.Table:
    """The rows of file ``index`` (one partition each; ids interleaved across files, so a
    sort run really reorders)."""
    ids = pa.array(range(index, index + rows * 1_000_003, 1_000_003), pa.int64())
    n = len(ids)
    part = f"p{index % PARTITIONS}"
    return pa.table(
        {
            "id": ids,
            "part": pa.array([part] * n),
            "value": pa.array([(index * 31 + i) * 0.25 for i in range(n)], pa.float64()),
            "name": pa.array([f"n{(index + i) % 977}" for i in range(n)]),
            "ts": pa.array(
                [1_700_000_000_000_000 + (index * 7 + i) * 1_000_000 for i in range(n)], pa.int64()
            ).cast(pa.timestamp("us")),
        },
        schema=SCHEMA,
    )


async def write_source(table: sync.Table, files: int, rows: int) -> list[DataFile]:
    """``files`` data files, one per call of aioiceberg's writer (each its own task id, so
    names never collide), 16 at once."""
    md = table.metadata
    provider = LocationProvider(md.location, md.properties)
    io = table.io
    gate = asyncio.Semaphore(16)

    async def one(index: int) -> list[DataFile]:
        async with gate:
            return await write_data_files(
                io, md.schema(), md.spec(), file_rows(index, rows), provider, md.properties, task_id=index
            )

    written = await asyncio.gather(*(one(i) for i in range(files)))
    return [f for group in written for f in group]


def checksum(table: pa.Table) -> tuple[int, int]:
    """Row count and the wrapped sum of polars' row hashes (fixed seed): equal for equal rows
    in any order."""
    frame = pl.from_arrow(table.select(SCHEMA.names))
    assert isinstance(frame, pl.DataFrame)
    hashes = frame.hash_rows(seed=7)
    return frame.height, int(hashes.cast(pl.UInt64).sum() or 0) % 2**64


def data_files(table: sync.Table) -> int:
    snapshot = table.current_snapshot()
    total = snapshot.summary.get("total-data-files") if snapshot and snapshot.summary else None
    return int(total or 0)


def check_rows(table: sync.Table, expected: tuple[int, int], name: str) -> None:
    found = checksum(table.scan().to_arrow())
    if found != expected:
        raise SystemExit(
            f"{name}: rows differ after compaction: {found} (count, checksum), expected {expected}"
        )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


class Tables:
    """Copies of the source table: same data files, metadata of their own."""

    def __init__(self, catalog: sync.Catalog, files: list[DataFile]) -> None:
        self.catalog = catalog
        self.files = files

    def copy(self, name: str, files: int | None = None) -> sync.Table:
        """A table of the source's data files (its first ``files`` of them)."""
        table = self.catalog.create_table(
            f"{NS}.{name}", schema=SCHEMA, partition_by=["part"], properties=PROPERTIES
        )
        table.append_data_files(self.files[:files])
        return table.refresh()


def timed_run(name: str, table: sync.Table, run: Callable[[], Any], expected: tuple[int, int]) -> Outcome:
    before = data_files(table)
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    after_table = table.refresh()
    after = data_files(after_table)
    check_rows(after_table, expected, name)
    outcome = Outcome(seconds, before, after, load())
    print(
        f"{name}: {seconds:.2f} s, {before} -> {after} files, load {outcome.load}",
        file=sys.stderr,
        flush=True,
    )
    return outcome


async def floor(io: FileIO, files: Sequence[DataFile], out: str, sort: bool) -> int:
    """Every file read, each partition's rows written once as one zstd Parquet file (sorted
    by ``SORT_ORDER`` for the sort run): the I/O and encoding a compaction cannot avoid.
    Files are decoded and partitions encoded on threads (pyarrow releases the GIL), as many
    as the runtime's CPU workers."""
    gate = asyncio.Semaphore(32)
    cpu = asyncio.Semaphore(max(1, io.runtime.write_cpu_workers))

    async def read(f: DataFile) -> tuple[str, pa.Table]:
        async with gate:
            raw = await io.read(f.file_path)
        async with cpu:
            rows = await asyncio.to_thread(pq.read_table, pa.BufferReader(raw), use_threads=False)
        return str(f.partition), rows

    def encode(pieces: list[pa.Table]) -> bytes:
        rows = pa.concat_tables(pieces)
        if sort:
            rows = rows.sort_by(SORT_ORDER)
        sink = bytes_io.BytesIO()
        pq.write_table(rows, sink, compression="zstd")
        return sink.getvalue()

    async def write(n: int, pieces: list[pa.Table]) -> None:
        async with cpu:
            raw = await asyncio.to_thread(encode, pieces)
        await io.write(f"{out}/part-{n:03d}.parquet", raw)

    parts: dict[str, list[pa.Table]] = defaultdict(list)
    for key, rows in await asyncio.gather(*(read(f) for f in files)):
        parts[key].append(rows)
    await asyncio.gather(*(write(n, pieces) for n, pieces in enumerate(parts.values())))
    return len(parts)


def start_java(conf: dict[str, str], box: dict[str, Any]) -> None:
    from servers.java_spark import start_into  # the Java peer: optional (tests/java/setup.sh)

    start_into(conf, box)


def _import_action(x: int) -> int:
    importlib.import_module("aioiceberg.spark.actions.rewrite_data_files")
    return x


def spark_warm_up(spark: Any) -> None:
    """Python workers started and the action's modules imported on every executor."""
    spark.sparkContext.parallelize(range(8), 8).map(_import_action).collect()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=2000, help="small data files in the table")
    parser.add_argument("--rows-per-file", type=int, default=500)
    parser.add_argument("--store", choices=("local", "moto"), default="local")
    parser.add_argument("--tiny", action="store_true", help="a smoke run (for the suite)")
    parser.add_argument("--no-java", action="store_true", help="leave out Java Iceberg's procedure")
    parser.add_argument("--no-cluster", action="store_true", help="leave out the standalone cluster")
    args = parser.parse_args()
    files, rows_per_file = (40, 50) if args.tiny else (args.files, args.rows_per_file)
    with_java = not (args.tiny or args.no_java) and args.store == "local"
    with_cluster = not (args.tiny or args.no_cluster)
    quick_jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

    # pyspark: optional (the spark extra); imported here so that --help works without it
    from servers.spark_cluster import SparkCluster, cluster_session, session_builder

    import aioiceberg.spark
    from aioiceberg.spark.actions import rewrite_data_files

    with tempfile.TemporaryDirectory(prefix="compaction-bench-") as tmp:
        scratch = Path(tmp)
        moto: Any = None
        storage: dict[str, str] | None = None
        if args.store == "moto":
            # the suite's moto helpers: only for --store moto
            from servers.backends import create_bucket
            from servers.moto import MotoServer
            from servers.plugin import s3_storage_options

            moto = MotoServer().start()
            storage = s3_storage_options(moto.url)
            root = f"s3://{asyncio.run(create_bucket(moto.url))}/wh"
        else:
            root = str(scratch / "wh")
            (scratch / "wh").mkdir()
        java_box: dict[str, Any] = {}
        java_thread = None
        if with_java:  # the peer's JVM starts while the table is written
            from servers.java_spark import catalog_conf  # the Java peer: only when it runs

            conf = catalog_conf(JAVA_CATALOG, type="hadoop", warehouse=root, cache_enabled="false")
            java_thread = threading.Thread(target=start_java, args=(conf, java_box))
            java_thread.start()
        try:
            catalog = sync.connect(root, storage_options=storage)
            catalog.create_namespace(NS)
            source = catalog.create_table(
                f"{NS}.source", schema=SCHEMA, partition_by=["part"], properties=PROPERTIES
            )
            started = time.perf_counter()
            written = default_loop.run(write_source(source, files, rows_per_file))
            source.append_data_files(written)
            source = source.refresh()
            print(
                f"{len(written):,} files of {rows_per_file} rows written "
                f"in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            expected = checksum(source.scan().to_arrow())
            tables = Tables(catalog, written)
            results: dict[tuple[str, str], Outcome] = {}
            sort_args: dict[str, dict[str, Any]] = {
                "binpack": {},
                "sort": {"strategy": "sort", "sort_order": SORT_ORDER},
            }

            for strategy in STRATEGIES:
                out = f"{root}/floor-{strategy}"
                start = time.perf_counter()
                made = default_loop.run(floor(source.io, written, out, strategy == "sort"))
                results[("floor", strategy)] = Outcome(
                    time.perf_counter() - start, len(written), made, load()
                )
                print(f"floor {strategy}: {results[('floor', strategy)].seconds:.2f} s", file=sys.stderr)

            # one engine's runs: an untimed warm-up (both strategies on a copy of a twentieth
            # of the files, at least 3 a partition: first-call costs, JIT, worker imports)
            # unless tiny, then one timed run per strategy on a full copy;
            # ``make(name, table, strategy)`` is the run
            Make = Callable[[str, sync.Table, str], Callable[[], Any]]

            def engine_runs(key: str, make: Make) -> None:
                slug = key.replace("[", "").replace("]", "")
                if not args.tiny:
                    for strategy in STRATEGIES:
                        name = f"warm_{slug}_{strategy}"
                        make(name, tables.copy(name, max(len(written) // 20, 3 * PARTITIONS)), strategy)()
                for strategy in STRATEGIES:
                    name = f"{slug}_{strategy}"
                    t = tables.copy(name)
                    results[(key, strategy)] = timed_run(
                        f"{key} {strategy}", t, make(name, t, strategy), expected
                    )

            engine_runs(
                "one",
                lambda _, t, s: functools.partial(t.rewrite_data_files, **sort_args[s]),
            )

            def spark_runs(spark: Any, key: str) -> None:
                aioiceberg.spark.register(spark)
                spark_warm_up(spark)
                engine_runs(
                    key,
                    lambda _, t, s: functools.partial(
                        rewrite_data_files, spark, t.location, storage_options=storage, **sort_args[s]
                    ),
                )

            conf = {"spark.ui.showConsoleProgress": "false"}
            if args.tiny:
                conf["spark.driver.extraJavaOptions"] = quick_jvm
            spark = session_builder("local[2]", "compaction-bench", conf).getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            try:
                spark_runs(spark, "local[2]")
            finally:
                spark.stop()

            if with_cluster:
                with SparkCluster(scratch / "cluster", workers=2, cores=1, memory="1g") as cluster:
                    session = cluster_session(cluster, "compaction-bench-cluster")
                    try:
                        spark_runs(session, "cluster")
                    finally:
                        session.stop()

            if java_thread is not None:
                java_thread.join()
                if "error" in java_box:
                    raise SystemExit(f"the Java peer did not start: {java_box['error']}")
                java = java_box["java"]

                def java_run(name: str, _: sync.Table, strategy: str) -> Callable[[], Any]:
                    extra = ""
                    if strategy == "sort":
                        extra = f", strategy => 'sort', sort_order => '{SORT_ORDER}'"
                    statement = (
                        f"CALL {JAVA_CATALOG}.system.rewrite_data_files(table => '{NS}.{name}'{extra})"
                    )
                    return functools.partial(java.sql, statement)

                engine_runs("java", java_run)
        finally:
            if java_thread is not None:
                java_thread.join()
            if "java" in java_box:
                java_box["java"].close()
            if moto is not None:
                moto.stop()

    report(results, files, rows_per_file, args.store)


RUNS = (
    ("floor", "floor: read every file, write each partition once (pyarrow, one process)"),
    ("one", "Table.rewrite_data_files, one process"),
    ("local[2]", "spark.actions.rewrite_data_files, Spark local[2]"),
    ("cluster", "spark.actions.rewrite_data_files, standalone cluster (2 workers x 1 core)"),
    ("java", "Java Iceberg rewrite_data_files procedure, Spark local[2]"),
)


def report(results: dict[tuple[str, str], Outcome], files: int, rows_per_file: int, store: str) -> None:
    store_name = "local disk" if store == "local" else "moto S3"
    print(
        f"\nCompaction of {files:,} files x {rows_per_file} rows ({files * rows_per_file:,} rows, "
        f"{PARTITIONS} partitions), {store_name}, {os.cpu_count()} cores"
    )
    print("| run | strategy | seconds | files before -> after | x one process | x Java | load 1/5 min |")
    print("|---|---|---|---|---|---|---|")
    for strategy in STRATEGIES:
        one = results[("one", strategy)].seconds
        java = results.get(("java", strategy))
        for key, name in RUNS:
            o = results.get((key, strategy))
            if o is None:
                continue
            vs_java = f"{o.seconds / java.seconds:.2f}" if java is not None else "-"
            print(
                f"| {name} | {strategy} | {o.seconds:.2f} | {o.before} -> {o.after} | "
                f"{o.seconds / one:.2f} | {vs_java} | {o.load} |"
            )
    print("Ratios: seconds / seconds of that strategy's one-process run, and of Java's run.")


if __name__ == "__main__":
    main()
