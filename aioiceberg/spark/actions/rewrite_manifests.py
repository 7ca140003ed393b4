"""``rewrite_manifests`` (Java's ``RewriteManifests``): the single-process manifest rewrite
with the manifests it merges read and decoded on Spark executors.

The driver reads the manifest list, chooses the groups with the single-process planner
(:func:`~aioiceberg.maintenance.manifests.small_groups`), has executors read and decode
the chosen manifests, and hands their entries to the single-process change
(:class:`~aioiceberg.maintenance.manifests.RewriteManifestsChange`), which writes the
merged manifests and commits one ``replace`` snapshot on the driver. What stays on the
driver: the manifest list, the writing of the new manifests (their entries pass through
it) and the commit; a commit retried on a newer base reads the manifests that base adds
itself. A failure before the commit leaves only the new manifests, which the change
deletes (or orphan removal, if the driver died).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import anyio

import aioiceberg.table
from aioiceberg._sync import default_loop
from aioiceberg.maintenance.manifests import RewriteManifestsResult, plan_rewrite_manifests, small_groups
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.spark.actions.reach import TableStore, each_on_executor, partitions_for, run_job
from aioiceberg.spark.batch import SourceOptions
from aioiceberg.spec.manifest import ManifestEntry, ManifestFile, read_manifest
from aioiceberg.spec.properties import TableProperties

__all__ = ["rewrite_manifests"]


def _read(store: TableStore, manifests: Iterable[ManifestFile]) -> Iterator[tuple[str, list[ManifestEntry]]]:
    """Executor side: each manifest's decoded entries."""
    io = store.open()

    async def read(m: ManifestFile) -> list[tuple[str, list[ManifestEntry]]]:
        data = await io.read(m.manifest_path)
        return [(m.manifest_path, (await anyio.to_thread.run_sync(read_manifest, data, m)).entries)]

    return each_on_executor(manifests, read)


async def _commit(
    table: aioiceberg.table.Table, target_size_bytes: int | None, walker: ManifestWalker
) -> RewriteManifestsResult:
    change, result = await plan_rewrite_manifests(table.io, table.metadata, target_size_bytes, walker=walker)
    if change is not None:
        await table.commit_change(change)
    return result


def rewrite_manifests(
    spark: Any,
    table_location: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    target_size_bytes: int | None = None,
    parallelism: int | None = None,
) -> RewriteManifestsResult:
    """Merge the current snapshot's small data manifests (per partition spec) into
    manifests of about ``target_size_bytes`` (default ``commit.manifest.target-size-bytes``);
    returns what :meth:`aioiceberg.table.Table.rewrite_manifests` returns."""
    opts = SourceOptions.parse({**(storage_options or {}), "path": table_location})
    table = opts.load().aio
    default_loop.run(table.refresh())
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return RewriteManifestsResult()
    walker = ManifestWalker(table.io)
    manifests = default_loop.run(walker.manifests(snap))
    target = target_size_bytes or TableProperties(md.properties).manifest_target_size
    todo = [m for group in small_groups(manifests, target).values() for m in group]
    if not todo:
        return RewriteManifestsResult(kept_manifests=len(manifests))
    store = TableStore(table.location, opts.storage_options)
    n = partitions_for(spark, len(todo), parallelism)
    rdd = spark.sparkContext.parallelize([todo[i::n] for i in range(n)], n)
    read = run_job("reading manifests", lambda: rdd.flatMap(lambda group: _read(store, group)).collect())
    for path, entries in read:
        walker.prime(path, entries)
    return default_loop.run(_commit(table, target_size_bytes, walker))
