"""Manifest rewrites, merging appends, compaction and NDV statistics, checked by other readers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from maint_helpers import (
    SCHEMA,
    appended_table,
    assert_readers_agree,
    compacted_under_a_stale_handle,
    ids,
    listing,
    pyiceberg_table,
    rows,
)

import aioiceberg
from aioiceberg.errors import CommitConflictError, UnsupportedError
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.table import Table


async def manifest_count(table: Table) -> int:
    snap = table.current_snapshot()
    assert snap is not None
    return len(await ManifestWalker(table.io).manifests(snap))


async def data_file_count(table: Table) -> int:
    return len([t async for t in table.scan().plan_files()])


async def no_orphans(table: Table) -> bool:
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    return await table.remove_orphan_files(older_than=soon, dry_run=True) == []


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
    assert await no_orphans(table)  # the merged-away manifest of the new files was cleaned up


@pytest.mark.anyio
async def test_compaction_keeps_rows_and_reduces_files_per_partition(tmp_path: Path) -> None:
    table = await appended_table(aioiceberg.connect(str(tmp_path / "wh")), 8, 10, ["region"])
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
    table, stale = await compacted_under_a_stale_handle(aioiceberg.connect(str(tmp_path / "wh")))
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


@pytest.mark.anyio
async def test_an_append_and_a_manifest_rewrite_in_one_transaction_are_one_commit(tmp_path: Path) -> None:
    table = await appended_table(aioiceberg.connect(str(tmp_path / "wh")), 3, 4, ["region"])
    head = table.current_snapshot()
    assert head is not None
    version = table.version
    async with table.transaction() as tx:
        await tx.append(rows(12, 4))
        result = await tx.rewrite_manifests()  # merges the append's manifest too
        tx.set_properties({"owner": "ops"})
    assert table.version == version + 1 and table.properties["owner"] == "ops"
    replace = table.current_snapshot()
    assert replace is not None and replace.summary is not None
    assert replace.snapshot_id == result.snapshot_id and replace.summary["operation"] == "replace"
    append = table.snapshot_by_id(replace.parent_snapshot_id or 0)
    assert append is not None and append.summary is not None and append.summary["operation"] == "append"
    assert append.parent_snapshot_id == head.snapshot_id
    assert len(result.rewritten_manifests) == 4 and await manifest_count(table) == 1
    assert await no_orphans(table)
    await assert_readers_agree(table, list(range(16)))


@pytest.mark.anyio
async def test_a_manifest_rewrite_with_nothing_to_merge_adds_no_snapshot_to_its_transaction(
    tmp_path: Path,
) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    async with table.transaction() as tx:
        await tx.append(rows(0, 4))
        result = await tx.rewrite_manifests()  # decided when built: one manifest, nothing to merge
    assert result.snapshot_id is None and result.kept_manifests == 1
    (only,) = table.snapshots()
    assert only.summary is not None and only.summary["operation"] == "append"
    assert await no_orphans(table)
    await assert_readers_agree(table, list(range(4)))


@pytest.mark.anyio
async def test_compaction_after_a_data_change_in_a_transaction_is_refused_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    table = await appended_table(aioiceberg.connect(str(tmp_path / "wh")), 3, 5)
    before = await listing(table)
    version = table.version
    with pytest.raises(UnsupportedError, match="rewrite_data_files must come before other data changes"):
        async with table.transaction() as tx:
            await tx.append(rows(15, 5))
            await tx.rewrite_data_files()
    assert await listing(table) == before  # the append's data file was deleted with the transaction
    assert (await table.refresh()).version == version


@pytest.mark.anyio
async def test_compaction_then_an_append_in_one_transaction(tmp_path: Path) -> None:
    table = await appended_table(aioiceberg.connect(str(tmp_path / "wh")), 4, 5)
    version = table.version
    async with table.transaction() as tx:
        result = await tx.rewrite_data_files()
        await tx.append(rows(20, 5))
    assert table.version == version + 1
    assert len(result.rewritten_files) == 4 and len(result.added_files) == 1
    append = table.current_snapshot()
    assert append is not None and append.summary is not None and append.summary["operation"] == "append"
    replace = table.snapshot_by_id(append.parent_snapshot_id or 0)
    assert replace is not None and replace.snapshot_id == result.snapshot_id
    assert await data_file_count(table) == 2
    assert await no_orphans(table)
    await assert_readers_agree(table, list(range(25)))


@pytest.mark.anyio
async def test_statistics_after_a_data_change_in_a_transaction_name_their_snapshot(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 10))
    head = table.current_snapshot()
    assert head is not None
    with pytest.raises(UnsupportedError, match="pass snapshot_id"):
        async with table.transaction() as tx:
            await tx.append(rows(10, 10))
            await tx.compute_statistics(["id"])
    async with table.transaction() as tx:
        await tx.append(rows(10, 10))
        stats = await tx.compute_statistics(["id"], snapshot_id=head.snapshot_id)
    assert stats is not None and stats.snapshot_id == head.snapshot_id
    assert [s.statistics_path for s in table.metadata.statistics] == [stats.statistics_path]
    assert await no_orphans(table)
    await assert_readers_agree(table, list(range(20)))
