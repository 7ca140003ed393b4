"""Position delete file rewrite: small delete files combined per partition, dangling rows dropped.

As Java Iceberg's ``rewrite_position_delete_files``: the live position delete files of the
current snapshot are bin-packed per partition into groups (``plan_delete_groups``); a
group's rows are read, the rows naming data files no longer live are dropped ("dangling":
their data file was compacted or overwritten away), the rest written as new delete files
of about ``target-file-size-bytes`` sorted by (file_path, pos), with full ``file_path``
bounds so the planner still matches them to their data files. One ``replace`` snapshot
removes the old delete files and adds the new ones (one per batch of groups with
``partial-progress.enabled``). The single-process rewrite and the Spark action share the
planning, the rewrite of one group (``rewrite_delete_group``) and the commit
(``commit_rewritten_delete_groups``).

Sequence numbers: a new delete file carries the largest data sequence number of the files
it replaces, so it applies to every data file they applied to (a position names one data
file path, so applying to newer data files changes nothing).

Conflicts, checked at every commit attempt: the snapshot the rewrite started from must
still be an ancestor of main, and every delete file being replaced must still be live
(a concurrent rewrite or removal of them fails the commit with ``CommitConflictError``,
whose new files are deleted). A data file removed concurrently is safe: the rows naming it
become dangling, apply to nothing, and the next rewrite drops them; delete files added
concurrently stay as they are.

v3 tables: Java rewrites the remaining v2 position delete files into deletion vectors and
does nothing when there are none. Here a v3 table without v2 position delete files is
left as it is; one with them is refused (``UnsupportedError``): the conversion into
deletion vectors is not done here.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import pyarrow as pa
import pyarrow.compute as pc

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
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import ManifestSink, ReplaceSnapshot, carried
from aioiceberg.read.deletes import DELETE_FILE_PATH_ID
from aioiceberg.read.formats import decode_file
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
from aioiceberg.spec.schema import Schema
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_position_delete_file

__all__ = [
    "DeleteFileGroup",
    "DeleteGroupJob",
    "DeleteGroupRewriter",
    "PositionDeleteRewriteOptions",
    "RewritePositionDeletesChange",
    "RewritePositionDeletesResult",
    "RewrittenDeleteGroup",
    "commit_rewritten_delete_groups",
    "delete_group_job",
    "plan_delete_groups",
    "rewrite_delete_group",
    "rewrite_delete_groups_here",
    "rewrite_position_deletes",
]

DELETE_TARGET_FILE_SIZE = "write.delete.target-file-size-bytes"
DEFAULT_DELETE_TARGET = 64 * 1024 * 1024  # Java's default for the property above
DEFAULT_MAX_GROUP_SIZE = 100 * 1024**3
OPTION_KEYS = frozenset(
    {
        "target-file-size-bytes",
        "min-file-size-bytes",
        "max-file-size-bytes",
        "min-input-files",
        "max-file-group-size-bytes",
        "partial-progress.enabled",
        "partial-progress.max-commits",
        "rewrite-all",
    }
)


def _bool(key: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValidationError(f"option {key} must be true or false, got {value!r}")
    return text == "true"


def _int(key: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValidationError(f"option {key} must be an integer, got {value!r}") from None


@dataclass(frozen=True)
class PositionDeleteRewriteOptions:
    """Java's ``rewrite_position_delete_files`` options; ``parse`` reads them by name."""

    target_file_size_bytes: int = DEFAULT_DELETE_TARGET
    min_file_size_bytes: int | None = None  # default 3/4 of the target
    max_file_size_bytes: int | None = None  # default 1.8 times the target
    min_input_files: int = 5
    max_file_group_size_bytes: int = DEFAULT_MAX_GROUP_SIZE
    partial_progress_enabled: bool = False
    partial_progress_max_commits: int = 10
    rewrite_all: bool = False

    def __post_init__(self) -> None:
        for name in ("target_file_size_bytes", "max_file_group_size_bytes", "partial_progress_max_commits"):
            if getattr(self, name) <= 0:
                raise ValidationError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.min_input_files < 1:
            raise ValidationError(f"min-input-files must be at least 1, got {self.min_input_files}")
        if self.min_file_size > self.max_file_size:
            raise ValidationError(
                f"min-file-size-bytes {self.min_file_size} exceeds max-file-size-bytes {self.max_file_size}"
            )

    @property
    def min_file_size(self) -> int:
        m = self.min_file_size_bytes
        return m if m is not None else self.target_file_size_bytes * 3 // 4

    @property
    def max_file_size(self) -> int:
        m = self.max_file_size_bytes
        return m if m is not None else self.target_file_size_bytes * 9 // 5

    @classmethod
    def parse(
        cls, options: Mapping[str, Any] | None, properties: Mapping[str, str] | None = None
    ) -> PositionDeleteRewriteOptions:
        """Options by Java's names over the table's ``write.delete.target-file-size-bytes``."""
        opts = dict(options or {})
        unknown = sorted(set(opts) - OPTION_KEYS)
        if unknown:
            raise ValidationError(
                f"unknown rewrite_position_delete_files options {unknown}: use {sorted(OPTION_KEYS)}"
            )
        target = (properties or {}).get(DELETE_TARGET_FILE_SIZE, DEFAULT_DELETE_TARGET)
        ints: dict[str, int] = {}
        for key in ("min-file-size-bytes", "max-file-size-bytes"):
            if key in opts:
                ints[key.replace("-", "_")] = _int(key, opts[key])
        return cls(
            target_file_size_bytes=_int("target-file-size-bytes", opts.get("target-file-size-bytes", target)),
            min_input_files=_int("min-input-files", opts.get("min-input-files", 5)),
            max_file_group_size_bytes=_int(
                "max-file-group-size-bytes", opts.get("max-file-group-size-bytes", DEFAULT_MAX_GROUP_SIZE)
            ),
            partial_progress_enabled=_bool(
                "partial-progress.enabled", opts.get("partial-progress.enabled", "false")
            ),
            partial_progress_max_commits=_int(
                "partial-progress.max-commits", opts.get("partial-progress.max-commits", 10)
            ),
            rewrite_all=_bool("rewrite-all", opts.get("rewrite-all", "false")),
            **ints,
        )


