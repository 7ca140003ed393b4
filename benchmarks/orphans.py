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

The table (a few snapshots, a few dozen referenced files) lives in a temporary folder;
the orphans are ``--objects`` small files in 1,000-object partition folders under its
``data/`` (the layout of a partitioned table whose writers died). Both versions run as
dry runs (listing, referenced set, comparison; the orphans are the answer, not deleted), so
each times the same work on the same objects; then Spark deletes them for real, timed, and
(the orphans written again) one process does. A deleting run minus its dry run is what the
deletes cost.
Spark's start is outside the clock (a warm-up job runs first). Answers must be equal.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from aioiceberg import sync  # noqa: E402
from aioiceberg._sync import default_loop  # noqa: E402
from aioiceberg.io.resolve import resolve_io  # noqa: E402
from aioiceberg.maintenance.orphans import list_candidates  # noqa: E402
from aioiceberg.runtime import default_runtime  # noqa: E402

PER_FOLDER = 1000


def make_table(root: Path, objects: int) -> sync.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    table = sync.connect(str(root)).create_table("db.t", schema=schema, partition_by=["part"])
    for k in range(4):
        ids = list(range(k * 100, k * 100 + 100))
        table.append(pa.table({"id": ids, "part": [f"p{i % 5}" for i in ids]}, schema=schema))
    write_orphans(Path(table.location.removeprefix("file://")) / "data", objects)
    return table.refresh()


def write_orphans(data: Path, objects: int) -> None:
    old = time.time() - 10 * 86400
    for first in range(0, objects, PER_FOLDER):
        folder = data / f"orphan={first // PER_FOLDER:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(first, min(objects, first + PER_FOLDER)):
            path = folder / f"{i:08d}.parquet"
            with open(path, "wb") as f:
                f.write(b"x")
            os.utime(path, (old, old))


async def raw_listing(location: str) -> int:
    io = resolve_io(location, runtime=default_runtime())
    count = 0
    async for _ in io.list(location.rstrip("/") + "/"):
        count += 1
    return count


async def candidates_listing(location: str) -> int:
    """The listing orphan removal makes (objects and temp files, before the comparison)."""
    io = resolve_io(location, runtime=default_runtime())
    count = 0
    async for _ in list_candidates(io, location.rstrip("/") + "/", time.time() - 86400):
        count += 1
    return count


def best_of(name: str, times: int, fn: Any) -> tuple[float, Any]:
    """The fastest of ``times`` runs (a listing on a shared machine: the least disturbed)."""
    runs = [timed(name, fn) for _ in range(times)]
    return min(r[0] for r in runs), runs[0][1]


def timed(name: str, fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{name}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--objects", type=int, default=1_000_000, help="orphan objects to create")
    parser.add_argument("--tiny", action="store_true", help="a smoke run (for the suite)")
    parser.add_argument("--one-process", action="store_true", help="no Spark: floor and one process only")
    args = parser.parse_args()
    objects = 300 if args.tiny else args.objects
    if args.one_process:
        one_process(objects)
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
        started = time.perf_counter()
        table = make_table(Path(tmp) / "wh", objects)
        print(f"{objects:,} orphan objects written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        location = table.location
        spark = session_builder("local[2]", "orphans-bench", conf).getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if not args.tiny:
            spark.sparkContext.parallelize([0], 1).map(lambda x: x).collect()  # workers started

        floor, listed = timed("raw listing", lambda: default_loop.run(raw_listing(location)))
        age = dt.timedelta(days=3)
        one, expected = timed(
            "one process", lambda: sync.load_table(location).remove_orphan_files(age, dry_run=True)
        )
        dry, found = timed(
            "Spark dry run",
            lambda: delete_orphan_files(
                spark, location, older_than=age, dry_run=True, parallelism=parallelism
            ),
        )
        if found != expected or len(found) != objects:
            raise SystemExit(
                f"answers differ: one process {len(expected)}, Spark {len(found)}, made {objects}"
            )
        real, deleted = timed(
            "Spark", lambda: delete_orphan_files(spark, location, older_than=age, parallelism=parallelism)
        )
        if deleted != expected:
            raise SystemExit("Spark deleted other objects than the dry runs named")
        spark.stop()
        # the same orphans again, for one process to delete
        write_orphans(Path(location.removeprefix("file://")) / "data", objects)
        one_real, removed = timed(
            "one process deleting", lambda: sync.load_table(location).remove_orphan_files(age)
        )
        if removed != expected:
            raise SystemExit("one process deleted other objects than the dry runs named")

    print(
        f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, local disk, {os.cpu_count()} cores"
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
    print(f"Load average at the end: {os.getloadavg()[0]:.1f}.")


def one_process(objects: int) -> None:
    """The floor and one process (dry run, then deleting the same orphans), without Spark."""
    with tempfile.TemporaryDirectory(prefix="orphans-bench-") as tmp:
        started = time.perf_counter()
        table = make_table(Path(tmp) / "wh", objects)
        print(f"{objects:,} orphan objects written in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        location = table.location
        load = os.getloadavg()[0]
        floor, listed = best_of("raw listing", 3, lambda: default_loop.run(raw_listing(location)))
        candidates, _ = best_of("orphan listing", 3, lambda: default_loop.run(candidates_listing(location)))
        age = dt.timedelta(days=3)
        one, expected = timed(
            "one process", lambda: sync.load_table(location).remove_orphan_files(age, dry_run=True)
        )
        one_real, removed = timed(
            "one process deleting", lambda: sync.load_table(location).remove_orphan_files(age)
        )
        if len(expected) != objects or removed != expected:
            raise SystemExit(
                f"answers differ: dry run {len(expected)}, deleting {len(removed)}, made {objects}"
            )
    print(f"\nOrphan removal, {objects:,} orphans among {listed:,} objects, local disk, one process")
    print("| run | seconds | objects/s |")
    print("|---|---|---|")
    for name, seconds in (
        ("raw listing, one process (floor, best of 3)", floor),
        ("orphan listing: objects and temp files (best of 3)", candidates),
        ("remove_orphan_files, one process (dry run)", one),
        ("remove_orphan_files, one process (deleting)", one_real),
    ):
        print(f"| {name} | {seconds:.2f} | {listed / seconds:,.0f} |")
    print(f"Load average: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
