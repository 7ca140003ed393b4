"""Late materialisation (``aioiceberg/read/late.py``) against the whole-row-group read.

A row group's filter columns are decoded first and the others only up to the last matching
row. Every case is read both ways and must come out the same: without helper threads, with
checks that the prefix read really ran (and how far) so a case cannot pass by falling back;
with one, where the helper decodes the other columns meanwhile and stops at the limit.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fork_helpers import in_forked_child
from hypothesis import given, settings
from hypothesis import strategies as st

from aioiceberg.errors import CorruptFileError, ValidationError
from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.io import MemoryFileIO
from aioiceberg.read import late as late_module
from aioiceberg.read import parquet_ranges as parquet_module
from aioiceberg.read import read_to_table
from aioiceberg.read import task_reader as reader_module
from aioiceberg.read.late import RowLimit, take_until
from aioiceberg.read.parquet_ranges import ParquetSource, open_parquet
from aioiceberg.runtime import Runtime, default_runtime
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.name_mapping import create_mapping_from_schema
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "region", StringType(), required=False),
    NestedField(
        4,
        "loc",
        StructType(
            NestedField(5, "lat", DoubleType(), required=False),
            NestedField(6, "lon", DoubleType(), required=False),
        ),
        required=False,
    ),
    NestedField(7, "tags", ListType(8, StringType(), element_required=False), required=False),
    NestedField(9, "attrs", MapType(10, StringType(), 11, LongType(), value_required=False), required=False),
    NestedField(12, "qty", IntegerType(), required=False),
    NestedField(13, "added", LongType(), required=False),  # not in the file: null
)
ROWS = 3000
ROW_GROUP = 1000
PATH = "memory://t/late.parquet"


def _data() -> pa.Table:
    n = ROWS
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            # dictionary-encoded strings: kept as dictionaries through the filter when not read by it
            "name": pa.array([None if i % 11 == 0 else f"n-{i % 50}" for i in range(n)]),
            "region": pa.array([["eu", "us", "ap"][i % 3] for i in range(n)]),
            "loc": pa.array(
                [None if i % 13 == 0 else {"lat": i * 0.001, "lon": -i * 0.5} for i in range(n)],
                pa.struct([("lat", pa.float64()), ("lon", pa.float64())]),
            ),
            "tags": pa.array([[f"t{i % 4}"] * (i % 3) for i in range(n)], pa.list_(pa.string())),
            "attrs": pa.array(
                [[("k", i), ("j", None)] if i % 2 else [] for i in range(n)], pa.map_(pa.string(), pa.int64())
            ),
            "qty": pa.array([i % 97 for i in range(n)], pa.int32()),
        }
    )


def _with_ids(table: pa.Table) -> pa.Table:
    """``table`` with the ids of ``SCHEMA`` on every field, nested ones included."""
    from aioiceberg.spec.arrow import schema_to_arrow

    target = schema_to_arrow(SCHEMA)
    return table.cast(pa.schema([target.field(name) for name in table.column_names]))


def _file(ids: bool, empty_group: bool = False) -> bytes:
    """Three 1000-row groups (small pages, so a prefix ends inside a column chunk), one empty
    row group after the first when asked."""
    data = _data()
    if ids:
        data = _with_ids(data)
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, data.schema, data_page_size=2048, write_batch_size=256) as writer:
        for start in range(0, ROWS, ROW_GROUP):
            writer.write_table(data.slice(start, ROW_GROUP), row_group_size=ROW_GROUP)
            if empty_group and start == 0:
                writer.write_table(data.slice(0, 0))
    return buf.getvalue()


def _task(size: int) -> FileScanTask:
    f = DataFile(DataFileContent.DATA, PATH, FileFormat.PARQUET, (), ROWS, size)  # type: ignore[arg-type]
    return FileScanTask(f, (), AlwaysTrue(), PartitionSpec(0, ()), SCHEMA)  # type: ignore[arg-type]


async def _read_both(
    monkeypatch: pytest.MonkeyPatch, data: bytes, row_filter: str, threads: int = 0, **kwargs: Any
) -> tuple[pa.Table, pa.Table, list[int]]:
    """The rows read with late materialisation (``threads`` helper threads), without it, and
    the prefix lengths read (by the reading thread: every one, without helpers)."""
    runtime = Runtime(read_threads=threads)
    store = MemoryFileIO().bind_runtime(runtime)
    # every row group read late, whether or not the last ones paid (see test_late_odds_*)
    monkeypatch.setattr(late_module.LatePayoff, "worth_trying", lambda self, decoded_alone: True)
    await store.write(PATH, data)
    task = _task(len(data))
    prefixes: list[int] = []
    prefix = ParquetSource.read_row_group_prefix

    def spy(self: ParquetSource, rg: int, tops: Any, rows: int, as_dictionary: Any = ()) -> pa.Table:
        prefixes.append(rows)
        table = prefix(self, rg, tops, rows, as_dictionary)
        assert table.num_rows == rows
        return table

    with monkeypatch.context() as m:
        m.setattr(ParquetSource, "read_row_group_prefix", spy)
        late = await read_to_table(
            store, [task], kwargs.pop("projected", SCHEMA), row_filter=row_filter, **kwargs
        )
    projected = late.schema
    with monkeypatch.context() as m:
        m.setattr(reader_module, "_late_split", lambda *a: None)
        whole = await read_to_table(store, [task], _projected_of(projected), row_filter=row_filter, **kwargs)
    runtime.close_sync()
    return late, whole, prefixes


def _projected_of(schema: pa.Schema) -> Schema:
    names = [n for n in schema.names if n not in ("_file", "_pos")]
    return SCHEMA.select(*names)


@pytest.fixture(scope="module")
def file_with_ids() -> bytes:
    return _file(ids=True)


# filter, prefix lengths read (one per row group read late whose last match is not its last row)
CASES = [
    ("id < 10", [10]),
    ("id < 1400", [400]),  # the first group read whole (last match at its end), the second in part
    ("id >= 990 AND id < 1010", [10]),
    ("id = 2999", []),  # the last row: the whole group
    ("id = 2000", [1]),  # the first row of a group
    ("id >= 2400 AND id < 2410", [410]),
    ("id >= 2600 AND id < 2610", [610]),
    ("qty = 5", [976, 946, 916]),  # scattered: rows 975, 1945 and 2915 are each group's last
    ("name = 'n-7'", [908, 958, 958]),  # a dictionary-encoded string (957 is null: 11 x 87)
    ("name = 'n-7x'", []),  # within the statistics' range but matching nothing
    ("name IS NULL AND id < 300", [298]),  # the last null name below 300 is row 297
    ("loc.lat < 0.05", [50]),  # a nested filter column (null structs do not match)
    ("loc.lon > -3", [6]),
    ("region = 'eu' AND id < 100", [100]),  # row 99 is the last eu
    ("id < 5 OR id = 1100", [5, 101]),
    ("id < 5 OR qty = 3", [974, 944, 914]),
    ("added IS NULL AND id < 7", [7]),  # a column the file lacks, with one it has
    ("added IS NOT NULL", []),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("row_filter", "prefixes"), CASES)
async def test_late_read_matches_the_whole_read(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes, row_filter: str, prefixes: list[int]
) -> None:
    late, whole, read = await _read_both(monkeypatch, file_with_ids, row_filter)
    assert late.equals(whole), row_filter
    assert read == prefixes, row_filter


@pytest.mark.anyio
@pytest.mark.parametrize(("row_filter", "prefixes"), CASES)
@pytest.mark.parametrize("chunk", [128, 1000])
async def test_late_read_with_a_helper_matches_the_whole_read(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes, row_filter: str, prefixes: list[int], chunk: int
) -> None:
    """The helper decodes the other columns in chunks of ``chunk`` rows alongside the filter's:
    wherever it is when the limit comes (or if it never started), the rows are the same."""
    monkeypatch.setattr(late_module, "CHUNK_ROWS", chunk)
    covered: list[int] = []
    until = late_module.take_until
    started = threading.Event()

    def spy(*args: Any) -> list[pa.RecordBatch]:
        started.set()
        batches = until(*args)
        covered.append(sum(b.num_rows for b in batches))
        return batches

    read_row_group = ParquetSource.read_row_group

    def filter_side(self: ParquetSource, *args: Any, **kwargs: Any) -> pa.Table:
        if "use_threads" in kwargs:  # the filter's columns: once the helper is under way
            assert started.wait(10)
            started.clear()
        return read_row_group(self, *args, **kwargs)

    monkeypatch.setattr(late_module, "take_until", spy)
    monkeypatch.setattr(ParquetSource, "read_row_group", filter_side)
    late, whole, _ = await _read_both(monkeypatch, file_with_ids, row_filter, threads=1)
    assert late.equals(whole), row_filter
    assert all(0 < n <= ROW_GROUP for n in covered)
    assert covered or row_filter == "added IS NOT NULL"  # (no filter column in the file: not late)


@pytest.mark.anyio
async def test_late_read_expected_rows(monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes) -> None:
    late, _, _ = await _read_both(monkeypatch, file_with_ids, "id < 5 OR id = 1100")
    assert late.column("id").to_pylist() == [0, 1, 2, 3, 4, 1100]
    assert late.column("name").to_pylist() == [None, "n-1", "n-2", "n-3", "n-4", None]
    assert late.column("loc").to_pylist()[1] == {"lat": 0.001, "lon": -0.5}
    assert late.column("attrs").to_pylist()[1] == [("k", 1), ("j", None)]
    assert late.schema.field("name").type == pa.string()  # read as a dictionary, decoded


@pytest.mark.anyio
@pytest.mark.parametrize("row_filter", ["id < 10", "id >= 990 AND id < 1010", "qty = 5", "id = 2999"])
async def test_late_read_positions_and_file(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes, row_filter: str
) -> None:
    late, whole, _ = await _read_both(
        monkeypatch, file_with_ids, row_filter, include_pos_column=True, include_file_column=True
    )
    assert late.equals(whole)
    assert late.column("_pos").to_pylist() == late.column("id").to_pylist()  # id is the row number
    assert set(late.column("_file").to_pylist()) == {PATH}


@pytest.mark.anyio
@pytest.mark.parametrize("row_filter", ["qty = 5 AND id < 20", "loc.lat < 0.03", "name = 'n-3' AND id < 400"])
async def test_late_read_filter_on_columns_not_projected(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes, row_filter: str
) -> None:
    late, whole, read = await _read_both(
        monkeypatch, file_with_ids, row_filter, projected=SCHEMA.select("tags", "region")
    )
    assert late.schema.names == ["region", "tags"]
    assert late.equals(whole)
    assert read  # the projected columns were read only in part
    assert late.num_rows > 0


@pytest.mark.anyio
async def test_late_read_only_filter_columns_projected(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes
) -> None:
    """With nothing but the filter's columns to read there is nothing to read late."""
    late, whole, read = await _read_both(monkeypatch, file_with_ids, "id < 10", projected=SCHEMA.select("id"))
    assert late.equals(whole) and late.num_rows == 10
    assert read == []


