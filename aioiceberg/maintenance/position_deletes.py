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
(``PositionDeletePlan.commit``), and with compaction the options, partial progress and the
``replace`` snapshot's checks (``group_rewrite``).

Sequence numbers: a new delete file carries the largest data sequence number of the files
it replaces, so it applies to every data file they applied to (a position names one data
file path, so applying to newer data files changes nothing).

Conflicts, checked at every commit attempt: the snapshot the rewrite started from must
still be an ancestor of main, and every delete file being replaced must still be live
(a concurrent rewrite or removal of them fails the commit with ``CommitConflictError``,
whose new files are deleted). A data file removed concurrently is safe: the rows naming it
become dangling, apply to nothing, and the next rewrite drops them; delete files added
concurrently stay as they are.

v3 tables (a v2 table upgraded keeps its position delete files): as Java, the remaining v2
position delete files are rewritten into deletion vectors, and a table without any is left
as it is. Every live v2 position delete file is converted, whatever the size options, in
one group per partition (``plan_vector_groups``), so each data file gets exactly one
vector: its positions from every v2 file of the partition, merged with the vector it
already had, which the ``replace`` snapshot removes with the v2 files. Rows naming data
files no longer live (or of another partition, which they never applied to) are dropped.
A group's vectors go to one Puffin file. Besides the checks above, a commit fails when a
concurrent commit added a deletion vector for one of the data files the rewrite writes one
for (the table would hold two).
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.errors import CommitConflictError, CorruptFileError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.group_rewrite import (
    GROUP_OPTION_KEYS,
    GroupLimits,
    GroupOutcome,
    GroupReplace,
    GroupRewriteResult,
    JavaOptions,
    bin_pack,
    commit_groups,
    rewrite_here,
)
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.read.deletes import DELETE_FILE_PATH_ID, decode_deletion_vector
from aioiceberg.read.formats import decode_file
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.write.deletion_vectors import write_deletion_vectors
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_position_delete_file

__all__ = [
    "DeleteFileGroup",
    "DeleteGroupJob",
    "PositionDeletePlan",
    "PositionDeleteRewriteOptions",
    "RewritePositionDeletesChange",
    "RewritePositionDeletesResult",
    "RewrittenDeleteGroup",
    "delete_group_job",
    "plan_delete_groups",
    "plan_position_delete_rewrite",
    "plan_vector_groups",
    "rewrite_delete_group",
    "rewrite_delete_groups_here",
    "rewrite_position_deletes",
]

DELETE_TARGET_FILE_SIZE = "write.delete.target-file-size-bytes"
DEFAULT_DELETE_TARGET = 64 * 1024 * 1024  # Java's default for the property above
DEFAULT_MIN_INPUT_FILES = 5  # Java's, for delete files


@dataclass(frozen=True)
class PositionDeleteRewriteOptions(GroupLimits):
    """Java's ``rewrite_position_delete_files`` options; ``parse`` reads them by name."""

    target_file_size_bytes: int = DEFAULT_DELETE_TARGET
    min_input_files: int = DEFAULT_MIN_INPUT_FILES

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_file_size > self.max_file_size:
            raise ValidationError(
                f"min-file-size-bytes {self.min_file_size} exceeds max-file-size-bytes {self.max_file_size}"
            )

    @classmethod
    def parse(
        cls, options: Mapping[str, Any] | None, properties: Mapping[str, str] | None = None
    ) -> PositionDeleteRewriteOptions:
        """Options by Java's names over the table's ``write.delete.target-file-size-bytes``."""
        opts = JavaOptions(options, GROUP_OPTION_KEYS, "rewrite_position_delete_files")
        prop = (properties or {}).get(DELETE_TARGET_FILE_SIZE) or str(DEFAULT_DELETE_TARGET)
        try:
            target = int(prop)
        except ValueError:
            raise ValidationError(
                f"table property {DELETE_TARGET_FILE_SIZE} must be an integer, got {prop!r}"
            ) from None
        return cls(**opts.limits(target, DEFAULT_MIN_INPUT_FILES))


