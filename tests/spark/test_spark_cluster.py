"""The aioiceberg data source on a real Spark standalone cluster: a master and two one-core
workers (tests/servers/spark_cluster.py), so every task runs in an executor JVM and Python
workers of its own, apart from the driver (this process and its JVM). Tables live in moto S3.

The cluster's daemons, hence its executors, have no AWS settings of their own: S3 reaches
the executors only as a user would pass it, as data source options or through
``spark.executorEnv.*``. The session's executor environment points at a second moto server
(``env_moto``) where only the environment test's bucket exists, so a test passing options
for the suite's moto server would fail if its options did not reach the executors.

One cluster and one session for the module (under ``pytest -n``, one per worker that runs
some of its tests); the executor-kill test comes last (its killed executor is replaced by a
new one, which later tests would have to wait for).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from maint_helpers import duckdb_ids
from servers.backends import create_bucket
from servers.moto import FAKE_CREDENTIALS, MotoServer
from servers.plugin import s3_storage_options
from servers.spark_cluster import SparkCluster, cluster_session, executor_processes

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.io.resolve import resolve_io
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.source import WRITE_ID_PROPERTY

# one worker holds the modules that share the session-wide cluster (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("spark-cluster")

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("v", pa.float64())])
SPARK_SCHEMA = "id long, region string, v double"
DEADLINE = 180.0  # seconds for anything the test waits on (2 busy cores)


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": [i / 2 for i in ids]},
        schema=SCHEMA,
    )


def sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in SCHEMA.names), strict=True))


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["region"], r["v"]) for r in df.collect())


@pytest.fixture(scope="module")
def env_moto() -> Iterator[MotoServer]:
    """The S3 the executors' environment (``spark.executorEnv.AWS_ENDPOINT_URL``) points at."""
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="module")
def spark(spark_cluster: SparkCluster, env_moto: MotoServer) -> Iterator[Any]:
    session = cluster_session(
        spark_cluster,
        "aioiceberg-cluster-tests",
        **{
            "spark.executorEnv.AWS_ENDPOINT_URL": env_moto.url,
            "spark.executorEnv.AWS_ACCESS_KEY_ID": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "spark.executorEnv.AWS_SECRET_ACCESS_KEY": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "spark.executorEnv.AWS_REGION": "us-east-1",
        },
    )
    yield session
    session.stop()


def s3_table(endpoint: str, name: str = "t", partitioned: bool = True, **properties: str) -> sync.Table:
    """A new table in a new bucket of ``endpoint``, with three appends of 30 rows when partitioned."""
    bucket = asyncio.run(create_bucket(endpoint))
    table = sync.connect(f"s3://{bucket}/wh", storage_options=s3_storage_options(endpoint)).create_table(
        f"db.{name}", schema=SCHEMA, partition_by=["region"] if partitioned else [], properties=properties
    )
    if partitioned:
        for k in range(3):
            table.append(rows(k * 30, 30))
    return table


def stored_files(table: sync.Table, options: dict[str, str]) -> set[str]:
    """Every object under the table's ``data/`` prefix."""
    io = resolve_io(table.location, options, runtime=default_runtime())

    async def listing() -> set[str]:
        return {o.location async for o in io.list(f"{table.location}/data/")}

    return default_loop.run(listing())


def table_files(table: sync.Table) -> set[str]:
    return {task.file.file_path for task in table.refresh().scan().plan_files()}


def executor_side() -> Callable[[], tuple[int, int, str]]:
    """``whoami()`` for code running in an executor: (this Python worker's pid, the pid of its
    executor JVM, the executor id), found up the parent chain (worker, daemon, JVM). Made in a
    function so it travels by value: this module cannot be imported on executors."""

    def whoami() -> tuple[int, int, str]:
        import os
        from pathlib import Path

        pid = os.getpid()
        while pid > 1:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
                return os.getpid(), pid, args[args.index(b"--executor-id") + 1].decode()
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        raise RuntimeError(f"process {os.getpid()} is not in a Spark executor")

    return whoami


