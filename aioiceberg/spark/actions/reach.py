"""What the Spark actions share: the table's store as executors open it, the walk of
manifest lists and manifests spread over executors, and deletes spread over executors.

A walk has two jobs: executors read the manifest lists (one task per few snapshots) and
return the manifests they list; the driver keeps one row per distinct manifest (a
manifest is shared by many snapshots: read once) and executors read those, returning
one row per file named. Each snapshot carries tags (bit flags the caller chooses:
"expired", "kept", ...) that its manifests and files inherit, so one walk answers both
sides of an expiry. A snapshot whose tags meet ``required`` must be fully readable (its
failure fails the job); others are skipped where their files are gone, as
:meth:`~aioiceberg.maintenance.reachable.ManifestWalker.reach` does with ``missing_ok``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from aioiceberg._concurrency import task_group
from aioiceberg._sync import default_loop
from aioiceberg.errors import IcebergError, StoreError
from aioiceberg.io.base import FileIO
from aioiceberg.io.resolve import resolve_io
from aioiceberg.maintenance.reachable import delete_files, normalize
from aioiceberg.runtime import default_runtime
from aioiceberg.spec.manifest import ManifestFile, read_manifest, snapshot_manifests
from aioiceberg.spec.metadata import Snapshot

__all__ = [
    "ENTRY_COLUMNS",
    "Reached",
    "TableStore",
    "delete_on_executors",
    "each_on_executor",
    "manifest_entries",
    "partitions_for",
    "reach_manifests",
    "run_job",
]

T = TypeVar("T")
R = TypeVar("R")
# the rows of the walk's second job: one per file a manifest names, one per manifest read
ENTRY_COLUMNS = "kind string, path string, location string, live boolean, tags int"
CONCURRENCY = 16  # reads in flight per executor task
_REASON = re.compile(r"\b(?:aioiceberg\.errors\.)?[A-Z]\w*(?:Error|Exception): .*")


@dataclass(frozen=True)
class TableStore:
    """The table's store as an executor opens it: the location and its storage options."""

    location: str
    storage_options: dict[str, str]

    def open(self) -> FileIO:
        return resolve_io(self.location, self.storage_options or None, runtime=default_runtime())


def run_job(what: str, job: Callable[[], T]) -> T:
    """Run a Spark job; a failure on the executors comes out as ``StoreError`` naming
    ``what`` and the executor's reason (never a Py4J error)."""
    try:
        return job()
    except IcebergError:
        raise
    except Exception as exc:
        found = [m.group(0) for m in map(_REASON.search, str(exc).splitlines()) if m]
        reason = found[0] if found else (str(exc).strip().splitlines() or ["unknown error"])[0]
        raise StoreError(f"{what} failed on Spark's executors: {reason[:500]}") from None


def partitions_for(spark: Any, items: int, parallelism: int | None) -> int:
    """Tasks for ``items`` work items: a few per core, never more than the items."""
    cores = parallelism or 4 * int(spark.sparkContext.defaultParallelism)
    return max(1, min(items, cores))


def each_on_executor(items: Iterable[T], read: Callable[[T], Awaitable[list[R]]]) -> Iterator[R]:
    """Executor side: ``read`` every item on the executor's loop, ``CONCURRENCY`` at a time;
    the rows they return, in the order they finish."""
    pending = list(items)
    limit = anyio.Semaphore(CONCURRENCY)
    out: list[R] = []

    async def one(item: T) -> None:
        async with limit:
            out.extend(await read(item))

    async def run() -> None:
        async with task_group() as tg:
            for item in pending:
                tg.start_soon(one, item)

    default_loop.run(run())
    return iter(out)


def _read_lists(store: TableStore, required: int, items: Iterable[tuple[Snapshot, int]]) -> Iterator[Any]:
    """Executor side of the first job: (manifest list or None, its manifests, tags)."""
    io = store.open()

    async def read(item: tuple[Snapshot, int]) -> list[tuple[str | None, list[ManifestFile], int]]:
        snap, tags = item
        try:
            manifests = await snapshot_manifests(io, snap)
        except StoreError:
            if tags & required:
                raise
            return []
        return [(snap.manifest_list, manifests, tags)]

    return each_on_executor(items, read)