@dataclass(frozen=True)
class DeleteFileGroup:
    """Position delete files of one partition rewritten together; ``live_data_files``: the
    live data files their ``file_path`` bounds can name (rows naming others are dangling).
    With ``to_vectors`` (v3) they become deletion vectors, merged with ``vectors``: the live
    vectors of ``live_data_files``."""

    index: int
    spec_id: int
    partition: tuple[Any, ...]
    files: tuple[DataFile, ...]
    sequence_number: int | None
    live_data_files: frozenset[str]
    to_vectors: bool = False
    vectors: tuple[DataFile, ...] = ()

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
class RewrittenDeleteGroup(GroupOutcome[DeleteFileGroup]):
    """A group and the delete files its rewrite wrote, or why the rewrite failed;
    ``dangling_rows``: its rows dropped because their data file is gone; ``merged``: the
    group's existing deletion vectors merged into new ones (replaced with its files)."""

    dangling_rows: int = 0
    merged: list[DataFile] = field(default_factory=list)


@dataclass
class RewritePositionDeletesResult(GroupRewriteResult):
    """``dangling_rows_removed``: delete rows dropped because their data file is gone."""

    dangling_rows_removed: int = 0


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


def _bins(entries: Sequence[ManifestEntry], max_size: int) -> list[list[ManifestEntry]]:
    """First-fit decreasing by size, ties by path."""
    by_path = sorted(entries, key=lambda e: e.data_file.file_path)
    return bin_pack(by_path, lambda e: e.data_file.file_size_in_bytes, max_size)


async def _live_entries(io: FileIO, snapshot: Snapshot) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """The snapshot's live data entries and its live delete entries."""
    walker = ManifestWalker(io)
    data: list[ManifestEntry] = []
    deletes: list[ManifestEntry] = []
    for m in await walker.manifests(snapshot):
        for e in await walker.entries(m):
            if e.is_live:
                (data if m.content == ManifestContent.DATA else deletes).append(e)
    return data, deletes


async def _live_files(io: FileIO, snapshot: Snapshot) -> tuple[list[str], list[ManifestEntry]]:
    """The snapshot's live data file paths and its live delete entries."""
    data, deletes = await _live_entries(io, snapshot)
    return sorted(e.data_file.file_path for e in data), deletes


def _is_v2_position_file(f: DataFile) -> bool:
    return f.content == DataFileContent.POSITION_DELETES and not f.is_deletion_vector


