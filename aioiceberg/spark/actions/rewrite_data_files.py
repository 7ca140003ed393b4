"""Compaction on Spark executors: groups planned on the driver, each rewritten by one task.

The driver plans with the single-process planner (``maintenance.compaction.plan_compaction``:
options and file groups), ships each group as the JSON of its file scan tasks to one Spark
task, and commits what the tasks wrote with the single-process commit
(``CompactionPlan.commit`` through ``Table.commit_change``: one ``replace`` snapshot, or
one per batch of groups with ``partial-progress.enabled``). The Spark job runs in the
caller's thread, so its job group and scheduler pool apply. An executor task reads its
group with aioiceberg's reader, orders the rows (sort, z-order), writes them with
aioiceberg's writer and returns the new data files as JSON; storage options reach it as
they reach the data source's tasks.

Failures: a task lost with its executor is retried by Spark (``spark.task.maxFailures``);
the lost attempt's files are named with the job's write id and are removed after the
commit (a straggling attempt may still leave some, which orphan removal deletes). A
group whose rewrite raises is reported by its task (its files deleted there) and, as in
one process, fails the whole rewrite without partial progress or is left out with it.
Spark returns one result per task, so no group is committed twice.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.errors import ReadOnlyTableError, RewriteFailedError
from aioiceberg.expressions.tree import Expression
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.compaction import (
    CompactionPlan,
    GroupJob,
    RewriteDataFilesResult,
    RewrittenGroup,
    plan_compaction,
    rewrite_group,
)
from aioiceberg.maintenance.compaction_groups import FileGroup
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.workers import check_workers
from aioiceberg.spec.scan_tasks import (
    content_file_from_json,
    content_file_to_json,
    file_scan_task_from_json,
    file_scan_task_to_json,
)
from aioiceberg.write.location_provider import LocationProvider

__all__ = ["rewrite_data_files"]


@dataclass(frozen=True)
class _ExecutorJob:
    """What every task of one compaction gets: the group job (pickled: schemas, spec, options
    travel as the objects they are) and the storage options."""

    location: str
    storage_options: dict[str, str]
    group_job: bytes

    def job(self) -> GroupJob:
        job = pickle.loads(self.group_job)
        assert isinstance(job, GroupJob)
        return job


# one group as a task sees it: (group index, task JSON, data sequence numbers)
_Item = tuple[int, list[str], list[int | None]]


def _item(group: FileGroup) -> _Item:
    return (
        group.index,
        [json.dumps(file_scan_task_to_json(t), separators=(",", ":")) for t in group.tasks],
        [t.data_sequence_number for t in group.tasks],  # not in the task JSON; v3 lineage needs them
    )


def _rewrite_one(executor_job: _ExecutorJob, job: GroupJob, item: _Item, task_id: int) -> dict[str, Any]:
    index, tasks_json, sequence_numbers = item
    try:
        tasks = [
            dataclasses.replace(file_scan_task_from_json(json.loads(text)), data_sequence_number=seq)
            for text, seq in zip(tasks_json, sequence_numbers, strict=True)
        ]
        io = resolve_io(
            executor_job.location, executor_job.storage_options or None, runtime=default_runtime()
        )
        files = default_loop.run(rewrite_group(io, job, tasks, task_id=task_id, cpu_workers=1))
    except Exception as e:  # reported to the driver, which leaves the group out or fails the rewrite
        return {"index": index, "error": f"{type(e).__name__}: {e}"}
    return {"index": index, "files": [content_file_to_json(f, job.spec, job.rows_schema) for f in files]}


def _rewrite_partition(executor_job: _ExecutorJob, items: Iterable[_Item]) -> Iterator[str]:
    """The body of one Spark task: rewrite its group(s), yield each result as JSON."""
    from pyspark import TaskContext  # pyspark: optional (the spark extra)

    context = TaskContext.get()
    # the task attempt id names the files: a retried attempt never overwrites a lost one's
    task_id = context.taskAttemptId() if context is not None else 0
    job = executor_job.job()
    for item in items:
        yield json.dumps(_rewrite_one(executor_job, job, item, task_id), separators=(",", ":"))


def _collected(job: GroupJob, groups: Sequence[FileGroup], results: Iterable[str]) -> list[RewrittenGroup]:
    """The tasks' results, one per group (a group no task answered for counts as failed)."""
    by_index = {g.index: g for g in groups}
    out: dict[int, RewrittenGroup] = {}
    for text in results:
        obj = json.loads(text)
        group = by_index[int(obj["index"])]
        if group.index in out:
            continue  # Spark returns one result per task: never two, but never commit one twice
        if "error" in obj:
            out[group.index] = RewrittenGroup(group, [], str(obj["error"]))
            continue
        files = [
            content_file_from_json(f, {job.spec.spec_id: job.spec}, job.rows_schema) for f in obj["files"]
        ]
        out[group.index] = RewrittenGroup(group, files)
    for g in groups:
        out.setdefault(g.index, RewrittenGroup(g, [], "no result came back from its task"))
    return [out[g.index] for g in groups]


