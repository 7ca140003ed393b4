"""Our REST client's authentication against real servers.

OAuth2 client credentials (``credential=``) and bearer tokens (``token=``) against
``aioiceberg serve --auth-file`` started as a process; AWS SigV4 (``sigv4=true``) through a
verifying reverse proxy in front of the real server: the proxy recomputes each request's
signature from the known test credentials (canonical request over method, path, query, signed
headers and payload hash, as AWS does) and answers 403 on any mismatch.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl

import aiohttp
import anyio
import pyarrow as pa
import pytest
from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from servers.rest import RestServer
from yarl import URL

import aioiceberg
from aioiceberg.catalogs.rest import RestCatalog
from aioiceberg.errors import InvalidPropertyError, NotAuthorizedError, ValidationError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
ROWS = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA)

ETL_SECRET = "etl-secret-5b2f0c9e81d4"
READER_SECRET = "reader-secret-77a1c3e0f2"
STATIC_TOKEN = "static-token-1f8e2d7c6b5a"
TOKEN_TTL_S = 3  # renewed after 1 s (2 s before the end)


def write_auth_file(directory: Path, *, ttl_s: int = TOKEN_TTL_S) -> Path:
    config: dict[str, object] = {
        "principals": {
            "etl": {"secret": ETL_SECRET, "tokens": [STATIC_TOKEN], "grants": {"*": "write"}},
            "reader": {"secret": READER_SECRET, "grants": {"*": "read"}},
        },
        "token-ttl-seconds": ttl_s,
    }
    path = directory / "auth.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def auth_server(warehouse: Path, auth_file: Path, *extra: str) -> RestServer:
    return RestServer(str(warehouse), auth_file=str(auth_file), extra_args=["-v", *extra])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    """One server with auth for the module (-v: it logs every request and its status)."""
    root = tmp_path_factory.mktemp("rest-auth")
    with auth_server(root / "warehouse", write_auth_file(root)) as rest:
        yield rest


def log_lines(server: RestServer, since: int = 0) -> list[str]:
    """The request lines the server logged (``METHOD PATH -> STATUS``), from line ``since`` on."""
    return [line for line in server.stderr().splitlines() if " -> " in line][since:]


def answered(lines: list[str], status: int, *, tokens: bool = False) -> list[str]:
    """Lines answered ``status``, on the token endpoint (``tokens``) or elsewhere."""
    return [
        line
        for line in lines
        if line.endswith(f"-> {status}") or f"-> {status} (" in line
        if ("/v1/oauth/tokens" in line) == tokens
    ]


# -- OAuth2 client credentials and bearer tokens -----------------------------------------------


@pytest.mark.anyio
async def test_credential_works_end_to_end(server: RestServer) -> None:
    async with aioiceberg.connect(f"rest+{server.url}?credential=etl:{ETL_SECRET}") as catalog:
        await catalog.create_namespace("e2e")
        table = await catalog.create_table("e2e.events", SCHEMA)
        await table.append(ROWS)
        again = await catalog.load_table("e2e.events")
        assert sorted((await again.scan().to_arrow()).to_pylist(), key=lambda r: r["id"]) == ROWS.to_pylist()
        assert await catalog.list_tables("e2e") == ["e2e.events"]


@pytest.mark.anyio
async def test_token_is_renewed_before_it_expires(server: RestServer) -> None:
    """Operations spread over several token lifetimes: the client fetches new tokens on its
    own, and the server never has to refuse an expired one."""
    since = len(log_lines(server))
    async with aioiceberg.connect(f"rest+{server.url}?credential=etl:{ETL_SECRET}") as catalog:
        await catalog.create_namespace("renew")
        table = await catalog.create_table("renew.t", SCHEMA)
        for _ in range(3):
            await table.append(ROWS)
            await anyio.sleep(TOKEN_TTL_S * 0.4)
            await table.refresh()
        assert (await table.scan().to_arrow()).num_rows == 3 * ROWS.num_rows
        lines = log_lines(server, since)
        assert len(answered(lines, 200, tokens=True)) >= 2, lines
        assert answered(lines, 401) == [], lines

        # a token due for renewal, and many requests at once: one of them fetches, all wait
        await anyio.sleep(TOKEN_TTL_S * 0.5)  # due for renewal, not expired
        since = len(log_lines(server))
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(catalog.list_tables, "renew")
    lines = log_lines(server, since)
    assert len(answered(lines, 200, tokens=True)) == 1, lines
    assert len(answered(lines, 200)) == 8, lines


@pytest.mark.anyio
async def test_wrong_secret_is_a_clear_typed_error_without_the_secret(server: RestServer) -> None:
    wrong = "not-the-secret-9c1d2e3f4a"
    catalog = aioiceberg.connect(f"rest+{server.url}?credential=etl:{wrong}")
    assert wrong not in repr(catalog) and wrong not in repr(getattr(catalog, "uri", None))
    async with catalog:
        with pytest.raises(NotAuthorizedError) as caught:
            await catalog.list_namespaces()
    message = str(caught.value)
    assert f"{server.url}/v1/oauth/tokens" in message and "invalid_client" in message
    assert "'etl'" in message and wrong not in message


def test_secrets_stay_out_of_reprs_and_uri_errors() -> None:
    secret = "hush-hush-0123456789"
    uri = RestCatalog.from_uri(f"rest+http://127.0.0.1:1?credential=etl:{secret}&scope=catalog").uri
    assert secret not in repr(uri)
    bad = [
        f"rest+http://127.0.0.1:1?credential={secret}",  # no CLIENT_ID:
        f"rest+http://127.0.0.1:1?credential=etl:{secret}&token={secret}",
        f"rest+http://127.0.0.1:1?credential=etl:{secret}&colour=blue",
        f"rest+http://127.0.0.1:1?credential=etl:{secret}&credential=etl:{secret}",
        f"rest+http://127.0.0.1:1?credential=etl:{secret}&sigv4=true",
    ]
    for text in bad:
        with pytest.raises(ValidationError) as caught:
            aioiceberg.connect(text)
        assert secret not in str(caught.value), text
    with pytest.raises(InvalidPropertyError, match="oauth2-server-uri"):
        aioiceberg.connect(f"rest+http://127.0.0.1:1?credential=etl:{secret}&oauth2-server-uri=tokens")


@pytest.mark.anyio
async def test_static_token_works_and_a_wrong_one_is_refused(server: RestServer) -> None:
    async with aioiceberg.connect(f"rest+{server.url}?token={STATIC_TOKEN}") as catalog:
        await catalog.create_namespace("static")
        assert await catalog.namespace_exists("static")
    async with aioiceberg.connect(f"rest+{server.url}?token=wrong-token-0123456789") as catalog:
        with pytest.raises(NotAuthorizedError, match="HTTP 401") as caught:
            await catalog.list_namespaces()
        assert "wrong-token-0123456789" not in str(caught.value)


@pytest.mark.anyio
async def test_read_only_principal_reads_and_is_refused_writes(server: RestServer) -> None:
    async with aioiceberg.connect(f"rest+{server.url}?credential=etl:{ETL_SECRET}") as writer:
        await writer.create_namespace("shared")
    async with aioiceberg.connect(
        f"rest+{server.url}?credential=reader:{READER_SECRET}&scope=catalog"
    ) as reader:
        assert "shared" in await reader.list_namespaces()
        with pytest.raises(NotAuthorizedError, match="HTTP 403"):
            await reader.create_table("shared.t", SCHEMA)


def reserved_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
async def test_a_refused_token_is_renewed_once_and_the_request_resent(
    server: RestServer, tmp_path: Path
) -> None:
    """A restarted server (a new random signing key) refuses the tokens it issued before:
    the client's next write gets 401, fetches a new token and sends the write once more.
    A token refused again after renewal (one from another server) is an error, not a loop."""
    auth_file = write_auth_file(tmp_path, ttl_s=3600)  # no renewal on time here
    port = str(reserved_port())
    first = auth_server(tmp_path / "warehouse", auth_file, "--port", port).start()
    try:
        async with aioiceberg.connect(f"rest+{first.url}?credential=etl:{ETL_SECRET}") as catalog:
            await catalog.create_namespace("before")
            await anyio.to_thread.run_sync(first.stop)
            with auth_server(tmp_path / "warehouse", auth_file, "--port", port) as second:
                assert second.url == first.url
                await anyio.sleep(0.2)  # the client sees its old connection closed
                await catalog.create_namespace("after")
                assert sorted(await catalog.list_namespaces()) == ["after", "before"]
                lines = log_lines(second)

                # tokens from the module's server (same principals, another key)
                elsewhere = f"{server.url}/v1/oauth/tokens"
                since, issued = len(log_lines(second)), len(answered(log_lines(server), 200, tokens=True))
                uri = f"rest+{second.url}?credential=etl:{ETL_SECRET}&oauth2-server-uri={elsewhere}"
                async with aioiceberg.connect(uri) as foreign:
                    with pytest.raises(NotAuthorizedError, match="HTTP 401"):
                        await foreign.create_namespace("never")
                assert len(answered(log_lines(second, since), 401)) == 2
                assert len(answered(log_lines(server), 200, tokens=True)) == issued + 2
    finally:
        first.stop()
    writes = [line for line in lines if "POST /v1/namespaces " in line]
    assert [w.rsplit("->", 1)[1].split()[0] for w in writes] == ["401", "200"], lines
    assert len(answered(lines, 200, tokens=True)) == 1, lines


# -- SigV4 through a verifying proxy -------------------------------------------------------------

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FQoGZXIvYXdzEXAMPLEsessiontoken"
REGION = "us-east-1"
SERVICE = "glue"

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})"
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "upgrade"}


@dataclass
class Received:
    method: str
    raw_path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class SigV4Proxy:
    """Verifies each request's SigV4 signature as AWS does, then forwards it to ``upstream``
    without the AWS headers; a request that fails verification gets 403 and goes nowhere."""

    upstream: str
    accepted: list[Received] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    url: str = ""

    def problem(self, request: web.Request, body: bytes) -> str | None:
        found = _AUTHORIZATION.fullmatch(request.headers.get("Authorization", ""))
        if found is None:
            return "no AWS4-HMAC-SHA256 Authorization header"
        if found["key"] != ACCESS_KEY:
            return f"unknown access key {found['key']}"
        if (found["region"], found["service"]) != (REGION, SERVICE):
            return f"credential scope {found['region']}/{found['service']}, not {REGION}/{SERVICE}"
        stamp = request.headers.get("X-Amz-Date", "")
        try:
            when = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            return f"bad X-Amz-Date {stamp!r}"
        if stamp[:8] != found["day"] or abs(dt.datetime.now(dt.UTC) - when) > dt.timedelta(minutes=15):
            return "X-Amz-Date outside the credential's day or the allowed skew"
        signed = found["signed"].split(";")
        for required in ("host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"):
            if required not in signed:
                return f"{required} is not signed"
        if request.headers.get("X-Amz-Security-Token") != SESSION_TOKEN:
            return "wrong session token"
        if request.headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
            return "x-amz-content-sha256 is not the body's hash"
        if any(name not in request.headers for name in signed):
            return "a signed header is missing"
        # the canonical request rebuilt from what arrived: the path as sent, the query decoded
        # and encoded again as AWS does, the signed headers' values, the payload's hash
        path, _, query = request.raw_path.partition("?")
        aws = AWSRequest(
            method=request.method,
            url=f"http://{request.headers['Host']}{path}",
            params=parse_qsl(query, keep_blank_values=True),
            data=body,
            headers={name: ",".join(request.headers.getall(name)) for name in signed},
        )
        aws.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), SERVICE, REGION)
        if signer.signed_headers(signer.headers_to_sign(aws)) != found["signed"]:
            return "SignedHeaders do not match the headers signed"
        canonical = signer.canonical_request(aws)
        expected = signer.signature(signer.string_to_sign(aws, canonical), aws)
        if not hmac.compare_digest(expected, found["signature"]):
            return "the signature does not match"
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        problem = self.problem(request, body)
        if problem is not None:
            self.refused.append(f"{request.method} {request.raw_path}: {problem}")
            error = {
                "message": f"SignatureDoesNotMatch: {problem}",
                "type": "ForbiddenException",
                "code": 403,
            }
            return web.json_response({"error": error}, status=403)
        self.accepted.append(Received(request.method, request.raw_path, dict(request.headers), body))
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP
            and k.lower() != "authorization"
            and not k.lower().startswith("x-amz-")
        }
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method,
                URL(self.upstream + request.raw_path, encoded=True),
                headers=headers,
                data=body or None,
            ) as resp,
        ):
            answer = await resp.read()
            return web.Response(status=resp.status, body=answer, content_type=resp.content_type)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    """The real server behind the proxy (no auth of its own: loopback only)."""
    with RestServer(str(tmp_path_factory.mktemp("rest-sigv4") / "warehouse")) as rest:
        yield rest


@contextlib.asynccontextmanager
async def sigv4_proxy(upstream: RestServer) -> AsyncIterator[SigV4Proxy]:
    proxy = SigV4Proxy(upstream.url)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    proxy.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield proxy
    finally:
        await runner.cleanup()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """The test credentials in the environment, and no profile or config file to compete."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    return monkeypatch