@pytest.mark.anyio
@pytest.mark.parametrize("row_filter", ["id < 10", "id < 1400", "qty = 5", "loc.lat < 0.05"])
async def test_late_read_name_mapped_file(monkeypatch: pytest.MonkeyPatch, row_filter: str) -> None:
    """A file without field ids: the filter's columns find their ids through the name mapping."""
    mapping = create_mapping_from_schema(SCHEMA)
    late, whole, read = await _read_both(monkeypatch, _file(ids=False), row_filter, name_mapping=mapping)
    assert late.equals(whole)
    assert late.num_rows > 0
    assert read == dict(CASES).get(row_filter, read)


@pytest.mark.anyio
@pytest.mark.parametrize("row_filter", ["id < 10", "id >= 995 AND id < 1005", "qty = 5"])
async def test_late_read_empty_row_group(monkeypatch: pytest.MonkeyPatch, row_filter: str) -> None:
    late, whole, _ = await _read_both(
        monkeypatch, _file(ids=True, empty_group=True), row_filter, include_pos_column=True
    )
    assert late.equals(whole)
    assert late.column("_pos").to_pylist() == late.column("id").to_pylist()


@pytest.mark.anyio
async def test_late_read_prefix_reads_exactly_the_prefix(file_with_ids: bytes) -> None:
    """The prefix read gives a row group's first rows whatever the page and batch boundaries."""
    from aioiceberg.read.parquet_ranges import open_parquet

    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write(PATH, file_with_ids)
    source = await open_parquet(store, PATH, len(file_with_ids))
    whole = source.read_row_group(1, [1, 3, 4, 5], [1])
    for rows in (1, 255, 256, 257, 499, 500, 999, 1000):
        part = await anyio.to_thread.run_sync(source.read_row_group_prefix, 1, [1, 3, 4, 5], rows, [1])
        assert part.num_rows == rows
        assert pa.types.is_dictionary(part.schema.field("name").type)
        assert part.to_pylist() == whole.slice(0, rows).to_pylist(), rows