def test_reads_on_two_executors_apart_from_the_driver_with_s3_options(spark: Any, moto_endpoint: str) -> None:
    """Options reach the executors: their environment names the other moto, without this bucket."""
    options = s3_storage_options(moto_endpoint)
    table = s3_table(moto_endpoint)
    df = spark.read.format("aioiceberg").options(**options).option("split-size", "1").load(table.location)
    assert df.rdd.getNumPartitions() == 9  # 3 appends x 3 regions
    assert spark_rows(df) == sorted_rows(table.scan().to_arrow())

    whoami = executor_side()

    def where(batch: Iterable[Any]) -> Iterator[tuple[int, int, str, int, str | None]]:
        import os

        pid, jvm, executor = whoami()
        yield pid, jvm, executor, sum(1 for _ in batch), os.environ.get("AWS_ENDPOINT_URL")

    seen = df.rdd.mapPartitions(where).collect()
    assert sum(n for *_, n, _env in seen) == 90
    driver_jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    executors = {jvm: executor for _pid, jvm, executor, _n, _env in seen}
    assert len(executors) == 2, seen  # both executors took part
    # this app's executor JVMs (a lost executor's JVM may still be listed beside its replacement)
    assert executors.items() <= executor_processes(spark.sparkContext.applicationId).items()
    assert driver_jvm not in executors
    python_pids = {pid for pid, *_ in seen}
    assert os.getpid() not in python_pids and len(python_pids) >= 2
    # the executors' S3 environment is only what spark.executorEnv gave them
    assert {env for *_, env in seen} == {spark.conf.get("spark.executorEnv.AWS_ENDPOINT_URL")}


def test_reads_and_appends_with_the_aws_environment_from_spark_executor_env(
    spark: Any, env_moto: MotoServer
) -> None:
    """No options at all: the executors (and the driver's planning and commit workers) find S3
    through AWS_ENDPOINT_URL, AWS_REGION and the keys set with spark.executorEnv.*."""
    table = s3_table(env_moto.url)
    df = spark.read.format("aioiceberg").option("split-size", "1").load(table.location)
    assert df.rdd.getNumPartitions() == 9
    assert spark_rows(df) == sorted_rows(table.scan().to_arrow())

    new = spark.createDataFrame(rows(100, 20).to_pylist(), SPARK_SCHEMA).repartition(2)
    new.write.format("aioiceberg").mode("append").save(table.location)
    table.refresh()
    assert len(table.snapshots()) == 4
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [*range(90), *range(100, 120)]


def test_an_append_with_options_read_back_here_and_by_pyiceberg(spark: Any, moto_endpoint: str) -> None:
    from pyiceberg.table import StaticTable

    options = s3_storage_options(moto_endpoint)
    table = s3_table(moto_endpoint)
    new = spark.createDataFrame(rows(100, 40).to_pylist(), SPARK_SCHEMA).repartition(4)
    new.write.format("aioiceberg").options(**options).mode("append").save(table.location)
    table.refresh()
    expected = [*range(90), *range(100, 140)]
    assert len(table.snapshots()) == 4
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == expected
    py_table = StaticTable.from_metadata(table.metadata_location, properties=options)
    assert sorted(py_table.scan().to_arrow()["id"].to_pylist()) == expected


def test_a_dynamic_overwrite_with_options_read_back_here_and_by_duckdb(
    spark: Any, moto_endpoint: str
) -> None:
    options = s3_storage_options(moto_endpoint)
    table = s3_table(moto_endpoint)
    eu = spark.createDataFrame([(1000 + i, "eu", 0.5) for i in range(6)], SPARK_SCHEMA).repartition(2)
    eu.write.format("aioiceberg").options(**options).mode("overwrite").option(
        "overwrite-mode", "dynamic"
    ).save(table.location)
    table.refresh()
    expected = sorted([i for i in range(90) if i % 3 != 0] + list(range(1000, 1006)))
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == expected
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.properties.get("replace-partitions") == "true"
    assert duckdb_ids(table.metadata_location, moto_endpoint) == expected


# The executor-kill test: 8 tasks of ROWS_PER_TASK rows each. A first attempt stops at GATE_ROW
# until the test opens the gate, so the task the test kills is certainly mid-write; small target
# files make it write some files before that.
TASKS, ROWS_PER_TASK, GATE_ROW = 8, 32_000, 16_000


def slow_rows(gate: str, marks: str) -> Callable[[int, Iterable[int]], Iterator[tuple[int, str, float]]]:
    """The job's rows, made on executors. Each attempt leaves a marker file
    ``<partition>-<attempt>-<task attempt id>-<executor JVM pid>`` when it reaches the gate; a
    first attempt then waits for the gate (a file) to open."""
    whoami = executor_side()

    def generate(index: int, _: Iterable[int]) -> Iterator[tuple[int, str, float]]:
        import time
        from pathlib import Path

        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        start = index * ROWS_PER_TASK
        for i in range(start, start + ROWS_PER_TASK):
            if i == start + GATE_ROW:
                tag = f"{index}-{context.attemptNumber()}-{context.taskAttemptId()}-{whoami()[1]}"
                Path(marks, tag).touch()
                deadline = time.monotonic() + 240
                while (
                    context.attemptNumber() == 0 and not Path(gate).exists() and time.monotonic() < deadline
                ):
                    time.sleep(0.1)
            yield i, ("eu", "us", "ap")[i % 3], i / 2

    return generate


