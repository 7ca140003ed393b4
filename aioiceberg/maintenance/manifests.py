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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from aioiceberg.commit.requirements import AssertTableUUID, TableRequirement
from aioiceberg.commit.snapshot_producer import FastAppend, delete_quietly
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import StoreError, UnsupportedError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.files import ManifestWalker
from aioiceberg.maintenance.rewrite import ManifestSink, ReplaceSnapshot, merge_manifests
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    snapshot_manifests,
)
from aioiceberg.spec.metadata import MAIN_BRANCH, TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "MANIFEST_MERGE_ENABLED",
    "MANIFEST_MIN_MERGE_COUNT",
    "MANIFEST_TARGET_SIZE",
    "MergeAppend",
    "RewriteManifestsChange",
    "RewriteManifestsResult",
    "append_for",
    "plan_rewrite_manifests",
]

MANIFEST_TARGET_SIZE = TableProperties.manifest_target_size.key
MANIFEST_MIN_MERGE_COUNT = TableProperties.manifest_min_count_to_merge.key
MANIFEST_MERGE_ENABLED = TableProperties.manifest_merge_enabled.key


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
    """A ``replace`` snapshot on main listing the same files in fewer manifests.

    Replanned on every attempt's base, which in a transaction holds the snapshots of the
    changes staged before it (their manifests are merged too). A base with nothing to merge
    gets no snapshot, and ``snapshot_id`` is then None: the commit must not wait for one.
    ``result`` describes the attempt that was built last.
    """

    def __init__(self, target_size_bytes: int | None = None, walker: ManifestWalker | None = None) -> None:
        self.target = target_size_bytes
        self._walker = walker  # kept across attempts: a manifest list is read once
        self._snapshot = ReplaceSnapshot()
        self._adds_snapshot = True
        self.written: list[str] = []
        self.result = RewriteManifestsResult(snapshot_id=self._snapshot.snapshot_id)

    @property
    def snapshot_id(self) -> int | None:
        return self._snapshot.snapshot_id if self._adds_snapshot else None

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        _check_version(base)
        parent = base.current_snapshot()
        target = self.target or TableProperties(base.properties).manifest_target_size
        if self._walker is None:
            self._walker = ManifestWalker(io)
        walker = self._walker
        manifests = await walker.manifests(parent) if parent is not None else []
        groups = _small_groups(manifests, target)
        result = self.result
        self._adds_snapshot = parent is not None and bool(groups)
        if parent is None or not groups:
            result.snapshot_id, result.rewritten_manifests, result.added_manifests = None, [], []
            result.kept_manifests = len(manifests)
            return [], [AssertTableUUID(base.table_uuid)]
        snapshot_id = self._snapshot.snapshot_id
        sink = ManifestSink(io, base, snapshot_id, f"{self._snapshot.commit_uuid}-{attempt}")
        replaced = {m.manifest_path for ms in groups.values() for m in ms}
        try:
            new: list[ManifestFile] = []
            for spec_id, group in groups.items():
                new += await merge_manifests(walker, sink, spec_id, group, target)
        finally:
            self.written += sink.written
        kept = [m for m in manifests if m.manifest_path not in replaced]
        result.snapshot_id = snapshot_id
        result.rewritten_manifests = sorted(replaced)
        result.added_manifests = [m.manifest_path for m in new]
        result.kept_manifests = len(kept)
        entries = sum((m.existing_files_count or 0) for m in new)
        extra = {
            "manifests-created": str(len(new)),
            "manifests-replaced": str(len(replaced)),
            "manifests-kept": str(len(kept)),
            "entries-processed": str(entries),
        }
        updates, requirements, list_path = await self._snapshot.publish(
            io, base, parent, [*new, *kept], attempt, extra
        )
        self.written.append(list_path)
        return updates, requirements

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        snap = metadata.snapshot_by_id(self._snapshot.snapshot_id)
        keep = {snap.manifest_list} if snap is not None and snap.manifest_list else set()
        if snap is not None:
            keep |= set(self.result.added_manifests)
        await delete_quietly(io, [p for p in self.written if p not in keep])

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, self.written)


async def plan_rewrite_manifests(
    io: FileIO, md: TableMetadata, target_size_bytes: int | None = None, *, after_changes: bool = False
) -> tuple[RewriteManifestsChange | None, RewriteManifestsResult]:
    """The change merging the current snapshot's small data manifests and its result (complete
    once committed); no change when there are fewer than two, unless ``after_changes`` (changes
    staged before it in a transaction may add manifests: it decides when it is built)."""
    _check_version(md)
    snap = md.current_snapshot()
    walker = ManifestWalker(io)
    if not after_changes:
        if snap is None:
            return None, RewriteManifestsResult()
        target = target_size_bytes or TableProperties(md.properties).manifest_target_size
        manifests = await walker.manifests(snap)
        if not _small_groups(manifests, target):
            return None, RewriteManifestsResult(kept_manifests=len(manifests))
    change = RewriteManifestsChange(target_size_bytes, walker)
    return change, change.result


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
        sink = ManifestSink(io, base, self.snapshot_id, f"{self.commit_uuid}-merge-{attempt}")
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
                    out += await merge_manifests(walker, sink, spec_id, others, _FOREVER, new_entries)
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
