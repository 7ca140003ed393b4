"""The runtime owns what tables and scans share: clients, caches, pools; one lifecycle."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pyarrow as pa
import pytest
from fork_helpers import in_forked_child
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.errors import ValidationError
from aioiceberg.io import LocalFileIO, S3Options, resolve_io
from aioiceberg.runtime import Runtime, default_runtime

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.int32())])
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, json, sys
import aioiceberg

async def main(location, options):
    table = await aioiceberg.load_table(location, storage_options=options)
    tasks = [t async for t in table.scan(row_filter="id > 3").plan_files()]
    rows = await table.scan(row_filter="id > 3").to_arrow()
    assert len(tasks) == 2 and rows.num_rows == 8, (len(tasks), rows.num_rows)

asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
"""


async def _s3_table(endpoint: str) -> str:
    bucket = await create_bucket(endpoint)
    async with aioiceberg.connect(f"s3://{bucket}/wh", storage_options=s3_storage_options(endpoint)) as c:
        table = await c.create_table("db.t", schema=SCHEMA)
        for k in range(2):
            await table.append(pa.table({"id": list(range(8)), "day": [k] * 8}, schema=SCHEMA))
        return table.location


async def _days_table(root: Path, days: int, rows_per_day: int) -> aioiceberg.Table:
    """One file (and manifest) per day, on a runtime of its own with the manifest cache off."""
    catalog = aioiceberg.connect(str(root / "wh"), runtime=Runtime(manifest_cache_bytes=0))
    table = await catalog.create_table("db.t", schema=SCHEMA)
    for k in range(days):
        await table.append(
            pa.table({"id": list(range(rows_per_day)), "day": [k] * rows_per_day}, schema=SCHEMA)
        )
    return table


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["obstore", "aiobotocore"])
async def test_a_script_that_loads_plans_and_reads_exits_silently_under_w_error(
    moto_endpoint: str, backend: str
) -> None:
    """No "Unclosed client session" at exit: the default runtime closes a loop's clients
    when ``asyncio.run`` shuts the loop down."""
    location = await _s3_table(moto_endpoint)
    options = {**s3_storage_options(moto_endpoint), "io.backend": backend}
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT, location, json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_clients_of_a_loop_close_when_asyncio_run_ends(moto_endpoint: str) -> None:
    runtime = Runtime()
    options = S3Options.from_storage_options(s3_storage_options(moto_endpoint))
    sessions: list[object] = []

    async def use() -> None:
        client = await runtime.clients.get(options)
        await client.list_buckets()
        sessions.append(client._endpoint.http_session)

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            asyncio.run(use())
            gc.collect()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert sessions and sessions[0]._sessions is None  # closed, not left to __del__ at exit
    assert len(runtime.clients._loops) == 0


@pytest.mark.anyio
async def test_catalogs_with_their_own_runtimes_share_nothing(tmp_path: Path) -> None:
    async with Runtime() as one, Runtime() as two:
        a = aioiceberg.connect(str(tmp_path / "wh"), runtime=one)
        table = await a.create_table("db.t", schema=SCHEMA)
        await table.append(pa.table({"id": [1, 2], "day": [0, 0]}, schema=SCHEMA))
        assert a.runtime is one and table.io.runtime is one
        assert [t async for t in table.scan().plan_files()]
        assert len(one.manifest_cache) > 0
        assert len(two.manifest_cache) == 0

        b = aioiceberg.connect(str(tmp_path / "wh"), runtime=two)
        again = await b.load_table("db.t")
        assert (await again.scan().to_arrow()).num_rows == 2
        assert len(two.manifest_cache) > 0
        await one.aclose()
        assert len(one.manifest_cache) == 0 and len(two.manifest_cache) > 0


