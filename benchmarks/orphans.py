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


def make_table(root: str, options: dict[str, str] | None = None) -> sync.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    catalog = sync.connect(root, storage_options=options)
    table = catalog.create_table("db.t", schema=schema, partition_by=["part"])
    for k in range(4):
        ids = list(range(k * 100, k * 100 + 100))
        table.append(pa.table({"id": ids, "part": [f"p{i % 5}" for i in ids]}, schema=schema))
    return table.refresh()


@contextlib.contextmanager
def place(store: str, tmp: Path, objects: int, count_requests: bool = False) -> Iterator[Place]:
    """The table with ``objects`` orphans written, and checked by a listing through our store."""
    started = time.perf_counter()
    if store == "local":
        table = make_table(str(tmp / "wh"))
        where = Place(table.location, {}, Path(table.location.removeprefix("file://")) / "data", "local disk")
        with finished(where, objects, started):
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
        )
        with finished(where, objects, started):
            yield where
    finally:
        if counter is not None:
            counter.close()
        s3proxy.stop()


@contextlib.contextmanager
def finished(where: Place, objects: int, started: float) -> Iterator[None]:
    """Writes the orphans and checks that a listing through our store shows exactly them
    beside the table's own objects."""
    before, folders_before = default_loop.run(census(where.location, where.options))
    write_orphans(where.orphans, objects, where.sign)
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


def timed(where: Place, name: str, fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{name}: {seconds:.2f} s", file=sys.stderr, flush=True)
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
        "--store", choices=["local", "s3proxy"], default="local", help="where the table lives"
    )
    parser.add_argument(
        "--count-requests",
        action="store_true",
        help="s3proxy: count requests per run (timed through the proxy)",
    )
    args = parser.parse_args()
    objects = 300 if args.tiny else args.objects
    if args.one_process:
        one_process(args.store, objects, args.count_requests)
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
        with place(args.store, Path(tmp), objects, args.count_requests) as where:
            location, options = where.location, where.options
            spark = session_builder("local[2]", "orphans-bench", conf).getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            if not args.tiny:
                spark.sparkContext.parallelize([0], 1).map(lambda x: x).collect()  # workers started
            if where.counter is not None:
                where.counter.reset()

            floor, listed = timed(
                where, "raw listing", lambda: default_loop.run(raw_listing(location, options))
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
            left, folders = default_loop.run(census(location, options))
            if left - folders != where.table_objects:
                raise SystemExit(
                    f"{left - folders:,} objects left after the deletes, not {where.table_objects:,}"
                )

    print(
        f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, {where.store}, "
        f"{os.cpu_count()} cores"
    )
    print("| run | seconds | objects/s |")
    print("|---|---|---|")
    for name, seconds in (
        ("raw listing, one process (floor)", floor),
        ("remove_orphan_files, one process (dry run)", one),
        ("delete_orphan_files, Spark local[2] (dry run)", dry),
        ("remove_orphan_files, one process (deleting)", one_real),
        ("delete_orphan_files, Spark local[2] (deleting)", real),
    ):
        print(f"| {name} | {seconds:.2f} | {listed / seconds:,.0f} |")
    for name, deleting, dry_run in (("one process", one_real, one), ("Spark local[2]", real, dry)):
        spent = max(deleting - dry_run, 0.0)  # a tiny run has no warm-up: its dry run pays that
        print(
            f"Deletes alone, {name} (deleting run minus dry run): {spent:.2f} s, "
            f"{spent * 1000 / max(objects, 1):.3f} ms per delete."
        )
    print_counts(where)
    print(f"Load average at the end: {os.getloadavg()[0]:.1f}.")


def one_process(store: str, objects: int, count_requests: bool) -> None:
    """The floor and one process (dry run, then deleting the same orphans), without Spark."""
    with tempfile.TemporaryDirectory(prefix="orphans-bench-") as tmp:
        with place(store, Path(tmp), objects, count_requests) as where:
            location, options = where.location, where.options
            load = os.getloadavg()[0]
            floor, listed = best_of(
                where, "raw listing", 3, lambda: default_loop.run(raw_listing(location, options))
            )
            candidates, _ = best_of(
                where, "orphan listing", 3, lambda: default_loop.run(candidates_listing(location, options))
            )
            age = dt.timedelta(days=3)
            one, expected = timed(
                where,
                "one process",
                lambda: sync.load_table(location, options).remove_orphan_files(age, dry_run=True),
            )
            one_real, removed = timed(
                where,
                "one process deleting",
                lambda: sync.load_table(location, options).remove_orphan_files(age),
            )
            if len(expected) != objects or removed != expected:
                raise SystemExit(
                    f"answers differ: dry run {len(expected)}, deleting {len(removed)}, made {objects}"
                )
    print(f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, {where.store}, one process")
    print("| run | seconds | objects/s |")
    print("|---|---|---|")
    for name, seconds in (
        ("raw listing, one process (floor, best of 3)", floor),
        ("orphan listing: objects and temp files (best of 3)", candidates),
        ("remove_orphan_files, one process (dry run)", one),
        ("remove_orphan_files, one process (deleting)", one_real),
    ):
        print(f"| {name} | {seconds:.2f} | {listed / seconds:,.0f} |")
    print_counts(where)
    print(f"Load average: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
