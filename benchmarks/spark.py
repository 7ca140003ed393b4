"""Spark reading and writing one Iceberg table on S3: aioiceberg beside Apache Iceberg's Java
runtime and beside Spark's own Parquet reader on the same files.

    python benchmarks/spark.py --rows 3000000    # the issue's size: s3proxy, median of 3
    python benchmarks/spark.py                   # 500k rows x 24 columns in 8 files
    python benchmarks/spark.py --count-requests  # + one pass through a proxy counting requests
    python benchmarks/spark.py --s3a input.stream.type=classic   # an S3A setting for the reads
    python benchmarks/spark.py --store moto      # reads on moto; --store local: the local disk
    python benchmarks/spark.py --tiny            # smoke run (used by the tests): moto, no Java peer,
                                                 # the all-columns query only

Stores (benchmarks/s3_rig.py): the table is written on moto (started here), because our
commits need conditional writes, which s3proxy ignores; for ``--store s3proxy`` (the default)
it is then copied by PUTs to s3proxy (filesystem backend, a multithreaded Java server that
keeps connections alive; moto serves one request at a time at 2-3 ms of CPU each and closes
every connection), which both readers read. nginx (benchmarks/nginx_store.py) is no option:
S3A's LIST probes get 404 there. Writes (both sides) go to moto. The store's own floor is
printed: a plain parallel GET of every data file.

Readers of the one table (``db.bench``, written by aioiceberg):
- ``spark.read.parquet`` over the table's data files as ``s3a://`` (the floor: Spark's own
  vectorized reader, no planning, no Iceberg);
- ``read_table`` (aioiceberg plans on the driver, Spark's Parquet reader reads the files as
  ``s3a://`` by field id); planning is inside the clock;
- the ``aioiceberg`` data source (``spark.read.format``): every row through a Python worker;
- Java Iceberg 1.12 (``spark.table``-style SQL in its own Spark 4.1 session, another process
  and another Spark version than ours): its JdbcCatalog on a SQLite file of its own, the table
  registered there from our metadata file, S3FileIO on the same endpoint.

Queries: every column (``count(*)`` and a sum over each of the 24 columns: strings by length,
so every byte is decoded), one column, and a selective range inside one file. Writes: the same
DataFrame (Parquet files on local disk, read by each Spark) appended to an empty table of the
same schema and properties, through our data source and through Java's ``INSERT INTO``.
Each cell is the median of ``--runs``; answers must be equal across readers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from servers.jvm import QUICK_JVM  # noqa: E402

import aioiceberg.spark  # noqa: E402
from aioiceberg import sync  # noqa: E402
from aioiceberg.spark.s3a import s3a_available, s3a_jars, s3a_location, s3a_read_options  # noqa: E402
from benchmarks.s3_rig import CountingProxy, Counts, S3Proxy, copy_bucket, s3_client  # noqa: E402

COLUMNS = 24
S3A_SETUP = ROOT / "tests" / "spark_s3a" / "setup.sh"
S3A_JARS = ROOT / ".spark-jars"
PROPERTIES = {"write.parquet.compression-codec": "zstd"}
JAVA_CATALOG = "jbench"  # reads, on the read store
JAVA_WRITES = "jwrite"  # writes, on the write store (moto: our commits need conditional writes)


@dataclass
class Rig:
    """Where the table lives: written through ``write`` (moto, or the local disk), read through
    ``read`` (the same, or s3proxy serving a copy of the bucket, or a counting proxy in front)."""

    name: str
    root: str
    write: dict[str, str] | None = None
    read: dict[str, str] | None = None
    mirror: Callable[[], None] | None = None  # copies the written bucket to the read store
    counter: CountingProxy | None = None


@dataclass
class Pick:
    """What of the run to do: queries and readers by name (all when empty), the writes, the
    breakdown of read_table's time before the action, extra read_table readers with other S3A
    settings (name, settings), run interleaved with the rest."""

    queries: set[str] = field(default_factory=set)
    readers: set[str] | None = None
    writes: bool = True
    breakdown: bool = False
    ab: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    gap: float = 0.0


def parse_ab(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME:KEY=VALUE[,KEY=VALUE]`` -> (NAME, {"s3a.KEY": VALUE})."""
    name, _, settings = spec.partition(":")
    pairs = (kv.partition("=") for kv in settings.split(",") if kv)
    return name, {"s3a." + k: v for k, _, v in pairs}


