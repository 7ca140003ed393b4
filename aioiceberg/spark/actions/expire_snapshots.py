"""``expire_snapshots`` (Java's ``ExpireSnapshots``): the single-process expiry's commit,
with the manifest reads and the file deletes on Spark executors.

The metadata change is :class:`~aioiceberg.maintenance.expire.ExpireSnapshotsChange`
(same retention rules, one commit, made on the driver). Which files go follows
:func:`aioiceberg.maintenance.expire.preview_expire_snapshots`' rule: what an expired
snapshot reached and no remaining one does (content files named only by DELETED entries
of remaining manifests included). Executors read the manifest lists and manifests
(:mod:`~aioiceberg.spark.actions.reach`); the comparison is a DataFrame aggregation over
the files named, grouped by normalized location; the deletes run on executors, content
files first and manifest lists last, as in one process.

The files are chosen before the commit (an unreadable manifest of a remaining snapshot
fails the call with the table unchanged) and again from the committed metadata when the
commit expired other snapshots than planned (a concurrent commit). A failed or unknown
commit deletes nothing. Nothing is raised once the commit landed: a delete that fails is
reported in ``failed_deletes`` (the file is left for orphan removal); a delete job that
fails on the executors sets ``cleanup_error`` and reports its files, and those of the
kinds after it, in ``failed_deletes``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F

import aioiceberg.table
from aioiceberg._sync import default_loop
from aioiceberg.errors import IcebergError, StoreError
from aioiceberg.maintenance.expire import ExpireResult, expiry_millis, plan_expiry
from aioiceberg.maintenance.reachable import statistics_paths
from aioiceberg.spark.actions.reach import (
    TableStore,
    delete_on_executors,
    manifest_entries,
    reach_manifests,
    run_job,
)
from aioiceberg.spark.batch import SourceOptions
from aioiceberg.spec.metadata import Snapshot, TableMetadata

__all__ = ["ExpiredFiles", "expire_snapshots", "expired_files"]

GONE = 1  # tag of the expired snapshots (their files may be missing already)
KEPT = 2  # tag of the remaining ones (every file must be readable)


@dataclass
class ExpiredFiles:
    """What an expiry deletes, by kind, in the order it deletes them."""

    content: list[str]
    manifests: list[str]
    manifest_lists: list[str]
    statistics: list[str]


def expired_files(
    spark: Any,
    store: TableStore,
    before: TableMetadata,
    expired: list[Snapshot],
    kept: list[Snapshot],
    kept_stats: Mapping[str, str],
    parallelism: int | None = None,
) -> ExpiredFiles:
    """The files ``expired`` reached and ``kept`` do not, found on executors."""
    tagged = [(s, GONE) for s in expired] + [(s, KEPT) for s in kept]
    reached = reach_manifests(spark, store, tagged, KEPT, parallelism)
    lists = sorted(loc for loc, tags in reached.manifest_lists.values() if tags & GONE and not tags & KEPT)
    entries = manifest_entries(spark, store, reached.manifests.values(), KEPT, parallelism)
    # One aggregation over one scan of the entries (a union of two queries over them would
    # read every manifest twice). A file goes when an expired snapshot reached it, or a
    # remaining one names it only as DELETED, and no remaining one names it live; manifest
    # rows are always "live", so for them this is "reached by an expired, not a remaining".
    doomed = (
        entries.groupBy("kind", "path")
        .agg(
            F.expr(f"bool_or((tags & {GONE}) != 0 OR ((tags & {KEPT}) != 0 AND NOT live))").alias("gone"),
            F.expr(f"bool_or((tags & {KEPT}) != 0 AND live)").alias("kept"),
            F.first("location").alias("location"),
        )
        .filter("gone AND NOT kept")
        .select("kind", "location")
    )
    found = run_job("reading manifests", doomed.collect)
    ids = {s.snapshot_id for s in expired}
    stats = [p for k, p in statistics_paths(before, ids).items() if k not in kept_stats]
    return ExpiredFiles(
        content=sorted(r[1] for r in found if r[0] == "content"),
        manifests=sorted(r[1] for r in found if r[0] == "manifest"),
        manifest_lists=lists,
        statistics=sorted(stats),
    )


async def _commit(
    table: aioiceberg.table.Table,
    older_than: dt.datetime | int | None,
    retain_last: int | None,
    snapshot_ids: Iterable[int],
) -> ExpireResult:
    async with table.transaction() as tx:
        result = await tx.expire_snapshots(
            older_than, retain_last, snapshot_ids=snapshot_ids, clean_files=False
        )
    return result


def expire_snapshots(
    spark: Any,
    table_location: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    older_than: dt.datetime | int | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
    clean_files: bool = True,
    dry_run: bool = False,
    parallelism: int | None = None,
) -> ExpireResult:
    """Expire snapshots past retention (``older_than``: datetime or epoch ms; ``retain_last``;
    explicit ``snapshot_ids``), then delete the files only they reached, on executors.

    ``storage_options``: as the data source takes them (``lock`` included); ``dry_run``
    commits and deletes nothing (the result lists what would go); ``clean_files=False``
    only commits. Returns what :meth:`aioiceberg.table.Table.expire_snapshots` returns.
    """
    opts = SourceOptions.parse({**(storage_options or {}), "path": table_location})
    table = opts.load().aio  # the latest version: loading reads it
    store = TableStore(table.location, opts.storage_options)
    before = table.metadata
    ids = tuple(snapshot_ids)
    planned, refs = plan_expiry(before, int(time.time() * 1000), expiry_millis(older_than), retain_last, ids)

    def files_of(md: TableMetadata, gone_ids: set[int], after: TableMetadata | None) -> ExpiredFiles:
        expired = [s for s in md.snapshots if s.snapshot_id in gone_ids]
        if after is None:
            kept = [s for s in md.snapshots if s.snapshot_id not in gone_ids]
            kept_stats = statistics_paths(md, {s.snapshot_id for s in kept})
        else:
            kept, kept_stats = list(after.snapshots), statistics_paths(after)
        return expired_files(spark, store, md, expired, kept, kept_stats, parallelism)

    if dry_run:
        result = ExpireResult(expired_snapshot_ids=sorted(planned), removed_refs=refs, dry_run=True)
        if clean_files and planned:
            found = files_of(before, planned, None)
            result.deleted_content_files = found.content
            result.deleted_manifests = found.manifests
            result.deleted_manifest_lists = found.manifest_lists
            result.deleted_statistics_files = found.statistics
        return result
    if not planned and not refs:
        return ExpireResult()
    # read before committing: a broken manifest fails the call with the table unchanged
    chosen = files_of(before, planned, None) if clean_files and planned else None
    result = default_loop.run(_commit(table, older_than, retain_last, ids))
    after = table.metadata
    gone = set(result.expired_snapshot_ids)
    if not clean_files or not gone:
        return result
    remaining = {s.snapshot_id for s in after.snapshots}
    if chosen is None or gone != planned or remaining != {s.snapshot_id for s in before.snapshots} - gone:
        if not gone <= {s.snapshot_id for s in before.snapshots}:
            result.cleanup_error = "no file deleted: the commit expired snapshots this run never saw"
            return result
        try:
            chosen = files_of(before, gone, after)
        except IcebergError as exc:
            result.cleanup_error = f"no file deleted: the remaining snapshots' files cannot be listed: {exc}"
            return result
    else:
        chosen.statistics = sorted(
            p for k, p in statistics_paths(before, gone).items() if k not in statistics_paths(after)
        )
    failed: list[str] = []
    deleted: dict[str, list[str]] = {}
    for kind, paths in (
        ("content files", chosen.content),
        ("manifests", chosen.manifests),
        ("manifest lists", chosen.manifest_lists),
        ("statistics files", chosen.statistics),
    ):
        if result.cleanup_error is not None:  # an earlier job failed: later kinds are left whole
            deleted[kind] = []
            failed += paths
            continue
        try:
            done, bad = delete_on_executors(spark, store, paths, kind, parallelism)
        except StoreError as exc:
            # the commit landed: report what may be left (for orphan removal), never raise
            result.cleanup_error = f"not every expired file was deleted: {exc}"
            done, bad = [], list(paths)
        deleted[kind] = done
        failed += bad
    result.deleted_content_files = deleted["content files"]
    result.deleted_manifests = deleted["manifests"]
    result.deleted_manifest_lists = deleted["manifest lists"]
    result.deleted_statistics_files = deleted["statistics files"]
    result.failed_deletes = sorted(failed)
    return result
