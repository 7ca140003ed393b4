"""``rewrite_position_delete_files`` on a v2 table upgraded to v3 turns its position delete
files into deletion vectors, as Java does: one vector per data file (merged with the one it
had), the v2 files and replaced vectors removed in one ``replace`` snapshot, rows naming
gone data files dropped; the rows read (ours, PyIceberg, DuckDB) stay the same. A
merge-on-read delete after the upgrade folds the v2 positions of its data file into its
vector, so the rows they deleted stay deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from dv_differential import MOR, duckdb_rows, make_rows, new_table, our_rows, rows_of
from maint_helpers import assert_readers_agree, listing
from position_delete_tables import deleted_table
from position_delete_vectors import assert_converted, delete_state, deleted_positions
from pyiceberg.table import StaticTable
from read_helpers import duckdb_connection

import aioiceberg
from aioiceberg.errors import CommitConflictError
from aioiceberg.table import Table


async def second_handle(table: Table) -> Table:
    assert table.protocol is not None
    state = await table.protocol.load(table.location)
    return Table(None, table.location, state, table.io, table.protocol)


@pytest.mark.anyio
async def test_an_upgraded_table_has_its_position_delete_files_turned_into_vectors(tmp_path: Path) -> None:
    table, expected = await deleted_table(aioiceberg.connect(str(tmp_path / "wh")))
    await table.upgrade_table_version(3)
    before = await delete_state(table)
    assert len(before.v2_files) == 18 and not before.vectors
    positions = await deleted_positions(table, before)

    result = await table.rewrite_position_delete_files()

    after = await delete_state(table)
    assert_converted(before, after)
    assert after.data == before.data
    assert sorted(result.rewritten_files) == sorted(f.file_path for f in before.v2_files)
    assert result.groups == 3 and len(after.vectors) == len(positions) == 3  # a live file per region
    assert len({v.file_path for v in after.vectors}) == 3  # one Puffin file per partition
    assert result.dangling_rows_removed > 0
    assert await deleted_positions(table, after) == positions
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    await assert_readers_agree(table, expected)

    version = table.version
    again = await table.rewrite_position_delete_files({"rewrite-all": "true"})
    assert again.snapshot_id is None and table.version == version


@pytest.mark.anyio
async def test_a_delete_after_the_upgrade_keeps_the_v2_deletes_and_the_rewrite_merges_its_vector(
    tmp_path: Path,
) -> None:
    rows = make_rows(90)
    table = await new_table(tmp_path, rows, version=2, props=MOR, batches=2)  # 2 files per part
    await table.delete("id IN (0, 3, 48, 51)")  # part 'a': one delete file naming both its files
    await table.delete("id IN (1, 46)")  # part 'b'
    await table.upgrade_table_version(3)
    # vectors for the first 'a' file (with its v2 positions) and a 'c' file, in one Puffin file
    await table.delete("id IN (6, 8)")
    gone = {0, 3, 48, 51, 1, 46, 6, 8}
    expected = sorted(r for r in rows if r[0] not in gone)
    con = duckdb_connection()

    def peers() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        pyiceberg = rows_of(StaticTable.from_metadata(table.metadata_location).scan().to_arrow())
        return pyiceberg, duckdb_rows(table.metadata_location, con)

    assert await our_rows(table) == expected
    assert peers() == (expected, expected)
    before = await delete_state(table)
    (vector,) = [v for v in before.vectors if "part=a" in v.referenced_data_file]  # type: ignore[operator]
    (untouched,) = [v for v in before.vectors if v is not vector]
    assert vector.file_path == untouched.file_path
    assert vector.record_count == 3  # ids 0, 3 (from the v2 file) and 6
    assert len(before.v2_files) == 2  # the partition-scoped 'a' file stays, as Java leaves it
    positions = await deleted_positions(table, before)

    result = await table.rewrite_position_delete_files()

    after = await delete_state(table)
    assert_converted(before, after)
    assert (vector.file_path, vector.content_offset) in after.removed  # replaced by the merged one
    assert vector.file_path in result.rewritten_files and len(result.rewritten_files) == 3
    assert len(after.vectors) == 5  # the four files of 'a' and 'b', and the 'c' one
    assert untouched in after.vectors  # the other vector of that Puffin file stays
    assert await deleted_positions(table, after) == positions
    merged = next(v for v in after.vectors if v.referenced_data_file == vector.referenced_data_file)
    assert merged.record_count == 3
    assert await our_rows(table) == expected
    assert peers() == (expected, expected)


@pytest.mark.anyio
async def test_concurrent_changes_to_the_converted_files_conflict(tmp_path: Path) -> None:
    rows = make_rows(90)
    table = await new_table(tmp_path, rows, version=2, props=MOR, batches=2)
    await table.delete("id IN (0, 48)")  # part 'a': a delete file naming both its files
    await table.upgrade_table_version(3)

    # a vector added concurrently for a data file the rewrite writes one for: two would be live
    stale = await second_handle(table)
    await table.delete("id = 3")
    files = await listing(table)
    state = await delete_state(table)
    with pytest.raises(CommitConflictError, match="deletion vector for"):
        await stale.rewrite_position_delete_files()
    assert await listing(table) == files  # its Puffin file and manifests were deleted
    await table.refresh()
    assert await delete_state(table) == state

    # the v2 file converted concurrently: it is no longer live
    stale = await second_handle(table)
    await table.rewrite_position_delete_files()
    with pytest.raises(CommitConflictError, match="concurrent commit"):
        await stale.rewrite_position_delete_files()
    await table.refresh()
    assert await our_rows(table) == sorted(r for r in rows if r[0] not in {0, 48, 3})


@pytest.mark.anyio
async def test_partial_progress_commits_a_partition_at_a_time(tmp_path: Path) -> None:
    table, expected = await deleted_table(aioiceberg.connect(str(tmp_path / "wh")))
    await table.upgrade_table_version(3)
    before = await delete_state(table)
    result = await table.rewrite_position_delete_files({"partial-progress.enabled": "true"})
    assert len(result.snapshot_ids) == 3 and result.failed_groups == []
    after = await delete_state(table)
    assert after.v2_files == [] and len(after.vectors) == 3
    assert {v.referenced_data_file for v in after.vectors} <= before.data
    await assert_readers_agree(table, expected)
