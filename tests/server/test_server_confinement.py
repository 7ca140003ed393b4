"""Confinement of the warehouse catalog, tried as a hostile client would: the real ``aioiceberg
serve`` process over a local warehouse, reached through PyIceberg's RestCatalog and raw HTTP,
and the same rules through the Python API.

Canary files lie outside the warehouse, in a sibling folder whose name shares the warehouse's
prefix (``warehouse-x``), and in an HTTP server that counts the requests it gets; every route
that could read, write or delete outside the warehouse is tried, then the canaries are checked.
"""

from __future__ import annotations

import http.server
import json
import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import BadRequestError, ForbiddenError, RESTError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from servers.rest import RestServer, purge, register, request_json, set_location

import aioiceberg
from aioiceberg.catalogs.base import register_not_found
from aioiceberg.commit import SetLocation
from aioiceberg.commit.snapshot_producer import MetadataChange
from aioiceberg.errors import (
    LocationNotAllowedError,
    TableNotFoundError,
    ValidationError,
)

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True))
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False)])
SECRET = "canary-secret-7f3a"
SCHEMA_JSON = json.loads(SCHEMA.model_dump_json(by_alias=True))


def ids(*values: int) -> pa.Table:
    return pa.table({"id": list(values)}, schema=ARROW)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a real metadata file, and records that it was asked."""

    hits: list[str]
    body: bytes

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        return None


@dataclass
class Site:
    """The served warehouse, the canaries around it and the counting HTTP server."""

    server: RestServer
    base: Path
    warehouse: Path
    outside: Path
    sibling: Path
    http_url: str
    hits: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The served catalog's (``http_url`` is the counting server's)."""
        return self.server.url

    def client(self) -> PyCatalog:
        return load_catalog("rest", type="rest", uri=self.url)

    def canaries(self) -> dict[Path, bytes]:
        return {
            p: p.read_bytes()
            for d in (self.outside, self.sibling)
            for p in sorted(d.rglob("*"))
            if p.is_file()
        }


