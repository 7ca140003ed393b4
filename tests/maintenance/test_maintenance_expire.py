"""Snapshot expiry and orphan removal delete exactly the unreferenced objects, locally and on S3."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from maint_helpers import (
    SCHEMA,
    appended_table,
    assert_readers_agree,
    compacted_under_a_stale_handle,
    ids,
    listing,
    rows,
)
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy, conditional_put

import aioiceberg
from aioiceberg.errors import CommitConflictError, CommitStateUnknownError
from aioiceberg.table import Table


def reach(metadata_location: str, properties: dict[str, str], *, live_only: bool = True) -> set[str]:
    """Every file a metadata file references, walked with PyIceberg (an independent reader)."""
    from pyiceberg.table import StaticTable

    st = StaticTable.from_metadata(metadata_location, properties=properties)
    out: set[str] = set()
    for snap in st.metadata.snapshots:
        out.add(snap.manifest_list)
        for m in snap.manifests(st.io):
            out.add(m.manifest_path)
            for e in m.fetch_manifest_entry(st.io, discard_deleted=live_only):
                out.add(e.data_file.file_path)
    out |= {s.statistics_path for s in st.metadata.statistics}
    return out


def metadata_files(table: Table) -> set[str]:
    md = table.metadata
    return {table.metadata_location, *(e.metadata_file for e in md.metadata_log)} | {
        f"{table.location}/metadata/version-hint.text"
    }


async def check_expiry_scenario(table: Table, props: dict[str, str], endpoint: str | None) -> None:
    await table.append(rows(0, 6))
    await table.append(rows(6, 6))
    s2 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_tag("release", s2)
        ms.create_branch("dev", s2, min_snapshots_to_keep=2)
    await table.append(rows(100, 3), branch="dev")
    await table.append(rows(103, 3), branch="dev")
    await table.append(rows(12, 6))
    s3 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    await table.compute_statistics(["id"])  # statistics of s3: expire with it
    await table.rewrite_data_files()  # replace: s3's data files become DELETED entries
    dev_head = table.refs()["dev"].snapshot_id
    dev_parent = table.snapshot_by_id(dev_head).parent_snapshot_id  # type: ignore[union-attr]

    reached_before = reach(table.metadata_location, props)
    before = await listing(table)
    time.sleep(0.01)
    cutoff, version = dt.datetime.now(dt.UTC), table.metadata_location
    preview = await table.expire_snapshots(older_than=cutoff, retain_last=1, dry_run=True)
    assert preview.dry_run and await listing(table) == before
    assert (await table.refresh()).metadata_location == version  # nothing committed
    result = await table.expire_snapshots(older_than=cutoff, retain_last=1)
    after = await listing(table)
    # the dry run listed what the expiry then did, statistics and history's data files included
    assert not result.dry_run and preview.expired_snapshot_ids == result.expired_snapshot_ids
    assert preview.removed_refs == result.removed_refs and preview.deleted_files == result.deleted_files

    kept = {s.snapshot_id for s in table.snapshots()}
    current = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert kept == {current, s2, dev_head, dev_parent}  # main's last, the tag, dev keeps two
    assert s3 in result.expired_snapshot_ids and result.removed_refs == []

    # Exactly the files the expired snapshots reached and no kept snapshot does were deleted.
    expected = reached_before - reach(table.metadata_location, props)
    assert before - after == expected == set(result.deleted_files)
    assert any(p.endswith(".stats") for p in expected)
    assert any(p.endswith(".parquet") for p in expected)
    # Nothing unreferenced is left behind.
    assert after - reach(table.metadata_location, props) - metadata_files(table) == set()

    assert ids(await table.scan(ref="release").to_arrow()) == list(range(12))
    assert ids(await table.scan(ref="dev").to_arrow()) == list(range(12)) + list(range(100, 106))
    await assert_readers_agree(table, list(range(18)), endpoint, props)


@pytest.mark.anyio
async def test_expiry_deletes_exactly_what_only_expired_snapshots_reached(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    await check_expiry_scenario(table, {}, None)


@pytest.mark.anyio
async def test_expiry_on_s3_deletes_exactly_what_only_expired_snapshots_reached(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    options = s3_storage_options(moto_endpoint)
    props = {
        "s3.endpoint": moto_endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    async with aioiceberg.connect(f"s3://{bucket}/wh", storage_options=options) as catalog:
        table = await catalog.create_table("db.t", schema=SCHEMA, partition_by=["region"])
        await check_expiry_scenario(table, props, moto_endpoint)


@pytest.mark.anyio
async def test_ref_retention_ages_out_refs_and_keeps_branch_history(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 1))
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_tag("short-lived", s1, max_ref_age_ms=1)
        ms.create_tag("forever", s1)
    await table.append(rows(1, 1))
    s2 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_branch("old", s2, max_ref_age_ms=1)
    for i in range(2, 5):
        await table.append(rows(i, 1))
    time.sleep(0.01)
    # A branch's own max-snapshot-age wins over the cutoff: main keeps what is younger than a day.
    async with table.manage_snapshots() as ms:
        ms.set_retention("main", max_snapshot_age_ms=86_400_000)
    result = await table.expire_snapshots(older_than=dt.datetime.now(dt.UTC))
    assert result.removed_refs == ["old", "short-lived"]
    assert result.expired_snapshot_ids == []  # s1 kept by "forever", the rest by main's age
    async with table.manage_snapshots() as ms:
        ms.set_retention("main", max_snapshot_age_ms=None)
        ms.remove_tag("forever")
    result = await table.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=2)
    assert set(result.expired_snapshot_ids) == {s1, s2, table.history()[0].parent_snapshot_id}
    assert len(table.snapshots()) == 2
    await assert_readers_agree(table, list(range(5)))


@pytest.mark.anyio
async def test_nothing_expires_when_retention_keeps_everything(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 1))
    await table.append(rows(1, 1))
    version = table.version
    result = await table.expire_snapshots()  # default: older than five days
    assert result.expired_snapshot_ids == [] and result.deleted_files == []
    assert table.version == version  # no commit at all


def _age(path: str, days: float) -> None:
    old = time.time() - days * 86_400
    os.utime(path, (old, old))


@pytest.mark.anyio
async def test_orphan_removal_deletes_only_old_unreferenced_objects(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t",
        schema=SCHEMA,
        partition_by=["region"],
        properties={"write.metadata.previous-versions-max": "2"},
    )
    for i in range(4):
        await table.append(rows(i * 5, 5))
    await table.compute_statistics()
    await table.rewrite_data_files()
    neighbour = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t2", schema=SCHEMA)
    await neighbour.append(rows(0, 1))  # a table whose location shares the prefix "db/t"
    junk_old = f"{table.location}/data/region=eu/stray-old.parquet"
    junk_new = f"{table.location}/data/stray-new.parquet"
    meta_junk = f"{table.location}/metadata/crashed-commit-m0.avro"
    for p in (junk_old, junk_new, meta_junk):
        await table.io.write(p, b"x")
    for p in await listing(table):
        _age(p, 4)
    await table.io.write(junk_new, b"y")  # recent: may be a commit in flight

    before = await listing(table)
    props: dict[str, str] = {}
    referenced = metadata_files(table) | reach(table.metadata_location, props, live_only=False)
    for entry in table.metadata.metadata_log:
        referenced |= reach(entry.metadata_file, props, live_only=False)
    expected = {p for p in before if p not in referenced and p != junk_new}
    assert {junk_old, meta_junk} <= expected
    assert any(p.endswith(".metadata.json") for p in expected)  # dropped from the metadata log

    assert set(await table.remove_orphan_files(dry_run=True)) == expected
    assert await listing(table) == before
    removed = await table.remove_orphan_files()
    assert set(removed) == expected
    assert await listing(table) == before - expected
    assert junk_new in await listing(table)
    assert ids(await neighbour.scan().to_arrow()) == [0]
    await assert_readers_agree(table, list(range(20)))
    # A cutoff in the future makes the recent stray an orphan too, and nothing else.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    assert await table.remove_orphan_files(older_than=later) == [junk_new]


@pytest.mark.anyio
async def test_orphan_removal_on_s3(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    options: dict[str, Any] = s3_storage_options(moto_endpoint)
    async with aioiceberg.connect(f"s3://{bucket}/wh", storage_options=options) as catalog:
        table = await catalog.create_table("db.t", schema=SCHEMA)
        await table.append(rows(0, 5))
        await table.append(rows(5, 5))
        stray = f"{table.location}/data/stray.parquet"
        await table.io.write(stray, b"x")
        before = await listing(table)
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
        assert await table.remove_orphan_files(older_than=later) == [stray]
        assert await listing(table) == before - {stray}
        assert ids(await table.scan().to_arrow()) == list(range(10))


@pytest.mark.anyio
async def test_expiry_deletes_nothing_when_its_commit_may_not_have_landed(
    fault_proxy: FaultProxy, moto_endpoint: str
) -> None:
    """The version write lands but neither its answer nor any read-back of it arrives: the
    outcome is unknown, so the expired snapshots' files must all still be there."""
    bucket = await create_bucket(moto_endpoint)
    proxied = {**s3_storage_options(fault_proxy.url), "s3.retry-max-attempts": "2"}
    async with aioiceberg.connect(f"s3://{bucket}/wh", storage_options=proxied) as catalog:
        table = await appended_table(catalog, 3, 5)
        before = await listing(table)
        time.sleep(0.01)
        put_seen = False

        def metadata_after_the_version_write(request: web.Request) -> bool:
            nonlocal put_seen
            put_seen = put_seen or (conditional_put(request) and request.path.endswith(".metadata.json"))
            return put_seen and request.path.endswith(".metadata.json")

        fault_proxy.configure(drop_filter=metadata_after_the_version_write, drop_next=10_000)
        with pytest.raises(CommitStateUnknownError):
            await table.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)
        assert fault_proxy.stats.dropped >= 2  # the write's answer and the read-backs
        fault_proxy.reset()
        assert before <= await listing(table)  # nothing deleted
    direct = s3_storage_options(moto_endpoint)
    async with aioiceberg.connect(f"s3://{bucket}/wh", storage_options=direct) as catalog:
        landed = await catalog.load_table("db.t")
        assert len(landed.snapshots()) == 1  # it did land: its files are orphans now, not lost data
        assert ids(await landed.scan().to_arrow()) == list(range(15))


