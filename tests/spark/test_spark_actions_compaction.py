"""``aioiceberg.spark.actions.rewrite_data_files`` on a local[2] SparkSession: tables of many
small files (several partitions, deletes) compacted by bin-pack, sort and z-order, one Spark
task per file group; rows checked with our reader, PyIceberg and DuckDB."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from compaction_helpers import SCHEMA, add_small_files, bounds, mean_width, sorted_rows
from maint_helpers import duckdb_ids, ids, pyiceberg_table
from servers.spark_cluster import session_builder

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import RewriteFailedError
from aioiceberg.spark.actions import rewrite_data_files
from aioiceberg.spec.manifest import DataFile


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = session_builder("local[2]", "aioiceberg-compaction", {}).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def small_file_table(root: Path, files: int, rows_per_file: int, **kwargs: Any) -> sync.Table:
    table = sync.connect(str(root)).create_table("db.t", schema=SCHEMA, partition_by=["region"], **kwargs)
    default_loop.run(add_small_files(table.aio, files, rows_per_file))
    table.refresh()
    return table


def data_files(table: sync.Table) -> list[DataFile]:
    return [t.file for t in table.scan(include_column_stats=True).plan_files()]


def listing(table: sync.Table) -> set[str]:
    async def listed() -> set[str]:
        return {o.location async for o in table.aio.io.list(table.location + "/")}

    return default_loop.run(listed())


def assert_readers_agree(table: sync.Table, expected: list[tuple[Any, ...]]) -> None:
    assert sorted_rows(table.scan().to_arrow()) == expected
    assert sorted_rows(pyiceberg_table(table.aio).scan().to_arrow()) == expected
    assert duckdb_ids(table.metadata_location) == sorted(r[0] for r in expected)


def test_bin_pack_compacts_many_small_files_with_deletes(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "wh", 300, 20, properties={"write.delete.mode": "merge-on-read"})
    table.delete("x < 1000")  # position deletes over most files
    table.refresh()
    expected = sorted_rows(table.scan().to_arrow())
    before = data_files(table)
    assert len(before) == 300
    target = sum(f.file_size_in_bytes for f in before) // 12  # about 4 files per partition
    result = rewrite_data_files(spark, table.location, target_file_size=target)
    table.refresh()
    after = data_files(table)
    assert len(result.rewritten_files) == 300 and result.groups == len(result.added_files) == len(after)
    assert 3 <= len(after) <= 24 and not result.failed_groups
    assert len(result.snapshot_ids) == 1 and result.snapshot_id == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary["operation"] == "replace"
    assert_readers_agree(table, expected)
    assert not result.added_files or all(p in listing(table) for p in result.added_files)


def test_sort_and_zorder_with_partial_progress(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "wh", 150, 60, format_version=3)
    expected = sorted_rows(table.scan().to_arrow())
    before = data_files(table)
    target = max(f.file_size_in_bytes for f in before) * 2  # several sorted files per partition
    snapshots = len(table.metadata.snapshots)
    result = rewrite_data_files(
        spark,
        table,
        sort_order="x",
        target_file_size=target,
        options={
            "partial-progress.enabled": "true",
            "partial-progress.max-commits": "2",
            "rewrite-all": "true",
        },
    )
    table.refresh()
    assert result.groups == 3 and len(result.snapshot_ids) == 2 and not result.failed_groups
    assert len(table.metadata.snapshots) == snapshots + 2
    for sid in result.snapshot_ids:
        snap = table.metadata.snapshot_by_id(sid)
        assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    after = data_files(table)
    assert sorted_rows(table.scan().to_arrow()) == expected
    assert mean_width(table.aio, after, "x") < mean_width(table.aio, before, "x") / 3
    for region in ("eu", "us", "ap"):  # within a partition the sorted files barely overlap
        ranges = sorted(bounds(table.aio, f, "x") for f in after if tuple(f.partition) == (region,))
        overlaps = sum(1 for (_, hi), (lo, _) in itertools.pairwise(ranges) if hi > lo)
        assert overlaps < len(ranges) / 2

    z = rewrite_data_files(
        spark,
        table,
        zorder_by=["x", "y"],
        target_file_size=target,
        options={"rewrite-all": "true"},
    )
    table.refresh()
    zfiles = data_files(table)
    assert len(z.snapshot_ids) == 1 and len(zfiles) == len(z.added_files)
    assert sorted_rows(table.scan().to_arrow()) == expected
    box = sum(
        (bounds(table.aio, f, "x")[1] - bounds(table.aio, f, "x")[0])
        * (bounds(table.aio, f, "y")[1] - bounds(table.aio, f, "y")[0])
        for f in zfiles
    ) / len(zfiles)
    assert box < mean_width(table.aio, before, "x") * mean_width(table.aio, before, "y") / 3
    assert ids(pyiceberg_table(table.aio).scan().to_arrow()) == sorted(r[0] for r in expected)


def test_a_group_that_fails_on_its_executor(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "wh", 30, 20)
    victim = data_files(table)[0]
    default_loop.run(table.aio.io.delete(victim.file_path))  # its group cannot be read
    version, files = table.version, listing(table)
    options = {"rewrite-all": "true", "max-file-group-size-bytes": "1"}  # one file per group
    with pytest.raises(RewriteFailedError, match="nothing was committed"):
        rewrite_data_files(spark, table.location, options=options)
    assert table.refresh().version == version and listing(table) == files  # nothing written stays
    result = rewrite_data_files(
        spark, table.location, options={**options, "partial-progress.enabled": "true"}
    )
    assert result.groups == 30 and len(result.failed_groups) == 1 and len(result.rewritten_files) == 29
    assert "ObjectNotFoundError" in result.errors[0] or "NotFound" in result.errors[0]
    table.refresh()
    assert victim.file_path in {f.file_path for f in data_files(table)}  # left out, not lost
