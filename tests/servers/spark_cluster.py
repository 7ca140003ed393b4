"""A Spark standalone cluster on 127.0.0.1, started from the pyspark package itself.

One master and (by default) two workers with one core each, every daemon a JVM of its own
started with ``$SPARK_HOME/bin/spark-class`` in a process group of its own, so ``stop``
takes the daemons and the executors and Python workers they started with them. Logs go to
files in the work directory; a start-up failure quotes their tails.

The daemons get the caller's environment without any ``AWS_*`` variable, so executors
(children of the workers) see S3 settings only the ways a user passes them: data source
options, or ``spark.executorEnv.*``.

``cluster_session`` connects a SparkSession to it and waits until every worker's executor
has registered, so the first job already runs on all of them.

``java_options`` (the tests pass ``servers.jvm.QUICK_JVM``; the benchmarks none, so Java's
defaults) go to the daemons (``SPARK_DAEMON_JAVA_OPTS``) and, through ``cluster_session``, to
the executors and the driver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .moto import free_port

START_TIMEOUT = 180.0  # seconds; a cold start takes ~50 s on 2 busy cores
S3A_JARS = Path(__file__).resolve().parents[2] / ".spark-jars"  # tests/spark_s3a/setup.sh fills it
STOP_TIMEOUT = 15.0
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    """The pyspark package folder: it carries ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(text[-lines:])


def process_args(pid: int) -> list[str]:
    """The command line of a process ([] when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def executor_processes(app_id: str) -> dict[int, str]:
    """The executor JVMs of one application on this machine: pid -> executor id."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = process_args(int(entry.name))
        if EXECUTOR_CLASS not in args or app_id not in args:
            continue
        if "--executor-id" in args:
            found[int(entry.name)] = args[args.index("--executor-id") + 1]
    return found


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


class SparkCluster:
    """``with SparkCluster(work_dir) as cluster: cluster.master_url`` -> ``spark://127.0.0.1:P``."""

    def __init__(
        self,
        work_dir: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        java_options: str | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.java_options = java_options
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = 0
        self.webui_port = 0
        self.daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def environment(self) -> dict[str, str]:
        """The daemons' environment: the caller's minus AWS settings, plus Spark's own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        conf_dir = self.work_dir / "conf"  # empty: no spark-defaults.conf from anywhere else
        conf_dir.mkdir(parents=True, exist_ok=True)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_NO_DAEMONIZE="1",
            SPARK_DAEMON_MEMORY="256m",
            PYSPARK_PYTHON=sys.executable,
            # a port taken meanwhile fails the start, with the log, instead of moving a daemon
            # to a port nobody waits on (the master's start is retried on fresh ports); no REST
            # submission server: its fixed port 6066 is one per machine
            SPARK_MASTER_OPTS="-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false",
            SPARK_WORKER_OPTS="-Dspark.port.maxRetries=0",
        )
        if self.java_options is not None:
            env["SPARK_DAEMON_JAVA_OPTS"] = self.java_options
        return env

    def _spawn(self, name: str, args: list[str]) -> _Daemon:
        log = self.work_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self.environment(),
                cwd=self.work_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends executors too
            )
        daemon = _Daemon(name, process, log)
        self.daemons.append(daemon)
        return daemon

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as answer:
            status: dict[str, Any] = json.load(answer)
            return status

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def failure(self, message: str) -> RuntimeError:
        """An error quoting every daemon's exit status and log tail."""
        parts = [message]
        for d in self.daemons:
            status = d.process.poll()
            parts.append(
                f"--- {d.name} ({'running' if status is None else f'exited {status}'}), {d.log}:\n"
                f"{_tail(d.log)}"
            )
        return RuntimeError("\n".join(parts))

    def _wait(self, what: str, ready: Any, deadline: float) -> None:
        while True:
            for d in self.daemons:
                if d.process.poll() is not None:
                    raise self.failure(f"Spark {d.name} exited while waiting for {what}")
            try:
                if ready():
                    return
            except OSError:
                pass  # the web UI is not up yet
            if time.monotonic() > deadline:
                raise self.failure(f"no {what} within {START_TIMEOUT:.0f}s")
            time.sleep(0.25)

    def _start_master(self, deadline: float) -> None:
        self.port, self.webui_port = free_port(), free_port()
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ],
        )
        self._wait("master web UI", lambda: self.state().get("status") == "ALIVE", deadline)

    def start(self, attempts: int = 3) -> SparkCluster:
        deadline = time.monotonic() + START_TIMEOUT
        for attempt in range(attempts):
            try:
                self._start_master(deadline)
                break
            except RuntimeError:
                self.stop()
                if attempt == attempts - 1 or time.monotonic() > deadline:
                    raise
        try:
            for n in range(1, self.workers + 1):
                work = self.work_dir / f"worker-{n}"
                work.mkdir(parents=True, exist_ok=True)
                self._spawn(
                    f"worker-{n}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        self.master_url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(work),
                    ],
                )
            self._wait(
                f"{self.workers} ALIVE workers", lambda: len(self.alive_workers()) >= self.workers, deadline
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Workers first (their executors go with their process groups), then the master."""
        for d in reversed(self.daemons):
            _stop_group(d.process)
        self.daemons = []

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole process group, SIGKILL to what is left after a grace period."""
    try:
        group = os.getpgid(process.pid)
    except ProcessLookupError:
        process.wait()
        return
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    try:  # the daemon, and executors or Python workers that outlived it
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def session_builder(master: str, app: str, conf: dict[str, str]) -> Any:
    """A SparkSession builder for the tests: driver on 127.0.0.1, no UI, two shuffle
    partitions, Python workers on this interpreter, the S3A jars when fetched, then ``conf``."""
    from pyspark.sql import SparkSession

    from aioiceberg.spark.s3a import s3a_jars

    os.environ["PYSPARK_PYTHON"] = sys.executable  # what executors start their Python workers with
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
    )
    if jars := s3a_jars(S3A_JARS):  # the first session of a process fixes the driver's classpath
        builder = builder.config("spark.jars", jars)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder


