"""Row filters on the v3 row lineage columns: ``_row_id`` and ``_last_updated_sequence_number``
bind as metadata columns, a scan returns exactly the rows whose values (stored, or derived from
the file's ``first_row_id`` and data sequence number) match, planning drops only files proven
to hold none, and deletes and overwrites take the same filters. Expected rows are computed
from an unfiltered read of the lineage columns, filtered with pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import aioiceberg
from aioiceberg.errors import ExpressionError
from aioiceberg.table import Table

pytestmark = pytest.mark.anyio

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
ALL = ("id", "v", "_row_id", "_last_updated_sequence_number")
ROW_ID, SEQ = pc.field("_row_id"), pc.field("_last_updated_sequence_number")

# (filter, the same test over the lineage columns as read)
FILTERS: list[tuple[str, pc.Expression]] = [
    ("_row_id >= 100 AND _row_id < 120", (ROW_ID >= 100) & (ROW_ID < 120)),
    ("_row_id >= 200", ROW_ID >= 200),
    ("_row_id < 10", ROW_ID < 10),
    ("_row_id = 131", ROW_ID == 131),
    ("_row_id IN (3, 79, 80, 131, 290, 335)", ROW_ID.isin([3, 79, 80, 131, 290, 335])),
    ("_row_id NOT IN (1, 2, 3)", ~ROW_ID.isin([1, 2, 3])),
    ("_row_id != 130", ROW_ID != 130),
    ("_row_id IS NULL", ROW_ID.is_null()),
    ("_row_id IS NOT NULL", ROW_ID.is_valid()),
    ("NOT (_row_id < 150)", ~(ROW_ID < 150)),
    ("_row_id = 133 OR v = 3", (ROW_ID == 133) | (pc.field("v") == 3)),
    ("_last_updated_sequence_number = 3", SEQ == 3),
    ("_last_updated_sequence_number > 6", SEQ > 6),
    ("_last_updated_sequence_number <= 2 AND id >= 40", (SEQ <= 2) & (pc.field("id") >= 40)),
    ("_last_updated_sequence_number IN (1, 4)", SEQ.isin([1, 4])),
]


def _batch(ids: range, bump: int = 0) -> pa.Table:
    return pa.table({"id": list(ids), "v": [i % 7 + bump for i in ids]}, schema=SCHEMA)


async def _lineage_table(tmp_path: Path, mode: str = "copy-on-write") -> Table:
    """Five appends of 40 rows, the first two compacted (ids and sequence numbers stored),
    six rows updated by a copy-on-write upsert (ids kept, the rest of their file rewritten
    with its ids stored), then one more append."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table(
        "db.t", schema=SCHEMA, format_version=3, properties={"write.delete.mode": mode}
    )
    for k in range(5):
        await table.refresh()
        await table.append(_batch(range(k * 40, k * 40 + 40)))
    await table.refresh()
    await table.rewrite_data_files(filter="id < 80")
    await table.refresh()
    await table.upsert(_batch(range(130, 136), bump=100), join_cols=["id"], mode="copy-on-write")
    await table.refresh()
    await table.append(_batch(range(200, 220)))
    await table.refresh()
    return table


async def _everything(table: Table) -> pa.Table:
    """Every live row with its lineage columns and its file (``_file``), sorted by id."""
    await table.refresh()
    rows = await table.scan(selected_fields=ALL, include_file_column=True).to_arrow()
    return rows.sort_by("id")


async def _planned(table: Table, row_filter: str) -> set[str]:
    return {t.file.file_path async for t in table.scan(row_filter).plan_files()}


async def test_filters_on_lineage_columns_match_the_rows_read(tmp_path: Path) -> None:
    table = await _lineage_table(tmp_path)
    everything = await _everything(table)
    assert everything.num_rows == 220
    rows: list[dict[str, Any]] = everything.to_pylist()
    ids = [r["_row_id"] for r in rows]
    assert None not in ids and len(set(ids)) == len(ids)
    by_id = {r["id"]: r for r in rows}
    # the history the filters run over: stored ids after the compaction and the upsert
    assert [by_id[i]["_row_id"] for i in (0, 79, 131, 140, 200)] == [0, 79, 131, 140, 320]
    assert len({r["_file"] for r in rows}) == 6

    for text, expected in FILTERS:
        want = everything.filter(expected)
        got = (await table.scan(text, selected_fields=ALL).to_arrow()).sort_by("id")
        assert got.to_pylist() == want.drop_columns(["_file"]).to_pylist(), text
        only_id = await table.scan(text, selected_fields=("id",)).to_arrow()
        assert only_id.column_names == ["id"], text  # computed to filter, not returned
        assert sorted(only_id.column("id").to_pylist()) == want.column("id").to_pylist(), text
        planned = await _planned(table, text)
        assert set(want.column("_file").to_pylist()) <= planned, text  # no matching file dropped


