"""A read-only, path-style S3 endpoint served by nginx from a directory, for benchmarks.

Why: moto spends 2-3 ms of CPU per GET on the same cores as the client and closes the
connection after every response, so a benchmark against it measures moto. nginx serves
``GET``/``HEAD`` (with ``Range``) of ``<root>/<bucket>/<key>`` for next to no CPU, keeps
connections alive, and the echo module's ``echo_sleep`` adds a fixed delay per request
without CPU (cloud-like latency; Linux netem is not available here). Writes are refused
(501 NotImplemented): build tables on disk with ``s3_on_disk.S3OnDiskIO``, then serve the
folder. Standard library only, so any user's Python can run it.

What it answers, checked with aiobotocore, boto3, PyIceberg and DuckDB (see
``tests/bench/test_nginx_benchmark.py``):

- ``Range: bytes=a-b`` -> 206 with ``Content-Range: bytes a-b/size``; an end past the
  object is clamped, as on S3.
- ``Range: bytes=-N`` (suffix) -> 206 with the last N bytes; N larger than the object
  -> 206 with the whole object (``bytes 0-(size-1)/size``), as on S3.
- a range starting at or past the end -> 416 with ``Content-Range: bytes */size`` and an
  S3-style ``InvalidRange`` XML body (so botocore reports the S3 error code).
- missing key, or a key that is a directory -> 404 with a ``NoSuchKey`` XML body (plain
  nginx would answer 301 for a directory, ``try_files`` makes it 404).
- ``HEAD`` -> ``Content-Length``, ``Last-Modified``, ``ETag``; the ETag is nginx's
  ``"<mtime hex>-<size hex>"``, quoted but not an MD5 of the body (fine for reads; nothing
  may compare it with a locally computed MD5).
- quirk: a ``Range`` on an empty object answers 200 with an empty body and no
  ``Content-Range`` (S3 answers 416 ``InvalidRange``).
- quirk: ``HEAD`` of a missing key is a bare 404 (no body, as on S3: botocore says "404").
- auth headers and query strings are ignored; ``ListObjects`` / ``HeadBucket`` hit the
  bucket's directory and answer 404 ``NoSuchKey``; any method but GET and HEAD answers
  501 ``NotImplemented``; multi-range requests get nginx's multipart answer (S3 ignores them).

    python benchmarks/nginx_store.py DIR [--delay-ms 20]   # serve DIR until Ctrl-C

``NGINX=/path/to/nginx`` picks another binary (its ``--modules-path`` must hold the echo module).
"""

from __future__ import annotations

import argparse
import atexit
import http.client
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

INSTALL = "apt-get install -y nginx-light libnginx-mod-http-echo"
DEFAULT_MODULES = Path("/usr/lib/nginx/modules")
ECHO_MODULE = "ngx_http_echo_module.so"

_NOSUCHKEY = (
    '<?xml version="1.0" encoding="UTF-8"?>\\n<Error><Code>NoSuchKey</Code>'
    "<Message>The specified key does not exist.</Message></Error>"
)
_NOTIMPLEMENTED = (
    '<?xml version="1.0" encoding="UTF-8"?>\\n<Error><Code>NotImplemented</Code>'
    "<Message>This store is read-only: GET and HEAD only.</Message></Error>"
)
_INVALIDRANGE = (
    '<?xml version="1.0" encoding="UTF-8"?>\\n<Error><Code>InvalidRange</Code>'
    "<Message>The requested range is not satisfiable</Message></Error>"
)


def nginx_binary() -> str | None:
    """``$NGINX`` if set, else ``nginx`` on PATH, else Debian's /usr/sbin/nginx (not on a
    non-root user's PATH)."""
    if "NGINX" in os.environ:
        return shutil.which(os.environ["NGINX"])
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def echo_module(binary: str) -> Path:
    """Where this nginx loads dynamic modules from (``--modules-path``), plus the echo module."""
    done = subprocess.run([binary, "-V"], capture_output=True, text=True, check=False, timeout=10)
    for arg in (done.stderr + done.stdout).split():
        if arg.startswith("--modules-path="):
            return Path(arg.split("=", 1)[1]) / ECHO_MODULE
    return DEFAULT_MODULES / ECHO_MODULE


