"""Deletes, overwrites, dynamic partition overwrites and upserts: every result reads the same
here, in PyIceberg and in DuckDB, and equals rows computed in plain Python from the inputs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from rowlevel_tables import BASE_TS, ROWS, assert_reads, new_table, row, to_table

from aioiceberg.spec.manifest import DataFileContent, ManifestEntryStatus, read_manifest, read_manifest_list
from aioiceberg.table import Table


async def live_entries(table: Table) -> list[tuple[ManifestEntryStatus, DataFileContent, str]]:
    """(status, content, path) of every entry in the current snapshot's manifests."""
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    out = []
    for mf in read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list):
        for e in read_manifest(await table.io.read(mf.manifest_path), mf).entries:
            out.append((e.status, e.data_file.content, e.data_file.file_path))
    return out


@pytest.mark.anyio
async def test_delete_of_whole_partitions_drops_files_without_rewriting(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    before = {p for s, _, p in await live_entries(table) if s != ManifestEntryStatus.DELETED}
    await table.delete("region = 'eu' OR region = 'ap'")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary.operation.value == "delete"
    expected = [r for r in ROWS if r[1] == "us"]
    assert snap.summary["deleted-records"] == str(len(ROWS) - len(expected))
    assert snap.summary["total-records"] == str(len(expected))
    assert "added-data-files" not in snap.summary.properties
    after = await live_entries(table)
    deleted = {p for s, _, p in after if s == ManifestEntryStatus.DELETED}
    live = {p for s, _, p in after if s != ManifestEntryStatus.DELETED}
    assert deleted | live == before and not deleted & live
    await assert_reads(table, expected)


@pytest.mark.anyio
@pytest.mark.parametrize("format_version", [1, 2])
async def test_partial_delete_rewrites_files_copy_on_write(tmp_path: Path, format_version: int) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["day(ts)"], format_version=format_version)
    await table.delete("n >= 20 AND n < 35")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary.operation.value == "overwrite"
    assert int(snap.summary["added-data-files"]) > 0 and int(snap.summary["deleted-data-files"]) > 0
    expected = [r for r in ROWS if not (r[2] is not None and 20 <= r[2] < 35)]
    assert snap.summary["total-records"] == str(len(expected))
    assert all(c == DataFileContent.DATA for _, c, _ in await live_entries(table))
    await assert_reads(table, expected)


@pytest.mark.anyio
async def test_rows_where_the_filter_is_null_survive_a_delete(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS)
    await table.delete("n != 5")
    expected = [r for r in ROWS if r[2] is None or r[2] == 5]
    assert any(r[2] is None for r in expected)
    await assert_reads(table, expected)
    await table.delete("NOT (n < 100)")
    await assert_reads(table, expected)


@pytest.mark.anyio
async def test_merge_on_read_delete_writes_position_deletes(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, properties={"write.delete.mode": "merge-on-read"})
    data_files = {p for s, c, p in await live_entries(table) if c == DataFileContent.DATA}
    await table.delete("region = 'us'")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary.operation.value == "delete"
    expected = [r for r in ROWS if r[1] != "us"]
    assert snap.summary["added-position-deletes"] == str(len(ROWS) - len(expected))
    entries = await live_entries(table)
    assert {p for s, c, p in entries if c == DataFileContent.DATA} == data_files  # nothing rewritten
    assert any(c == DataFileContent.POSITION_DELETES for _, c, _ in entries)
    await assert_reads(table, expected)
    # a second delete on top of the first sees the first's deletes
    await table.delete("id < 10")
    expected = [r for r in expected if r[0] >= 10]
    await assert_reads(table, expected)