@pytest.mark.anyio
async def test_sigv4_signed_client_works_through_the_verifying_proxy(
    upstream: RestServer, aws_env: pytest.MonkeyPatch
) -> None:
    async with sigv4_proxy(upstream) as proxy:
        uri = f"rest+{proxy.url}?sigv4=true&signing-region={REGION}"
        async with aioiceberg.connect(uri) as catalog:
            await catalog.create_namespace(("sig", "a b"))  # %1F and %20 in paths, twice encoded
            table = await catalog.create_table(("sig", "a b", "t"), SCHEMA)
            await table.append(ROWS)
            again = await catalog.load_table(("sig", "a b", "t"))
            assert (await again.scan().to_arrow()).num_rows == ROWS.num_rows
            assert await catalog.list_namespaces("sig") == ["sig.a b"]  # ?parent=sig
            await catalog.drop_table(("sig", "a b", "t"), purge=True)  # ?purgeRequested=true
            assert await catalog.list_tables(("sig", "a b")) == []
        assert proxy.refused == []
        seen = {(r.method, r.raw_path.partition("?")[2] != "") for r in proxy.accepted}
        assert {("POST", False), ("GET", True), ("DELETE", True)} <= seen


@pytest.mark.anyio
async def test_sigv4_pyiceberg_names_and_region_from_the_environment(
    upstream: RestServer, aws_env: pytest.MonkeyPatch
) -> None:
    aws_env.setenv("AWS_REGION", REGION)
    async with sigv4_proxy(upstream) as proxy:
        uri = f"rest+{proxy.url}?rest.sigv4-enabled=true&rest.signing-name={SERVICE}"
        async with aioiceberg.connect(uri) as catalog:
            await catalog.create_namespace("sig_alias")
            assert "sig_alias" in await catalog.list_namespaces()
        assert proxy.refused == [] and proxy.accepted