def nginx_missing(delay_ms: float = 20.0) -> str | None:
    """Why the store cannot start here (one line naming the install command), or None."""
    binary = nginx_binary()
    if binary is None:
        return f"nginx store skipped: nginx not found (install: {INSTALL})"
    if delay_ms > 0 and not echo_module(binary).exists():
        return (
            f"nginx store skipped: the echo module ({echo_module(binary)}) is missing, needed for "
            f"--delay-ms > 0 (install: {INSTALL})"
        )
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def render_config(root: Path, scratch: Path, port: int, delay_ms: float, module: Path | None) -> str:
    """The nginx.conf: one worker (it needs a fraction of a core), every path in ``scratch``."""
    delay = ""
    files = "location / {"
    if delay_ms > 0:
        assert module is not None
        # echo_sleep takes seconds with at most 3 decimals ("0.0200" is an error at request time)
        seconds = max(round(delay_ms) / 1000, 0.001)
        delay = f"location / {{ echo_sleep {seconds:.3f}; echo_exec @files; }}\n"
        files = "location @files {"
    tmp = scratch / "tmp"
    # As root, workers would switch to nobody and could not read a 0700 temporary folder; the
    # directive is ignored (with a warning) for other users, so it is written only for root.
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    return (
        (f'load_module "{module}";\n' if delay_ms > 0 else "")
        + user
        + f'daemon off; worker_processes 1; pid "{scratch}/nginx.pid";\n'
        + f'error_log "{scratch}/error.log" warn;\n'
        # 1000 stays under a non-root user's usual 1024 open-file limit (no warning)
        + "events { worker_connections 1000; }\n"
        + "http {\n"
        + "  access_log off; log_not_found off; sendfile on; tcp_nopush on;\n"
        + "  keepalive_requests 1000000; keepalive_timeout 300s;\n"
        + "  default_type application/octet-stream;\n"
        + "".join(
            f'  {kind}_temp_path "{tmp}";\n' for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        + f"  server {{\n    listen 127.0.0.1:{port};\n"
        # without this, try_files answers a PUT of a new key with 404 NoSuchKey
        + "    if ($request_method !~ ^(GET|HEAD)$) {\n"
        + f"      return 501 '{_NOTIMPLEMENTED}';\n    }}\n"
        + (f"    {delay}" if delay else "")
        + f'    {files} root "{root}"; try_files $uri =404;\n'
        + "      error_page 404 @nosuchkey; error_page 416 @invalidrange; }\n"
        + f"    location @nosuchkey {{ default_type application/xml; return 404 '{_NOSUCHKEY}'; }}\n"
        + f"    location @invalidrange {{ default_type application/xml; return 416 '{_INVALIDRANGE}'; }}\n"
        + "  }\n}\n"
    )


class NginxStore:
    """``with NginxStore(root, delay_ms=20) as s3: s3.url, s3.options()``.

    Serves ``root/<bucket>/<key>`` as ``s3://<bucket>/<key>`` on a free port of 127.0.0.1,
    each response delayed by ``delay_ms`` (0: no delay, no echo module). Config, pid, logs
    and temp files live in a scratch folder, so any user can run it.
    """

    def __init__(self, root: Path | str, delay_ms: float = 20.0) -> None:
        self.root = Path(root).resolve()
        self.delay_ms = delay_ms
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def pids(self) -> tuple[int, ...]:
        """The master and its workers (the workers do the serving), for CPU accounting."""
        if self.process is None:
            return ()
        master = self.process.pid
        found = [master]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:  # field 4: parent pid
                found.append(int(entry.name))
        return tuple(found)

    def options(self) -> dict[str, str]:
        """Storage options for aioiceberg's ``resolve_io`` and PyIceberg alike."""
        return {
            "s3.endpoint": self.url,
            "s3.region": "us-east-1",
            "s3.access-key-id": "x",
            "s3.secret-access-key": "x",
        }

    def start(self, attempts: int = 3) -> NginxStore:
        missing = nginx_missing(self.delay_ms)
        if missing is not None:
            raise RuntimeError(missing)
        binary = nginx_binary()
        assert binary is not None
        module = echo_module(binary) if self.delay_ms > 0 else None
        self.root.mkdir(parents=True, exist_ok=True)
        self._scratch = tempfile.TemporaryDirectory(prefix="nginx-store-")
        scratch = Path(self._scratch.name)
        (scratch / "tmp").mkdir()
        conf = scratch / "nginx.conf"
        for attempt in range(attempts):
            self.port = free_port()
            conf.write_text(render_config(self.root, scratch, self.port, self.delay_ms, module))
            with open(scratch / "stderr.log", "wb") as log:
                self.process = subprocess.Popen(
                    # -e: nginx opens its compiled-in error log before reading the config
                    [binary, "-c", str(conf), "-p", str(scratch), "-e", str(scratch / "error.log")],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            atexit.register(self.stop)
            try:
                self._wait(timeout=10)
                return self
            except (RuntimeError, TimeoutError) as exc:
                self.stop(keep_scratch=True)
                if attempt == attempts - 1:
                    errors = (scratch / "stderr.log").read_text(errors="replace")[-2000:]
                    self._cleanup()
                    raise RuntimeError(f"nginx did not start: {exc}\n{errors}") from exc
        return self

    def _wait(self, timeout: float) -> None:
        """Until nginx answers ``HEAD /`` with the store's 404 (a 400 is a config error)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}")
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                conn.request("HEAD", "/")
                status = conn.getresponse().status
            except OSError:
                time.sleep(0.05)
                continue
            finally:
                conn.close()
            if status != 404:
                raise RuntimeError(f"nginx answered HEAD / with {status}, not 404")
            return
        raise TimeoutError(f"nginx did not answer on {self.url} within {timeout}s")

    def stop(self, keep_scratch: bool = False) -> None:
        """Fast shutdown of the master by its PID (SIGTERM; it stops its worker), then cleanup."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
            atexit.unregister(self.stop)
        if not keep_scratch:
            self._cleanup()

    def _cleanup(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> NginxStore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_or_skip(root: Path | str, delay_ms: float) -> NginxStore | None:
    """A started store, or None after printing one line saying what to install."""
    missing = nginx_missing(delay_ms)
    if missing is not None:
        print(missing, flush=True)
        return None
    return NginxStore(root, delay_ms).start()


@dataclass
class BenchStore:
    """Where a benchmark's table lives: ``kind`` is "nginx" or "local"; ``name`` is for the report."""

    kind: str
    options: dict[str, str]
    name: str


def open_bench_store(
    stack: ExitStack, disk: Path, kind: str, delay_ms: float, tiny: bool
) -> BenchStore | None:
    """The store a benchmark asked for, stopped when ``stack`` closes.

    None where nginx is missing (one line said why), except for a tiny run, which falls back to
    the local disk so the suite's smoke run still runs the script.
    """
    if kind != "nginx":
        return BenchStore("local", {}, "local")
    nginx = start_or_skip(disk, delay_ms)
    if nginx is None:
        return BenchStore("local", {}, "local") if tiny else None
    stack.callback(nginx.stop)
    name = f"nginx+{delay_ms:g}ms" if delay_ms > 0 else "nginx"
    return BenchStore("nginx", nginx.options(), name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="folder holding <bucket>/<key> files")
    p.add_argument("--delay-ms", type=float, default=20.0)
    args = p.parse_args()
    store = start_or_skip(args.root, args.delay_ms)
    if store is None:
        raise SystemExit(1)
    print(f"serving {store.root} as path-style S3 on {store.url} (+{args.delay_ms:g} ms per request)")
    try:
        while store.process is not None and store.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        store.stop()


if __name__ == "__main__":
    main()
