"""Fewer, bigger manifests: ``rewrite_manifests`` (a ``replace`` snapshot) and merging appends
(chosen by the commit layer: ``commit.appends``, whose ``MergeAppend`` and ``append_for`` are
named here too).

Planning cost grows with the number of manifests a snapshot lists, and fast appends add
one per commit. Both paths bin-pack small data manifests of one partition spec into
manifests of about ``commit.manifest.target-size-bytes`` (8 MiB), rewriting live entries
as EXISTING with their original snapshot ids and sequence numbers, so no row changes and
delete files keep applying exactly as before. Delete manifests are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aioiceberg.commit.appends import MergeAppend, append_for
from aioiceberg.commit.manifest_merge import ManifestSink, merge_manifests
from aioiceberg.commit.requirements import AssertTableUUID, TableRequirement
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import ReplaceSnapshot
from aioiceberg.spec.manifest import ManifestContent, ManifestFile
from aioiceberg.spec.metadata import TableMetadata
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
    "small_groups",
]

MANIFEST_TARGET_SIZE = TableProperties.manifest_target_size.key
MANIFEST_MIN_MERGE_COUNT = TableProperties.manifest_min_count_to_merge.key
MANIFEST_MERGE_ENABLED = TableProperties.manifest_merge_enabled.key


@dataclass
class RewriteManifestsResult:
    snapshot_id: int | None = None
    rewritten_manifests: list[str] = field(default_factory=list)
    added_manifests: list[str] = field(default_factory=list)
    kept_manifests: int = 0


def small_groups(manifests: Sequence[ManifestFile], target: int) -> dict[int, list[ManifestFile]]:
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
        parent = base.current_snapshot()
        target = self.target or TableProperties(base.properties).manifest_target_size
        if self._walker is None:
            self._walker = ManifestWalker(io)
        walker = self._walker
        manifests = await walker.manifests(parent) if parent is not None else []
        groups = small_groups(manifests, target)
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
    io: FileIO,
    md: TableMetadata,
    target_size_bytes: int | None = None,
    *,
    after_changes: bool = False,
    walker: ManifestWalker | None = None,
) -> tuple[RewriteManifestsChange | None, RewriteManifestsResult]:
    """The change merging the current snapshot's small data manifests and its result (complete
    once committed); no change when there are fewer than two, unless ``after_changes`` (changes
    staged before it in a transaction may add manifests: it decides when it is built).
    ``walker``: one whose manifests were read already (elsewhere: on Spark executors)."""
    snap = md.current_snapshot()
    walker = walker if walker is not None else ManifestWalker(io)
    if not after_changes:
        if snap is None:
            return None, RewriteManifestsResult()
        target = target_size_bytes or TableProperties(md.properties).manifest_target_size
        manifests = await walker.manifests(snap)
        if not small_groups(manifests, target):
            return None, RewriteManifestsResult(kept_manifests=len(manifests))
    change = RewriteManifestsChange(target_size_bytes, walker)
    return change, change.result
