"""versitygw (``github.com/versity/versitygw``, Apache-2.0): an S3 gateway over a POSIX folder,
for benchmarks that need a real object store at a million keys.

A bucket is a folder under the gateway's root and a key a path under it, so a benchmark can
write a million objects as files (a minute) instead of a million PUTs, and a listing is a walk
of the folders: ListObjectsV2 skips every folder that sorts before its marker without reading
it, so a page costs about the same at 10,000 keys as at 1,000,000 (s3proxy's filesystem
backend loads every key under the prefix for each page). A file written behind the gateway
lists with its size, its mtime as LastModified and an empty ETag; folders are not listed as
keys. It checks SigV4 signatures (the fake keys below), takes DeleteObjects, and closes the
connection after each response.

The binary is built from the Go module proxy (nothing is downloaded by this module)::

    GOBIN=/some/dir go install github.com/versity/versitygw/cmd/versitygw@v1.8.0

and named by ``--versitygw PATH`` or the ``VERSITYGW`` environment variable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from benchmarks.s3_rig import free_port, wait_until_answers

VERSION = "v1.8.0"
BUILD = f"GOBIN=<dir> go install github.com/versity/versitygw/cmd/versitygw@{VERSION}"
ACCESS_KEY = SECRET_KEY = "testing"  # the suite's fake credentials (s3_storage_options)


def versitygw_binary(given: str | None = None) -> Path:
    """The gateway's binary: ``given``, else ``$VERSITYGW``, else ``versitygw`` on the PATH."""
    name = given or os.environ.get("VERSITYGW") or shutil.which("versitygw")
    if not name or not Path(name).is_file() or not os.access(name, os.X_OK):
        raise SystemExit(
            f"no versitygw binary{f' at {name}' if name else ''}: build it with `{BUILD}` "
            "and pass --versitygw <dir>/versitygw or set VERSITYGW"
        )
    return Path(name)


class VersityGW:
    """versitygw's posix backend on ``directory`` (``directory/root`` holds the buckets),
    listening on 127.0.0.1 at a free port."""

    def __init__(self, directory: Path, binary: Path) -> None:
        self.directory = directory
        self.binary = binary
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def object_path(self, bucket: str, key: str) -> Path:
        """The file (or, for a key prefix, the folder) that holds ``key``: a file written there
        lists as an object."""
        return self.directory / "root" / bucket / key

    def cpu_seconds(self) -> float:
        """The gateway process's CPU time so far (user + system), from /proc."""
        if self.process is None:
            return 0.0
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start(self) -> VersityGW:
        root = self.directory / "root"
        root.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "versitygw.log", "wb")  # the process writes it
        self.process = subprocess.Popen(
            [
                str(self.binary),
                "--access",
                ACCESS_KEY,
                "--secret",
                SECRET_KEY,
                "--port",
                f"127.0.0.1:{self.port}",
                "--quiet",
                "posix",
                str(root),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_answers(self.process, self.url, "versitygw", log.name)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None
