"""Retries, unknown outcomes and the capability probe, through the fault proxy in front of moto."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import anyio
import pyarrow as pa
import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy, conditional_put

from aioiceberg.errors import ConditionalWritesUnsupportedError, StoreError, WriteOutcomeUnknownError
from aioiceberg.io import FileIO, MemoryFileIO, Outcome, S3FileIO, probe, require_conditional_writes
from aioiceberg.io.fsspec_io import FsspecFileIO
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO
from aioiceberg.io.s3_client import S3Options
from aioiceberg.retrying import Backoff
from aioiceberg.runtime import clear_probe_cache, default_runtime

pytestmark = pytest.mark.anyio

_SCHEMA = pa.schema([pa.field("id", pa.int64())])
# 0.3**30 per request: a storm of 30% rejections never exhausts this budget by chance
FAST_RETRY = Backoff("test store request", base_delay_s=0.005, max_delay_s=0.1, max_attempts=30)


@pytest.fixture(params=["obstore", "aiobotocore"])
async def proxied(
    request: pytest.FixtureRequest, fault_proxy: FaultProxy, moto_endpoint: str
) -> AsyncIterator[tuple[FileIO, str]]:
    """Each S3 backend talking to moto through the proxy, and a fresh bucket."""
    bucket = await create_bucket(moto_endpoint)
    base = S3Options.from_storage_options(s3_storage_options(fault_proxy.url))
    options = dataclasses.replace(base, backoff=FAST_RETRY)
    io: FileIO = (
        ObstoreS3FileIO(options=options).bind_runtime(default_runtime())
        if request.param == "obstore"
        else S3FileIO(options=options).bind_runtime(default_runtime())
    )
    clear_probe_cache()
    try:
        yield io, f"s3://{bucket}/"
    finally:
        await io.aclose()
        clear_probe_cache()


async def test_reads_and_idempotent_writes_survive_thirty_percent_slowdowns(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    io, base = proxied
    fault_proxy.configure(slowdown_rate=0.3, seed=1)

    async def roundtrip(i: int) -> None:
        loc = f"{base}obj/{i:03d}"
        value = f"value-{i}".encode() * 10
        await io.write(loc, value)
        assert await io.read(loc) == value
        assert await io.read_range(loc, 6, 4) == value[6:10]
        assert (await io.head(loc)).size == len(value)

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(roundtrip, i)
    listed = [o async for o in io.list(f"{base}obj/", page_size=7)]
    assert len(listed) == 40
    await io.delete_many(o.location for o in listed)
    assert [o async for o in io.list(f"{base}obj/")] == []
    assert fault_proxy.stats.slowdowns > 20


async def test_conditional_writes_are_retried_after_a_slowdown_rejection(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    """503 SlowDown is a definite rejection (the request was not applied), so retrying is safe."""
    io, base = proxied
    fault_proxy.configure(slowdown_rate=0.3, seed=2)
    for i in range(15):
        info = await io.write_if_absent(f"{base}c/{i}", b"x")
        await io.write_if_match(f"{base}c/{i}", b"y", info.etag)
    assert fault_proxy.stats.slowdowns > 0


async def test_a_dropped_response_to_a_create_only_put_is_reported_unknown(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    io, base = proxied
    loc = f"{base}meta/v1.json"
    fault_proxy.configure(drop_filter=conditional_put, drop_next=1)
    with pytest.raises(WriteOutcomeUnknownError) as caught:
        await io.write_if_absent(loc, b"mine")
    assert Outcome.of(caught.value) is Outcome.UNKNOWN
    assert fault_proxy.stats.dropped == 1
    # the write did land: a blind retry would now have seen 412 and called it a lost race
    assert await io.read(loc) == b"mine"


async def test_a_dropped_response_to_a_write_if_match_is_reported_unknown(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    io, base = proxied
    loc = f"{base}pointer"
    v1 = await io.write(loc, b"v1")
    fault_proxy.configure(drop_filter=conditional_put, drop_next=1)
    with pytest.raises(WriteOutcomeUnknownError):
        await io.write_if_match(loc, b"v2", v1.etag)
    assert await io.read(loc) == b"v2"


async def test_a_dropped_response_to_a_plain_write_is_retried_to_success(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    io, base = proxied
    fault_proxy.configure(drop_filter=lambda r: r.method in {"PUT", "GET"}, drop_next=2)
    await io.write(f"{base}data.parquet", b"rows")
    assert await io.read(f"{base}data.parquet") == b"rows"
    assert fault_proxy.stats.dropped == 2


async def test_probe_accepts_a_store_that_honours_conditional_writes(moto_endpoint: str) -> None:
    clear_probe_cache()
    bucket = await create_bucket(moto_endpoint)
    io = S3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    try:
        result = await require_conditional_writes(io, f"s3://{bucket}/warehouse")
        assert result.create_only and result.replace_if_match and result.delete_if_match
        assert await probe(io, f"s3://{bucket}/other") is result  # cached per bucket
        assert [o async for o in io.list(f"s3://{bucket}/")] == []  # the probe cleans up
    finally:
        await io.aclose()


async def test_probe_refuses_a_store_that_ignores_if_none_match(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    """Simulated by stripping the condition headers in the proxy (moto does not verify SigV4)."""
    io, base = proxied
    fault_proxy.configure(ignore_conditions=True)
    await io.write_if_absent(f"{base}k", b"first")
    await io.write_if_absent(f"{base}k", b"second")  # accepted and overwritten: the unsafe store
    assert await io.read(f"{base}k") == b"second"
    with pytest.raises(ConditionalWritesUnsupportedError, match="If-None-Match"):
        await require_conditional_writes(io, base)
    assert not (await probe(io, base)).safe_for_commits


async def test_probe_refuses_an_fsspec_store_and_accepts_memory() -> None:
    clear_probe_cache()
    with pytest.raises(ConditionalWritesUnsupportedError):
        await require_conditional_writes(
            FsspecFileIO("memory").bind_runtime(default_runtime()), "memory://x/"
        )
    assert (await probe(MemoryFileIO().bind_runtime(default_runtime()), "memory://y/")).safe_for_commits


@pytest.mark.localstack
async def test_probe_on_localstack_reports_no_conditional_delete(localstack_endpoint: str) -> None:
    clear_probe_cache()
    bucket = await create_bucket(localstack_endpoint)
    io = S3FileIO(s3_storage_options(localstack_endpoint)).bind_runtime(default_runtime())
    try:
        result = await require_conditional_writes(io, f"s3://{bucket}/")
        assert result.safe_for_commits and not result.delete_if_match
    finally:
        await io.aclose()


@pytest.mark.parametrize("nth", [1, 2, 3, 4])
async def test_probe_settles_a_lost_response_on_any_of_its_writes(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy, nth: int
) -> None:
    """The response of the probe's nth conditional PUT is lost after the store applied it."""
    io, base = proxied
    seen = 0

    def nth_conditional_put(request: object) -> bool:
        nonlocal seen
        if not conditional_put(request):  # type: ignore[arg-type]
            return False
        seen += 1
        return seen == nth

    fault_proxy.configure(drop_filter=nth_conditional_put, drop_next=1)
    result = await require_conditional_writes(io, base)
    assert fault_proxy.stats.dropped == 1
    assert result.create_only and result.replace_if_match, result.detail
    fault_proxy.reset()
    assert [o async for o in io.list(base)] == []  # every probe key cleaned up


