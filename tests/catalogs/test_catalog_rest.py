"""The REST catalog client: request and response shapes against a small spec-shaped HTTP peer,
and whole workflows against our own REST server with PyIceberg on the same server.

The peer (``SpecPeer``) is a real aiohttp server on a local port answering what each test
scripts, in the bodies the REST spec defines; it records every request it got.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pyarrow as pa
import pytest
from aiohttp import web
from servers.rest import RestServer

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
    with pytest.raises(InvalidPropertyError, match="repeated") as caught:
        aioiceberg.connect("rest+http://127.0.0.1:1?token=s3cret&token=s3cret")
    assert "s3cret" not in str(caught.value)
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
        assert await catalog.drop_table("db.t") is None
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
async def test_commit_accepted_with_an_unreadable_reply_goes_on_from_the_table_read_back(
    tmp_path: Path,
) -> None:
    fake = FakeTable(tmp_path / "t")

    def script(seen: Seen) -> Answer:
        if seen.method == "GET":
            return 200, fake.reply()
        fake.apply(seen.body)
        return 200, {"metadata-location": 42}

    async with spec_peer(SpecPeer(script=script)) as peer, RestCatalog.from_uri(peer.url) as catalog:
        table = await catalog.load_table("db.t")
        await table.append(ROWS)
        assert table.version == 1 and len(peer.calls("POST")) == 1
        assert (await table.scan().to_arrow()).sort_by("id").equals(ROWS)


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


# -- against our own server ----------------------------------------------------------------------

EVENTS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
    ]
)
NOTED = EVENTS.append(pa.field("note", pa.string()))
HOT_PROPERTIES = {
    "commit.retry.num-retries": "60",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    """One server for the module: each test uses namespaces of its own."""
    with RestServer(str(tmp_path_factory.mktemp("rest") / "warehouse")) as rest:
        yield rest


def pyiceberg_client(server: RestServer) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("rest", type="rest", uri=server.url)


def sorted_rows(arrow: pa.Table) -> list[dict[str, Any]]:
    return sorted(arrow.to_pylist(), key=lambda r: r["id"])


def events(ids: list[int], regions: list[str]) -> pa.Table:
    return pa.table({"id": ids, "region": regions}, schema=EVENTS)


@pytest.mark.anyio
async def test_workflow_through_connect_matches_pyiceberg_on_the_same_server(server: RestServer) -> None:
    async with aioiceberg.connect(f"rest+{server.url}") as catalog:
        await catalog.create_namespace("wf", {"owner": "ana"})
        await catalog.create_namespace(("wf", "raw"), {"tier": "bronze"})

        table = await catalog.create_table("wf.raw.events", EVENTS, partition_by=["region", "bucket(4, id)"])
        assert table.spec().fields[0].name == "region"
        assert await catalog.list_tables("wf.raw") == ["wf.raw.events"]
        await table.append(events([1, 2, 3, 4], ["eu", "us", "eu", "ap"]))
        await table.delete("id = 3")
        async with table.update_schema() as update:
            update.add_column("note", "string")
        await table.append(pa.table({"id": [5], "region": ["us"], "note": ["late"]}, schema=NOTED))
        expected = [
            {"id": 1, "region": "eu", "note": None},
            {"id": 2, "region": "us", "note": None},
            {"id": 4, "region": "ap", "note": None},
            {"id": 5, "region": "us", "note": "late"},
        ]
        assert sorted_rows(await table.scan().to_arrow()) == expected
        assert sorted_rows(await (await catalog.load_table("wf.raw.events")).scan().to_arrow()) == expected

        theirs = pyiceberg_client(server).load_table("wf.raw.events")
        assert sorted_rows(theirs.scan().to_arrow()) == expected
        assert theirs.metadata_location == table.metadata_location
        theirs.append(pa.table({"id": [6], "region": ["eu"], "note": ["py"]}, schema=NOTED))

        await table.refresh()
        assert sorted_rows(await table.scan().to_arrow()) == [
            *expected,
            {"id": 6, "region": "eu", "note": "py"},
        ]
        assert [s.operation for s in table.history()] == ["append", "delete", "append", "append"]


WRITER = """
import sys
import pyarrow as pa
from aioiceberg import sync

url, identifier, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
with sync.connect(url) as catalog:
    table = catalog.load_table(identifier)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(3):
        row_id = worker * 100 + i
        table.append(pa.table({"id": [row_id], "region": [f"p{worker}"]}, schema=schema))
        print(row_id, flush=True)
