"""Compaction (``aioiceberg.spark.actions.rewrite_data_files``) on the standalone cluster: a
master and two one-core workers (tests/servers/spark_cluster.py), a table of 2,000 small files
in moto S3 (the executors reach it only through the action's storage options), and an
executor JVM killed while the groups are being rewritten. Spark runs the lost tasks again;
every group is committed once, the rows are those from before, the lost attempts' files
are not in the table."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

from compaction_helpers import SCHEMA, add_small_files, sorted_rows
from maint_helpers import duckdb_connection, pyiceberg_table
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.spark_cluster import SparkCluster, cluster_session, executor_processes

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.compaction import RewriteDataFilesResult
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.actions import rewrite_data_files

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