@dataclass(frozen=True)
class DeleteFileGroup:
    """Position delete files of one partition rewritten together; ``live_data_files``: the
    live data files their ``file_path`` bounds can name (rows naming others are dangling)."""

    index: int
    spec_id: int
    partition: tuple[Any, ...]
    files: tuple[DataFile, ...]
    sequence_number: int | None
    live_data_files: frozenset[str]

    @property
    def size_bytes(self) -> int:
        return sum(f.file_size_in_bytes for f in self.files)


@dataclass(frozen=True)
class DeleteGroupJob:
    """What rewriting any group of one rewrite needs besides the group."""

    location: str
    schema: Schema
    specs: dict[int, PartitionSpec]
    properties: dict[str, str]
    options: PositionDeleteRewriteOptions
    write_id: str


@dataclass
class RewrittenDeleteGroup:
    """A group and the delete files its rewrite wrote, or why the rewrite failed."""

    group: DeleteFileGroup
    added: list[DataFile] = field(default_factory=list)
    error: str | None = None
    dangling_rows: int = 0


@dataclass
class RewritePositionDeletesResult:
    """``snapshot_id``: the last snapshot committed (``snapshot_ids``: one per commit);
    ``dangling_rows_removed``: delete rows dropped because their data file is gone."""

    snapshot_id: int | None = None
    rewritten_files: list[str] = field(default_factory=list)
    added_files: list[str] = field(default_factory=list)
    groups: int = 0
    failed_groups: list[int] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dangling_rows_removed: int = 0

    @property
    def rewritten_files_count(self) -> int:
        return len(self.rewritten_files)

    @property
    def added_files_count(self) -> int:
        return len(self.added_files)


