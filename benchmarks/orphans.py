"""Orphan removal over a table location holding many objects: one process beside Spark
(``aioiceberg.spark.actions.delete_orphan_files``, local[2]), beside the floor (a raw
listing of the location through aioiceberg's store layer, in one process).

    python benchmarks/orphans.py                    # 1,000,000 objects on the local disk
    python benchmarks/orphans.py --objects 200000
    python benchmarks/orphans.py --tiny             # smoke run (used by the tests): 300
                                                    # objects, two tasks a job, no warm-up
    python benchmarks/orphans.py --one-process --objects 100000   # no Spark: the floor, the
                                                    # orphan listing alone, one process (dry
                                                    # run, deleting)
    python benchmarks/orphans.py --store s3proxy --objects 100000   # the same on an S3
                                                    # store (s3proxy; its LIST is O(keys) a
                                                    # page: 1,000,000 would take ~40 hours)
    python benchmarks/orphans.py --store s3proxy --count-requests   # + requests per run,
                                                    # through a counting proxy (timed through it)
    python benchmarks/orphans.py --store versitygw --versitygw PATH --runs 1   # 1,000,000
                                                    # objects on an S3 gateway over a folder

The table (a few snapshots, a few dozen referenced files) lives in a temporary folder;
the orphans are ``--objects`` small files in 1,000-object partition folders under its
``data/`` (the layout of a partitioned table whose writers died). Both versions run as
dry runs (listing, referenced set, comparison; the orphans are the answer, not deleted), so
each times the same work on the same objects; then Spark deletes them for real, timed, and
(the orphans written again) one process does. A deleting run minus its dry run is what the
deletes cost.
Spark's start is outside the clock (a warm-up job runs first). Answers must be equal.

``--store s3proxy``: the table in a bucket of s3proxy (benchmarks/s3_rig.py, filesystem
backend), reached through our S3 store with the endpoint in the storage options (Spark's
executors get them too). The table is written on moto (our commits need conditional writes,
which s3proxy ignores) and copied to s3proxy by PUTs; the orphans are written as files
straight into s3proxy's backend folder (a key is a path under ``<basedir>/<bucket>/``; with no
extended attributes an object lists with its file's size and mtime), not by a million PUTs.
A listing through our store must then show exactly the table's objects plus the orphans
(that backend also lists each folder as a key ending in ``/``: counted apart). Each LIST
request there loads every key under the prefix before applying the marker, so a flat listing
costs O(N^2 / 1,000): see benchmarks/README.md for the size it can take.
moto is no option at this size (one process, objects in memory, a listing's cost growing with
the bucket), nor nginx (a static store: no LIST, no DELETE).

``--store versitygw``: the same with the table in a bucket of versitygw (benchmarks/
versitygw_store.py, posix backend; binary from ``--versitygw`` or ``$VERSITYGW``), whose
listing costs the same per page at any size: the store for 1,000,000 objects. On the S3
stores the floor is a raw listing with obstore directly (Rust; no Python per object), beside
a listing through our store; with ``--one-process`` the deletes' floor too (the orphans
written again, obstore's bulk delete of their keys). Every row prints this process's CPU
time, the store's (versitygw) and the load.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from servers.backends import create_bucket  # noqa: E402
from servers.moto import MotoServer  # noqa: E402
from servers.plugin import s3_storage_options  # noqa: E402

from aioiceberg import sync  # noqa: E402
from aioiceberg._sync import default_loop  # noqa: E402
from aioiceberg.io.resolve import resolve_io  # noqa: E402
from aioiceberg.maintenance.orphans import list_candidates  # noqa: E402
from aioiceberg.runtime import default_runtime  # noqa: E402
from benchmarks.s3_rig import CountingProxy, Counts, S3Proxy, copy_bucket  # noqa: E402
from benchmarks.versitygw_store import VersityGW, versitygw_binary  # noqa: E402

PER_FOLDER = 1000


@dataclass
class Place:
    """Where the table lives and how it is reached; ``orphans`` is the folder (on this
    machine's disk) its ``data/`` is, where the orphans are written as files."""

    location: str
    options: dict[str, str]
    orphans: Path
    store: str
    # s3proxy 2.6 sends ListObjectsV2's continuation token URL-encoded and takes it back
    # as it comes: a page ending on a key with '=' starts over (the listing never ends)
    sign: str = "="
    table_objects: int = 0  # the table's own, folder keys left out
    counter: CountingProxy | None = None
    counts: dict[str, Counts] = field(default_factory=dict)
    server: VersityGW | None = None  # its CPU time is read per run
    store_pid: int | None = None  # a store started by this process: its CPU is not ours
    fast_floor: bool = False  # an S3 store: obstore's raw listing is the floor
    cpu: dict[str, Cpu] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)


