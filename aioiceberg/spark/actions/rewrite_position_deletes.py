"""Position delete file rewrite on Spark executors: groups planned on the driver, one task each.

The driver runs ``Table.rewrite_position_delete_files`` (``maintenance.position_deletes``:
the single-process options, groups and commit) with a rewriter that ships each group as
JSON (its delete files, the live data files they may name, its sequence number) to one
Spark task. The task reads the group's delete rows with aioiceberg's reader, drops the
dangling ones, writes the rest with aioiceberg's writer and returns the new delete files
as JSON.

Failures as ``rewrite_data_files``: a task lost with its executor is retried by Spark; the
files of every attempt carry the job's write id, and those no commit kept are removed
afterwards. A group whose rewrite raises fails the whole rewrite (nothing committed)
without ``partial-progress.enabled`` and is left out with it.
"""

from __future__ import annotations

import functools
import json
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.errors import CommitConflictError, RewriteFailedError
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.position_deletes import (
    DeleteFileGroup,
    DeleteGroupJob,
    RewritePositionDeletesResult,
    RewrittenDeleteGroup,
    rewrite_delete_group,
)
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.workers import check_workers
from aioiceberg.spec.scan_tasks import content_file_from_json, content_file_to_json
from aioiceberg.write.location_provider import LocationProvider

__all__ = ["rewrite_position_delete_files"]


@dataclass(frozen=True)
class _ExecutorJob:
    """What every task gets: the group job (pickled) and the storage options."""

    location: str
    storage_options: dict[str, str]
    group_job: bytes

    def job(self) -> DeleteGroupJob:
        job = pickle.loads(self.group_job)
        assert isinstance(job, DeleteGroupJob)
        return job


def _group_json(job: DeleteGroupJob, group: DeleteFileGroup) -> str:
    spec = job.specs[group.spec_id]
    return json.dumps(
        {
            "index": group.index,
            "spec-id": group.spec_id,
            "sequence-number": group.sequence_number,
            "files": [content_file_to_json(f, spec, job.schema) for f in group.files],
            "live-data-files": sorted(group.live_data_files),
        },
        separators=(",", ":"),
    )


def _group_from_json(job: DeleteGroupJob, text: str) -> DeleteFileGroup:
    obj = json.loads(text)
    files = tuple(content_file_from_json(f, job.specs, job.schema) for f in obj["files"])
    seq = obj["sequence-number"]
    return DeleteFileGroup(
        index=int(obj["index"]),
        spec_id=int(obj["spec-id"]),
        partition=tuple(files[0].partition),
        files=files,
        sequence_number=int(seq) if seq is not None else None,
        live_data_files=frozenset(str(p) for p in obj["live-data-files"]),
    )


def _rewrite_one(executor_job: _ExecutorJob, job: DeleteGroupJob, text: str, task_id: int) -> dict[str, Any]:
    index = int(json.loads(text)["index"])
    try:
        group = _group_from_json(job, text)
        io = resolve_io(
            executor_job.location, executor_job.storage_options or None, runtime=default_runtime()
        )
        done = default_loop.run(rewrite_delete_group(io, job, group, task_id=task_id))
    except Exception as e:  # reported to the driver, which leaves the group out or fails the rewrite
        return {"index": index, "error": f"{type(e).__name__}: {e}"}
    spec = job.specs[group.spec_id]
    return {
        "index": group.index,
        "files": [content_file_to_json(f, spec, job.schema) for f in done.added],
        "dangling-rows": done.dangling_rows,
    }


def _rewrite_partition(executor_job: _ExecutorJob, items: Iterable[str]) -> Iterator[str]:
    """The body of one Spark task: rewrite its group(s), yield each result as JSON."""
    from pyspark import TaskContext  # pyspark: optional (the spark extra)

    context = TaskContext.get()
    # the task attempt id names the files: a retried attempt never overwrites a lost one's
    task_id = context.taskAttemptId() if context is not None else 0
    job = executor_job.job()
    for text in items:
        yield json.dumps(_rewrite_one(executor_job, job, text, task_id), separators=(",", ":"))


def _collected(
    job: DeleteGroupJob, groups: Sequence[DeleteFileGroup], results: Iterable[str]
) -> list[RewrittenDeleteGroup]:
    """The tasks' results, one per group (a group no task answered for counts as failed)."""
    by_index = {g.index: g for g in groups}
    out: dict[int, RewrittenDeleteGroup] = {}
    for text in results:
        obj = json.loads(text)
        group = by_index[int(obj["index"])]
        if group.index in out:
            continue  # never commit a group twice
        if "error" in obj:
            out[group.index] = RewrittenDeleteGroup(group, [], str(obj["error"]))
            continue
        files = [content_file_from_json(f, job.specs, job.schema) for f in obj["files"]]
        out[group.index] = RewrittenDeleteGroup(group, files, None, int(obj["dangling-rows"]))
    for g in groups:
        out.setdefault(g.index, RewrittenDeleteGroup(g, [], "no result came back from its task"))
    return [out[g.index] for g in groups]


class _ExecutorRewriter:
    """The rewrite's ``rewriter``: one Spark task per group; keeps the job, whose write id
    names every attempt's files."""

    def __init__(self, spark: Any, storage_options: Mapping[str, str] | None) -> None:
        self.spark = spark
        self.storage_options = dict(storage_options or {})
        self.job: DeleteGroupJob | None = None

    async def __call__(
        self, io: FileIO, job: DeleteGroupJob, groups: Sequence[DeleteFileGroup]
    ) -> list[RewrittenDeleteGroup]:
        self.job = job
        executor_job = _ExecutorJob(job.location, self.storage_options, pickle.dumps(job))
        items = [_group_json(job, g) for g in groups]

        def run() -> list[str]:
            rdd = self.spark.sparkContext.parallelize(items, len(items))
            return list(rdd.mapPartitions(functools.partial(_rewrite_partition, executor_job)).collect())

        return _collected(job, groups, await anyio.to_thread.run_sync(run))


async def _remove_attempt_files(io: FileIO, job: DeleteGroupJob, kept: set[str]) -> list[str]:
    """Files named with the job's write id that no commit kept: those of lost attempts."""
    data_path = LocationProvider(job.location, job.properties).data_path
    stale = [o.location async for o in io.list(f"{data_path}/") if job.write_id in o.location]
    doomed = sorted(p for p in stale if p not in kept)
    await delete_quietly(io, doomed)
    return doomed


def rewrite_position_delete_files(
    spark: Any,
    table: str | sync.Table,
    *,
    options: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    lock: str | None = None,
) -> RewritePositionDeletesResult:
    """Rewrite the position delete files of ``table`` (a location, or a blocking table) with
    one Spark task per group; ``options`` as ``Table.rewrite_position_delete_files`` (Java's
    names), ``storage_options`` reach the executors (and open ``table`` when a location)."""
    check_workers(spark)
    opened = sync.load_table(table, storage_options or None, lock) if isinstance(table, str) else table
    aio = opened.aio
    rewriter = _ExecutorRewriter(spark, storage_options)
    try:
        result = default_loop.run(aio.rewrite_position_delete_files(options, rewriter=rewriter))
    except (RewriteFailedError, CommitConflictError):  # nothing committed: every file is left over
        if rewriter.job is not None:
            default_loop.run(_remove_attempt_files(aio.io, rewriter.job, set()))
        raise
    if rewriter.job is not None:
        default_loop.run(_remove_attempt_files(aio.io, rewriter.job, set(result.added_files)))
    return result
