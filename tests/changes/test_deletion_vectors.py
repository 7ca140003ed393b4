"""Merge-on-read deletes on v3 write deletion vectors: one Puffin ``deletion-vector-v1`` blob
per data file, merged with the file's earlier DV (and v2 position deletes) in the same commit,
so a data file never has two live DVs.

Differential: the same random deletes on a v3 table (DVs), an identical v2 table (position
delete files) and a copy-on-write table give the same rows, here and in plain Python; the DV
table reads the same in DuckDB 1.5.5 (its iceberg extension applies DVs) and PyIceberg 0.12
(which reads DVs too).

A data file that is removed or rewritten (copy-on-write delete or overwrite, whole-file
delete, partition overwrite, compaction) takes its DV, and on v3 any position delete file
naming only it, out of the table in the same snapshot: no live delete file points at a file
that is gone. Compaction applies the DVs (the new files hold only live rows).
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from dv_differential import (
    MOR,
    PARTS,
    Row,
    duckdb_rows,
    make_rows,
    matches,
    new_table,
    our_rows,
    random_filter,
    rows_of,
    to_arrow,
)
from pyiceberg.table import StaticTable
from pyroaring import BitMap64

import aioiceberg
from aioiceberg.errors import CommitConflictError
from aioiceberg.read.deletes import decode_deletion_vector
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    read_manifest,
    read_manifest_list,
)
from aioiceberg.spec.puffin import read_footer
from aioiceberg.table import Table
from aioiceberg.write.deletion_vectors import encode_deletion_vector


async def live_files(table: Table) -> list[tuple[ManifestEntry, str]]:
    """Live (added or existing) entries of the current snapshot, with their manifest."""
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    out = []
    for mf in read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list):
        for e in read_manifest(await table.io.read(mf.manifest_path), mf).entries:
            if e.is_live:
                out.append((e, mf.manifest_path))
    return out


async def live_dvs(table: Table) -> list[DataFile]:
    return [e.data_file for e, _ in await live_files(table) if e.data_file.is_deletion_vector]


def assert_one_dv_per_data_file(dvs: list[DataFile], data_paths: set[str]) -> None:
    targets = [d.referenced_data_file for d in dvs]
    assert len(targets) == len(set(targets)), "two live DVs for one data file"
    assert set(targets) <= data_paths


async def check_dv_entries(table: Table) -> None:
    """Every live DV entry agrees with its Puffin blob: footer, framing, cardinality."""
    for dv in await live_dvs(table):
        data = await table.io.read(dv.file_path)
        assert dv.file_format == FileFormat.PUFFIN
        assert dv.content == DataFileContent.POSITION_DELETES
        assert dv.file_size_in_bytes == len(data)
        footer = read_footer(data, location=dv.file_path)
        (blob,) = [b for b in footer.blobs if b.offset == dv.content_offset]
        assert blob.type == "deletion-vector-v1"
        assert blob.length == dv.content_size_in_bytes
        assert blob.fields == (2147483545,)
        assert (blob.snapshot_id, blob.sequence_number, blob.compression_codec) == (-1, -1, None)
        assert blob.properties == {
            "referenced-data-file": dv.referenced_data_file,
            "cardinality": str(dv.record_count),
        }
        raw = data[blob.offset : blob.offset + blob.length]
        assert len(decode_deletion_vector(raw, dv.file_path)) == dv.record_count


def test_encoding_is_javas_portable_64_bit_layout() -> None:
    """pyroaring's BitMap64 portable serialization is RoaringPositionBitmap's: an 8-byte LE
    count of 32-bit bitmaps, then per bitmap a 4-byte LE key and the portable 32-bit form."""
    positions = np.array([0, 3, 70000, 70001, (1 << 32) + 9, (5 << 32) + 1], dtype=np.int64)
    blob = encode_deletion_vector(positions[::-1])
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4 : 4 + length]
    assert body[:4] == b"\xd1\xd3\x39\x64"
    assert struct.unpack(">I", blob[4 + length :])[0] == zlib.crc32(body)
    bitmap = body[4:]
    assert struct.unpack_from("<Q", bitmap)[0] == 3  # keys 0, 1, 5
    assert struct.unpack_from("<I", bitmap, 8)[0] == 0
    assert BitMap64.deserialize(bitmap) == BitMap64(positions.astype(np.uint64).tolist())
    assert decode_deletion_vector(blob).tolist() == sorted(positions.tolist())
    with pytest.raises(aioiceberg.errors.ValidationError):
        encode_deletion_vector(np.array([-1]))


@pytest.mark.anyio
@pytest.mark.parametrize("partitioned", [True, False])
async def test_random_deletes_through_dvs_position_deletes_and_rewrites_agree(
    tmp_path: Path, partitioned: bool
) -> None:
    rows = make_rows(240)
    dv = await new_table(tmp_path / "dv", rows, version=3, props=MOR, partitioned=partitioned)
    pos = await new_table(tmp_path / "pos", rows, version=2, props=MOR, partitioned=partitioned)
    cow = await new_table(tmp_path / "cow", rows, version=3, props={}, partitioned=partitioned)
    data_paths = {e.data_file.file_path for e, _ in await live_files(dv)}
    rnd = random.Random(2024)
    expected = list(rows)
    for _ in range(12):
        text = random_filter(rnd, len(rows))
        for t in (dv, pos, cow):
            await t.delete(text)
        expected = [r for r in expected if not matches(r, text)]
        want = sorted(expected)
        assert await our_rows(dv) == want, text
        assert await our_rows(pos) == want, text
        assert await our_rows(cow) == want, text
        assert_one_dv_per_data_file(await live_dvs(dv), data_paths)
    entries = [e.data_file for e, _ in await live_files(dv)]
    assert {f.file_path for f in entries if f.content == DataFileContent.DATA} == data_paths
    assert all(f.is_deletion_vector for f in entries if f.content != DataFileContent.DATA)
    assert await live_dvs(dv), "the deletes wrote no DV"
    assert not [f for f in (e.data_file for e, _ in await live_files(pos)) if f.is_deletion_vector]
    await check_dv_entries(dv)
    want = sorted(expected)
    assert duckdb_rows(dv.metadata_location) == want
    assert rows_of(StaticTable.from_metadata(dv.metadata_location).scan().to_arrow()) == want


@pytest.mark.anyio
async def test_repeated_deletes_on_one_file_keep_one_dv_that_grows(tmp_path: Path) -> None:
    rows = make_rows(100)
    table = await new_table(
        tmp_path, [r for r in rows if r[1] == "a"], version=3, props=MOR, batches=1, partitioned=False
    )
    ((data_entry, _),) = await live_files(table)
    data_path = data_entry.data_file.file_path
    deleted: set[int] = set()
    previous: DataFile | None = None
    for k, ids in enumerate([(0, 3), (6, 9, 12), (3, 15), (21,)]):
        await table.delete(f"id IN ({', '.join(map(str, ids))})")
        deleted |= set(ids)
        (dv,) = await live_dvs(table)
        assert dv.referenced_data_file == data_path
        assert dv.record_count == len(deleted)
        summary = table.current_snapshot().summary  # type: ignore[union-attr]
        assert summary is not None
        assert summary["added-dvs"] == "1"
        assert summary.get("removed-dvs") == (None if k == 0 else "1")
        assert summary["total-position-deletes"] == str(len(deleted))
        if previous is not None:
            assert (dv.file_path, dv.content_offset) != (previous.file_path, previous.content_offset)
        previous = dv
        want = sorted(r for r in rows if r[1] == "a" and r[0] not in deleted)
        assert await our_rows(table) == want
        assert duckdb_rows(table.metadata_location) == want
    await check_dv_entries(table)


@pytest.mark.anyio
async def test_v2_position_deletes_fold_into_the_first_dv_after_upgrade(tmp_path: Path) -> None:
    rows = make_rows(90)
    table = await new_table(tmp_path, rows, version=2, props=MOR, batches=1)
    await table.delete("id IN (0, 3, 6, 30, 33)")  # all part 'a': one file-scoped delete file
    await table.delete("id IN (1, 4)")  # part 'b'
    await table.upgrade_table_version(3)
    await table.delete("id IN (9, 12)")
    expected = sorted(r for r in rows if r[0] not in {0, 3, 6, 30, 33, 1, 4, 9, 12})
    assert await our_rows(table) == expected
    live = [e.data_file for e, _ in await live_files(table)]
    (dv,) = [f for f in live if f.is_deletion_vector]
    assert dv.record_count == 7  # the five v2 deletes of that file and the two new ones
    v2 = [f for f in live if f.content == DataFileContent.POSITION_DELETES and not f.is_deletion_vector]
    assert [f.referenced_data_file for f in v2] != [dv.referenced_data_file]  # 'b' keeps its file
    assert len(v2) == 1
    await check_dv_entries(table)


async def second_handle(table: Table) -> Table:
    assert table.protocol is not None
    state = await table.protocol.load(table.location)
    return Table(None, table.location, state, table.io, table.protocol)


@pytest.mark.anyio
async def test_concurrent_dvs_for_one_file_conflict_and_for_others_rebase(tmp_path: Path) -> None:
    rows = make_rows(60)
    table = await new_table(tmp_path, rows, version=3, props=MOR, batches=1)
    other = await second_handle(table)
    with pytest.raises(CommitConflictError, match="deletion vector"):
        async with table.transaction() as tx:
            await tx.delete("id = 3")  # part 'a'
            await other.delete("id = 6")  # part 'a' too: the same data file
    await table.refresh()
    assert await our_rows(table) == sorted(r for r in rows if r[0] != 6)
    other = await second_handle(table)
    async with table.transaction() as tx:
        await tx.delete("id = 9")  # part 'a'
        await other.delete("id = 4")  # part 'b': another file
    assert await our_rows(table) == sorted(r for r in rows if r[0] not in (4, 6, 9))
    assert_one_dv_per_data_file(
        await live_dvs(table),
        {e.data_file.file_path for e, _ in await live_files(table) if not e.data_file.content},
    )


@pytest.mark.anyio
async def test_overwrite_on_v3_merge_on_read_writes_a_dv_and_the_new_rows(tmp_path: Path) -> None:
    rows = make_rows(60)
    table = await new_table(tmp_path, rows, version=3, props=MOR, batches=2, partitioned=False)
    data_paths = {e.data_file.file_path for e, _ in await live_files(table)}
    new = [(1000 + i, "z", i) for i in range(5)]
    await table.overwrite(to_arrow(new), overwrite_filter="v < 100")
    want = sorted([r for r in rows if not matches(r, "v < 100")] + new)
    assert await our_rows(table) == want
    live = [e.data_file for e, _ in await live_files(table)]
    assert data_paths <= {f.file_path for f in live}  # nothing rewritten
    dvs = [f for f in live if f.is_deletion_vector]
    assert {d.referenced_data_file for d in dvs} <= data_paths and len(dvs) == len(data_paths)
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.operation.value == "overwrite"
    await check_dv_entries(table)
    assert duckdb_rows(table.metadata_location) == want


POSITION_PATH_ID = 2147483546  # file_path of position delete files


def named_data_file(f: DataFile) -> str | None:
    """The one data file a position delete file names, when its entry says so."""
    if f.referenced_data_file is not None:
        return f.referenced_data_file
    lower = (f.lower_bounds or {}).get(POSITION_PATH_ID)
    upper = (f.upper_bounds or {}).get(POSITION_PATH_ID)
    return lower.decode() if lower is not None and lower == upper else None


async def assert_no_dangling_deletes(table: Table) -> None:
    """Every live delete file that names one data file names a live one."""
    live = [e.data_file for e, _ in await live_files(table)]
    data = {f.file_path for f in live if f.content == DataFileContent.DATA}
    for f in live:
        if f.content == DataFileContent.POSITION_DELETES:
            target = named_data_file(f)
            assert target is None or target in data, f"{f.file_path} names removed {target}"


def peer_rows(table: Table) -> tuple[list[Row], list[Row]]:
    """The rows PyIceberg and DuckDB read."""
    pyiceberg = rows_of(StaticTable.from_metadata(table.metadata_location).scan().to_arrow())
    return pyiceberg, duckdb_rows(table.metadata_location)


async def mor_delete(table: Table, text: str) -> None:
    await table.set_properties(MOR)
    await table.delete(text)
    await table.set_properties({"write.delete.mode": "copy-on-write"})


@pytest.mark.anyio
@pytest.mark.parametrize("partitioned", [True, False])
async def test_removed_and_rewritten_files_take_their_dvs_along(tmp_path: Path, partitioned: bool) -> None:
    rows = make_rows(150)
    table = await new_table(tmp_path, rows, version=3, props=MOR, batches=5, partitioned=partitioned)
    expected = list(rows)

    async def check(step: str) -> None:
        assert await our_rows(table) == sorted(expected), step
        await assert_no_dangling_deletes(table)
        await check_dv_entries(table)

    async def deleted_with_dvs(text: str) -> None:
        nonlocal expected
        await mor_delete(table, text)
        expected = [r for r in expected if not matches(r, text)]
        await check(text)
        assert await live_dvs(table)

    # a copy-on-write delete rewriting files that have DVs
    await deleted_with_dvs("id IN (0, 1, 2, 31, 32, 33, 61, 62, 91, 121, 149)")
    dvs_before = len(await live_dvs(table))
    await table.delete("id IN (3, 4, 5)")
    expected = [r for r in expected if r[0] not in (3, 4, 5)]
    await check("copy-on-write delete")
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and int(summary["removed-dvs"]) >= 1
    assert len(await live_dvs(table)) == dvs_before - int(summary["removed-dvs"])

    # a whole-file delete: ids 30..59 fill the second batch's files, every row matches
    await deleted_with_dvs("v < 120")
    await table.delete("id >= 30 AND id < 60")
    expected = [r for r in expected if not 30 <= r[0] < 60]
    await check("whole-file delete")
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.get("added-data-files") is None  # dropped whole
    assert int(summary.get("removed-dvs") or "0") >= 1

    # a copy-on-write overwrite
    await deleted_with_dvs("id IN (63, 64, 94, 95, 124, 125)")
    new = [(1000 + i, PARTS[i % 3], i) for i in range(6)]
    await table.overwrite(to_arrow(new), overwrite_filter="v > 800")
    expected = [r for r in expected if not matches(r, "v > 800")] + new
    await check("overwrite")

    # a partition overwrite (the whole table when unpartitioned)
    await deleted_with_dvs("id IN (66, 67, 97, 98, 127, 128)")
    replaced = [(2000 + i, "a", i) for i in range(4)]
    await table.dynamic_partition_overwrite(to_arrow(replaced))
    expected = [r for r in expected if partitioned and r[1] != "a"] + replaced
    await check("partition overwrite")
    if not partitioned:
        assert not await live_dvs(table)
    assert peer_rows(table) == (sorted(expected), sorted(expected))


@pytest.mark.anyio
async def test_v3_drops_a_file_scoped_v2_position_delete_file_with_its_data_file(tmp_path: Path) -> None:
    rows = make_rows(90)
    table = await new_table(tmp_path, rows, version=2, props=MOR, batches=1)
    await table.delete("id IN (0, 3)")  # part 'a': a position delete file naming one file
    await table.delete("id IN (1, 4)")  # part 'b'
    await table.upgrade_table_version(3)
    await table.set_properties({"write.delete.mode": "copy-on-write"})
    await table.delete("part = 'a' AND id = 6")  # rewrites part 'a''s file only
    expected = sorted(r for r in rows if r[0] not in {0, 3, 1, 4, 6})
    assert await our_rows(table) == expected
    live = [e.data_file for e, _ in await live_files(table)]
    deletes = [f for f in live if f.content == DataFileContent.POSITION_DELETES]
    (b_file,) = [f.file_path for f in live if f.content == DataFileContent.DATA and f.partition == ("b",)]
    assert [named_data_file(f) for f in deletes] == [b_file]  # 'a''s went with its data file
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary["removed-position-delete-files"] == "1"
    await assert_no_dangling_deletes(table)
    assert peer_rows(table)[0] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("partitioned", [True, False])
async def test_compaction_applies_dvs_and_drops_them(tmp_path: Path, partitioned: bool) -> None:
    rows = make_rows(180)
    table = await new_table(tmp_path, rows, version=3, props=MOR, batches=6, partitioned=partitioned)
    rnd = random.Random(37)
    expected = list(rows)
    for _ in range(4):
        text = random_filter(rnd, len(rows))
        await table.delete(text)
        expected = [r for r in expected if not matches(r, text)]
    dvs = await live_dvs(table)
    assert dvs
    if partitioned:  # only part 'a': the other partitions keep their files and DVs
        result = await table.rewrite_data_files(filter="part = 'a'")
        assert await our_rows(table) == sorted(expected)
        rewritten = set(result.rewritten_files)
        kept = [d for d in dvs if d.referenced_data_file not in rewritten]
        assert kept and len(kept) < len(dvs)
        assert {(d.file_path, d.content_offset) for d in await live_dvs(table)} == {
            (d.file_path, d.content_offset) for d in kept
        }
        await assert_no_dangling_deletes(table)
        dvs = await live_dvs(table)
    result = await table.rewrite_data_files()
    assert await our_rows(table) == sorted(expected)
    live = [e.data_file for e, _ in await live_files(table)]
    assert all(f.content == DataFileContent.DATA for f in live)  # no delete file is left
    assert set(result.added_files) <= {f.file_path for f in live}
    assert sum(f.record_count for f in live) == len(expected)  # only live rows were written
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.operation.value == "replace"
    assert summary["removed-dvs"] == str(len(dvs))
    assert summary["total-position-deletes"] == "0"
    assert peer_rows(table) == (sorted(expected), sorted(expected))
