"""A throwaway PostgreSQL server for the SQL catalog's tests: Debian's binaries, a cluster made
by ``initdb`` in a temporary folder, trust authentication, listening on 127.0.0.1 on a free port
(JDBC and SQLAlchemy reach it over TCP) and on a unix socket in the same folder.

PostgreSQL refuses to run as root: as root the cluster belongs to the ``postgres`` user (or
``nobody``) and every binary runs as that user through ``setpriv``. Where the binaries are
missing, root installs Debian's ``postgresql`` package (as CI runs); anyone else is told to.
Durability is switched off (``fsync``, ``synchronous_commit``): nothing here outlives the run.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from .moto import free_port

SUPERUSER = "postgres"


def postgres_bin() -> Path:
    """The newest installed server's bin folder, installing Debian's package as root if none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if not found:
        if os.geteuid() != 0:
            raise RuntimeError(
                "PostgreSQL's server binaries are missing (/usr/lib/postgresql/*/bin): "
                "run `sudo apt-get install -y postgresql`"
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent


def _run_as() -> pwd.struct_passwd | None:
    """The user the server runs as when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' user exists")


class PostgresServer:
    """``with PostgresServer() as pg: pg.create_database()`` -> a new database's name;
    ``pg.uri(db)`` for asyncpg/our catalog, ``pg.sqlalchemy_uri(db)`` for PyIceberg,
    ``pg.jdbc_uri(db)`` for Java; user ``postgres``, any password."""

    def __init__(self) -> None:
        self.bin = postgres_bin()
        self.user = _run_as()
        self.port = 0
        self.folder = ""
        self.process: subprocess.Popen[bytes] | None = None

    def _command(self, *args: str) -> list[str]:
        if self.user is None:
            return list(args)
        # setpriv execs the binary itself, so signals reach postgres (runuser would stand between)
        user = self.user
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--", *args]

    def start(self, attempts: int = 3) -> PostgresServer:
        self.folder = tempfile.mkdtemp(prefix="aioiceberg-pg-")
        if self.user is not None:
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        data = os.path.join(self.folder, "data")
        subprocess.run(
            self._command(
                str(self.bin / "initdb"),
                "-D",
                data,
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.folder,
        )
        for attempt in range(attempts):
            self.port = free_port()
            with open(os.path.join(self.folder, "server.log"), "ab") as log:
                self.process = subprocess.Popen(
                    self._command(
                        str(self.bin / "postgres"),
                        "-D",
                        data,
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(self.port),
                        "-k",
                        self.folder,
                        "-c",
                        "fsync=off",
                        "-c",
                        "synchronous_commit=off",
                        "-c",
                        "full_page_writes=off",
                        "-c",
                        "max_connections=100",
                    ),
                    stdout=log,
                    stderr=log,
                    cwd=self.folder,
                )
            try:
                self._wait_ready(timeout=30)
                return self
            except (RuntimeError, TimeoutError):
                self._stop_process()
                if attempt == attempts - 1:
                    raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {self.log_tail()}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"postgres did not accept connections within {timeout}s: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return Path(self.folder, "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database (a fresh one per test keeps tests apart)."""
        name = name or "t" + uuid.uuid4().hex[:16]
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, name],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return name

    def uri(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def sqlalchemy_uri(self, database: str) -> str:
        return f"postgresql+psycopg2://{SUPERUSER}:x@127.0.0.1:{self.port}/{database}"

    def jdbc_uri(self, database: str) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"

    def _stop_process(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)  # a fast shutdown: clients still connected are cut
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def stop(self) -> None:
        self._stop_process()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
