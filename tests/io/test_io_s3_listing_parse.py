"""The S3 listing's own page parse (aioiceberg/io/s3_xml.py) against a server that scripts
its answers: odd keys (XML escapes, URL encoding, leading slashes, non-ASCII), empty
listings, a 200 that carries an ``<Error>`` or a cut-off body (retried, as botocore does), and
an error page part-way through; and the parse itself against botocore's on a full page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote
from xml.sax.saxutils import escape

import botocore.session
import pytest
from aiobotocore.parsers import AioResponseParserFactory
from aiohttp import web
from servers.plugin import s3_storage_options

from aioiceberg.errors import ObjectNotFoundError, StoreError
from aioiceberg.io import S3FileIO, S3Options
from aioiceberg.io.s3_client import iso_timestamp
from aioiceberg.io.s3_xml import FastListingParserFactory
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.anyio

_MTIME = "2024-03-04T05:06:07.000Z"
_MTIME_TS = datetime(2024, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()

ODD_KEYS = [
    "data/a&b<c>d\"e'f.parquet",
    "data/space here/x y.parquet",
    "data/percent%2Fnot-a-slash.parquet",
    "data/plus+and=equals?q#frag.parquet",
    "data/ünïcødé/日本.parquet",
    "data/tab\there.parquet",
    "data//double//slash.parquet",
]


@dataclass
class ScriptedServer:
    """ListObjectsV2 over ``keys``; ``script`` overrides the answer to the n-th request."""

    keys: list[str]
    script: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    requests: int = 0
    encoding_types: list[str | None] = field(default_factory=list)

    async def page(self, request: web.Request) -> web.Response:
        self.requests += 1
        scripted = self.script.get(self.requests)
        if scripted is not None:
            return web.Response(status=scripted[0], body=scripted[1], content_type="application/xml")
        encoding = request.query.get("encoding-type")
        self.encoding_types.append(encoding)
        prefix = request.query.get("prefix", "")
        max_keys = int(request.query.get("max-keys", "1000"))
        token = request.query.get("continuation-token")
        keys = sorted(k for k in self.keys if k.startswith(prefix) and (token is None or k > token))
        chunk, truncated = keys[:max_keys], len(keys) > max_keys

        def enc(value: str) -> str:
            return escape(quote(value, safe="/") if encoding == "url" else value)

        contents = "".join(
            f"<Contents><Key>{enc(k)}</Key><LastModified>{_MTIME}</LastModified>"
            f"<ETag>&quot;etag-{len(k)}&quot;</ETag><Size>{len(k.encode())}</Size>"
            "<StorageClass>STANDARD</StorageClass></Contents>"
            for k in chunk
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>bucket</Name><Prefix>{enc(prefix)}</Prefix><KeyCount>{len(chunk)}</KeyCount>"
            f"<MaxKeys>{max_keys}</MaxKeys>"
            + (f"<EncodingType>{encoding}</EncodingType>" if encoding else "")
            + f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{contents}"
            + (f"<NextContinuationToken>{escape(chunk[-1])}</NextContinuationToken>" if truncated else "")
            + "</ListBucketResult>"
        )
        return web.Response(body=body.encode(), content_type="application/xml")


@asynccontextmanager
async def scripted_io(server: ScriptedServer) -> AsyncIterator[S3FileIO]:
    app = web.Application()
    app.router.add_get("/bucket", server.page)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        storage = s3_storage_options(f"http://127.0.0.1:{port}") | {"s3.retry-max-attempts": "3"}
        io = S3FileIO(options=S3Options.from_storage_options(storage)).bind_runtime(default_runtime())
        try:
            yield io
        finally:
            await io.aclose()
    finally:
        await runner.cleanup()


async def _listed(
    io: S3FileIO, prefix: str = "s3://bucket/data/", page_size: int = 3
) -> list[tuple[str, int, str, float | None]]:
    return [(i.location, i.size, i.etag, i.last_modified) async for i in io.list(prefix, page_size=page_size)]


def _expected(keys: list[str]) -> list[tuple[str, int, str, float | None]]:
    return [(f"s3://bucket/{k}", len(k.encode()), f"etag-{len(k)}", _MTIME_TS) for k in sorted(keys)]


async def test_odd_keys_list_as_they_were_written_with_url_encoding() -> None:
    server = ScriptedServer(ODD_KEYS)
    async with scripted_io(server) as io:
        assert await _listed(io) == _expected(ODD_KEYS)
    assert set(server.encoding_types) == {"url"}  # so the keys above came back URL-encoded


async def test_keys_with_leading_slashes_keep_them() -> None:
    keys = ["/lead.parquet", "//two/x.parquet", "data/ok.parquet"]
    server = ScriptedServer(keys)
    async with scripted_io(server) as io:
        assert await _listed(io, "s3://bucket/", page_size=2) == _expected(keys)


async def test_an_empty_listing_yields_nothing() -> None:
    server = ScriptedServer(["other/x.parquet"])
    async with scripted_io(server) as io:
        assert await _listed(io) == []
    assert server.requests == 1


@pytest.mark.parametrize(
    "body",
    [
        b"<Error><Code>InternalError</Code><Message>try again</Message></Error>",
        b'<?xml version="1.0"?><ListBucketResult><Name>bucket</Name><Contents><Key>cut',
    ],
    ids=["error-in-200", "cut-off-body"],
)
async def test_a_200_that_is_no_listing_is_retried(body: bytes) -> None:
    keys = [f"data/f{i}.parquet" for i in range(7)]
    server = ScriptedServer(keys, script={2: (200, body)})
    async with scripted_io(server) as io:
        assert await _listed(io) == _expected(keys)
        assert io.retries.retries >= 1
    assert server.requests == 4  # pages 1, (2 refused), 2, 3


async def test_a_200_error_every_time_ends_as_a_retryable_store_error() -> None:
    error = b"<Error><Code>InternalError</Code><Message>down</Message></Error>"
    server = ScriptedServer(["data/a"], script={n: (200, error) for n in range(1, 10)})
    async with scripted_io(server) as io:
        with pytest.raises(StoreError) as caught:
            await _listed(io)
    assert caught.value.retryable
    assert "InternalError" in str(caught.value)
    assert server.requests == 3


async def test_an_error_page_mid_listing_is_mapped_with_its_code() -> None:
    denied = b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>"
    missing = b"<Error><Code>NoSuchBucket</Code><Message>gone</Message></Error>"
    keys = [f"data/f{i}.parquet" for i in range(7)]
    server = ScriptedServer(keys, script={2: (403, denied)})
    async with scripted_io(server) as io:
        seen: list[str] = []
        with pytest.raises(StoreError) as caught:
            async for info in io.list("s3://bucket/data/", page_size=3):
                seen.append(info.location)
        assert seen == [f"s3://bucket/{k}" for k in sorted(keys)[:3]]
        assert not caught.value.retryable
        assert "AccessDenied" in str(caught.value)
        server.script = {server.requests + 1: (404, missing)}
        with pytest.raises(ObjectNotFoundError):
            await _listed(io)


async def test_a_slowdown_mid_listing_is_retried() -> None:
    slow = b"<Error><Code>SlowDown</Code><Message>later</Message></Error>"
    keys = [f"data/f{i}.parquet" for i in range(7)]
    server = ScriptedServer(keys, script={3: (503, slow)})
    async with scripted_io(server) as io:
        assert await _listed(io) == _expected(keys)


_FULL_PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name>'
    b"<Prefix>data/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><Delimiter>/</Delimiter>"
    b"<IsTruncated>true</IsTruncated><EncodingType>url</EncodingType>"
    b"<ContinuationToken>a=b</ContinuationToken><NextContinuationToken>t&amp;1</NextContinuationToken>"
    b"<StartAfter>s</StartAfter>"
    b"<Contents><Key>data/a%26b.parquet</Key><LastModified>2026-11-19T13:25:08.000Z</LastModified>"
    b"<ETag>&quot;e1&quot;</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm>"
    b"<ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType>"
    b"<Size>10</Size><Owner><ID>id</ID><DisplayName>me</DisplayName></Owner>"
    b"<StorageClass>STANDARD</StorageClass><RestoreStatus><IsRestoreInProgress>false"
    b"</IsRestoreInProgress><RestoreExpiryDate>2026-11-20T00:00:00Z</RestoreExpiryDate>"
    b"</RestoreStatus><NotInTheModel>x</NotInTheModel></Contents>"
    b"<Contents><Key>data/b</Key><LastModified>Thu, 19 Nov 2026 13:25:08 GMT</LastModified>"
    b"<ETag></ETag><Size>0</Size><StorageClass>GLACIER</StorageClass></Contents>"
    b"<CommonPrefixes><Prefix>data/p1/</Prefix></CommonPrefixes>"
    b"<CommonPrefixes><Prefix>data/p2/</Prefix></CommonPrefixes></ListBucketResult>"
)


@pytest.mark.parametrize("body", [_FULL_PAGE, b"", b"<ListBucketResult/>"], ids=["full", "no-body", "bare"])
async def test_the_page_parse_gives_what_botocore_gives(body: bytes) -> None:
    shape = (
        botocore.session.get_session().get_service_model("s3").operation_model("ListObjectsV2").output_shape
    )
    parsed = []
    for factory in (AioResponseParserFactory(), FastListingParserFactory()):
        factory.set_parser_defaults(timestamp_parser=iso_timestamp)
        response = {
            "status_code": 200,
            "headers": {"x-amz-request-charged": "requester"},
            "body": body,
            "context": {},
        }
        parsed.append(await factory.create_parser("rest-xml").parse(response, shape))
    assert parsed[0] == parsed[1]
    if body is _FULL_PAGE:
        assert parsed[1]["Contents"][0]["LastModified"].tzinfo is not None
        assert parsed[1]["CommonPrefixes"] == [{"Prefix": "data/p1/"}, {"Prefix": "data/p2/"}]


async def test_pages_listed_at_once_do_not_mix() -> None:
    """Each response carries its own parsed tree: concurrent listings keep their own keys."""
    keys = [f"data/a/f{i}.parquet" for i in range(20)] + [f"data/b/g{i}.parquet" for i in range(20)]
    server = ScriptedServer(keys)
    async with scripted_io(server) as io:
        a, b = await asyncio.gather(_listed(io, "s3://bucket/data/a/"), _listed(io, "s3://bucket/data/b/"))
    assert a == _expected(keys[:20])
    assert b == _expected(keys[20:])


_NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {n} "{("&" + p + ";") * 10}">' for p, n in zip("abcdefg", "bcdefgh", strict=True))
    + f"]><ListBucketResult {_NS}><Name>bucket</Name><IsTruncated>false</IsTruncated>"
    "<Contents><Key>&h;</Key><Size>1</Size></Contents></ListBucketResult>"
).encode()
_DEEP = (
    f"<ListBucketResult {_NS}><Name>bucket</Name><IsTruncated>false</IsTruncated><Contents>"
    + "<x>" * 100_000
    + "</x>" * 100_000
    + "<Key>data/k</Key><Size>1</Size></Contents></ListBucketResult>"
).encode()
_ODD_SIZE = (
    f"<ListBucketResult {_NS}><Name>bucket</Name><IsTruncated>false</IsTruncated>"
    "<Contents><Key>data/k</Key><Size>lots</Size></Contents></ListBucketResult>"
).encode()
_NO_KEY = (
    f"<ListBucketResult {_NS}><Name>bucket</Name><IsTruncated>false</IsTruncated>"
    "<Contents><Size>1</Size></Contents></ListBucketResult>"
).encode()


@pytest.mark.parametrize(
    ("body", "retried"),
    [(_LAUGHS, True), (_ODD_SIZE, True), (_NO_KEY, False)],
    ids=["entity-expansion", "size-not-a-number", "object-without-key"],
)
async def test_a_hostile_listing_page_ends_as_a_store_error(body: bytes, retried: bool) -> None:
    """A store answering with an entity bomb (10^8 characters if expanded), a value of the
    wrong form or an object without a key: a typed StoreError, never a parser's ValueError
    or KeyError, and no expansion."""
    server = ScriptedServer([], script={n: (200, body) for n in range(1, 10)})
    async with scripted_io(server) as io:
        with pytest.raises(StoreError) as caught:
            await _listed(io)
    assert caught.value.retryable is retried
    assert server.requests == (3 if retried else 1)


async def test_a_deeply_nested_listing_page_reads_what_it_holds() -> None:
    """100,000 nested unknown elements inside an object: skipped, not recursed into."""
    server = ScriptedServer([], script={1: (200, _DEEP)})
    async with scripted_io(server) as io:
        listed = [i.location async for i in io.list("s3://bucket/data/")]
    assert listed == ["s3://bucket/data/k"]