@settings(max_examples=40, deadline=None)
@given(
    lo=st.integers(min_value=-5, max_value=ROWS + 5),
    width=st.integers(min_value=0, max_value=1200),
    qty=st.one_of(st.none(), st.integers(min_value=0, max_value=96)),
    pos=st.booleans(),
)
def test_late_read_any_range(file_with_ids: bytes, lo: int, width: int, qty: int | None, pos: bool) -> None:
    row_filter = f"id >= {lo} AND id < {lo + width}" + (f" AND qty <> {qty}" if qty is not None else "")
    expected = [i for i in range(max(lo, 0), min(lo + width, ROWS)) if qty is None or i % 97 != qty]

    async def run() -> tuple[pa.Table, pa.Table]:
        with pytest.MonkeyPatch.context() as m:
            late, whole, _ = await _read_both(m, file_with_ids, row_filter, include_pos_column=pos)
        return late, whole

    late, whole = anyio.run(run)
    assert late.equals(whole)
    assert late.column("id").to_pylist() == expected


@pytest.mark.anyio
async def test_the_helper_stops_once_its_limit_is_covered(file_with_ids: bytes) -> None:
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write(PATH, file_with_ids)
    source = await open_parquet(store, PATH, len(file_with_ids))
    whole = source.read_row_group(2, [1, 4, 5], [1])
    for rows, covered in ((None, 1000), (0, 128), (1, 128), (128, 128), (129, 256), (999, 1000)):
        limit = RowLimit()
        limit.rows = rows
        batches = await anyio.to_thread.run_sync(
            take_until, source.row_group_batches(2, [1, 4, 5], [1], 128), limit
        )
        got = pa.Table.from_batches(batches)
        assert got.num_rows == covered, rows
        assert pa.types.is_dictionary(got.schema.field("name").type)
        assert got.to_pylist() == whole.slice(0, covered).to_pylist()