@pytest.mark.anyio
async def test_expiry_in_a_transaction_that_fails_deletes_nothing(tmp_path: Path) -> None:
    table, stale = await compacted_under_a_stale_handle(aioiceberg.connect(str(tmp_path / "wh")))
    before = await listing(table)
    time.sleep(0.01)
    with pytest.raises(CommitConflictError):
        async with stale.transaction() as tx:
            expired = await tx.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)
            await tx.rewrite_data_files()  # built after the expiry: fails the commit
    assert expired.expired_snapshot_ids == [] and expired.deleted_files == []
    assert await listing(table) == before  # the compaction's new files went, nothing else
    # Aborted by an error in the block: no commit, nothing deleted.
    version = table.version
    with pytest.raises(RuntimeError, match="changed my mind"):
        async with table.transaction() as tx:
            expired = await tx.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)
            raise RuntimeError("changed my mind")
    assert expired.deleted_files == [] and await listing(table) == before
    assert (await table.refresh()).version == version
    await assert_readers_agree(table, list(range(20)))


@pytest.mark.anyio
async def test_a_manifest_rewrite_and_an_expiry_in_one_commit_delete_the_replaced_manifests(
    tmp_path: Path,
) -> None:
    table = await appended_table(aioiceberg.connect(str(tmp_path / "wh")), 5, 4, ["region"])
    old_lists = {s.manifest_list for s in table.snapshots()}
    version = table.version
    time.sleep(0.01)
    async with table.transaction() as tx:
        rewrite = await tx.rewrite_manifests()
        expired = await tx.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)
    assert table.version == version + 1
    current = table.current_snapshot()
    assert current is not None and current.snapshot_id == rewrite.snapshot_id
    assert [s.snapshot_id for s in table.snapshots()] == [current.snapshot_id]
    assert len(expired.expired_snapshot_ids) == 5
    # The merged-away manifests and the old lists went; every data file is still live.
    assert set(expired.deleted_manifests) == set(rewrite.rewritten_manifests)
    assert set(expired.deleted_manifest_lists) == old_lists
    assert expired.deleted_content_files == [] and expired.failed_deletes == []
    assert not set(expired.deleted_files) & await listing(table)
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    assert await table.remove_orphan_files(older_than=soon, dry_run=True) == []
    await assert_readers_agree(table, list(range(20)))
