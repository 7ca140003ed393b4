"""Fewer, bigger manifests: ``rewrite_manifests`` (a ``replace`` snapshot) and merging appends.

Planning cost grows with the number of manifests a snapshot lists, and fast appends add
one per commit. Both paths bin-pack small data manifests of one partition spec into
manifests of about ``commit.manifest.target-size-bytes`` (8 MiB), rewriting live entries
as EXISTING with their original snapshot ids and sequence numbers, so no row changes and
delete files keep applying exactly as before. Delete manifests are left as they are.

Merging on append is off by default here (``commit.manifest-merge.enabled=false``, unlike
Java): a fast append writes one small manifest, and an append that rewrites many is
slower and conflicts more; turn it on for tables appended to often and rarely rewritten.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from aioiceberg.commit.requirements import AssertRefSnapshotId, AssertTableUUID, TableRequirement
from aioiceberg.commit.snapshot_producer import FastAppend, delete_quietly, new_snapshot_id, snapshot_summary
from aioiceberg.commit.updates import AddSnapshot, SetSnapshotRef, TableUpdate
from aioiceberg.errors import StoreError, UnsupportedError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.files import MaintainedTable, ManifestWalker
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    snapshot_manifests,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, Snapshot, Summary, TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "MANIFEST_MERGE_ENABLED",
    "MANIFEST_MIN_MERGE_COUNT",
    "MANIFEST_TARGET_SIZE",
    "MergeAppend",
    "RewriteManifestsChange",
    "RewriteManifestsResult",
    "append_for",
    "rewrite_manifests",
]

MANIFEST_TARGET_SIZE = TableProperties.manifest_target_size.key
MANIFEST_MIN_MERGE_COUNT = TableProperties.manifest_min_count_to_merge.key
MANIFEST_MERGE_ENABLED = TableProperties.manifest_merge_enabled.key


def _existing(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Live entries as EXISTING, keeping the ids and sequence numbers they were committed with."""
    return [
        ManifestEntry(
            ManifestEntryStatus.EXISTING,
            e.snapshot_id,
            e.sequence_number,
            e.file_sequence_number,
            e.data_file,
        )
        for e in entries
        if e.is_live
    ]


class _ManifestSink:
    """Writes merged manifests of one commit attempt and remembers them for cleanup."""

    def __init__(self, io: FileIO, base: TableMetadata, snapshot_id: int, prefix: str) -> None:
        self.io = io
        self.base = base
        self.snapshot_id = snapshot_id
        self.prefix = prefix
        self.written: list[str] = []

    async def write(self, spec_id: int, entries: list[ManifestEntry]) -> ManifestFile:
        spec = self.base.spec_by_id(spec_id)
        if spec is None:
            raise ValidationError(f"partition spec {spec_id} is not in the table")
        path = f"{self.base.location}/metadata/{self.prefix}-m{len(self.written)}.avro"
        data, manifest = write_manifest(
            entries,
            spec,
            self.base.schema(),
            self.base.format_version,
            self.snapshot_id,
            ManifestContent.DATA,
            manifest_path=path,
        )
        await self.io.write(path, data)
        self.written.append(path)
        return manifest


async def _merge_group(
    walker: ManifestWalker,
    sink: _ManifestSink,
    spec_id: int,
    group: Sequence[ManifestFile],
    target: int,
    extra: Sequence[ManifestEntry] = (),
) -> list[ManifestFile]:
    """Rewrite ``group`` (plus ``extra`` ADDED entries) into manifests rolled at about ``target`` bytes."""
    out: list[ManifestFile] = []
    pending: list[ManifestEntry] = list(extra)
    pending_bytes = 0.0
    for m in group:
        entries = _existing(await walker.entries(m))
        per_entry = m.manifest_length / max(1, len(entries))
        for e in entries:
            pending.append(e)
            pending_bytes += per_entry
            if pending_bytes >= target:
                out.append(await sink.write(spec_id, pending))
                pending, pending_bytes = [], 0.0
    if pending:
        out.append(await sink.write(spec_id, pending))
    return out


def _check_version(md: TableMetadata) -> None:
    if md.format_version >= 3:
        raise UnsupportedError("rewriting manifests of v3 tables (row lineage) is not supported yet")


@dataclass
class RewriteManifestsResult:
    snapshot_id: int | None = None
    rewritten_manifests: list[str] = field(default_factory=list)
    added_manifests: list[str] = field(default_factory=list)
    kept_manifests: int = 0


def _small_groups(manifests: Sequence[ManifestFile], target: int) -> dict[int, list[ManifestFile]]:
    """Per partition spec, the data manifests below ``target`` when there are two or more."""
    groups: dict[int, list[ManifestFile]] = {}
    for m in manifests:
        if m.content == ManifestContent.DATA and m.manifest_length < target:
            groups.setdefault(m.partition_spec_id, []).append(m)
    return {spec_id: ms for spec_id, ms in groups.items() if len(ms) > 1}