@dataclass
class Cpu:
    """CPU seconds of one run: this process's and its children's (Spark), the store's (when
    known), and the 1-minute load at its end."""

    own: float
    store: float | None
    load: float

    def cells(self) -> str:
        store = f"{self.store:.2f}" if self.store is not None else "-"
        return f"{self.own:.2f} | {store} | {self.load:.1f}"


def make_table(root: str, options: dict[str, str] | None = None) -> sync.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    catalog = sync.connect(root, storage_options=options)
    table = catalog.create_table("db.t", schema=schema, partition_by=["part"])
    for k in range(4):
        ids = list(range(k * 100, k * 100 + 100))
        table.append(pa.table({"id": ids, "part": [f"p{i % 5}" for i in ids]}, schema=schema))
    return table.refresh()


@contextlib.contextmanager
def place(
    store: str, tmp: Path, objects: int, count_requests: bool = False, binary: str | None = None
) -> Iterator[Place]:
    """The table with ``objects`` orphans written, and checked by a listing through our store."""
    started = time.perf_counter()
    if store == "local":
        table = make_table(str(tmp / "wh"))
        where = Place(table.location, {}, Path(table.location.removeprefix("file://")) / "data", "local disk")
        with finished(where, objects, started):
            yield where
        return
    if store == "versitygw":
        with versitygw_place(tmp, objects, binary, started) as where:
            yield where
        return
    with MotoServer() as moto:  # our commits need conditional writes: the table is made on moto
        bucket = default_loop.run(create_bucket(moto.url))
        table = make_table(f"s3://{bucket}/wh", s3_storage_options(moto.url))
        s3proxy = S3Proxy(tmp / "s3proxy", ignore_unknown_headers=True).start()
        try:
            copy_bucket(moto.url, s3proxy.url, bucket)
        except BaseException:
            s3proxy.stop()
            raise
    counter = CountingProxy(s3proxy.url) if count_requests else None
    try:
        key = table.location.removeprefix(f"s3://{bucket}/")
        where = Place(
            table.location,
            s3_storage_options(counter.url if counter is not None else s3proxy.url),
            s3proxy.object_path(bucket, key) / "data",
            "s3proxy (filesystem backend)" + (", through a counting proxy" if counter else ""),
            sign="-",
            counter=counter,
            store_pid=s3proxy.process.pid if s3proxy.process is not None else None,
        )
        with finished(where, objects, started):
            yield where
    finally:
        if counter is not None:
            counter.close()
        s3proxy.stop()


@contextlib.contextmanager
def versitygw_place(tmp: Path, objects: int, binary: str | None, started: float) -> Iterator[Place]:
    gateway = VersityGW(tmp / "versitygw", versitygw_binary(binary))
    with MotoServer() as moto:  # the table is made on moto, as for s3proxy, and copied by PUTs
        bucket = default_loop.run(create_bucket(moto.url))
        table = make_table(f"s3://{bucket}/wh", s3_storage_options(moto.url))
        gateway.start()
        try:
            copy_bucket(moto.url, gateway.url, bucket)
        except BaseException:
            gateway.stop()
            raise
    try:
        key = table.location.removeprefix(f"s3://{bucket}/")
        where = Place(
            table.location,
            s3_storage_options(gateway.url),
            gateway.object_path(bucket, key) / "data",
            "versitygw 1.8.0 (posix backend)",
            server=gateway,
            fast_floor=True,
            store_pid=gateway.process.pid if gateway.process is not None else None,
        )
        with finished(where, objects, started):
            yield where
    finally:
        gateway.stop()