@pytest.mark.anyio
async def test_a_catalog_closes_the_runtime_it_made_and_not_one_it_was_given(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as own:
        table = await own.create_table("db.t", schema=SCHEMA)
        await table.append(pa.table({"id": [1], "day": [0]}, schema=SCHEMA))
        assert [t async for t in table.scan().plan_files()]
        made = own.runtime
        assert made is not default_runtime() and len(made.manifest_cache) > 0
    assert len(made.manifest_cache) == 0  # closed with its catalog
    shared = Runtime()
    async with aioiceberg.connect(str(tmp_path / "wh"), runtime=shared) as given:
        assert [t async for t in (await given.load_table("db.t")).scan().plan_files()]
    assert len(shared.manifest_cache) > 0  # its owner closes it
    await shared.aclose()


@pytest.mark.anyio
async def test_memory_locations_are_the_processs_whatever_the_runtime() -> None:
    await resolve_io("memory://x/a", runtime=Runtime()).write("memory://x/a", b"1")
    assert await resolve_io("memory://x/a", runtime=Runtime()).read("memory://x/a") == b"1"
    assert await resolve_io("memory://x/a", runtime=default_runtime()).read("memory://x/a") == b"1"


def test_a_file_io_has_the_runtime_its_maker_gives_it_and_no_other() -> None:
    given = Runtime()
    assert resolve_io("memory://x/a", runtime=given).runtime is given
    assert LocalFileIO().bind_runtime(given).runtime is given
    with pytest.raises(ValidationError, match="LocalFileIO has no runtime"):
        _ = LocalFileIO().runtime  # never the default runtime behind its maker's back


@pytest.mark.anyio
async def test_planning_leaves_the_collector_alone_unless_the_runtime_opts_in(tmp_path: Path) -> None:
    """Pausing the cyclic GC is process-wide, so only ``Runtime(pause_gc=True)`` may do it."""
    table = await _days_table(tmp_path, 12, 400)
    seen_disabled = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if not gc.isenabled():
                seen_disabled.set()

    assert gc.isenabled()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(5):
            assert len([t async for t in table.scan(decode_workers=1).plan_files()]) == 12
    finally:
        stop.set()
        watcher.join()
    assert not seen_disabled.is_set()
    opted = aioiceberg.connect(str(tmp_path / "wh"), runtime=Runtime(pause_gc=True))
    assert len([t async for t in (await opted.load_table("db.t")).scan().plan_files()]) == 12
    assert gc.isenabled()  # restored once the last pause ends


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.anyio
async def test_a_forked_child_plans_after_its_parent_used_the_columnar_decoder(tmp_path: Path) -> None:
    """polars' threads do not survive a fork (a child whose parent was inside a polars call
    at the fork waits for them forever), so the child decodes with fastavro."""
    table = await _days_table(tmp_path, 6, 10)
    scan = table.scan(row_filter="day >= 2", columnar_min_entries=0)
    assert len([t async for t in scan.plan_files()]) == 4
    assert scan.metrics.decoded_columnar > 0
    in_forked_child(lambda: asyncio.run(_plan_in_child(table.location)) == (4, 0), "planning")


async def _plan_in_child(location: str) -> tuple[int, int]:
    """(tasks, manifests decoded by polars) of the child's plan: it must use fastavro."""
    table = await aioiceberg.load_table(location)
    scan = table.scan(row_filter="day >= 2", columnar_min_entries=0)
    return len([t async for t in scan.plan_files()]), scan.metrics.decoded_columnar


@pytest.mark.anyio
async def test_two_plans_at_once_on_one_scan_count_their_own_metrics(tmp_path: Path) -> None:
    from aioiceberg.scan.plan_metrics import PlanMetrics

    table = await _days_table(tmp_path, 6, 5)
    scan = table.scan(row_filter="day >= 1", io_concurrency=1)
    first, second = PlanMetrics(), PlanMetrics()
    one, two = scan.plan_files(first), scan.plan_files(second)
    got_one = [await anext(one)]  # the first plan is under way when the second starts
    got_two = [t async for t in two]
    got_one += [t async for t in one]
    assert len(got_one) == len(got_two) == 5
    for m in (first, second):
        assert (m.tasks, m.manifests_total, m.manifests_read) == (5, 6, 6)
        assert m.planning_time_s is not None
    assert scan.metrics is second  # the scan's own view: the last plan started
