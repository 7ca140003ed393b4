"""Compaction (``aioiceberg.spark.actions.rewrite_data_files``) on the standalone cluster: a
master and two one-core workers (tests/servers/spark_cluster.py), a table of 2,000 small files
in moto S3 (the executors reach it only through the action's storage options), and an
executor JVM killed while the groups are being rewritten. Spark runs the lost tasks again;
every group is committed once, the rows are those from before, the lost attempts' files
are not in the table, and whatever of them is left is removed by ``delete_orphan_files``.

Orphan removal and expiry (``delete_orphan_files``, ``expire_snapshots``) on the same cluster
remove exactly what the single-process versions remove: a table with a history (appends,
v3 deletion vectors, or v2 position delete files in the failure test, a compaction, an
overwrite, a statistics file, a tag and a branch keeping old snapshots) and, for orphans, a
failed write's data files and strays under data/ and metadata/, some younger than the cutoff.
The warehouse is copied aside (mtimes kept), the single-process version runs, the copy is put
back at the same path (metadata names absolute paths) and the Spark version runs: the same
files go, the same are left, a dry run names them first, and our reader and DuckDB read the
same rows after. A
file that cannot be deleted (its folder read-only) is reported, never counted as deleted.
On moto S3 behind a recording proxy, no action fetches a manifest or a manifest list
twice, nor lists a prefix twice."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

pytest.importorskip("pyspark")

from compaction_helpers import SCHEMA, add_small_files, sorted_rows
from maint_helpers import SCHEMA as EVENTS
from maint_helpers import duckdb_connection, duckdb_ids, ids, pyiceberg_table, rows
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy
from servers.spark_cluster import SparkCluster, cluster_session, executor_processes

import aioiceberg
from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import StoreError
from aioiceberg.io.local import LOCK_NAME
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.compaction import RewriteDataFilesResult
from aioiceberg.maintenance.expire import ExpireResult
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.actions import delete_orphan_files, expire_snapshots, rewrite_data_files
from aioiceberg.spec.manifest import DataFileContent
from aioiceberg.table import Table
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_data_files

# one worker holds the modules that share the session-wide cluster (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("spark-cluster")

FILES = 2000
GROUP = "compaction-under-test"
DEADLINE = 300.0  # seconds for anything the test waits on (2 busy cores)


@pytest.fixture(scope="module")
def spark(spark_cluster: SparkCluster) -> Iterator[Any]:
    session = cluster_session(spark_cluster, "aioiceberg-compaction-cluster")
    yield session
    session.stop()


def stored(location: str, options: dict[str, str]) -> set[str]:
    io = resolve_io(location, options, runtime=default_runtime())

    async def listing() -> set[str]:
        return {o.location async for o in io.list(f"{location}/data/")}

    return default_loop.run(listing())


def live_entries(table: sync.Table) -> list[str]:
    """The data file paths of every live manifest entry of the current snapshot (a file
    committed twice would be listed twice)."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    walker = ManifestWalker(table.aio.io)

    async def entries() -> list[str]:
        out = []
        for m in await walker.manifests(snapshot):
            out += [e.data_file.file_path for e in await walker.entries(m) if e.is_live]
        return out

    return default_loop.run(entries())


