"""Snapshot expiration: drop old snapshots (and aged refs), then the files only they reached.

Retention follows Java's ``RemoveSnapshots``: each branch keeps the ancestors that are
within its ``min-snapshots-to-keep`` or younger than its ``max-snapshot-age-ms`` (table
defaults ``history.expire.*``, overridden by ``retain_last`` / ``older_than``); tags keep
their snapshot; refs older than their ``max-ref-age-ms`` are removed (never main);
snapshots no ref reaches are kept only while younger than the cutoff.

Files are deleted by the change's post-commit hook, so only once the commit is known to
have landed, and chosen from the metadata actually committed: a file is deleted when an
expired snapshot reached it and no remaining one does. A failed commit or an unknown
outcome (``CommitStateUnknownError``) deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from aioiceberg.commit.requirements import AssertTableUUID, TableRequirement
from aioiceberg.commit.updates import RemoveSnapshotRef, RemoveSnapshots, TableUpdate
from aioiceberg.errors import IcebergError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.reachable import ManifestWalker, delete_files, statistics_paths
from aioiceberg.spec.metadata import MAIN_BRANCH, Snapshot, TableMetadata
from aioiceberg.spec.properties import TableProperties

__all__ = [
    "MAX_REF_AGE_MS",
    "MAX_SNAPSHOT_AGE_MS",
    "MIN_SNAPSHOTS_TO_KEEP",
    "ExpireResult",
    "ExpireSnapshotsChange",
    "expiry_millis",
    "plan_expire_snapshots",
    "plan_expiry",
    "preview_expire_snapshots",
]

MAX_SNAPSHOT_AGE_MS = TableProperties.max_snapshot_age_ms.key
MIN_SNAPSHOTS_TO_KEEP = TableProperties.min_snapshots_to_keep.key
MAX_REF_AGE_MS = TableProperties.max_ref_age_ms.key


@dataclass
class ExpireResult:
    """What one expiry removed from the metadata and deleted from the store."""

    expired_snapshot_ids: list[int] = field(default_factory=list)
    removed_refs: list[str] = field(default_factory=list)
    deleted_manifest_lists: list[str] = field(default_factory=list)
    deleted_manifests: list[str] = field(default_factory=list)
    deleted_content_files: list[str] = field(default_factory=list)
    deleted_statistics_files: list[str] = field(default_factory=list)
    failed_deletes: list[str] = field(default_factory=list)
    cleanup_error: str | None = None
    """Why some or all of the expired snapshots' files were not deleted although the snapshots
    expired (those files are in ``failed_deletes`` or left as orphans)."""
    dry_run: bool = False
    """Nothing was committed nor deleted: the lists say what an expiry would remove now."""

    @property
    def deleted_files(self) -> list[str]:
        return sorted(
            self.deleted_manifest_lists
            + self.deleted_manifests
            + self.deleted_content_files
            + self.deleted_statistics_files
        )


def expiry_millis(value: dt.datetime | int | None) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is None:
        raise ValidationError("older_than must be timezone-aware (a naive time is ambiguous)")
    return int(value.timestamp() * 1000)


def plan_expiry(
    md: TableMetadata,
    now_ms: int,
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
) -> tuple[set[int], list[str]]:
    """The snapshot ids to remove and the refs to drop, given the table's retention rules."""
    if retain_last is not None and retain_last < 1:
        raise ValidationError(f"retain_last must be at least 1, got {retain_last}")
    props = TableProperties(md.properties)
    default_cutoff = older_than_ms if older_than_ms is not None else now_ms - props.max_snapshot_age_ms
    default_min = retain_last if retain_last is not None else props.min_snapshots_to_keep
    default_ref_age = props.max_ref_age_ms

    removed_refs: list[str] = []
    kept_refs = {}
    for name, ref in md.refs.items():
        snap = md.snapshot_by_id(ref.snapshot_id)
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
        if name != MAIN_BRANCH and (snap is None or now_ms - snap.timestamp_ms > max_age):
            removed_refs.append(name)
        else:
            kept_refs[name] = ref

    retain: set[int] = set()
    for ref in kept_refs.values():
        if not ref.is_branch:
            retain.add(ref.snapshot_id)
            continue
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else default_cutoff
        keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else default_min
        kept = 0
        for snap in md.ancestors_of(ref.snapshot_id):
            if kept < keep or snap.timestamp_ms >= cutoff:
                retain.add(snap.snapshot_id)
                kept += 1
            else:
                break

    reachable_from_refs: set[int] = set()
    for ref in kept_refs.values():  # as Java: an aged-out ref no longer claims its history
        reachable_from_refs |= {s.snapshot_id for s in md.ancestors_of(ref.snapshot_id)}
    for snap in md.snapshots:
        if snap.snapshot_id not in reachable_from_refs and snap.timestamp_ms >= default_cutoff:
            retain.add(snap.snapshot_id)

    explicit = set(snapshot_ids)
    heads = {ref.snapshot_id: name for name, ref in kept_refs.items()}
    for sid in explicit:
        if sid in heads:
            raise ValidationError(f"cannot expire snapshot {sid}: ref {heads[sid]!r} points at it")
        if md.snapshot_by_id(sid) is None:
            raise ValidationError(f"cannot expire snapshot {sid}: it is not in the table")
    remove = {s.snapshot_id for s in md.snapshots if s.snapshot_id not in retain} | explicit
    return remove, sorted(removed_refs)


