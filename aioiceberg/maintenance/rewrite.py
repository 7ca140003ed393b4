"""What the rewrites share: manifests written per commit attempt, merging, the replace snapshot.

``rewrite_manifests`` and merging appends merge small manifests; ``rewrite_data_files``
rewrites the manifests that list replaced files. Both rewrites then commit a ``replace``
snapshot on main: the same rows, listed in other files or manifests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import SnapshotProducer, rowlevel_summary
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.files import ManifestWalker
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, Snapshot, TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = ["ManifestSink", "ReplaceSnapshot", "carried", "existing_entries", "merge_manifests"]


def carried(entry: ManifestEntry, status: ManifestEntryStatus) -> ManifestEntry:
    """``entry`` in a rewritten manifest: the ids and sequence numbers it was committed with
    are kept, so no row changes and delete files keep applying exactly as before."""
    return ManifestEntry(
        status, entry.snapshot_id, entry.sequence_number, entry.file_sequence_number, entry.data_file
    )


def existing_entries(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """Live entries as EXISTING."""
    return [carried(e, ManifestEntryStatus.EXISTING) for e in entries if e.is_live]


class ManifestSink:
    """Writes the data manifests of one commit attempt and remembers them for cleanup."""

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
        path = TableProperties.of(self.base.properties).metadata_file(
            self.base.location, f"{self.prefix}-m{len(self.written)}.avro"
        )
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


async def merge_manifests(
    walker: ManifestWalker,
    sink: ManifestSink,
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
        entries = existing_entries(await walker.entries(m))
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
