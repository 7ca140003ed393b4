"""Our Iceberg REST catalog server in tests: ``aioiceberg serve`` as a separate process
(``RestServer``) or ``make_app`` in the test's own event loop (``serve_in_process``), and raw
requests to either (``request``, ``request_json``, ``request_json_async``; ``set_location``,
``register`` and ``purge`` for the routes that could reach outside a catalog's storage).

The process picks a free port itself (``--port 0``) and prints its URL, so there is no
race for a port; ``RestServer`` waits until ``/v1/config`` answers.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio.to_thread

from .moto import FAKE_CREDENTIALS

if TYPE_CHECKING:
    from aioiceberg.catalogs.base import Catalog

P = ParamSpec("P")
T = TypeVar("T")

_URL = re.compile(r"http://\S+")
_MAIN = "from aioiceberg.cli import main; main()"
_OPTION_ENV = "AIOICEBERG_TEST_STORAGE_OPTION_"
_CONFIG_ENV = "AIOICEBERG_TEST_TABLE_CONFIG_"


class RestServer:
    """``with RestServer(warehouse) as rest: rest.url`` -> ``http://127.0.0.1:PORT``.

    ``warehouse`` is any ``aioiceberg.connect`` URI; ``storage_options`` and ``lock`` are
    passed as ``--storage-option`` / ``--lock``, ``table_config`` as ``--table-config``,
    ``auth_file`` as ``--auth-file``; ``env`` adds to the server's environment (say
    ``AIOICEBERG_SERVE_TOKEN``).
    """

    def __init__(
        self,
        warehouse: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        lock: str | None = None,
        table_config: Mapping[str, str] | None = None,
        tables_in: str | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        auth_file: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.warehouse = warehouse
        self.storage_options = dict(storage_options or {})
        self.lock = lock
        self.table_config = dict(table_config or {})
        self.tables_in = tables_in
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.auth_file = auth_file
        self.host = host
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self._stderr: tempfile._TemporaryFileWrapper[str] | None = None

    def command(self) -> list[str]:
        args = [sys.executable, "-c", _MAIN, "--warehouse", self.warehouse]
        for index, key in enumerate(self.storage_options):
            # through the environment: the command line refuses secrets (it shows in ps)
            args += ["--storage-option", f"{key}=env:{_OPTION_ENV}{index}"]
        if self.lock is not None:
            args += ["--lock", self.lock]
        if self.tables_in is not None:
            args += ["--tables-in", self.tables_in]
        args += ["serve", "--host", self.host, "--port", "0"]
        for index, key in enumerate(self.table_config):
            args += ["--table-config", f"{key}=env:{_CONFIG_ENV}{index}"]
        if self.auth_file is not None:
            args += ["--auth-file", self.auth_file]
        return args + self.extra_args

    def start(self, timeout: float = 30) -> RestServer:
        options = {f"{_OPTION_ENV}{i}": value for i, value in enumerate(self.storage_options.values())}
        options.update({f"{_CONFIG_ENV}{i}": value for i, value in enumerate(self.table_config.values())})
        env = {**os.environ, **FAKE_CREDENTIALS, **options, **self.env, "PYTHONDONTWRITEBYTECODE": "1"}
        # stderr to a file: a chatty server must never block on a full pipe
        self._stderr = tempfile.NamedTemporaryFile("w+", prefix="aioiceberg-serve-", suffix=".log")
        self.process = subprocess.Popen(
            self.command(), env=env, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        try:
            self.url = self._read_url(timeout)
            self._wait_answering(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _read_url(self, timeout: float) -> str:
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
            if ready:
                line = self.process.stdout.readline()
                found = _URL.search(line)
                if found is not None:
                    return found.group(0)
            if self.process.poll() is not None:
                raise RuntimeError(f"aioiceberg serve exited with {self.process.returncode}: {self.stderr()}")
        raise TimeoutError(f"aioiceberg serve did not print its URL within {timeout}s")

    def _wait_answering(self, timeout: float) -> None:
        """Until ``/v1/config`` answers at all: with auth configured it answers 401."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"aioiceberg serve exited with {self.process.returncode}: {self.stderr()}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/config", timeout=1):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"{self.url} did not answer within {timeout}s")

    def stderr(self) -> str:
        """What the server wrote to stderr so far (warnings, errors, with -v every request)."""
        if self._stderr is None:
            return ""
        with open(self._stderr.name) as f:
            return f.read().strip()

    def stop(self, timeout: float = 10) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        return process.returncode

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


@contextlib.asynccontextmanager
async def serve_in_process(catalog: Catalog, **make_app_options: Any) -> AsyncIterator[str]:
    """``make_app(catalog, **make_app_options)`` on 127.0.0.1, port 0, in this event loop; yields
    its URL. Reach it with ``request_json_async``: a blocking request would stall the server."""
    from aiohttp import web  # here, not at the top: the plugin imports this module in every test

    from aioiceberg.server import make_app

    runner = web.AppRunner(make_app(catalog, **make_app_options), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Reply:
    """One answer as it came over the wire."""

    status: int
    headers: Mapping[str, str]
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode()

    def json(self) -> Any:
        """The decoded body; ``None`` when there is none (HEAD, 204)."""
        return json.loads(self.data) if self.data else None


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    *,
    content_type: str | None = JSON,
    timeout: float = 30,
) -> Reply:
    """One request on its own connection, whatever its status. ``body``: bytes go as they are,
    anything else (but ``None``) as JSON. ``content_type`` is sent unless ``headers`` name one.
    http.client, not urllib: of its own it sends only ``Host`` (not even that when ``headers``
    name one: a web page's or a proxy's), ``Accept-Encoding: identity`` and the length."""
    sent = dict(headers or {})
    if content_type is not None and not any(name.lower() == "content-type" for name in sent):
        sent["Content-Type"] = content_type
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        connection.request(method, parts.path + path, body=data, headers=sent)
        response = connection.getresponse()
        return Reply(response.status, dict(response.headers), response.read())
    finally:
        connection.close()


def request_json(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    *,
    content_type: str | None = JSON,
    timeout: float = 30,
) -> tuple[int, Any]:
    """``request``'s status and decoded body (``None`` when empty)."""
    reply = request(url, method, path, body, headers, content_type=content_type, timeout=timeout)
    return reply.status, reply.json()


def _in_thread(call: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """``call`` run in a worker thread, leaving the event loop free (to serve, say)."""

    async def threaded(*args: P.args, **kwargs: P.kwargs) -> T:
        return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))

    return threaded


# for a server in this event loop (``serve_in_process``): a blocking request would stall it
request_json_async = _in_thread(request_json)


def set_location(url: str, ns: str, table: str, location: str) -> tuple[int, Any]:
    body = {"requirements": [], "updates": [{"action": "set-location", "location": location}]}
    return request_json(url, "POST", f"/v1/namespaces/{ns}/tables/{table}", body)


def register(url: str, ns: str, table: str, metadata_location: str) -> tuple[int, Any]:
    body = {"name": table, "metadata-location": metadata_location}
    return request_json(url, "POST", f"/v1/namespaces/{ns}/register", body)


def purge(url: str, ns: str, table: str) -> int:
    """Drops ``ns.table`` with its files; the status."""
    return request_json(url, "DELETE", f"/v1/namespaces/{ns}/tables/{table}?purgeRequested=true")[0]
