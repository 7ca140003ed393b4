"""The nginx benchmark store: S3 answers as clients see them, and each benchmark's tiny run on it.

Skipped where nginx (or its echo module) is not installed; nothing here needs root.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aioiceberg.runtime import default_runtime

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmark_runs import run_tiny  # noqa: E402

from benchmarks.nginx_store import NginxStore, nginx_missing  # noqa: E402
from benchmarks.s3_on_disk import S3OnDiskIO  # noqa: E402

MISSING = nginx_missing(delay_ms=5)
needs_nginx = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

BODY = bytes(range(256)) * 4  # 1024 bytes


@pytest.fixture(scope="module", params=[5.0, 0.0], ids=["delay5ms", "nodelay"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxStore]:
    root = tmp_path_factory.mktemp("nginx-root")

    async def write() -> None:
        io = S3OnDiskIO(root).bind_runtime(default_runtime())
        await io.write("s3://bench/a/obj.bin", BODY)
        await io.write("s3://bench/a/empty", b"")

    asyncio.run(write())
    with NginxStore(root, delay_ms=request.param) as store:
        yield store


def _client(store: NginxStore):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=store.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


@needs_nginx
def test_ranges_answer_206_with_content_range(served: NginxStore) -> None:
    s3 = _client(served)
    cases = {
        "bytes=10-19": ("bytes 10-19/1024", BODY[10:20]),
        "bytes=1000-5000": ("bytes 1000-1023/1024", BODY[1000:]),  # end clamped
        "bytes=-10": ("bytes 1014-1023/1024", BODY[-10:]),  # suffix
        "bytes=-5000": ("bytes 0-1023/1024", BODY),  # suffix longer than the object
    }
    for spec, (content_range, data) in cases.items():
        got = s3.get_object(Bucket="bench", Key="a/obj.bin", Range=spec)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206, spec
        assert got["ContentRange"] == content_range, spec
        assert got["Body"].read() == data, spec


@needs_nginx
def test_errors_carry_s3_codes(served: NginxStore) -> None:
    from botocore.exceptions import ClientError

    s3 = _client(served)
    expected = [
        ({"Key": "a/obj.bin", "Range": "bytes=1024-2000"}, 416, "InvalidRange"),
        ({"Key": "a/missing"}, 404, "NoSuchKey"),
        ({"Key": "a"}, 404, "NoSuchKey"),  # a directory is not a key (plain nginx: 301)
    ]
    for kwargs, status, code in expected:
        with pytest.raises(ClientError) as info:
            s3.get_object(Bucket="bench", **kwargs)
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
        assert info.value.response["Error"]["Code"] == code
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket="bench", Key="a/new", Body=b"x")
    assert info.value.response["Error"]["Code"] == "NotImplemented"
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket="bench", Key="a/missing")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


@needs_nginx
def test_head_and_the_documented_quirks(served: NginxStore) -> None:
    s3 = _client(served)
    head = s3.head_object(Bucket="bench", Key="a/obj.bin")
    assert head["ContentLength"] == 1024
    # nginx's ETag is "<mtime hex>-<size hex>", quoted, not an MD5
    assert head["ETag"].startswith('"') and head["ETag"].endswith('-400"')
    assert abs(head["LastModified"] - dt.datetime.now(dt.UTC)) < dt.timedelta(hours=1)
    # a Range on an empty object: 200 and no Content-Range (S3 would answer 416)
    empty = s3.get_object(Bucket="bench", Key="a/empty", Range="bytes=0-9")
    assert empty["ResponseMetadata"]["HTTPStatusCode"] == 200 and "ContentRange" not in empty


@needs_nginx
def test_delay_is_added_per_request(served: NginxStore) -> None:
    s3 = _client(served)
    s3.head_object(Bucket="bench", Key="a/obj.bin")  # connection open
    start = time.perf_counter()
    for _ in range(5):
        s3.get_object(Bucket="bench", Key="a/obj.bin", Range="bytes=0-0")["Body"].read()
    per_request = (time.perf_counter() - start) / 5
    assert per_request >= served.delay_ms / 1000 * 0.9


@needs_nginx
def test_aioiceberg_s3_io_reads_it(served: NginxStore) -> None:
    from aioiceberg.errors import ObjectNotFoundError
    from aioiceberg.io import resolve_io

    async def run() -> None:
        io = resolve_io("s3://bench/a/obj.bin", served.options(), runtime=default_runtime())
        try:
            block = await io.read_block("s3://bench/a/obj.bin", 1000, 100)
            assert (block.data, block.start, block.total_size) == (BODY[1000:], 1000, 1024)
            assert await io.read_tail("s3://bench/a/obj.bin", 5000) == BODY
            past = await io.read_block("s3://bench/a/obj.bin", 2000, 10)  # 416, then HEAD
            assert (past.data, past.total_size) == (b"", 1024)
            assert (await io.head("s3://bench/a/obj.bin")).size == 1024
            with pytest.raises(ObjectNotFoundError):
                await io.read("s3://bench/a/missing")
        finally:
            await io.aclose()

    asyncio.run(run())


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return run_tiny(script, *args, env=env).splitlines()


def _rows(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("| ")]


@needs_nginx
def test_plan_benchmark_tiny_run_on_nginx() -> None:
    """Tables built on disk with s3:// paths (ours, and PyIceberg's manifest writer's), planned
    through nginx (ours by both engines, PyIceberg's layout by our async plan: a tiny run)."""
    args = ("--stores", "nginx", "--delay-ms", "5", "--filters", "day_1pct", "--writer", "ours,pyiceberg")
    rows = _rows(_run("plan.py", *args))
    plans = [r.split("|") for r in rows if r.startswith("| nginx+5ms | 4x20 |") and r.count("|") > 10]
    # one day of 4 x 20 files, whoever wrote the manifests
    assert [(p[3].strip(), p[5].strip()) for p in plans] == [("ours", "20"), ("pyiceberg", "20")]
    tables = [r.split("|") for r in rows if r.startswith("| nginx+5ms | 4x20 | pyiceberg | 4 |")]
    assert len(tables) == 1 and tables[0][6].strip() == "1.0"  # PyIceberg: one entry a block
    service = [[c.strip() for c in r.split("|")] for r in rows if r.startswith("| 4x20 | nginx+5ms |")]
    assert [(c[3], c[4]) for c in service] == [("ours", "20")]  # a tiny run: the first writer's
    for cells in service:
        # a tiny run's one later query: timed and held to its floor
        assert cells[5] == "1" and cells[10].endswith("x") and cells[11].count("-") == 1


@needs_nginx
def test_plan_benchmark_tiny_run_holds_unfiltered_plans_to_the_bound() -> None:
    """An unfiltered cell's plans, each paired with the floors taken right before it, reported
    against issue 33's bound through both APIs (columnar output here)."""
    args = ("--stores", "nginx", "--delay-ms", "5", "--filters", "none", "--writer", "ours")
    lines = _run("plan.py", *args, "--no-pyiceberg", "--output", "batches")
    assert any(line.startswith("Bound, cold unfiltered plans: 1.2 x (decode floor") for line in lines)
    bound = [
        [c.strip() for c in r.split("|")]
        for r in _rows(lines)
        if r.startswith("| nginx+5ms 4x20 ours none |")
    ]
    assert len(bound) == 1
    cells = bound[0]
    assert cells[2] == "batches"
    assert all(float(cells[i]) > 0 for i in range(3, 8))  # plans, floors and the bound, in seconds
    for ratio in cells[8:10]:  # async, blocking: the median paired ratio, then its range
        median, spread = ratio.split(" ", 1)
        low, high = spread.strip("()x").split("-")
        assert float(median.removesuffix("x")) > 0 and 0 < float(low) <= float(high)
    assert cells[10].startswith("async m") and ", blocking m" in cells[10]


@needs_nginx
def test_read_benchmark_tiny_run_on_nginx() -> None:
    """A PyIceberg-written table copied from moto, read by ours, PyIceberg and DuckDB."""
    rows = _rows(_run("read.py", "--stores", "nginx", "--latency-ms", "5"))
    assert [r.split("|")[2].strip() for r in rows if r.startswith("| nginx+5ms")] == ["full", "selective"]


@needs_nginx
def test_store_get_benchmark_tiny_run_on_nginx() -> None:
    rows = _rows(_run("store_get.py", "--store", "nginx", "--latency-ms", "5"))
    assert [r.split("|")[1].strip() for r in rows[2:]] == ["1", "8", "32", "128"]


def test_plan_benchmark_skips_the_store_without_nginx() -> None:
    """No nginx (here: ``NGINX`` names no binary): one line naming the install, other stores run."""
    env = {**os.environ, "NGINX": "/nonexistent/nginx"}
    lines = _run("plan.py", "--stores", "local,nginx", "--filters", "day_1pct", "--writer", "ours", env=env)
    assert "nginx store skipped: nginx not found (install: apt-get install -y nginx-light" in lines[0]
    rows = _rows(lines)
    assert len([r for r in rows if r.startswith("| local | 4x20 | ours | day_1pct |")]) == 1
    assert len([r for r in rows if r.startswith("| 4x20 | local | ours |")]) == 1  # the service case
    assert not any("nginx" in r for r in rows)
