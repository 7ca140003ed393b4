"""``aioiceberg serve`` against what a hostile or broken client sends: raw HTTP to real server
processes (a warehouse and a SQL catalog), PyIceberg and our REST client.

Bad names and bodies are 400 (413 for a huge body), never 500; a 500 shows an incident id and
nothing of the server (no path, no traceback, no operating system text); namespace levels
holding '.' come back whole, or are refused where the catalog could not keep them apart.
"""

from __future__ import annotations

import errno
import json
import re
import socket
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog
from servers.rest import Reply, RestServer, request

import aioiceberg
from aioiceberg.errors import CommitStateUnknownError, TableNotFoundError, ValidationError
from aioiceberg.server.error_model import rest_error_for

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
NS = "inputs"  # made by the fixture: table routes need a namespace that exists


@dataclass
class Served:
    server: RestServer
    root: Path  # what no answer may show


def http(served: Served, method: str, path: str, body: bytes | None = None) -> Reply:
    return request(served.server.url, method, path, body, timeout=60)


def post(served: Served, path: str, value: Any) -> Reply:
    return http(served, "POST", path, json.dumps(value).encode())


def q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def assert_error(served: Served, answer: Reply, status: int) -> dict[str, Any]:
    """The REST error model with ``status``, showing nothing of the server."""
    assert answer.status == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == status and isinstance(error["type"], str), error
    assert str(served.root) not in answer.text and "/tmp" not in answer.text, answer.text
    for leak in ("Traceback", "Errno", 'File "'):
        assert leak not in answer.text, answer.text
    return dict(error)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("input") / "warehouse"
    with RestServer(str(root)) as server:
        served = Served(server, root)
        assert post(served, "/v1/namespaces", {"namespace": [NS]}).status == 200
        yield served


@pytest.fixture(scope="module")
def sql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("input-sql")
    with RestServer(f"sqlite:///{home}/catalog.db", tables_in=str(home / "tables")) as server:
        yield Served(server, home)


def _nested(depth: int) -> bytes:
    return b'{"namespace": ' + b"[" * depth + b"]" * depth + b"}"


