"""The REST catalog client: request and response shapes against a small spec-shaped HTTP peer,
and whole workflows against our own REST server with PyIceberg on the same server.

The peer (``SpecPeer``) is a real aiohttp server on a local port answering what each test
scripts, in the bodies the REST spec defines; it records every request it got.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from aiohttp import web

import aioiceberg
from aioiceberg.catalogs.rest import RestCatalog
from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.rest_json import update_from_json
from aioiceberg.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    InvalidPropertyError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.spec.arrow import arrow_to_schema_assign_ids
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import new_table_metadata, table_metadata_to_dict
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.sorting import UNSORTED

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


# -- a spec-shaped peer ------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


Answer = tuple[int, Any] | None  # None: drop the connection without answering


def spec_error(status: int, kind: str, message: str) -> tuple[int, Any]:
    return status, {"error": {"message": message, "type": kind, "code": status}}


@dataclass
class SpecPeer:
    """Answers ``script(seen)`` for each request; ``GET /v1/config`` answers ``config``."""

    script: Callable[[Seen], Answer | Awaitable[Answer]] = lambda seen: spec_error(
        501, "NotImplementedException", "not scripted"
    )
    config: dict[str, Any] = field(default_factory=lambda: {"defaults": {}, "overrides": {}})
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def calls(self, method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and not s.raw_path.endswith("/config")]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        seen = Seen(
            request.method,
            request.raw_path.split("?")[0],
            dict(request.query),
            dict(request.headers),
            json.loads(raw) if raw else None,
        )
        self.seen.append(seen)
        if seen.raw_path.endswith("/v1/config"):
            return web.json_response(self.config)
        answer = self.script(seen)
        if not isinstance(answer, tuple) and answer is not None:
            answer = await answer
        if answer is None:  # the request arrived; its answer is lost
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        status, body = answer
        if body is None:
            return web.Response(status=status)
        return web.json_response(body, status=status)


@contextlib.asynccontextmanager
async def spec_peer(peer: SpecPeer | None = None) -> AsyncIterator[SpecPeer]:
    peer = peer or SpecPeer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", peer.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    peer.url = f"rest+http://127.0.0.1:{port}"
    try:
        yield peer
    finally:
        await runner.cleanup()


def table_metadata(location: Path) -> TableMetadata:
    schema = arrow_to_schema_assign_ids(ARROW_SCHEMA)
    return new_table_metadata(schema, PartitionSpec(0, ()), UNSORTED, str(location), {}, 2)


def load_reply(metadata: TableMetadata, version: int = 0) -> dict[str, Any]:
    return {
        "metadata-location": f"{metadata.location}/metadata/{version:05d}-x.metadata.json",
        "metadata": table_metadata_to_dict(metadata),
        "config": {},
    }


class FakeTable:
    """One table the peer keeps in memory, committing bodies with the spec's semantics
    (requirements are not checked here: each test scripts its conflicts)."""

    def __init__(self, location: Path) -> None:
        self.metadata = table_metadata(location)
        self.version = 0

    def reply(self) -> dict[str, Any]:
        return load_reply(self.metadata, self.version)

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        updates = [update_from_json(u) for u in body["updates"]]
        self.metadata = apply_updates(self.metadata, updates)
        self.version += 1
        return self.reply()


def files_under(path: Path) -> set[str]:
    """Table files (the local store's hidden lock files aside)."""
    return {str(p) for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")}


ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}, schema=ARROW_SCHEMA)


# -- URI and config ------------------------------------------------------------------------------


def test_unknown_uri_option_is_named() -> None:
    with pytest.raises(InvalidPropertyError, match="colour"):
        aioiceberg.connect("rest+http://127.0.0.1:1?colour=blue")
    with pytest.raises(InvalidPropertyError, match="timeout"):
        aioiceberg.connect("rest+http://127.0.0.1:1?timeout=soon")
    with pytest.raises(ValidationError, match="differs"):
        aioiceberg.connect("rest+http://127.0.0.1:1?warehouse=a", warehouse="b")


