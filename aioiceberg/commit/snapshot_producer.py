"""Snapshot producers: changes that add a snapshot, rebuilt cheaply on every retry.

A fast append writes its data files and its one manifest once (the snapshot id is fixed
for the whole commit, so the manifest stays valid); each attempt only writes a manifest
list carrying the current parent's manifests, then the metadata. The fixed snapshot id
is also how an unacknowledged commit is recognised later.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aioiceberg.commit.requirements import AssertRefSnapshotId, AssertTableUUID, TableRequirement
from aioiceberg.commit.updates import AddSnapshot, SetSnapshotRef, TableUpdate
from aioiceberg.errors import StoreError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    snapshot_manifests,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.manifest.writer import Codec, assign_first_row_ids
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, Snapshot, Summary, TableMetadata
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "Change",
    "FastAppend",
    "MetadataChange",
    "SnapshotProducer",
    "delete_quietly",
    "new_snapshot_id",
    "rowlevel_summary",
    "snapshot_summary",
]


def new_snapshot_id() -> int:
    """A random positive 63-bit id: unique without coordination, as Java and PyIceberg do."""
    return uuid.uuid4().int & ((1 << 63) - 1)


class Change(Protocol):
    """One part of a commit: builds its updates and requirements on a given base."""

    @property
    def snapshot_id(self) -> int | None: ...

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]: ...

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        """The commit landed: delete leftovers of attempts that lost."""

    async def aborted(self, io: FileIO) -> None:
        """The commit definitely did not land: delete everything this change wrote."""


@dataclass
class MetadataChange:
    """Updates that do not depend on table contents (properties, location...)."""

    updates: list[TableUpdate]
    requirements: list[TableRequirement] = field(default_factory=list)

    @property
    def snapshot_id(self) -> int | None:
        return None

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        return list(self.updates), [AssertTableUUID(base.table_uuid), *self.requirements]

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        return None

    async def aborted(self, io: FileIO) -> None:
        return None


_TOTALS = (
    ("total-data-files", "added-data-files", "deleted-data-files"),
    ("total-delete-files", "added-delete-files", "removed-delete-files"),
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    ("total-position-deletes", "added-position-deletes", "removed-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes", "removed-equality-deletes"),
)


def _delete_file_kind(verb: str, f: DataFile) -> str:
    """The summary key counting ``f``: deletion vectors are ``*-dvs``, as Java counts them."""
    if f.is_deletion_vector:
        return f"{verb}-dvs"
    pos = f.content == DataFileContent.POSITION_DELETES
    return f"{verb}-position-delete-files" if pos else f"{verb}-equality-delete-files"


def _content_size(f: DataFile) -> int:
    """A DV's size is its blob's: the vectors of one Puffin file share its file size."""
    return (
        f.content_size_in_bytes if f.is_deletion_vector and f.content_size_in_bytes else f.file_size_in_bytes
    )


def rowlevel_summary(
    added: Sequence[DataFile],
    removed: Sequence[DataFile],
    previous: Summary | None,
    operation: Operation,
    extra: Mapping[str, str] | None = None,
) -> Summary:
    """The summary Java writes for overwrites and deletes: added and removed counts plus totals."""
    counts: dict[str, int] = {}

    def bump(key: str, value: int) -> None:
        counts[key] = counts.get(key, 0) + value

    for f in added:
        if f.content == DataFileContent.DATA:
            bump("added-data-files", 1)
            bump("added-records", f.record_count)
        else:
            bump("added-delete-files", 1)
            pos = f.content == DataFileContent.POSITION_DELETES
            bump("added-position-deletes" if pos else "added-equality-deletes", f.record_count)
            bump(_delete_file_kind("added", f), 1)
        bump("added-files-size", _content_size(f))
    for f in removed:
        if f.content == DataFileContent.DATA:
            bump("deleted-data-files", 1)
            bump("deleted-records", f.record_count)
        else:
            bump("removed-delete-files", 1)
            pos = f.content == DataFileContent.POSITION_DELETES
            bump("removed-position-deletes" if pos else "removed-equality-deletes", f.record_count)
            bump(_delete_file_kind("removed", f), 1)
        bump("removed-files-size", _content_size(f))
    props = {k: str(v) for k, v in counts.items() if v}
    props["changed-partition-count"] = str(len({(f.spec_id, f.partition) for f in [*added, *removed]}))
    for total, plus, minus in _TOTALS:
        before = 0
        if previous is not None:
            try:
                before = int(previous.get(total) or 0)
            except ValueError:
                before = 0
        props[total] = str(max(0, before + counts.get(plus, 0) - counts.get(minus, 0)))
    props.update(extra or {})
    return Summary(operation, props)


def snapshot_summary(
    added: Sequence[DataFile],
    previous: Summary | None,
    operation: Operation = Operation.APPEND,
    extra: Mapping[str, str] | None = None,
) -> Summary:
    """The summary Java and PyIceberg write for an append: added counts plus running totals."""
    return rowlevel_summary(added, (), previous, operation, extra)


class SnapshotProducer:
    """What the changes that add one snapshot share.

    The snapshot id and commit uuid are fixed for the whole commit; the current parent's
    manifests are read once per parent across retries; manifests and each attempt's
    manifest list are written under the table's metadata folder.
    """

    def __init__(self, snapshot_id: int | None, codec: str) -> None:
        self._snapshot_id = snapshot_id if snapshot_id is not None else new_snapshot_id()
        self.commit_uuid = uuid.uuid4()
        self.codec = codec
        self._parent_manifests: dict[int, list[ManifestFile]] = {}

    @property
    def snapshot_id(self) -> int:
        return self._snapshot_id

    @property
    def _avro_codec(self) -> Codec:
        return "null" if self.codec == "null" else "deflate"

    def _publish(
        self, base: TableMetadata, snapshot: Snapshot, branch: str, parent_id: int | None
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        """Add the snapshot and move the branch to it, provided the branch still points at the parent.

        Moving a branch keeps its retention settings; tags never move by a commit.
        """
        ref = base.refs.get(branch)
        if ref is not None and not ref.is_branch:
            raise ValidationError(f"{branch!r} is a tag; commits go to branches")
        updates: list[TableUpdate] = [
            AddSnapshot(snapshot),
            SetSnapshotRef(
                snapshot.snapshot_id,
                branch,
                min_snapshots_to_keep=ref.min_snapshots_to_keep if ref is not None else None,
                max_snapshot_age_ms=ref.max_snapshot_age_ms if ref is not None else None,
                max_ref_age_ms=ref.max_ref_age_ms if ref is not None else None,
            ),
        ]
        return updates, [AssertTableUUID(base.table_uuid), AssertRefSnapshotId(branch, parent_id)]

    async def _manifests_of(self, io: FileIO, parent: Snapshot | None) -> list[ManifestFile]:
        if parent is None:
            return []
        found = self._parent_manifests.get(parent.snapshot_id)
        if found is None:
            found = await snapshot_manifests(io, parent)
            self._parent_manifests = {parent.snapshot_id: found}  # only the latest parent is reused
        return found

    async def _write_manifest_file(
        self,
        io: FileIO,
        base: TableMetadata,
        path: str,
        spec: PartitionSpec,
        entries: list[ManifestEntry],
        content: ManifestContent,
    ) -> ManifestFile:
        data, manifest = write_manifest(
            entries,
            spec,
            base.schema(),
            base.format_version,
            self.snapshot_id,
            content,
            self._avro_codec,
            manifest_path=path,
        )
        await io.write(path, data)
        return manifest

    async def _write_snapshot(
        self,
        io: FileIO,
        base: TableMetadata,
        parent: Snapshot | None,
        manifests: list[ManifestFile],
        attempt: int,
        summary: Summary,
    ) -> tuple[Snapshot, str]:
        """Write this attempt's manifest list of ``manifests``: the snapshot naming it, and its path."""
        parent_id = parent.snapshot_id if parent is not None else None
        sequence_number = base.next_sequence_number()
        first_row_id = None
        added_rows = None
        if base.format_version >= 3:
            first_row_id = base.next_row_id or 0
            _, next_row_id = assign_first_row_ids(manifests, first_row_id)
            added_rows = next_row_id - first_row_id
        path = TableProperties.of(base.properties).metadata_file(
            base.location, f"snap-{self.snapshot_id}-{attempt}-{self.commit_uuid}.avro"
        )
        data = write_manifest_list(
            manifests,
            base.format_version,
            self.snapshot_id,
            parent_id,
            sequence_number if base.format_version >= 2 else None,
            first_row_id,
            self._avro_codec,
        )
        await io.write(path, data)
        snapshot = Snapshot(
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent_id,
            sequence_number=sequence_number,
            timestamp_ms=max(int(time.time() * 1000), base.last_updated_ms),
            manifest_list=path,
            summary=summary,
            schema_id=base.current_schema_id,
            first_row_id=first_row_id,
            added_rows=added_rows,
        )
        return snapshot, path


