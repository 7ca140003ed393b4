"""Position delete file rewrite on Spark executors: groups planned on the driver, one task each.

The driver plans with the single-process planner (``maintenance.position_deletes``:
``plan_position_delete_rewrite``, options and groups), ships each group as JSON (its
delete files, the live data files they may name, its sequence number) to one Spark task,
and commits what the tasks wrote with the single-process commit (``PositionDeletePlan.commit``
through ``Table.commit_change``). The task reads the group's delete rows with aioiceberg's
reader, drops the dangling ones, writes the rest with aioiceberg's writer and returns the
new delete files as JSON. On v3 the groups turn v2 position delete files into deletion
vectors: a group also carries the vectors its data files had, the task merges them into
the new ones with the same ``rewrite_delete_group`` and says which it merged. Where the
job runs and what a failure leaves: ``group_tasks``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.position_deletes import (
    DeleteFileGroup,
    DeleteGroupJob,
    RewritePositionDeletesResult,
    RewrittenDeleteGroup,
    plan_position_delete_rewrite,
    rewrite_delete_group,
)
from aioiceberg.spark.actions.group_tasks import GroupCodec, open_for_rewrite, rewrite_and_commit
from aioiceberg.spec.scan_tasks import content_file_from_json, content_file_to_json

__all__ = ["rewrite_position_delete_files"]


class _DeleteGroups(GroupCodec[DeleteGroupJob, DeleteFileGroup, RewrittenDeleteGroup]):
    """A group travels as its delete files, sequence number, the live data files its rows
    may name and (v3) their vectors; the new delete files, the dangling row count and the
    vectors merged (by index) come back."""

    def to_json(self, job: DeleteGroupJob, group: DeleteFileGroup) -> str:
        spec = job.specs[group.spec_id]
        return json.dumps(
            {
                "index": group.index,
                "spec-id": group.spec_id,
                "sequence-number": group.sequence_number,
                "files": [content_file_to_json(f, spec, job.schema) for f in group.files],
                "live-data-files": sorted(group.live_data_files),
                "to-vectors": group.to_vectors,
                "vectors": [content_file_to_json(f, spec, job.schema) for f in group.vectors],
            },
            separators=(",", ":"),
        )

    async def rewrite(self, io: FileIO, job: DeleteGroupJob, text: str, task_id: int) -> dict[str, Any]:
        obj = json.loads(text)
        files = tuple(content_file_from_json(f, job.specs, job.schema) for f in obj["files"])
        seq = obj["sequence-number"]
        group = DeleteFileGroup(
            index=int(obj["index"]),
            spec_id=int(obj["spec-id"]),
            partition=tuple(files[0].partition),
            files=files,
            sequence_number=int(seq) if seq is not None else None,
            live_data_files=frozenset(str(p) for p in obj["live-data-files"]),
            to_vectors=bool(obj.get("to-vectors", False)),
            vectors=tuple(content_file_from_json(f, job.specs, job.schema) for f in obj.get("vectors", ())),
        )
        done = await rewrite_delete_group(io, job, group, task_id=task_id)
        spec = job.specs[group.spec_id]
        return {
            "files": [content_file_to_json(f, spec, job.schema) for f in done.added],
            "dangling-rows": done.dangling_rows,
            "merged": [group.vectors.index(f) for f in done.merged],
        }

    def outcome(
        self, job: DeleteGroupJob, group: DeleteFileGroup, reply: Mapping[str, Any]
    ) -> RewrittenDeleteGroup:
        files = [content_file_from_json(f, job.specs, job.schema) for f in reply["files"]]
        merged = [group.vectors[int(i)] for i in reply.get("merged", ())]
        return RewrittenDeleteGroup(group, files, None, int(reply["dangling-rows"]), merged)

    def failed(self, group: DeleteFileGroup, error: str) -> RewrittenDeleteGroup:
        return RewrittenDeleteGroup(group, [], error)


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
    aio = open_for_rewrite(spark, table, storage_options, lock)
    plan = default_loop.run(plan_position_delete_rewrite(aio.io, aio.metadata, options))
    if plan is None:
        return RewritePositionDeletesResult()
    return rewrite_and_commit(spark, aio, plan, _DeleteGroups(), storage_options)
