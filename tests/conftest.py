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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # longest first (a stable sort: each module stays whole and in order), so that under
    # xdist the two workers finish together instead of one running a long module at the end
    items.sort(key=_start_rank)
    for item in items:
        if any(part in item.path.stem for part in SLOW_MODULES):
            item.add_marker(pytest.mark.slow)
        for folder, group in GROUP_FOLDERS.items():
            declared = {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}
            if item.nodeid.startswith(folder) and declared != {group}:
                raise pytest.UsageError(f"{item.nodeid}: tests in {folder} are xdist_group({group!r})")


def _start_rank(item: pytest.Item) -> int:
    return next(
        (i for i, prefix in enumerate(START_FIRST) if item.nodeid.startswith(prefix)), len(START_FIRST)
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, every test marked ``xdist_group(name)`` runs on one worker,
    and every other module runs whole on one worker, in collection order (longest first).

    xdist 3.8 tags grouped tests by assigning ``item._nodeid``, which pytest 9 no longer reads,
    so its own grouping silently does nothing and each worker starts its own Java peer (two
    JVMs on two cores). Grouping here needs only node ids: the groups are the folders whose
    modules all carry ``pytestmark = pytest.mark.xdist_group(name)`` (tests/java/ -> "java").
    A module is a unit because its module-scoped set-ups (servers, Spark sessions, tables)
    would otherwise run once on each worker.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # pytest-xdist: the test extra

    # xdist would reorder the units by their number of tests; the collection's order (longest
    # first, see START_FIRST) balances the two workers better
    config.option.loadscopereorder = False

    class FolderGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            for folder, group in GROUP_FOLDERS.items():
                if nodeid.startswith(folder):
                    return group
            return nodeid.split("::", 1)[0]

    return FolderGroups(config, log)


# test folder -> the xdist group every module in it declares (checked at collection)
GROUP_FOLDERS = {"tests/java/": "java"}

# Node id prefixes of the longest units, longest first (measured with --durations); the rest
# follow in collection order. The Java group is the longest unit, so one worker starts it while
# the other takes these.
START_FIRST = (
    "tests/java/",
    "tests/spark/",
    "tests/commit/test_commit_protocols.py",
    "tests/scan/test_filter_differential.py",
    "tests/quality/test_docs_snippets.py",
    "tests/quality/test_examples.py",
    "tests/read/test_read_battery.py",
    "tests/bench/",
    "tests/commit/test_commit_crash.py",
    "tests/commit/test_commit_lease.py",
    "tests/read/test_read_files.py",
    "tests/scan/test_scan_planner.py",
    "tests/cli/test_cli.py",
)

pytest_plugins = ["servers.plugin"]
