"""``read_table`` on S3 with Spark's S3A connector: Spark's own Parquet reader reads the files.

Tables written here to moto S3 are read through ``aioiceberg.spark.read_table`` in a local
SparkSession whose classpath carries hadoop-aws and the AWS SDK modules it uses
(``tests/spark_s3a/setup.sh``, run by the module if ``make`` has not). The rows must be our
own reader's, deletes applied; the plan must show Spark's Parquet file scan over
``s3a://``, never over a file that carries deletes; and the S3A settings must stay in the
read, never on the session.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from servers.backends import create_bucket
from servers.jvm import QUICK_JVM, QUICK_PYSPARK_ENV
from servers.moto import MotoServer
from servers.plugin import s3_storage_options
from servers.spark_cluster import S3A_JARS, session_builder

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg.spark.s3a import s3a_available, s3a_location, s3a_read_options

SETUP = Path(__file__).resolve().parents[1] / "spark_s3a" / "setup.sh"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("v", pa.float64())])


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    subprocess.run(["bash", str(SETUP), str(S3A_JARS)], check=True, timeout=600)
    session = session_builder(
        "local[2]", "aioiceberg-s3a", {"spark.driver.extraJavaOptions": QUICK_JVM}
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    aioiceberg.spark.register(session)
    if not s3a_available(session):
        session.stop()
        pytest.fail(
            "this process's Spark driver started without the S3A jars (a session built before "
            f"{S3A_JARS} was filled); run this module in a process of its own"
        )
    yield session
    session.stop()


@pytest.fixture
def storage(moto_server: MotoServer) -> dict[str, str]:
    return s3_storage_options(moto_server.url)


@pytest.fixture
def root(moto_server: MotoServer) -> str:
    return f"s3://{asyncio.run(create_bucket(moto_server.url))}/wh"


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": [i / 2 for i in ids]},
        schema=SCHEMA,
    )


def canon(values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(("NaN",) if isinstance(v, float) and math.isnan(v) else v for v in r) for r in values)


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return canon([tuple(r) for r in df.collect()])


def our_rows(table: sync.Table, row_filter: str | None = None) -> list[tuple[Any, ...]]:
    arrow = (table.scan(row_filter=row_filter) if row_filter else table.scan()).to_arrow()
    return canon(list(zip(*(arrow.column(c).to_pylist() for c in SCHEMA.names), strict=True)))


def plan_of(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def files_with_and_without_deletes(table: sync.Table) -> tuple[set[str], set[str]]:
    tasks = list(table.scan().plan_files())
    with_deletes = {t.file.file_path for t in tasks if t.delete_files}
    return with_deletes, {t.file.file_path for t in tasks} - with_deletes


def s3a(paths: set[str]) -> set[str]:
    return {str(s3a_location(p)) for p in paths}


def test_s3a_settings_are_per_bucket_and_follow_the_storage_options() -> None:
    options = s3a_read_options(
        {"b1", "b2"},
        {
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3.region": "eu-west-1",
            "s3.access-key-id": "AK",
            "s3.secret-access-key": "SK",
            "s3.session-token": "TOKEN",
            "s3.path-style-access": "true",
        },
    )
    assert options is not None
    assert {k for k in options if not k.startswith(("fs.s3a.bucket.b1.", "fs.s3a.bucket.b2."))} == set()
    assert options["fs.s3a.bucket.b1.endpoint"] == "http://127.0.0.1:9000"
    assert options["fs.s3a.bucket.b2.connection.ssl.enabled"] == "false"
    assert options["fs.s3a.bucket.b1.endpoint.region"] == "eu-west-1"
    assert options["fs.s3a.bucket.b1.path.style.access"] == "true"
    assert options["fs.s3a.bucket.b1.session.token"] == "TOKEN"
    assert options["fs.s3a.bucket.b1.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    # nothing given: S3A's own defaults and credential chain (the standard AWS configuration)
    assert s3a_read_options({"b"}, {}) == {}
    secure = s3a_read_options({"b"}, {"s3.endpoint": "https://s3.example", "key": "AK", "secret": "SK"})
    assert secure is not None and secure["fs.s3a.bucket.b.connection.ssl.enabled"] == "true"
    assert secure["fs.s3a.bucket.b.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    profile = s3a_read_options({"b"}, {"s3.profile-name": "dev"})
    assert profile is not None and profile["fs.s3a.bucket.b.auth.profile.name"] == "dev"
    assert profile["fs.s3a.bucket.b.aws.credentials.provider"].endswith("ProfileAWSCredentialsProvider")
    # half a key keeps the files with aioiceberg's reader (which reports it)
    assert s3a_read_options({"b"}, {"s3.access-key-id": "AK"}) is None
    assert s3a_location("s3://b/k/f.parquet") == "s3a://b/k/f.parquet"
    assert s3a_location("s3n://b/f.parquet") == "s3a://b/f.parquet"
    assert s3a_location("gs://b/f.parquet") is None


def test_s3a_storage_options_tune_the_read_and_come_last() -> None:
    options = s3a_read_options(
        {"b"},
        {
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3a.input.stream.type": "classic",
            "s3a.vectored.read.max.merged.size": "8M",
            "s3a.endpoint": "http://127.0.0.1:9001",
            "s3a.": "ignored: no key",
        },
    )
    assert options is not None
    assert options["fs.s3a.bucket.b.input.stream.type"] == "classic"
    assert options["fs.s3a.bucket.b.vectored.read.max.merged.size"] == "8M"
    assert options["fs.s3a.bucket.b.endpoint"] == "http://127.0.0.1:9001"
    assert "fs.s3a.bucket.b." not in options


def test_files_on_s3_are_read_by_sparks_parquet_reader_over_s3a(
    spark: Any, root: str, storage: dict[str, str]
) -> None:
    table = sync.connect(root, storage_options=storage).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    for k in range(3):
        table.append(rows(k * 40, 40))
    bucket = root.removeprefix("s3://").split("/")[0]

    df = aioiceberg.spark.read_table(spark, table.location, storage)
    assert spark_rows(df) == our_rows(table)
    _, data_files = files_with_and_without_deletes(table)
    assert len(data_files) == 9
    assert set(df.inputFiles()) == s3a(data_files)
    plan = plan_of(df)
    assert "FileScan parquet" in plan and f"s3a://{bucket}/" in plan
    assert "BatchScan" not in plan  # no Python data source part
    assert spark_rows(aioiceberg.spark.read_table(spark, table.location, storage, native=False)) == (
        our_rows(table)
    )

    # a filter prunes files here and row groups in Spark
    filtered = aioiceberg.spark.read_table(spark, table.location, {**storage, "filter": "id < 50"})
    assert spark_rows(filtered) == our_rows(table, "id < 50")
    assert len(filtered.inputFiles()) == 6  # ids 80-119 pruned by their files' bounds
    assert spark_rows(filtered.select("id", "v").where("region = 'us'")) == sorted(
        (r[0], r[2]) for r in our_rows(table, "id < 50") if r[1] == "us"
    )

    # the S3A settings went into the read, not the session or its Hadoop configuration
    assert spark.conf.get(f"fs.s3a.bucket.{bucket}.endpoint", None) is None
    assert spark.conf.get(f"spark.hadoop.fs.s3a.bucket.{bucket}.endpoint", None) is None
    assert spark.sparkContext._jsc.hadoopConfiguration().get(f"fs.s3a.bucket.{bucket}.endpoint") is None


def test_files_with_position_or_equality_deletes_stay_with_aioiceberg(
    spark: Any, root: str, storage: dict[str, str]
) -> None:
    table = sync.connect(root, storage_options=storage).create_table(
        "db.d", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"}
    )
    for k in range(3):
        table.append(rows(k * 40, 40))

    # position deletes on the first two files, one delete each: a delete file naming both
    # files would, by its path bounds, also reach a third file whose name sorts between them
    table.delete("id < 10")
    table.delete("id = 45")
    with_deletes, without = files_with_and_without_deletes(table)
    assert len(with_deletes) == 2 and len(without) == 1
    df = aioiceberg.spark.read_table(spark, table.location, storage)
    assert spark_rows(df) == our_rows(table)
    assert set(df.inputFiles()) == s3a(without)  # Spark's scan: only the file without deletes
    plan = plan_of(df)
    assert "FileScan parquet" in plan and "BatchScan" in plan  # both parts, one DataFrame
    assert 45 not in [r[0] for r in spark_rows(df)]

    # equality deletes (an upsert) reach every older file; the upsert's own file has none
    changes = pa.table({"id": [3, 50, 119, 500], "region": ["eu"] * 4, "v": [-1.0] * 4}, schema=SCHEMA)
    table.upsert(changes, join_cols=["id"])
    with_deletes, without = files_with_and_without_deletes(table)
    assert len(with_deletes) == 3 and len(without) == 1
    df = aioiceberg.spark.read_table(spark, table.location, storage)
    assert spark_rows(df) == our_rows(table)
    assert set(df.inputFiles()) == s3a(without)
    got = {r[0]: r for r in spark_rows(df)}
    assert got[50][2] == -1.0 and got[119][2] == -1.0 and got[500][2] == -1.0
    assert 3 in got and 45 not in got
    assert spark_rows(df.where("id >= 100")) == [r for r in our_rows(table) if r[0] >= 100]


WITHOUT_S3A = """
import json, logging, sys
from pyspark.sql import SparkSession
import aioiceberg.spark

