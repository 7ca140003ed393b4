"""``rewrite_position_delete_files`` on Spark (local[2]): one task per group of delete files.

The table (many small position delete files over three partitions, half their rows
dangling) is built once and its warehouse copied aside; the single-process rewrite runs on
it, the copy is put back at the same path and the Spark action runs on that same table:
both leave the same delete rows and the same live rows. The action's Spark job runs in
the caller's thread, under its job group.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from dv_differential import MOR, duckdb_rows, make_rows, new_table, our_rows
from maint_helpers import duckdb_ids, ids, pyiceberg_ids
from position_delete_tables import delete_rows, deleted_table, live_files
from position_delete_vectors import assert_converted, delete_state, deleted_positions
from spark_sessions import local_session

import aioiceberg
from aioiceberg._sync import default_loop
from aioiceberg.errors import RewriteFailedError
from aioiceberg.io.local import LOCK_NAME
from aioiceberg.spark.actions import rewrite_position_delete_files
from aioiceberg.table import Table


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-actions-deletes")


def files_under(root: Path) -> set[str]:
    """Files under ``root`` but the local store's lock files (made on a directory's first write)."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != LOCK_NAME}


def state(table: Table) -> tuple[pa.Table, list[int], int]:
    """Delete rows, live ids, and the number of live position delete files."""
    rows = default_loop.run(delete_rows(table))
    _, deletes = default_loop.run(live_files(table))
    return rows, ids(default_loop.run(table.scan().to_arrow())), len(deletes)


def restore(saved: Path, root: Path) -> None:
    shutil.rmtree(root)
    shutil.copytree(saved, root, symlinks=True)


def test_spark_rewrite_matches_the_single_process_rewrite(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    table, expected = default_loop.run(deleted_table(aioiceberg.connect(str(root))))
    location = table.location
    saved = tmp_path / "saved"
    shutil.copytree(root, saved, symlinks=True)

    single = default_loop.run(table.rewrite_position_delete_files())
    single_state = state(table)
    assert single.groups == 3 and single_state[2] == 3 and single_state[1] == expected

    restore(saved, root)
    context = spark.sparkContext
    context.setJobGroup("rewrite-deletes", "the caller's job group")  # the job runs in this thread
    try:
        got = rewrite_position_delete_files(spark, location)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert context.statusTracker().getJobIdsForGroup("rewrite-deletes")
    after = default_loop.run(aioiceberg.load_table(location))
    assert got.groups == single.groups and len(got.added_files) == len(single.added_files)
    assert sorted(got.rewritten_files) == sorted(single.rewritten_files)
    assert got.dangling_rows_removed == single.dangling_rows_removed > 0
    spark_state = state(after)
    assert spark_state[0].equals(single_state[0])  # the same delete rows
    assert spark_state[1:] == single_state[1:]
    assert pyiceberg_ids(after) == expected and duckdb_ids(after.metadata_location) == expected
    added = {str(Path(p).relative_to(root)) for p in got.added_files}
    assert added <= files_under(root)  # no file of the job left beside the committed ones
    job_id = Path(got.added_files[0]).name.split("-")[2]  # the job's write id names its files
    assert not any(job_id in f for f in files_under(root) - added)


def test_a_failed_group_commits_nothing_or_is_left_out_with_partial_progress(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "wh"
    table, _ = default_loop.run(deleted_table(aioiceberg.connect(str(root))))
    location = table.location
    _, deletes = default_loop.run(live_files(table))
    broken = next(p for p, _, _ in deletes if "region=us" in p)
    Path(broken).unlink()  # the 'us' group cannot be read
    before = files_under(root)
    with pytest.raises(RewriteFailedError, match="nothing was committed"):
        rewrite_position_delete_files(spark, location)
    assert files_under(root) == before

    got = rewrite_position_delete_files(
        spark, location, options={"partial-progress.enabled": "true", "partial-progress.max-commits": "1"}
    )
    assert len(got.failed_groups) == 1 and len(got.snapshot_ids) == 1 and len(got.added_files) == 2
    after = default_loop.run(aioiceberg.load_table(location))
    _, left = default_loop.run(live_files(after))
    assert len(left) == 6 + 2  # the 'us' files stay as they were


def test_on_an_upgraded_v3_table_the_action_writes_the_vectors_the_single_process_one_writes(
    spark: Any, tmp_path: Path
) -> None:
    rows = make_rows(90)

    async def build() -> Table:
        table = await new_table(tmp_path, rows, version=2, props=MOR, batches=2)
        await table.delete("id IN (0, 3, 48, 51)")  # part 'a': a delete file naming its 2 files
        await table.delete("id IN (1, 46)")  # part 'b'
        await table.upgrade_table_version(3)
        await table.delete("id = 6")  # a vector holding the v2 positions of its file
        return table

    root = tmp_path / "wh"
    table = default_loop.run(build())
    expected = sorted(r for r in rows if r[0] not in {0, 3, 48, 51, 1, 46, 6})
    before = default_loop.run(delete_state(table))
    positions = default_loop.run(deleted_positions(table, before))
    saved = tmp_path / "saved"
    shutil.copytree(root, saved, symlinks=True)
    single = default_loop.run(table.rewrite_position_delete_files())

    restore(saved, root)
    got = rewrite_position_delete_files(spark, table.location)
    after = default_loop.run(aioiceberg.load_table(table.location))
    converted = default_loop.run(delete_state(after))
    assert_converted(before, converted)
    (old,) = before.vectors
    assert (old.file_path, old.content_offset) in converted.removed  # merged into the new one
    assert sorted(got.rewritten_files) == sorted(single.rewritten_files)
    assert len(got.added_files) == len(single.added_files) == len(converted.vectors) == 4
    assert default_loop.run(deleted_positions(after, converted)) == positions
    assert default_loop.run(our_rows(after)) == expected == duckdb_rows(after.metadata_location)