class RewriteManifestsChange:
    """A ``replace`` snapshot on main listing the same files in fewer manifests."""

    def __init__(self, target_size_bytes: int | None = None) -> None:
        self.target = target_size_bytes
        self._snapshot_id = new_snapshot_id()
        self.commit_uuid = uuid.uuid4()
        self.written: list[str] = []
        self.result = RewriteManifestsResult(snapshot_id=self._snapshot_id)

    @property
    def snapshot_id(self) -> int:
        return self._snapshot_id

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        _check_version(base)
        parent = base.current_snapshot()
        if parent is None:
            raise ValidationError("the table has no snapshot to rewrite")
        target = self.target or TableProperties(base.properties).manifest_target_size
        walker = ManifestWalker(io)
        manifests = await walker.manifests(parent)
        groups = _small_groups(manifests, target)
        if not groups:
            raise ValidationError("no small manifests to rewrite")  # checked before committing
        sink = _ManifestSink(io, base, self._snapshot_id, f"{self.commit_uuid}-{attempt}")
        replaced = {m.manifest_path for ms in groups.values() for m in ms}
        try:
            new: list[ManifestFile] = []
            for spec_id, group in groups.items():
                new += await _merge_group(walker, sink, spec_id, group, target)
        finally:
            self.written += sink.written
        kept = [m for m in manifests if m.manifest_path not in replaced]
        self.result = RewriteManifestsResult(
            self._snapshot_id, sorted(replaced), [m.manifest_path for m in new], len(kept)
        )
        entries = sum((m.existing_files_count or 0) for m in new)
        extra = {
            "manifests-created": str(len(new)),
            "manifests-replaced": str(len(replaced)),
            "manifests-kept": str(len(kept)),
            "entries-processed": str(entries),
        }
        snapshot, list_path = await _replace_snapshot(
            io, base, parent, self._snapshot_id, [*new, *kept], attempt, self.commit_uuid, extra
        )
        self.written.append(list_path)
        return _publish(base, snapshot, parent)

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        snap = metadata.snapshot_by_id(self._snapshot_id)
        keep = {snap.manifest_list} if snap is not None and snap.manifest_list else set()
        keep |= set(self.result.added_manifests)
        await delete_quietly(io, [p for p in self.written if p not in keep])

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, self.written)


async def _replace_snapshot(
    io: FileIO,
    base: TableMetadata,
    parent: Snapshot,
    snapshot_id: int,
    manifests: list[ManifestFile],
    attempt: int,
    commit_uuid: uuid.UUID,
    extra: Mapping[str, str],
    added: Sequence[DataFile] = (),
    deleted: Sequence[DataFile] = (),
) -> tuple[Snapshot, str]:
    """Write the manifest list of a ``replace`` snapshot on top of ``parent``."""
    sequence_number = base.next_sequence_number()
    path = f"{base.location}/metadata/snap-{snapshot_id}-{attempt}-{commit_uuid}.avro"
    data = write_manifest_list(
        manifests,
        base.format_version,
        snapshot_id,
        parent.snapshot_id,
        sequence_number if base.format_version >= 2 else None,
    )
    await io.write(path, data)
    summary = snapshot_summary(added, parent.summary, Operation.REPLACE, extra)
    props = dict(summary.properties)
    if deleted:
        removed = {
            "deleted-data-files": len(deleted),
            "deleted-records": sum(f.record_count for f in deleted),
            "removed-files-size": sum(f.file_size_in_bytes for f in deleted),
        }
        for key, value in removed.items():
            props[key] = str(value)
        for total, minus in (
            ("total-data-files", "deleted-data-files"),
            ("total-records", "deleted-records"),
            ("total-files-size", "removed-files-size"),
        ):
            props[total] = str(max(0, int(props.get(total, "0")) - removed[minus]))
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=max(int(time.time() * 1000), base.last_updated_ms),
        manifest_list=path,
        summary=Summary(Operation.REPLACE, props),
        schema_id=base.current_schema_id,
    )
    return snapshot, path


def _publish(
    base: TableMetadata, snapshot: Snapshot, parent: Snapshot
) -> tuple[list[TableUpdate], list[TableRequirement]]:
    main = base.refs.get(MAIN_BRANCH)
    move = SetSnapshotRef(
        snapshot.snapshot_id,
        MAIN_BRANCH,
        min_snapshots_to_keep=main.min_snapshots_to_keep if main else None,
        max_snapshot_age_ms=main.max_snapshot_age_ms if main else None,
        max_ref_age_ms=main.max_ref_age_ms if main else None,
    )
    return [AddSnapshot(snapshot), move], [
        AssertTableUUID(base.table_uuid),
        AssertRefSnapshotId(MAIN_BRANCH, parent.snapshot_id),
    ]


