"""Data file compaction: groups of files rewritten, committed as one (or several) ``replace``.

The groups come from ``compaction_groups`` (bin-pack, sort or z-order); the single-process
rewrite and the Spark action (``aioiceberg.spark.actions``) share the planning, the
rewriting of one group (``rewrite_group``) and the commit (``CompactionPlan.commit``):
the Spark action only runs ``rewrite_group`` on executors. What every group rewrite
shares (options, partial progress, the ``replace`` snapshot's checks) is in ``group_rewrite``.

Rows are read through the normal read path (so deletes, deletion vectors included, are
applied: the new files hold only live rows) and written through the normal write path; the
deletion vectors of the rewritten files (and on v3 the position delete files naming only
one of them) are dropped in the same snapshot (``commit/dangling_deletes.py``). The new
files carry the data sequence number of the snapshot the rewrite started from, as Java
does: equality deletes committed while the rewrite ran still apply to them. At every
commit attempt the rewritten files must still be live and no position delete committed
since the start may touch them; otherwise the commit fails with ``CommitConflictError``
and its new files are deleted.

A group whose rewrite fails: without partial progress nothing is committed (every new
file is deleted) and ``RewriteFailedError`` is raised; with ``partial-progress.enabled``
the group is left out (its files deleted) and named in the result, the others commit in
up to ``partial-progress.max-commits`` snapshots, a batch whose commit conflicts left out
the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from aioiceberg.commit.dangling_deletes import is_dangling
from aioiceberg.errors import CommitConflictError, IcebergError, UnsupportedError, ValidationError
from aioiceberg.expressions.tree import Expression
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.compaction_groups import (
    FileGroup,
    RewriteOptions,
    SortKey,
    order_rows,
    parse_sort_order,
    plan_groups,
    table_sort_keys,
)
from aioiceberg.maintenance.group_rewrite import (
    Attempt,
    GroupOutcome,
    GroupReplace,
    GroupRewriteResult,
    commit_groups,
    rewrite_here,
)
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import carried
from aioiceberg.read import read_to_table
from aioiceberg.scan import Planner, PlanOptions
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.row_lineage import LINEAGE_FIELDS, with_lineage
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_data_files

__all__ = [
    "CompactionArgs",
    "CompactionPlan",
    "GroupJob",
    "RewriteDataFilesChange",
    "RewriteDataFilesResult",
    "RewrittenGroup",
    "compact_data_files",
    "group_job",
    "plan_bins",
    "plan_file_groups",
    "rewrite_group",
    "rewrite_groups_here",
    "rewrite_options",
]

TARGET_FILE_SIZE = TableProperties.target_file_size.key


class RewriteDataFilesResult(GroupRewriteResult):
    """What a compaction committed (``GroupRewriteResult``)."""


class RewrittenGroup(GroupOutcome[FileGroup]):
    """A file group and the data files its rewrite wrote, or why the rewrite failed."""


@dataclass(frozen=True)
class GroupJob:
    """What rewriting any group of one compaction needs besides the group's tasks."""

    location: str
    schema: Schema
    rows_schema: Schema  # the table schema, with the row lineage columns from v3 on
    spec: PartitionSpec
    properties: dict[str, str]
    options: RewriteOptions
    write_id: str
    sort_order_id: int | None = None


class CompactionArgs(TypedDict, total=False):
    """How a compaction chooses and orders, as ``Table.rewrite_data_files`` takes them:
    ``strategy`` (binpack, sort, zorder), ``sort_order``, ``zorder_by``, ``options`` (Java's
    ``rewrite_data_files`` option names) and ``min_input_files``; see :func:`rewrite_options`."""

    min_input_files: int
    strategy: str | None
    sort_order: str | Sequence[str] | None
    zorder_by: Sequence[str] | None
    options: Mapping[str, str] | None


def plan_bins(
    tasks: Sequence[FileScanTask], target: int, min_input_files: int = 2
) -> list[list[FileScanTask]]:
    """Bin-pack groups of ``tasks`` (``plan_groups`` with the bin-pack strategy)."""
    opts = RewriteOptions(target, min_input_files=min_input_files, max_file_size_bytes=2**62)
    return [list(g.tasks) for g in plan_groups(tasks, opts)]