@contextlib.contextmanager
def finished(where: Place, objects: int, started: float) -> Iterator[None]:
    """Writes the orphans and checks that a listing through our store shows exactly them
    beside the table's own objects."""
    before, folders_before = default_loop.run(census(where.location, where.options))
    write_orphans(where.orphans, objects, where.sign)
    if where.fast_floor:  # the floor's listing (obstore) checks a million keys in a minute
        listed, folders = obstore_census(where.location, where.options)
    else:
        listed, folders = default_loop.run(census(where.location, where.options, before + 2 * objects))
    where.table_objects = before - folders_before
    if listed - folders != before - folders_before + objects:
        raise SystemExit(
            f"the store lists {listed - folders:,} objects (and {folders:,} folders), "
            f"not the table's {before - folders_before:,} + {objects:,} orphans"
        )
    print(
        f"{objects:,} orphan objects written in {time.perf_counter() - started:.1f} s ({where.store}); "
        f"listed: {listed - folders:,} objects, {folders:,} folder keys",
        file=sys.stderr,
    )
    if where.counter is not None:
        where.counter.reset()
    yield


def write_orphans(data: Path, objects: int, sign: str = "=") -> None:
    old = time.time() - 10 * 86400
    for first in range(0, objects, PER_FOLDER):
        folder = data / f"orphan{sign}{first // PER_FOLDER:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(first, min(objects, first + PER_FOLDER)):
            path = folder / f"{i:08d}.parquet"
            with open(path, "wb") as f:
                f.write(b"x")
            os.utime(path, (old, old))


async def raw_listing(location: str, options: dict[str, str]) -> int:
    io = resolve_io(location, options, runtime=default_runtime())
    count = 0
    try:
        async for _ in io.list(location.rstrip("/") + "/"):
            count += 1
    finally:
        await io.aclose()
    return count


async def census(location: str, options: dict[str, str], bound: int = 10**9) -> tuple[int, int]:
    """Objects, and keys ending in ``/`` among them, under the location: s3proxy's filesystem
    backend lists each folder as such a key (its mtime the folder's: younger than the orphans,
    never one of them)."""
    io = resolve_io(location, options, runtime=default_runtime())
    count = folders = 0
    try:
        async for info in io.list(location.rstrip("/") + "/"):
            count += 1
            folders += info.location.endswith("/")
            if count > bound:
                raise SystemExit(f"the listing of {location} does not end ({count:,} keys and on)")
    finally:
        await io.aclose()
    return count, folders


