"""The DynamoDB lease lock (``dynamodb://TABLE?mode=lease``) on moto: mutual exclusion between
tasks and processes, takeover only of a lease that stopped moving, commits aborted when
their heartbeat lapsed, and lossless appends on a store without conditional writes."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web
from commit_helpers import ARROW_SCHEMA, FAST_RETRY, rows, run_writer, s3_options
from servers.backends import create_bucket
from servers.proxy import FaultProxy

import aioiceberg
from aioiceberg.commit.protocols.base import version_path
from aioiceberg.commit.protocols.dynamodb import DynamoDbOptions, DynamoDbProtocol, LeaseLock
from aioiceberg.errors import (
    CommitConflictError,
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    TableAlreadyExistsError,
)
from aioiceberg.io import FileIO, S3FileIO
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.usefixtures("aws_clients_closed")

TESTS = Path(__file__).resolve().parents[1]
Interval = tuple[float, float]


def lease_uri(lease_ms: int, endpoint: str | None = None) -> str:
    uri = f"dynamodb://lease_{uuid.uuid4().hex[:8]}?mode=lease&lease_ms={lease_ms}"
    return uri + (f"&endpoint={endpoint}" if endpoint else "")


def new_lock(endpoint: str, uri: str, table_id: str = "s3://b/t") -> LeaseLock:
    options = DynamoDbOptions.from_uri(uri, s3_options(endpoint))
    protocol = DynamoDbProtocol(S3FileIO(s3_options(endpoint)).bind_runtime(default_runtime()), options)
    return LeaseLock(protocol.dynamo, table_id, options.lease_ms)


async def ready(lock: LeaseLock) -> None:
    """Create the commit table before writers contend: moto creates tables non-atomically, so
    racing first uses could replace a table (and the lock item in it) just written."""
    await lock.acquire()
    await lock.release()


def fsspec_options(endpoint: str) -> dict[str, Any]:
    """s3fs over moto: plain writes only, so conditional-write commits are refused. (Every
    option goes to s3fs, so the DynamoDB endpoint goes in the lock URI.)"""
    return {
        "io.backend": "fsspec",
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }


async def increment(io: FileIO, counter: str) -> None:
    """A read-modify-write with plain writes: loses updates unless callers are serialised."""
    try:
        value = int(await io.read(counter))
    except ObjectNotFoundError:
        value = 0
    await anyio.sleep(0.01)
    await io.write(counter, str(value + 1).encode())


async def hold_and_increment(
    lock: LeaseLock, io: FileIO, counter: str, times: int, clock: Callable[[], float]
) -> list[Interval]:
    held: list[Interval] = []
    for _ in range(times):
        async with lock.held():
            entered = clock()
            await increment(io, counter)
            held.append((entered, clock()))
    return held


def assert_disjoint(intervals: list[Interval]) -> None:
    ordered = sorted(intervals)
    for (_, end), (start, _) in itertools.pairwise(ordered):
        assert end <= start, f"two holders at once: one left at {end}, the next entered at {start}"


@pytest.mark.anyio
async def test_tasks_hold_the_lease_one_at_a_time_and_lose_no_update(moto_endpoint: str) -> None:
    uri, bucket = lease_uri(3000), await create_bucket(moto_endpoint)
    io = S3FileIO(s3_options(moto_endpoint)).bind_runtime(default_runtime())
    counter = f"s3://{bucket}/counter"
    locks = [new_lock(moto_endpoint, uri) for _ in range(4)]
    await ready(locks[0])
    results = await asyncio.gather(*(hold_and_increment(k, io, counter, 5, time.monotonic) for k in locks))
    assert_disjoint([i for r in results for i in r])
    assert await io.read(counter) == b"20"


@pytest.mark.anyio
async def test_processes_hold_the_lease_one_at_a_time_and_lose_no_update(moto_endpoint: str) -> None:
    uri, bucket = lease_uri(3000), await create_bucket(moto_endpoint)
    counter = f"s3://{bucket}/counter"
    await ready(new_lock(moto_endpoint, uri))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            moto_endpoint,
            uri,
            counter,
            "5",
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        for _ in range(3)
    ]
    outputs = [await p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    intervals = [tuple(i) for out, _ in outputs for i in json.loads(out.decode().splitlines()[-1])]
    assert len(intervals) == 15
    assert_disjoint(intervals)  # type: ignore[arg-type]
    assert await S3FileIO(s3_options(moto_endpoint)).bind_runtime(default_runtime()).read(counter) == b"15"


@pytest.mark.anyio
async def test_a_renewing_holder_keeps_the_lease_and_a_silent_one_loses_it_only_after_a_full_lease(
    moto_endpoint: str,
) -> None:
    uri = lease_uri(500)
    holder, taker = new_lock(moto_endpoint, uri), new_lock(moto_endpoint, uri)
    await holder.acquire()
    taken = anyio.Event()
    taken_at = 0.0

    async def take() -> None:
        nonlocal taken_at
        await taker.acquire()
        taken_at = time.monotonic()
        taken.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        renew_until = time.monotonic() + 1.6  # more than three leases of waiting
        while time.monotonic() < renew_until:
            await anyio.sleep(0.12)
            assert await holder.heartbeat() is True
            assert not taken.is_set()
        silent_from = time.monotonic()  # the holder stops renewing here
        with anyio.fail_after(5):
            await taken.wait()
    assert holder.lapsed()  # its own deadline passed before the takeover ...
    assert taken_at >= holder.valid_until
    assert taken_at - silent_from >= 0.5 - 0.12  # ... a whole lease after its last renewal
    assert await holder.heartbeat() is False and holder.lapsed()
    await holder.release()  # owner-conditional: leaves the taker's lock alone
    assert await taker.heartbeat() is True
    await taker.release()


def heartbeat_request(request: web.Request) -> bool:
    return request.headers.get("X-Amz-Target", "").endswith(".UpdateItem")


@pytest.mark.anyio
async def test_commit_whose_heartbeat_lapsed_is_aborted_before_its_commit_point(
    fault_proxy: FaultProxy, moto_endpoint: str
) -> None:
    bucket = await create_bucket(moto_endpoint)
    options = s3_options(fault_proxy.url)  # S3 and DynamoDB through the proxy
    catalog = aioiceberg.connect(f"s3://{bucket}/wh", lock=lease_uri(2400), storage_options=options)
    props = {**FAST_RETRY, "commit.retry.num-retries": "0", "commit.in-process-lock": "false"}
    table = await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=props)
    # every renewal is refused and the commit stalls on its HEADs past the lease
    fault_proxy.configure(
        refuse_filter=heartbeat_request, delay_ms=1600, delay_filter=lambda r: r.method == "HEAD"
    )
    with pytest.raises(CommitConflictError, match=r"lease .* lapsed before the commit point"):
        await table.append(rows("w0", 0))
    assert fault_proxy.stats.slowdowns >= 1
    fault_proxy.reset()
    assert not await table.io.exists(version_path(table.location, 2))
    await table.refresh()
    assert table.version == 1 and table.current_snapshot() is None
    left = [i.location async for i in table.io.list(table.location + "/")]
    assert all(p.endswith(("v1.metadata.json", "version-hint.text")) for p in left), left
    await table.append(rows("w0", 0))  # the lease was released: the next commit goes through
    assert table.version == 2


@pytest.mark.anyio
async def test_appends_under_the_lease_on_a_store_without_conditional_writes_lose_nothing(
    moto_endpoint: str,
) -> None:
    from pyiceberg.table import StaticTable

    bucket = await create_bucket(moto_endpoint)
    root, options = f"s3://{bucket}/wh", fsspec_options(moto_endpoint)
    async with aioiceberg.connect(root, storage_options=options) as plain:
        with pytest.raises(ConditionalWritesUnsupportedError):
            await plain.create_table("db.refused", schema=ARROW_SCHEMA)
    lock = lease_uri(5000, moto_endpoint)
    catalog = aioiceberg.connect(root, lock=lock, storage_options=options)
    props = {**FAST_RETRY, "commit.in-process-lock": "false"}  # the tasks race through the lease
    table = await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=props)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    script = str(TESTS / "commit_helpers.py")
    args = [root, lock, json.dumps(options), "db.events"]
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, script, *args, f"p{i}", "2", stdout=asyncio.subprocess.PIPE, env=env
        )
        for i in (1, 2)
    ]
    tasks = [run_writer(root, lock, options, "db.events", f"w{i}", 2, close=True) for i in (3, 4, 5)]
    results = await asyncio.gather(*tasks, *(p.communicate() for p in procs))
    assert [p.returncode for p in procs] == [0, 0]
    acknowledged = [i for r in results[:3] for i in r]  # type: ignore[union-attr]
    acknowledged += [i for out, _ in results[3:] for i in json.loads(out.decode().splitlines()[-1])]  # type: ignore[misc]
    assert len(acknowledged) == 5 * 2 * 3
    await table.refresh()
    history = table.history()
    assert table.version == 11 and len(history) == 10
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]
    for version in range(1, 12):
        assert await table.io.exists(version_path(table.location, version))
    props = {k: v for k, v in s3_options(moto_endpoint).items() if k.startswith("s3.") and "path" not in k}
    ids = StaticTable.from_metadata(table.metadata_location, properties=props).scan().to_arrow()["id"]
    assert sorted(ids.to_pylist()) == sorted(acknowledged)
    await catalog.aclose()


@pytest.mark.anyio
async def test_a_writer_that_listed_the_table_still_sees_versions_added_since(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    root, options, lock = f"s3://{bucket}/wh", fsspec_options(moto_endpoint), lease_uri(5000, moto_endpoint)
    first = aioiceberg.connect(root, lock=lock, storage_options=options)
    second = aioiceberg.connect(root, lock=lock, storage_options=options)
    mine = await first.create_table("db.events", schema=ARROW_SCHEMA, properties=FAST_RETRY)
    await mine.append(rows("w1", 0))
    with pytest.raises(TableAlreadyExistsError):  # lists metadata/: fills s3fs's listings cache
        await first.create_table("db.events", schema=ARROW_SCHEMA)
    await (await second.load_table("db.events")).append(rows("w2", 100))
    await mine.set_properties(owner="w1")  # writes nothing under metadata/ before its commit
    await mine.refresh()
    try:
        assert mine.version == 4 and len(mine.history()) == 2
    finally:
        await first.aclose()
        await second.aclose()


def _main() -> None:
    """One lease-holding process: ``endpoint uri counter times`` in, held intervals (JSON) out."""
    endpoint, uri, counter, times = sys.argv[1:5]

    async def run() -> list[Interval]:
        from aioiceberg.runtime import close_all_clients

        try:
            io = S3FileIO(s3_options(endpoint)).bind_runtime(default_runtime())
            return await hold_and_increment(new_lock(endpoint, uri), io, counter, int(times), time.time)
        finally:
            await close_all_clients()

    print(json.dumps(asyncio.run(run())))


if __name__ == "__main__":
    _main()
