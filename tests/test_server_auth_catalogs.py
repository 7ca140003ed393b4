"""The server's request checks do not depend on the catalog behind it: the same principals, grants,
web-page refusals and commit validation over a warehouse, a SQL catalog and a Glue catalog (moto),
each served in-process on 127.0.0.1 and reached over real HTTP."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pyarrow as pa
import pytest
from aiohttp import web
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.catalogs.base import Catalog
from aioiceberg.server import make_app
from aioiceberg.server.auth import Access, AuthConfig, Principal

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("aws_clients_closed")]

WRITER_TOKEN = "writer-token-0123456789abcdef"
READER_TOKEN = "reader-token-0123456789abcdef"
NS = f"auth_{uuid.uuid4().hex[:12]}"  # Glue on moto is shared by the session's modules
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}

AUTH = AuthConfig(
    {
        "writer": Principal("writer", None, (WRITER_TOKEN,), {(): Access.WRITE}),
        "reader": Principal("reader", None, (READER_TOKEN,), {(): Access.READ}),
    },
    3600,
    b"signing-key-0123456789abcdef0123456789",
    persistent_key=True,
)


@contextlib.asynccontextmanager
async def served(catalog: Catalog) -> AsyncIterator[str]:
    await catalog.create_namespace(NS)
    await catalog.create_table(f"{NS}.t", ARROW)
    runner = web.AppRunner(make_app(catalog, auth=AUTH), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def send(
    url: str, method: str, path: str, body: Any = None, token: str | None = None, **headers: str
) -> tuple[int, Any]:
    sent: dict[str, str] = {"Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url + path, data=data, headers=sent) as response,
    ):
        raw = await response.read()
        return response.status, json.loads(raw) if raw else None


def commit(updates: list[Mapping[str, Any]]) -> dict[str, Any]:
    return {"requirements": [], "updates": list(updates)}


@pytest.fixture(params=["warehouse", "sql", "glue"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    kind = request.param
    if kind == "warehouse":
        catalog = aioiceberg.connect(str(tmp_path / "wh"))
    elif kind == "sql":
        catalog = aioiceberg.connect(f"sqlite:///{tmp_path / 'cat.db'}", warehouse=str(tmp_path / "wh"))
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = await create_bucket(endpoint)
        options = {**s3_storage_options(endpoint), "glue.endpoint": endpoint}
        catalog = aioiceberg.connect("glue://", warehouse=f"s3://{bucket}/wh", storage_options=options)
    async with catalog, served(catalog) as served_url:
        yield served_url


async def test_tokens_grants_web_pages_and_validation_hold_on_every_catalog(url: str) -> None:
    table = f"/v1/namespaces/{NS}/tables/t"
    status, answer = await send(url, "GET", table)
    assert status == 401 and answer["error"]["type"] == "NotAuthorizedException"
    status, _ = await send(url, "GET", table, token="not-a-token-0123456789")
    assert status == 401
    status, loaded = await send(url, "GET", table, token=READER_TOKEN)
    assert status == 200
    before = loaded["metadata-location"]

    writes = [
        ("POST", f"/v1/namespaces/{NS}/tables", {"name": "u", "schema": SCHEMA_JSON}),
        ("POST", table, commit([{"action": "set-properties", "updates": {"k": "v"}}])),
        ("DELETE", table + "?purgeRequested=true", None),
        ("POST", "/v1/namespaces", {"namespace": ["other"]}),
    ]
    for method, path, body in writes:
        status, answer = await send(url, method, path, body, token=READER_TOKEN)
        assert status == 403 and answer["error"]["type"] == "ForbiddenException", (method, path, answer)

    rename = {"source": {"namespace": [NS], "name": "t"}, "destination": {"namespace": [NS], "name": "m"}}
    status, _ = await send(
        url,
        "POST",
        "/v1/tables/rename",
        json.dumps(rename).encode(),
        token=WRITER_TOKEN,
        **{"Content-Type": "text/plain", "Origin": "http://evil.example"},
    )
    assert status in (403, 415)

    bad = commit([{"action": "set-properties", "updates": {"commit.retry.num-retries": "abc"}}])
    status, answer = await send(url, "POST", table, bad, token=WRITER_TOKEN)
    assert status == 400 and "commit.retry.num-retries" in answer["error"]["message"]

    status, loaded = await send(url, "GET", table, token=READER_TOKEN)
    assert status == 200 and loaded["metadata-location"] == before  # nothing above changed the table
    good = commit([{"action": "set-properties", "updates": {"owner": "etl"}}])
    status, answer = await send(url, "POST", table, good, token=WRITER_TOKEN)
    assert status == 200 and answer["metadata"]["properties"]["owner"] == "etl"