def _read_entries(
    store: TableStore, required: int, items: Iterable[tuple[ManifestFile, int]]
) -> Iterator[tuple[str, str, str, bool, int]]:
    """Executor side of the second job: a row per file named, and one per manifest read."""
    io = store.open()

    async def read(item: tuple[ManifestFile, int]) -> list[tuple[str, str, str, bool, int]]:
        m, tags = item
        try:
            data = await io.read(m.manifest_path)
        except StoreError:
            if tags & required:
                raise
            return []
        # decoding and the per-entry rows are CPU work: in a thread, off the loop that
        # keeps the task's other reads in flight
        return await anyio.to_thread.run_sync(_entry_rows, data, m, tags)

    return each_on_executor(items, read)


def _entry_rows(data: bytes, m: ManifestFile, tags: int) -> list[tuple[str, str, str, bool, int]]:
    """The rows of one manifest read (see :data:`ENTRY_COLUMNS`)."""
    rows = [("manifest", normalize(m.manifest_path), m.manifest_path, True, tags)]
    for e in read_manifest(data, m).entries:
        path = e.data_file.file_path
        rows.append(("content", normalize(path), path, e.is_live, tags))
    return rows


@dataclass
class Reached:
    """The first job's answer: readable manifest lists (normalized -> (location, tags)) and
    the distinct manifests they list, their tags merged."""

    manifest_lists: dict[str, tuple[str, int]]
    manifests: dict[str, tuple[ManifestFile, int]]


def reach_manifests(
    spark: Any,
    store: TableStore,
    snapshots: Sequence[tuple[Snapshot, int]],
    required: int,
    parallelism: int | None = None,
) -> Reached:
    """Read the snapshots' manifest lists on executors (first job of a walk)."""
    reached = Reached({}, {})
    if not snapshots:
        return reached
    n = partitions_for(spark, len(snapshots), parallelism)
    rdd = spark.sparkContext.parallelize(list(snapshots), n)
    rows = run_job(
        "reading manifest lists",
        lambda: rdd.mapPartitions(lambda it: _read_lists(store, required, it)).collect(),
    )
    for list_path, manifests, tags in rows:
        if list_path is not None:
            key = normalize(list_path)
            old = reached.manifest_lists.get(key, (list_path, 0))
            reached.manifest_lists[key] = (old[0], old[1] | tags)
        for m in manifests:
            found = reached.manifests.get(m.manifest_path)
            reached.manifests[m.manifest_path] = (m, tags if found is None else found[1] | tags)
    return reached


def manifest_entries(
    spark: Any,
    store: TableStore,
    manifests: Iterable[tuple[ManifestFile, int]],
    required: int,
    parallelism: int | None = None,
) -> Any:
    """A DataFrame (:data:`ENTRY_COLUMNS`) of the files the manifests name, read on
    executors (second job of a walk; evaluated lazily, by whoever consumes it)."""
    items = list(manifests)
    # big manifests first, spread round-robin: tasks of about equal bytes
    items.sort(key=lambda item: -item[0].manifest_length)
    n = partitions_for(spark, len(items), parallelism)
    spread = [items[i::n] for i in range(n)]
    rdd = spark.sparkContext.parallelize(spread, n).flatMap(
        lambda group: _read_entries(store, required, group)
    )
    return spark.createDataFrame(rdd, ENTRY_COLUMNS)


def _delete(store: TableStore, paths: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """Executor side of a delete job: (path, deleted) per path; one store per task, the
    task's paths through the store's bulk delete (:func:`delete_files`: sorted batches, a
    few at a time)."""
    pending = list(paths)
    io = store.open()
    failed = set(default_loop.run(delete_files(io, pending)))
    return iter([(p, p not in failed) for p in pending])


def delete_on_executors(
    spark: Any, store: TableStore, paths: Any, what: str, parallelism: int | None = None
) -> tuple[list[str], list[str]]:
    """Delete ``paths`` (a list, or an RDD of locations, best grouped by folder) on
    executors; (deleted, failed), sorted. Deletion is best effort, as in one process: a
    file that cannot be deleted is reported, not raised. A list is sorted and cut into
    contiguous slices, so that a folder's files meet in one task."""
    if isinstance(paths, list):
        if not paths:
            return [], []
        paths = spark.sparkContext.parallelize(sorted(paths), partitions_for(spark, len(paths), parallelism))
    rdd = paths
    results = run_job(f"deleting {what}", lambda: rdd.mapPartitions(lambda it: _delete(store, it)).collect())
    deleted = sorted(p for p, ok in results if ok)
    failed = sorted(p for p, ok in results if not ok)
    return deleted, failed
