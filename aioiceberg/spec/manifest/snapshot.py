"""A snapshot's manifests, however the snapshot records them.

Every reader of a snapshot's manifests (planning, row-level changes, commits and their
validation, cherry-picks, maintenance) goes through :func:`snapshot_manifests`, so a v1
snapshot that names its manifests inline reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import anyio

from aioiceberg._concurrency import task_group
from aioiceberg.spec.manifest.columnar_list import decode_manifest_rows
from aioiceberg.spec.manifest.entry import ManifestEntryStatus
from aioiceberg.spec.manifest.fastavro_reader import inline_manifest_file, iter_manifest_entries
from aioiceberg.spec.manifest.manifest_file import ManifestFile

if TYPE_CHECKING:
    from aioiceberg.spec.manifest.data_file import DataFile
    from aioiceberg.spec.metadata import Snapshot

__all__ = ["ObjectReader", "added_files", "listed_manifests", "snapshot_manifests"]


class ObjectReader(Protocol):
    """What reading a snapshot's manifests needs of storage (a FileIO is one): the spec
    layer names no store."""

    async def read(self, location: str) -> bytes: ...


# Manifests of an inline snapshot fetched at once (each is read whole to build its row).
INLINE_CONCURRENCY = 16
# A manifest list this big is decoded in a thread: a 2000-row list costs the columnar decoder
# ~2 ms (fastavro ~25 ms), which would hold up every other task on the loop. A smaller one is
# decoded where it lands, columnar too when long enough (500 rows, each built: 1.9 ms; fastavro 5.6).
THREAD_LIST_BYTES = 16 * 1024


async def snapshot_manifests(
    io: ObjectReader, snapshot: Snapshot, *, fetched: Callable[[int], None] | None = None
) -> list[ManifestFile]:
    """The manifests of ``snapshot``, in its order (see :func:`listed_manifests`)."""
    return list(await listed_manifests(io, snapshot, fetched=fetched))


async def listed_manifests(
    io: ObjectReader, snapshot: Snapshot, *, fetched: Callable[[int], None] | None = None
) -> Sequence[ManifestFile]:
    """The manifests of ``snapshot``, in its order; a long list's rows are built as they are
    read (a plan reads the list's columns and builds the few rows it chooses).

    Its manifest list decoded; or, for a v1 snapshot that lists manifest paths inline
    (``manifests``, no ``manifest-list``, which the v1 spec allows), a row built from each
    manifest (see ``inline_manifest_file``). ``fetched`` is told the size of each object
    read (scan metrics). A failure raises as itself, naming the object.
    """
    if snapshot.manifest_list is not None:
        data = await io.read(snapshot.manifest_list)
        if fetched is not None:
            fetched(len(data))
        if len(data) < THREAD_LIST_BYTES:
            return decode_manifest_rows(data, snapshot.manifest_list)
        return await anyio.to_thread.run_sync(decode_manifest_rows, data, snapshot.manifest_list)
    paths = snapshot.manifests
    rows: list[ManifestFile | None] = [None] * len(paths)
    errors: list[Exception] = []
    limiter = anyio.CapacityLimiter(INLINE_CONCURRENCY)

    async def one(i: int, path: str, scope: anyio.CancelScope) -> None:
        try:
            async with limiter:
                data = await io.read(path)
            if fetched is not None:
                fetched(len(data))
            rows[i] = inline_manifest_file(data, path, snapshot.snapshot_id)
        except Exception as e:  # the first failure stops the rest and raises as itself
            errors.append(e)
            scope.cancel()

    async with task_group() as tg:
        for i, path in enumerate(paths):
            tg.start_soon(one, i, path, tg.cancel_scope)
    if errors:
        raise errors[0]
    return [r for r in rows if r is not None]


async def added_files(io: ObjectReader, snapshot: Snapshot) -> list[DataFile]:
    """The files (data and delete) ``snapshot`` itself added: the ADDED entries carrying its
    id in the manifests it wrote. Streams read appends with it, cherry-picks replay them."""
    own = [m for m in await snapshot_manifests(io, snapshot) if m.added_snapshot_id == snapshot.snapshot_id]
    blobs: list[bytes] = [b""] * len(own)

    async def fetch(i: int, mf: ManifestFile) -> None:
        blobs[i] = await io.read(mf.manifest_path)

    async with task_group() as tg:
        for i, mf in enumerate(own):
            tg.start_soon(fetch, i, mf)
    return [
        entry.data_file
        for mf, data in zip(own, blobs, strict=True)
        for entry in iter_manifest_entries(data, mf)
        if entry.status is ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id
    ]
