"""File rewrites on Spark executors: groups planned on the driver, one Spark task each.

Compaction and the position delete rewrite plan and commit as in one process
(``maintenance.group_rewrite``); only the rewrite of their groups moves here. The driver
ships each group as JSON to one Spark task (a ``GroupCodec`` says how: the group's JSON,
the task's rewrite, its result back), collects one result per group and commits through
``Table.commit_change``. The Spark job runs in the caller's thread, so its job group and
scheduler pool apply; storage options reach the tasks as they reach the data source's.

Failures: a task lost with its executor is retried by Spark (``spark.task.maxFailures``);
every attempt names its files with the job's write id and its task attempt id, and the
files no commit kept are removed afterwards (a straggling attempt may still leave some,
which orphan removal deletes). A group whose rewrite raises is reported by its task (its
files deleted there) and, as in one process, fails the whole rewrite without partial
progress or is left out with it. Spark returns one result per task, so no group is
committed twice.
"""

from __future__ import annotations

import functools
import json
import pickle
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import aioiceberg.table
from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.errors import CommitConflictError, ReadOnlyTableError, RewriteFailedError
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.group_rewrite import GroupOutcome, GroupRewriteResult
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.workers import check_workers
from aioiceberg.write.location_provider import LocationProvider

__all__ = ["GroupCodec", "open_for_rewrite", "rewrite_and_commit"]


class Job(Protocol):
    """What every group's rewrite shares: where the table is, its properties, the write id
    that names every file the rewrite writes."""

    @property
    def location(self) -> str: ...

    @property
    def properties(self) -> dict[str, str]: ...

    @property
    def write_id(self) -> str: ...


class Group(Protocol):
    @property
    def index(self) -> int: ...


J = TypeVar("J", bound=Job)
G = TypeVar("G", bound=Group)
R = TypeVar("R", bound=GroupOutcome[Any])
Res = TypeVar("Res", bound=GroupRewriteResult)


class GroupCodec(ABC, Generic[J, G, R]):
    """How one kind of rewrite's groups travel to their tasks and back (pickled by
    reference: a codec holds no state)."""

    @abstractmethod
    def to_json(self, job: J, group: G) -> str:
        """The group as its task gets it (driver)."""

    @abstractmethod
    async def rewrite(self, io: FileIO, job: J, text: str, task_id: int) -> dict[str, Any]:
        """Rewrite the group ``text`` names; what the driver needs of the outcome, as JSON
        values (executor). ``task_id`` names the files."""

    @abstractmethod
    def outcome(self, job: J, group: G, reply: Mapping[str, Any]) -> R:
        """The group's outcome from its task's reply (driver)."""

    @abstractmethod
    def failed(self, group: G, error: str) -> R:
        """The outcome of a group whose rewrite failed."""


J_co = TypeVar("J_co", bound=Job, covariant=True)
G_co = TypeVar("G_co", bound=Group, covariant=True)
R_contra = TypeVar("R_contra", bound=GroupOutcome[Any], contravariant=True)
Res_co = TypeVar("Res_co", bound=GroupRewriteResult, covariant=True)


class Plan(Protocol[J_co, G_co, R_contra, Res_co]):
    """A planned rewrite: its job and groups, and its commit of what they wrote."""

    @property
    def job(self) -> J_co: ...

    @property
    def groups(self) -> Sequence[G_co]: ...

    def commit(
        self, io: FileIO, commit: Callable[[Any], Awaitable[None]], rewritten: Sequence[R_contra]
    ) -> Coroutine[Any, Any, Res_co]: ...


@dataclass(frozen=True)
class _TaskJob:
    """What every task of one rewrite gets: the job (pickled: schemas, specs and options
    travel as the objects they are), the codec and the storage options."""

    location: str
    storage_options: dict[str, str]
    job: bytes
    codec: GroupCodec[Any, Any, Any]


