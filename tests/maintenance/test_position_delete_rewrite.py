"""``rewrite_position_delete_files`` in one process: fewer delete files, no dangling rows, the
same rows for our reader, PyIceberg and DuckDB; conflicts leave the table as it was."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from maint_helpers import SCHEMA, assert_readers_agree, ids, listing, rows
from position_delete_tables import delete_rows, deleted_table, live_files

import aioiceberg
from aioiceberg.errors import CommitConflictError, ValidationError
from aioiceberg.maintenance.position_deletes import (
    PositionDeleteRewriteOptions,
    plan_delete_groups,
)


@pytest.mark.anyio
async def test_small_delete_files_are_combined_per_partition_and_dangling_rows_dropped(
    tmp_path: Path,
) -> None:
    table, expected = await deleted_table(aioiceberg.connect(str(tmp_path / "wh")))
    await assert_readers_agree(table, expected)
    data, before = await live_files(table)
    assert len(before) == 18
    rows_before = await delete_rows(table)
    live_before = rows_before.filter(
        pc.is_in(rows_before.column("file_path"), value_set=pa.array(sorted(data)))
    )
    assert 0 < live_before.num_rows < rows_before.num_rows  # some rows dangle

    result = await table.rewrite_position_delete_files()

    assert result.groups == 3 and result.failed_groups == []
    assert len(result.rewritten_files) == 18 and len(result.added_files) == 3
    assert result.dangling_rows_removed == rows_before.num_rows - live_before.num_rows
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    data_after, after = await live_files(table)
    assert data_after == data and len(after) == 3
    # each new file carries the largest data sequence number of the files it replaced
    assert {seq for _, _, seq in after} == {max(seq for _, _, seq in before if seq is not None)}
    rows_after = await delete_rows(table)
    assert rows_after.equals(live_before)  # the same live rows, no dangling one
    assert set(rows_after.column("file_path").to_pylist()) <= data
    await assert_readers_agree(table, expected)

    again = await table.rewrite_position_delete_files()  # 3 files: below min-input-files
    assert again.snapshot_id is None and again.groups == 0


@pytest.mark.anyio
async def test_options_choose_the_groups(tmp_path: Path) -> None:
    table, expected = await deleted_table(aioiceberg.connect(str(tmp_path / "wh")))
    version = table.version
    nothing = await table.rewrite_position_delete_files({"min-input-files": "7"})
    assert nothing.snapshot_id is None and table.version == version
    groups = await plan_delete_groups(
        table.io, table.metadata, PositionDeleteRewriteOptions(min_input_files=7, rewrite_all=True)
    )
    assert [len(g.files) for g in groups] == [6, 6, 6]  # rewrite-all takes every group
    with pytest.raises(ValidationError, match="unknown rewrite_position_delete_files options"):
        await table.rewrite_position_delete_files({"delete-file-threshold": "2"})
    with pytest.raises(ValidationError, match="min-input-files"):
        await table.rewrite_position_delete_files({"min-input-files": "0"})

    partial = await table.rewrite_position_delete_files(
        {"partial-progress.enabled": "true", "partial-progress.max-commits": "3"}
    )
    assert len(partial.snapshot_ids) == 3 and len(partial.added_files) == 3
    await assert_readers_agree(table, expected)


@pytest.mark.anyio
async def test_a_concurrent_rewrite_conflicts_and_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table, expected = await deleted_table(catalog)
    stale = await catalog.load_table("db.t")
    await table.rewrite_position_delete_files()
    before = await listing(table)
    state = await live_files(table)
    with pytest.raises(CommitConflictError, match="removed by a concurrent commit"):
        await stale.rewrite_position_delete_files()
    assert await listing(table) == before  # its new delete files and manifests were deleted
    await table.refresh()
    assert await live_files(table) == state
    await assert_readers_agree(table, expected)


@pytest.mark.anyio
async def test_v3_tables_with_deletion_vectors_are_left_as_they_are(tmp_path: Path) -> None:
    table = await aioiceberg.connect(str(tmp_path / "wh")).create_table(
        "db.t",
        schema=SCHEMA,
        properties={"write.delete.mode": "merge-on-read", "format-version": "3"},
    )
    await table.append(rows(0, 20))
    for k in range(6):
        await table.delete(f"id = {k}")
    version = table.version
    result = await table.rewrite_position_delete_files({"rewrite-all": "true"})
    assert result.snapshot_id is None and table.version == version
    assert ids(await table.scan().to_arrow()) == list(range(6, 20))


@pytest.mark.anyio
async def test_a_data_file_removed_concurrently_leaves_only_harmless_dangling_rows(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table, expected = await deleted_table(catalog)
    stale = await catalog.load_table("db.t")
    await table.rewrite_data_files(filter="region = 'us'")  # drops the 'us' data files
    result = await stale.rewrite_position_delete_files()  # planned before that: commits anyway
    assert result.groups == 3 and result.snapshot_id is not None
    await table.refresh()
    await assert_readers_agree(table, expected)
    data, _ = await live_files(table)
    dangling = [p for p in (await delete_rows(table)).column("file_path").to_pylist() if p not in data]
    assert dangling and all("region=us" in p for p in dangling)
    again = await table.rewrite_position_delete_files({"rewrite-all": "true"})
    assert again.dangling_rows_removed == len(dangling)
    data, _ = await live_files(table)
    assert set((await delete_rows(table)).column("file_path").to_pylist()) <= data
    await assert_readers_agree(table, expected)