location, storage = sys.argv[1], json.loads(sys.argv[2])
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
spark = (
    SparkSession.builder.master("local[1]").appName("aioiceberg-no-s3a")
    .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1").getOrCreate()
)
try:
    spark.sparkContext.setLogLevel("ERROR")
    df = aioiceberg.spark.read_table(spark, location, storage)
    rows = sorted(tuple(r) for r in df.collect())
    plan = df._jdf.queryExecution().executedPlan().toString()
    print(json.dumps({"rows": rows, "plan": plan, "input_files": df.inputFiles()}))
finally:
    spark.stop()
"""


def test_without_s3a_on_the_classpath_the_data_source_reads_and_a_warning_says_so(
    spark: Any, root: str, storage: dict[str, str], tmp_path: Path
) -> None:
    table = sync.connect(root, storage_options=storage).create_table("db.f", schema=SCHEMA)
    table.append(rows(0, 30))
    # a driver of its own, started without the jars (this process's driver has them for good),
    # C1 only as the suite's other JVMs
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_S3A, table.location, json.dumps(storage)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **QUICK_PYSPARK_ENV},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 data files on S3 are read through aioiceberg's data source" in done.stderr
    assert "no S3A connector" in done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert canon([tuple(r) for r in found["rows"]]) == our_rows(table)
    assert found["input_files"] == []
    assert "FileScan parquet" not in found["plan"] and "BatchScan" in found["plan"]