@pytest.mark.anyio
async def test_config_prefix_warehouse_token_and_namespace_separator() -> None:
    peer = SpecPeer(config={"defaults": {"prefix": "ignored"}, "overrides": {"prefix": "cat1"}})
    peer.script = lambda seen: (200, {"namespace": ["a", "b c"], "properties": {"k": "v"}})
    async with spec_peer(peer):
        catalog = aioiceberg.connect(f"{peer.url}/api?warehouse=wh1&token=s3cret")
        assert isinstance(catalog, RestCatalog)
        async with catalog:
            assert await catalog.load_namespace_properties(("a", "b c")) == {"k": "v"}
            assert await catalog.load_namespace_properties("a") == {"k": "v"}
    config, first, second = peer.seen
    assert config.raw_path == "/api/v1/config" and config.query == {"warehouse": "wh1"}
    assert first.raw_path == "/api/v1/cat1/namespaces/a%1Fb%20c"
    assert second.raw_path == "/api/v1/cat1/namespaces/a"
    assert all(s.headers["Authorization"] == "Bearer s3cret" for s in peer.seen)


@pytest.mark.anyio
async def test_endpoints_listed_by_the_server_are_honoured() -> None:
    peer = SpecPeer(
        config={"defaults": {}, "overrides": {}, "endpoints": ["GET /v1/{prefix}/namespaces/{namespace}"]}
    )
    peer.script = lambda seen: spec_error(404, "NoSuchNamespaceException", "no namespace x")
    async with spec_peer(peer), RestCatalog.from_uri(peer.url) as catalog:
        assert await catalog.namespace_exists("x") is False  # no HEAD listed: falls back to GET
        with pytest.raises(UnsupportedError, match=r"POST /v1/\{prefix\}/namespaces"):
            await catalog.create_namespace("x")
    assert [s.method for s in peer.seen] == ["GET", "GET"]


# -- error mapping -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_404_names_table_or_namespace_by_type() -> None:
    peer = SpecPeer()

    def script(seen: Seen) -> Answer:
        if "/tables/missing" in seen.raw_path:
            return spec_error(404, "NoSuchTableException", "Table does not exist: db.missing")
        return spec_error(404, "NoSuchNamespaceException", "Namespace does not exist: nope")

    peer.script = script
    async with spec_peer(peer), RestCatalog.from_uri(peer.url) as catalog:
        with pytest.raises(TableNotFoundError, match=r"db\.missing"):
            await catalog.load_table("db.missing")
        with pytest.raises(NamespaceNotFoundError, match="nope"):
            await catalog.load_table("nope.t")
        assert await catalog.table_exists("db.missing") is False
        with pytest.raises(NamespaceNotFoundError):
            await catalog.list_tables("nope")


@pytest.mark.anyio
async def test_409_on_creates_and_non_empty_namespace() -> None:
    peer = SpecPeer()

    def script(seen: Seen) -> Answer:
        if seen.method == "DELETE":
            return spec_error(409, "NamespaceNotEmptyException", "Namespace db is not empty")
        return spec_error(409, "AlreadyExistsException", "already exists")

    peer.script = script
    async with spec_peer(peer), RestCatalog.from_uri(peer.url) as catalog:
        with pytest.raises(TableAlreadyExistsError, match=r"db\.t"):
            await catalog.create_table("db.t", ARROW_SCHEMA, partition_by=["bucket(4, id)"])
        with pytest.raises(NamespaceAlreadyExistsError, match="db"):
            await catalog.create_namespace("db", {"owner": "me"})
        with pytest.raises(NamespaceNotEmptyError, match="not empty"):
            await catalog.drop_namespace("db")
    create_table, create_ns, _ = peer.calls("POST") + peer.calls("DELETE")
    assert create_table.raw_path == "/v1/namespaces/db/tables"
    assert create_table.body["name"] == "t" and "location" not in create_table.body
    assert create_table.body["schema"]["type"] == "struct"
    assert create_table.body["partition-spec"]["fields"][0]["transform"] == "bucket[4]"
    assert create_table.body["properties"] == {"format-version": "2"}
    assert create_ns.body == {"namespace": ["db"], "properties": {"owner": "me"}}


