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
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field

import anyio.to_thread

from aioiceberg.commit.protocols.base import version_hint_path
from aioiceberg.errors import LocationNotAllowedError, ObjectNotFoundError, StoreError, ValidationError
from aioiceberg.io.base import FileIO, ObjectInfo
from aioiceberg.io.local import LocalFileIO, folder_entries
from aioiceberg.io.locations import is_within, normalized_location
from aioiceberg.io.resolve import scheme_of
from aioiceberg.maintenance.reachable import (
    MaintainedTable,
    ManifestWalker,
    delete_files,
    normalize,
    spellings,
    statistics_paths,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata

__all__ = [
    "DEFAULT_ORPHAN_AGE",
    "ReferenceRoots",
    "deletable",
    "list_candidates",
    "old_enough",
    "orphan_cutoff",
    "owned",
    "reference_roots",
    "referenced_files",
    "remove_orphan_files",
    "scan_prefix",
    "split_entries",
]

DEFAULT_ORPHAN_AGE = dt.timedelta(days=3)


def orphan_cutoff(older_than: dt.datetime | dt.timedelta | int | None, now: float) -> float:
    if older_than is None:
        return now - DEFAULT_ORPHAN_AGE.total_seconds()
    if isinstance(older_than, dt.timedelta):
        return now - older_than.total_seconds()
    if isinstance(older_than, dt.datetime):
        if older_than.tzinfo is None:
            raise ValidationError("older_than must be timezone-aware (a naive time is ambiguous)")
        return older_than.timestamp()
    return older_than / 1000


@dataclass
class ReferenceRoots:
    """Where the referenced set starts: files named by metadata alone (metadata files, the
    version hint, statistics, ``kept``), the current metadata's snapshots (their files must
    all be readable) and older metadata files' other snapshots (expired since: their files
    may be gone)."""

    fixed: set[str] = field(default_factory=set)
    current: list[Snapshot] = field(default_factory=list)
    older: list[Snapshot] = field(default_factory=list)


async def reference_roots(table: MaintainedTable, kept: Iterable[str] = ()) -> ReferenceRoots:
    """The metadata half of :func:`referenced_files` (metadata files only: manifests are read
    by whoever walks the snapshots, in one process or on Spark executors)."""
    current = table.metadata
    metadata_files: dict[str, TableMetadata | None] = {table.metadata_location: current}
    for entry in current.metadata_log:
        metadata_files.setdefault(entry.metadata_file, None)
    versions: list[TableMetadata] = [current]
    for path, md in metadata_files.items():
        if md is not None:
            continue
        try:
            data = await table.io.read(path)
        except ObjectNotFoundError:
            continue  # already cleaned up: it references nothing now
        # a metadata file of a long history runs to megabytes: parsed off the event loop
        versions.append(await anyio.to_thread.run_sync(parse_table_metadata, data, path))
    fixed = {s for p in metadata_files for s in spellings(p)}
    fixed |= spellings(version_hint_path(table.location))
    fixed |= {s for p in kept for s in spellings(p)}
    for md in versions:
        fixed |= {s for p in statistics_paths(md).values() for s in spellings(p)}
    current_ids = {s.snapshot_id for s in current.snapshots}
    older = {
        s.snapshot_id: s for md in versions[1:] for s in md.snapshots if s.snapshot_id not in current_ids
    }
    return ReferenceRoots(fixed, list(current.snapshots), list(older.values()))


async def referenced_files(table: MaintainedTable, kept: Iterable[str] = ()) -> set[str]:
    """Normalized locations of every file the table's retained metadata files reference,
    and of ``kept`` (what the commit protocol writes for other readers)."""
    roots = await reference_roots(table, kept)
    walker = ManifestWalker(table.io)
    refs = set(roots.fixed)
    # The current snapshots' files must all be readable: skipping one that is missing would
    # take the files only it references for orphans. Older versions' snapshots may have been
    # expired since, their files deleted.
    for reached in (await walker.reach(roots.current), await walker.reach(roots.older, missing_ok=True)):
        refs |= {s for stored in reached.all().values() for s in spellings(stored)}
    return refs


def scan_prefix(table_location: str, location: str | None = None) -> str:
    """The prefix orphan removal lists: the table's location, or ``location`` when it lies
    inside it (``LocationNotAllowedError`` otherwise: nothing outside a table is its orphan)."""
    prefix = table_location.rstrip("/") + "/"
    if location is None:
        return prefix
    inner = normalized_location(location, "orphan scan location")
    if not is_within(inner, normalized_location(table_location, "table location")):
        raise LocationNotAllowedError(
            f"orphan scan location {location!r} is outside the table location {table_location!r}",
            location=location,
        )
    if normalize(location).rstrip("/") == normalize(table_location).rstrip("/"):
        return prefix
    return location.rstrip("/") + "/"


def old_enough(info: ObjectInfo, cutoff: float) -> bool:
    """Whether a listed object is older than the cutoff (unknown or recent: it may belong to
    a commit in flight)."""
    return info.last_modified is not None and info.last_modified < cutoff


def deletable(location: str, prefix: str, normal_prefix: str | None) -> bool:
    """Whether a listed object may be deleted: under ``prefix`` as a string and as a location
    (``normal_prefix``, normalized: a key holding ``.``, ``..`` or empty segments is left
    alone, as stores disagree on where such a key is; None: a prefix of a scheme with no
    normal form, compared as a string only). Local locations compare as the paths they
    name: a table at ``file:/x`` (as Java's Hadoop file system writes it) lists as
    ``file:///x``."""
    if not location.startswith(prefix) and not _same_local_prefix(location, prefix):
        return False
    if normal_prefix is None:
        return True
    try:
        return is_within(normalized_location(location), normal_prefix)
    except LocationNotAllowedError:
        return False


def _same_local_prefix(location: str, prefix: str) -> bool:
    """Whether local ``location`` lies under local ``prefix`` whichever way each is spelled
    (``file:/x``, ``file:///x``, ``file://localhost/x``, ``/x``)."""
    if scheme_of(location) != "file" or scheme_of(prefix) != "file":
        return False
    return normalize(location).startswith(normalize(prefix))


def owned(entry: str, location: str) -> bool:
    """Whether a listed object belongs to ``entry`` of a split (see :func:`split_entries`): a
    folder entry (``.../``) owns everything below it, an object entry only itself."""
    return location.startswith(entry) if entry.endswith("/") else location == entry


# a folder with more objects right in it than this is listed whole, not split further: each
# object entry is one more entry to hand out (and one stat to list it)
SPLIT_MAX_OBJECTS = 16
SPLIT_MAX_DEPTH = 4


async def split_entries(io: FileIO, prefix: str, want: int) -> list[str] | None:
    """Entries that split the listing of ``prefix`` into disjoint parts (folders ending in
    ``/``, objects without), at least ``want`` where the layout allows: the top level,
    folders split further (breadth first) while there are fewer. None when the store cannot
    name its folders without listing everything (object stores: one lister)."""
    if not isinstance(io, LocalFileIO):
        return None

    # entries are spelled as the store's listing spells locations: a listing of a folder
    # entry then names its objects as the listing of ``prefix`` does (``owned`` compares)
    def split() -> list[str]:
        entries = folder_entries(prefix)
        for _ in range(SPLIT_MAX_DEPTH):
            if len(entries) >= want:
                break
            expanded: list[str] = []
            grew = False
            for entry in entries:
                inner = folder_entries(entry) if entry.endswith("/") else []
                if inner and sum(not e.endswith("/") for e in inner) <= SPLIT_MAX_OBJECTS:
                    expanded += inner
                    grew = True
                else:
                    expanded.append(entry)
            entries = expanded
            if not grew:
                break
        return entries

    return await anyio.to_thread.run_sync(split)


async def list_candidates(
    io: FileIO, prefix: str, cutoff: float, entries: Sequence[str] | None = None
) -> AsyncIterator[ObjectInfo]:
    """Objects under ``prefix`` old enough to be orphans (temp files of dead writers
    included), before the referenced ones are taken out; of only ``entries`` of a split
    when given (:func:`split_entries`), so several listers share one location without overlap.

    Objects and temp files come from one listing (``list_with_incomplete``: one walk of a
    local tree); an object entry of a split is one ``head``, not a listing of its folder."""
    try:
        normal_prefix: str | None = normalized_location(prefix, "orphan scan location")
    except LocationNotAllowedError:
        normal_prefix = None
    for listed in [prefix] if entries is None else entries:
        found = (
            io.list_with_incomplete(listed) if entries is None or listed.endswith("/") else _one(io, listed)
        )
        async for info in found:
            if entries is not None and not owned(listed, info.location):
                continue  # a sibling's object that shares the listed name as a prefix
            if old_enough(info, cutoff) and deletable(info.location, prefix, normal_prefix):
                yield info


async def _one(io: FileIO, location: str) -> AsyncIterator[ObjectInfo]:
    """The object an entry of a split names, if it is still there (a split names objects
    as listings name them: see :func:`split_entries`)."""
    try:
        yield await io.head(location)
    except ObjectNotFoundError:
        return


async def remove_orphan_files(
    table: MaintainedTable,
    older_than: dt.datetime | dt.timedelta | int | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
    kept: Iterable[str] = (),
    location: str | None = None,
) -> list[str]:
    """Delete (or with ``dry_run`` only list) unreferenced objects older than ``older_than``,
    and what writers that died mid-write left behind (temp files) as old.

    ``older_than`` is a point in time (datetime or epoch ms) or an age (timedelta); ``kept``
    are objects the commit protocol keeps for other readers; ``location`` scans only that
    folder of the table. Returns the orphan locations, sorted.
    """
    now_s = time.time() if now is None else now
    cutoff = orphan_cutoff(older_than, now_s)
    prefix = scan_prefix(table.location, location)
    referenced = await referenced_files(table, kept)
    orphans: list[str] = []
    async for info in list_candidates(table.io, prefix, cutoff):
        if normalize(info.location) not in referenced:
            orphans.append(info.location)
    orphans.sort()
    if dry_run or not orphans:
        return orphans
    failed = await delete_files(table.io, orphans)
    if failed:
        raise StoreError(f"{len(failed)} of {len(orphans)} orphan deletes failed: {failed[:5]}")
    return orphans