@pytest.mark.anyio
async def test_overwrite_with_filter_replaces_matching_rows_in_one_snapshot(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region"])
    snapshots = len(table.snapshots())
    new = [row(i, n=1000 + i) for i in range(100, 110)]
    await table.overwrite(to_table(new), overwrite_filter="region = 'eu' AND id < 30")
    assert len(table.snapshots()) == snapshots + 1
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "overwrite"
    expected = [r for r in ROWS if not (r[1] == "eu" and r[0] < 30)] + new
    await assert_reads(table, expected)
    await table.overwrite(to_table(new[:3]))
    await assert_reads(table, new[:3])


@pytest.mark.anyio
async def test_dynamic_partition_overwrite_replaces_only_partitions_present(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, partition_by=["region", "day(ts)"])
    new = [(500, "eu", 1, BASE_TS), (501, "eu", 2, BASE_TS), (502, "us", 3, BASE_TS + dt.timedelta(days=2))]
    await table.dynamic_partition_overwrite(to_table(new))
    replaced = {(r[1], r[3]) for r in new}
    expected = [r for r in ROWS if (r[1], r[3]) not in replaced] + new
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["replace-partitions"] == "true"
    assert snap.summary["total-records"] == str(len(expected))
    await assert_reads(table, expected)


@pytest.mark.anyio
async def test_upsert_with_equality_deletes_replaces_and_inserts_by_key(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS)
    changes = [row(i, n=-i) for i in (3, 4, 59)] + [row(i, n=-i) for i in (70, 71)]
    await table.upsert(to_table(changes), join_cols=["id"])
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary["added-equality-deletes"] == str(len(changes))
    assert any(c == DataFileContent.EQUALITY_DELETES for _, c, _ in await live_entries(table))
    keys = {r[0] for r in changes}
    expected = [r for r in ROWS if r[0] not in keys] + changes
    await assert_reads(table, expected, pyiceberg=False)
    # upsert again over the upserted rows: the newest version wins
    again = [row(3, n=333)]
    await table.upsert(to_table(again), join_cols=["id"])
    expected = [r for r in expected if r[0] != 3] + again
    await assert_reads(table, expected, pyiceberg=False)


@pytest.mark.anyio
async def test_upsert_copy_on_write_rewrites_matching_files(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS, format_version=1)
    changes = [row(i, n=-i) for i in (1, 2, 80)]
    await table.upsert(to_table(changes), join_cols=["id"])
    assert all(c == DataFileContent.DATA for _, c, _ in await live_entries(table))
    expected = [r for r in ROWS if r[0] not in {1, 2, 80}] + changes
    await assert_reads(table, expected)


@pytest.mark.anyio
async def test_changes_combine_and_delete_after_upsert_sees_new_rows(tmp_path: Path) -> None:
    table = await new_table(
        tmp_path, ROWS, partition_by=["region"], properties={"write.delete.mode": "merge-on-read"}
    )
    expected = list(ROWS)
    await table.delete("id < 5")
    expected = [r for r in expected if r[0] >= 5]
    upserted = [row(i, n=7000 + i) for i in (10, 11, 12, 90)]
    await table.upsert(to_table(upserted), join_cols=["id", "region"])
    expected = [r for r in expected if r[0] not in {10, 11, 12, 90}] + upserted
    await table.delete("n >= 7000 AND id < 12")
    expected = [r for r in expected if not (r[2] is not None and r[2] >= 7000 and r[0] < 12)]
    await table.set_properties({"write.delete.mode": "copy-on-write"})
    await table.delete("region = 'ap' AND id > 40")
    expected = [r for r in expected if not (r[1] == "ap" and r[0] > 40)]
    await table.overwrite(to_table([row(200)]), overwrite_filter="region = 'us'")
    expected = [r for r in expected if r[1] != "us"] + [row(200)]
    await assert_reads(table, expected, pyiceberg=False)


@pytest.mark.anyio
async def test_delete_matching_nothing_commits_nothing(tmp_path: Path) -> None:
    table = await new_table(tmp_path, ROWS)
    version = table.version
    await table.delete("id > 1000")
    assert table.version == version


def python_filter(name: str) -> Any:
    """The SQL meaning of each filter below, over a row tuple (null -> not deleted)."""
    return {
        "n IN (1, 2, 3, 40)": lambda r: r[2] in (1, 2, 3, 40),
        "n IS NULL": lambda r: r[2] is None,
        "n NOT IN (5, 8)": lambda r: r[2] is not None and r[2] not in (5, 8),
        "NOT (region = 'eu' OR n > 30)": lambda r: r[1] != "eu" and r[2] is not None and r[2] <= 30,
        "region = 'us' AND id >= 20": lambda r: r[1] == "us" and r[0] >= 20,
        "ts < '2024-05-03T00:00:00+00:00'": lambda r: r[3] < BASE_TS + dt.timedelta(days=2),
    }[name]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@pytest.mark.parametrize(
    "delete_filter",
    [
        "n IN (1, 2, 3, 40)",
        "n IS NULL",
        "n NOT IN (5, 8)",
        "NOT (region = 'eu' OR n > 30)",
        "region = 'us' AND id >= 20",
        "ts < '2024-05-03T00:00:00+00:00'",
    ],
)
async def test_delete_removes_exactly_the_rows_sql_says(
    tmp_path: Path, mode: str, delete_filter: str
) -> None:
    table = await new_table(
        tmp_path, ROWS, partition_by=["day(ts)"], properties={"write.delete.mode": mode}, batches=3
    )
    await table.delete(delete_filter)
    matches = python_filter(delete_filter)
    await assert_reads(table, [r for r in ROWS if not matches(r)], duckdb=False)


@pytest.mark.anyio
async def test_manifests_without_deleted_files_are_carried_over_unchanged(tmp_path: Path) -> None:
    table = await new_table(tmp_path, [r for r in ROWS if r[1] == "eu"], batches=1)
    await table.append(to_table([r for r in ROWS if r[1] != "eu"]))
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    before = {m.manifest_path for m in read_manifest_list(await table.io.read(snap.manifest_list))}
    await table.delete("region = 'us'")
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    after = {m.manifest_path for m in read_manifest_list(await table.io.read(snap.manifest_list))}
    assert len(before & after) == 1  # the eu-only manifest, by path
    await assert_reads(table, [r for r in ROWS if r[1] != "us"], duckdb=False)
