"""Branches, tags, fast-forward, rollback, cherry-pick: read back by us, PyIceberg and DuckDB."""

from __future__ import annotations

from pathlib import Path

import pytest
from maint_helpers import SCHEMA, assert_readers_agree, ids, pyiceberg_ids, pyiceberg_table, rows

import aioiceberg
from aioiceberg.errors import NotFoundError, UnsupportedError, ValidationError
from aioiceberg.spec.metadata import SnapshotRefType


@pytest.mark.anyio
async def test_tags_and_branches_time_travel_in_every_reader(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, partition_by=["day(ts)"]
    )
    await table.append(rows(0, 10))
    first = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_tag("v1", first, max_ref_age_ms=86_400_000)
        ms.create_branch("dev", first, min_snapshots_to_keep=3, max_snapshot_age_ms=3_600_000)
    await table.append(rows(100, 5), branch="dev")
    await table.append(rows(10, 10))

    assert ids(await table.scan(ref="v1").to_arrow()) == list(range(10))
    assert ids(await table.scan(ref="dev").to_arrow()) == list(range(10)) + list(range(100, 105))
    await assert_readers_agree(table, list(range(20)))

    dev = table.refs()["dev"]
    assert (dev.min_snapshots_to_keep, dev.max_snapshot_age_ms) == (3, 3_600_000)  # kept across the append
    py_refs = pyiceberg_table(table).refs()
    assert set(py_refs) == {"main", "v1", "dev"}
    assert py_refs["v1"].snapshot_ref_type == "tag" and py_refs["v1"].max_ref_age_ms == 86_400_000
    assert py_refs["dev"].snapshot_ref_type == "branch" and py_refs["dev"].min_snapshots_to_keep == 3
    assert pyiceberg_ids(table, py_refs["dev"].snapshot_id) == list(range(10)) + list(range(100, 105))
    assert pyiceberg_ids(table, py_refs["v1"].snapshot_id) == list(range(10))

    with pytest.raises(ValidationError):
        await table.append(rows(200, 1), branch="v1")  # tags do not move
    with pytest.raises(ValidationError):
        table.manage_snapshots().create_tag("v1", first)
    with pytest.raises(ValidationError):
        table.manage_snapshots().remove_branch("main")
    with pytest.raises(ValidationError):
        table.manage_snapshots().remove_branch("v1")  # a tag, not a branch


@pytest.mark.anyio
async def test_replace_remove_and_retention_of_refs(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 3))
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    await table.append(rows(3, 3))
    s2 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_tag("t", s1).create_branch("b", s1, max_ref_age_ms=1000)
    async with table.manage_snapshots() as ms:
        ms.replace_tag("t", s2).replace_branch("b", s2)
        ms.set_retention("b", min_snapshots_to_keep=2, max_ref_age_ms=None)
    assert table.refs()["t"].snapshot_id == s2
    b = table.refs()["b"]
    assert (b.snapshot_id, b.min_snapshots_to_keep, b.max_ref_age_ms) == (s2, 2, None)
    async with table.manage_snapshots() as ms:
        ms.remove_tag("t").remove_branch("b")
    assert set(table.refs()) == {"main"}
    assert set(pyiceberg_table(table).refs()) == {"main"}
    with pytest.raises(NotFoundError):
        table.manage_snapshots().remove_tag("t")


@pytest.mark.anyio
async def test_fast_forward_rollback_and_set_current_snapshot(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 5))
    s1 = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    async with table.manage_snapshots() as ms:
        ms.create_branch("staging")
    await table.append(rows(5, 5), branch="staging")
    await table.append(rows(10, 5), branch="staging")
    staged = table.refs()["staging"].snapshot_id

    async with table.manage_snapshots() as ms:
        ms.fast_forward("main", "staging")
    assert table.current_snapshot().snapshot_id == staged  # type: ignore[union-attr]
    await assert_readers_agree(table, list(range(15)))

    async with table.manage_snapshots() as ms:
        ms.rollback_to_snapshot(s1)
    await assert_readers_agree(table, list(range(5)))
    log = [e.snapshot_id for e in table.metadata.snapshot_log]
    assert log[-2:] == [staged, s1]

    await table.append(rows(50, 1))  # main diverges from staging
    with pytest.raises(ValidationError, match="not an ancestor"):
        table.manage_snapshots().rollback_to_snapshot(staged)
    with pytest.raises(ValidationError, match="not an ancestor"):
        table.manage_snapshots().fast_forward("main", "staging")

    async with table.manage_snapshots() as ms:
        ms.set_current_snapshot(ref_name="staging")  # any snapshot, ancestor or not
    await assert_readers_agree(table, list(range(15)))


@pytest.mark.anyio
async def test_cherry_pick_publishes_a_staged_append_and_refuses_other_operations(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    await table.append(rows(0, 6))
    async with table.manage_snapshots() as ms:
        ms.create_branch("audit")
    await table.append(rows(100, 4), branch="audit")
    staged = table.refs()["audit"].snapshot_id
    await table.append(rows(6, 6))  # main moved on: a plain fast-forward is impossible

    async with table.manage_snapshots() as ms:
        ms.cherry_pick(staged)
    picked = table.current_snapshot()
    assert picked is not None and picked.snapshot_id != staged
    assert picked.summary is not None and picked.summary["source-snapshot-id"] == str(staged)
    assert picked.summary["operation"] == "append" and picked.summary["added-records"] == "4"
    await assert_readers_agree(table, list(range(12)) + list(range(100, 104)))

    with pytest.raises(ValidationError, match="already cherry-picked"):
        table.manage_snapshots().cherry_pick(staged)
    for i in range(3):
        await table.append(rows(200 + i, 1))
    await table.rewrite_manifests()
    replace = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    with pytest.raises(UnsupportedError, match="only append snapshots"):
        table.manage_snapshots().cherry_pick(replace)


@pytest.mark.anyio
async def test_ref_operations_join_a_transaction(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 2))
    version = table.version
    async with table.transaction() as tx:
        await tx.append(rows(2, 2))
        async with tx.manage_snapshots() as ms:
            ms.create_tag("before", table.current_snapshot().snapshot_id)  # type: ignore[union-attr]
    assert table.version == version + 1  # one commit for both
    assert table.refs()["before"].type is SnapshotRefType.TAG
    assert ids(await table.scan(ref="before").to_arrow()) == [0, 1]
    await assert_readers_agree(table, [0, 1, 2, 3])


@pytest.mark.anyio
async def test_every_kind_of_commit_keeps_the_branch_retention_and_refuses_tags(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    await table.append(rows(0, 6))
    async with table.manage_snapshots() as ms:
        ms.set_retention("main", min_snapshots_to_keep=3, max_snapshot_age_ms=86_400_000)
        ms.create_tag("t")
    await table.append(rows(6, 2))
    await table.delete("id < 2")
    await table.overwrite(rows(100, 2), overwrite_filter="id >= 6")
    main = table.refs()["main"]
    assert (main.min_snapshots_to_keep, main.max_snapshot_age_ms) == (3, 86_400_000)
    assert sorted(ids(await table.scan().to_arrow())) == [2, 3, 4, 5, 100, 101]
    with pytest.raises(ValidationError, match="tag"):
        await table.append(rows(200, 1), branch="t")