async def test_planning_prunes_files_by_their_lineage_ranges(tmp_path: Path) -> None:
    table = await _lineage_table(tmp_path)
    everything = await _everything(table)
    file_of = {r["id"]: r["_file"] for r in everything.to_pylist()}
    files = set(file_of.values())
    compacted, rewritten, upserted, last = file_of[0], file_of[120], file_of[130], file_of[200]

    def holding(expected: pc.Expression) -> set[str]:
        return set(everything.filter(expected).column("_file").to_pylist())

    # every file's highest row id is below 200 but the last append's: it alone is planned
    assert await _planned(table, "_row_id >= 200") == holding(ROW_ID >= 200) == {last}
    # the compacted and rewritten files' stored ids (their stats) are outside the range
    planned = await _planned(table, "_row_id >= 100 AND _row_id < 120")
    assert file_of[100] in planned
    assert not planned & {compacted, rewritten, upserted}
    assert len(planned) < len(files)
    # sequence numbers: a file's rows are at most its data sequence number
    assert await _planned(table, "_last_updated_sequence_number > 6") == holding(SEQ > 6)
    planned = await _planned(table, "_last_updated_sequence_number = 3")
    assert file_of[80] in planned and not planned & {compacted, rewritten, upserted}
    # derived values are never null where the file has a first row id
    assert await _planned(table, "_row_id IS NULL") == set()
    assert await _planned(table, "_row_id IS NOT NULL") == files


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
async def test_delete_and_overwrite_by_lineage_filters(tmp_path: Path, mode: str) -> None:
    table = await _lineage_table(tmp_path, mode)
    text = "(_row_id >= 100 AND _row_id < 125) OR _last_updated_sequence_number = 7"
    before = await _everything(table)
    hits = await table.scan(text, selected_fields=("id",)).to_arrow()
    expected = before.filter(((ROW_ID >= 100) & (ROW_ID < 125)) | (SEQ == 7))
    assert sorted(hits.column("id").to_pylist()) == expected.column("id").to_pylist()
    assert 0 < hits.num_rows < before.num_rows

    await table.delete(text)
    after = await _everything(table)
    gone = set(hits.column("id").to_pylist())
    survivors = [
        {k: v for k, v in r.items() if k != "_file"} for r in before.to_pylist() if r["id"] not in gone
    ]
    # the other rows stay, each with its row id and sequence number
    assert [{k: v for k, v in r.items() if k != "_file"} for r in after.to_pylist()] == survivors

    await table.refresh()
    await table.overwrite(_batch(range(1000, 1003)), overwrite_filter="_row_id < 40")
    final = await _everything(table)
    assert sorted(final.column("id").to_pylist()) == sorted(
        [r["id"] for r in survivors if r["_row_id"] >= 40] + [1000, 1001, 1002]
    )


@pytest.mark.parametrize("version", [1, 2])
async def test_lineage_filters_before_v3_are_refused(tmp_path: Path, version: int) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=SCHEMA, format_version=version)
    await table.append(_batch(range(5)))
    await table.refresh()
    for text in ("_row_id >= 1", "id = 1 OR _last_updated_sequence_number = 1"):
        with pytest.raises(ExpressionError, match=rf"format version 3 on.*version {version}"):
            await table.scan(text).to_arrow()
        with pytest.raises(ExpressionError, match="row lineage columns"):
            await table.delete(text)
    assert (await table.scan().to_arrow()).num_rows == 5


async def test_a_table_column_named_like_a_lineage_column_shadows_it(tmp_path: Path) -> None:
    """As in Spark: the table's own ``_row_id`` column is the one a filter names."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("_row_id", pa.int64())])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema, format_version=2)
    await table.append(pa.table({"id": [1, 2, 3], "_row_id": [30, 20, 10]}, schema=schema))
    await table.refresh()
    got = await table.scan("_row_id < 25", selected_fields=("id",)).to_arrow()
    assert sorted(got.column("id").to_pylist()) == [2, 3]