@pytest.mark.anyio
async def test_reads_are_retried_and_writes_are_not() -> None:
    peer = SpecPeer()
    answers = iter([spec_error(503, "ServiceUnavailableException", "busy")] * 2)

    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return next(answers, (200, {"namespaces": [["b"], ["a"]]}))
        return spec_error(503, "ServiceUnavailableException", "busy")

    peer.script = script
    async with spec_peer(peer), RestCatalog.from_uri(peer.url) as catalog:
        assert await catalog.list_namespaces() == ["a", "b"]
        with pytest.raises(StoreError, match="may have been applied") as caught:
            await catalog.create_namespace("x")
        assert not caught.value.retryable
    assert len(peer.calls("GET")) == 3 and len(peer.calls("POST")) == 1


@pytest.mark.anyio
async def test_listings_follow_page_tokens() -> None:
    peer = SpecPeer()

    def script(seen: Seen) -> Answer:
        if seen.query.get("pageToken") == "p2":
            return 200, {"identifiers": [{"namespace": ["a", "b"], "name": "t1"}]}
        return 200, {"identifiers": [{"namespace": ["a", "b"], "name": "t2"}], "next-page-token": "p2"}

    peer.script = script
    async with spec_peer(peer), RestCatalog.from_uri(peer.url) as catalog:
        assert await catalog.list_tables("a.b") == ["a.b.t1", "a.b.t2"]
    assert [s.raw_path for s in peer.seen[1:]] == ["/v1/namespaces/a%1Fb/tables"] * 2


@pytest.mark.anyio
async def test_drop_purge_rename_and_register_shapes(tmp_path: Path) -> None:
    fake = FakeTable(tmp_path / "t")

    def script(seen: Seen) -> Answer:
        if seen.method == "DELETE":
            return 204, None
        if seen.method == "GET" or seen.raw_path.endswith("/register"):
            return 200, fake.reply()
        return 204, None  # rename

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        assert await catalog.drop_table("db.t") == fake.reply()["metadata-location"]
        assert await catalog.drop_table("db.t", purge=True) is None
        renamed = await catalog.rename_table("db.t", "db2.u")
        assert renamed.identifier == "db2.u"
        registered = await catalog.register_table("db.r", "/some/00003-x.metadata.json")
        assert registered.metadata.table_uuid == fake.metadata.table_uuid
    deletes = peer.calls("DELETE")
    assert [d.query for d in deletes] == [{"purgeRequested": "false"}, {"purgeRequested": "true"}]
    rename, register = peer.calls("POST")
    assert rename.raw_path == "/v1/tables/rename"
    assert rename.body == {
        "source": {"namespace": ["db"], "name": "t"},
        "destination": {"namespace": ["db2"], "name": "u"},
    }
    assert register.raw_path == "/v1/namespaces/db/register"
    assert register.body == {"name": "r", "metadata-location": "/some/00003-x.metadata.json"}


# -- commits ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_commit_409_is_commit_failed_and_the_loop_rebases(tmp_path: Path) -> None:
    fake = FakeTable(tmp_path / "t")
    posts = 0

    def script(seen: Seen) -> Answer:
        nonlocal posts
        if seen.method == "GET":
            return 200, fake.reply()
        posts += 1
        if posts == 1:
            return spec_error(409, "CommitFailedException", "Requirement failed: branch main has changed")
        return 200, fake.apply(seen.body)

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        table = await catalog.load_table("db.t")
        assert table.protocol is not None
        with pytest.raises(CommitFailedError, match="branch main has changed"):
            await table.protocol.commit_table(table._state, [], [])
        await table.append(ROWS)
        assert (await table.scan().to_arrow()).sort_by("id").equals(ROWS)
        assert table.metadata_location.endswith("00001-x.metadata.json")
    commit = peer.calls("POST")[-1]
    assert commit.raw_path == "/v1/namespaces/db/tables/t"
    assert commit.body["identifier"] == {"namespace": ["db"], "name": "t"}
    assert {u["action"] for u in commit.body["updates"]} == {"add-snapshot", "set-snapshot-ref"}
    assert {r["type"] for r in commit.body["requirements"]} >= {"assert-ref-snapshot-id"}