def test_compaction_survives_an_executor_killed_mid_rewrite(spark: Any, moto_endpoint: str) -> None:
    options = s3_storage_options(moto_endpoint)
    bucket = asyncio.run(create_bucket(moto_endpoint))
    table = sync.connect(f"s3://{bucket}/wh", storage_options=options).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    default_loop.run(add_small_files(table.aio, FILES, 10, at_once=64))
    table.refresh()
    expected = sorted_rows(table.scan().to_arrow())
    before_files = {t.file.file_path for t in table.scan().plan_files()}
    assert len(before_files) == FILES
    sizes = [t.file.file_size_in_bytes for t in table.scan().plan_files()]
    target = sum(sizes) // 24  # about 8 groups per partition: many tasks, both executors busy

    results: list[RewriteDataFilesResult] = []
    errors: list[BaseException] = []

    def job() -> None:
        try:
            spark.sparkContext.setJobGroup(GROUP, "compaction under test")  # this thread's jobs
            results.append(
                rewrite_data_files(spark, table.location, target_file_size=target, storage_options=options)
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while not (stored(table.location, options) - before_files):  # a group's output is being written
            assert not errors, errors
            assert thread.is_alive(), "the compaction ended before any file was seen"
            assert time.monotonic() < deadline, "no rewritten file appeared"
            time.sleep(0.1)
        executors = executor_processes(spark.sparkContext.applicationId)
        assert executors, "no executor JVM of this application"
        jvm = sorted(executors)[0]
        still_running = thread.is_alive()
        os.kill(jvm, signal.SIGKILL)
    finally:
        thread.join(DEADLINE)
    assert not thread.is_alive(), "the compaction did not end"
    assert not errors, errors
    assert still_running  # the executor died while groups were being rewritten
    (result,) = results
    # Spark lost tasks with the executor and ran them again
    tracker = spark.sparkContext.statusTracker()
    stages = [s for j in tracker.getJobIdsForGroup(GROUP) for s in tracker.getJobInfo(j).stageIds]
    assert sum(tracker.getStageInfo(s).numFailedTasks for s in stages) >= 1
    assert result.groups >= 16 and not result.failed_groups and len(result.snapshot_ids) == 1

    table.refresh()
    snapshot = table.current_snapshot()
    assert (
        snapshot is not None and snapshot.summary is not None and snapshot.summary["operation"] == "replace"
    )
    # every row once, for all three readers
    assert sorted_rows(table.scan().to_arrow()) == expected
    assert sorted_rows(pyiceberg_table(table.aio, options).scan().to_arrow()) == expected
    con = duckdb_connection()
    host = moto_endpoint.split("://", 1)[-1]
    con.execute(
        "CREATE SECRET (TYPE s3, KEY_ID 'x', SECRET 'x', REGION 'us-east-1', "
        f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
    )
    duck = con.execute(f"SELECT id FROM iceberg_scan('{table.metadata_location}')").fetchall()
    assert sorted(r[0] for r in duck) == [r[0] for r in expected]
    # no file committed twice; the table holds exactly the files the result names
    live = live_entries(table)
    assert not [p for p, n in Counter(live).items() if n > 1]
    assert set(live) == set(result.added_files) and len(live) == len(result.added_files)
    assert set(result.rewritten_files) == before_files
    # what is stored besides: the replaced files (until expiry) and at most orphans of the lost
    # attempts that were still being written when the action cleaned up
    leftovers = stored(table.location, options) - set(live) - before_files
    assert not leftovers & set(live)
    # those are orphans: the cluster's orphan removal takes them, exactly what one process
    # would take, and nothing the table reads
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    expected_orphans = sync.load_table(table.location, options).remove_orphan_files(later, dry_run=True)
    removed = delete_orphan_files(spark, table.location, options, older_than=later)
    assert removed == expected_orphans and leftovers <= set(removed)
    assert stored(table.location, options) == set(live) | before_files
    assert sorted_rows(sync.load_table(table.location, options).scan().to_arrow()) == expected


# -- delete_orphan_files and expire_snapshots -----------------------------------------------

OLD = 5 * 86400  # seconds: the age of the table's files and of the old strays
ORPHAN_AGE = dt.timedelta(days=3)


async def history_table(root: Path, version: int) -> tuple[Table, dict[str, list[int]]]:
    """A table whose history leaves expiry something of every kind to remove: appends,
    row deletes (position delete files on v2, deletion vectors on v3), a statistics file, a
    compaction (and a rewrite of the delete files it left dangling) and an overwrite
    (replaced data files and manifests), a tag on the first snapshot and a branch with a
    commit of its own. Returns it and the ids of main, the tag and the branch."""
    table = await aioiceberg.connect(str(root)).create_table(
        "db.t",
        schema=EVENTS,
        partition_by=["region"],
        properties={"format-version": str(version), "write.delete.mode": "merge-on-read"},
    )
    for i in range(4):
        await table.append(rows(i * 30, 30))
    first, second = (s.snapshot_id for s in table.history()[:2])
    async with table.manage_snapshots() as ms:
        ms.create_tag("v1", first)
        ms.create_branch("dev", second)
    await table.append(rows(500, 6), branch="dev")
    await table.delete("id in (3, 4, 33, 34, 63, 64)")
    await table.compute_statistics(["id"])
    await table.delete("id in (90, 91, 92, 5)")
    await table.rewrite_data_files()
    await table.rewrite_position_delete_files({"rewrite-all": "true"})  # the compacted ones' go
    await table.delete("id in (100, 101)")
    await table.overwrite(rows(200, 6), "id < 30")
    await table.append(rows(300, 9))
    gone = {3, 4, 33, 34, 63, 64, 90, 91, 92, 5, 100, 101}
    main = sorted(i for i in range(120) if i >= 30 and i not in gone) + list(range(200, 206))
    expected = {
        "main": main + list(range(300, 309)),
        "v1": list(range(30)),
        "dev": list(range(60)) + list(range(500, 506)),
    }
    return table, expected


async def add_orphans(table: Table) -> tuple[list[Path], list[Path]]:
    """A failed write's data files (written, never committed) and strays under data/,
    metadata/ and the top; (old ones, recent ones). The table's own files are made old."""
    location = Path(table.location.removeprefix("file://"))
    md = table.metadata
    provider = LocationProvider(table.location, md.properties)
    written = await write_data_files(
        table.io, md.schema(), md.spec(), rows(900, 9), provider, md.properties, task_id=77
    )
    failed_write = [Path(f.file_path.removeprefix("file://")) for f in written]
    old = [
        *failed_write,
        location / "data" / "region=eu" / "stray-old.parquet",
        location / "metadata" / "snap-0-failed.avro",
        location / "metadata" / ".aioiceberg-tmp-dead",
        location / "stray-top.bin",
    ]
    recent = [location / "data" / "region=us" / "stray-recent.parquet", location / "metadata" / "recent.avro"]
    for path in old[len(failed_write) :] + recent:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    then = time.time() - OLD
    for path in location.rglob("*"):
        if path.is_file() and path not in recent:
            os.utime(path, (then, then))
    return sorted(old), recent


def files_under(root: Path) -> set[str]:
    """Files under ``root`` but the local store's lock files."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != LOCK_NAME}


def relative(paths: list[str], root: Path) -> list[str]:
    return sorted(str(Path(p.removeprefix("file://").removeprefix("file:")).relative_to(root)) for p in paths)


def restore(saved: Path, root: Path) -> None:
    shutil.rmtree(root)
    shutil.copytree(saved, root, symlinks=True)  # copy2: mtimes kept


def save(root: Path, saved: Path) -> None:
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(root, saved, symlinks=True)


def delete_files_of(table: Table) -> set[str]:
    """Every delete file (position deletes or DVs) any snapshot of ``table`` names."""
    walker = ManifestWalker(table.io)

    async def walk() -> set[str]:
        found: set[str] = set()
        for snapshot in table.snapshots():
            for m in await walker.manifests(snapshot):
                found |= {
                    e.data_file.file_path
                    for e in await walker.entries(m)
                    if e.data_file.content != DataFileContent.DATA
                }
        return found

    return default_loop.run(walk())


def read_refs(location: str) -> dict[str, list[int]]:
    table = sync.load_table(location)
    return {ref: ids(table.scan(ref=ref).to_arrow()) for ref in ("main", "v1", "dev")}


EXPIRE_FIELDS = (
    "expired_snapshot_ids",
    "removed_refs",
    "deleted_content_files",
    "deleted_manifests",
    "deleted_manifest_lists",
    "deleted_statistics_files",
    "failed_deletes",
)


def expire_view(result: ExpireResult, root: Path) -> dict[str, list[Any]]:
    return {
        name: relative(getattr(result, name), root)
        if name.startswith(("deleted", "failed"))
        else getattr(result, name)
        for name in EXPIRE_FIELDS
    }


def test_orphans_and_expiry_on_the_cluster_remove_what_one_process_removes(
    spark: Any, tmp_path: Path
) -> None:
    """On a v3 table (deletion vectors); the next test compares both on a v2 one (position
    delete files) with a folder that refuses deletes."""
    root, saved = tmp_path / "wh", tmp_path / "saved"
    table, expected = default_loop.run(history_table(root, 3))
    location = table.location
    old, recent = default_loop.run(add_orphans(table))
    assert read_refs(location) == expected

    # orphans: the single-process removal, then (on the same table put back) the cluster's
    save(root, saved)
    single = sync.load_table(location).remove_orphan_files(ORPHAN_AGE)
    left = files_under(root)
    restore(saved, root)
    preview = delete_orphan_files(spark, location, older_than=ORPHAN_AGE, dry_run=True)
    assert files_under(root) == files_under(saved)  # a dry run deletes nothing
    removed = delete_orphan_files(spark, location, older_than=ORPHAN_AGE)
    assert removed == preview == single
    assert relative(removed, root) == sorted(str(p.relative_to(root)) for p in old)
    assert files_under(root) == left and all(p.exists() for p in recent)
    assert read_refs(location) == expected

    # expiry: main keeps its last two snapshots, the tag and the branch theirs
    save(root, saved)
    deletes_before = delete_files_of(sync.load_table(location).aio)
    cutoff = int(time.time() * 1000) + 60_000
    one = sync.load_table(location).expire_snapshots(older_than=cutoff, retain_last=2)
    left = files_under(root)
    restore(saved, root)
    preview_result = expire_snapshots(spark, location, older_than=cutoff, retain_last=2, dry_run=True)
    assert files_under(root) == files_under(saved)
    two = expire_snapshots(spark, location, older_than=cutoff, retain_last=2)
    assert expire_view(two, root) == expire_view(one, root)
    dry = expire_view(preview_result, root)
    assert dry == expire_view(two, root)
    assert files_under(root) == left
    assert not two.failed_deletes and two.cleanup_error is None
    # every kind went: data and delete files, manifests, manifest lists, the statistics file
    assert two.deleted_manifests and two.deleted_manifest_lists and two.deleted_statistics_files
    deleted = set(two.deleted_content_files)
    assert deleted - deletes_before and deleted & deletes_before
    assert deletes_before - deleted  # the remaining snapshots' delete files stay
    after = sync.load_table(location)
    assert len(after.snapshots()) < len(table.snapshots())
    assert read_refs(location) == expected
    assert duckdb_ids(after.metadata_location) == expected["main"]


@contextlib.contextmanager
def undeletable(folder: Path) -> Iterator[None]:
    """No file in ``folder`` can be deleted meanwhile: the folder read-only, and immutable
    when running as root (whom permissions do not stop)."""
    as_root = os.geteuid() == 0
    if as_root and shutil.which("chattr") is None:
        pytest.skip("running as root without chattr: no folder can refuse a delete")
    folder.chmod(0o555)
    try:
        if as_root:
            done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"chattr +i refused here: {done.stderr.strip()}")
        yield
    finally:
        if as_root:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True, check=False)
        folder.chmod(0o755)


def test_a_delete_that_fails_is_reported_not_counted(spark: Any, tmp_path: Path) -> None:
    root, saved = tmp_path / "wh", tmp_path / "saved"
    table, expected = default_loop.run(history_table(root, 2))
    location = table.location
    old, _ = default_loop.run(add_orphans(table))
    stuck_folder = Path(location.removeprefix("file://")) / "data" / "region=eu"
    stuck = [p for p in old if p.parent == stuck_folder]
    assert stuck and len(stuck) < len(old)

    save(root, saved)
    with undeletable(stuck_folder), pytest.raises(StoreError) as single_error:
        sync.load_table(location).remove_orphan_files(ORPHAN_AGE)
    left = files_under(root)
    restore(saved, root)
    with undeletable(stuck_folder), pytest.raises(StoreError) as spark_error:
        delete_orphan_files(spark, location, older_than=ORPHAN_AGE)
    assert files_under(root) == left
    for path in old:
        assert path.exists() == (path in stuck), path  # the others were deleted
    for path in stuck:
        assert str(path) in str(spark_error.value) and str(path) in str(single_error.value)

    # expiry: the commit lands; the files it could not delete are named, not counted
    save(root, saved)
    cutoff = int(time.time() * 1000) + 60_000
    with undeletable(stuck_folder):
        one = sync.load_table(location).expire_snapshots(older_than=cutoff, retain_last=1)
    left = files_under(root)
    restore(saved, root)
    with undeletable(stuck_folder):
        two = expire_snapshots(spark, location, older_than=cutoff, retain_last=1)
    assert expire_view(two, root) == expire_view(one, root)
    assert files_under(root) == left
    assert two.failed_deletes and two.deleted_content_files
    for failed in two.failed_deletes:
        left_file = Path(failed.removeprefix("file://"))
        assert left_file.parent == stuck_folder and left_file.exists()
    assert not set(two.failed_deletes) & set(two.deleted_files)
    assert ids(sync.load_table(location).scan().to_arrow()) == expected["main"]


def test_no_action_fetches_a_manifest_or_lists_a_prefix_twice(spark: Any, moto_endpoint: str) -> None:
    options = s3_storage_options(moto_endpoint)
    bucket = asyncio.run(create_bucket(moto_endpoint))
    catalog = sync.connect(f"s3://{bucket}/wh", storage_options=options)
    table = catalog.create_table(
        "db.t", schema=EVENTS, partition_by=["region"], properties={"write.delete.mode": "merge-on-read"}
    )
    for i in range(4):
        table.append(rows(i * 30, 30))
    table.delete("id in (3, 4, 33)")
    table.overwrite(rows(200, 6), "id < 30")
    table = table.refresh()
    main_ids = ids(table.scan().to_arrow())
    location = table.location
    default_loop.run(table.io.write(f"{location}/data/stray.parquet", b"x"))
    seen: list[tuple[str, str]] = []

    def record(request: web.Request) -> bool:  # the proxy asks about every request: log it
        seen.append((request.method, request.path_qs))
        return False

    with FaultProxy(moto_endpoint) as proxy:
        proxy.configure(delay_filter=record)
        through = s3_storage_options(proxy.url)
        later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        expire_ms = int(later.timestamp() * 1000)
        actions: list[Callable[[], object]] = [  # the dry runs, then the real ones
            lambda: delete_orphan_files(spark, location, through, older_than=later, dry_run=True),
            lambda: expire_snapshots(
                spark, location, through, older_than=expire_ms, retain_last=1, dry_run=True
            ),
            lambda: delete_orphan_files(spark, location, through, older_than=later),
            lambda: expire_snapshots(spark, location, through, older_than=expire_ms, retain_last=1),
        ]
        for action in actions:
            seen.clear()
            action()
            reads = Counter(p for m, p in seen if m == "GET" and p.endswith(".avro"))
            lists = Counter(p for m, p in seen if m == "GET" and "list-type=2" in p)
            assert reads and max(reads.values()) == 1, [p for p, n in reads.items() if n > 1]
            assert max(lists.values(), default=1) == 1, [p for p, n in lists.items() if n > 1]
        assert seen
    assert not default_loop.run(table.io.exists(f"{location}/data/stray.parquet"))
    assert len(sync.load_table(location, options).snapshots()) == 1
    assert ids(sync.load_table(location, options).scan().to_arrow()) == main_ids
