"""Merging small manifests into fewer: what a merging append and ``rewrite_manifests`` share.

Live entries are rewritten as EXISTING with the ids and sequence numbers they were committed
with, so no row changes and delete files keep applying exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import anyio.to_thread

from aioiceberg.errors import ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    write_manifest,
)
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "EntrySource",
    "ManifestEntries",
    "ManifestSink",
    "carried",
    "existing_entries",
    "merge_manifests",
]


class EntrySource(Protocol):
    """Where merging reads a manifest's entries (a cache of one table's manifests)."""

    async def entries(self, manifest: ManifestFile) -> list[ManifestEntry]: ...


class ManifestEntries:
    """Reads the entries of manifests, each once, decoded off the loop."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._entries: dict[str, list[ManifestEntry]] = {}

    async def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        found = self._entries.get(manifest.manifest_path)
        if found is None:
            data = await self.io.read(manifest.manifest_path)
            found = (await anyio.to_thread.run_sync(read_manifest, data, manifest)).entries
            self._entries[manifest.manifest_path] = found
        return found


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
    """Writes the manifests of one commit attempt and remembers them for cleanup."""

    def __init__(self, io: FileIO, base: TableMetadata, snapshot_id: int, prefix: str) -> None:
        self.io = io
        self.base = base
        self.snapshot_id = snapshot_id
        self.prefix = prefix
        self.written: list[str] = []

    async def write(
        self, spec_id: int, entries: list[ManifestEntry], content: ManifestContent = ManifestContent.DATA
    ) -> ManifestFile:
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
            content,
            manifest_path=path,
        )
        await self.io.write(path, data)
        self.written.append(path)
        return manifest


async def merge_manifests(
    walker: EntrySource,
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
