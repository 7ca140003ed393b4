"""Row-level changes as one snapshot: remove data files, add data and delete files.

Deletes, copy-on-write rewrites, overwrites, dynamic partition overwrites and upserts all
end here: a set of data files to drop (found on the snapshot the change started from), new
data files and new delete files. Each attempt rebuilds only what depends on the parent:
manifests that hold a dropped file are rewritten with that entry marked DELETED and the
rest EXISTING (manifests without one are carried over untouched), and before rebasing
onto a parent that is not the starting snapshot, the snapshots in between are checked for
conflicts (``validate.py``). New manifests are written once: the snapshot id is fixed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aioiceberg.commit.dangling_deletes import is_dangling
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import SnapshotProducer, delete_quietly, rowlevel_summary
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.commit.validate import ConflictDetection, snapshots_since, validate_concurrent_changes
from aioiceberg.errors import CommitConflictError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
)
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = ["RemovedFile", "RowLevelChange", "rowlevel_summary"]


@dataclass(frozen=True, slots=True)
class RemovedFile:
    """A live data file to drop, as found in the starting snapshot (entry and manifest)."""

    entry: ManifestEntry
    manifest_path: str

    @property
    def file(self) -> DataFile:
        return self.entry.data_file


def _file_key(f: DataFile) -> str:
    """Identity of a content file in a table: its path, plus the blob offset for DVs (the
    vectors of one Puffin file share its path)."""
    return f.file_path if f.content_offset is None else f"{f.file_path}#{f.content_offset}"


class RowLevelChange(SnapshotProducer):
    """Drop ``removed`` data files and add data and delete files, in one snapshot.

    ``start_snapshot_id`` is the snapshot the change was computed on and ``start_manifests``
    its manifest paths: a manifest not among them (written by a concurrent commit) is opened
    to find dropped files that moved there. ``detection`` says what counts as a conflicting
    concurrent commit; ``None`` rebases unconditionally (still failing if a dropped file
    disappeared). ``removed_delete_files`` are live delete files to drop with it (a deletion
    vector replaced by a merged one); each must still be live when the change commits.
    The deletion vectors of removed data files (and on v3 the position delete files naming
    only one of them) are dropped too, found at commit time (``dangling_deletes.py``).
    """

    def __init__(
        self,
        *,
        removed: Iterable[RemovedFile] = (),
        removed_delete_files: Iterable[RemovedFile] = (),
        added_data_files: Iterable[DataFile] = (),
        added_delete_files: Iterable[DataFile] = (),
        start_snapshot_id: int | None,
        start_manifests: Iterable[str] = (),
        detection: ConflictDetection | None = None,
        operation: Operation | None = None,
        branch: str = MAIN_BRANCH,
        snapshot_properties: Mapping[str, str] | None = None,
        owns_files: bool = True,
        codec: str = "deflate",
    ) -> None:
        super().__init__(None, "null" if codec == "null" else "deflate")
        self.removed = {r.file.file_path: r for r in removed}
        self.removed_deletes = {_file_key(r.file): r for r in removed_delete_files}
        if any(r.file.content == DataFileContent.DATA for r in self.removed_deletes.values()):
            raise ValidationError("removed_delete_files must hold delete files only")
        self.added_data_files = list(added_data_files)
        self.added_delete_files = list(added_delete_files)
        if any(f.content != DataFileContent.DATA for f in self.added_data_files):
            raise ValidationError("added_data_files must hold data files only")
        if any(f.content == DataFileContent.DATA for f in self.added_delete_files):
            raise ValidationError("added_delete_files must hold delete files only")
        self.start_snapshot_id = start_snapshot_id
        self.start_manifests = frozenset(start_manifests)
        self.detection = detection
        self.operation = operation or self._default_operation()
        self.branch = branch
        self.snapshot_properties = dict(snapshot_properties or {})
        self.owns_files = owns_files
        self._new_manifests: list[ManifestFile] | None = None
        self._removed_manifests = {r.manifest_path for r in self.removed.values()} | {
            r.manifest_path for r in self.removed_deletes.values()
        }
        self._rewritten: dict[str, tuple[ManifestFile | None, set[str], dict[str, DataFile]]] = {}
        self._written: list[str] = []
        self._lists: dict[str, set[str]] = {}
        self._counter = 0

    def _default_operation(self) -> Operation:
        """As Java: deletes only -> delete; data only -> append; anything else -> overwrite."""
        if not self.added_data_files:
            return Operation.DELETE
        if not self.removed and not self.added_delete_files:
            return Operation.APPEND
        return Operation.OVERWRITE

    @property
    def is_empty(self) -> bool:
        return not (self.removed or self.removed_deletes or self.added_data_files or self.added_delete_files)

    def _manifest_path(self, base: TableMetadata) -> str:
        self._counter += 1
        path = TableProperties.of(base.properties).metadata_file(
            base.location, f"{self.commit_uuid}-m{self._counter}.avro"
        )
        self._written.append(path)
        return path

    async def _write_new_manifests(self, io: FileIO, base: TableMetadata) -> list[ManifestFile]:
        if self._new_manifests is not None:
            return self._new_manifests
        out: list[ManifestFile] = []
        for content, files in (
            (ManifestContent.DATA, self.added_data_files),
            (ManifestContent.DELETES, self.added_delete_files),
        ):
            by_spec: dict[int, list[DataFile]] = {}
            for f in files:
                by_spec.setdefault(f.spec_id, []).append(f)
            for spec_id, group in sorted(by_spec.items()):
                spec = base.spec_by_id(spec_id)
                if spec is None:
                    raise ValidationError(f"partition spec {spec_id} of new files is not in the table")
                path = self._manifest_path(base)
                entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in group]
                out.append(await self._write_manifest_file(io, base, path, spec, entries, content))
        self._new_manifests = out
        return out

    async def _rewrite(
        self, io: FileIO, base: TableMetadata, mf: ManifestFile
    ) -> tuple[ManifestFile | None, set[str], dict[str, DataFile]]:
        """The manifest with our dropped files marked DELETED, or None when it holds none; the
        keys of the dropped files we named, and the dangling delete files dropped with them."""
        cached = self._rewritten.get(mf.manifest_path)
        if cached is not None:
            return cached
        manifest = read_manifest(await io.read(mf.manifest_path), mf)
        is_data = mf.content == ManifestContent.DATA
        targets: Mapping[str, RemovedFile] = self.removed if is_data else self.removed_deletes
        live = [e for e in manifest.entries if e.is_live]
        hits = {_file_key(e.data_file) for e in live if _file_key(e.data_file) in targets}
        dangling = {
            _file_key(e.data_file): e.data_file
            for e in live
            if not is_data
            and _file_key(e.data_file) not in targets
            and is_dangling(e.data_file, self.removed, base.format_version)
        }
        if not hits and not dangling:
            self._rewritten[mf.manifest_path] = (None, hits, dangling)
            return None, hits, dangling
        entries: list[ManifestEntry] = []
        for e in live:  # deletions recorded by older snapshots are history, not carried on
            key = _file_key(e.data_file)
            status = (
                ManifestEntryStatus.DELETED
                if key in targets or key in dangling
                else ManifestEntryStatus.EXISTING
            )
            entries.append(
                ManifestEntry(status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
            )
        spec = base.spec_by_id(mf.partition_spec_id)
        if spec is None:
            raise ValidationError(
                f"{mf.manifest_path}: partition spec {mf.partition_spec_id} is not in the table"
            )
        path = self._manifest_path(base)
        rewritten = await self._write_manifest_file(io, base, path, spec, entries, mf.content)
        self._rewritten[mf.manifest_path] = (rewritten, hits, dangling)
        return rewritten, hits, dangling

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        if self.is_empty:
            raise ValidationError("a row-level change needs files to remove or add")
        if base.snapshot_by_id(self.snapshot_id) is not None:
            raise ValidationError(f"snapshot {self.snapshot_id} is already in the table")
        parent = base.snapshot_by_ref(self.branch)
        parent_id = parent.snapshot_id if parent is not None else None
        if parent_id != self.start_snapshot_id:
            between = snapshots_since(base, parent, self.start_snapshot_id)
            if self.detection is not None:
                await validate_concurrent_changes(io, base, between, self.detection)
        carried: list[ManifestFile] = []
        found: set[str] = set()
        found_deletes: set[str] = set()
        dangling: dict[str, DataFile] = {}
        # DVs exist from v3 on; before that no removal leaves a delete file to drop
        sweep_specs = {r.file.spec_id for r in self.removed.values()} if base.format_version >= 3 else set()
        for mf in await self._manifests_of(io, parent):
            is_data = mf.content == ManifestContent.DATA
            named = bool(self.removed if is_data else self.removed_deletes) and (
                mf.manifest_path not in self.start_manifests or self._may_hold_removed(mf)
            )
            sweep = (
                not is_data
                and mf.partition_spec_id in sweep_specs
                and (mf.has_added_files() or mf.has_existing_files())
            )
            if named or sweep:
                rewritten, hits, dropped = await self._rewrite(io, base, mf)
                (found if is_data else found_deletes).update(hits)
                dangling.update(dropped)
                carried.append(rewritten if rewritten is not None else mf)
            else:
                carried.append(mf)
        missing = set(self.removed) - found
        if missing:
            raise CommitConflictError(
                f"{len(missing)} data file(s) this change removes are no longer in the table, "
                f"e.g. {sorted(missing)[0]}"
            )
        missing = set(self.removed_deletes) - found_deletes
        if missing:
            raise CommitConflictError(
                f"{len(missing)} delete file(s) this change replaces are no longer in the table, "
                f"e.g. {sorted(missing)[0]}"
            )
        manifests = [*await self._write_new_manifests(io, base), *carried]
        summary = rowlevel_summary(
            [*self.added_data_files, *self.added_delete_files],
            [
                *(r.file for r in (*self.removed.values(), *self.removed_deletes.values())),
                *dangling.values(),
            ],
            parent.summary if parent is not None else None,
            self.operation,
            self.snapshot_properties,
        )
        snapshot, path = await self._write_snapshot(io, base, parent, manifests, attempt, summary)
        self._lists[path] = {m.manifest_path for m in manifests}
        return self._publish(base, snapshot, self.branch, parent_id)

    def _may_hold_removed(self, mf: ManifestFile) -> bool:
        return mf.manifest_path in self._removed_manifests

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        snap = metadata.snapshot_by_id(self.snapshot_id)
        keep_list = snap.manifest_list if snap is not None else None
        keep = self._lists.get(keep_list or "", set())
        stale = [p for p in self._lists if p != keep_list]
        stale += [p for p in self._written if p not in keep]
        await delete_quietly(io, stale)

    async def aborted(self, io: FileIO) -> None:
        paths = [*self._lists, *self._written]
        if self.owns_files:
            paths += [f.file_path for f in self.added_data_files]
            paths += [f.file_path for f in self.added_delete_files]
        await delete_quietly(io, paths)