def cluster_session(cluster: SparkCluster, app: str, **conf: str) -> Any:
    """A SparkSession on ``cluster`` (driver on 127.0.0.1, no UI) with the aioiceberg source
    registered, returned once an executor of every worker has registered."""
    import aioiceberg.spark

    jvm = cluster.java_options
    java = (
        {} if jvm is None else {"spark.executor.extraJavaOptions": jvm, "spark.driver.extraJavaOptions": jvm}
    )
    session = session_builder(
        cluster.master_url, app, {"spark.executor.memory": "768m", **java, **conf}
    ).getOrCreate()
    try:
        if session.sparkContext.master != cluster.master_url:
            raise RuntimeError(
                f"a SparkSession on {session.sparkContext.master} is still active in this process; "
                f"stop it before connecting to {cluster.master_url}"
            )
        session.sparkContext.setLogLevel("ERROR")
        wait_for_executors(session, cluster, cluster.workers)
        aioiceberg.spark.register(session)
    except BaseException:
        session.stop()
        raise
    return session


def executor_ids(session: Any) -> list[str]:
    """The ids of the executors registered with the driver now (the driver excluded)."""
    ids = session.sparkContext._jsc.sc().getExecutorIds()
    return sorted(str(ids.apply(i)) for i in range(ids.size()))


def wait_for_executors(
    session: Any, cluster: SparkCluster, count: int, timeout: float = START_TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while len(executor_ids(session)) < count:
        if time.monotonic() > deadline:
            app = session.sparkContext.applicationId
            logs = sorted(cluster.work_dir.glob(f"worker-*/{app}/*/stderr"))
            tails = "\n".join(f"--- {p}:\n{_tail(p)}" for p in logs)
            raise cluster.failure(
                f"{len(executor_ids(session))} of {count} executors registered within {timeout:.0f}s\n{tails}"
            )
        time.sleep(0.25)