def file_attempt(location: str) -> int:
    """The task attempt id in a data file name (``{partition:05d}-{attempt}-{write id}-{n:05d}``)."""
    return int(location.rsplit("/", 1)[1].split("-")[1])


def test_read_table_on_the_cluster_local_files_by_spark_s3_files_by_executors(
    spark: Any, moto_endpoint: str, tmp_path: Path
) -> None:
    """``read_table``: Spark's executors read the local files themselves, and the S3 table's files
    through S3A with the options given (the executors' environment names the other moto)."""
    import aioiceberg.spark

    local = sync.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA, partition_by=["region"])
    for k in range(2):
        local.append(rows(k * 30, 30))
    df = aioiceberg.spark.read_table(spark, local.location, {"filter": "region = 'us'"})
    assert len(df.inputFiles()) == 2  # the us files, read by Spark's Parquet reader
    assert spark_rows(df) == [r for r in sorted_rows(local.scan().to_arrow()) if r[1] == "us"]

    table = s3_table(moto_endpoint)
    options = s3_storage_options(moto_endpoint)
    df = aioiceberg.spark.read_table(spark, table.location, options)
    files = df.inputFiles()  # S3A is on the session's classpath: Spark's reader takes them
    assert files and all(f.startswith("s3a://") for f in files), files
    assert spark_rows(df) == sorted_rows(table.scan().to_arrow())


def test_a_write_survives_an_executor_killed_mid_write(
    spark: Any, moto_endpoint: str, tmp_path: Path
) -> None:
    options = s3_storage_options(moto_endpoint)
    table = s3_table(moto_endpoint, "kill", partitioned=False, **{"write.target-file-size-bytes": "20000"})
    gate, marks = tmp_path / "gate", tmp_path / "marks"
    marks.mkdir()
    errors: list[BaseException] = []
    generate = slow_rows(str(gate), str(marks))

    def job() -> None:
        try:  # the DataFrame is made in this thread: Spark finds Python data sources by the
            # thread's active session
            data = spark.sparkContext.parallelize(range(TASKS), TASKS).mapPartitionsWithIndex(generate)
            df = spark.createDataFrame(data, SPARK_SCHEMA)
            df.write.format("aioiceberg").options(**options).mode("append").save(table.location)
        except BaseException as exc:
            errors.append(exc)

    def markers() -> list[tuple[int, int, int, int]]:
        """(partition, attempt, task attempt id, executor JVM pid) of attempts that reached the gate."""
        found = [tuple(int(x) for x in p.name.split("-")) for p in marks.iterdir()]
        return sorted((a, b, c, d) for a, b, c, d in found)

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")  # the writer gets rows early
    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE
        victim: tuple[int, int, int, int] | None = None
        while victim is None:
            assert not errors, errors
            assert time.monotonic() < deadline, f"no task wrote a file before the gate: {markers()}"
            stored = stored_files(table, options)
            for mark in markers():
                if mark[1] == 0 and any(file_attempt(f) == mark[2] for f in stored):
                    victim = mark
                    break
            else:
                time.sleep(0.2)
        partition, _, attempt_id, jvm = victim
        assert (
            executor_processes(spark.sparkContext.applicationId).get(jvm) is not None
        )  # this app's executor
        written_before_kill = {f for f in stored_files(table, options) if file_attempt(f) == attempt_id}
        os.kill(jvm, signal.SIGKILL)
    finally:
        gate.touch()
        thread.join(DEADLINE)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert not thread.is_alive(), "the write job did not end"
    assert not errors, errors

    # one snapshot, every row once
    table.refresh()
    assert len(table.snapshots()) == 1
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.properties.get(WRITE_ID_PROPERTY)
    got = table.scan().to_arrow()["id"].to_pylist()
    assert len(got) == TASKS * ROWS_PER_TASK and sorted(got) == list(range(TASKS * ROWS_PER_TASK))

    # Spark ran the killed task again (another attempt of its partition finished the job)
    attempts = markers()
    retried = {p for p, attempt, _, _ in attempts if attempt > 0}
    assert partition in retried, attempts

    # what the killed attempts wrote is on storage, not in the table; nothing else is left over
    killed = {tid for _, _, tid, pid in attempts if pid == jvm}
    in_table, stored = table_files(table), stored_files(table, options)
    orphans = stored - in_table
    assert in_table <= stored
    assert written_before_kill and written_before_kill <= orphans
    assert orphans == {f for f in stored if file_attempt(f) in killed}
    assert not in_table & {f for f in stored if file_attempt(f) in killed}