async def test_probe_that_cannot_decide_says_so_and_is_retryable(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    io, base = proxied
    fault_proxy.configure(drop_filter=lambda r: r.method in {"PUT", "GET"}, drop_next=10_000)
    with pytest.raises(StoreError, match="capability probe") as caught:
        await require_conditional_writes(io, base)
    assert caught.value.retryable


async def test_append_survives_a_lost_response_to_the_probe(
    fault_proxy: FaultProxy, moto_endpoint: str
) -> None:
    """A first commit to a store runs the probe; losing its first response must not fail the append."""
    import aioiceberg
    from aioiceberg.runtime import close_all_clients

    clear_probe_cache()
    bucket = await create_bucket(moto_endpoint)
    options = {**s3_storage_options(fault_proxy.url)}
    catalog = aioiceberg.connect(f"s3://{bucket}/wh", storage_options=options)
    probe_put = lambda r: conditional_put(r) and ".aioiceberg-probe/" in r.path  # noqa: E731
    fault_proxy.configure(drop_filter=probe_put, drop_next=1)
    try:
        table = await catalog.create_table("db.t", schema=_SCHEMA)
        await table.append(pa.table({"id": [1, 2, 3]}, schema=_SCHEMA))
        assert fault_proxy.stats.dropped == 1
        assert (await catalog.load_table("db.t")).scan() is not None
        assert len((await catalog.load_table("db.t")).snapshots()) == 1
    finally:
        await close_all_clients()


async def test_a_request_the_store_does_not_implement_fails_at_once(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    # s3proxy answers 501 to a checksum header it does not know: retrying cannot change that
    io, base = proxied
    await io.write(f"{base}obj", b"x")
    fault_proxy.configure(unimplemented_filter=lambda r: r.method == "GET" and r.path.endswith("/obj"))
    before = fault_proxy.stats.by_method.get("GET", 0)
    with pytest.raises(StoreError, match="501") as raised:
        await io.read(f"{base}obj")
    assert not raised.value.retryable
    assert fault_proxy.stats.by_method.get("GET", 0) - before == 1  # asked once, not retried


async def test_manifest_reads_count_each_retry_and_stop_at_a_refusal(
    proxied: tuple[FileIO, str], fault_proxy: FaultProxy
) -> None:
    # a read's first attempt runs outside the retry loop on some backends: its failures
    # must still be retried and counted like any other
    io, base = proxied
    values = {f"{base}m/{i:02d}": f"manifest-{i}".encode() * (i + 1) for i in range(30)}
    for loc, value in values.items():
        await io.write(loc, value)
    retries, slowdowns = io.retries.retries, fault_proxy.stats.slowdowns  # type: ignore[attr-defined]
    fault_proxy.configure(slowdown_rate=0.4, seed=7)
    for loc, value in values.items():
        assert await io.read_expecting(loc, len(value)) == value
        assert await io.read_expecting(loc, len(value) - 3) == value  # recorded short: read whole
    fault_proxy.configure(slowdown_rate=0.0)
    assert fault_proxy.stats.slowdowns > slowdowns
    assert io.retries.retries - retries == fault_proxy.stats.slowdowns - slowdowns  # type: ignore[attr-defined]
    loc = next(iter(values))
    fault_proxy.configure(unimplemented_filter=lambda r: r.method == "GET" and r.path.endswith("/m/00"))
    before = fault_proxy.stats.by_method.get("GET", 0)
    with pytest.raises(StoreError, match="501") as raised:
        await io.read_expecting(loc, len(values[loc]))
    assert not raised.value.retryable and raised.value.location == loc
    assert fault_proxy.stats.by_method.get("GET", 0) - before == 1