# (method, path, body): each a 400 today; those marked were a 500 before, several showing a path
BAD_REQUESTS: dict[str, tuple[str, str, bytes | None]] = {
    # control characters in names, in paths and in bodies (500: "embedded null byte")
    "nul-in-namespace-path": ("GET", "/v1/namespaces/" + q("a\x00b"), None),
    "newline-in-namespace-path": ("GET", "/v1/namespaces/" + q("a\nb"), None),
    "del-in-namespace-path": ("HEAD", "/v1/namespaces/" + q("a\x7fb"), None),
    "nul-in-parent": ("GET", "/v1/namespaces?parent=" + q("a\x00"), None),
    "nul-in-created-namespace": ("POST", "/v1/namespaces", json.dumps({"namespace": ["a\x00b"]}).encode()),
    "nul-in-table-path": ("GET", f"/v1/namespaces/{NS}/tables/" + q("t\x00"), None),
    "nul-in-created-table": (
        "POST",
        f"/v1/namespaces/{NS}/tables",
        json.dumps({"name": "t\x00", "schema": SCHEMA}).encode(),
    ),
    "nul-in-rename-target": (
        "POST",
        "/v1/tables/rename",
        json.dumps(
            {"source": {"namespace": [NS], "name": "a"}, "destination": {"namespace": [NS], "name": "b\x00"}}
        ).encode(),
    ),
    "nul-in-registered-name": (
        "POST",
        f"/v1/namespaces/{NS}/register",
        json.dumps({"name": "r\x00", "metadata-location": "x.metadata.json"}).encode(),
    ),
    # long names (500: "File name too long", showing the server's absolute path)
    "long-namespace-path": ("GET", f"/v1/namespaces/{'x' * 256}", None),
    "long-multibyte-level": ("POST", "/v1/namespaces", json.dumps({"namespace": ["é" * 128]}).encode()),
    "long-created-namespace": ("POST", "/v1/namespaces", json.dumps({"namespace": ["x" * 300]}).encode()),
    "long-namespace-in-all": (
        "POST",
        "/v1/namespaces",
        json.dumps({"namespace": ["a" * 200, "b" * 200]}).encode(),
    ),
    "long-namespace-in-path": ("GET", f"/v1/namespaces/{'a' * 200}%1F{'b' * 200}/tables", None),
    "long-table-path": ("GET", f"/v1/namespaces/{NS}/tables/{'y' * 5000}", None),
    "long-created-table": (
        "POST",
        f"/v1/namespaces/{NS}/tables",
        json.dumps({"name": "t" * 300, "schema": SCHEMA}).encode(),
    ),
    # JSON the decoder cannot take (500: "maximum recursion depth exceeded"; "surrogates not allowed")
    "deep-array": ("POST", "/v1/namespaces", b"[" * 100_000 + b"]" * 100_000),
    "deep-in-a-field": ("POST", "/v1/namespaces", _nested(5000)),
    "deep-in-a-commit": (
        "POST",
        f"/v1/namespaces/{NS}/tables/t",
        b'{"updates": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    ),
    "lone-surrogate-name": ("POST", "/v1/namespaces", b'{"namespace": ["\\ud800"]}'),
    "lone-surrogate-property": (
        "POST",
        "/v1/namespaces",
        b'{"namespace": ["sur"], "properties": {"k": "\\udfff"}}',
    ),
    # malformed bodies and wrong types (400 before too: kept so)
    "not-json": ("POST", "/v1/namespaces", b"{nope"),
    "not-utf8": ("POST", "/v1/namespaces", b"\xff\xfe{}"),
    "array-body": ("POST", "/v1/namespaces", b"[]"),
    "string-body": ("POST", "/v1/namespaces", b'"ns"'),
    "null-body": ("POST", "/v1/namespaces", b"null"),
    "empty-body": ("POST", "/v1/namespaces", None),
    "namespace-a-string": ("POST", "/v1/namespaces", b'{"namespace": "abc"}'),
    "namespace-of-numbers": ("POST", "/v1/namespaces", b'{"namespace": [1]}'),
    "namespace-empty": ("POST", "/v1/namespaces", b'{"namespace": []}'),
    "namespace-empty-level": ("POST", "/v1/namespaces", b'{"namespace": ["a", ""]}'),
    "properties-a-list": ("POST", "/v1/namespaces", b'{"namespace": ["p"], "properties": []}'),
    "table-name-a-number": ("POST", f"/v1/namespaces/{NS}/tables", json.dumps({"name": 5}).encode()),
    "dotdot-namespace": ("GET", "/v1/namespaces/" + q(".."), None),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_bad_name_or_body_is_a_400_that_shows_nothing_of_the_server(warehouse: Served, case: str) -> None:
    method, path, body = BAD_REQUESTS[case]
    answer = http(warehouse, method, path, body)
    if method == "HEAD":  # no body to read
        assert answer.status == 400, answer
        return
    error = assert_error(warehouse, answer, 400)
    assert error["type"] == "BadRequestException"
    assert len(answer.text) < 1000, "an error echoes at most a bounded piece of the request"


def test_the_same_bad_names_are_400_on_a_sql_catalog(sql: Served) -> None:
    for case in ("nul-in-created-namespace", "long-created-namespace", "lone-surrogate-name", "deep-array"):
        method, path, body = BAD_REQUESTS[case]
        assert_error(sql, http(sql, method, path, body), 400)


def test_a_body_over_16_mib_is_a_413_and_one_over_aiohttps_default_1_mib_is_served(warehouse: Served) -> None:
    big = {"namespace": ["big"], "properties": {"blob": "x" * (2 * 1024 * 1024)}}
    assert post(warehouse, "/v1/namespaces", big).status == 200
    huge = b'{"namespace": ["huge"], "properties": {"blob": "' + b"x" * (17 * 1024 * 1024) + b'"}}'
    error = assert_error(warehouse, http(warehouse, "POST", "/v1/namespaces", huge), 413)
    assert "16 MiB" in error["message"]
    assert http(warehouse, "GET", "/v1/namespaces/huge").status == 404


def test_an_unexpected_failure_is_a_500_with_an_incident_id_logged_with_its_traceback(
    warehouse: Served,
) -> None:
    name = f"t_{uuid.uuid4().hex[:8]}"
    assert post(warehouse, f"/v1/namespaces/{NS}/tables", {"name": name, "schema": SCHEMA}).status == 200
    for metadata in (warehouse.root / NS / name / "metadata").glob("*.metadata.json"):
        metadata.write_text("{broken")  # the server's own files, damaged behind its back

    error = assert_error(warehouse, http(warehouse, "GET", f"/v1/namespaces/{NS}/tables/{name}"), 500)
    incident = re.search(r"incident ([0-9a-f]+)", error["message"])
    assert incident is not None, error
    log = warehouse.server.stderr()
    logged = log[log.index(f"incident {incident.group(1)}") :]
    assert "Traceback" in logged and str(warehouse.root) in logged  # the operator sees it all


def test_an_operating_system_error_never_reaches_the_client(warehouse: Served) -> None:
    (warehouse.root / "blocked").write_text("a file where a namespace's directory would go")
    for method, path, body in (
        ("POST", "/v1/namespaces", json.dumps({"namespace": ["blocked", "child"]}).encode()),
        ("GET", "/v1/namespaces/blocked%1Fchild", None),
        (
            "POST",
            "/v1/namespaces/blocked%1Fchild/tables",
            json.dumps({"name": "t", "schema": SCHEMA}).encode(),
        ),
    ):
        answer = http(warehouse, method, path, body)
        assert answer.status >= 400
        assert_error(warehouse, answer, answer.status)
        assert "Not a directory" not in answer.text


def test_typed_errors_keep_their_message_unless_it_carries_an_operating_system_text() -> None:
    assert (
        rest_error_for(TableNotFoundError("table db.t does not exist")).message == "table db.t does not exist"
    )
    os_error = OSError(errno.ENAMETOOLONG, "File name too long", "/srv/warehouse/db/" + "x" * 300)
    try:
        raise CommitStateUnknownError(f"commit outcome unknown: {os_error}") from os_error
    except CommitStateUnknownError as exc:
        answer = rest_error_for(exc, "POST /v1/namespaces/db/tables/t")
    assert (answer.status, answer.kind) == (500, "CommitStateUnknownException")
    assert "/srv/warehouse" not in answer.message and "incident" in answer.message
    assert rest_error_for(RecursionError()).status == 400


# -- namespace names round-trip ------------------------------------------------------------------
def _listed(served: Served, parent: tuple[str, ...] = ()) -> list[list[str]]:
    query = f"?parent={q(chr(0x1F).join(parent))}" if parent else ""
    answer = http(served, "GET", f"/v1/namespaces{query}")
    assert answer.status == 200, answer.text
    return list(answer.json()["namespaces"])


def test_a_level_holding_a_dot_comes_back_whole_from_a_warehouse(warehouse: Served) -> None:
    assert post(warehouse, "/v1/namespaces", {"namespace": ["v1.2"]}).status == 200
    assert post(warehouse, "/v1/namespaces", {"namespace": ["v1.2", "x.y"]}).status == 200
    assert ["v1.2"] in _listed(warehouse) and ["v1", "2"] not in _listed(warehouse)
    assert _listed(warehouse, ("v1.2",)) == [["v1.2", "x.y"]]
    loaded = http(warehouse, "GET", "/v1/namespaces/v1.2%1Fx.y")
    assert loaded.status == 200 and loaded.json()["namespace"] == ["v1.2", "x.y"]
    assert http(warehouse, "GET", "/v1/namespaces/v1%1F2").status == 404  # not an alias
    assert (warehouse.root / "v1.2" / "x.y").is_dir()  # one directory a level

    created = post(warehouse, "/v1/namespaces/v1.2/tables", {"name": "t.1", "schema": SCHEMA})
    assert created.status == 200, created.text
    listed = http(warehouse, "GET", "/v1/namespaces/v1.2/tables").json()["identifiers"]
    assert listed == [{"namespace": ["v1.2"], "name": "t.1"}]


def test_a_namespace_listed_only_through_a_child_can_be_listed_into(warehouse: Served) -> None:
    assert post(warehouse, "/v1/namespaces", {"namespace": ["implied", "child"]}).status == 200
    assert ["implied"] in _listed(warehouse)
    assert _listed(warehouse, ("implied",)) == [["implied", "child"]]
    assert http(warehouse, "GET", "/v1/namespaces/implied").json()["properties"] == {}


def test_pyiceberg_round_trips_levels_holding_dots(warehouse: Served) -> None:
    catalog = load_catalog("rest", type="rest", uri=warehouse.server.url)
    catalog.create_namespace(("py.1", "py.2"))
    assert ("py.1",) in catalog.list_namespaces()
    assert catalog.list_namespaces(("py.1",)) == [("py.1", "py.2")]
    assert catalog.load_namespace_properties(("py.1", "py.2")) == {}


@pytest.mark.anyio
async def test_our_rest_client_round_trips_levels_holding_dots(warehouse: Served) -> None:
    async with aioiceberg.connect(f"rest+{warehouse.server.url}") as catalog:
        await catalog.create_namespace(("ours.1",))
        await catalog.create_namespace(("ours.1", "b.c"))
        assert ("ours.1",) in await catalog.list_namespace_levels()
        assert await catalog.list_namespace_levels(("ours.1",)) == [("ours.1", "b.c")]
        assert await catalog.namespace_exists(("ours.1", "b.c"))
        assert not await catalog.namespace_exists(("ours", "1"))


def test_a_sql_catalog_refuses_a_level_holding_a_dot_that_it_could_not_list_back(sql: Served) -> None:
    for levels in (["v1.2"], ["a", "b.c"]):
        error = assert_error(sql, post(sql, "/v1/namespaces", {"namespace": levels}), 400)
        assert "'.'" in error["message"], error
    assert _listed(sql) == []
    assert post(sql, "/v1/namespaces", {"namespace": ["v1", "2"]}).status == 200
    assert _listed(sql) == [["v1"]] and _listed(sql, ("v1",)) == [["v1", "2"]]
    assert_error(sql, http(sql, "GET", "/v1/namespaces/v1.2"), 400)  # no alias of v1.2 either


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_clients_closed")
async def test_a_glue_catalog_refuses_a_level_holding_a_dot(moto_endpoint: str) -> None:
    from servers.plugin import s3_storage_options

    options = {**s3_storage_options(moto_endpoint), "glue.endpoint": moto_endpoint}
    async with aioiceberg.connect("glue://", warehouse="s3://nowhere/wh", storage_options=options) as catalog:
        with pytest.raises(ValidationError, match=re.escape("holds '.'")):
            await catalog.create_namespace(("v1.2",))
        assert "v1.2" not in await catalog.list_namespaces()


def test_a_json_request_leaves_no_warning_in_the_servers_log(tmp_path: Path) -> None:
    """Every JSON request stores its decoded body on the request; stored under a plain string,
    aiohttp 3.14 warned (``NotAppKeyWarning``) once per request in a server run with warnings on."""
    with RestServer(str(tmp_path / "warehouse"), env={"PYTHONWARNINGS": "always"}) as server:
        served = Served(server, tmp_path)
        for name in ("a", "b"):
            assert post(served, "/v1/namespaces", {"namespace": [name]}).status == 200
        assert "Warning" not in server.stderr(), server.stderr()


def test_a_client_that_hangs_up_mid_body_leaves_no_incident_in_the_log(tmp_path: Path) -> None:
    """A request whose client closes its connection before its body arrived cannot be
    answered and is no failure of the server's: it was logged as an incident with a
    traceback, so any client could fill the server's log with them."""
    with RestServer(str(tmp_path / "warehouse")) as server:
        address = urllib.parse.urlsplit(server.url)
        head = f"Host: {address.netloc}\r\nContent-Type: application/json\r\n".encode()
        for path in ("/v1/namespaces", f"/v1/namespaces/{NS}/tables"):
            with socket.create_connection((address.hostname, address.port)) as sock:
                sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\n" + head)
                sock.sendall(b"Content-Length: 1000\r\n\r\n" + b'{"namespace": ["cut')
                time.sleep(0.2)  # the server is reading the body when the client goes
        served = Served(server, tmp_path)
        assert post(served, "/v1/namespaces", {"namespace": ["after"]}).status == 200
        log = server.stderr()
        assert "incident" not in log and "Traceback" not in log, log
