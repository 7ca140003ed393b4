"""Which append a commit makes: fast (one new manifest) or merging small manifests as it goes.

A table chooses by its properties (``commit.manifest-merge.enabled``, off by default here,
unlike Java): a fast append writes one small manifest, and an append that rewrites many is
slower and conflicts more; merging suits tables appended to often and rarely rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aioiceberg.commit.manifest_merge import ManifestEntries, ManifestSink, merge_manifests
from aioiceberg.commit.snapshot_producer import FastAppend, delete_quietly
from aioiceberg.errors import StoreError
from aioiceberg.io.base import FileIO
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

__all__ = ["MergeAppend", "append_for"]


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
        walker = ManifestEntries(io)
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