"""


@pytest.mark.anyio
async def test_tasks_processes_and_pyiceberg_appending_at_once_each_land_once(server: RestServer) -> None:
    """8 tasks x 3 appends through one catalog, 3 processes x 3 appends and PyIceberg x 3,
    all at once: every acknowledged append is there exactly once, and the history is a line."""
    url = f"rest+{server.url}"
    acknowledged: list[int] = []
    async with aioiceberg.connect(url) as catalog:
        await catalog.create_namespace("hot")
        await catalog.create_table("hot.t", EVENTS, properties=HOT_PROPERTIES)
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, url, "hot.t", str(w)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            for w in (1, 2, 3)
        ]
        try:
            for w in writers:
                assert w.stdout is not None
                assert (await anyio.to_thread.run_sync(w.stdout.readline)).strip() == "ready"

            async def task(n: int) -> None:
                table = await catalog.load_table("hot.t")
                for i in range(3):
                    row_id = 1000 + n * 10 + i
                    await table.append(events([row_id], [f"t{n}"]))
                    acknowledged.append(row_id)

            def pyiceberg_appends() -> None:
                theirs = pyiceberg_client(server).load_table("hot.t")
                for i in range(3):
                    theirs.append(events([9000 + i], ["py"]))
                    acknowledged.append(9000 + i)

            for w in writers:
                assert w.stdin is not None
                w.stdin.write("go\n")
                w.stdin.flush()
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(task, n)
                tg.start_soon(anyio.to_thread.run_sync, pyiceberg_appends)
            for w in writers:
                out, _ = await anyio.to_thread.run_sync(w.communicate, None, 60)
                assert w.returncode == 0
                acknowledged.extend(int(line) for line in out.split())
        finally:
            for w in writers:
                if w.poll() is None:
                    w.kill()
                    w.wait()

        assert len(acknowledged) == 8 * 3 + 3 * 3 + 3
        table = await catalog.load_table("hot.t")
        assert sorted(r["id"] for r in (await table.scan().to_arrow()).to_pylist()) == sorted(acknowledged)
        snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
        assert len(snapshots) == len(acknowledged)
        assert snapshots[0].parent_snapshot_id is None
        for parent, child in itertools.pairwise(snapshots):
            assert child.parent_snapshot_id == parent.snapshot_id
        assert table.metadata.current_snapshot_id == snapshots[-1].snapshot_id


def test_blocking_connect(server: RestServer) -> None:
    from aioiceberg import sync

    with sync.connect(f"rest+{server.url}") as catalog:
        catalog.create_namespace("blocking")
        table = catalog.create_table("blocking.t", EVENTS, partition_by=["region"])
        table.append(events([2, 1], ["eu", "us"]))
        assert catalog.list_tables("blocking") == ["blocking.t"]
        again = catalog.load_table("blocking.t")
        assert sorted_rows(again.scan().to_arrow()) == [{"id": 1, "region": "us"}, {"id": 2, "region": "eu"}]


@pytest.mark.anyio
async def test_an_s3_table_gets_its_storage_settings_from_the_server(moto_endpoint: str) -> None:
    """The client is given no storage options: the endpoint and keys the server hands out
    in the load reply's ``config`` are what its writes and reads reach moto with."""
    from servers.backends import create_bucket
    from servers.plugin import s3_storage_options

    bucket = await create_bucket(moto_endpoint)
    options = s3_storage_options(moto_endpoint)
    with RestServer(f"s3://{bucket}/wh", storage_options=options, table_config=options) as rest:
        async with aioiceberg.connect(f"rest+{rest.url}") as catalog:
            await catalog.create_namespace("s3ns")
            table = await catalog.create_table("s3ns.t", EVENTS)
            assert table.location == f"s3://{bucket}/wh/s3ns/t"
            assert table.io.options.endpoint_url == moto_endpoint  # type: ignore[attr-defined]
            await table.append(events([1, 2], ["eu", "us"]))
            again = await catalog.load_table("s3ns.t")
            assert sorted_rows(await again.scan().to_arrow()) == [
                {"id": 1, "region": "eu"},
                {"id": 2, "region": "us"},
            ]
        theirs = pyiceberg_client(rest).load_table("s3ns.t")
        assert sorted_rows(theirs.scan().to_arrow()) == [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