class ExpireSnapshotsChange:
    """Removes the planned snapshots and refs; replanned on the latest metadata at every attempt.

    Once the commit is known to have landed, ``committed`` fills ``result`` from the
    metadata actually committed and, with ``clean_files``, deletes the files only the
    expired snapshots reached. A commit that failed or whose outcome is unknown never calls
    it, so nothing is deleted then.
    """

    def __init__(
        self,
        older_than_ms: int | None,
        retain_last: int | None,
        snapshot_ids: Iterable[int] = (),
        now_ms: int | None = None,
        *,
        walker: ManifestWalker | None = None,
    ) -> None:
        self.older_than_ms = older_than_ms
        self.retain_last = retain_last
        self.snapshot_ids = tuple(snapshot_ids)
        self.now_ms = now_ms
        self.walker = walker
        self.base: TableMetadata | None = None
        self.removed_ids: set[int] = set()
        self.removed_refs: list[str] = []
        self.result = ExpireResult()

    @property
    def snapshot_id(self) -> int | None:
        return None

    def plan(self, md: TableMetadata) -> tuple[set[int], list[str]]:
        now = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        return plan_expiry(md, now, self.older_than_ms, self.retain_last, self.snapshot_ids)

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        self.base = base
        self.removed_ids, self.removed_refs = self.plan(base)
        updates: list[TableUpdate] = [RemoveSnapshotRef(name) for name in self.removed_refs]
        if self.removed_ids:
            updates.append(RemoveSnapshots(tuple(sorted(self.removed_ids))))
        return updates, [AssertTableUUID(base.table_uuid)]

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        before = self.base
        if before is None:
            return
        kept_ids = {s.snapshot_id for s in metadata.snapshots}
        expired = [s for s in before.snapshots if s.snapshot_id not in kept_ids]
        result = self.result
        result.expired_snapshot_ids = sorted(s.snapshot_id for s in expired)
        result.removed_refs = sorted(set(before.refs) - set(metadata.refs))
        if self.walker is not None and expired:
            await _delete_expired_files(self.walker, before, metadata, expired, result)

    async def aborted(self, io: FileIO) -> None:
        return None