@pytest.mark.anyio
async def test_the_helper_fetches_what_was_not_prefetched_from_its_own_thread(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes
) -> None:
    """A file not held whole: the helper thread (not one of anyio's) fetches the column
    chunks it misses through the event loop the file was opened on."""
    monkeypatch.setattr(parquet_module, "WHOLE_FILE_MAX", 1024)
    monkeypatch.setattr(parquet_module, "TAIL_READ", 4096)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write(PATH, file_with_ids)
    source = await open_parquet(store, PATH, len(file_with_ids))
    assert source.file.size > 4096 and not source.file.holds(0, 4)  # only the tail is held
    helpers = Runtime(read_threads=1).read_helpers
    assert helpers is not None
    pending = helpers.submit(take_until, source.row_group_batches(0, [0, 1], [], 256), RowLimit())
    got = pa.Table.from_batches(await anyio.to_thread.run_sync(pending.result))
    assert got.column("id").to_pylist() == list(range(1000))
    helpers.shutdown()


@pytest.mark.anyio
@pytest.mark.parametrize("threads", [0, 1])
async def test_late_read_of_a_file_not_held_whole(
    monkeypatch: pytest.MonkeyPatch, file_with_ids: bytes, threads: int
) -> None:
    monkeypatch.setattr(parquet_module, "WHOLE_FILE_MAX", 1024)
    monkeypatch.setattr(parquet_module, "TAIL_READ", 4096)
    monkeypatch.setattr(late_module, "CHUNK_ROWS", 200)
    for row_filter, _ in CASES:
        late, whole, _ = await _read_both(monkeypatch, file_with_ids, row_filter, threads=threads)
        assert late.equals(whole), row_filter