class RewriteDataFilesChange(GroupReplace):
    """Replace ``deleted`` data files by ``added`` ones in a ``replace`` snapshot on main."""

    summary_key = "rewritten-data-files"

    async def check_conflicts(self, walker: ManifestWalker, base: TableMetadata, parent: Snapshot) -> None:
        """Besides the start and the replaced files: no position delete committed since the
        start may touch the replaced files (their rows would be rewritten undeleted)."""
        since = self.since_start(base, parent)
        if not since:
            return
        paths = {f.file_path for f in self.deleted}
        partitions = {(f.spec_id, tuple(f.partition)) for f in self.deleted}
        for m in await walker.manifests(parent):
            if m.content != ManifestContent.DELETES or m.added_snapshot_id not in since:
                continue
            for e in await walker.entries(m):
                f = e.data_file
                if e.status is not ManifestEntryStatus.ADDED or f.content != DataFileContent.POSITION_DELETES:
                    continue
                if f.referenced_data_file in paths or (
                    f.referenced_data_file is None and (f.spec_id, tuple(f.partition)) in partitions
                ):
                    raise CommitConflictError(
                        f"position deletes {f.file_path} committed during the rewrite "
                        "may touch rewritten files"
                    )

    def added_entries(self, base: TableMetadata) -> list[ManifestEntry]:
        seq = self.start.sequence_number if base.format_version >= 2 else None
        return [ManifestEntry(ManifestEntryStatus.ADDED, None, seq, None, f) for f in self.added]

    async def other_manifest(self, at: Attempt, m: ManifestFile) -> ManifestFile:
        """The delete manifest ``m`` without the delete files of rewritten data files (those
        go to ``at.dropped``), or ``m`` itself when it holds none."""
        if at.base.format_version < 3 or not (m.has_added_files() or m.has_existing_files()):
            return m  # deletion vectors exist from v3 on
        doomed = {f.file_path for f in self.deleted}
        live = [e for e in await at.walker.entries(m) if e.is_live]
        gone = [e for e in live if is_dangling(e.data_file, doomed, at.base.format_version)]
        if not gone:
            return m
        at.dropped += [e.data_file for e in gone]
        drop, keep = ManifestEntryStatus.DELETED, ManifestEntryStatus.EXISTING
        ids = {id(e) for e in gone}
        entries = [carried(e, drop if id(e) in ids else keep) for e in live]
        return await at.sink.write(m.partition_spec_id, entries, ManifestContent.DELETES)


async def _tasks(
    io: FileIO, md: TableMetadata, row_filter: str | Expression | None, stats: bool = False
) -> list[FileScanTask]:
    # the lineage columns selected: tasks carry their data sequence numbers (rows keep them)
    lineage = tuple(f.name for f in LINEAGE_FIELDS) if md.format_version >= 3 else ()
    planner = Planner(
        io,
        md,
        row_filter=row_filter or "",
        selected_fields=("*", *lineage),
        snapshot_id=md.current_snapshot_id,
        options=PlanOptions(include_column_stats=stats),  # sort and z-order groups by the files' bounds
    )
    return [t async for t in planner.plan_files()]


def rewrite_options(
    md: TableMetadata,
    target_file_size: int | None = None,
    *,
    strategy: str | None = None,
    sort_order: str | Sequence[str] | None = None,
    zorder_by: Sequence[str] | None = None,
    options: Mapping[str, str] | None = None,
    min_input_files: int = 2,
    properties: Mapping[str, str] | None = None,
) -> RewriteOptions:
    """The rewrite's options: Java-named ``options`` over the arguments over the table's
    properties. ``strategy`` defaults to z-order when ``zorder_by`` (or a ``zorder(...)``
    sort order) is given, sort when ``sort_order`` is, bin-pack otherwise; the sort
    strategy without ``sort_order`` sorts by the table's sort order."""
    props = TableProperties({**md.properties, **(properties or {})})
    target = target_file_size or props.target_file_size
    if target <= 0:
        raise ValidationError(f"target_file_size must be positive, got {target}")
    schema = md.schema()
    keys: tuple[SortKey, ...] = ()
    zorder: tuple[str, ...] = tuple(zorder_by or ())
    if sort_order is not None:
        keys, z = parse_sort_order(sort_order, schema)
        zorder = zorder or z
    for c in zorder:
        if c not in [f.name for f in schema.fields]:
            raise ValidationError(f"cannot z-order by {c!r}: not a top-level column of the table")
    chosen = (strategy or ("zorder" if zorder else "sort" if keys else "binpack")).lower()
    if chosen == "sort" and not keys:
        keys = table_sort_keys(md.sort_order(), schema)
    if chosen == "binpack" and (keys or zorder):
        raise ValidationError("the binpack strategy keeps rows as they are: drop sort_order/zorder_by")
    return RewriteOptions.parse(
        options,
        target_file_size=target,
        strategy=chosen,
        sort_keys=keys,
        zorder_columns=zorder,
        min_input_files=min_input_files,
    )


async def plan_file_groups(
    io: FileIO, md: TableMetadata, opts: RewriteOptions, filter: str | Expression | None = None
) -> list[FileGroup]:
    """The groups of the current snapshot's files (those matching ``filter``) to rewrite."""
    if md.current_snapshot() is None:
        return []
    chosen = {t.file.file_path for t in await _tasks(io, md, filter)} if filter else None
    every = await _tasks(io, md, None, stats=opts.strategy != "binpack")
    return plan_groups([t for t in every if chosen is None or t.file.file_path in chosen], opts)


def group_job(
    md: TableMetadata, opts: RewriteOptions, properties: Mapping[str, str] | None = None
) -> GroupJob:
    schema = md.schema()
    # from v3 the rows move with their ids and sequence numbers (as Java rewrites them)
    rows_schema = with_lineage(schema, LINEAGE_FIELDS) if md.format_version >= 3 else schema
    props = {**md.properties, **(properties or {}), TARGET_FILE_SIZE: str(opts.target_file_size_bytes)}
    by_table_order = opts.strategy == "sort" and opts.sort_keys == _table_keys(md)
    return GroupJob(
        location=md.location,
        schema=schema,
        rows_schema=rows_schema,
        spec=md.spec(),
        properties=props,
        options=opts,
        write_id=uuid.uuid4().hex,
        sort_order_id=md.default_sort_order_id if by_table_order else None,
    )


