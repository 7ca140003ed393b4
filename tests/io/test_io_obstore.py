"""The obstore S3 path: configuration from the standard AWS environment, keys object_store
cannot name, listings by partial prefix, and use from several event loops."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

from aioiceberg.io import S3FileIO, S3Options, probe, resolve_io
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO, store_settings
from aioiceberg.runtime import clear_probe_cache, default_runtime

pytestmark = pytest.mark.anyio


def test_s3_locations_resolve_to_obstore_unless_asked_otherwise() -> None:
    assert isinstance(
        resolve_io("s3://b/t", {"s3.region": "eu-west-1"}, runtime=default_runtime()), ObstoreS3FileIO
    )
    assert isinstance(
        resolve_io("s3://b/t", {"io.backend": "aiobotocore"}, runtime=default_runtime()), S3FileIO
    )


def test_settings_come_from_options_first_then_the_aws_environment() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-central-1", "AWS_ACCESS_KEY_ID": "k"}
    config, client, provider = store_settings(S3Options(), env)
    # obstore reads AWS_* itself; we add what it cannot infer: plain HTTP, path style, region
    assert client["allow_http"] == "true" and config["virtual_hosted_style_request"] is False
    assert config["region"] == "eu-central-1" and provider is None and "access_key_id" not in config
    explicit = S3Options.from_storage_options(
        {"s3.endpoint": "https://s3.example", "s3.access-key-id": "a", "s3.secret-access-key": "s"}
    )
    config, client, provider = store_settings(explicit, env)
    assert (config["endpoint"], config["access_key_id"], config["secret_access_key"]) == (
        "https://s3.example",
        "a",
        "s",
    )
    assert "allow_http" not in client and provider is None
    config, _, _ = store_settings(S3Options(), {})
    assert config["virtual_hosted_style_request"] is True and config["region"] == "us-east-1"


def test_trust_roots_are_skipped_only_where_nothing_speaks_tls() -> None:
    """A plain-HTTP endpoint with no proxy needs no certificates; anything else keeps
    verifying them."""
    plain = S3Options.from_storage_options({"s3.endpoint": "http://127.0.0.1:9"})
    _, client, _ = store_settings(plain, {})
    assert client["allow_invalid_certificates"] == "true"
    for proxy in ("HTTP_PROXY", "https_proxy", "ALL_PROXY"):
        _, client, _ = store_settings(plain, {proxy: "https://proxy.example:3128"})
        assert "allow_invalid_certificates" not in client, proxy
    secure = S3Options.from_storage_options({"s3.endpoint": "https://s3.example"})
    for options, env in ((secure, {}), (S3Options(), {}), (S3Options(), {"AWS_ENDPOINT_URL": "https://x"})):
        _, client, _ = store_settings(options, env)
        assert "allow_invalid_certificates" not in client


async def test_a_store_that_reads_trust_roots_is_made_off_the_event_loop() -> None:
    """Reading the system's certificates takes milliseconds: a worker thread does it, and
    tasks asking at the same time all get the one store kept."""
    made_in: list[int] = []

    class Watched(ObstoreS3FileIO):
        def _new_store(self, bucket: str) -> object:
            made_in.append(threading.get_ident())
            return super()._new_store(bucket)

    options = {"s3.endpoint": "https://127.0.0.1:9", "s3.region": "us-east-1"}
    options |= {"s3.access-key-id": "a", "s3.secret-access-key": "s"}
    io = Watched(options).bind_runtime(default_runtime())
    stores = await asyncio.gather(*(io._store("b") for _ in range(3)))
    assert made_in and threading.get_ident() not in made_in
    assert all(store is stores[0] for store in stores)
    assert await io._store("b") is stores[0] and len(made_in) <= 3
    await io.aclose()
    plain = Watched({**options, "s3.endpoint": "http://127.0.0.1:9"}).bind_runtime(default_runtime())
    await plain._store("b")
    assert made_in[-1] == threading.get_ident()  # nothing to read: made where it is asked for
    await plain.aclose()


def test_a_profile_supplies_credentials_and_region_through_botocore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "credentials").write_text(
        "[team]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profile-secret\n"
    )
    (tmp_path / "config").write_text("[profile team]\nregion = ap-southeast-2\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    env = {"AWS_PROFILE": "team"}
    config, _, provider = store_settings(S3Options(), env)
    assert config["region"] == "ap-southeast-2"
    assert provider is not None
    credential = provider()
    assert (credential["access_key_id"], credential["secret_access_key"]) == ("AKIDPROFILE", "profile-secret")


async def test_standard_aws_environment_works_without_options(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = await create_bucket(moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    io = resolve_io(f"s3://{bucket}/env", runtime=default_runtime())
    assert isinstance(io, ObstoreS3FileIO)
    try:
        await io.write(f"s3://{bucket}/env", b"from env")
        assert await io.read(f"s3://{bucket}/env") == b"from env"
    finally:
        await io.aclose()


async def test_keys_object_store_cannot_name_still_work(moto_endpoint: str) -> None:
    """``a//b`` (a warehouse path joined with a trailing slash) and ``dir/``: aiobotocore serves them."""
    bucket = await create_bucket(moto_endpoint)
    io = ObstoreS3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    base = f"s3://{bucket}/t"
    odd, plain = f"{base}//data/f.parquet", f"{base}/data/g.parquet"
    try:
        await io.write(odd, b"odd")
        await io.write(plain, b"plain")
        await io.write_if_absent(f"{base}/marker/", b"m")
        assert await io.read(odd) == b"odd"
        assert (await io.read_block(odd, -2, 2)).data == b"dd"
        assert (await io.head(odd)).size == 3
        listed = [info.location async for info in io.list(f"{base}/")]
        assert listed == sorted([odd, plain, f"{base}/marker/"])
        await io.delete_many(listed)
        assert [info async for info in io.list(f"{base}/")] == []
    finally:
        await io.aclose()


async def test_listing_by_a_prefix_that_ends_inside_a_name(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    io = ObstoreS3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    try:
        for key in ("m/v1.json", "m/v10.json", "m/v2.json", "m/x/v3.json", "n/v1.json"):
            await io.write(f"s3://{bucket}/{key}", b"x")
        found = [info.location.rsplit("/", 2)[-2:] async for info in io.list(f"s3://{bucket}/m/v1")]
        assert found == [["m", "v1.json"], ["m", "v10.json"]]
        every = [info.location async for info in io.list(f"s3://{bucket}/", page_size=2)]
        assert len(every) == 5 and every == sorted(every)
    finally:
        await io.aclose()


async def test_one_file_io_serves_several_event_loops(moto_endpoint: str) -> None:
    """No client is bound to a loop: the same object works from another thread's loop."""
    bucket = await create_bucket(moto_endpoint)
    io = ObstoreS3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    await io.write(f"s3://{bucket}/shared", b"one")
    seen: list[bytes] = []

    def elsewhere() -> None:
        seen.append(asyncio.run(io.read(f"s3://{bucket}/shared")))

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [b"one"]
    assert await io.read(f"s3://{bucket}/shared") == b"one"
    await io.aclose()


async def test_probe_is_satisfied_without_a_conditional_delete(moto_endpoint: str) -> None:
    clear_probe_cache()
    bucket = await create_bucket(moto_endpoint)
    io = ObstoreS3FileIO(s3_storage_options(moto_endpoint)).bind_runtime(default_runtime())
    try:
        result = await probe(io, f"s3://{bucket}/wh")
        assert result.safe_for_commits and not result.delete_if_match
        assert [o async for o in io.list(f"s3://{bucket}/")] == []
    finally:
        await io.aclose()
        clear_probe_cache()