class PhaseLog(logging.Handler):
    """Collects read_table's debug line of seconds per phase."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Progress:
    """Where the run is, on stderr, timed from its start (the phases are slow on a loaded machine)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.1f}s] {message}", file=sys.stderr, flush=True)


def median(runs: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def wide_rows(first: int, count: int) -> pa.Table:
    """``count`` rows of a 24-column table: id, day, then doubles, longs and strings."""
    ids = np.arange(first, first + count, dtype=np.int64)
    words = pa.array([f"v{k}" for k in range(97)], pa.string())
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids),
        "day": pa.array((ids // 100_000).astype(np.int32)),
    }
    for c in range(2, COLUMNS):
        if c % 3 == 0:
            columns[f"c{c:02d}"] = pa.array((ids * c) % 1000)
        elif c % 3 == 1:
            codes = pa.array(((ids + c) % 97).astype(np.int32))
            columns[f"c{c:02d}"] = pa.DictionaryArray.from_arrays(codes, words).cast(pa.string())
        else:  # whole numbers: sums are exact in any order
            columns[f"c{c:02d}"] = pa.array(ids.astype(np.float64))
    return pa.table(columns)


def sql_type(t: pa.DataType) -> str:
    return {pa.int64(): "bigint", pa.int32(): "int", pa.float64(): "double", pa.string(): "string"}[t]


def queries(schema: pa.Schema, rows: int, per_file: int) -> dict[str, tuple[list[str], str]]:
    """Query name -> (select expressions, where clause)."""
    every = ["count(*)"] + [
        f"sum(length({f.name}))" if pa.types.is_string(f.type) else f"sum({f.name})" for f in schema
    ]
    lo = rows // 2
    return {
        f"all {COLUMNS} columns": (every, "true"),
        "1 column": (["count(*)", "sum(c02)"], "true"),
        "selective filter": (["count(*)", "sum(c02)"], f"id >= {lo} AND id < {lo + max(per_file // 10, 1)}"),
    }


def answer(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def start_moto() -> tuple[Any, dict[str, str], str]:
    from servers.backends import create_bucket
    from servers.moto import MotoServer
    from servers.plugin import s3_storage_options

    moto = MotoServer().start()
    storage = s3_storage_options(moto.url)
    return moto, storage, asyncio.run(create_bucket(moto.url))


def start_java(conf: dict[str, str], box: dict[str, Any]) -> None:
    from servers.java_spark import start_into  # the Java peer: optional (tests/java/setup.sh)

    start_into(conf, box)


def java_catalog_conf(name: str, root: str, db: Path, storage: dict[str, str] | None) -> dict[str, str]:
    from servers.java_spark import catalog_conf

    props = {"type": "jdbc", "uri": f"jdbc:sqlite:{db}", "warehouse": f"{root}/java"}
    if storage is not None:
        props.update(
            {
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "s3.endpoint": storage["s3.endpoint"],
                "s3.path-style-access": "true",
                "s3.access-key-id": storage["s3.access-key-id"],
                "s3.secret-access-key": storage["s3.secret-access-key"],
                "client.region": storage["s3.region"],
            }
        )
    # catalog_conf turns underscores into dashes; these keys carry none
    return catalog_conf(name, **props)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--store",
        choices=("s3proxy", "moto", "local"),
        default=None,
        help="where the readers read: s3proxy (default; moto in --tiny), moto, local",
    )
    parser.add_argument(
        "--s3a",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an S3A setting (fs.s3a.KEY) for every Spark read, as the storage option s3a.KEY",
    )
    parser.add_argument(
        "--count-requests",
        action="store_true",
        help="one more pass of every query and reader through a proxy that counts the requests",
    )
    parser.add_argument(
        "--java", action=argparse.BooleanOptionalAction, default=None, help="default: not in --tiny"
    )
    parser.add_argument(
        "--query", action="append", default=[], help="run only this query (by name; repeatable)"
    )
    parser.add_argument(
        "--readers",
        default=None,
        help="comma-separated reader names to run (default: all); the floor always runs",
    )
    parser.add_argument("--no-writes", action="store_true", help="leave the write comparison out")
    parser.add_argument(
        "--gap",
        type=float,
        default=0.0,
        help="seconds of pause before each timed or counted read (S3A's analytics stream keeps "
        "what it fetched for ~1 s, dropped every 5 s: a reader right after another reads from it)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="print where read_table's time before the action goes (load, plan, footers, file index)",
    )
    parser.add_argument(
        "--ab",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="one more read_table reader named NAME with these S3A settings, interleaved run by run",
    )
    args = parser.parse_args()
    rows, files, runs = (4_000, 2, 1) if args.tiny else (args.rows, args.files, args.runs)
    if args.tiny and not args.query:  # every column's answer compared across the readers, once
        args.query = [f"all {COLUMNS} columns"]
    with_java = args.java if args.java is not None else not args.tiny
    per_file = rows // files
    rows = per_file * files
    store = args.store or ("moto" if args.tiny else "s3proxy")
    progress = Progress()

    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        moto: Any = None
        s3proxy: S3Proxy | None = None
        if store == "local":
            rig = Rig("local FS", str(scratch / "store"))
        else:
            subprocess.run(["bash", str(S3A_SETUP), str(S3A_JARS)], check=True, timeout=900)
            moto, storage, bucket = start_moto()
            rig = Rig("moto S3", f"s3://{bucket}", storage, storage)
            if store == "s3proxy":
                s3proxy = S3Proxy(scratch / "s3proxy").start()
                rig.name = "s3proxy (filesystem backend; the table written on moto, copied there)"
                rig.read = {**storage, "s3.endpoint": s3proxy.url}
                url = s3proxy.url
                # the AWS SDK v2 (S3A's and S3FileIO's) asks for checksums s3proxy refuses (501)
                os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "WHEN_REQUIRED"
                os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "WHEN_REQUIRED"
                rig.mirror = lambda: print(
                    f"copied {copy_bucket(moto.url, url, bucket)} objects", file=sys.stderr
                )
            if args.count_requests:
                assert rig.read is not None
                rig.counter = CountingProxy(rig.read["s3.endpoint"])
                rig.read = {**rig.read, "s3.endpoint": rig.counter.url}
        if rig.read is not None and args.s3a:
            extra = (kv.partition("=") for kv in args.s3a)
            rig.read = {**rig.read, **{"s3a." + key: value for key, _, value in extra}}
        java_box: dict[str, Any] = {}
        java_thread = None
        if with_java:  # the peer's JVM starts while ours does and the table is written
            conf = java_catalog_conf(JAVA_CATALOG, rig.root, scratch / "java.db", rig.read)
            conf |= java_catalog_conf(JAVA_WRITES, rig.root, scratch / "java-w.db", rig.write)
            java_thread = threading.Thread(target=start_java, args=(conf, java_box))
            java_thread.start()
        try:
            run(
                rows,
                files,
                runs,
                per_file,
                scratch,
                rig,
                java_thread,
                java_box,
                SparkSession,
                progress,
                warm_up=not args.tiny,  # the tiny run's figures mean nothing: no untimed round
                jvm_options=QUICK_JVM if args.tiny else None,  # C1 only: C2 does not pay off this short
                pick=Pick(
                    queries=set(args.query),
                    readers=set(args.readers.split(",")) if args.readers else None,
                    writes=not args.no_writes,
                    breakdown=args.breakdown,
                    ab=[parse_ab(spec) for spec in args.ab],
                    gap=args.gap,
                ),
            )
        finally:
            if java_thread is not None:
                java_thread.join()
            if "java" in java_box:
                java_box["java"].close()
            if rig.counter is not None:
                rig.counter.close()
            if s3proxy is not None:
                s3proxy.stop()
            if moto is not None:
                moto.stop()


def run(
    rows: int,
    files: int,
    runs: int,
    per_file: int,
    scratch: Path,
    rig: Rig,
    java_thread: threading.Thread | None,
    java_box: dict[str, Any],
    session: Any,
    progress: Progress,
    warm_up: bool,
    pick: Pick | None = None,
    jvm_options: str | None = None,
) -> None:
    pick = pick or Pick()
    opts = dict(rig.read or {})  # every read
    write_opts = dict(rig.write or {})  # the table, and our writes
    on_s3 = rig.read is not None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        session.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
    )
    if on_s3:
        builder = builder.config("spark.jars", s3a_jars(S3A_JARS))
    if jvm_options:
        builder = builder.config("spark.driver.extraJavaOptions", jvm_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if on_s3 and not s3a_available(spark):
        raise SystemExit(f"Spark started without S3A ({S3A_JARS} holds no usable jars)")
    aioiceberg.spark.register(spark)
    progress("our Spark session is up")

    # the table every reader reads, and the Parquet files both writers append
    source = scratch / "source"
    source.mkdir()
    catalog = sync.connect(f"{rig.root}/ours", storage_options=rig.write)
    table = catalog.create_table("db.bench", schema=wide_rows(0, 1).schema, properties=PROPERTIES)
    for f in range(files):
        chunk = wide_rows(f * per_file, per_file)
        table.append(chunk)
        pq.write_table(chunk, source / f"part-{f:03d}.parquet", compression="zstd")
    table.refresh()
    progress("table written")
    if rig.mirror is not None:
        rig.mirror()
        progress("table copied to the read store")
    schema = wide_rows(0, 1).schema
    notes: list[str] = []
    paths = [t.file.file_path for t in table.scan().plan_files()]
    floor_paths = [s3a_location(p) or p for p in paths] if on_s3 else paths
    floor_opts = (s3a_read_options({p.split("/")[2] for p in floor_paths}, opts) if on_s3 else None) or {}
    if on_s3:  # what the store alone costs: every data file, whole, in parallel
        get_secs, size = median(runs, lambda: raw_get(opts["s3.endpoint"], paths))
        notes.append(
            f"store floor: a parallel GET (boto3) of all {len(paths)} data files ({size / 1e6:.1f} MB) "
            f"{get_secs:.2f}s"
        )

    readers: dict[str, Callable[[list[str], str], Any]] = {}

    def df_query(make: Callable[[], Any]) -> Callable[[list[str], str], Any]:
        return lambda exprs, where: answer(make().filter(where).selectExpr(*exprs).collect()[0])

    readers["spark.read.parquet (floor)"] = df_query(
        lambda: spark.read.options(**floor_opts).parquet(*floor_paths)
    )
    readers["read_table"] = df_query(lambda: aioiceberg.spark.read_table(spark, table.location, opts))
    readers["aioiceberg source"] = df_query(
        lambda: spark.read.format("aioiceberg").options(**opts).load(table.location)
    )

    def read_table_with(settings: dict[str, str]) -> Callable[[], Any]:
        return lambda: aioiceberg.spark.read_table(spark, table.location, {**opts, **settings})

    for ab_name, ab_settings in pick.ab:
        readers[f"read_table ({ab_name})"] = df_query(read_table_with(ab_settings))
    if pick.readers is not None:
        readers = {
            name: read
            for name, read in readers.items()
            if "floor" in name or name in pick.readers or name.startswith("read_table (")
        }
    java: Any = None
    if java_thread is not None:
        java_thread.join()
        if "error" in java_box:
            raise SystemExit(f"the Java peer did not start: {java_box['error']}")
        java = java_box["java"]
        progress("the Java peer is up")
        java.sql(f"CREATE NAMESPACE IF NOT EXISTS {JAVA_CATALOG}.db")
        java.sql(f"CALL {JAVA_CATALOG}.system.register_table('db.bench', '{table.metadata_location}')")
        name = f"{JAVA_CATALOG}.db.bench"
        readers["Java Iceberg"] = lambda exprs, where: answer(
            java.sql(f"SELECT {', '.join(exprs)} FROM {name} WHERE {where}")[0]
        )
        notes.append(f"Java Iceberg: Spark {java.version} in its own JVM (ours: Spark {spark.version})")
    else:
        notes.append("Java Iceberg: left out of --tiny (its JVM start doubles the run); the full run has it")

    for read in readers.values() if warm_up else ():  # JVM code paths, Python workers, S3 connections
        read(["count(*)", "sum(c02)"], "true")

    chosen = {
        q: v for q, v in queries(schema, rows, per_file).items() if not pick.queries or q in pick.queries
    }
    counted: list[tuple[str, str, Counts]] = []
    if rig.counter is not None:  # one untimed pass per query and reader, counted
        for query, (exprs, where) in chosen.items():
            for reader, read in readers.items():
                time.sleep(pick.gap)
                rig.counter.reset()
                read(exprs, where)
                counted.append((query, reader, rig.counter.reset()))

    results: list[tuple[str, str, float, Any]] = []
    for query, (exprs, where) in chosen.items():
        # interleaved: run r of every reader before run r + 1 of any (the load drifts)
        times: dict[str, list[float]] = {reader: [] for reader in readers}
        got: dict[str, Any] = {}
        for _ in range(runs):
            for reader, read in readers.items():
                time.sleep(pick.gap)
                start = time.perf_counter()
                got[reader] = read(exprs, where)
                times[reader].append(time.perf_counter() - start)
        for reader in readers:
            secs = statistics.median(times[reader])
            load = os.getloadavg()[0]
            each = "/".join(f"{t:.2f}" for t in times[reader])
            progress(f"{query}: {reader} {secs:.2f}s (runs {each}; load {load:.1f})")
            results.append((query, reader, secs, got[reader]))

    # what each costs before any action: read_table plans, spark.read.parquet lists and infers
    plan_secs, _ = median(runs, lambda: aioiceberg.spark.read_table(spark, table.location, opts))
    list_secs, _ = median(runs, lambda: spark.read.options(**floor_opts).parquet(*floor_paths))
    notes.append(f"before any action: read_table {plan_secs:.2f}s, spark.read.parquet {list_secs:.2f}s")
    if pick.breakdown:  # read_table's own phases, from its debug log
        phase_log = PhaseLog()
        logger = logging.getLogger("aioiceberg.spark")
        logger.addHandler(phase_log)
        logger.setLevel(logging.DEBUG)
        try:
            for _ in range(runs):
                aioiceberg.spark.read_table(spark, table.location, opts)
        finally:
            logger.removeHandler(phase_log)
            logger.setLevel(logging.NOTSET)
        notes.extend(f"breakdown: {line}" for line in phase_log.lines)

    # writes: the same DataFrame (the source files) appended to an empty table by each side
    writes: list[tuple[str, float]] = []
    written: dict[str, int] = {}
    if pick.writes:
        run_writes(spark, catalog, java, schema, source, runs, write_opts, writes, written, progress)
    spark.stop()
    report(rows, files, runs, rig, on_s3, notes, results, writes, written, counted)


def run_writes(
    spark: Any,
    catalog: Any,
    java: Any,
    schema: pa.Schema,
    source: Path,
    runs: int,
    write_opts: dict[str, str],
    writes: list[tuple[str, float]],
    written: dict[str, int],
    progress: Progress,
) -> None:
    """The same DataFrame appended to an empty table by each side."""
    ours_target = catalog.create_table("db.ours_target", schema=schema, properties=PROPERTIES)
    secs, _ = median(
        runs,
        lambda: (
            spark.read.parquet(str(source))
            .write.format("aioiceberg")
            .options(**write_opts)
            .mode("append")
            .save(ours_target.location)
        ),
    )
    writes.append(("aioiceberg source (append)", secs))
    progress(f"our writes {secs:.2f}s")
    ours_target.refresh()
    written["aioiceberg source (append)"] = ours_target.scan().to_arrow().num_rows
    if java is not None:
        columns = ", ".join(f"{f.name} {sql_type(f.type)}" for f in schema)
        props = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": "2", **PROPERTIES}.items())
        target = f"{JAVA_WRITES}.db.java_target"
        java.sql(f"CREATE NAMESPACE IF NOT EXISTS {JAVA_WRITES}.db")
        java.sql(f"CREATE TABLE {target} ({columns}) USING iceberg TBLPROPERTIES ({props})")
        secs, _ = median(
            runs, lambda: java.sql(f"INSERT INTO {target} SELECT * FROM parquet.`file://{source}`")
        )
        writes.append(("Java Iceberg (INSERT INTO)", secs))
        written["Java Iceberg (INSERT INTO)"] = int(java.sql(f"SELECT count(*) FROM {target}")[0][0])


def report(
    rows: int,
    files: int,
    runs: int,
    rig: Rig,
    on_s3: bool,
    notes: list[str],
    results: list[tuple[str, str, float, Any]],
    writes: list[tuple[str, float]],
    written: dict[str, int],
    counted: list[tuple[str, str, Counts]],
) -> None:

    where = f"{rig.name}: s3a:// for Spark's reader, S3FileIO for Java's" if on_s3 else rig.name
    if rig.counter is not None:
        where += "; every request through the counting proxy (times include it)"
    print(f"{rows} rows x {COLUMNS} columns in {files} files, {where}, local[2], median of {runs}")
    print(f"writes: {'moto S3' if rig.write else 'local FS'}")
    print("load average at the end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    for note in notes:
        print(note)
    print("| query | reader | seconds | vs floor | vs Java |")
    print("| --- | --- | --- | --- | --- |")
    floor = {q: (s, a) for q, r, s, a in results if "floor" in r}
    java_secs = {q: s for q, r, s, _ in results if r == "Java Iceberg"}
    for query, reader, secs, got in results:
        f_secs, f_answer = floor[query]
        if got != f_answer:
            raise SystemExit(f"{reader} answered {got!r} to {query}, the floor {f_answer!r}")
        vs_java = f"{secs / java_secs[query]:.2f}x" if query in java_secs else "-"
        print(f"| {query} | {reader} | {secs:.2f} | {secs / f_secs:.2f}x the floor | {vs_java} |")
    print("| write | writer | seconds | rows after all runs | vs Java |")
    print("| --- | --- | --- | --- | --- |")
    java_write = dict(writes).get("Java Iceberg (INSERT INTO)")
    for writer, secs in writes:
        if written[writer] != rows * runs:
            raise SystemExit(f"{writer} left {written[writer]} rows, not {rows * runs}")
        vs_java = f"{secs / java_write:.2f}x" if java_write else "-"
        print(f"| append {rows} rows | {writer} | {secs:.2f} | {written[writer]} | {vs_java} |")
    if counted:
        print("| query | reader | requests to the store |")
        print("| --- | --- | --- |")
        for query, reader, counts in counted:
            print(f"| {query} | {reader} | {counts.line()} |")


def raw_get(endpoint: str, paths: list[str]) -> int:
    """GET every ``s3://bucket/key`` whole, all at once (one boto3 client, a thread per file);
    the bytes read."""
    client = s3_client(endpoint, pool=len(paths))

    def one(path: str) -> int:
        bucket, _, key = path.split("://", 1)[1].partition("/")
        return len(client.get_object(Bucket=bucket, Key=key)["Body"].read())

    with ThreadPoolExecutor(len(paths)) as pool:
        return sum(pool.map(one, paths))


if __name__ == "__main__":
    main()
