"""S3 Tables listings against a service whose continuation tokens do not move the listing on.

The server here answers ListNamespaces and ListTables as S3 Tables does (REST-JSON, paged
by ``continuationToken``), ``page_size`` names a page, in one of three modes: ``honest``
(the token is the last name listed), ``repeat`` (it hands back the token it gave for the
first page with every later page) and ``restart`` (a fresh token every time, yet always the
first page). moto's S3 Tables pages honestly, so it cannot show a listing that stalls.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.catalogs.s3tables import S3TablesCatalog
from aioiceberg.errors import ListingStalledError, StoreError

pytestmark = pytest.mark.anyio

ACCOUNT = "123456789012"
ARN = f"arn:aws:s3tables:us-east-1:{ACCOUNT}:bucket/listed"
WHEN = "2024-01-01T00:00:00Z"
# past this many list requests the server refuses (400), so a client that would page forever
# ends with a plain StoreError instead of hanging the suite
_REQUEST_CAP = 50


@dataclass
class ListingServer:
    """ListNamespaces and ListTables of one table bucket holding ``names`` (as namespaces, and
    as the tables of any namespace), paged the way ``mode`` says."""

    names: list[str]
    mode: str = "honest"  # or "repeat", "restart"
    page_size: int = 10
    requests: int = 0
    tokens_sent: list[str] = field(default_factory=list)
    buckets_asked: set[str] = field(default_factory=set)

    def page(self, token: str | None) -> tuple[list[str], str]:
        """The names of the page ``token`` asks for, and the token for the next ('' at the end)."""
        names, size = sorted(self.names), self.page_size
        if token is None or self.mode == "restart":
            start = 0
        elif self.mode == "repeat":
            start = size  # every later page is the second
        else:
            start = names.index(token) + 1
        chunk = names[start : start + size]
        if start + size >= len(names):
            return chunk, ""
        if self.mode == "honest":
            return chunk, chunk[-1]
        return chunk, uuid.uuid4().hex if self.mode == "restart" else "page-2"

    async def answer(self, request: web.Request, key: str) -> web.Response:
        self.requests += 1
        if self.requests > _REQUEST_CAP:
            return web.json_response(
                {"message": "too many pages"}, status=400, headers={"x-amzn-ErrorType": "TooManyPages"}
            )
        self.buckets_asked.add(request.match_info["arn"])
        chunk, next_token = self.page(request.query.get("continuationToken"))
        if key == "namespaces":
            entries = [
                {"namespace": [n], "createdAt": WHEN, "createdBy": ACCOUNT, "ownerAccountId": ACCOUNT}
                for n in chunk
            ]
        else:
            namespace = request.query["namespace"]
            entries = [
                {
                    "namespace": [namespace],
                    "name": n,
                    "type": "customer",
                    "tableARN": f"{ARN}/table/{n}",
                    "createdAt": WHEN,
                    "modifiedAt": WHEN,
                }
                for n in chunk
            ]
        self.tokens_sent.append(next_token)
        body: dict[str, Any] = {key: entries}
        if next_token:
            body["continuationToken"] = next_token
        return web.json_response(body)

    async def namespaces(self, request: web.Request) -> web.Response:
        return await self.answer(request, "namespaces")

    async def tables(self, request: web.Request) -> web.Response:
        return await self.answer(request, "tables")


@asynccontextmanager
async def listing_catalog(server: ListingServer) -> AsyncIterator[S3TablesCatalog]:
    """An S3 Tables catalog talking to ``server``, served on 127.0.0.1 from this event loop."""
    app = web.Application()
    app.router.add_get("/namespaces/{arn:.+}", server.namespaces)
    app.router.add_get("/tables/{arn:.+}", server.tables)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}"
        catalog = aioiceberg.connect(
            f"s3tables://{ARN}?endpoint={endpoint}", storage_options=s3_storage_options(endpoint)
        )
        assert isinstance(catalog, S3TablesCatalog)
        async with catalog:
            yield catalog
    finally:
        await runner.cleanup()


NAMES = [f"n{i:02d}" for i in range(25)]


async def test_the_server_pages_namespaces_and_tables_to_the_end() -> None:
    """The server is a working S3 Tables listing in its honest mode: three pages each."""
    server = ListingServer(NAMES)
    async with listing_catalog(server) as catalog:
        assert await catalog.list_namespaces() == NAMES
        assert await catalog.list_tables("db") == [f"db.{n}" for n in NAMES]
    assert server.requests == 6
    assert server.tokens_sent == ["n09", "n19", ""] * 2
    assert server.buckets_asked == {ARN}


async def test_a_repeated_continuation_token_raises_instead_of_paging_forever() -> None:
    server = ListingServer(NAMES, mode="repeat")
    async with listing_catalog(server) as catalog:
        with pytest.raises(ListingStalledError) as caught:
            await catalog.list_tables("db")
    assert server.tokens_sent == ["page-2", "page-2"]
    assert server.requests == 2
    message = str(caught.value)
    assert "list_tables of table bucket 'listed', namespace 'db'" in message
    assert "repeats its continuation token 'page-2'" in message
    assert not caught.value.retryable


async def test_a_fresh_token_that_restarts_the_listing_raises() -> None:
    server = ListingServer(NAMES, mode="restart")
    async with listing_catalog(server) as catalog:
        with pytest.raises(ListingStalledError) as caught:
            await catalog.list_namespaces()
    assert server.requests == 2
    assert len(set(server.tokens_sent)) == 2  # a new token each time, and still the first page
    message = str(caught.value)
    assert "list_namespaces of table bucket 'listed'" in message
    assert "with the page it had already sent" in message
    assert isinstance(caught.value, StoreError)
