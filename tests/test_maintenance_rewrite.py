"""Manifest rewrites, merging appends, compaction and NDV statistics, checked by other readers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from maint_helpers import SCHEMA, assert_readers_agree, ids, listing, pyiceberg_table, rows

import aioiceberg
from aioiceberg.errors import CommitConflictError
from aioiceberg.maintenance.files import ManifestWalker
from aioiceberg.table import Table


async def manifest_count(table: Table) -> int:
    snap = table.current_snapshot()
    assert snap is not None
    return len(await ManifestWalker(table.io).manifests(snap))


async def data_file_count(table: Table) -> int:
    return len([t async for t in table.scan().plan_files()])


@pytest.mark.anyio
async def test_rewrite_manifests_merges_small_manifests_into_a_replace_snapshot(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    for i in range(6):
        await table.append(rows(i * 4, 4))
    assert await manifest_count(table) == 6
    result = await table.rewrite_manifests()
    assert len(result.rewritten_manifests) == 6 and len(result.added_manifests) == 1
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["operation"] == "replace" and snap.summary["total-records"] == "24"
    assert await manifest_count(table) == 1
    await assert_readers_agree(table, list(range(24)))
    version = table.version
    nothing = await table.rewrite_manifests()  # a single manifest: nothing to merge
    assert nothing.snapshot_id is None and table.version == version
    # Manifests at or above the target are kept; only the small ones are merged.
    for i in range(6, 9):
        await table.append(rows(i * 4, 4))
    snap = table.current_snapshot()
    assert snap is not None
    lengths = [m.manifest_length for m in await ManifestWalker(table.io).manifests(snap)]
    small = await table.rewrite_manifests(target_size_bytes=max(lengths))
    assert len(small.rewritten_manifests) == 3 and small.kept_manifests == 1
    assert len(small.added_manifests) >= 1
    await assert_readers_agree(table, list(range(36)))


@pytest.mark.anyio
async def test_appends_merge_manifests_only_when_enabled(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    for i in range(3):
        await table.append(rows(i, 1))
    assert await manifest_count(table) == 3  # default: commit.manifest-merge.enabled=false
    await table.set_properties(
        {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "5"}
    )
    await table.append(rows(3, 1))
    assert await manifest_count(table) == 4  # below min-count-to-merge: kept as they are
    await table.append(rows(4, 1))
    assert await manifest_count(table) == 1  # five in the bin: merged
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary["operation"] == "append"
    await assert_readers_agree(table, list(range(5)))
    # The merged-away manifest of the new files was cleaned up: nothing is orphaned.
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    assert await table.remove_orphan_files(older_than=soon, dry_run=True) == []


@pytest.mark.anyio
async def test_compaction_keeps_rows_and_reduces_files_per_partition(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    for i in range(8):
        await table.append(rows(i * 10, 10))
    assert await data_file_count(table) == 24
    before = (await table.scan().to_arrow()).sort_by("id")
    result = await table.rewrite_data_files()
    assert result.groups == 3 and len(result.rewritten_files) == 24 and len(result.added_files) == 3
    assert await data_file_count(table) == 3
    after = (await table.scan().to_arrow()).sort_by("id")
    assert after.equals(before)
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["operation"] == "replace"
    assert snap.summary["total-data-files"] == "3" and snap.summary["total-records"] == "80"
    py = pyiceberg_table(table).scan().to_arrow().sort_by("id")
    assert py.select(["id", "region"]).equals(before.select(["id", "region"]))
    await assert_readers_agree(table, list(range(80)))
    # A filter limits compaction to the matching partitions.
    for i in range(8, 10):
        await table.append(rows(i * 10, 10))
    only_eu = await table.rewrite_data_files(filter="region = 'eu'")
    assert only_eu.groups == 1 and len(only_eu.rewritten_files) == 3
    await assert_readers_agree(table, list(range(100)))


@pytest.mark.anyio
async def test_compaction_applies_deletes(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"}
    )
    for i in range(3):
        await table.append(rows(i * 10, 10))
    try:
        await table.delete("id < 5")
    except Exception as exc:  # row-level deletes are built elsewhere; skip until they land
        pytest.skip(f"table.delete unavailable: {exc}")
    expected = list(range(5, 30))
    await table.rewrite_data_files()
    assert ids(await table.scan().to_arrow()) == expected
    assert await data_file_count(table) == 1
    await assert_readers_agree(table, expected)


@pytest.mark.anyio
async def test_compaction_conflicts_with_a_concurrent_rewrite_and_cleans_up(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=SCHEMA)
    for i in range(4):
        await table.append(rows(i * 5, 5))
    stale = await catalog.load_table("db.t")
    await table.rewrite_data_files()  # removes the files the stale handle is about to rewrite
    before = await listing(table)
    with pytest.raises(CommitConflictError, match="removed by a concurrent commit"):
        await stale.rewrite_data_files()
    assert await listing(table) == before  # its new data files and manifests were deleted
    await table.refresh()
    await assert_readers_agree(table, list(range(20)))


@pytest.mark.anyio
async def test_statistics_ndv_sketches_are_read_by_pyiceberg(tmp_path: Path) -> None:
    import datasketches
    from pyiceberg.table.puffin import PuffinFile

    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    n = 20_000
    await table.append(rows(0, n))
    stats = await table.compute_statistics()
    assert stats is not None
    snap = table.current_snapshot()
    assert snap is not None and stats.snapshot_id == snap.snapshot_id
    assert stats.statistics_path.startswith(f"{table.location}/metadata/")

    py_table = pyiceberg_table(table)
    (entry,) = py_table.metadata.statistics
    assert entry.snapshot_id == snap.snapshot_id and entry.statistics_path == stats.statistics_path
    assert entry.file_footer_size_in_bytes == stats.file_footer_size_in_bytes
    field_ids = {b.fields[0]: b for b in entry.blob_metadata}
    schema = table.schema()
    truth = {
        schema.find_field("id").field_id: n,
        schema.find_field("ts").field_id: n,
        schema.find_field("region").field_id: 3,
    }
    assert set(field_ids) == set(truth)

    puffin = PuffinFile(await table.io.read(stats.statistics_path))
    assert len(puffin.footer.blobs) == 3
    for blob in puffin.footer.blobs:
        assert blob.type == "apache-datasketches-theta-v1"
        sketch = datasketches.compact_theta_sketch.deserialize(puffin.get_blob_payload(blob))
        true = truth[blob.fields[0]]
        estimate = sketch.get_estimate()
        assert abs(estimate - true) <= max(
            1.0, sketch.get_upper_bound(3) - estimate, estimate - sketch.get_lower_bound(3)
        )
        assert abs(int(blob.properties["ndv"]) - true) <= 0.05 * true + 1
        assert field_ids[blob.fields[0]].properties["ndv"] == blob.properties["ndv"]
    await assert_readers_agree(table, list(range(n)))