async def plan_vector_groups(io: FileIO, md: TableMetadata) -> list[DeleteFileGroup]:
    """The groups turning the current snapshot's v2 position delete files into deletion
    vectors (v3): every such file, one group per partition, each with the live vectors of
    the partition's data files its rows may name (merged into the new ones)."""
    snapshot = md.current_snapshot()
    if snapshot is None:
        return []
    data, deletes = await _live_entries(io, snapshot)
    live: dict[tuple[int, tuple[Any, ...]], list[str]] = {}
    for e in data:
        live.setdefault((e.data_file.spec_id, tuple(e.data_file.partition)), []).append(e.data_file.file_path)
    vectors: dict[str, ManifestEntry] = {}
    by_partition: dict[tuple[int, tuple[Any, ...]], list[ManifestEntry]] = {}
    for e in deletes:
        f = e.data_file
        if f.is_deletion_vector and f.referenced_data_file is not None:
            vectors[f.referenced_data_file] = e
        elif _is_v2_position_file(f):
            by_partition.setdefault((f.spec_id, tuple(f.partition)), []).append(e)
    groups: list[DeleteFileGroup] = []
    for key, entries in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        entries.sort(key=lambda e: e.data_file.file_path)
        files = tuple(e.data_file for e in entries)
        named = _may_name(files, sorted(live.get(key, ())))
        merged = sorted((vectors[p] for p in named if p in vectors), key=lambda e: e.data_file.file_path)
        seqs = [e.sequence_number for e in (*entries, *merged) if e.sequence_number is not None]
        groups.append(
            DeleteFileGroup(
                index=len(groups),
                spec_id=key[0],
                partition=key[1],
                files=files,
                sequence_number=max(seqs) if seqs else None,
                live_data_files=named,
                to_vectors=True,
                vectors=tuple(e.data_file for e in merged),
            )
        )
    return groups


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
        for members in _bins(entries, opts.max_group_size):
            size = sum(e.data_file.file_size_in_bytes for e in members)
            keep = (
                opts.rewrite_all
                or len(members) >= opts.min_input_files
                or (len(members) > 1 and size > opts.target_file_size_bytes)
                or size > opts.max_group_size
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
    behind). ``task_id`` must differ between the groups (and attempts) of one job. A
    ``to_vectors`` group writes deletion vectors instead (``_vector_group``)."""
    tables = []
    for f in group.files:
        data = await io.read(f.file_path)
        tables.append(await anyio.to_thread.run_sync(_position_rows, data, f))
    rows, dangling = await anyio.to_thread.run_sync(_kept_rows, tables, group.live_data_files)
    if group.to_vectors:
        return await _vector_group(io, job, group, rows, dangling, task_id)
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


def _by_data_file(rows: pa.Table) -> list[tuple[str, np.ndarray]]:
    """Positions per data file of rows sorted by (file_path, pos)."""
    if not rows.num_rows:
        return []
    paths = rows.column("file_path").combine_chunks().dictionary_encode()
    codes = paths.indices.to_numpy(zero_copy_only=False)
    pos = rows.column("pos").to_numpy().astype(np.int64)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    names = paths.dictionary.to_pylist()
    return [(str(names[codes[a]]), pos[a:b]) for a, b in zip(starts, ends, strict=True)]


def _vector_target(group: DeleteFileGroup, path: str) -> DataFile:
    """The data file a vector is written for, as ``write_deletion_vectors`` needs it: its
    path, spec and partition (those of the group: a position delete applies only there)."""
    return DataFile(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=group.partition,
        record_count=0,
        file_size_in_bytes=0,
        spec_id=group.spec_id,
    )


async def _read_vector(io: FileIO, v: DataFile) -> np.ndarray:
    if v.content_offset is None or v.content_size_in_bytes is None:
        raise CorruptFileError("deletion vector without content offset and size", location=v.file_path)
    blob = await io.read_range(v.file_path, v.content_offset, v.content_size_in_bytes)
    return decode_deletion_vector(blob, v.file_path)


async def _vector_group(
    io: FileIO, job: DeleteGroupJob, group: DeleteFileGroup, rows: pa.Table, dangling: int, task_id: int
) -> RewrittenDeleteGroup:
    """One deletion vector per data file the group's live rows name, merged with the vector
    it had; all in one Puffin file."""
    existing = {v.referenced_data_file: v for v in group.vectors}
    vectors: list[tuple[DataFile, np.ndarray]] = []
    merged: list[DataFile] = []
    for path, positions in await anyio.to_thread.run_sync(_by_data_file, rows):
        old = existing.get(path)
        if old is not None:
            positions = np.union1d(positions, await _read_vector(io, old))
            merged.append(old)
        vectors.append((_vector_target(group, path), positions))
    provider = LocationProvider(job.location, job.properties, write_id=f"{job.write_id}-{task_id}")
    return RewrittenDeleteGroup(
        group, await write_deletion_vectors(io, provider, vectors), None, dangling, merged
    )


class RewritePositionDeletesChange(GroupReplace):
    """Replace the groups' position delete files (and the vectors merged into new ones) by
    the files their rewrite wrote in a ``replace`` snapshot on main, each new file with its
    group's sequence number."""

    content = ManifestContent.DELETES
    replaced = "position delete files"
    summary_key = "rewritten-delete-files"

    def __init__(self, groups: Sequence[RewrittenDeleteGroup], start: Snapshot) -> None:
        super().__init__(
            [f for g in groups for f in (*g.group.files, *g.merged)],
            [f for g in groups for f in g.added],
            start,
        )
        self.groups = list(groups)

    async def check_conflicts(self, walker: ManifestWalker, base: TableMetadata, parent: Snapshot) -> None:
        """Also: no deletion vector added since the start for a data file this change
        writes one for (a data file may have only one)."""
        since = self.since_start(base, parent)
        targets = {f.referenced_data_file for f in self.added if f.is_deletion_vector}
        if not since or not targets:
            return
        for m in await walker.manifests(parent):
            if m.content != ManifestContent.DELETES or m.added_snapshot_id not in since:
                continue
            for e in await walker.entries(m):
                f = e.data_file
                if e.is_live and e.snapshot_id in since and f.is_deletion_vector:
                    if f.referenced_data_file in targets:
                        raise CommitConflictError(
                            f"a concurrent commit added a deletion vector for {f.referenced_data_file}, "
                            "which this rewrite writes one for"
                        )

    def added_entries(self, base: TableMetadata) -> list[ManifestEntry]:
        return [
            ManifestEntry(ManifestEntryStatus.ADDED, None, g.group.sequence_number, None, f)
            for g in self.groups
            for f in g.added
        ]


