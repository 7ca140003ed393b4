"""Views through ``aioiceberg serve`` over a SQL catalog: PyIceberg's RestCatalog view calls
and the REST protocol's view routes, then the same routes tried as a hostile client would
(names that escape, locations outside the catalog's root, huge and deep bodies). Every
answer is the REST error model, never a 500, and nothing lands outside the warehouse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchViewError, TableAlreadyExistsError, ViewAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion
from servers.rest import RestServer, bearer, request, request_json, request_json_async, serve_in_process

import aioiceberg
from aioiceberg.catalogs.sql import SqlCatalog
from aioiceberg.errors import CommitFailedError, ViewNotFoundError
from aioiceberg.server.auth import Access, AuthConfig, Principal
from aioiceberg.spec.schema import Schema as OurSchema
from aioiceberg.spec.types import LongType as OurLong
from aioiceberg.spec.types import NestedField as OurField
from aioiceberg.spec.view_metadata import SqlRepresentation
from aioiceberg.spec.view_metadata import ViewVersion as OurVersion
from aioiceberg.spec.view_updates import ViewChanges
from aioiceberg.view import ViewCatalog

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
SCHEMA_JSON = json.loads(SCHEMA.model_dump_json(by_alias=True))


@dataclass
class Site:
    warehouse: Path
    outside: Path
    database: Path
    url: str = ""

    def client(self) -> PyCatalog:
        return load_catalog("rest", type="rest", uri=self.url)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("views")
    found = Site(base / "wh", base / "wh-outside", base / "catalog.db")
    found.warehouse.mkdir()
    found.outside.mkdir()
    with RestServer(f"sqlite:///{found.database}", tables_in=str(found.warehouse)) as rest:
        found.url = rest.url
        yield found
    assert list(found.outside.iterdir()) == []  # nothing written beside the warehouse


def spark_version(sql: str, namespace: str) -> ViewVersion:
    return ViewVersion.model_validate(
        {
            "version-id": 1,
            "schema-id": 0,
            "summary": {"engine-name": "pyiceberg"},
            "representations": [SQLViewRepresentation(type="sql", sql=sql, dialect="spark")],
            "default-namespace": [namespace],
        }
    )


def version_json(sql: str, namespace: str, schema_id: int = 0, ts: int = 1000) -> dict[str, Any]:
    return {
        "version-id": 1,
        "timestamp-ms": ts,
        "schema-id": schema_id,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": [namespace],
    }


def create_body(name: str, sql: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA_JSON, "view-version": version_json(sql, namespace), **extra}


def make_namespace(site: Site, name: str) -> None:
    status, _ = request_json(site.url, "POST", "/v1/namespaces", {"namespace": [name]})
    assert status == 200


def test_config_advertises_views(site: Site) -> None:
    status, config = request_json(site.url, "GET", "/v1/config")
    assert status == 200
    assert "GET /v1/{prefix}/namespaces/{namespace}/views" in config["endpoints"]
    assert "POST /v1/{prefix}/views/rename" in config["endpoints"]


def test_pyiceberg_view_calls(site: Site) -> None:
    client = site.client()
    client.create_namespace("py")
    client.create_table("py.events", SCHEMA)
    view = client.create_view("py.recent", SCHEMA, spark_version("SELECT id FROM events", "py"))
    assert view.metadata.current_version_id == 1
    assert view.metadata.location == f"{site.warehouse}/py/recent"
    assert client.list_views("py") == [("py", "recent")]
    assert client.list_tables("py") == [("py", "events")]
    assert client.view_exists("py.recent") and not client.view_exists("py.events")
    assert not client.table_exists("py.recent")
    with pytest.raises(ViewAlreadyExistsError):
        client.create_view("py.recent", SCHEMA, spark_version("SELECT 1", "py"))
    with pytest.raises(ViewAlreadyExistsError):  # a table holds the name
        client.create_view("py.events", SCHEMA, spark_version("SELECT 1", "py"))
    with pytest.raises(TableAlreadyExistsError):  # a view holds the name
        client.create_table("py.recent", SCHEMA)
    loaded = client.load_view("py.recent")
    (version,) = json.loads(loaded.metadata.model_dump_json(by_alias=True))["versions"]
    assert version["representations"][0]["sql"] == "SELECT id FROM events"
    metadata_files = list((site.warehouse / "py" / "recent" / "metadata").iterdir())
    assert [p.name[:6] for p in metadata_files] == ["00000-"]
    client.drop_view("py.recent")
    assert not client.view_exists("py.recent")
    assert client.list_views("py") == []
    with pytest.raises(NoSuchViewError):
        client.drop_view("py.recent")


def test_replace_by_commit_and_rename(site: Site) -> None:
    make_namespace(site, "rp")
    status, created = request_json(
        site.url, "POST", "/v1/namespaces/rp/views", create_body("v", "SELECT 1 AS id", "rp")
    )
    assert status == 200, created
    uuid = created["metadata"]["view-uuid"]
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [
            {"action": "add-schema", "schema": SCHEMA_JSON},
            {"action": "add-view-version", "view-version": version_json("SELECT 2 AS id", "rp", -1, 2000)},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"comment": "two"}},
        ],
    }
    status, replaced = request_json(site.url, "POST", "/v1/namespaces/rp/views/v", replace)
    assert status == 200, replaced
    metadata = replaced["metadata"]
    assert metadata["current-version-id"] == 2 and metadata["properties"] == {"comment": "two"}
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    assert "/rp/v/metadata/00001-" in replaced["metadata-location"]
    status, loaded = request_json(site.url, "GET", "/v1/namespaces/rp/views/v")
    assert status == 200 and loaded["metadata-location"] == replaced["metadata-location"]

    stale = {**replace, "requirements": [{"type": "assert-view-uuid", "uuid": "not-this-view"}]}
    status, answer = request_json(site.url, "POST", "/v1/namespaces/rp/views/v", stale)
    assert status == 409 and answer["error"]["type"] == "CommitFailedException"

    rename = {"source": {"namespace": ["rp"], "name": "v"}, "destination": {"namespace": ["rp"], "name": "w"}}
    assert request(site.url, "POST", "/v1/views/rename", rename).status == 204
    assert request(site.url, "HEAD", "/v1/namespaces/rp/views/w").status == 204
    assert request(site.url, "HEAD", "/v1/namespaces/rp/views/v").status == 404
    status, answer = request_json(site.url, "POST", "/v1/views/rename", rename)
    assert status == 404 and answer["error"]["type"] == "NoSuchViewException"
    to_missing = {
        **rename,
        "source": rename["destination"],
        "destination": {"namespace": ["nope"], "name": "x"},
    }
    status, answer = request_json(site.url, "POST", "/v1/views/rename", to_missing)
    assert status == 404 and answer["error"]["type"] == "NoSuchNamespaceException"


def _error(reply: tuple[int, Any], expected: int) -> str:
    status, answer = reply
    assert status == expected, answer
    assert set(answer["error"]) == {"message", "type", "code"}
    return str(answer["error"]["message"])


@pytest.mark.parametrize(
    "name",
    ["..%2F..%2Fescape", "a%00b", "%2E%2E", "a%2Fb", "x" * 300, "%0Aline"],
)
def test_view_names_that_escape(site: Site, name: str) -> None:
    make_namespace(site, f"hn{abs(hash(name)) % 10**8}")
    ns = f"hn{abs(hash(name)) % 10**8}"
    reply = request(site.url, "GET", f"/v1/namespaces/{ns}/views/{name}")
    assert reply.status in (400, 404), reply.text
    body = create_body(
        name.replace("%2F", "/").replace("%00", "\x00").replace("%2E", ".").replace("%0A", "\n"),
        "SELECT 1",
        ns,
    )
    status, answer = request_json(site.url, "POST", f"/v1/namespaces/{ns}/views", body)
    if status == 200:  # a plain odd name: it stays inside the namespace's folder
        assert Path(answer["metadata"]["location"]).resolve().is_relative_to(site.warehouse.resolve() / ns)
    else:
        _error((status, answer), 400)


def test_locations_outside_the_root(site: Site) -> None:
    make_namespace(site, "loc")
    for location in (
        str(site.outside / "v"),
        f"file://{site.outside}/v",
        f"{site.warehouse}/../wh-outside/v",
        f"{site.warehouse}",
        "s3://elsewhere/v",
    ):
        status, answer = request_json(
            site.url,
            "POST",
            "/v1/namespaces/loc/views",
            create_body("v", "SELECT 1", "loc", location=location),
        )
        assert status in (400, 403), answer
        assert (
            str(site.outside.parent) not in answer["error"]["message"]
            or location in answer["error"]["message"]
        )
    status, created = request_json(
        site.url, "POST", "/v1/namespaces/loc/views", create_body("v", "SELECT 1", "loc")
    )
    assert status == 200, created
    move = {"updates": [{"action": "set-location", "location": str(site.outside / "moved")}]}
    _error(request_json(site.url, "POST", "/v1/namespaces/loc/views/v", move), 403)
    # a view never nests with a table
    status, _ = request_json(
        site.url, "POST", "/v1/namespaces/loc/tables", {"name": "t", "schema": SCHEMA_JSON}
    )
    assert status == 200
    inside_table = create_body("v2", "SELECT 1", "loc", location=f"{site.warehouse}/loc/t/v2")
    _error(request_json(site.url, "POST", "/v1/namespaces/loc/views", inside_table), 403)


def test_bad_bodies(site: Site) -> None:
    make_namespace(site, "bad")
    views = "/v1/namespaces/bad/views"
    # a schema nested 3000 lists deep: valid JSON that a recursive reader cannot follow
    level = '{"type": "list", "element-id": 1, "element-required": false, "element": '
    deep_type = level * 3000 + '"int"' + "}" * 3000
    deep_create = (
        '{"name": "v", "view-version": ' + json.dumps(version_json("s", "bad")) + ', "schema": '
        '{"type": "struct", "fields": [{"id": 1, "name": "x", "required": false, "type": '
        + deep_type
        + "}]}}"
    ).encode()
    cases: list[dict[str, Any]] = [
        {},
        {"name": 3, "schema": SCHEMA_JSON, "view-version": version_json("s", "bad")},
        {"name": "v", "schema": "no", "view-version": version_json("s", "bad")},
        {"name": "v", "schema": SCHEMA_JSON, "view-version": {"version-id": "one"}},
        {
            "name": "v",
            "schema": SCHEMA_JSON,
            "view-version": {**version_json("s", "bad"), "representations": []},
        },
        {
            "name": "v",
            "schema": SCHEMA_JSON,
            "view-version": version_json("s", "bad"),
            "properties": {"a": []},
        },
    ]
    for body in cases:
        _error(request_json(site.url, "POST", views, body), 400)
    _error(request_json(site.url, "POST", views, deep_create), 400)
    nested = b'{"name": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    _error(request_json(site.url, "POST", views, nested), 400)
    huge = b'{"name": "' + b"x" * (17 * 1024 * 1024) + b'"}'
    assert request(site.url, "POST", views, huge).status == 413
    status, _ = request_json(site.url, "POST", views, create_body("v", "SELECT 1", "bad"))
    assert status == 200
    for commit in (
        {"updates": "all"},
        {"updates": [{"action": "set-current-view-version", "view-version-id": 99}]},
        {"updates": [{"action": "add-view-version", "view-version": version_json("s", "bad", 42)}]},
        {"updates": [{"action": "remove-everything"}]},
        {"updates": [], "requirements": [{"type": "assert-table-uuid", "uuid": "x"}]},
        {"updates": [{"action": "upgrade-format-version", "format-version": 2}]},
        {"updates": [{"action": "set-properties", "updates": {}}] * 2000},
    ):
        _error(request_json(site.url, "POST", f"{views}/v", commit), 400)
    _error(request_json(site.url, "GET", f"{views}/missing"), 404)
    _error(request_json(site.url, "GET", "/v1/namespaces/nowhere/views"), 404)
    _error(request_json(site.url, "POST", "/v1/namespaces/nowhere/views", create_body("v", "s", "x")), 404)


@pytest.mark.anyio
async def test_catalogs_without_views_answer_501(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    await catalog.create_namespace("ns")
    async with serve_in_process(catalog) as url:
        status, config = await request_json_async(url, "GET", "/v1/config")
        assert status == 200 and not any("/views" in e for e in config["endpoints"])
        status, answer = await request_json_async(url, "GET", "/v1/namespaces/ns/views")
        assert status == 501 and answer["error"]["type"] == "UnsupportedOperationException"


@pytest.mark.anyio
async def test_our_rest_client_view_calls(site: Site) -> None:
    await request_json_async(site.url, "POST", "/v1/namespaces", {"namespace": ["ours"]})
    schema = OurSchema(OurField(1, "id", OurLong(), False))
    first = OurVersion(
        1, 1000, 0, {"engine-name": "aioiceberg"}, (SqlRepresentation("SELECT 1 AS id", "spark"),), ("ours",)
    )
    async with aioiceberg.connect(f"rest+{site.url}") as client:
        assert isinstance(client, ViewCatalog)
        created = await client.create_view("ours.v", schema, first, {"owner": "a"})
        assert created.sql == "SELECT 1 AS id"
        assert await client.list_views("ours") == ["ours.v"]
        assert await client.view_exists("ours.v") and not await client.view_exists("ours.nope")
        second = OurVersion(
            1,
            2000,
            0,
            {"engine-name": "aioiceberg"},
            (SqlRepresentation("SELECT 2 AS id", "spark"),),
            ("ours",),
        )
        replaced = await client.replace_view("ours.v", schema, second)
        assert replaced.metadata.current_version_id == 2 and replaced.sql == "SELECT 2 AS id"
        changes = ViewChanges(replaced.metadata)
        changes.properties.pop("owner")
        changes.properties["comment"] = "c"
        changes.set_current(1)
        committed = await client.commit_view(replaced, changes.build())
        assert committed.metadata.properties == {"comment": "c"} and committed.sql == "SELECT 1 AS id"
        # the protocol guards a view commit by the view's uuid alone: a view dropped and made
        # again under the name refuses a commit meant for the old one
        await client.drop_view("ours.v")
        again = await client.create_view("ours.v", schema, first)
        with pytest.raises(CommitFailedError):
            await client.commit_view(replaced, changes.build())
        assert (await client.load_view("ours.v")).metadata_location == again.metadata_location
        committed = again
        renamed = await client.rename_view("ours.v", "ours.w")
        assert renamed.metadata.view_uuid == committed.metadata.view_uuid
        with pytest.raises(ViewNotFoundError):
            await client.load_view("ours.v")
        await client.drop_view("ours.w")
        assert await client.list_views("ours") == []
        with pytest.raises(ViewNotFoundError):
            await client.drop_view("ours.w")


WRITER_TOKEN, READER_TOKEN = "view-writer-token-0123456789", "view-reader-token-0123456789"
AUTH = AuthConfig(
    {
        "writer": Principal("writer", None, (WRITER_TOKEN,), {("vw",): Access.WRITE}),
        "reader": Principal("reader", None, (READER_TOKEN,), {("vw",): Access.READ}),
    },
    3600,
    b"signing-key-0123456789abcdef0123456789",
    persistent_key=True,
)


@pytest.mark.anyio
async def test_view_routes_are_authenticated_and_granted(tmp_path: Path) -> None:
    catalog = SqlCatalog(str(tmp_path / "cat.db"), warehouse=str(tmp_path / "wh"))
    async with catalog:
        await catalog.create_namespace("vw")
        await catalog.create_namespace("other")
        async with serve_in_process(catalog, auth=AUTH) as url:
            views = "/v1/namespaces/vw/views"
            body = create_body("v", "SELECT 1", "vw")
            status, _ = await request_json_async(url, "POST", views, body)
            assert status == 401
            status, _ = await request_json_async(url, "POST", views, body, bearer(READER_TOKEN))
            assert status == 403
            status, _ = await request_json_async(url, "POST", views, body, bearer(WRITER_TOKEN))
            assert status == 200
            status, listed = await request_json_async(url, "GET", views, headers=bearer(READER_TOKEN))
            assert status == 200 and listed["identifiers"] == [{"namespace": ["vw"], "name": "v"}]
            status, _ = await request_json_async(url, "DELETE", f"{views}/v", headers=bearer(READER_TOKEN))
            assert status == 403
            away = {
                "source": {"namespace": ["vw"], "name": "v"},
                "destination": {"namespace": ["other"], "name": "v"},
            }
            status, _ = await request_json_async(url, "POST", "/v1/views/rename", away, bearer(WRITER_TOKEN))
            assert status == 403  # no grant on the destination
            assert await catalog.view_exists("vw.v")


def test_stage_create_over_a_view_is_a_conflict(site: Site) -> None:
    make_namespace(site, "stage")
    status, _ = request_json(
        site.url, "POST", "/v1/namespaces/stage/views", create_body("v", "SELECT 1", "stage")
    )
    assert status == 200
    staged = {"name": "v", "schema": SCHEMA_JSON, "stage-create": True}
    status, answer = request_json(site.url, "POST", "/v1/namespaces/stage/tables", staged)
    assert status == 409 and "a view of that name" in answer["error"]["message"]