class FastAppend(SnapshotProducer):
    """Add data files in one new manifest on top of the branch's current manifests."""

    def __init__(
        self,
        data_files: Iterable[DataFile],
        *,
        branch: str = MAIN_BRANCH,
        owns_files: bool = True,
        snapshot_properties: Mapping[str, str] | None = None,
        snapshot_id: int | None = None,
        codec: str = "deflate",
    ) -> None:
        super().__init__(snapshot_id, codec)
        self.data_files = list(data_files)
        self.branch = branch
        self.owns_files = owns_files
        self.snapshot_properties = dict(snapshot_properties or {})
        self.manifest: ManifestFile | None = None
        self.manifest_lists: list[str] = []

    async def _write_manifest(self, io: FileIO, base: TableMetadata) -> ManifestFile:
        if self.manifest is not None:
            return self.manifest
        spec_ids = {f.spec_id for f in self.data_files}
        if len(spec_ids) != 1:
            raise ValidationError(f"one append writes files of one partition spec, got {sorted(spec_ids)}")
        spec = base.spec_by_id(spec_ids.pop())
        if spec is None:
            raise ValidationError("the data files' partition spec is not in the table")
        path = TableProperties.of(base.properties).metadata_file(base.location, f"{self.commit_uuid}-m0.avro")
        entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in self.data_files]
        self.manifest = await self._write_manifest_file(io, base, path, spec, entries, ManifestContent.DATA)
        return self.manifest

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        if not self.data_files:
            raise ValidationError("an append needs at least one data file")
        if base.snapshot_by_id(self.snapshot_id) is not None:
            raise ValidationError(f"snapshot {self.snapshot_id} is already in the table")
        manifest = await self._write_manifest(io, base)
        parent = base.snapshot_by_ref(self.branch)
        parent_id = parent.snapshot_id if parent is not None else None
        manifests = await self._compose(io, base, manifest, await self._manifests_of(io, parent), attempt)
        summary = snapshot_summary(
            self.data_files,
            parent.summary if parent is not None else None,
            extra=self.snapshot_properties,
        )
        snapshot, path = await self._write_snapshot(io, base, parent, manifests, attempt, summary)
        self.manifest_lists.append(path)
        return self._publish(base, snapshot, self.branch, parent_id)

    async def _compose(
        self,
        io: FileIO,
        base: TableMetadata,
        manifest: ManifestFile,
        parent_manifests: list[ManifestFile],
        attempt: int,
    ) -> list[ManifestFile]:
        """The new snapshot's manifests; a merging append overrides this."""
        return [manifest, *parent_manifests]

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        snap = metadata.snapshot_by_id(self.snapshot_id)
        keep = snap.manifest_list if snap is not None else None
        stale = [p for p in self.manifest_lists if p != keep]
        await delete_quietly(io, stale)

    async def aborted(self, io: FileIO) -> None:
        paths = list(self.manifest_lists)
        if self.manifest is not None:
            paths.append(self.manifest.manifest_path)
        if self.owns_files:
            paths.extend(f.file_path for f in self.data_files)
        await delete_quietly(io, paths)


async def delete_quietly(io: FileIO, paths: list[str]) -> None:
    """Cleanup is best effort: an orphan file is harmless, a failed commit report is not."""
    if not paths:
        return
    try:
        await io.delete_many(paths)
    except StoreError:
        pass