def _damaged(data: bytes, column: str) -> bytes:
    """``data`` with the middle of ``column``'s chunk in the second row group overwritten."""
    chunk = (
        pq.ParquetFile(io.BytesIO(data))
        .metadata.row_group(1)
        .column(pq.ParquetFile(io.BytesIO(data)).schema_arrow.names.index(column))
    )
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    middle = start + chunk.total_compressed_size // 2
    return data[:middle] + b"\xff" * 64 + data[middle + 64 :]


@pytest.mark.anyio
@pytest.mark.parametrize("threads", [0, 1])
@pytest.mark.parametrize("column", ["qty", "id"])
async def test_a_damaged_chunk_on_either_side_of_a_late_read_is_a_corrupt_file(
    file_with_ids: bytes, threads: int, column: str
) -> None:
    """The other columns' side (the helper, or the reading thread after it) or the filter's:
    either way the read fails with the error naming the file."""
    store = MemoryFileIO().bind_runtime(Runtime(read_threads=threads))
    data = _damaged(file_with_ids, column)
    await store.write(PATH, data)
    with pytest.raises(CorruptFileError, match=r"late\.parquet"):
        await read_to_table(store, [_task(len(data))], SCHEMA, row_filter="id >= 1000 AND id < 1900")


def test_read_threads_is_checked() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValidationError, match="read_threads"):
            Runtime(read_threads=bad)  # type: ignore[arg-type]
    assert Runtime(read_threads=0).read_helpers is None
    runtime = Runtime(read_threads=2)
    assert runtime.read_helpers is runtime.read_helpers
    runtime.close_sync()