CANARIES = {"canary.txt": b"keep me", "sub/deep.txt": b"keep me too", "data/x.parquet": b"not data"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("confine")
    warehouse, outside, sibling = base / "warehouse", base / "outside", base / "warehouse-x"
    warehouse.mkdir()
    for folder in (outside, sibling):
        for name, data in CANARIES.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    hits: list[str] = []
    handler = type("Recorder", (_Recorder,), {"hits": hits, "body": b"{}"})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with RestServer(str(warehouse)) as server:
            url = f"http://127.0.0.1:{httpd.server_address[1]}"
            yield Site(server, base, warehouse, outside, sibling, url, hits)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.fixture
def expected_canaries(site: Site) -> Iterator[dict[Path, bytes]]:
    """The canaries as they were; checked after the test, whatever it did."""
    before = site.canaries()
    assert len(before) == 2 * len(CANARIES)
    yield before
    assert site.canaries() == before


def quoted(name: str) -> str:
    """Every byte percent-encoded, dots too: a path segment a client cannot have normalized away."""
    return "".join(f"%{b:02X}" for b in name.encode())


def new_namespace(catalog: PyCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def error_of(answer: tuple[int, Any]) -> tuple[int, str, str]:
    status, body = answer
    assert isinstance(body, dict) and "error" in body, answer
    return status, body["error"]["type"], body["error"]["message"]


def shows_no_server_path(site: Site, message: str) -> bool:
    return str(site.base) not in message


# -- set-location and write paths -----------------------------------------------------------------
def test_set_location_is_refused_and_a_purge_keeps_what_lies_outside(
    site: Site, expected_canaries: dict[Path, bytes]
) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(ids(1, 2))
    path = f"/v1/namespaces/{ns}/tables/t"
    for target in (site.outside, site.sibling, site.warehouse / ns / "other", f"file://{site.outside}"):
        status, kind, _ = error_of(set_location(site.url, ns, "t", str(target)))
        assert (status, kind) == (403, "ForbiddenException"), target
    for key in ("write.metadata.path", "write.data.path"):
        change: dict[str, Any] = {"action": "set-properties", "updates": {key: str(site.outside)}}
        status, kind, _ = error_of(
            request_json(site.url, "POST", path, {"requirements": [], "updates": [change]})
        )
        assert (status, kind) == (403, "ForbiddenException"), key
    reloaded = catalog.load_table(f"{ns}.t")
    assert reloaded.metadata.location.rstrip("/") == str(site.warehouse / ns / "t")
    assert reloaded.scan().to_arrow().num_rows == 2
    assert purge(site.url, ns, "t") == 204
    assert not list((site.warehouse / ns / "t").rglob("*.json"))


# -- register -------------------------------------------------------------------------------------
def _real_metadata(site: Site, catalog: PyCatalog, ns: str, name: str) -> Path:
    table = catalog.create_table(f"{ns}.{name}", schema=SCHEMA)
    table.append(ids(7))
    return Path(catalog.load_table(f"{ns}.{name}").metadata_location.removeprefix("file://"))


def test_register_reads_nothing_outside_the_warehouse_and_answers_as_for_a_missing_file(
    site: Site, expected_canaries: dict[Path, bytes]
) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    real = _real_metadata(site, catalog, ns, "src")
    copied = site.outside / "metadata" / "v1.metadata.json"
    copied.parent.mkdir(exist_ok=True)
    document = json.loads(real.read_bytes())
    copied.write_text(json.dumps({**document, "location": str(site.outside)}))
    try:
        asked = [
            str(copied),
            f"file://{copied}",
            str(site.sibling / "canary.txt"),
            "file:///etc/passwd",
            "/etc/passwd",
            f"{site.warehouse}/{ns}/../../outside/metadata/v1.metadata.json",
            f"{site.warehouse}/{ns}/./src/metadata/{real.name}",
            f"{site.http_url}/warehouse/{ns}/src/metadata/v1.metadata.json",
            f"s3://bucket/{ns}/src/metadata/v1.metadata.json",
            f"{site.warehouse}/{ns}/missing/metadata/v1.metadata.json",  # inside, but missing
        ]
        for i, location in enumerate(asked):
            answer = register(site.url, ns, f"r{i}", location)
            assert error_of(answer) == (404, "NoSuchTableException", register_not_found(location)), location
        assert site.hits == []
        with pytest.raises(RESTError, match="no readable metadata file"):
            catalog.register_table(f"{ns}.r", str(copied))
    finally:
        shutil.rmtree(copied.parent)


def test_register_refuses_a_warehouse_file_naming_an_outside_location_and_purge_keeps_it(
    site: Site, expected_canaries: dict[Path, bytes]
) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    real = _real_metadata(site, catalog, ns, "src")
    document = json.loads(real.read_bytes())
    planted = site.warehouse / ns / "planted" / "metadata" / "00000-x.metadata.json"
    planted.parent.mkdir(parents=True)
    for location in (site.outside, site.sibling):
        planted.write_text(json.dumps({**document, "location": str(location)}))
        status, kind, message = error_of(register(site.url, ns, "planted", str(planted)))
        assert (status, kind) == (403, "ForbiddenException")
        assert str(location) not in message
    status, _, _ = error_of(
        request_json(site.url, "DELETE", f"/v1/namespaces/{ns}/tables/planted?purgeRequested=true")
    )
    assert status == 404
    # the table's own location: registered, and its purge deletes only its own files
    planted.write_text(json.dumps({**document, "location": str(planted.parent.parent)}))
    answer = register(site.url, ns, "planted", str(planted))
    assert answer[0] == 200, answer
    assert catalog.load_table(f"{ns}.planted").scan().to_arrow().num_rows == 1  # src's data, by reference
    assert purge(site.url, ns, "planted") == 204
    assert catalog.load_table(f"{ns}.src").scan().to_arrow().num_rows == 1


def test_register_of_foreign_json_names_no_content(site: Site, expected_canaries: dict[Path, bytes]) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    foreign = site.warehouse / ns / "foreign" / "metadata" / "v1.metadata.json"
    foreign.parent.mkdir(parents=True)
    for content in (
        json.dumps({"format-version": SECRET, "password": SECRET}),
        f"not json {SECRET}",
        "[1, 2",
    ):
        foreign.write_text(content)
        status, kind, message = error_of(register(site.url, ns, "foreign", str(foreign)))
        assert (status, kind) == (400, "BadRequestException")
        assert "is not an Iceberg table metadata file" in message and SECRET not in message


# -- nesting --------------------------------------------------------------------------------------
def test_tables_never_nest_through_the_server(site: Site, expected_canaries: dict[Path, bytes]) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    catalog.create_table(f"{ns}.a", schema=SCHEMA).append(ids(1))
    # a namespace where a table is, so that a table could go inside it
    status, kind, _ = error_of(request_json(site.url, "POST", "/v1/namespaces", {"namespace": [ns, "a"]}))
    assert (status, kind) == (400, "BadRequestException")
    # a table inside table a: its namespace does not exist, and it is refused either way
    for attempt in (
        request_json(
            site.url, "POST", f"/v1/namespaces/{ns}%1Fa/tables", {"name": "b", "schema": SCHEMA_JSON}
        ),
        request_json(
            site.url,
            "POST",
            "/v1/tables/rename",
            {
                "source": {"namespace": [ns], "name": "a"},
                "destination": {"namespace": [ns, "a"], "name": "b"},
            },
        ),
    ):
        assert error_of(attempt)[0] in (403, 404)
    # a table whose directory holds tables, or shares a namespace's
    catalog.create_namespace((ns, "holder"))
    catalog.create_table((ns, "holder", "inner"), schema=SCHEMA).append(ids(2))
    catalog.create_namespace((ns, "props"), {"owner": "x"})
    for name in ("holder", "props"):
        with pytest.raises(ForbiddenError):
            catalog.create_table(f"{ns}.{name}", schema=SCHEMA)
        body = {"name": name, "schema": SCHEMA_JSON, "stage-create": True}
        assert error_of(request_json(site.url, "POST", f"/v1/namespaces/{ns}/tables", body))[:2] == (
            403,
            "ForbiddenException",
        )
    assert catalog.load_table((ns, "holder", "inner")).scan().to_arrow().num_rows == 1


def test_create_by_commit_inside_a_table_writes_nothing(
    site: Site, expected_canaries: dict[Path, bytes]
) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    catalog.create_namespace((ns, "holder"))
    catalog.create_table((ns, "holder", "inner"), schema=SCHEMA)
    before = sorted(p for p in (site.warehouse / ns / "holder").rglob("*"))
    with pytest.raises(ForbiddenError):  # refused at the staged create already
        catalog.create_table_transaction(f"{ns}.holder", schema=SCHEMA).commit_transaction()
    where = site.warehouse / ns / "holder"
    updates = [
        {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": SCHEMA_JSON, "last-column-id": 1},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
    ]
    create = {"requirements": [{"type": "assert-create"}]}
    path = f"/v1/namespaces/{ns}/tables/holder"
    for location in (where, site.outside):
        body = {**create, "updates": [*updates, {"action": "set-location", "location": str(location)}]}
        status, kind, _ = error_of(request_json(site.url, "POST", path, body))
        assert (status, kind) == (403, "ForbiddenException"), location
    assert sorted(p for p in where.rglob("*")) == before
    body = {
        **create,
        "updates": [*updates, {"action": "set-location", "location": str(where.parent / "fresh")}],
    }
    status, _ = request_json(site.url, "POST", f"/v1/namespaces/{ns}/tables/fresh", body)
    assert status == 200  # the same commit, allowed


def test_a_nested_table_from_before_survives_its_outer_tables_purge(
    site: Site, expected_canaries: dict[Path, bytes]
) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    catalog.create_table(f"{ns}.outer", schema=SCHEMA).append(ids(1))

    async def nest() -> None:  # the layout an older version allowed: a catalog one level down
        async with aioiceberg.connect(str(site.warehouse / ns)) as below:
            await (await below.create_table("outer.inner", schema=ARROW)).append(ids(5, 6))

    anyio.run(nest)
    assert purge(site.url, ns, "outer") == 204
    assert not catalog.table_exists(f"{ns}.outer")
    inner = site.warehouse / ns / "outer" / "inner"
    assert list((inner / "metadata").glob("v*.metadata.json")) and list((inner / "data").glob("*.parquet"))
    survivor = catalog.load_table((ns, "outer", "inner"))
    assert sorted(survivor.scan().to_arrow()["id"].to_pylist()) == [5, 6]


# -- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["..", ".", "a\x00b", "tab\tname", "x" * 300, "é" * 130])
def test_bad_names_are_400_without_server_paths(site: Site, level: str) -> None:
    catalog = site.client()
    ns = new_namespace(catalog)
    schema = SCHEMA_JSON
    answers = [
        request_json(site.url, "POST", "/v1/namespaces", {"namespace": [level]}),
        request_json(site.url, "POST", f"/v1/namespaces/{ns}/tables", {"name": level, "schema": schema}),
        register(site.url, ns, level, "/x.metadata.json"),
        request_json(site.url, "GET", f"/v1/namespaces/{quoted(level)}/tables"),
        request_json(site.url, "GET", f"/v1/namespaces/{ns}/tables/{quoted(level)}"),
        request_json(site.url, "DELETE", f"/v1/namespaces/{ns}/tables/{quoted(level)}?purgeRequested=true"),
    ]
    for answer in answers:
        status, kind, message = error_of(answer)
        assert (status, kind) == (400, "BadRequestException"), answer
        assert shows_no_server_path(site, message), message
    with pytest.raises(BadRequestError):
        catalog.create_table((ns, level), schema=SCHEMA)


# -- the Python API -------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_python_api_refuses_escaping_names(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        for bad in (
            ("db", ".."),
            ("..", "t"),
            ("db", "a\x00"),
            ("db", "x" * 256),
            ("db", "a\ud800"),
            "db..t",
        ):
            with pytest.raises(ValidationError):
                await catalog.create_table(bad, schema=ARROW)
            with pytest.raises(ValidationError):
                await catalog.load_table(bad)
            with pytest.raises(ValidationError):
                await catalog.register_table(bad, str(tmp_path / "wh/db/t/metadata/v1.metadata.json"))
            with pytest.raises(ValidationError):
                await catalog.create_namespace(bad)
        await catalog.create_table(("db", "x" * 255), schema=ARROW)  # the longest name part
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wh"]


@pytest.mark.anyio
async def test_python_api_never_nests_tables(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        await catalog.create_table("db.a", schema=ARROW)
        with pytest.raises(LocationNotAllowedError, match=r"inside table db\.a"):
            await catalog.create_table("db.a.b", schema=ARROW)
        with pytest.raises(ValidationError, match="is a table"):
            await catalog.create_namespace("db.a")
        await catalog.create_table("db.n.inner", schema=ARROW)
        with pytest.raises(LocationNotAllowedError, match=r"hold other tables.*db\.n\.inner"):
            await catalog.create_table("db.n", schema=ARROW)
        await catalog.create_namespace("db.e", {"k": "v"})
        with pytest.raises(LocationNotAllowedError, match="is a namespace"):
            await catalog.create_table("db.e", schema=ARROW)
        with pytest.raises(LocationNotAllowedError, match=r"inside table db\.a"):
            await catalog.rename_table("db.n.inner", "db.a.inner")
        with pytest.raises(LocationNotAllowedError):
            await catalog.rename_table("db.a", "db.n")
        # register: a file of table db.a, adopted as db.a.b, would put db.a.b in db.a's directory
        a = await catalog.load_table("db.a")
        with pytest.raises(LocationNotAllowedError, match=r"inside table db\.a"):
            await catalog.register_table("db.a.b", a.metadata_location)
        assert await catalog.list_tables("db") == ["db.a"]
        assert await catalog.table_exists("db.n.inner")
        assert not await catalog.table_exists("db.a.b")


@pytest.mark.anyio
async def test_python_api_commits_no_location_or_write_path_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.t", schema=ARROW)
        await table.append(ids(1))
        for target in (outside, tmp_path / "wh-x", tmp_path / "wh" / "db" / "u"):
            with pytest.raises(LocationNotAllowedError, match="set-location is refused"):
                async with table.transaction() as tx:
                    tx.changes.append(MetadataChange([SetLocation(str(target))]))
            with pytest.raises(LocationNotAllowedError):
                await table.set_properties({"write.data.path": str(target)})
        await table.set_properties({"write.data.path": f"{table.location}/data-2"})  # inside: fine
        await table.append(ids(2))
        assert len(table.metadata.snapshots) == 2 and not outside.exists()
        loaded = await catalog.load_table("db.t")
        with pytest.raises(LocationNotAllowedError):
            await loaded.set_properties({"write.metadata.path": str(outside)})
        assert sorted((await loaded.scan().to_arrow())["id"].to_pylist()) == [1, 2]


@pytest.mark.anyio
async def test_python_api_register_reads_only_the_warehouse(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.t", schema=ARROW)
        outside = tmp_path / "outside.metadata.json"
        shutil.copy(table.metadata_location, outside)
        missing = tmp_path / "wh" / "db" / "t" / "metadata" / "v9.metadata.json"
        for location in (
            str(outside),
            f"file://{outside}",
            str(missing),
            "http://127.0.0.1:9/x.metadata.json",
        ):
            with pytest.raises(TableNotFoundError) as caught:
                await catalog.register_table("db.u", location)
            assert str(caught.value) == register_not_found(location)
        foreign = tmp_path / "wh" / "db" / "f" / "metadata" / "v1.metadata.json"
        foreign.parent.mkdir(parents=True)
        foreign.write_text(json.dumps({"location": SECRET}))
        with pytest.raises(ValidationError, match="is not an Iceberg table metadata file") as refused:
            await catalog.register_table("db.f", str(foreign))
        assert SECRET not in str(refused.value)
        assert not await catalog.table_exists("db.u")


@pytest.mark.anyio
async def test_python_api_purge_keeps_neighbours_and_nested_tables(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    async with aioiceberg.connect(str(root)) as catalog:
        outer = await catalog.create_table("db.t", schema=ARROW)
        await outer.append(ids(1))
        neighbour = await catalog.create_table("db.t_x", schema=ARROW)  # a name sharing the prefix
        await neighbour.append(ids(2))
        async with aioiceberg.connect(str(root / "db")) as below:  # a layout older versions allowed
            await (await below.create_table("t.inner", schema=ARROW)).append(ids(3))
        (root / "db" / "t" / "notes.txt").write_text("the outer table's own file")
        await catalog.drop_table("db.t", purge=True)
        assert not (root / "db" / "t" / "notes.txt").exists()
        assert not list((root / "db" / "t" / "data").glob("*.parquet"))
        assert sorted(
            (await (await catalog.load_table("db.t.inner")).scan().to_arrow())["id"].to_pylist()
        ) == [3]
        assert (await (await catalog.load_table("db.t_x")).scan().to_arrow())["id"].to_pylist() == [2]