async def rewrite_manifests(
    table: MaintainedTable, target_size_bytes: int | None = None
) -> RewriteManifestsResult:
    """Merge small data manifests of the current snapshot; a no-op when there are fewer than two."""
    md = table.metadata
    _check_version(md)
    snap = md.current_snapshot()
    if snap is None:
        return RewriteManifestsResult()
    target = target_size_bytes or TableProperties(md.properties).manifest_target_size
    manifests = await ManifestWalker(table.io).manifests(snap)
    if not _small_groups(manifests, target):
        return RewriteManifestsResult(kept_manifests=len(manifests))
    change = RewriteManifestsChange(target)
    await table._commit([change])
    return change.result


class MergeAppend(FastAppend):
    """A fast append that also merges small manifests, as Java's ``MergeAppend`` does.

    Per partition spec, manifests (newest first) are packed into bins of the target size;
    a bin of one manifest is kept, and the bin holding the new files is merged only when
    it has at least ``commit.manifest.min-count-to-merge`` manifests.
    """

    def __init__(
        self,
        data_files: Iterable[DataFile],
        *,
        target_size_bytes: int,
        min_count_to_merge: int,
        branch: str = MAIN_BRANCH,
        owns_files: bool = True,
        snapshot_properties: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_files, branch=branch, owns_files=owns_files, snapshot_properties=snapshot_properties
        )
        self.target = target_size_bytes
        self.min_count = min_count_to_merge
        self._merged: list[str] = []

    async def _compose(
        self,
        io: FileIO,
        base: TableMetadata,
        manifest: ManifestFile,
        parent_manifests: list[ManifestFile],
        attempt: int,
    ) -> list[ManifestFile]:
        if base.format_version >= 3:
            return [manifest, *parent_manifests]
        walker = ManifestWalker(io)
        sink = _ManifestSink(io, base, self.snapshot_id, f"{self.commit_uuid}-merge-{attempt}")
        out: list[ManifestFile] = []
        data = [manifest, *(m for m in parent_manifests if m.content == ManifestContent.DATA)]
        by_spec: dict[int, list[ManifestFile]] = {}
        for m in data:
            by_spec.setdefault(m.partition_spec_id, []).append(m)
        try:
            for spec_id, group in by_spec.items():
                bins: list[list[ManifestFile]] = []
                size = 0
                for m in group:
                    if bins and size + m.manifest_length <= self.target:
                        bins[-1].append(m)
                        size += m.manifest_length
                    else:
                        bins.append([m])
                        size = m.manifest_length
                for b in bins:
                    if len(b) == 1 or (manifest in b and len(b) < self.min_count):
                        out += b
                        continue
                    new_entries = [
                        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f)
                        for f in (self.data_files if manifest in b else ())
                    ]
                    others = [m for m in b if m is not manifest]
                    out += await _merge_group(walker, sink, spec_id, others, _FOREVER, new_entries)
        finally:
            self._merged += sink.written
        out += [m for m in parent_manifests if m.content != ManifestContent.DATA]
        return out

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        await super().committed(io, metadata)
        snap = metadata.snapshot_by_id(self.snapshot_id)
        if snap is None:
            return
        try:
            listed = {m.manifest_path for m in await snapshot_manifests(io, snap)}
        except StoreError:
            return
        mine = [*self._merged, *([self.manifest.manifest_path] if self.manifest else [])]
        await delete_quietly(io, [p for p in mine if p not in listed])

    async def aborted(self, io: FileIO) -> None:
        await super().aborted(io)
        await delete_quietly(io, self._merged)


_FOREVER = 2**62


def append_for(
    data_files: Iterable[DataFile],
    properties: TableProperties | Mapping[str, str],
    *,
    branch: str = MAIN_BRANCH,
    owns_files: bool = True,
    snapshot_properties: Mapping[str, str] | None = None,
) -> FastAppend:
    """The append a table's properties ask for: merging (``commit.manifest-merge.enabled``) or fast."""
    props = TableProperties.of(properties)
    if not props.manifest_merge_enabled:
        return FastAppend(
            data_files, branch=branch, owns_files=owns_files, snapshot_properties=snapshot_properties
        )
    return MergeAppend(
        data_files,
        target_size_bytes=props.manifest_target_size,
        min_count_to_merge=props.manifest_min_count_to_merge,
        branch=branch,
        owns_files=owns_files,
        snapshot_properties=snapshot_properties,
    )
