"""Orphan file removal: delete objects under the table location that no metadata references.

Referenced means reachable from the current metadata file or any metadata file still in
its metadata log: those files themselves, their snapshots' manifest lists, manifests and
content files (DELETED entries included: an older metadata file may still be read), their
statistics files, and the version hint. Only objects older than the cutoff (default three
days) are deleted, so files of commits still in flight are left alone.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable

from aioiceberg.commit.protocols.base import version_hint_path
from aioiceberg.errors import ObjectNotFoundError, StoreError, ValidationError
from aioiceberg.maintenance.reachable import (
    MaintainedTable,
    ManifestWalker,
    delete_files,
    normalize,
    statistics_paths,
)
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata

__all__ = ["DEFAULT_ORPHAN_AGE", "referenced_files", "remove_orphan_files"]

DEFAULT_ORPHAN_AGE = dt.timedelta(days=3)


def _cutoff_seconds(older_than: dt.datetime | dt.timedelta | int | None, now: float) -> float:
    if older_than is None:
        return now - DEFAULT_ORPHAN_AGE.total_seconds()
    if isinstance(older_than, dt.timedelta):
        return now - older_than.total_seconds()
    if isinstance(older_than, dt.datetime):
        if older_than.tzinfo is None:
            raise ValidationError("older_than must be timezone-aware (a naive time is ambiguous)")
        return older_than.timestamp()
    return older_than / 1000


async def referenced_files(table: MaintainedTable, kept: Iterable[str] = ()) -> set[str]:
    """Normalized locations of every file the table's retained metadata files reference,
    and of ``kept`` (what the commit protocol writes for other readers)."""
    current = table.metadata
    metadata_files: dict[str, TableMetadata | None] = {table.metadata_location: current}
    for entry in current.metadata_log:
        metadata_files.setdefault(entry.metadata_file, None)
    versions: list[TableMetadata] = [current]
    for path, md in metadata_files.items():
        if md is not None:
            continue
        try:
            versions.append(parse_table_metadata(await table.io.read(path), path))
        except ObjectNotFoundError:
            continue  # already cleaned up: it references nothing now
    walker = ManifestWalker(table.io)
    refs = {normalize(p) for p in metadata_files}
    refs.add(normalize(version_hint_path(table.location)))
    refs |= {normalize(p) for p in kept}
    # The current snapshots' files must all be readable: skipping one that is missing would
    # take the files only it references for orphans. Older versions' snapshots may have been
    # expired since, their files deleted.
    refs |= set((await walker.reach(current.snapshots)).all())
    current_ids = {s.snapshot_id for s in current.snapshots}
    older = {
        s.snapshot_id: s for md in versions[1:] for s in md.snapshots if s.snapshot_id not in current_ids
    }
    refs |= set((await walker.reach(older.values(), missing_ok=True)).all())
    for md in versions:
        refs |= set(statistics_paths(md))
    return refs


async def remove_orphan_files(
    table: MaintainedTable,
    older_than: dt.datetime | dt.timedelta | int | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
    kept: Iterable[str] = (),
) -> list[str]:
    """Delete (or with ``dry_run`` only list) unreferenced objects older than ``older_than``,
    and what writers that died mid-write left behind (temp files) as old.

    ``older_than`` is a point in time (datetime or epoch ms) or an age (timedelta); ``kept``
    are objects the commit protocol keeps for other readers. Returns the orphan locations, sorted.
    """
    now_s = time.time() if now is None else now
    cutoff = _cutoff_seconds(older_than, now_s)
    referenced = await referenced_files(table, kept)
    prefix = table.location.rstrip("/") + "/"
    orphans: list[str] = []
    async for info in table.io.list(prefix):
        if normalize(info.location) in referenced:
            continue
        if info.last_modified is None or info.last_modified >= cutoff:
            continue  # unknown or recent: may belong to a commit in flight
        orphans.append(info.location)
    async for info in table.io.list_incomplete(prefix):
        if info.last_modified is not None and info.last_modified < cutoff:
            orphans.append(info.location)
    orphans.sort()
    if dry_run or not orphans:
        return orphans
    failed = await delete_files(table.io, orphans)
    if failed:
        raise StoreError(f"{len(failed)} of {len(orphans)} orphan deletes failed: {failed[:5]}")
    return orphans
