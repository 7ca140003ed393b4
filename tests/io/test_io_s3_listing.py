"""Listings against S3 servers whose continuation tokens do not move the listing on.

The server here answers ListObjectsV2 as s3proxy does: its continuation token is the last
key, URL-encoded, and it reads the token back without decoding it, so a page that ends on a
key with ``=`` restarts the listing (``a%3D`` sorts before ``a=``) and hands out the same
token forever. A second mode issues a fresh token every time yet restarts the listing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.sax.saxutils import escape

import pytest
from aiohttp import web
from servers.plugin import s3_storage_options

from aioiceberg.errors import ListingStalledError, StoreError
from aioiceberg.io import FileIO, S3FileIO, S3Options
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.anyio

# past this many list requests the server refuses (400), so a client that would page forever
# ends with a plain StoreError instead of hanging the suite
_REQUEST_CAP = 50


@dataclass
class ListingServer:
    """ListObjectsV2 over ``keys`` in one bucket, paging the way ``mode`` says."""

    keys: list[str]
    mode: str = "s3proxy"  # or "fresh-token-restart"
    requests: int = 0
    tokens_sent: list[str] = field(default_factory=list)

    async def page(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.requests > _REQUEST_CAP:
            return web.Response(status=400, text="<Error><Code>TooManyPages</Code></Error>")
        prefix = request.query.get("prefix", "")
        max_keys = int(request.query.get("max-keys", "1000"))
        token = request.query.get("continuation-token")
        keys = sorted(k for k in self.keys if k.startswith(prefix))
        if token is not None and self.mode == "s3proxy":
            keys = [k for k in keys if k > token]  # the token, still URL-encoded, as the marker
        chunk, truncated = keys[:max_keys], len(keys) > max_keys
        if self.mode == "s3proxy":
            next_token = quote(chunk[-1], safe="/") if truncated else ""
        else:
            next_token = uuid.uuid4().hex if truncated else ""
        self.tokens_sent.append(next_token)
        contents = "".join(
            f"<Contents><Key>{escape(k)}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
            f'<ETag>"e"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>'
            for k in chunk
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>bucket</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(chunk)}</KeyCount>"
            f"<MaxKeys>{max_keys}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
            f"{contents}"
            + (f"<NextContinuationToken>{escape(next_token)}</NextContinuationToken>" if truncated else "")
            + "</ListBucketResult>"
        )
        return web.Response(body=body.encode(), content_type="application/xml")


@asynccontextmanager
async def listing_io(server: ListingServer, backend: str = "aiobotocore") -> AsyncIterator[FileIO]:
    """A FileIO of ``backend`` talking to ``server``, served on 127.0.0.1 from this event loop."""
    app = web.Application()
    app.router.add_get("/bucket", server.page)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        options = S3Options.from_storage_options(s3_storage_options(f"http://127.0.0.1:{port}"))
        made = ObstoreS3FileIO(options=options) if backend == "obstore" else S3FileIO(options=options)
        io = made.bind_runtime(default_runtime())
        try:
            yield io
        finally:
            await io.aclose()
    finally:
        await runner.cleanup()


async def test_the_server_pages_keys_without_equals_signs_to_the_end() -> None:
    """The misbehaving server is a working S3 listing as long as no page ends on ``=``."""
    keys = [f"data/f{i:02d}.parquet" for i in range(25)]
    server = ListingServer(keys)
    async with listing_io(server) as io:
        listed = [info.location async for info in io.list("s3://bucket/data/", page_size=10)]
    assert listed == [f"s3://bucket/{k}" for k in keys]
    assert server.requests == 3


@pytest.mark.parametrize("backend", ["aiobotocore", "obstore"])
async def test_a_repeated_continuation_token_raises_instead_of_paging_forever(backend: str) -> None:
    keys = [f"data/part=1/f{i:02d}.parquet" for i in range(25)]
    server = ListingServer(keys)
    async with listing_io(server, backend) as io:
        with pytest.raises(ListingStalledError) as caught:
            async for _ in io.list("s3://bucket/data/", page_size=10):
                pass
    assert server.tokens_sent[0] == server.tokens_sent[1] == "data/part%3D1/f09.parquet"
    assert server.requests == 2
    message = str(caught.value)
    assert "s3://bucket/data/" in message
    assert "repeats its continuation token" in message
    assert not caught.value.retryable


async def test_a_fresh_token_that_restarts_the_listing_raises() -> None:
    keys = [f"data/f{i:02d}.parquet" for i in range(25)]
    server = ListingServer(keys, mode="fresh-token-restart")
    async with listing_io(server) as io:
        seen: list[str] = []
        with pytest.raises(ListingStalledError) as caught:
            async for info in io.list("s3://bucket/data/", page_size=10):
                seen.append(info.location)
    assert server.requests == 2
    assert seen == [f"s3://bucket/{k}" for k in keys[:10]]  # the repeated page is never yielded
    assert "s3://bucket/data/" in str(caught.value)
    assert isinstance(caught.value, StoreError)
