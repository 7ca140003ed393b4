"""The S3 client reads ISO 8601 timestamps (every listed key's LastModified) without
dateutil, and hands every other form to botocore's own parser: the same instants either way."""

from __future__ import annotations

import time

import pytest
from botocore.utils import parse_timestamp
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

from aioiceberg.io import S3FileIO, S3Options
from aioiceberg.io.s3_client import iso_timestamp
from aioiceberg.runtime import default_runtime


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-19T13:25:08.000Z",
        "2026-11-19T13:25:08Z",
        "2026-11-19T13:25:08.123456Z",
        "2026-11-19T13:25:08.123+02:00",
        "Thu, 19 Nov 2026 13:25:08 GMT",  # a header's form
        "1795000000",  # epoch seconds
        1795000000,
    ],
)
def test_same_instant_as_botocores_parser(value: str | int) -> None:
    ours, theirs = iso_timestamp(value), parse_timestamp(value)
    assert ours.tzinfo is not None
    assert ours.timestamp() == theirs.timestamp()


def test_a_malformed_iso_timestamp_is_left_to_botocore() -> None:
    with pytest.raises(ValueError):
        parse_timestamp("2026-13-45T99:00:00Z")
    with pytest.raises(ValueError):
        iso_timestamp("2026-13-45T99:00:00Z")


@pytest.mark.anyio
async def test_listed_and_headed_objects_carry_the_same_modification_time(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    io = S3FileIO(options=S3Options.from_storage_options(s3_storage_options(moto_endpoint)))
    io.bind_runtime(default_runtime())
    try:
        await io.write(f"s3://{bucket}/t/a", b"x")
        [listed] = [info async for info in io.list(f"s3://{bucket}/t/")]
        head = await io.head(f"s3://{bucket}/t/a")
        assert listed.last_modified is not None and head.last_modified is not None
        assert int(listed.last_modified) == int(head.last_modified)  # a header has whole seconds
        assert abs(listed.last_modified - time.time()) < 300
    finally:
        await io.aclose()
