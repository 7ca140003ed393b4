"""Shared test configuration. Server fixtures (moto, proxy, LocalStack) live in tests/servers/."""

from __future__ import annotations

import pytest

# Modules that start a JVM (Spark, the Java Iceberg peer) or run a benchmark script in a child
# process: marked slow, so ``pytest -m "not slow"`` is the quick loop while ``make test`` (and
# CI) runs everything.
SLOW_MODULES = ("test_spark", "test_java", "_benchmark")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(part in item.path.stem for part in SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


pytest_plugins = ["servers.plugin"]
