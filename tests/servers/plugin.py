"""pytest fixtures for real servers. Session-scoped: under xdist each worker starts its own."""

from __future__ import annotations

import logging
import os
import pathlib
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from .java_spark import JavaSpark
from .jvm import QUICK_JVM
from .localstack import LocalStackServer, localstack_python
from .moto import FAKE_CREDENTIALS, MotoServer
from .postgres import PostgresServer
from .proxy import FaultProxy
from .rest import RestServer
from .spark_cluster import SparkCluster

logging.getLogger("werkzeug").setLevel(logging.ERROR)


@pytest.fixture(scope="session", autouse=True)
def _fake_aws_credentials() -> Iterator[None]:
    """Tests never reach real AWS: fake credentials unless the caller set their own."""
    saved = {k: os.environ.get(k) for k in FAKE_CREDENTIALS}
    for key, value in FAKE_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    yield
    for key, old in saved.items():
        if old is None:
            os.environ.pop(key, None)


@pytest.fixture(scope="session")
def java_spark() -> Iterator[JavaSpark]:
    """Apache Iceberg's Java implementation in a Spark session of its own (one JVM per test process).

    Modules that use it mark themselves ``pytest.mark.xdist_group("java")`` so one worker holds it.
    The JVM runs C1 only (``QUICK_JVM``); the benchmarks start theirs with Java's defaults.
    """
    with JavaSpark({"spark.driver.extraJavaOptions": QUICK_JVM}) as peer:
        yield peer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server on 127.0.0.1 (trust auth, user ``postgres``); tests keep apart by
    ``create_database()``. Debian's package is installed first where it is missing (as root)."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A moto server process (S3, DynamoDB, ...) on 127.0.0.1; ``.url`` is its endpoint."""
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def moto_endpoint(moto_server: MotoServer) -> str:
    return moto_server.url


@pytest.fixture(scope="session")
def _session_proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    with FaultProxy(moto_server.url) as proxy:
        yield proxy


@pytest.fixture
def fault_proxy(_session_proxy: FaultProxy) -> Iterator[FaultProxy]:
    """The latency/fault proxy in front of moto, transparent at the start of each test."""
    _session_proxy.reset()
    yield _session_proxy
    _session_proxy.reset()


@pytest.fixture
def rest_server(tmp_path: pathlib.Path) -> Iterator[RestServer]:
    """``aioiceberg serve`` over a fresh local warehouse (``tmp_path / "warehouse"``);
    ``.url`` is its endpoint, ``.warehouse`` the root. For other warehouses use RestServer."""
    with RestServer(str(tmp_path / "warehouse")) as server:
        yield server


@pytest.fixture(scope="session")
def localstack_server() -> Iterator[LocalStackServer]:
    """LocalStack S3 in host mode; skipped when .venv-localstack is missing."""
    python = localstack_python()
    if python is None:
        pytest.skip("LocalStack host mode needs .venv-localstack: run `make localstack-setup`")
    with LocalStackServer(python) as server:
        yield server


@pytest.fixture(scope="session")
def localstack_endpoint(localstack_server: LocalStackServer) -> str:
    return localstack_server.url


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone master and two one-core workers on 127.0.0.1, from the pyspark
    package; ``.master_url`` for a session (see ``spark_cluster.cluster_session``). One per test
    process: the modules that use it are one xdist group ("spark-cluster", tests/conftest.py),
    each module's session an application of its own (its executors end with it). Its JVMs
    (daemons, executors) run C1 only (``QUICK_JVM``)."""
    pytest.importorskip("pyspark")
    with SparkCluster(tmp_path_factory.mktemp("spark-cluster"), java_options=QUICK_JVM) as cluster:
        yield cluster


def s3_storage_options(endpoint: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "s3.path-style-access": "true",
    }


def unique_bucket_name(prefix: str = "test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


@pytest.fixture
async def aws_clients_closed(anyio_backend: str) -> AsyncIterator[None]:
    """Close the loop's shared aiobotocore clients (S3, DynamoDB) when the test ends, so no
    "Unclosed client session" warnings are left for interpreter exit."""
    yield
    from aioiceberg.runtime import close_all_clients

    await close_all_clients()
