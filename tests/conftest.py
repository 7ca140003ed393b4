"""Shared test configuration. Server fixtures (moto, proxy, LocalStack) live in tests/servers/."""

from __future__ import annotations

import time
from collections import defaultdict
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
        for prefix, group in GROUPS.items():
            declared = {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}
            if item.nodeid.startswith(prefix) and declared != {group}:
                raise pytest.UsageError(f"{item.nodeid}: tests in {prefix} are xdist_group({group!r})")


def _start_rank(item: pytest.Item) -> int:
    return next(
        (i for i, prefix in enumerate(START_FIRST) if item.nodeid.startswith(prefix)), len(START_FIRST)
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``, every test marked ``xdist_group(name)`` runs on one worker,
    and every other module runs whole on one worker, in collection order (longest first).

    xdist 3.8 tags grouped tests by assigning ``item._nodeid``, which pytest 9 no longer reads,
    so its own grouping silently does nothing and each worker starts its own Java peer (two
    JVMs on two cores). Grouping here needs only node ids: the groups are the folders and
    modules of ``GROUPS``, which all carry ``pytestmark = pytest.mark.xdist_group(name)``
    (tests/java/ -> "java").
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
            return _unit_of(nodeid)

    return FolderGroups(config, log)


def _unit_of(nodeid: str) -> str:
    """The scheduling unit of a test: its folder's or module's xdist group, or else its module."""
    for prefix, group in GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        if not hasattr(config, "workerinput"):  # the controller: it sees every worker's reports
            config.pluginmanager.register(WorkerTimes(), "worker-times")


class WorkerTimes:
    """Under xdist, each worker's busy time and when its last test ended, and the longest units:
    the summary shows whether one unit (the Java group) is the run's critical path and how long
    a worker sat idle at the end, which a shorter test elsewhere cannot win back."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.busy: dict[str, float] = defaultdict(float)
        self.last: dict[str, float] = {}
        self.units: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        if node is None:
            return
        worker = str(node.gateway.id)
        self.busy[worker] += report.duration
        self.last[worker] = time.monotonic() - self.start
        self.units[_unit_of(report.nodeid)] += report.duration

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.busy:
            return
        terminalreporter.write_sep("=", "xdist workers")
        for worker in sorted(self.busy):
            terminalreporter.write_line(
                f"{worker}: busy {self.busy[worker]:.0f}s, last test ended at {self.last[worker]:.0f}s"
            )
        longest = sorted(self.units.items(), key=lambda unit: -unit[1])[:10]
        terminalreporter.write_line("longest units: " + ", ".join(f"{u} {s:.0f}s" for u, s in longest))


# test folder or module -> the xdist group its tests declare (checked at collection). The
# cluster's modules share one standalone cluster (a session fixture: three JVMs started once).
GROUPS = {
    "tests/java/": "java",
    "tests/spark/test_spark_cluster.py": "spark-cluster",
    "tests/spark/test_spark_actions_cluster.py": "spark-cluster",
}

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