def _table_keys(md: TableMetadata) -> tuple[SortKey, ...] | None:
    try:
        return table_sort_keys(md.sort_order(), md.schema()) or None
    except IcebergError:
        return None


async def rewrite_group(
    io: FileIO,
    job: GroupJob,
    tasks: Sequence[FileScanTask],
    *,
    task_id: int = 0,
    cpu_workers: int | None = None,
) -> list[DataFile]:
    """Read a group's live rows, order them as the strategy says, write them as new data
    files of about the target size (nothing committed; on error nothing is left behind).
    ``task_id`` must differ between the groups (and attempts) of one job: it names the files."""
    rows = await read_to_table(io, tasks, job.rows_schema, table_schema=job.schema)
    rows = order_rows(rows, job.options)
    if not rows.num_rows:
        return []
    return await write_data_files(
        io,
        job.rows_schema,
        job.spec,
        rows,
        LocationProvider(job.location, job.properties, write_id=job.write_id),
        job.properties,
        task_id=task_id,
        cpu_workers=cpu_workers,
        sort_order_id=job.sort_order_id,
    )


async def rewrite_groups_here(io: FileIO, job: GroupJob, groups: Sequence[FileGroup]) -> list[RewrittenGroup]:
    """Rewrite the groups in this process, one after another (``group_rewrite.rewrite_here``)."""

    async def rewrite(g: FileGroup) -> RewrittenGroup:
        # the group's index names its files: groups share the job's write id
        return RewrittenGroup(g, await rewrite_group(io, job, g.tasks, task_id=g.index))

    def failed(g: FileGroup, error: str) -> RewrittenGroup:
        return RewrittenGroup(g, [], error)

    return await rewrite_here(
        io, groups, rewrite, failed, partial_progress=job.options.partial_progress_enabled, noun="file group"
    )


@dataclass
class CompactionPlan:
    """What a compaction rewrites: the snapshot it starts from, its groups, the options, and
    the job every group's rewrite shares (in this process or on Spark executors)."""

    start: Snapshot
    groups: list[FileGroup]
    options: RewriteOptions
    job: GroupJob

    async def commit(
        self,
        io: FileIO,
        commit: Callable[[RewriteDataFilesChange], Awaitable[None]],
        rewritten: Sequence[RewrittenGroup],
    ) -> RewriteDataFilesResult:
        """Commit what the groups' rewrite wrote (``commit`` commits one change, e.g. in a
        transaction of its own): one ``replace`` snapshot, or with partial progress one per
        batch of groups."""

        def change_for(batch: list[RewrittenGroup]) -> RewriteDataFilesChange:
            deleted = [f for r in batch for f in r.group.files]
            return RewriteDataFilesChange(deleted, [f for r in batch for f in r.added], self.start)

        result = RewriteDataFilesResult()
        await commit_groups(io, commit, rewritten, self.options, change_for, result, noun="file group")
        return result


async def plan_compaction(
    io: FileIO,
    md: TableMetadata,
    target_file_size: int | None = None,
    filter: str | Expression | None = None,
    *,
    one_commit: bool = False,
    **args: Unpack[CompactionArgs],
) -> CompactionPlan | None:
    """The options and the groups of the current snapshot's files (those matching
    ``filter``) to rewrite; None when nothing is worth rewriting.

    ``one_commit``: the changes are staged in a transaction, which holds one snapshot of
    them, so partial progress is refused (``UnsupportedError``)."""
    opts = rewrite_options(md, target_file_size, **args)
    if one_commit and opts.partial_progress_enabled:
        raise UnsupportedError(
            "partial-progress.enabled commits several snapshots: "
            "use Table.rewrite_data_files, not a transaction"
        )
    start = md.current_snapshot()
    groups = await plan_file_groups(io, md, opts, filter)
    if start is None or not groups:
        return None
    return CompactionPlan(start, groups, opts, group_job(md, opts))


async def compact_data_files(
    io: FileIO,
    md: TableMetadata,
    commit: Callable[[RewriteDataFilesChange], Awaitable[None]],
    target_file_size: int | None = None,
    filter: str | Expression | None = None,
    *,
    one_commit: bool = False,
    **args: Unpack[CompactionArgs],
) -> RewriteDataFilesResult:
    """Compact in this process: :func:`plan_compaction`, the groups rewritten one after
    another (:func:`rewrite_groups_here`), ``commit`` of each batch of them (one ``replace``
    snapshot, or with ``partial-progress.enabled`` one per batch). The Spark action runs
    the same plan and commit with the rewrite on executors."""
    plan = await plan_compaction(io, md, target_file_size, filter, one_commit=one_commit, **args)
    if plan is None:
        return RewriteDataFilesResult()
    return await plan.commit(io, commit, await rewrite_groups_here(io, plan.job, plan.groups))
