"""``aioiceberg serve`` with principals: bearer tokens, the OAuth2 client-credentials exchange,
per-namespace grants, and the refusals that keep web pages out (``Origin``, ``Host``, non-JSON
mutations), through real PyIceberg 0.12, DuckDB 1.5.5 and our own client, and raw HTTP.

One server process for the module (auth file + ``AIOICEBERG_SERVE_TOKEN``); what needs a
second configuration (no auth, another key, ``--allowed-host``) runs in-process on port 0.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import ForbiddenError, NoSuchTableError, OAuthError, UnauthorizedError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from servers.rest import (
    FORM,
    RestServer,
    bearer,
    request,
    request_json,
    request_json_async,
    serve_in_process,
)

import aioiceberg
from aioiceberg.server.auth import Access, AuthConfig, AuthConfigError, Principal, load_auth
from aioiceberg.server.tokens import issue_token

ETL_SECRET = "etl-secret-0123456789abcdef"
ETL_TOKEN = "etl-static-token-0123456789abcdef"
ANALYST_SECRET = "analyst-secret-0123456789abcdef"
ANALYST_TOKEN = "analyst-static-token-0123456789abcdef"
ENV_TOKEN = "env-token-0123456789abcdef"
SIGNING_KEY = "signing-key-0123456789abcdef0123456789"

AUTH = {
    "principals": {
        "etl": {"secret": ETL_SECRET, "tokens": [ETL_TOKEN], "grants": {"*": "write"}},
        "analyst": {
            "secret": ANALYST_SECRET,
            "tokens": [ANALYST_TOKEN],
            "grants": {"sales": "read", "sales.eu": "write", "scratch": "write"},
        },
    },
    "token-ttl-seconds": 3600,
    "signing-key": SIGNING_KEY,
}

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])


def write_auth_file(path: Path, content: Any, mode: int = 0o600) -> str:
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    path.chmod(mode)
    return str(path)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    folder = tmp_path_factory.mktemp("auth")
    auth_file = write_auth_file(folder / "auth.json", AUTH)
    with RestServer(
        str(folder / "warehouse"), auth_file=auth_file, env={"AIOICEBERG_SERVE_TOKEN": ENV_TOKEN}
    ) as rest:
        etl = load_catalog("etl", type="rest", uri=rest.url, token=ETL_TOKEN)
        for namespace in ("sales", ("sales", "eu"), "hr", "scratch"):
            etl.create_namespace(namespace)
        etl.create_table("sales.orders", schema=SCHEMA).append(pa.table({"id": [1], "region": ["eu"]}, ARROW))
        etl.create_table("hr.people", schema=SCHEMA)
        yield rest


def catalog(server: RestServer, **auth: str) -> PyCatalog:
    return load_catalog("rest", type="rest", uri=server.url, **auth)


def port_of(url: str) -> int:
    port = urllib.parse.urlsplit(url).port
    assert port is not None
    return port


def oauth(url: str, form: Mapping[str, str], headers: Mapping[str, str] | None = None) -> tuple[int, Any]:
    body = urllib.parse.urlencode(form).encode()
    return request_json(url, "POST", "/v1/oauth/tokens", body, headers, content_type=FORM)


# -- authentication ----------------------------------------------------------------------------
def test_requests_without_a_valid_token_get_401(server: RestServer) -> None:
    config = AuthConfig({"etl": Principal("etl", ETL_SECRET)}, 3600, SIGNING_KEY.encode())
    expired, _ = issue_token(config, config.principals["etl"], now=time.time() - 7200)
    other_key = AuthConfig({"etl": Principal("etl", ETL_SECRET)}, 3600, b"another-key-0123456789abcdef")
    forged, _ = issue_token(other_key, other_key.principals["etl"])
    wrong = {
        "no token": {"Content-Type": "application/json"},
        "an unknown token": bearer("not-a-token-0123456789abcdef"),
        "a Basic header": {"Authorization": "Basic ZXRsOmV0bA==", "Content-Type": "application/json"},
        "a malformed signed token": bearer("aioi1.e30.xyz"),
        "a token signed with another key": bearer(forged),
        "an expired token": bearer(expired),
    }
    routes = [
        ("GET", "/v1/config", None),
        ("GET", "/v1/namespaces", None),
        ("GET", "/v1/namespaces/sales/tables/orders", None),
        ("HEAD", "/v1/namespaces/sales", None),
        ("POST", "/v1/namespaces", b'{"namespace": ["intruder"]}'),
        ("DELETE", "/v1/namespaces/sales/tables/orders", None),
    ]
    for what, headers in wrong.items():
        for method, path, body in routes:
            reply = request(server.url, method, path, body, headers)
            status, answer = reply.status, reply.json()
            assert status == 401, (what, method, path)
            assert reply.headers["WWW-Authenticate"].startswith("Bearer")
            if method != "HEAD":
                assert answer["error"]["type"] == "NotAuthorizedException"
                assert answer["error"]["code"] == 401
    _, answer = request_json(server.url, "GET", "/v1/config", headers=bearer(expired))
    assert "expired" in answer["error"]["message"]
    etl = catalog(server, token=ETL_TOKEN)
    assert etl.table_exists("sales.orders")
    assert ("intruder",) not in etl.list_namespaces()
    with pytest.raises(UnauthorizedError):
        catalog(server, token="not-a-token-0123456789abcdef")


def test_a_token_from_the_environment_writes_everywhere(server: RestServer) -> None:
    status, answer = request_json(server.url, "GET", "/v1/namespaces", headers=bearer(ENV_TOKEN))
    assert status == 200 and ["hr"] in answer["namespaces"]
    body = json.dumps({"namespace": ["from_env"]}).encode()
    status, _ = request_json(server.url, "POST", "/v1/namespaces", body, bearer(ENV_TOKEN))
    assert status == 200
    assert ("from_env",) in catalog(server, token=ETL_TOKEN).list_namespaces()


# -- the OAuth2 exchange -----------------------------------------------------------------------
def test_oauth2_client_credentials_exchange(server: RestServer) -> None:
    form = {"grant_type": "client_credentials", "client_id": "analyst", "client_secret": ANALYST_SECRET}
    status, answer = oauth(server.url, {**form, "scope": "catalog"})
    assert status == 200
    assert answer["token_type"] == "bearer" and answer["expires_in"] == 3600
    assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    status, listed = request_json(server.url, "GET", "/v1/namespaces", headers=bearer(answer["access_token"]))
    assert status == 200 and listed["namespaces"] == [["sales"], ["scratch"]]

    basic = base64.b64encode(f"analyst:{ANALYST_SECRET}".encode()).decode()
    status, answer = oauth(
        server.url, {"grant_type": "client_credentials"}, {"Authorization": f"Basic {basic}"}
    )
    assert status == 200 and answer["access_token"].startswith("aioi1.")
    exchange = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }
    status, fresh = oauth(server.url, {**exchange, "subject_token": answer["access_token"]})
    assert status == 200
    status, listed = request_json(server.url, "GET", "/v1/namespaces", headers=bearer(fresh["access_token"]))
    assert status == 200 and listed["namespaces"] == [["sales"], ["scratch"]]
    for subject, error in ((ANALYST_TOKEN, "invalid_request"), ("aioi1.e30.forged", "invalid_grant")):
        status, answer = oauth(server.url, {**exchange, "subject_token": subject})
        assert (status, answer["error"]) == (400, error)

    refused = [
        ({**form, "client_secret": "wrong-secret-0123456789"}, 401, "invalid_client"),
        ({**form, "client_id": "nobody"}, 401, "invalid_client"),
        ({"grant_type": "client_credentials"}, 401, "invalid_client"),
        ({**form, "grant_type": "password"}, 400, "unsupported_grant_type"),
    ]
    for sent, want_status, want_error in refused:
        status, answer = oauth(server.url, sent)
        assert (status, answer["error"]) == (want_status, want_error), sent
        assert answer["error_description"]
    # a principal with only static tokens has no secret to exchange
    status, answer = request_json(
        server.url,
        "POST",
        "/v1/oauth/tokens",
        json.dumps(form).encode(),
        {"Content-Type": "application/json"},
    )
    assert (status, answer["error"]) == (400, "invalid_request")


@pytest.mark.filterwarnings("ignore:Deprecated in 0.8.0")  # the default oauth2-server-uri is what we test
def test_pyiceberg_signs_in_with_a_token_and_with_a_credential(server: RestServer) -> None:
    by_token = catalog(server, token=ANALYST_TOKEN)
    by_credential = catalog(server, credential=f"analyst:{ANALYST_SECRET}")
    for client in (by_token, by_credential):
        table = client.load_table("sales.orders")
        assert table.scan().to_arrow().to_pylist() == [{"id": 1, "region": "eu"}]
    made = by_credential.create_table("sales.eu.from_credential", schema=SCHEMA)
    made.append(pa.table({"id": [7], "region": ["eu"]}, ARROW))
    assert by_token.load_table("sales.eu.from_credential").scan().to_arrow().num_rows == 1
    with pytest.raises(OAuthError, match="invalid_client"):
        catalog(server, credential="analyst:wrong-secret-0123456789")


# -- authorization -----------------------------------------------------------------------------
def test_read_only_principals_get_403_on_writes_but_can_load_and_list(server: RestServer) -> None:
    analyst = catalog(server, token=ANALYST_TOKEN)
    etl = catalog(server, token=ETL_TOKEN)
    assert analyst.list_namespaces() == [("sales",), ("scratch",)]  # hr and the rest are not shown
    assert analyst.list_namespaces("sales") == [("sales", "eu")]
    assert ("sales", "orders") in analyst.list_tables("sales")
    assert analyst.load_namespace_properties("sales") == {}
    orders = analyst.load_table("sales.orders")
    before = orders.metadata_location

    refused: list[Callable[[], object]] = [
        lambda: analyst.create_table("sales.made_by_analyst", schema=SCHEMA),
        lambda: orders.append(pa.table({"id": [2], "region": ["us"]}, ARROW)),
        lambda: orders.transaction().set_properties(owner="analyst").commit_transaction(),
        lambda: analyst.drop_table("sales.orders"),
        lambda: analyst.purge_table("sales.orders"),
        lambda: analyst.rename_table("sales.orders", "sales.eu.orders"),
        lambda: analyst.rename_table("sales.eu.from_nowhere", "sales.renamed"),
        lambda: analyst.update_namespace_properties("sales", updates={"owner": "analyst"}),
        lambda: analyst.create_namespace("analyst_ns"),
        lambda: analyst.create_namespace(("sales", "us")),
        lambda: analyst.drop_namespace("hr"),
        lambda: analyst.load_table("hr.people"),
        lambda: analyst.list_tables("hr"),
        lambda: analyst.register_table("sales.registered", before),
    ]
    for attempt in refused:
        with pytest.raises(ForbiddenError):
            attempt()
    assert etl.load_table("sales.orders").metadata_location == before
    assert etl.list_tables("sales") == [("sales", "orders")]
    assert etl.load_namespace_properties("sales") == {}
    assert etl.table_exists("hr.people") and not etl.namespace_exists("analyst_ns")

    # the write grant on sales.eu beats the read grant on sales
    analyst.create_namespace(("sales", "eu", "daily"))
    analyst.update_namespace_properties(("sales", "eu"), updates={"owner": "analyst"})
    made = analyst.create_table("sales.eu.daily.t", schema=SCHEMA)
    made.append(pa.table({"id": [3], "region": ["eu"]}, ARROW))
    analyst.rename_table("sales.eu.daily.t", "sales.eu.t_renamed")
    analyst.drop_table("sales.eu.t_renamed")
    with pytest.raises(NoSuchTableError):
        etl.load_table("sales.eu.t_renamed")


def test_grants_most_specific_wins() -> None:
    analyst = Principal(
        "a",
        "s" * 16,
        (),
        {("sales",): Access.READ, ("sales", "eu"): Access.WRITE, ("sales", "hr"): Access.NONE},
    )
    assert analyst.access(("sales",)) == Access.READ
    assert analyst.access(("sales", "eu", "x")) == Access.WRITE
    assert analyst.access(("sales", "hr", "x")) == Access.NONE
    assert analyst.access(("other",)) == Access.NONE
    assert analyst.sees(("sales", "us")) and not analyst.sees(("sales", "hr"))
    deep = Principal("d", "s" * 16, (), {("a", "b", "c"): Access.READ})
    assert deep.sees(("a",)) and deep.sees(("a", "b")) and not deep.sees(("a", "x"))
    assert deep.access(("a", "b")) == Access.NONE


# -- DuckDB and our own client -----------------------------------------------------------------
def test_duckdb_attaches_with_a_token_secret(server: RestServer) -> None:
    from read_helpers import duckdb_connection

    con = duckdb_connection()
    con.execute(f"CREATE SECRET etl_secret (TYPE ICEBERG, TOKEN '{ETL_TOKEN}')")
    con.execute(f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', SECRET etl_secret)")
    assert con.execute("SELECT id, region FROM cat.sales.orders").fetchall() == [(1, "eu")]
    con.execute("CREATE TABLE cat.hr.by_duckdb (id BIGINT)")
    con.execute("INSERT INTO cat.hr.by_duckdb VALUES (1), (2)")
    assert catalog(server, token=ETL_TOKEN).load_table("hr.by_duckdb").scan().to_arrow().num_rows == 2

    stranger = duckdb_connection()
    with pytest.raises(Exception, match="401"):
        stranger.execute(
            f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')"
        )


def test_duckdb_attaches_with_oauth2_client_credentials(server: RestServer) -> None:
    from read_helpers import duckdb_connection

    con = duckdb_connection()
    con.execute(
        "CREATE SECRET analyst_secret (TYPE ICEBERG, "
        f"CLIENT_ID 'analyst', CLIENT_SECRET '{ANALYST_SECRET}', ENDPOINT '{server.url}')"
    )
    con.execute(f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', SECRET analyst_secret)")
    assert con.execute("SELECT id, region FROM cat.sales.orders").fetchall() == [(1, "eu")]
    with pytest.raises(Exception, match=r"403|Forbidden"):
        con.execute("INSERT INTO cat.sales.orders VALUES (2, 'us')")
    con.execute("CREATE TABLE cat.scratch.by_duckdb (id BIGINT)")  # DuckDB names one level
    con.execute("INSERT INTO cat.scratch.by_duckdb VALUES (5)")
    assert con.execute("SELECT id FROM cat.scratch.by_duckdb").fetchall() == [(5,)]
    assert catalog(server, token=ETL_TOKEN).load_table("sales.orders").scan().to_arrow().num_rows == 1

    wrong = duckdb_connection()
    with pytest.raises(Exception, match="invalid_client"):
        wrong.execute(
            f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', "
            "CLIENT_ID 'analyst', CLIENT_SECRET 'wrong-secret-0123456789')"
        )


@pytest.mark.anyio
async def test_our_client_works_with_a_token_and_a_credential(server: RestServer) -> None:
    async with contextlib.AsyncExitStack() as stack:
        analyst = aioiceberg.connect(f"rest+{server.url}?token={ANALYST_TOKEN}")
        stack.push_async_callback(analyst.aclose)
        assert await analyst.list_namespaces() == ["sales", "scratch"]
        table = await analyst.load_table("sales.orders")
        assert (await table.scan().to_arrow()).to_pylist() == [{"id": 1, "region": "eu"}]
        made = await analyst.create_table("sales.eu.by_our_client", ARROW)
        await made.append(pa.table({"id": [9], "region": ["eu"]}, ARROW))
        with pytest.raises(aioiceberg.errors.IcebergError, match="may not write"):
            await analyst.create_table("sales.by_our_client", ARROW)

        by_credential = aioiceberg.connect(f"rest+{server.url}?credential=analyst:{ANALYST_SECRET}")
        stack.push_async_callback(by_credential.aclose)
        assert await by_credential.list_namespaces() == ["sales", "scratch"]
        made = await by_credential.create_table("scratch.by_our_credential", ARROW)
        await made.append(pa.table({"id": [10], "region": ["eu"]}, ARROW))
        with pytest.raises(aioiceberg.errors.IcebergError, match="may not write"):
            await by_credential.drop_table("sales.orders")

        wrong = aioiceberg.connect(f"rest+{server.url}?credential=analyst:wrong-secret-0123456789")
        stack.push_async_callback(wrong.aclose)
        with pytest.raises(aioiceberg.errors.IcebergError, match="invalid_client"):
            await wrong.list_namespaces()

        stranger = aioiceberg.connect(f"rest+{server.url}?token=not-a-token-0123456789abcdef")
        stack.push_async_callback(stranger.aclose)
        with pytest.raises(aioiceberg.errors.IcebergError):
            await stranger.list_namespaces()


# -- web pages ---------------------------------------------------------------------------------
def test_a_web_page_cannot_rename_a_table(server: RestServer) -> None:
    """What a page the user visits (or a DNS-rebinding page) can send: a text/plain POST with
    its own Origin and Host. Each of the three is refused alone, even with a valid token."""
    etl = catalog(server, token=ETL_TOKEN)
    etl.create_table("hr.victim", schema=SCHEMA)
    rename = json.dumps(
        {
            "source": {"namespace": ["hr"], "name": "victim"},
            "destination": {"namespace": ["hr"], "name": "gone"},
        }
    ).encode()
    port = port_of(server.url)
    page = {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": f"evil.example:{port}"}
    attempts = [
        page,
        {**page, **bearer(ETL_TOKEN), "Content-Type": "text/plain"},
        {**bearer(ETL_TOKEN), "Origin": "http://evil.example"},
        {**bearer(ETL_TOKEN), "Origin": "null"},
        {**bearer(ETL_TOKEN), "Host": f"evil.example:{port}"},
        {**bearer(ETL_TOKEN), "Host": f"127.0.0.1:{port + 1 if port != 65535 else 1}"},
        {**bearer(ETL_TOKEN), "Sec-Fetch-Site": "cross-site"},
        {**bearer(ETL_TOKEN), "Content-Type": "text/plain"},
        {**bearer(ETL_TOKEN), "Content-Type": "application/x-www-form-urlencoded"},
    ]
    for headers in attempts:
        status, answer = request_json(server.url, "POST", "/v1/tables/rename", rename, headers)
        assert status in (403, 415), headers
        assert answer["error"]["type"] in ("ForbiddenException", "BadRequestException")
    assert etl.table_exists("hr.victim") and not etl.table_exists("hr.gone")

    # the server's own name and origin pass
    same = {**bearer(ETL_TOKEN), "Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
    status, _ = request_json(server.url, "POST", "/v1/tables/rename", rename, same)
    assert status == 204 and etl.table_exists("hr.gone")


@contextlib.asynccontextmanager
async def in_process(root: Path, **options: Any) -> AsyncIterator[str]:
    """``make_app`` over a warehouse holding ``ns.t``, on 127.0.0.1, port 0; yields the URL."""
    catalog = aioiceberg.connect(str(root))
    if not await catalog.namespace_exists("ns"):
        await catalog.create_namespace("ns")
        await catalog.create_table("ns.t", ARROW)
    async with serve_in_process(catalog, **options) as url:
        yield url


RENAME_T = json.dumps(
    {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": ["ns"], "name": "moved"}}
).encode()


@pytest.mark.anyio
async def test_without_auth_web_pages_are_still_refused(tmp_path: Path) -> None:
    async with in_process(tmp_path / "wh") as url:
        port = port_of(url)
        page = {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": f"evil.example:{port}"}
        for headers in (page, {"Host": f"rebound.example:{port}", "Content-Type": "application/json"}):
            status, answer = await request_json_async(url, "POST", "/v1/tables/rename", RENAME_T, headers)
            assert status == 403 and answer["error"]["type"] == "ForbiddenException"
        status, answer = await request_json_async(
            url, "POST", "/v1/tables/rename", RENAME_T, {"Content-Type": "text/plain"}
        )
        assert status == 415 and "application/json" in answer["error"]["message"]
        status, answer = await request_json_async(url, "GET", "/v1/namespaces/ns/tables/t")
        assert status == 200
        status, _ = await request_json_async(
            url, "GET", "/v1/namespaces/ns/tables/t", headers={"Host": f"[::1]:{port}"}
        )
        assert status == 200


@pytest.mark.anyio
async def test_allowed_host_names_a_proxy(tmp_path: Path) -> None:
    async with in_process(tmp_path / "wh", allowed_hosts=("catalog.example.com",)) as url:
        proxied = {
            "Host": "catalog.example.com",
            "Origin": "https://catalog.example.com",
            "X-Forwarded-Proto": "https",
        }
        status, _ = await request_json_async(url, "GET", "/v1/namespaces/ns/tables/t", headers=proxied)
        assert status == 200
        status, _ = await request_json_async(
            url, "GET", "/v1/namespaces/ns/tables/t", headers={"Host": "other.example.com"}
        )
        assert status == 403


@pytest.mark.anyio
async def test_issued_tokens_survive_a_restart_with_a_signing_key(tmp_path: Path) -> None:
    def config(key: bytes, secret: str = ETL_SECRET) -> AuthConfig:
        return AuthConfig(
            {"etl": Principal("etl", secret, (), {(): Access.WRITE})}, 60, key, persistent_key=True
        )

    form = urllib.parse.urlencode(
        {"grant_type": "client_credentials", "client_id": "etl", "client_secret": ETL_SECRET}
    ).encode()
    async with in_process(tmp_path / "wh", auth=config(SIGNING_KEY.encode())) as url:
        status, answer = await request_json_async(url, "POST", "/v1/oauth/tokens", form, content_type=FORM)
        assert status == 200
        token = answer["access_token"]
    restarts = [
        (config(SIGNING_KEY.encode()), 200),  # the same key: still valid
        (config(b"a-different-key-0123456789abcdef"), 401),  # another server's key
        (config(SIGNING_KEY.encode(), secret="a-new-secret-0123456789"), 401),  # secret rotated: revoked
    ]
    for auth, want in restarts:
        async with in_process(tmp_path / "wh", auth=auth) as url:
            status, _ = await request_json_async(url, "GET", "/v1/config", headers=bearer(token))
            assert status == want


# -- configuration -----------------------------------------------------------------------------
def test_malformed_auth_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    bad: list[tuple[Any, str]] = [
        ("{not json", "not valid JSON"),
        ([], "JSON object"),
        ({"principals": {}}, "non-empty"),
        ({"principals": {"a": {"secret": "short"}}}, "shorter than 16"),
        ({"principals": {"a": {"grants": {"*": "write"}}}}, "neither a secret nor tokens"),
        ({"principals": {"a": {"secret": ETL_SECRET, "grants": {"*": "admin"}}}}, "'admin' is not read"),
        ({"principals": {"a": {"secret": ETL_SECRET, "grant": {}}}}, "unknown keys ['grant']"),
        ({"principals": {"a:b": {"secret": ETL_SECRET}}}, "no ':'"),
        ({"principals": {"a": {"secret": ETL_SECRET}}, "token-ttl-seconds": 0}, "token-ttl-seconds"),
        ({"principals": {"a": {"tokens": [ETL_TOKEN]}, "b": {"tokens": [ETL_TOKEN]}}}, "share a token"),
        ({"principals": {"a": {"secret": ETL_SECRET, "grants": {"a..b": "read"}}}}, "empty namespace level"),
    ]
    for content, fault in bad:
        path = write_auth_file(tmp_path / "auth.json", content)
        with pytest.raises(AuthConfigError) as caught:
            load_auth(path, {})
        assert path in str(caught.value) and fault in str(caught.value), content
    good = write_auth_file(tmp_path / "auth.json", AUTH)
    os.chmod(good, 0o620)
    with pytest.raises(AuthConfigError, match="other users may write"):
        load_auth(good, {})
    os.chmod(good, 0o644)
    loaded = load_auth(good, {"AIOICEBERG_SERVE_CREDENTIAL": f"ci:{ETL_SECRET}"})
    assert loaded is not None and loaded.persistent_key
    assert (
        set(loaded.principals) == {"etl", "analyst", "ci"} and "readable by other users" in loaded.warnings[0]
    )
    assert load_auth(None, {}) is None
    with pytest.raises(AuthConfigError, match="AIOICEBERG_SERVE_TOKEN"):
        load_auth(None, {"AIOICEBERG_SERVE_TOKEN": "short"})


def serve_command(tmp_path: Path, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """``aioiceberg serve`` expected to stop at once (refused): exit code and stderr."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIOICEBERG_SERVE_")}
    command = [sys.executable, "-c", "from aioiceberg.cli import main; main()"]
    done = subprocess.run(
        [*command, "--warehouse", str(tmp_path / "wh"), "serve", "--port", "0", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stderr


def test_serve_refuses_other_addresses_without_auth_and_bad_auth_files(tmp_path: Path) -> None:
    code, stderr = serve_command(tmp_path, "--host", "0.0.0.0")
    assert code == 1 and "without authentication" in stderr and "0.0.0.0" in stderr
    broken = write_auth_file(tmp_path / "broken.json", {"principals": {"a": {"secret": "short"}}})
    code, stderr = serve_command(tmp_path, "--host", "127.0.0.1", env={"AIOICEBERG_SERVE_AUTH_FILE": broken})
    assert code == 1 and broken in stderr and "shorter than 16" in stderr
    assert len(stderr.strip().splitlines()) == 1
