"""Start a moto server (S3 + DynamoDB + ...) as a separate process on a free local port.

A separate process keeps moto's CPU off the test's event loop and works under xdist
(one server per worker). Requests are handled one at a time (see moto_serialized.py) so
conditional writes are as atomic as on the real services.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


LAUNCHER = Path(__file__).with_name("moto_serialized.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_http(url: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


class MotoServer:
    """``with MotoServer() as moto: moto.url`` -> ``http://127.0.0.1:PORT``."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, attempts: int = 3) -> MotoServer:
        for attempt in range(attempts):
            self.port = free_port()
            env = {**os.environ, **FAKE_CREDENTIALS}
            self.process = subprocess.Popen(
                [sys.executable, str(LAUNCHER), "127.0.0.1", str(self.port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_http(f"{self.url}/moto-api/", timeout=30, process=self.process)
                return self
            except (RuntimeError, TimeoutError):
                self.stop()
                if attempt == attempts - 1:
                    raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
