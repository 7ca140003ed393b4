"""The server's request checks do not depend on the catalog behind it: the same principals, grants,
web-page refusals and commit validation over a warehouse, a SQL catalog and a Glue catalog (moto),
each served in-process on 127.0.0.1 and reached over real HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.rest import bearer, request_json_async, serve_in_process

import aioiceberg
from aioiceberg.server.auth import Access, AuthConfig, Principal

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("aws_clients_closed")]

WRITER_TOKEN = "writer-token-0123456789abcdef"
READER_TOKEN = "reader-token-0123456789abcdef"
WRITER, READER = bearer(WRITER_TOKEN), bearer(READER_TOKEN)
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
    async with catalog:
        await catalog.create_namespace(NS)
        await catalog.create_table(f"{NS}.t", ARROW)
        async with serve_in_process(catalog, auth=AUTH) as served_url:
            yield served_url


async def test_tokens_grants_web_pages_and_validation_hold_on_every_catalog(url: str) -> None:
    table = f"/v1/namespaces/{NS}/tables/t"
    status, answer = await request_json_async(url, "GET", table)
    assert status == 401 and answer["error"]["type"] == "NotAuthorizedException"
    status, _ = await request_json_async(url, "GET", table, headers=bearer("not-a-token-0123456789"))
    assert status == 401
    status, loaded = await request_json_async(url, "GET", table, headers=READER)
    assert status == 200
    before = loaded["metadata-location"]

    writes = [
        ("POST", f"/v1/namespaces/{NS}/tables", {"name": "u", "schema": SCHEMA_JSON}),
        ("POST", table, commit([{"action": "set-properties", "updates": {"k": "v"}}])),
        ("DELETE", table + "?purgeRequested=true", None),
        ("POST", "/v1/namespaces", {"namespace": ["other"]}),
    ]
    for method, path, body in writes:
        status, answer = await request_json_async(url, method, path, body, READER)
        assert status == 403 and answer["error"]["type"] == "ForbiddenException", (method, path, answer)

    rename = {"source": {"namespace": [NS], "name": "t"}, "destination": {"namespace": [NS], "name": "m"}}
    page = {**WRITER, "Content-Type": "text/plain", "Origin": "http://evil.example"}
    status, _ = await request_json_async(url, "POST", "/v1/tables/rename", rename, page)
    assert status in (403, 415)

    bad = commit([{"action": "set-properties", "updates": {"commit.retry.num-retries": "abc"}}])
    status, answer = await request_json_async(url, "POST", table, bad, WRITER)
    assert status == 400 and "commit.retry.num-retries" in answer["error"]["message"]

    status, loaded = await request_json_async(url, "GET", table, headers=READER)
    assert status == 200 and loaded["metadata-location"] == before  # nothing above changed the table
    good = commit([{"action": "set-properties", "updates": {"owner": "etl"}}])
    status, answer = await request_json_async(url, "POST", table, good, WRITER)
    assert status == 200 and answer["metadata"]["properties"]["owner"] == "etl"