@pytest.mark.anyio
async def test_sigv4_wrong_secret_or_region_is_refused_with_a_typed_error(
    upstream: RestServer, aws_env: pytest.MonkeyPatch
) -> None:
    async with sigv4_proxy(upstream) as proxy:
        async with aioiceberg.connect(f"rest+{proxy.url}?sigv4=true&signing-region=eu-west-1") as catalog:
            with pytest.raises(NotAuthorizedError, match="HTTP 403"):
                await catalog.list_namespaces()
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", "not/the/secret/key/0123456789")
        async with aioiceberg.connect(f"rest+{proxy.url}?sigv4=true&signing-region={REGION}") as catalog:
            with pytest.raises(NotAuthorizedError, match="HTTP 403") as caught:
                await catalog.list_namespaces()
        assert "not/the/secret" not in str(caught.value)
        assert proxy.accepted == []
        assert [r.split(": ", 1)[1] for r in proxy.refused] == [
            f"credential scope eu-west-1/{SERVICE}, not {REGION}/{SERVICE}",
            "the signature does not match",
        ]


@pytest.mark.anyio
async def test_the_proxy_checks_method_path_query_headers_and_payload(
    upstream: RestServer, aws_env: pytest.MonkeyPatch
) -> None:
    """Requests our client signed, replayed with one part changed, are refused: the proxy
    verifies what was signed, not that a signature is present."""
    async with sigv4_proxy(upstream) as proxy:
        async with aioiceberg.connect(f"rest+{proxy.url}?sigv4=true&signing-region={REGION}") as catalog:
            await catalog.create_namespace("replay", {"k": "v"})
            await catalog.list_namespaces("replay")
        post = next(r for r in proxy.accepted if r.method == "POST" and r.body)
        query = next(r for r in proxy.accepted if "?" in r.raw_path)

        def forged(received: Received, **changes: object) -> Received:
            return Received(**{**received.__dict__, **changes})  # type: ignore[arg-type]

        other_body = post.body.replace(b'"v"', b'"w"')
        cases = {
            "body": forged(post, body=other_body),
            "body and its hash": forged(
                post,
                body=other_body,
                headers={**post.headers, "x-amz-content-sha256": hashlib.sha256(other_body).hexdigest()},
            ),
            "path": forged(post, raw_path=post.raw_path + "x"),
            "query": forged(query, raw_path=query.raw_path + "x"),
            "method": forged(query, method="DELETE"),
            "a signed header": forged(post, headers={**post.headers, "X-Iceberg-Access-Delegation": "none"}),
        }
        refused_before = len(proxy.refused)
        async with aiohttp.ClientSession() as session:
            for what, request in cases.items():
                headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
                async with session.request(
                    request.method,
                    URL(proxy.url + request.raw_path, encoded=True),
                    headers=headers,
                    data=request.body or None,
                ) as resp:
                    assert resp.status == 403, what
        assert len(proxy.refused) == refused_before + len(cases)
        reasons = [r.split(": ", 1)[1] for r in proxy.refused[refused_before:]]
        assert reasons[0] == "x-amz-content-sha256 is not the body's hash"
        assert set(reasons[1:]) == {"the signature does not match"}


def test_sigv4_options_are_checked() -> None:
    with pytest.raises(InvalidPropertyError, match="sigv4"):
        aioiceberg.connect("rest+http://127.0.0.1:1?sigv4=maybe")
    with pytest.raises(InvalidPropertyError, match="signing-region"):
        aioiceberg.connect("rest+http://127.0.0.1:1?signing-region=us-east-1")  # without sigv4
    with pytest.raises(InvalidPropertyError, match="not both"):
        aioiceberg.connect("rest+http://127.0.0.1:1?sigv4=true&rest.sigv4-enabled=true")
    with pytest.raises(ValidationError, match="sigv4"):
        aioiceberg.connect("rest+http://127.0.0.1:1?sigv4=true&token=abc")