def _path_bounds(f: DataFile) -> tuple[str, str] | None:
    lower = (f.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    upper = (f.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    if lower is None or upper is None:
        return None
    return lower.decode("utf-8", "replace"), upper.decode("utf-8", "replace")


def _may_name(files: Sequence[DataFile], live: Sequence[str]) -> frozenset[str]:
    """The live data files (``live``: sorted) the ``file_path`` bounds of ``files`` admit
    (all when some bound is unknown)."""
    ranges: list[tuple[str, str]] = []
    for f in files:
        if f.referenced_data_file is not None:
            ranges.append((f.referenced_data_file, f.referenced_data_file))
            continue
        b = _path_bounds(f)
        if b is None:
            return frozenset(live)
        ranges.append(b)
    out: set[str] = set()
    for lo, hi in ranges:
        out.update(live[bisect.bisect_left(live, lo) : bisect.bisect_right(live, hi)])
    return frozenset(out)


def _bins(files: Sequence[ManifestEntry], max_size: int) -> list[list[ManifestEntry]]:
    """First-fit decreasing by size, each bin at most ``max_size`` (a larger file alone)."""
    bins: list[tuple[int, list[ManifestEntry]]] = []
    for e in sorted(files, key=lambda e: (-e.data_file.file_size_in_bytes, e.data_file.file_path)):
        size = e.data_file.file_size_in_bytes
        for i, (used, members) in enumerate(bins):
            if used + size <= max_size:
                members.append(e)
                bins[i] = (used + size, members)
                break
        else:
            bins.append((size, [e]))
    return [members for _, members in bins]


async def _live_files(io: FileIO, snapshot: Snapshot) -> tuple[list[str], list[ManifestEntry]]:
    """The snapshot's live data file paths and its live delete entries."""
    walker = ManifestWalker(io)
    data: list[str] = []
    deletes: list[ManifestEntry] = []
    for m in await walker.manifests(snapshot):
        for e in await walker.entries(m):
            if not e.is_live:
                continue
            if m.content == ManifestContent.DATA:
                data.append(e.data_file.file_path)
            else:
                deletes.append(e)
    return sorted(data), deletes


async def plan_delete_groups(
    io: FileIO, md: TableMetadata, opts: PositionDeleteRewriteOptions
) -> list[DeleteFileGroup]:
    """The groups of the current snapshot's position delete files to rewrite, as Java's
    bin-pack planner chooses them: per partition, files outside the size range (all with
    ``rewrite-all``) packed into groups of at most ``max-file-group-size-bytes``; a group is
    kept with ``min-input-files`` files, or more than one file above the target, or more
    than the group maximum. Deletion vectors are never chosen."""
    snapshot = md.current_snapshot()
    if snapshot is None:
        return []
    live, deletes = await _live_files(io, snapshot)
    by_partition: dict[tuple[int, tuple[Any, ...]], list[ManifestEntry]] = {}
    for e in deletes:
        f = e.data_file
        if f.content != DataFileContent.POSITION_DELETES or f.is_deletion_vector:
            continue
        if not opts.rewrite_all and opts.min_file_size <= f.file_size_in_bytes <= opts.max_file_size:
            continue
        by_partition.setdefault((f.spec_id, tuple(f.partition)), []).append(e)
    groups: list[DeleteFileGroup] = []
    for (spec_id, partition), entries in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        for members in _bins(entries, opts.max_file_group_size_bytes):
            size = sum(e.data_file.file_size_in_bytes for e in members)
            keep = (
                opts.rewrite_all
                or len(members) >= opts.min_input_files
                or (len(members) > 1 and size > opts.target_file_size_bytes)
                or size > opts.max_file_group_size_bytes
            )
            if not keep:
                continue
            files = tuple(e.data_file for e in members)
            seqs = [e.sequence_number for e in members if e.sequence_number is not None]
            groups.append(
                DeleteFileGroup(
                    index=len(groups),
                    spec_id=spec_id,
                    partition=partition,
                    files=files,
                    sequence_number=max(seqs) if seqs else None,
                    live_data_files=_may_name(files, live),
                )
            )
    return groups


def delete_group_job(
    md: TableMetadata, opts: PositionDeleteRewriteOptions, properties: Mapping[str, str] | None = None
) -> DeleteGroupJob:
    return DeleteGroupJob(
        location=md.location,
        schema=md.schema(),
        specs=dict(md.specs_by_id()),
        properties={**md.properties, **(properties or {})},
        options=opts,
        write_id=uuid.uuid4().hex,
    )


def _position_rows(data: bytes, f: DataFile) -> pa.Table:
    table = decode_file(data, f.file_format, f.file_path)
    missing = {"file_path", "pos"} - set(table.column_names)
    if missing:
        raise ValidationError(f"position delete file {f.file_path} lacks columns {sorted(missing)}")
    return table.select(["file_path", "pos"]).cast(
        pa.schema([("file_path", pa.string()), ("pos", pa.int64())])
    )


def _kept_rows(tables: Sequence[pa.Table], live: frozenset[str]) -> tuple[pa.Table, int]:
    """The live rows (deduplicated, sorted by path and position) and how many were dangling."""
    rows = pa.concat_tables(tables) if tables else pa.table({"file_path": [], "pos": []})
    keep = pc.is_in(rows.column("file_path"), value_set=pa.array(sorted(live), pa.string()))
    kept = rows.filter(keep)
    dangling = rows.num_rows - kept.num_rows
    kept = kept.group_by(["file_path", "pos"]).aggregate([])
    return kept.sort_by([("file_path", "ascending"), ("pos", "ascending")]), dangling


async def rewrite_delete_group(
    io: FileIO, job: DeleteGroupJob, group: DeleteFileGroup, *, task_id: int = 0
) -> RewrittenDeleteGroup:
    """Read a group's delete rows, drop the dangling ones, write the rest as new position
    delete files of about the target size (nothing committed; on error nothing is left
    behind). ``task_id`` must differ between the groups (and attempts) of one job."""
    tables = []
    for f in group.files:
        data = await io.read(f.file_path)
        tables.append(await anyio.to_thread.run_sync(_position_rows, data, f))
    rows, dangling = await anyio.to_thread.run_sync(_kept_rows, tables, group.live_data_files)
    total_rows = sum(t.num_rows for t in tables)
    if not rows.num_rows:
        return RewrittenDeleteGroup(group, [], None, dangling)
    # rows per output file from the input's bytes per row
    per_file = max(1, job.options.target_file_size_bytes * max(total_rows, 1) // max(group.size_bytes, 1))
    provider = LocationProvider(job.location, job.properties, write_id=f"{job.write_id}-{task_id}")
    spec = job.specs[group.spec_id]
    written: list[DataFile] = []
    try:
        for start in range(0, rows.num_rows, per_file):
            f = await write_position_delete_file(
                io,
                provider,
                rows.slice(start, per_file),
                table_schema=job.schema,
                spec=spec,
                partition=group.partition,
                properties=job.properties,
            )
            written.append(f)
    except BaseException:
        await delete_quietly(io, [f.file_path for f in written])
        raise
    return RewrittenDeleteGroup(group, written, None, dangling)


class RewritePositionDeletesChange(ReplaceSnapshot):
    """Replace the ``deleted`` position delete files by ``added`` ones in a ``replace``
    snapshot on main; ``added`` is a list per group, with that group's sequence number."""

    def __init__(self, groups: Sequence[RewrittenDeleteGroup], start: Snapshot) -> None:
        super().__init__()
        self.groups = list(groups)
        self.deleted = [f for g in self.groups for f in g.group.files]
        self.added = [f for g in self.groups for f in g.added]
        self.start = start
        self.written: list[str] = []
        self.kept_manifests: set[str] = set()

    def _check_start(self, base: TableMetadata, parent: Snapshot) -> None:
        for snap in base.ancestors_of(parent.snapshot_id):
            if snap.snapshot_id == self.start.snapshot_id:
                return
        raise CommitConflictError(
            f"snapshot {self.start.snapshot_id} the rewrite started from is no longer an ancestor of main"
        )

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        parent = base.current_snapshot()
        if parent is None:
            raise CommitConflictError("the table no longer has a current snapshot")
        self._check_start(base, parent)
        walker = ManifestWalker(io)
        doomed = {f.file_path for f in self.deleted}
        found: set[str] = set()
        sink = ManifestSink(io, base, self.snapshot_id, f"{self.commit_uuid}-{attempt}")
        manifests: list[ManifestFile] = []
        try:
            by_spec: dict[int, list[ManifestEntry]] = {}
            for g in self.groups:
                for f in g.added:
                    entry = ManifestEntry(ManifestEntryStatus.ADDED, None, g.group.sequence_number, None, f)
                    by_spec.setdefault(f.spec_id, []).append(entry)
            for spec_id, entries in by_spec.items():
                manifests.append(await sink.write(spec_id, entries, ManifestContent.DELETES))
            for m in await walker.manifests(parent):
                if m.content != ManifestContent.DELETES:
                    manifests.append(m)
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
                manifests.append(await sink.write(m.partition_spec_id, rewritten, ManifestContent.DELETES))
        finally:
            self.written += sink.written
        missing = doomed - found
        if missing:
            raise CommitConflictError(
                f"{len(missing)} position delete files being rewritten were removed by a concurrent "
                f"commit, e.g. {sorted(missing)[0]}"
            )
        extra = {"rewritten-delete-files": str(len(self.deleted))}
        updates, requirements, list_path = await self.publish(
            io, base, parent, manifests, attempt, extra, added=self.added, removed=self.deleted
        )
        self.written.append(list_path)
        self.kept_manifests = {m.manifest_path for m in manifests} | {list_path}
        return updates, requirements

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        await delete_quietly(io, [p for p in self.written if p not in self.kept_manifests])

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, [*self.written, *(f.file_path for f in self.added)])


def _batches(
    done: Sequence[RewrittenDeleteGroup], opts: PositionDeleteRewriteOptions
) -> list[list[RewrittenDeleteGroup]]:
    if not done:
        return []
    if not opts.partial_progress_enabled:
        return [list(done)]
    per = -(-len(done) // opts.partial_progress_max_commits)
    return [list(done[i : i + per]) for i in range(0, len(done), per)]


async def commit_rewritten_delete_groups(
    io: FileIO,
    commit: Callable[[RewritePositionDeletesChange], Awaitable[None]],
    start: Snapshot,
    rewritten: Sequence[RewrittenDeleteGroup],
    opts: PositionDeleteRewriteOptions,
) -> RewritePositionDeletesResult:
    """Commit the rewritten groups: one ``replace`` snapshot, or with partial progress one
    per batch of groups (a batch that fails to commit is left out). Each group is committed
    at most once; the files of a group left out are deleted."""
    result = RewritePositionDeletesResult(groups=len(rewritten))
    failed = [r for r in rewritten if r.error is not None]
    done = [r for r in rewritten if r.error is None]
    await delete_quietly(io, [f.file_path for r in failed for f in r.added])
    if failed and not opts.partial_progress_enabled:
        await delete_quietly(io, [f.file_path for r in done for f in r.added])
        first = failed[0]
        raise RewriteFailedError(
            f"{len(failed)} of {len(rewritten)} position delete groups failed to rewrite, nothing was "
            f"committed; group {first.group.index}: {first.error}"
        )
    result.failed_groups = [r.group.index for r in failed]
    result.errors = [f"group {r.group.index}: {r.error}" for r in failed]
    for batch in _batches(done, opts):
        change = RewritePositionDeletesChange(batch, start)
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
        result.rewritten_files += sorted(f.file_path for f in change.deleted)
        result.added_files += sorted(f.file_path for f in change.added)
        result.dangling_rows_removed += sum(r.dangling_rows for r in batch)
    return result


async def rewrite_delete_groups_here(
    io: FileIO, job: DeleteGroupJob, groups: Sequence[DeleteFileGroup]
) -> list[RewrittenDeleteGroup]:
    """Rewrite the groups in this process, one after another; without partial progress the
    first failure deletes what was written and raises ``RewriteFailedError``."""
    out: list[RewrittenDeleteGroup] = []
    for g in groups:
        try:
            out.append(await rewrite_delete_group(io, job, g, task_id=g.index))
        except Exception as e:
            if not job.options.partial_progress_enabled:
                await delete_quietly(io, [f.file_path for r in out for f in r.added])
                raise RewriteFailedError(
                    f"position delete group {g.index} of {len(groups)} failed to rewrite, nothing was "
                    f"committed: {type(e).__name__}: {e}"
                ) from e
            out.append(RewrittenDeleteGroup(g, [], f"{type(e).__name__}: {e}"))
        except BaseException:
            await delete_quietly(io, [f.file_path for r in out for f in r.added])
            raise
    return out


DeleteGroupRewriter = Callable[
    [FileIO, DeleteGroupJob, Sequence[DeleteFileGroup]], Awaitable[list[RewrittenDeleteGroup]]
]
"""Where the groups are rewritten: :func:`rewrite_delete_groups_here` or Spark executors."""


async def rewrite_position_deletes(
    io: FileIO,
    md: TableMetadata,
    commit: Callable[[RewritePositionDeletesChange], Awaitable[None]],
    options: Mapping[str, Any] | None = None,
    *,
    rewriter: DeleteGroupRewriter = rewrite_delete_groups_here,
) -> RewritePositionDeletesResult:
    """Plan, rewrite (by ``rewriter``) and commit the position delete files of the current
    snapshot; see the module docstring for what is chosen and what conflicts."""
    opts = PositionDeleteRewriteOptions.parse(options, md.properties)
    start = md.current_snapshot()
    if start is None:
        return RewritePositionDeletesResult()
    if md.format_version >= 3:
        left = await plan_delete_groups(io, md, PositionDeleteRewriteOptions(rewrite_all=True))
        if left:
            raise UnsupportedError(
                f"table {md.location} is v3 and still holds {sum(len(g.files) for g in left)} v2 position "
                "delete files: Java rewrites them into deletion vectors, which this rewrite does not do"
            )
        return RewritePositionDeletesResult()
    groups = await plan_delete_groups(io, md, opts)
    if not groups:
        return RewritePositionDeletesResult()
    rewritten = await rewriter(io, delete_group_job(md, opts), groups)
    return await commit_rewritten_delete_groups(io, commit, start, rewritten, opts)