async def _files_only_expired(
    walker: ManifestWalker,
    before: TableMetadata,
    expired: list[Snapshot],
    kept_snapshots: list[Snapshot],
    kept_stats: dict[str, str],
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Content files, manifests, manifest lists and statistics files that ``expired`` reached
    and ``kept_snapshots`` do not: what an expiry deletes, and what its dry run lists."""
    gone = await walker.reach(expired, missing_ok=True)
    kept = await walker.reach(kept_snapshots)
    manifest_lists = [p for k, p in gone.manifest_lists.items() if k not in kept.manifest_lists]
    manifests = [p for k, p in gone.manifests.items() if k not in kept.manifests]
    content_candidates = {**gone.content, **gone.deleted_content, **kept.deleted_content}
    content = [p for k, p in content_candidates.items() if k not in kept.content]
    stats = [
        p
        for k, p in statistics_paths(before, {s.snapshot_id for s in expired}).items()
        if k not in kept_stats
    ]
    return content, manifests, manifest_lists, stats


async def _delete_expired_files(
    walker: ManifestWalker,
    before: TableMetadata,
    after: TableMetadata,
    expired: list[Snapshot],
    result: ExpireResult,
) -> None:
    """Delete what ``expired`` reached and no snapshot of ``after`` does; best effort, as a
    post-commit step must be: a file that cannot be read or deleted is left for orphan removal."""
    try:
        content, manifests, manifest_lists, stats = await _files_only_expired(
            walker, before, expired, list(after.snapshots), statistics_paths(after)
        )
    except IcebergError as exc:
        result.cleanup_error = f"no file deleted: the remaining snapshots' files cannot be listed: {exc}"
        return

    # Data first, lists last: an interrupted run leaves orphans, never dangling references.
    failed: list[str] = []
    for group in (content, manifests, manifest_lists, stats):
        failed += await delete_files(walker.io, group)
    bad = set(failed)
    result.deleted_content_files = sorted(p for p in content if p not in bad)
    result.deleted_manifests = sorted(p for p in manifests if p not in bad)
    result.deleted_manifest_lists = sorted(p for p in manifest_lists if p not in bad)
    result.deleted_statistics_files = sorted(p for p in stats if p not in bad)
    result.failed_deletes = sorted(bad)


async def plan_expire_snapshots(
    io: FileIO,
    md: TableMetadata,
    older_than: dt.datetime | int | None = None,
    retain_last: int | None = None,
    *,
    snapshot_ids: Iterable[int] = (),
    clean_files: bool = True,
    now_ms: int | None = None,
    after_changes: bool = False,
) -> tuple[ExpireSnapshotsChange | None, ExpireResult]:
    """The expiry by the table's retention rules and its result (complete once committed); no
    change when nothing expires, unless ``after_changes`` (changes staged before it in a
    transaction may add snapshots or retention properties: it decides when it is built)."""
    walker = ManifestWalker(io) if clean_files else None
    change = ExpireSnapshotsChange(
        expiry_millis(older_than), retain_last, snapshot_ids, now_ms, walker=walker
    )
    ids, refs = change.plan(md)
    if not ids and not refs and not after_changes:
        return None, change.result
    if walker is not None:
        # Read what the cleanup walks before committing (the walker keeps it): a broken
        # manifest then fails the call with the table unchanged, not with its snapshots gone
        # and their files never to be found again.
        await walker.reach([s for s in md.snapshots if s.snapshot_id in ids], missing_ok=True)
        await walker.reach([s for s in md.snapshots if s.snapshot_id not in ids])
    return change, change.result


async def preview_expire_snapshots(
    io: FileIO,
    md: TableMetadata,
    older_than: dt.datetime | int | None = None,
    retain_last: int | None = None,
    *,
    snapshot_ids: Iterable[int] = (),
    clean_files: bool = True,
    now_ms: int | None = None,
) -> ExpireResult:
    """A dry run of the expiry of ``md``: the snapshots, refs and files it would remove, by
    the same plan and the same file walk as the expiry; nothing is committed nor deleted."""
    change = ExpireSnapshotsChange(expiry_millis(older_than), retain_last, snapshot_ids, now_ms)
    ids, refs = change.plan(md)
    result = ExpireResult(expired_snapshot_ids=sorted(ids), removed_refs=refs, dry_run=True)
    if not clean_files or not ids:
        return result
    expired = [s for s in md.snapshots if s.snapshot_id in ids]
    kept = [s for s in md.snapshots if s.snapshot_id not in ids]
    kept_stats = statistics_paths(md, {s.snapshot_id for s in kept})
    content, manifests, manifest_lists, stats = await _files_only_expired(
        ManifestWalker(io), md, expired, kept, kept_stats
    )
    result.deleted_content_files = sorted(content)
    result.deleted_manifests = sorted(manifests)
    result.deleted_manifest_lists = sorted(manifest_lists)
    result.deleted_statistics_files = sorted(stats)
    return result
