"""Data file compaction: bin-pack small files per partition, rewrite them, commit a ``replace``.

Rows are read through the normal read path (so deletes, deletion vectors included, are
applied: the new files hold only live rows) and written through the normal write path; the
deletion vectors of the rewritten files (and on v3 the position delete files naming only
one of them) are dropped in the same snapshot (``commit/dangling_deletes.py``). The new
files carry the data sequence number of the snapshot the rewrite started from, as Java
does: equality deletes committed while the rewrite ran still apply to them. At every
commit attempt the rewritten files must still be live and no position delete committed
since the start may touch them; otherwise the rewrite fails with ``CommitConflictError``
and its new files are deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aioiceberg.commit.dangling_deletes import is_dangling
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import CommitConflictError, ValidationError
from aioiceberg.expressions.tree import Expression
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import ManifestSink, ReplaceSnapshot, carried
from aioiceberg.read import read_to_table
from aioiceberg.scan import Planner
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.row_lineage import LINEAGE_FIELDS, with_lineage
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_data_files

__all__ = ["RewriteDataFilesChange", "RewriteDataFilesResult", "plan_bins", "plan_rewrite_data_files"]

TARGET_FILE_SIZE = TableProperties.target_file_size.key


@dataclass
class RewriteDataFilesResult:
    snapshot_id: int | None = None
    rewritten_files: list[str] = field(default_factory=list)
    added_files: list[str] = field(default_factory=list)
    groups: int = 0


def plan_bins(
    tasks: Sequence[FileScanTask], target: int, min_input_files: int = 2
) -> list[list[FileScanTask]]:
    """Small files (under 3/4 of ``target``) or files with deletes, packed per partition.

    First-fit decreasing into bins of ``target`` bytes; a bin is worth rewriting when it
    merges at least ``min_input_files`` files or drops deleted rows.
    """
    by_partition: dict[tuple[int, tuple[Any, ...]], list[FileScanTask]] = {}
    for t in tasks:
        f = t.file
        if f.file_size_in_bytes < target * 3 // 4 or t.delete_files:
            by_partition.setdefault((f.spec_id, tuple(f.partition)), []).append(t)
    out: list[list[FileScanTask]] = []
    for group in by_partition.values():
        bins: list[tuple[int, list[FileScanTask]]] = []
        for t in sorted(group, key=lambda t: -t.file.file_size_in_bytes):
            size = t.file.file_size_in_bytes
            for i, (used, members) in enumerate(bins):
                if used + size <= target:
                    members.append(t)
                    bins[i] = (used + size, members)
                    break
            else:
                bins.append((size, [t]))
        for _, members in bins:
            if len(members) >= min_input_files or any(t.delete_files for t in members):
                out.append(members)
    return out


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


async def _tasks(io: FileIO, md: TableMetadata, row_filter: str | Expression | None) -> list[FileScanTask]:
    # the lineage columns selected: tasks carry their data sequence numbers (rows keep them)
    lineage = tuple(f.name for f in LINEAGE_FIELDS) if md.format_version >= 3 else ()
    planner = Planner(
        io,
        md,
        row_filter=row_filter or "",
        selected_fields=("*", *lineage),
        snapshot_id=md.current_snapshot_id,
    )
    return [t async for t in planner.plan_files()]


async def plan_rewrite_data_files(
    io: FileIO,
    md: TableMetadata,
    target_file_size: int | None = None,
    filter: str | Expression | None = None,
    *,
    min_input_files: int = 2,
    properties: Mapping[str, str] | None = None,
) -> tuple[RewriteDataFilesChange | None, RewriteDataFilesResult]:
    """Compact the current snapshot's small files (those matching ``filter``) per partition:
    the new files are written now; the change that swaps them in, and its result, are
    returned (no change when nothing is worth compacting)."""
    start = md.current_snapshot()
    if start is None:
        return None, RewriteDataFilesResult()
    props = TableProperties({**md.properties, **(properties or {})})
    target = target_file_size or props.target_file_size
    if target <= 0:
        raise ValidationError(f"target_file_size must be positive, got {target}")
    chosen = {t.file.file_path for t in await _tasks(io, md, filter)} if filter else None
    every = await _tasks(io, md, None)
    candidates = [t for t in every if chosen is None or t.file.file_path in chosen]
    bins = plan_bins(candidates, target, min_input_files)
    if not bins:
        return None, RewriteDataFilesResult()
    schema = md.schema()
    # from v3 the rows move with their ids and sequence numbers (as Java rewrites them)
    rows_schema = with_lineage(schema, LINEAGE_FIELDS) if md.format_version >= 3 else schema
    write_props = TableProperties({**props.raw, TARGET_FILE_SIZE: str(target)})
    added: list[DataFile] = []
    deleted: list[DataFile] = []
    try:
        for members in bins:
            rows = await read_to_table(io, members, rows_schema, table_schema=schema)
            deleted += [t.file for t in members]
            if rows.num_rows:
                added += await write_data_files(
                    io,
                    rows_schema,
                    md.spec(),
                    rows,
                    LocationProvider(md.location, write_props),
                    write_props,
                )
    except BaseException:
        await delete_quietly(io, [f.file_path for f in added])
        raise
    change = RewriteDataFilesChange(deleted, added, start)
    return change, RewriteDataFilesResult(
        change.snapshot_id,
        sorted(f.file_path for f in deleted),
        sorted(f.file_path for f in added),
        len(bins),
    )
