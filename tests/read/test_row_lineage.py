"""v3 row lineage read and kept: ``_row_id`` and ``_last_updated_sequence_number`` selected by
name, derived from each file's ``first_row_id`` and data sequence number, and carried through
deletes (deletion vectors and copy-on-write) and compaction so that a row keeps its id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
LINEAGE = ("id", "_row_id", "_last_updated_sequence_number")
Lineage = dict[int, tuple[int | None, int | None]]


def batch(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "v": [i % 7 for i in ids]}, schema=SCHEMA)


async def lineage(table: Table, row_filter: str = "") -> Lineage:
    """id -> (_row_id, _last_updated_sequence_number) of the live rows."""
    await table.refresh()
    got = await table.scan(row_filter, selected_fields=LINEAGE).to_arrow()
    assert got.column_names == list(LINEAGE)
    rows: list[dict[str, Any]] = got.to_pylist()
    out = {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in rows}
    assert len(out) == len(rows)
    return out


def assert_unique(ids: Lineage) -> None:
    row_ids = [r for r, _ in ids.values()]
    assert None not in row_ids and len(set(row_ids)) == len(row_ids)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
async def test_ids_unique_and_stable_through_deletes_and_compaction(tmp_path: Path, mode: str) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table(
            "db.t", schema=SCHEMA, format_version=3, properties={"write.delete.mode": mode}
        )
        await table.append(batch(range(0, 50)))
        await table.refresh()
        await table.append(batch(range(50, 80)))
        first = await lineage(table)
        # appended rows: the file's first_row_id + position; the commit's sequence number
        assert first == {i: (i, 1 if i < 50 else 2) for i in range(80)}
        await table.refresh()
        assert table.metadata.next_row_id == 80

        await table.refresh()
        await table.delete("id IN (3, 10, 55) OR v = 6")
        after_delete = await lineage(table)
        gone = {i for i in range(80) if i in (3, 10, 55) or i % 7 == 6}
        assert after_delete == {i: first[i] for i in range(80) if i not in gone}

        await table.refresh()
        await table.rewrite_data_files()
        await table.refresh()
        assert len([t async for t in table.scan().plan_files()]) == 1
        compacted = await lineage(table)
        assert compacted == after_delete  # ids and sequence numbers kept by the rewrite

        await table.refresh()
        next_id = table.metadata.next_row_id
        assert next_id is not None
        await table.append(batch(range(100, 110)))
        grown = await lineage(table)
        assert_unique(grown)
        new = {i: grown[i] for i in range(100, 110)}
        seq = table.metadata.current_snapshot().sequence_number  # type: ignore[union-attr]
        assert new == {100 + k: (next_id + k, seq) for k in range(10)}
        assert {i: grown[i] for i in compacted} == compacted


@pytest.mark.anyio
async def test_positions_come_from_the_file_when_row_groups_are_skipped(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table(
            "db.t",
            schema=SCHEMA,
            format_version=3,
            properties={"write.parquet.row-group-limit": "100", "write.delete.mode": "merge-on-read"},
        )
        await table.append(batch(range(1000)))
        await table.refresh()
        await table.delete("id < 500 AND v IN (0, 3)")  # a deletion vector over several row groups
        full = await lineage(table)
        assert full == {i: (i, 1) for i in range(1000) if not (i < 500 and i % 7 in (0, 3))}
        # row groups before 650 skipped by their statistics; ids stay the file's positions
        skipped = await lineage(table, "id >= 650 AND id < 720")
        assert skipped == {i: full[i] for i in range(650, 720)}
        only = await table.scan("id = 901", selected_fields=("_row_id",)).to_arrow()
        assert only.to_pylist() == [{"_row_id": 901}]
        assert only.schema.field("_row_id").metadata == {b"PARQUET:field_id": b"2147483540"}


@pytest.mark.anyio
async def test_lineage_is_null_without_first_row_ids(tmp_path: Path) -> None:
    """Pre-v3 data: no first_row_id, no stored ids: both columns are null."""
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA, format_version=2)
        await table.append(batch(range(5)))
        assert await lineage(table) == {i: (None, None) for i in range(5)}
        full = await table.scan(selected_fields=("*", "_last_updated_sequence_number")).to_arrow()
        assert full.column_names == ["id", "v", "_last_updated_sequence_number"]
        with pytest.raises(aioiceberg.errors.ValidationError, match="_row_idx"):
            await table.scan(selected_fields=("_row_idx",)).to_arrow()


@pytest.mark.anyio
async def test_upgraded_table_gives_old_files_ids_at_the_next_commit(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA, format_version=2)
        await table.append(batch(range(5)))
        await table.refresh()
        await table.upgrade_table_version(3)
        await table.refresh()
        await table.append(batch(range(5, 8)))
        got = await lineage(table)
        assert_unique(got)
        # the old manifest got its range at the first v3 commit (as Java's manifest list writer)
        assert sorted(r for r, _ in got.values() if r is not None) == list(range(8))


@pytest.mark.anyio
async def test_copy_on_write_upsert_keeps_the_ids_of_updated_rows(tmp_path: Path) -> None:
    """As Java's copy-on-write MERGE: an updated row keeps its ``_row_id`` and takes the
    commit's sequence number; an inserted row gets a new id; untouched rows keep both."""
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table(
            "db.t", schema=SCHEMA, format_version=3, properties={"write.merge.mode": "copy-on-write"}
        )
        await table.append(batch(range(0, 20)))
        await table.refresh()
        await table.append(batch(range(20, 30)))
        before = await lineage(table)
        await table.refresh()
        await table.upsert(pa.table({"id": [25, 3, 40], "v": [-1, -1, -1]}, schema=SCHEMA), ["id"])
        after = await lineage(table)
        await table.refresh()
        seq = table.metadata.current_snapshot().sequence_number  # type: ignore[union-attr]
        assert after[3] == (3, seq) and after[25] == (25, seq)
        assert after[40][0] is not None and after[40][0] >= 30 and after[40][1] == seq
        assert {i: after[i] for i in before if i not in (3, 25)} == {
            i: r for i, r in before.items() if i not in (3, 25)
        }
        assert_unique(after)
        got = await table.scan("id IN (3, 25, 40)").to_arrow()
        assert sorted(got.column("v").to_pylist()) == [-1, -1, -1]


@pytest.mark.anyio
async def test_rewritten_manifests_keep_the_ids_of_their_files(tmp_path: Path) -> None:
    """Entries rewritten into a new manifest carry the first_row_id they inherited, so the new
    manifest's own range (assigned at commit, as Java does) never renumbers their rows."""
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA, format_version=3)
        for start in range(0, 40, 10):
            await table.refresh()
            await table.append(batch(range(start, start + 10)))
        before = await lineage(table)
        assert before == {i: (i, i // 10 + 1) for i in range(40)}
        await table.refresh()
        result = await table.rewrite_manifests()
        assert len(result.rewritten_manifests) == 4 and len(result.added_manifests) == 1
        assert await lineage(table) == before
        await table.refresh()
        await table.append(batch(range(40, 45)))
        after = await lineage(table)
        assert {i: after[i] for i in before} == before
        assert_unique(after)
