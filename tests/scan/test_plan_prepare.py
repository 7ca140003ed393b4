"""A cold plan on a remote store builds its evaluators (manifest choice, pruning, residuals)
in a worker thread while its manifest list is in flight. That changes nothing a plan gives:
the same tasks, residuals and metrics as a plan on a local store, which does not prepare;
the evaluators it reads are the ones prepared; and a plan ended early, or repeated, leaves
no thread of its own behind."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from aioiceberg.io.memory import MemoryFileIO
from aioiceberg.io.memory_objects import MemoryObjects
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, filters

pytestmark = pytest.mark.anyio

MANIFESTS, ENTRIES = 300, 4  # a list long enough to be read columnar and chosen in bulk


class _RemoteMemoryIO(MemoryFileIO):
    """An in-memory store that says its reads cross a network (plans prepare on such stores)."""

    remote = True


def _tasks(tasks: list[Any]) -> list[tuple[str, str, int]]:
    return sorted((t.file.file_path, repr(t.residual), t.file.spec_id) for t in tasks)  # in any order


def _counts(metrics: Any) -> dict[str, Any]:
    keep = (
        "manifests_total",
        "manifests_read",
        "manifests_skipped_by_summaries",
        "entries_read",
        "entries_skipped_by_partition",
        "entries_skipped_by_metrics",
        "tasks",
    )
    return {k: v for k, v in metrics.as_dict().items() if k in keep}


async def _stores() -> tuple[MemoryFileIO, MemoryFileIO, TableMetadata]:
    """A local and a remote view of one table, written once."""
    objects = MemoryObjects()
    local = MemoryFileIO(objects).bind_runtime(default_runtime())
    remote = _RemoteMemoryIO(objects).bind_runtime(default_runtime())
    meta = await build_table(local, "memory://warehouse/t", MANIFESTS, ENTRIES)
    return local, remote, parse_table_metadata(await local.read(meta), meta)


def _scan(io: MemoryFileIO, md: TableMetadata, row_filter: str) -> TableScan:
    """A scan whose plans are cold: caches of its own."""
    return TableScan(io, md, row_filter, cache=ManifestCache(), manifest_list_cache=ManifestListCache())


async def _plan(io: MemoryFileIO, md: TableMetadata, row_filter: str) -> tuple[list[Any], Any, Any]:
    scan = _scan(io, md, row_filter)
    tasks = [t async for t in scan.plan_files()]
    return tasks, scan.metrics, scan.planner


@pytest.mark.parametrize("name", ["none", "day_1pct", "id_eq", "metrics_only"])
async def test_a_prepared_plan_gives_what_an_unprepared_one_does(name: str) -> None:
    row_filter = filters(MANIFESTS, ENTRIES)[name]
    local, remote, md = await _stores()
    want, want_metrics, _ = await _plan(local, md, row_filter)
    got, got_metrics, planner = await _plan(remote, md, row_filter)
    assert _tasks(got) == _tasks(want) and want
    assert _counts(got_metrics) == _counts(want_metrics)
    if row_filter:
        # what the plan read is what was prepared: one evaluator per spec, built once
        assert set(planner.chooser._summary_filters_by_spec) == set(planner.specs)
        assert set(planner.tasks._residual_keys) == set(planner.specs)
        assert "_evaluators" in planner.prune_context.__dict__


async def test_a_plan_ended_early_or_repeated_leaves_no_thread_behind() -> None:
    row_filter = filters(MANIFESTS, ENTRIES)["day_1pct"]
    _, remote, md = await _stores()
    await _plan(remote, md, row_filter)  # the process's pools (anyio's, the decoders') exist from here
    before = {t.ident for t in threading.enumerate()}
    for _ in range(3):
        scan = TableScan(
            remote, md, row_filter, cache=ManifestCache(), manifest_list_cache=ManifestListCache()
        )
        async for _task in scan.plan_files():
            break  # ended at the first task: the stages, the prepare step included, are over
        tasks, _, _ = await _plan(remote, md, row_filter)
        assert len(tasks) == 3 * ENTRIES
    left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert all(t.name.startswith("AnyIO worker") for t in left), left  # pooled, reused
