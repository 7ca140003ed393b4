"""What the rewrites share: manifests written per commit attempt, merging, the replace snapshot.

``rewrite_manifests`` and merging appends merge small manifests (the merging is the commit
layer's, ``commit.manifest_merge``, since a merging append uses it); ``rewrite_data_files``
rewrites the manifests that list replaced files. Both rewrites then commit a ``replace``
snapshot on main: the same rows, listed in other files or manifests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aioiceberg.commit.manifest_merge import ManifestSink, carried, existing_entries, merge_manifests
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import SnapshotProducer, rowlevel_summary
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import DataFile, ManifestFile
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, Snapshot, TableMetadata

__all__ = ["ManifestSink", "ReplaceSnapshot", "carried", "existing_entries", "merge_manifests"]


class ReplaceSnapshot(SnapshotProducer):
    """A ``replace`` snapshot on main: its id and commit uuid fixed for the whole commit."""

    def __init__(self) -> None:
        super().__init__(None, "deflate")

    async def publish(
        self,
        io: FileIO,
        base: TableMetadata,
        parent: Snapshot,
        manifests: list[ManifestFile],
        attempt: int,
        extra: Mapping[str, str],
        *,
        added: Sequence[DataFile] = (),
        removed: Sequence[DataFile] = (),
    ) -> tuple[list[TableUpdate], list[TableRequirement], str]:
        """Write this attempt's manifest list; the updates that move main to it, provided main
        is still at ``parent``, and the list's path."""
        summary = rowlevel_summary(added, removed, parent.summary, Operation.REPLACE, extra)
        snapshot, path = await self._write_snapshot(io, base, parent, manifests, attempt, summary)
        updates, requirements = self._publish(base, snapshot, MAIN_BRANCH, parent.snapshot_id)
        return updates, requirements, path