def _groups_file(marks: list[list[int]], rows: int = 100) -> tuple[bytes, Schema]:
    """One row group of ``rows`` rows per entry of ``marks``: ``g`` is 1 at the rows listed."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "g", IntegerType(), required=False),
        NestedField(3, "v", DoubleType(), required=False),
    )
    from aioiceberg.spec.arrow import schema_to_arrow

    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema_to_arrow(schema)) as writer:
        for r, marked in enumerate(marks):
            ids = range(r * rows, (r + 1) * rows)
            # unmarked rows are 0, but the first is 2: no group's statistics rule out g = 1
            g = [1 if i in marked else 2 if i == 0 else 0 for i in range(rows)]
            group = pa.table(
                {"id": list(ids), "g": g, "v": [i * 0.5 for i in ids]}, schema=schema_to_arrow(schema)
            )
            writer.write_table(group, row_group_size=rows)
    return buf.getvalue(), schema


async def _late_groups(monkeypatch: pytest.MonkeyPatch, marks: list[list[int]]) -> list[int]:
    """The row groups read late by a ``g = 1`` scan of :func:`_groups_file`, which must read
    the same rows as a whole read."""
    data, schema = _groups_file(marks)
    store = MemoryFileIO().bind_runtime(Runtime(read_threads=0))
    await store.write(PATH, data)
    f = DataFile(DataFileContent.DATA, PATH, FileFormat.PARQUET, (), len(marks) * 100, len(data))  # type: ignore[arg-type]
    task = FileScanTask(f, (), AlwaysTrue(), PartitionSpec(0, ()), schema)  # type: ignore[arg-type]
    groups: list[int] = []
    read = reader_module._read_late

    def spy(plan: Any, split: Any, source: Any, fields: Any, rg: int, *rest: Any) -> Any:
        groups.append(rg)
        return read(plan, split, source, fields, rg, *rest)

    with monkeypatch.context() as m:
        m.setattr(reader_module, "_read_late", spy)
        late = await read_to_table(store, [task], schema, row_filter="g = 1")
    with monkeypatch.context() as m:
        m.setattr(reader_module, "_late_split", lambda *a: None)
        whole = await read_to_table(store, [task], schema, row_filter="g = 1")
    assert late.equals(whole)
    assert late.column("id").to_pylist() == [r * 100 + i for r, marked in enumerate(marks) for i in marked]
    return groups


@pytest.mark.anyio
async def test_late_odds_after_reads_that_skip_nothing_only_probes_read_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Matches to the end of every row group (scattered): after the first, one row group in
    PROBE_EVERY is read late."""
    assert late_module.PROBE_EVERY == 8
    assert await _late_groups(monkeypatch, [list(range(9, 100, 10))] * 24) == [0, 8, 16]


@pytest.mark.anyio
async def test_late_odds_a_probe_that_pays_brings_late_reads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    scattered, leading = list(range(9, 100, 10)), list(range(10))
    marks = [scattered] * 8 + [leading] * 6
    assert await _late_groups(monkeypatch, marks) == [0, 8, 9, 10, 11, 12, 13]


@pytest.mark.anyio
async def test_late_odds_a_group_every_row_of_which_matches_or_none_does_is_no_evidence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing to skip (all match), or everything skipped (no match; the statistics cannot
    tell for ``g``): late reads go on."""
    marks = [list(range(100)), [], list(range(100)), [3], [50, 99]]
    assert await _late_groups(monkeypatch, marks) == [0, 1, 2, 3, 4]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_reads_late_with_helper_threads_of_its_own(file_with_ids: bytes) -> None:
    """The parent's helper threads do not survive a fork: the child makes its own (a job
    queued on the parent's executor would never start)."""
    runtime = Runtime(read_threads=1)
    store = MemoryFileIO().bind_runtime(runtime)
    anyio.run(store.write, PATH, file_with_ids)

    async def read() -> list[int]:
        table = await read_to_table(store, [_task(len(file_with_ids))], SCHEMA, row_filter="id < 1400")
        return table.column("id").to_pylist()

    assert anyio.run(read) == list(range(1400))
    parents = runtime.read_helpers

    def child() -> bool:
        fresh = runtime._read_helpers is None
        return fresh and anyio.run(read) == list(range(1400)) and runtime.read_helpers is not parents

    in_forked_child(child, "reading")
    runtime.close_sync()


@pytest.mark.anyio
async def test_a_late_read_whose_helper_threads_were_shut_down_decodes_alone(file_with_ids: bytes) -> None:
    """A runtime closed while a scan runs: the scan's next row groups are read without help."""
    runtime = Runtime(read_threads=1)
    helpers = runtime.read_helpers
    assert helpers is not None
    helpers.shutdown()
    store = MemoryFileIO().bind_runtime(runtime)
    await store.write(PATH, file_with_ids)
    table = await read_to_table(store, [_task(len(file_with_ids))], SCHEMA, row_filter="id < 1400")
    assert table.column("id").to_pylist() == list(range(1400))
