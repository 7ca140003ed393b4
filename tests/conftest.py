"""Shared test configuration. Server fixtures (moto, proxy, LocalStack) live in tests/servers/."""

from __future__ import annotations

from typing import Any

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
        for folder, group in GROUP_FOLDERS.items():
            declared = {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}
            if item.nodeid.startswith(folder) and declared != {group}:
                raise pytest.UsageError(f"{item.nodeid}: tests in {folder} are xdist_group({group!r})")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, every test marked ``xdist_group(name)`` runs on one worker.

    xdist 3.8 tags grouped tests by assigning ``item._nodeid``, which pytest 9 no longer reads,
    so its own grouping silently does nothing and each worker starts its own Java peer (two
    JVMs on two cores). Grouping here needs only node ids: the groups are the folders whose
    modules all carry ``pytestmark = pytest.mark.xdist_group(name)`` (tests/java/ -> "java").
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # pytest-xdist: the test extra

    class FolderGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for folder, group in GROUP_FOLDERS.items():
                if nodeid.startswith(folder):
                    return group
            return nodeid

    return FolderGroups(config, log)


# test folder -> the xdist group every module in it declares (checked at collection)
GROUP_FOLDERS = {"tests/java/": "java"}

pytest_plugins = ["servers.plugin"]