def _run_partition(task_job: _TaskJob, items: Iterable[tuple[int, str]]) -> Iterator[str]:
    """The body of one Spark task: rewrite its group(s), yield each result as JSON."""
    from pyspark import TaskContext  # pyspark: optional (the spark extra)

    context = TaskContext.get()
    # the task attempt id names the files: a retried attempt never overwrites a lost one's
    task_id = context.taskAttemptId() if context is not None else 0
    job = pickle.loads(task_job.job)
    for index, text in items:
        try:
            io = resolve_io(task_job.location, task_job.storage_options or None, runtime=default_runtime())
            reply = {"index": index, **default_loop.run(task_job.codec.rewrite(io, job, text, task_id))}
        except Exception as e:  # reported to the driver, which leaves the group out or fails the rewrite
            reply = {"index": index, "error": f"{type(e).__name__}: {e}"}
        yield json.dumps(reply, separators=(",", ":"))


def _collected(job: J, groups: Sequence[G], codec: GroupCodec[J, G, R], results: Iterable[str]) -> list[R]:
    """The tasks' results, one per group (a group no task answered for counts as failed)."""
    by_index = {g.index: g for g in groups}
    out: dict[int, R] = {}
    for text in results:
        reply = json.loads(text)
        group = by_index[int(reply["index"])]
        if group.index in out:
            continue  # Spark returns one result per task: never two, but never commit one twice
        if "error" in reply:
            out[group.index] = codec.failed(group, str(reply["error"]))
        else:
            out[group.index] = codec.outcome(job, group, reply)
    for g in groups:
        out.setdefault(g.index, codec.failed(g, "no result came back from its task"))
    return [out[g.index] for g in groups]


def _rewrite_on_executors(
    spark: Any, job: J, groups: Sequence[G], codec: GroupCodec[J, G, R], storage_options: Mapping[str, str]
) -> list[R]:
    """One Spark task per group, run from the caller's thread (its job group applies)."""
    task_job = _TaskJob(job.location, dict(storage_options), pickle.dumps(job), codec)
    items = [(g.index, codec.to_json(job, g)) for g in groups]
    rdd = spark.sparkContext.parallelize(items, len(items))
    results = rdd.mapPartitions(functools.partial(_run_partition, task_job)).collect()
    return _collected(job, groups, codec, results)


async def _remove_attempt_files(io: FileIO, job: Job, kept: set[str]) -> list[str]:
    """Files named with the job's write id that no commit kept: those of lost attempts."""
    data_path = LocationProvider(job.location, job.properties).data_path
    stale = [o.location async for o in io.list(f"{data_path}/") if job.write_id in o.location]
    doomed = sorted(p for p in stale if p not in kept)
    await delete_quietly(io, doomed)
    return doomed


def open_for_rewrite(
    spark: Any, table: str | sync.Table, storage_options: Mapping[str, str] | None, lock: str | None
) -> aioiceberg.table.Table:
    """The table to rewrite (a location, or a blocking table), refused when read-only."""
    check_workers(spark)
    opened = sync.load_table(table, storage_options or None, lock) if isinstance(table, str) else table
    aio = opened.aio
    if aio.read_only:
        raise ReadOnlyTableError(aio.read_only_reason or f"{aio.metadata_location} is open read-only")
    return aio


def rewrite_and_commit(
    spark: Any,
    table: aioiceberg.table.Table,
    plan: Plan[J, G, R, Res],
    codec: GroupCodec[J, G, R],
    storage_options: Mapping[str, str] | None,
) -> Res:
    """Rewrite ``plan``'s groups on executors, commit them through ``table``, and remove
    the files of attempts no commit kept (all of the job's when nothing was committed)."""
    rewritten = _rewrite_on_executors(spark, plan.job, plan.groups, codec, storage_options or {})
    try:
        result = default_loop.run(plan.commit(table.io, table.commit_change, rewritten))
    except (RewriteFailedError, CommitConflictError):  # nothing committed: every file is left over
        default_loop.run(_remove_attempt_files(table.io, plan.job, set()))
        raise
    default_loop.run(_remove_attempt_files(table.io, plan.job, set(result.added_files)))
    return result
