"""Which files a set of snapshots reaches: the shared walk behind expiry and orphan removal.

Manifest lists and manifests are read once per walk (a manifest is usually shared by many
snapshots), a bounded number at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import unquote, urlsplit

import anyio

from aioiceberg._concurrency import task_group
from aioiceberg.errors import StoreError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import ManifestEntry, ManifestFile, read_manifest, snapshot_manifests
from aioiceberg.spec.metadata import Snapshot, TableMetadata

__all__ = [
    "MaintainedTable",
    "ManifestWalker",
    "Reachable",
    "delete_files",
    "normalize",
    "spellings",
    "statistics_paths",
]


class MaintainedTable(Protocol):
    """What orphan removal needs from a table: its store and its metadata (changes that
    commit are staged in a transaction instead)."""

    io: FileIO

    @property
    def location(self) -> str: ...

    @property
    def metadata(self) -> TableMetadata: ...

    @property
    def metadata_location(self) -> str: ...


def normalize(location: str) -> str:
    """One spelling per object: ``file:/x``, ``file:///x`` and ``/x`` match, as do s3a/s3n and s3.
    A ``file:`` URI names the path it decodes to (as the local store reads it): a listing
    spells ``p=1/`` as ``p%3D1/``, a manifest as written."""
    if location.startswith("file:"):
        parts = urlsplit(location)
        return unquote(parts.path)
    for alias in ("s3a://", "s3n://"):
        if location.startswith(alias):
            return "s3://" + location[len(alias) :]
    return location


def spellings(location: str) -> set[str]:
    """Every on-disk path a stored ``location`` may name: :func:`normalize`'s and, for a
    ``file:`` URI holding ``%``, its path as written. Java's Hadoop file system does not decode
    escapes (a partition value ``a/b`` is the folder ``p=a%2Fb``) where our local store does,
    so orphan removal keeps a listed object reached by either reading."""
    out = {normalize(location)}
    if location.startswith("file:") and "%" in location:
        out.add(urlsplit(location).path)
    return out


@dataclass
class Reachable:
    """Files reached from some snapshots, each map from normalized to stored location.

    ``content`` holds live data and delete files; ``deleted_content`` files named only by
    DELETED entries (history, part of no snapshot's data).
    """

    manifest_lists: dict[str, str] = field(default_factory=dict)
    manifests: dict[str, str] = field(default_factory=dict)
    content: dict[str, str] = field(default_factory=dict)
    deleted_content: dict[str, str] = field(default_factory=dict)

    def all(self) -> dict[str, str]:
        return {**self.manifest_lists, **self.manifests, **self.content, **self.deleted_content}


class ManifestWalker:
    """Reads and caches manifest lists and manifests of one table."""

    def __init__(self, io: FileIO, concurrency: int = 16) -> None:
        self.io = io
        self._lists: dict[str, list[ManifestFile]] = {}
        self._entries: dict[str, list[ManifestEntry]] = {}
        self._limit = anyio.Semaphore(concurrency)

    async def manifests(self, snapshot: Snapshot) -> list[ManifestFile]:
        # A v1 snapshot naming its manifests inline has no list: its paths are the key.
        key = snapshot.manifest_list if snapshot.manifest_list is not None else "\n".join(snapshot.manifests)
        found = self._lists.get(key)
        if found is None:
            async with self._limit:
                found = await snapshot_manifests(self.io, snapshot)
            self._lists[key] = found
        return found

    async def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        found = self._entries.get(manifest.manifest_path)
        if found is None:
            async with self._limit:
                data = await self.io.read(manifest.manifest_path)
            # decoded off the loop: expiry and the rewrites walk every manifest of a table
            found = (await anyio.to_thread.run_sync(read_manifest, data, manifest)).entries
            self._entries[manifest.manifest_path] = found
        return found

    def prime(self, manifest_path: str, entries: list[ManifestEntry]) -> None:
        """Hold ``entries`` as the decoded entries of ``manifest_path`` (read elsewhere: by
        Spark executors), so walking it reads nothing."""
        self._entries[manifest_path] = entries

    async def reach(self, snapshots: Iterable[Snapshot], *, missing_ok: bool = False) -> Reachable:
        """Everything ``snapshots`` reach. ``missing_ok`` skips files already gone (old metadata)."""
        out = Reachable()
        manifests: dict[str, ManifestFile] = {}

        async def one_list(snap: Snapshot) -> None:
            try:
                for m in await self.manifests(snap):
                    manifests.setdefault(m.manifest_path, m)
            except StoreError:
                if not missing_ok:
                    raise
                return
            if snap.manifest_list is not None:
                out.manifest_lists[normalize(snap.manifest_list)] = snap.manifest_list

        async with task_group() as tg:
            for snap in snapshots:
                tg.start_soon(one_list, snap)

        live: dict[str, str] = {}
        deleted: dict[str, str] = {}

        async def one_manifest(m: ManifestFile) -> None:
            try:
                entries = await self.entries(m)
            except StoreError:
                if not missing_ok:
                    raise
                return
            out.manifests[normalize(m.manifest_path)] = m.manifest_path
            for e in entries:
                path = e.data_file.file_path
                (live if e.is_live else deleted)[normalize(path)] = path

        async with task_group() as tg:
            for m in manifests.values():
                tg.start_soon(one_manifest, m)
        out.content = live
        out.deleted_content = {k: v for k, v in deleted.items() if k not in live}
        return out


def statistics_paths(md: TableMetadata, snapshot_ids: Iterable[int] | None = None) -> dict[str, str]:
    """Statistics and partition-statistics files of ``snapshot_ids`` (default: all)."""
    ids = set(snapshot_ids) if snapshot_ids is not None else None
    paths = [s.statistics_path for s in md.statistics if ids is None or s.snapshot_id in ids]
    paths += [s.statistics_path for s in md.partition_statistics if ids is None or s.snapshot_id in ids]
    return {normalize(p): p for p in paths}


DELETE_BATCH = 1000  # keys per bulk delete (S3's DeleteObjects takes at most 1,000)


async def delete_files(
    io: FileIO, paths: Sequence[str], concurrency: int = 16, batch_size: int = DELETE_BATCH
) -> list[str]:
    """Delete ``paths``; returns those that could not be deleted (deletion is best effort).

    Through the store's bulk delete, in sorted batches (a folder's files together: one
    lock and one sync per folder on a local disk, one DeleteObjects per 1,000 keys on S3),
    a few batches at a time; a batch that fails is retried one file at a time to name
    the failures."""
    failed: list[str] = []
    ordered = sorted(paths)
    batches = [ordered[i : i + batch_size] for i in range(0, len(ordered), batch_size)]
    limiter = anyio.Semaphore(max(1, concurrency // 4))
    single = anyio.Semaphore(concurrency)

    async def one(path: str) -> None:
        async with single:
            try:
                await io.delete(path)
            except StoreError:
                failed.append(path)

    async def batch(group: list[str]) -> None:
        async with limiter:
            try:
                await io.delete_many(group, concurrency=concurrency)
                return
            except StoreError:
                pass
        async with task_group() as tg:
            for path in group:
                tg.start_soon(one, path)

    async with task_group() as tg:
        for group in batches:
            tg.start_soon(batch, group)
    return sorted(failed)