@pytest.mark.anyio
async def test_commit_409_until_the_budget_is_spent_deletes_our_files(tmp_path: Path) -> None:
    fake = FakeTable(tmp_path / "t")
    fake.metadata = fake.metadata.replace(properties={"commit.retry.num-retries": "1"})

    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return 200, fake.reply()
        return spec_error(409, "CommitFailedException", "branch main has changed")

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        table = await catalog.load_table("db.t")
        with pytest.raises(CommitConflictError):
            await table.append(ROWS)
    assert len(peer.calls("POST")) == 2
    assert files_under(tmp_path) == set()  # a refused commit leaves nothing behind


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_commit_5xx_is_state_unknown_sent_once_nothing_deleted(tmp_path: Path, status: int) -> None:
    fake = FakeTable(tmp_path / "t")

    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return 200, fake.reply()
        return spec_error(status, "CommitStateUnknownException", "the service timed out")

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        table = await catalog.load_table("db.t")
        with pytest.raises(CommitStateUnknownError, match="nothing was deleted"):
            await table.append(ROWS)
    assert len(peer.calls("POST")) == 1
    written = files_under(tmp_path)
    assert any(f.endswith(".parquet") for f in written)
    assert any(f.endswith(".avro") for f in written)


@pytest.mark.anyio
async def test_commit_with_lost_answer_is_unknown_unless_read_back_shows_it(tmp_path: Path) -> None:
    fake = FakeTable(tmp_path / "t")
    apply_then_drop = False

    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return 200, fake.reply()
        if apply_then_drop:
            fake.apply(seen.body)
        return None

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        table = await catalog.load_table("db.t")
        with pytest.raises(CommitStateUnknownError, match="no answer"):
            await table.append(ROWS)
        assert len(peer.calls("POST")) == 1
        assert any(f.endswith(".parquet") for f in files_under(tmp_path))

        apply_then_drop = True
        table = await catalog.load_table("db.t")
        await table.append(ROWS)  # the answer was lost, but reading back shows it landed
        assert len(peer.calls("POST")) == 2
        assert table.version == 1
        assert (await table.scan().to_arrow()).num_rows == 2


@pytest.mark.anyio
async def test_storage_settings_from_config_and_load_reply_reach_the_table_io() -> None:
    """Config defaults < the caller's storage options < config overrides < the load reply's config."""
    schema = arrow_to_schema_assign_ids(ARROW_SCHEMA)
    metadata = new_table_metadata(schema, PartitionSpec(0, ()), UNSORTED, "s3://bucket/t", {}, 2)
    reply = load_reply(metadata) | {"config": {"s3.access-key-id": "vended", "token": "not-storage"}}
    peer = SpecPeer(
        script=lambda seen: (200, reply),
        config={
            "defaults": {"s3.endpoint": "http://from-defaults", "s3.path-style-access": "true"},
            "overrides": {"s3.region": "from-overrides"},
        },
    )
    mine = {"s3.region": "mine", "s3.endpoint": "http://mine", "s3.access-key-id": "mine"}
    async with spec_peer(peer), RestCatalog.from_uri(peer.url, storage_options=mine) as catalog:
        table = await catalog.load_table("db.t")
    options = table.io.options  # type: ignore[attr-defined]
    assert (options.endpoint_url, options.region, options.access_key_id, options.path_style) == (
        "http://mine",
        "from-overrides",
        "vended",
        True,
    )
