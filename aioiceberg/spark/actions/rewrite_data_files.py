"""Compaction on Spark executors: groups planned on the driver, each rewritten by one task.

The driver plans with the single-process planner (``maintenance.compaction.plan_compaction``:
options and file groups), ships each group as the JSON of its file scan tasks to one Spark
task, and commits what the tasks wrote with the single-process commit
(``CompactionPlan.commit`` through ``Table.commit_change``: one ``replace`` snapshot, or
one per batch of groups with ``partial-progress.enabled``). An executor task reads its
group with aioiceberg's reader, orders the rows (sort, z-order), writes them with
aioiceberg's writer and returns the new data files as JSON. Where the job runs and what a
failure leaves: ``group_tasks``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.expressions.tree import Expression
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.compaction import (
    GroupJob,
    RewriteDataFilesResult,
    RewrittenGroup,
    plan_compaction,
    rewrite_group,
)
from aioiceberg.maintenance.compaction_groups import FileGroup
from aioiceberg.spark.actions.group_tasks import GroupCodec, open_for_rewrite, rewrite_and_commit
from aioiceberg.spec.scan_tasks import (
    content_file_from_json,
    content_file_to_json,
    file_scan_task_from_json,
    file_scan_task_to_json,
)

__all__ = ["rewrite_data_files"]


class _FileGroups(GroupCodec[GroupJob, FileGroup, RewrittenGroup]):
    """A file group travels as its file scan tasks' JSON, the new data files come back."""

    def to_json(self, job: GroupJob, group: FileGroup) -> str:
        return json.dumps(
            {
                "tasks": [file_scan_task_to_json(t) for t in group.tasks],
                # not in the task JSON; v3 lineage needs them
                "sequence-numbers": [t.data_sequence_number for t in group.tasks],
            },
            separators=(",", ":"),
        )

    async def rewrite(self, io: FileIO, job: GroupJob, text: str, task_id: int) -> dict[str, Any]:
        obj = json.loads(text)
        tasks = [
            dataclasses.replace(file_scan_task_from_json(t), data_sequence_number=seq)
            for t, seq in zip(obj["tasks"], obj["sequence-numbers"], strict=True)
        ]
        files = await rewrite_group(io, job, tasks, task_id=task_id, cpu_workers=1)
        return {"files": [content_file_to_json(f, job.spec, job.rows_schema) for f in files]}

    def outcome(self, job: GroupJob, group: FileGroup, reply: Mapping[str, Any]) -> RewrittenGroup:
        specs = {job.spec.spec_id: job.spec}
        return RewrittenGroup(
            group, [content_file_from_json(f, specs, job.rows_schema) for f in reply["files"]]
        )

    def failed(self, group: FileGroup, error: str) -> RewrittenGroup:
        return RewrittenGroup(group, [], error)


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
    aio = open_for_rewrite(spark, table, storage_options, lock)
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
    return rewrite_and_commit(spark, aio, plan, _FileGroups(), storage_options)
