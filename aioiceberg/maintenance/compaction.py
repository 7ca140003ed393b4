"""Data file compaction: groups of files rewritten, committed as one (or several) ``replace``.

The groups come from ``compaction_groups`` (bin-pack, sort or z-order); the single-process
rewrite and the Spark action (``aioiceberg.spark.actions``) share the planning, the
rewriting of one group (``rewrite_group``) and the commit (``commit_rewritten_groups``):
the Spark action only runs ``rewrite_group`` on executors.

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
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from aioiceberg.commit.dangling_deletes import is_dangling
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import (
    CommitConflictError,
    IcebergError,
    RewriteFailedError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.expressions.tree import Expression
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.compaction_groups import (
    FileGroup,
    RewriteOptions,
    SortKey,
    batches,
    order_rows,
    parse_sort_order,
    plan_groups,
    table_sort_keys,
)
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import ManifestSink, ReplaceSnapshot, carried
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
    "commit_rewritten_groups",
    "compact_data_files",
    "group_job",
    "plan_bins",
    "plan_file_groups",
    "rewrite_group",
    "rewrite_groups_here",
    "rewrite_options",
]

TARGET_FILE_SIZE = TableProperties.target_file_size.key


@dataclass
class RewriteDataFilesResult:
    """``snapshot_id``: the last snapshot committed (``snapshot_ids``: all of them, one per
    commit with partial progress); ``failed_groups``: indexes of the groups left out."""

    snapshot_id: int | None = None
    rewritten_files: list[str] = field(default_factory=list)
    added_files: list[str] = field(default_factory=list)
    groups: int = 0
    failed_groups: list[int] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rewritten_files_count(self) -> int:
        return len(self.rewritten_files)

    @property
    def added_files_count(self) -> int:
        return len(self.added_files)


@dataclass
class RewrittenGroup:
    """A group and the files its rewrite wrote, or why the rewrite failed."""

    group: FileGroup
    added: list[DataFile] = field(default_factory=list)
    error: str | None = None


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


class RewriteDataFilesChange(ReplaceSnapshot):
    """Replace ``deleted`` data files by ``added`` ones in a ``replace`` snapshot on main."""

    def __init__(self, deleted: Sequence[DataFile], added: Sequence[DataFile], start: Snapshot) -> None:
        super().__init__()
        self.deleted = list(deleted)
        self.added = list(added)
        self.start = start
        self.written: list[str] = []
        self.kept_manifests: set[str] = set()

    async def _check_conflicts(self, walker: ManifestWalker, base: TableMetadata, parent: Snapshot) -> None:
        since: set[int] = set()
        for snap in base.ancestors_of(parent.snapshot_id):
            if snap.snapshot_id == self.start.snapshot_id:
                break
            since.add(snap.snapshot_id)
        else:
            raise CommitConflictError(
                f"snapshot {self.start.snapshot_id} the rewrite started from is no longer an ancestor of main"
            )
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

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        parent = base.current_snapshot()
        if parent is None:
            raise CommitConflictError("the table no longer has a current snapshot")
        walker = ManifestWalker(io)
        await self._check_conflicts(walker, base, parent)
        doomed = {f.file_path for f in self.deleted}
        found: set[str] = set()
        dangling: list[DataFile] = []
        sink = ManifestSink(io, base, self.snapshot_id, f"{self.commit_uuid}-{attempt}")
        manifests: list[ManifestFile] = []
        try:
            added_entries = [
                ManifestEntry(
                    ManifestEntryStatus.ADDED,
                    None,
                    self.start.sequence_number if base.format_version >= 2 else None,
                    None,
                    f,
                )
                for f in self.added
            ]
            by_spec: dict[int, list[ManifestEntry]] = {}
            for e in added_entries:
                by_spec.setdefault(e.data_file.spec_id, []).append(e)
            for spec_id, entries in by_spec.items():
                manifests.append(await sink.write(spec_id, entries))
            for m in await walker.manifests(parent):
                if m.content != ManifestContent.DATA:
                    manifests.append(await self._drop_dangling(walker, sink, base, m, doomed, dangling))
                    continue
                entries = await walker.entries(m)
                hits = {e.data_file.file_path for e in entries if e.is_live} & doomed
                if not hits:
                    manifests.append(m)
                    continue
                found |= hits
                drop, keep = ManifestEntryStatus.DELETED, ManifestEntryStatus.EXISTING
                rewritten = [
                    carried(e, drop if e.data_file.file_path in hits else keep) for e in entries if e.is_live
                ]
                manifests.append(await sink.write(m.partition_spec_id, rewritten))
        finally:
            self.written += sink.written
        missing = doomed - found
        if missing:
            raise CommitConflictError(
                f"{len(missing)} files being rewritten were removed by a concurrent commit, "
                f"e.g. {sorted(missing)[0]}"
            )
        extra = {"rewritten-data-files": str(len(self.deleted))}
        updates, requirements, list_path = await self.publish(
            io, base, parent, manifests, attempt, extra, added=self.added, removed=[*self.deleted, *dangling]
        )
        self.written.append(list_path)
        self.kept_manifests = {m.manifest_path for m in manifests} | {list_path}
        return updates, requirements

    @staticmethod
    async def _drop_dangling(
        walker: ManifestWalker,
        sink: ManifestSink,
        base: TableMetadata,
        m: ManifestFile,
        doomed: set[str],
        dropped: list[DataFile],
    ) -> ManifestFile:
        """The delete manifest ``m`` without the delete files of rewritten data files (those
        go to ``dropped``), or ``m`` itself when it holds none."""
        if base.format_version < 3 or not (m.has_added_files() or m.has_existing_files()):
            return m  # deletion vectors exist from v3 on
        live = [e for e in await walker.entries(m) if e.is_live]
        gone = [e for e in live if is_dangling(e.data_file, doomed, base.format_version)]
        if not gone:
            return m
        dropped += [e.data_file for e in gone]
        drop, keep = ManifestEntryStatus.DELETED, ManifestEntryStatus.EXISTING
        ids = {id(e) for e in gone}
        entries = [carried(e, drop if id(e) in ids else keep) for e in live]
        return await sink.write(m.partition_spec_id, entries, ManifestContent.DELETES)

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        await delete_quietly(io, [p for p in self.written if p not in self.kept_manifests])

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, [*self.written, *(f.file_path for f in self.added)])


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


async def commit_rewritten_groups(
    io: FileIO,
    commit: Callable[[RewriteDataFilesChange], Awaitable[None]],
    start: Snapshot,
    rewritten: Sequence[RewrittenGroup],
    opts: RewriteOptions,
) -> RewriteDataFilesResult:
    """Commit the rewritten groups (``commit`` commits one change, e.g. in a transaction of its
    own): one ``replace`` snapshot, or with partial progress one per batch of groups.

    Every group is committed at most once; the files of a group left out are deleted.
    """
    result = RewriteDataFilesResult(groups=len(rewritten))
    failed = [r for r in rewritten if r.error is not None]
    done = [r for r in rewritten if r.error is None]
    await delete_quietly(io, [f.file_path for r in failed for f in r.added])
    if failed and not opts.partial_progress_enabled:
        await delete_quietly(io, [f.file_path for r in done for f in r.added])
        first = failed[0]
        raise RewriteFailedError(
            f"{len(failed)} of {len(rewritten)} file groups failed to rewrite, nothing was committed; "
            f"group {first.group.index}: {first.error}"
        )
    result.failed_groups = [r.group.index for r in failed]
    result.errors = [f"group {r.group.index}: {r.error}" for r in failed]
    for batch in batches(done, opts):
        deleted = [f for r in batch for f in r.group.files]
        added = [f for r in batch for f in r.added]
        change = RewriteDataFilesChange(deleted, added, start)
        try:
            await commit(change)  # a failed commit deletes the change's files (``aborted``)
        except IcebergError as e:
            if not opts.partial_progress_enabled:
                raise
            result.failed_groups += [r.group.index for r in batch]
            result.errors.append(f"groups {[r.group.index for r in batch]}: {e}")
            continue
        result.snapshot_ids.append(change.snapshot_id)
        result.snapshot_id = change.snapshot_id
        result.rewritten_files += sorted(f.file_path for f in deleted)
        result.added_files += sorted(f.file_path for f in added)
    return result


async def rewrite_groups_here(io: FileIO, job: GroupJob, groups: Sequence[FileGroup]) -> list[RewrittenGroup]:
    """Rewrite the groups in this process, one after another. Without partial progress the
    first failure deletes what was written and raises ``RewriteFailedError``; with it,
    failures are recorded."""
    out: list[RewrittenGroup] = []
    for g in groups:
        try:
            # the group's index names its files: groups share the job's write id
            out.append(RewrittenGroup(g, await rewrite_group(io, job, g.tasks, task_id=g.index)))
        except Exception as e:
            if not job.options.partial_progress_enabled:
                await delete_quietly(io, [f.file_path for r in out for f in r.added])
                raise RewriteFailedError(
                    f"file group {g.index} of {len(groups)} failed to rewrite, nothing was committed: "
                    f"{type(e).__name__}: {e}"
                ) from e
            out.append(RewrittenGroup(g, [], f"{type(e).__name__}: {e}"))
        except BaseException:
            await delete_quietly(io, [f.file_path for r in out for f in r.added])
            raise
    return out


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
        """Commit what the groups' rewrite wrote (:func:`commit_rewritten_groups`)."""
        return await commit_rewritten_groups(io, commit, self.start, rewritten, self.options)


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