async def rewrite_delete_groups_here(
    io: FileIO, job: DeleteGroupJob, groups: Sequence[DeleteFileGroup]
) -> list[RewrittenDeleteGroup]:
    """Rewrite the groups in this process, one after another (``group_rewrite.rewrite_here``)."""

    async def rewrite(g: DeleteFileGroup) -> RewrittenDeleteGroup:
        return await rewrite_delete_group(io, job, g, task_id=g.index)

    def failed(g: DeleteFileGroup, error: str) -> RewrittenDeleteGroup:
        return RewrittenDeleteGroup(g, [], error)

    partial = job.options.partial_progress_enabled
    return await rewrite_here(
        io, groups, rewrite, failed, partial_progress=partial, noun="position delete group"
    )


@dataclass
class PositionDeletePlan:
    """What a position delete rewrite rewrites: the snapshot it starts from, its groups, the
    options, and the job every group's rewrite shares (in this process or on executors)."""

    start: Snapshot
    groups: list[DeleteFileGroup]
    options: PositionDeleteRewriteOptions
    job: DeleteGroupJob

    async def commit(
        self,
        io: FileIO,
        commit: Callable[[RewritePositionDeletesChange], Awaitable[None]],
        rewritten: Sequence[RewrittenDeleteGroup],
    ) -> RewritePositionDeletesResult:
        """Commit what the groups' rewrite wrote (``commit`` commits one change): one
        ``replace`` snapshot, or with partial progress one per batch of groups."""

        def change_for(batch: list[RewrittenDeleteGroup]) -> RewritePositionDeletesChange:
            return RewritePositionDeletesChange(batch, self.start)

        result = RewritePositionDeletesResult()
        noun = "position delete group"
        committed = await commit_groups(io, commit, rewritten, self.options, change_for, result, noun=noun)
        result.dangling_rows_removed = sum(r.dangling_rows for r in committed)
        return result


async def plan_position_delete_rewrite(
    io: FileIO, md: TableMetadata, options: Mapping[str, Any] | None = None
) -> PositionDeletePlan | None:
    """The options and groups of the current snapshot's position delete files to rewrite;
    None when nothing is worth rewriting. On v3 the groups convert every v2 position delete
    file into deletion vectors (``plan_vector_groups``; the size options do not apply)."""
    opts = PositionDeleteRewriteOptions.parse(options, md.properties)
    start = md.current_snapshot()
    if start is None:
        return None
    if md.format_version >= 3:
        groups = await plan_vector_groups(io, md)
    else:
        groups = await plan_delete_groups(io, md, opts)
    if not groups:
        return None
    return PositionDeletePlan(start, groups, opts, delete_group_job(md, opts))


async def rewrite_position_deletes(
    io: FileIO,
    md: TableMetadata,
    commit: Callable[[RewritePositionDeletesChange], Awaitable[None]],
    options: Mapping[str, Any] | None = None,
) -> RewritePositionDeletesResult:
    """Plan, rewrite in this process and commit the position delete files of the current
    snapshot; see the module docstring for what is chosen and what conflicts. The Spark
    action runs the same plan and commit with the rewrite on executors."""
    plan = await plan_position_delete_rewrite(io, md, options)
    if plan is None:
        return RewritePositionDeletesResult()
    return await plan.commit(io, commit, await rewrite_delete_groups_here(io, plan.job, plan.groups))