def obstore_store(location: str, options: dict[str, str]) -> tuple[Any, str]:
    """An obstore S3 store on the location's bucket, and the location's key prefix."""
    # obstore: optional (the s3 extra); the S3 stores' floor only
    from obstore.store import S3Store

    bucket, _, key = location.removeprefix("s3://").partition("/")
    store = S3Store(
        bucket,
        endpoint=options["s3.endpoint"],
        access_key_id=options["s3.access-key-id"],
        secret_access_key=options["s3.secret-access-key"],
        region=options["s3.region"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    return store, key.rstrip("/") + "/"


def obstore_listing(location: str, options: dict[str, str]) -> list[str]:
    """The floor on an S3 store: every key under the location, listed by obstore directly
    (pages of 1,000, parsed in Rust), with no per-object work in Python beyond the keys."""
    # obstore: optional (the s3 extra); the S3 stores' floor only
    import obstore

    store, prefix = obstore_store(location, options)
    keys: list[str] = []
    for page in obstore.list(store, prefix=prefix, chunk_size=1000):
        keys.extend(item["path"] for item in page)
    return keys


def obstore_census(location: str, options: dict[str, str]) -> tuple[int, int]:
    keys = obstore_listing(location, options)
    return len(keys), sum(k.endswith("/") for k in keys)


def obstore_delete(location: str, options: dict[str, str], keys: list[str]) -> int:
    """The deletes' floor on an S3 store: obstore's bulk delete (DeleteObjects, 1,000 keys a
    request) of ``keys``."""
    # obstore: optional (the s3 extra); the S3 stores' floor only
    import obstore

    store, _ = obstore_store(location, options)
    obstore.delete(store, keys)
    return len(keys)


async def candidates_listing(location: str, options: dict[str, str]) -> int:
    """The listing orphan removal makes (objects and temp files, before the comparison)."""
    io = resolve_io(location, options, runtime=default_runtime())
    count = 0
    try:
        async for _ in list_candidates(io, location.rstrip("/") + "/", time.time() - 86400):
            count += 1
    finally:
        await io.aclose()
    return count


def best_of(where: Place, name: str, times: int, fn: Any) -> tuple[float, Any]:
    """The fastest of ``times`` runs (a listing on a shared machine: the least disturbed)."""
    runs = [timed(where, name, fn) for _ in range(times)]
    return min(r[0] for r in runs), runs[0][1]


def tree_cpu(exclude: int | None) -> float:
    """CPU seconds of this process and every process below it (Spark's JVM and its Python
    workers), the store's process (``exclude``) and its children left out; children already
    waited for count through this process's ``cutime``/``cstime``."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        spent[pid] = sum(int(v) for v in fields[11:15]) / tick
    total = 0.0
    for pid in spent:
        ancestor = pid
        while ancestor not in (0, 1, os.getpid(), exclude) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == os.getpid() and pid != exclude:
            total += spent[pid]
    return total


def timed(where: Place, name: str, fn: Any) -> tuple[float, Any]:
    server = where.server.cpu_seconds() if where.server is not None else None
    cpu = tree_cpu(where.store_pid)
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    spent = Cpu(
        tree_cpu(where.store_pid) - cpu,
        where.server.cpu_seconds() - server if where.server is not None and server is not None else None,
        os.getloadavg()[0],
    )
    if name not in where.best or seconds < where.best[name]:  # best of: the fastest run's
        where.best[name], where.cpu[name] = seconds, spent
    print(f"{name}: {seconds:.2f} s (CPU {spent.cells()})", file=sys.stderr, flush=True)
    if where.counter is not None:
        where.counts[name] = where.counter.reset()  # the last of a best-of: one run's requests
    return seconds, result


def print_counts(where: Place) -> None:
    for name, counts in where.counts.items():
        print(f"Requests, {name}: {counts.line()}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--objects", type=int, default=1_000_000, help="orphan objects to create")
    parser.add_argument("--tiny", action="store_true", help="a smoke run (for the suite)")
    parser.add_argument("--one-process", action="store_true", help="no Spark: floor and one process only")
    parser.add_argument(
        "--store",
        choices=["local", "s3proxy", "versitygw"],
        default="local",
        help="where the table lives",
    )
    parser.add_argument(
        "--versitygw", help="versitygw's binary (default: $VERSITYGW, then versitygw on the PATH)"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="--one-process: runs of each listing (the best counts)"
    )
    parser.add_argument(
        "--count-requests",
        action="store_true",
        help="s3proxy: count requests per run (timed through the proxy)",
    )
    args = parser.parse_args()
    objects = 300 if args.tiny else args.objects
    if args.store == "versitygw":
        versitygw_binary(args.versitygw)  # a missing binary stops the run before any work
    if args.one_process:
        one_process(args.store, objects, args.count_requests, args.versitygw, args.runs)
        return
    # tiny: the run only has to go end to end, so Spark does the least it can (its start
    # dominates): two tasks a job, a JVM that compiles less, no warm-up job
    parallelism = 2 if args.tiny else None
    conf = {"spark.ui.showConsoleProgress": "false"}
    if args.tiny:
        conf["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

    # pyspark: optional (the spark extra); imported here so that --help works without it
    from servers.spark_cluster import session_builder

    from aioiceberg.spark.actions.delete_orphan_files import delete_orphan_files

    with tempfile.TemporaryDirectory(prefix="orphans-bench-") as tmp:
        with place(args.store, Path(tmp), objects, args.count_requests, args.versitygw) as where:
            location, options = where.location, where.options
            spark = session_builder("local[2]", "orphans-bench", conf).getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            if not args.tiny:
                spark.sparkContext.parallelize([0], 1).map(lambda x: x).collect()  # workers started
            if where.counter is not None:
                where.counter.reset()

            rows: list[tuple[str, float]] = []
            if where.fast_floor:
                obstore_floor, keys = timed(
                    where, "obstore listing", lambda: obstore_listing(location, options)
                )
                rows.append(("raw listing, obstore directly (floor)", obstore_floor))
            floor, listed = timed(
                where, "raw listing", lambda: default_loop.run(raw_listing(location, options))
            )
            if where.fast_floor and listed != len(keys):
                raise SystemExit(f"our store lists {listed:,} objects, obstore {len(keys):,}")
            rows.append(
                (
                    "raw listing through aioiceberg's store, one process"
                    if where.fast_floor
                    else "raw listing, one process (floor)",
                    floor,
                )
            )
            age = dt.timedelta(days=3)
            one, expected = timed(
                where,
                "one process",
                lambda: sync.load_table(location, options).remove_orphan_files(age, dry_run=True),
            )
            dry, found = timed(
                where,
                "Spark dry run",
                lambda: delete_orphan_files(
                    spark, location, options, older_than=age, dry_run=True, parallelism=parallelism
                ),
            )
            if found != expected or len(found) != objects:
                raise SystemExit(
                    f"answers differ: one process {len(expected)}, Spark {len(found)}, made {objects}"
                )
            real, deleted = timed(
                where,
                "Spark",
                lambda: delete_orphan_files(
                    spark, location, options, older_than=age, parallelism=parallelism
                ),
            )
            if deleted != expected:
                raise SystemExit("Spark deleted other objects than the dry runs named")
            spark.stop()
            # the same orphans again, for one process to delete
            write_orphans(where.orphans, objects, where.sign)
            if where.counter is not None:
                where.counter.reset()
            one_real, removed = timed(
                where,
                "one process deleting",
                lambda: sync.load_table(location, options).remove_orphan_files(age),
            )
            if removed != expected:
                raise SystemExit("one process deleted other objects than the dry runs named")
            if where.fast_floor:
                left, folders = obstore_census(location, options)
            else:
                left, folders = default_loop.run(census(location, options))
            if left - folders != where.table_objects:
                raise SystemExit(
                    f"{left - folders:,} objects left after the deletes, not {where.table_objects:,}"
                )

    print(
        f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, {where.store}, "
        f"{os.cpu_count()} cores"
    )
    names = {
        "raw listing, obstore directly (floor)": "obstore listing",
        "raw listing through aioiceberg's store, one process": "raw listing",
        "raw listing, one process (floor)": "raw listing",
        "remove_orphan_files, one process (dry run)": "one process",
        "delete_orphan_files, Spark local[2] (dry run)": "Spark dry run",
        "remove_orphan_files, one process (deleting)": "one process deleting",
        "delete_orphan_files, Spark local[2] (deleting)": "Spark",
    }
    print_table(
        where,
        listed,
        [
            *rows,
            ("remove_orphan_files, one process (dry run)", one),
            ("delete_orphan_files, Spark local[2] (dry run)", dry),
            ("remove_orphan_files, one process (deleting)", one_real),
            ("delete_orphan_files, Spark local[2] (deleting)", real),
        ],
        names,
        "CPU s: this process and its children (Spark's JVM and Python workers)",
    )
    for name, deleting, dry_run in (("one process", one_real, one), ("Spark local[2]", real, dry)):
        spent = max(deleting - dry_run, 0.0)  # a tiny run has no warm-up: its dry run pays that
        print(
            f"Deletes alone, {name} (deleting run minus dry run): {spent:.2f} s, "
            f"{spent * 1000 / max(objects, 1):.3f} ms per delete."
        )
    print_counts(where)
    print(f"Load average at the end: {os.getloadavg()[0]:.1f}.")


def print_table(
    where: Place, listed: int, rows: list[tuple[str, float]], names: dict[str, str], note: str
) -> None:
    """The runs as a Markdown table: seconds, objects/s and, per run, CPU seconds of this
    process and of the store, and the 1-minute load at its end."""
    print("| run | seconds | objects/s | CPU s, ours | CPU s, store | load |")
    print("|---|---|---|---|---|---|")
    for name, seconds in rows:
        cpu = where.cpu.get(names[name])
        cells = cpu.cells() if cpu is not None else "- | - | -"
        print(f"| {name} | {seconds:.2f} | {listed / seconds:,.0f} | {cells} |")
    print(f"({note}; store CPU: {'versitygw' if where.server is not None else 'not measured'}.)")


def one_process(store: str, objects: int, count_requests: bool, binary: str | None, runs: int) -> None:
    """The floor and one process (dry run, then deleting the same orphans), without Spark."""
    with tempfile.TemporaryDirectory(prefix="orphans-bench-") as tmp:
        with place(store, Path(tmp), objects, count_requests, binary) as where:
            location, options = where.location, where.options
            load = os.getloadavg()[0]
            rows: list[tuple[str, float]] = []
            names: dict[str, str] = {}
            if where.fast_floor:
                obstore_floor, keys = best_of(
                    where, "obstore listing", runs, lambda: obstore_listing(location, options)
                )
                rows.append((f"raw listing, obstore directly (floor, best of {runs})", obstore_floor))
                names[rows[-1][0]] = "obstore listing"
            floor, listed = best_of(
                where, "raw listing", runs, lambda: default_loop.run(raw_listing(location, options))
            )
            if where.fast_floor and listed != len(keys):
                raise SystemExit(f"our store lists {listed:,} objects, obstore {len(keys):,}")
            rows.append(
                (
                    f"raw listing through aioiceberg's store (best of {runs})"
                    if where.fast_floor
                    else f"raw listing, one process (floor, best of {runs})",
                    floor,
                )
            )
            names[rows[-1][0]] = "raw listing"
            candidates, _ = best_of(
                where, "orphan listing", runs, lambda: default_loop.run(candidates_listing(location, options))
            )
            rows.append((f"orphan listing: objects and temp files (best of {runs})", candidates))
            names[rows[-1][0]] = "orphan listing"
            age = dt.timedelta(days=3)
            one, expected = timed(
                where,
                "one process",
                lambda: sync.load_table(location, options).remove_orphan_files(age, dry_run=True),
            )
            rows.append(("remove_orphan_files, one process (dry run)", one))
            names[rows[-1][0]] = "one process"
            one_real, removed = timed(
                where,
                "one process deleting",
                lambda: sync.load_table(location, options).remove_orphan_files(age),
            )
            rows.append(("remove_orphan_files, one process (deleting)", one_real))
            names[rows[-1][0]] = "one process deleting"
            if len(expected) != objects or removed != expected:
                raise SystemExit(
                    f"answers differ: dry run {len(expected)}, deleting {len(removed)}, made {objects}"
                )
            if where.fast_floor:  # the deletes' floor: the same orphans again, deleted by obstore
                write_orphans(where.orphans, objects, where.sign)
                orphan_keys = [k for k in obstore_listing(location, options) if "/data/orphan" in k]
                if len(orphan_keys) != objects:
                    raise SystemExit(f"{len(orphan_keys):,} orphans written again, not {objects:,}")
                delete_floor, _ = timed(
                    where, "obstore deletes", lambda: obstore_delete(location, options, orphan_keys)
                )
                rows.append(("bulk delete of the orphans, obstore directly (deletes' floor)", delete_floor))
                names[rows[-1][0]] = "obstore deletes"
                left = obstore_census(location, options)[0]
                if left != where.table_objects:
                    raise SystemExit(f"{left:,} objects left after obstore's deletes")
    print(f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, {where.store}, one process")
    print_table(where, listed, rows, names, "CPU s: this process")
    if where.fast_floor:
        print(
            f"Deletes alone, one process (deleting run minus dry run): {max(one_real - one, 0):.2f} s; "
            f"floor (obstore, deletes only): {delete_floor:.2f} s."
        )
    print_counts(where)
    print(f"Load average: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
