"""Run LocalStack's S3 on the host, without Docker, from its own venv (.venv-localstack).

LocalStack's boto3 pins clash with aiobotocore, hence the separate venv; create it with
``make localstack-setup`` (or ``localstack/setup-venv.sh``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .moto import FAKE_CREDENTIALS, free_port, wait_http

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-localstack"


def localstack_python(venv: Path | None = None) -> Path | None:
    """The venv's python if LocalStack is installed there, else None."""
    venv = venv or Path(os.environ.get("LOCALSTACK_VENV", DEFAULT_VENV))
    python = venv / "bin" / "python"
    return python if python.exists() else None


class LocalStackServer:
    def __init__(self, python: Path, services: str = "s3") -> None:
        self.python = python
        self.services = services
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> LocalStackServer:
        self.port = free_port()
        self.scratch = tempfile.mkdtemp(prefix="localstack-")
        env = {
            **os.environ,
            **FAKE_CREDENTIALS,
            "SERVICES": self.services,
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "GATEWAY_SERVER": "hypercorn",  # the default server ignores the host and binds 0.0.0.0
            "DNS_ADDRESS": "0",
            "DISABLE_EVENTS": "1",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "FILESYSTEM_ROOT": os.path.join(self.scratch, "fs"),
            "TMPDIR": os.path.join(self.scratch, "tmp"),
            "XDG_CACHE_HOME": os.path.join(self.scratch, "cache"),
        }
        for sub in ("fs", "tmp", "cache"):
            os.makedirs(os.path.join(self.scratch, sub), exist_ok=True)
        self.process = subprocess.Popen(
            [str(self.python), "-m", "localstack.runtime.main"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_http(f"{self.url}/_localstack/health", timeout=timeout, process=self.process)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __enter__(self) -> LocalStackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    import time

    found = localstack_python()
    if found is None:
        raise SystemExit("no .venv-localstack: run `make localstack-setup` first")
    with LocalStackServer(found) as server:
        print(f"LOCALSTACK_URL={server.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