def _rewrite_on_executors(
    spark: Any, plan: CompactionPlan, storage_options: Mapping[str, str] | None
) -> list[RewrittenGroup]:
    """One Spark task per group, run from the caller's thread (its job group applies)."""
    executor_job = _ExecutorJob(plan.job.location, dict(storage_options or {}), pickle.dumps(plan.job))
    items = [_item(g) for g in plan.groups]
    rdd = spark.sparkContext.parallelize(items, len(items))
    results = rdd.mapPartitions(functools.partial(_rewrite_partition, executor_job)).collect()
    return _collected(plan.job, plan.groups, results)


async def _remove_attempt_files(io: FileIO, job: GroupJob, kept: set[str]) -> list[str]:
    """Files named with the job's write id that no commit kept: those of lost attempts."""
    data_path = LocationProvider(job.location, job.properties).data_path
    stale = [o.location async for o in io.list(f"{data_path}/") if job.write_id in o.location]
    doomed = sorted(p for p in stale if p not in kept)
    await delete_quietly(io, doomed)
    return doomed


def rewrite_data_files(
    spark: Any,
    table: str | sync.Table,
    *,
    strategy: str | None = None,
    sort_order: str | Sequence[str] | None = None,
    zorder_by: Sequence[str] | None = None,
    filter: str | Expression | None = None,
    options: Mapping[str, str] | None = None,
    target_file_size: int | None = None,
    min_input_files: int = 2,
    storage_options: Mapping[str, str] | None = None,
    lock: str | None = None,
) -> RewriteDataFilesResult:
    """Compact ``table`` (a location, or a blocking table) with one Spark task per file group.

    ``strategy``, ``sort_order``, ``zorder_by``, ``filter``, ``options`` (Java's
    ``rewrite_data_files`` option names) as ``Table.rewrite_data_files``;
    ``storage_options`` reach the executors (and open ``table`` when it is a location).
    """
    check_workers(spark)
    opened = sync.load_table(table, storage_options or None, lock) if isinstance(table, str) else table
    aio = opened.aio
    if aio.read_only:
        raise ReadOnlyTableError(aio.read_only_reason or f"{aio.metadata_location} is open read-only")
    plan = default_loop.run(
        plan_compaction(
            aio.io,
            aio.metadata,
            target_file_size,
            filter,
            min_input_files=min_input_files,
            strategy=strategy,
            sort_order=sort_order,
            zorder_by=zorder_by,
            options=options,
        )
    )
    if plan is None:
        return RewriteDataFilesResult()
    rewritten = _rewrite_on_executors(spark, plan, storage_options)
    try:
        result = default_loop.run(plan.commit(aio.io, aio.commit_change, rewritten))
    except RewriteFailedError:  # nothing committed: every file of the job is left over
        default_loop.run(_remove_attempt_files(aio.io, plan.job, set()))
        raise
    default_loop.run(_remove_attempt_files(aio.io, plan.job, set(result.added_files)))
    return result
