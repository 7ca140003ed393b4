"""Apache Iceberg's Java implementation as a live peer: a Spark session with Iceberg's Spark
runtime, in its own process and Python environment (``tests/java/setup.sh`` makes both).

The tests drive it with Spark SQL and read its answers as Arrow tables, so rows compare typed.
Catalogs are added while it runs (``catalog``): Spark makes a catalog from the session's
configuration the first time a statement names it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
import threading
import uuid
from collections import deque
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.ipc

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "java" / "setup.sh"
WORKER = ROOT / "tests" / "java" / "worker.py"
VENV = Path(os.environ.get("JAVA_PEER_VENV", ROOT / ".venv-java"))
JARS = Path(os.environ.get("JAVA_PEER_JARS", ROOT / ".java-peer" / "jars"))
START_TIMEOUT_S = 240.0


class JavaPeerError(Exception):
    """A statement the Java peer refused; ``kind`` is the exception's class on its side."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def ensure_installed() -> None:
    """Runs the idempotent set-up once per machine, whichever test process gets there first."""
    JARS.parent.mkdir(parents=True, exist_ok=True)
    with open(JARS.parent / ".setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["bash", str(SETUP)], check=True, cwd=ROOT)


def catalog_conf(name: str, **properties: str) -> dict[str, str]:
    """Spark settings for an Iceberg catalog called ``name`` (``type=rest``, ``jdbc``, ``hadoop``...)."""
    conf = {f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog"}
    conf.update({f"spark.sql.catalog.{name}.{k.replace('_', '-')}": v for k, v in properties.items()})
    return conf


class JavaSpark:
    """One JVM with Iceberg's Spark runtime; statements run one at a time, in order."""

    def __init__(self, conf: dict[str, str] | None = None) -> None:
        self._conf = dict(conf or {})
        self._proc: subprocess.Popen[str] | None = None
        self._answers: IO[str] | None = None
        self._lock = threading.Lock()
        self._log: deque[str] = deque(maxlen=200)
        self._scratch = Path(tempfile.mkdtemp(prefix="java-peer-"))
        self.version = ""

    def __enter__(self) -> JavaSpark:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        ensure_installed()
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "PEER_RESULT_FD": str(write_fd), "PYSPARK_PYTHON": str(VENV / "bin" / "python")}
        env.pop("SPARK_HOME", None)
        env.pop("PYTHONPATH", None)
        self._proc = subprocess.Popen(
            [str(VENV / "bin" / "python"), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            pass_fds=(write_fd,),
        )
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, "r")
        threading.Thread(target=self._drain, daemon=True).start()
        jars = sorted(str(p) for p in JARS.glob("*.jar"))
        hello = self._call({"jars": jars, "conf": self._conf})
        self.version = str(hello.get("version", ""))

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._log.append(line.rstrip())

    def _call(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin is not None and self._answers is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
            line = self._answers.readline()
        if not line:
            raise RuntimeError("the Java peer exited:\n" + "\n".join(self._log))
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise JavaPeerError(str(answer.get("error")), str(answer.get("message", answer.get("error"))))
        return answer

    def sql(self, statement: str) -> list[list[Any]]:
        """Runs a statement; its rows as JSON values (decimals and times as strings)."""
        rows: list[list[Any]] = self._call({"op": "sql", "sql": statement})["rows"]
        return rows

    def arrow(self, query: str) -> pa.Table:
        """A query's answer as an Arrow table, types as Spark gives them."""
        path = self._scratch / f"{uuid.uuid4().hex}.arrow"
        self._call({"op": "arrow", "sql": query, "path": str(path)})
        try:
            with pa.memory_map(str(path)) as source:
                return pyarrow.ipc.open_file(source).read_all()
        finally:
            path.unlink(missing_ok=True)

    def set_conf(self, conf: dict[str, str]) -> None:
        self._call({"op": "conf", "conf": conf})

    def catalog(self, name: str, **properties: str) -> str:
        """Adds an Iceberg catalog to the running session (``type=...``, ``uri=...``, ...)."""
        self.set_conf(catalog_conf(name, **properties))
        return name

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
                proc.stdin.close()
            proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if self._answers is not None:
            self._answers.close()


__all__ = ["JavaPeerError", "JavaSpark", "catalog_conf", "ensure_installed"]


def start_into(conf: dict[str, str], box: dict[str, Any]) -> None:
    """Start a peer with ``conf`` into ``box["java"]`` (a thread's target: benchmarks start
    the JVM beside their own set-up), or put what failed into ``box["error"]``."""
    try:
        java = JavaSpark(conf)
        box["java"] = java
        java.start()
    except Exception as exc:  # reported by the caller, which needs the peer
        box["error"] = exc
