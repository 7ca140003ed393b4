"""S3 stores for the Spark benchmark, and a proxy that counts what each reader asks them for.

- ``S3Proxy``: s3proxy (``org.gaul:s3proxy``, a multithreaded Java server, Jetty) on its
  filesystem backend, fetched by the machine's Maven client into the local repository.
  Unlike moto (one Python process, one request at a time, 2-3 ms of CPU per request, a new
  connection per response) it serves requests in parallel and keeps connections alive,
  and unlike nginx it takes writes and LISTs, so both implementations' writers and readers
  run on it.
- ``CountingProxy``: a TCP relay in front of a store that parses each request head
  (method, path, query, ``Range``) and counts the bytes sent back, per phase. It costs CPU
  of its own, so timed runs go around it.

Standard library, and boto3 for the copy.
"""

from __future__ import annotations

import collections
import io
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config

S3PROXY = "org.gaul:s3proxy:2.6.0:jar:jar-with-dependencies"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_answers(process: subprocess.Popen[bytes], url: str, name: str, log: str) -> None:
    """Until the store started as ``process`` answers HTTP on ``url`` (any answer, an S3 error
    for an unsigned request included); its log is named if it exits first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}: see {log}")
        try:
            urllib.request.urlopen(url + "/", timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # it answers: an S3 error is an answer
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{name} did not answer on {url} within 60 s")


def s3proxy_jar() -> Path:
    """The s3proxy jar in the local Maven repository, fetched there first if missing."""
    group, artifact, version, _, classifier = S3PROXY.split(":")
    repo = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    jar = repo / group.replace(".", "/") / artifact / version / f"{artifact}-{version}-{classifier}.jar"
    if not jar.exists():
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:get", f"-Dartifact={S3PROXY}", "-Dtransitive=false"],
            check=True,
            timeout=600,
        )
    return jar


class S3Proxy:
    """s3proxy on ``directory`` (filesystem backend), any signature accepted.
    ``ignore_unknown_headers``: it answers 501 to a request with a header it does not know
    (obstore's DeleteObjects sends ``x-amz-checksum-sha256``) unless told to ignore them."""

    def __init__(self, directory: Path, ignore_unknown_headers: bool = False) -> None:
        self.directory = directory
        self.ignore_unknown_headers = ignore_unknown_headers
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def object_path(self, bucket: str, key: str) -> Path:
        """The file (or, for a key prefix, the folder) that holds ``key`` in the filesystem
        backend: a file written there lists as an object (its size, its mtime as LastModified)."""
        return self.directory / "data" / bucket / key

    def start(self) -> S3Proxy:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        conf = self.directory / "s3proxy.conf"
        conf.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.url}",
                    "s3proxy.authorization=none",
                    "jclouds.provider=filesystem",
                    f"jclouds.filesystem.basedir={data}",
                    f"s3proxy.ignore-unknown-headers={str(self.ignore_unknown_headers).lower()}",
                    "",
                ]
            )
        )
        log = open(self.directory / "s3proxy.log", "wb")  # the process writes it
        self.process = subprocess.Popen(
            ["java", "-Xmx1g", "-jar", str(s3proxy_jar()), "--properties", str(conf)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_answers(self.process, self.url, "s3proxy", log.name)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@dataclass
class Counts:
    """Requests by kind, and bytes the store sent back, for one phase."""

    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    ranged_bytes: int = 0  # what the Range headers asked for (a suffix range counts its N)
    bytes_back: int = 0  # everything the store sent: heads, bodies, XML
    connections: int = 0

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.requests.items()))
        total = sum(self.requests.values())
        return (
            f"{total} requests ({kinds}), {self.connections} connections, {self.bytes_back / 1e6:.1f} MB back"
        )


def kind_of(method: str, target: str, headers: dict[str, str]) -> tuple[str, int]:
    path, _, query = target.partition("?")
    ranged = headers.get("range", "")
    if method == "GET" and ("list-type" in query or path.rstrip("/").count("/") <= 1):
        return "LIST", 0
    if method == "GET" and ranged.startswith("bytes="):
        first, _, last = ranged[6:].partition("-")
        if not first:
            return "GET range", int(last)
        return "GET range", (int(last) - int(first) + 1) if last else 0
    if method == "GET":
        return "GET whole", 0
    return method, 0


class CountingProxy:
    """``127.0.0.1:<port>`` relaying to ``upstream`` (``http://host:port``); ``reset()`` starts
    a phase and returns the last one's counts."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port))
        self.lock = threading.Lock()
        self.counts = Counts()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> Counts:
        with self.lock:
            last, self.counts = self.counts, Counts()
        return last

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.counts.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        threading.Thread(target=self._back, args=(upstream, client), daemon=True).start()
        reader = client.makefile("rb")
        try:
            while True:
                head = self._head(reader)
                if head is None:
                    break
                upstream.sendall(head)
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    name, sep, value = line.partition(":")
                    if sep:
                        headers[name.strip().lower()] = value.strip()
                kind, size = kind_of(method, target, headers)
                with self.lock:
                    self.counts.requests[kind] += 1
                    self.counts.ranged_bytes += size
                self._body(reader, upstream, headers)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    @staticmethod
    def _head(reader: io.BufferedReader) -> bytes | None:
        lines: list[bytes] = []
        while True:
            line = reader.readline(65536)
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                if not lines:
                    continue
                lines.append(line)
                return b"".join(lines)
            lines.append(line)

    @staticmethod
    def _body(reader: io.BufferedReader, upstream: socket.socket, headers: dict[str, str]) -> None:
        read = reader.read
        readline = reader.readline
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = readline(65536)
                upstream.sendall(size_line)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, then the blank line
                        line = readline(65536)
                        upstream.sendall(line)
                        if line in (b"\r\n", b"\n", b""):
                            return
                upstream.sendall(read(size + 2))
        left = int(headers.get("content-length", "0") or 0)
        while left > 0:
            chunk = read(min(left, 1 << 20))
            if not chunk:
                return
            upstream.sendall(chunk)
            left -= len(chunk)

    def _back(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while True:
                data = upstream.recv(1 << 20)
                if not data:
                    break
                client.sendall(data)
                with self.lock:
                    self.counts.bytes_back += len(data)
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.server.close()


def s3_client(endpoint: str, pool: int = 10) -> Any:
    """A boto3 client for the test stores (path style, their fake keys, no checksums that
    s3proxy would refuse)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            max_pool_connections=pool,
        ),
    )


def copy_bucket(source: str, target: str, bucket: str) -> int:
    """Copy every object of ``bucket`` from the ``source`` endpoint to the same bucket and keys
    at ``target`` through PUTs (so the target keeps ETags, which S3A's analytics stream needs);
    returns the count."""

    src, dst = s3_client(source), s3_client(target)
    dst.create_bucket(Bucket=bucket)
    copied = 0
    for page in src.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = src.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            dst.put_object(Bucket=bucket, Key=item["Key"], Body=body)
            copied += 1
    return copied
