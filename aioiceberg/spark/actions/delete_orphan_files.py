"""``delete_orphan_files`` (Java's ``DeleteOrphanFiles``): orphan removal whose manifest
reads, listing and deletes run on Spark executors.

The rules are :func:`aioiceberg.maintenance.orphans.remove_orphan_files`' own, from the
same helpers: the same referenced set (metadata files, version hint, statistics, what the
commit protocol keeps, every file the current and older metadata files' snapshots reach),
the same cutoff, the same normalization (``file:`` spellings, ``s3a``/``s3n``) and the same
refusal to touch anything outside the table's location. What moves:

- the driver reads the metadata files (small), executors read manifest lists and then
  manifests (:mod:`~aioiceberg.spark.actions.reach`);
- the driver splits the scanned location into disjoint entries (its top-level folders and
  objects, folders split further while there are fewer entries than tasks: a few folder
  reads on a local store; other stores, which name folders only by listing everything
  here, are listed by one executor task as a whole), and each executor task lists a share
  of those entries fully with aioiceberg's store layer;
- the comparison is a DataFrame anti-join (listing minus referenced, on normalized
  locations): neither set is collected on the driver; only the orphans are;
- the deletes run on executors, the orphans partitioned by folder, each task's share
  through the store's bulk delete.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql import functions as F

from aioiceberg._sync import default_loop
from aioiceberg.errors import StoreError
from aioiceberg.maintenance.orphans import (
    list_candidates,
    orphan_cutoff,
    reference_roots,
    scan_prefix,
    split_entries,
)
from aioiceberg.maintenance.reachable import normalize, spellings
from aioiceberg.spark.actions.reach import (
    TableStore,
    delete_on_executors,
    manifest_entries,
    partitions_for,
    reach_manifests,
    run_job,
)
from aioiceberg.spark.batch import SourceOptions

__all__ = ["delete_orphan_files"]

REQUIRED = 1  # tag of the current metadata's snapshots: their files must all be readable
OLDER = 2
LISTING_COLUMNS = "path string, location string"


def _list_share(
    store: TableStore, prefix: str, cutoff: float, shares: Iterable[list[str] | None]
) -> Iterator[tuple[str, str]]:
    """Executor side of the listing: (normalized, location) of each old-enough object."""
    io = store.open()
    out: list[tuple[str, str]] = []

    async def run() -> None:
        for entries in shares:
            async for info in list_candidates(io, prefix, cutoff, entries):
                out.append((normalize(info.location), info.location))

    default_loop.run(run())
    return iter(out)


def delete_orphan_files(
    spark: Any,
    table_location: str,
    storage_options: Mapping[str, str] | None = None,
    *,
    older_than: dt.datetime | dt.timedelta | int | None = None,
    location: str | None = None,
    dry_run: bool = False,
    now: float | None = None,
    parallelism: int | None = None,
) -> list[str]:
    """Delete (or with ``dry_run`` only list) the objects under the table's location that
    no retained metadata references and that are older than ``older_than`` (a point in
    time, epoch ms, or an age; default three days); returns their locations, sorted.

    ``storage_options``: as the data source takes them (``lock`` included); ``location``
    scans only that folder of the table (``LocationNotAllowedError`` outside it);
    ``parallelism``: tasks per job (default four per core of the application). Deletes
    that fail raise ``StoreError`` once all were tried (the others are gone).
    """
    opts = SourceOptions.parse({**(storage_options or {}), "path": table_location})
    table = opts.load().aio
    kept = default_loop.run(table.publish_latest())  # as the single-process removal starts
    cutoff = orphan_cutoff(older_than, time.time() if now is None else now)
    prefix = scan_prefix(table.location, location)
    store = TableStore(table.location, opts.storage_options)

    roots = default_loop.run(reference_roots(table, kept))
    snapshots = [(s, REQUIRED) for s in roots.current] + [(s, OLDER) for s in roots.older]
    reached = reach_manifests(spark, store, snapshots, REQUIRED, parallelism)
    fixed = set(roots.fixed) | {s for stored, _ in reached.manifest_lists.values() for s in spellings(stored)}
    entries = manifest_entries(spark, store, reached.manifests.values(), REQUIRED, parallelism)
    # a file: location holding "%" also names its path as written (spellings: a URI's path,
    # up to any ? or #), in the same pass over the entries (a second would read every
    # manifest again)
    stored = F.col("location")
    as_written = F.when(
        stored.startswith("file:") & stored.contains("%"),
        F.regexp_extract(stored, r"^file:(?://[^/?#]*)?([^?#]*)", 1),
    ).otherwise(F.col("path"))
    referenced = entries.select(
        F.explode(F.array_distinct(F.array(F.col("path"), as_written))).alias("path")
    ).union(spark.createDataFrame([(p,) for p in fixed] or [], "path string"))

    want = partitions_for(spark, 1 << 30, parallelism)
    top = default_loop.run(split_entries(table.io, prefix, want))
    shares: list[list[str] | None]
    if top is None:
        shares = [None]  # the store cannot name its folders cheaply: one task lists it all
    else:
        n = partitions_for(spark, len(top), parallelism)
        shares = [top[i::n] for i in range(n)] if top else []
    if not shares:
        return []
    listed = spark.sparkContext.parallelize(shares, len(shares)).flatMap(
        lambda share: _list_share(store, prefix, cutoff, [share])
    )
    listing = spark.createDataFrame(listed, LISTING_COLUMNS)
    orphans_df = listing.join(referenced, on="path", how="left_anti").select("location")
    if dry_run:
        rows = run_job("listing orphan files", orphans_df.collect)
        return sorted(r[0] for r in rows)
    # a folder's orphans in one task: the store deletes them in bulk (one lock and one sync
    # per folder on a local disk, DeleteObjects of up to 1,000 keys on S3)
    by_folder = orphans_df.repartition(
        partitions_for(spark, 1 << 30, parallelism), F.regexp_extract("location", "^(.*/)", 1)
    )
    deleted, failed = delete_on_executors(
        spark, store, by_folder.rdd.map(lambda r: r[0]), "orphan files", parallelism
    )
    orphans = sorted(deleted + failed)
    if failed:
        raise StoreError(f"{len(failed)} of {len(orphans)} orphan deletes failed: {failed[:5]}")
    return orphans
