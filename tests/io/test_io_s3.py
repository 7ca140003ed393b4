"""S3 backend configuration and client sharing, against moto."""

from __future__ import annotations

import asyncio
import threading

import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

from aioiceberg.io import S3FileIO, S3Options
from aioiceberg.runtime import close_all_clients, default_runtime

pytestmark = pytest.mark.anyio


def test_storage_options_accept_iceberg_and_boto_spellings() -> None:
    iceberg = S3Options.from_storage_options(
        {
            "s3.endpoint": "http://e",
            "s3.region": "eu-west-1",
            "s3.access-key-id": "k",
            "s3.secret-access-key": "s",
            "s3.path-style-access": "true",
            "s3.max-concurrency": "8",
            "s3.retry-max-attempts": "3",
            "unrelated.table.property": "x",
        }
    )
    boto = S3Options.from_storage_options(
        {
            "endpoint_url": "http://e",
            "region_name": "eu-west-1",
            "aws_access_key_id": "k",
            "aws_secret_access_key": "s",
            "path_style": True,
            "max_concurrency": 8,
            "retry_max_attempts": 3,
        }
    )
    assert iceberg == boto
    assert (iceberg.path_style, iceberg.max_concurrency, iceberg.backoff.max_attempts) == (True, 8, 3)
    assert S3Options.from_storage_options(None) == S3Options()


async def test_standard_aws_environment_works_without_options(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = await create_bucket(moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    io = S3FileIO().bind_runtime(default_runtime())
    try:
        await io.write(f"s3://{bucket}/env", b"from env")
        assert await io.read(f"s3://{bucket}/env") == b"from env"
    finally:
        await io.aclose()


async def test_one_client_per_event_loop_shared_by_all_tasks(moto_endpoint: str) -> None:
    options = S3Options.from_storage_options(s3_storage_options(moto_endpoint))
    first, second = await asyncio.gather(
        default_runtime().clients.get(options), default_runtime().clients.get(options)
    )
    assert first is second
    io = S3FileIO(options=options).bind_runtime(default_runtime())
    assert await io._call("s3://x/", lambda c: _identity(c)) is first

    other: list[object] = []

    def in_another_loop() -> None:
        async def run() -> None:
            other.append(await default_runtime().clients.get(options))
            await close_all_clients()

        asyncio.run(run())

    thread = threading.Thread(target=in_another_loop)
    thread.start()
    thread.join()
    assert other and other[0] is not first
    await io.aclose()
    assert (
        await default_runtime().clients.get(options) is not first
    )  # closed by its last holder, reopened on demand
    await close_all_clients()


async def test_closing_one_file_io_keeps_the_shared_client_for_the_others(moto_endpoint: str) -> None:
    options = S3Options.from_storage_options(s3_storage_options(moto_endpoint))
    one, two = (
        S3FileIO(options=options).bind_runtime(default_runtime()),
        S3FileIO(options=options).bind_runtime(default_runtime()),
    )
    shared = await one._call("s3://x/", lambda c: _identity(c))
    assert await two._call("s3://x/", lambda c: _identity(c)) is shared
    await one.aclose()
    assert await two._call("s3://x/", lambda c: _identity(c)) is shared
    await two.aclose()
    assert await default_runtime().clients.get(options) is not shared
    await close_all_clients()


async def _identity(client: object) -> object:
    return client


async def test_connection_pool_is_sized_to_the_configured_concurrency(moto_endpoint: str) -> None:
    options = S3Options.from_storage_options({**s3_storage_options(moto_endpoint), "s3.max-concurrency": "7"})
    client = await default_runtime().clients.get(options)
    try:
        assert client.meta.config.max_pool_connections == 7
        assert client.meta.config.retries["total_max_attempts"] == 1
    finally:
        await S3FileIO(options=options).bind_runtime(default_runtime()).aclose()
