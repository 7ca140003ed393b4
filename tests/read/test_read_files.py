"""Single-file behaviour: Avro and ORC data files, name mapping, partition constants, defaults."""

from __future__ import annotations

import gc
import io
import warnings
from contextlib import aclosing
from typing import Any

import anyio
import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from benchmark_runs import run_tiny
from random_parquet import PAIR, random_parquet
from stream_helpers import first_then_settle

from aioiceberg.errors import ValidationError
from aioiceberg.expressions import bind
from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.io import MemoryFileIO
from aioiceberg.read import ReadMetrics, read_to_table
from aioiceberg.runtime import default_runtime
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.name_mapping import create_mapping_from_schema
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import IdentityTransform
from aioiceberg.spec.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "region", StringType(), required=False),
)
UNPARTITIONED = PartitionSpec(0, ())


def _task(path: str, fmt: FileFormat, size: int, n: int, **kw: object) -> FileScanTask:
    f = DataFile(DataFileContent.DATA, path, fmt, kw.pop("partition", ()), n, size)  # type: ignore[arg-type]
    return FileScanTask(f, (), kw.pop("residual", AlwaysTrue()), kw.pop("spec", UNPARTITIONED), SCHEMA)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_avro_data_file_reads_by_field_id() -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "renamed_id", "type": ["null", "long"], "field-id": 1},
            {"name": "region", "type": ["null", "string"], "field-id": 3},
        ],
    }
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [{"renamed_id": i, "region": "eu" if i % 2 else None} for i in range(10)])
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/a.avro", buf.getvalue())
    task = _task("memory://t/a.avro", FileFormat.AVRO, len(buf.getvalue()), 10, residual=AlwaysTrue())
    table = await read_to_table(store, [task], SCHEMA, row_filter="region = 'eu'")
    assert table.column("id").to_pylist() == [1, 3, 5, 7, 9]
    assert table.column("name").to_pylist() == [None] * 5


@pytest.mark.anyio
async def test_orc_file_without_ids_reads_through_the_name_mapping() -> None:
    from pyarrow import orc

    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"], "junk": [0, 0, 0]})
    buf = io.BytesIO()
    orc.write_table(data, buf)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/a.orc", buf.getvalue())
    task = _task("memory://t/a.orc", FileFormat.ORC, len(buf.getvalue()), 3)
    table = await read_to_table(store, [task], SCHEMA, name_mapping=create_mapping_from_schema(SCHEMA))
    assert table.to_pylist() == [
        {"id": 1, "name": "a", "region": None},
        {"id": 2, "name": "b", "region": None},
        {"id": 3, "name": "c", "region": None},
    ]


@pytest.mark.anyio
async def test_identity_partition_value_fills_a_column_the_file_lacks() -> None:
    data = pa.table({"id": pa.array(range(5), pa.int64())}).cast(
        pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    )
    buf = io.BytesIO()
    pq.write_table(data, buf)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/p.parquet", buf.getvalue())
    spec = PartitionSpec(1, (PartitionField((3,), 1000, IdentityTransform(), "region"),))
    task = _task(
        "memory://t/p.parquet", FileFormat.PARQUET, len(buf.getvalue()), 5, partition=("eu",), spec=spec
    )
    table = await read_to_table(store, [task], SCHEMA, row_filter="id > 2", include_file_column=True)
    assert table.select(["id", "region"]).to_pylist() == [
        {"id": 3, "region": "eu"},
        {"id": 4, "region": "eu"},
    ]
    assert set(table.column("_file").to_pylist()) == {"memory://t/p.parquet"}


@pytest.mark.anyio
async def test_added_column_takes_its_initial_default() -> None:
    data = pa.table({"id": pa.array([1, 2], pa.int64())}).cast(
        pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    )
    buf = io.BytesIO()
    pq.write_table(data, buf)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/d.parquet", buf.getvalue())
    evolved = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(4, "tier", StringType(), required=False, initial_default="gold"),
    )
    f = DataFile(DataFileContent.DATA, "memory://t/d.parquet", FileFormat.PARQUET, (), 2, len(buf.getvalue()))
    task = FileScanTask(f, (), AlwaysTrue(), UNPARTITIONED, evolved)
    table = await read_to_table(store, [task], evolved, row_filter="tier = 'gold'")
    assert table.to_pylist() == [{"id": 1, "tier": "gold"}, {"id": 2, "tier": "gold"}]


@pytest.mark.anyio
async def test_row_groups_outside_the_residual_are_not_read() -> None:
    data = pa.table({"id": pa.array(range(1000), pa.int64())}).cast(
        pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    )
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=100)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/g.parquet", buf.getvalue())
    task = _task("memory://t/g.parquet", FileFormat.PARQUET, len(buf.getvalue()), 1000)
    stats = ReadMetrics()
    table = await read_to_table(store, [task], SCHEMA, row_filter="id >= 250 AND id < 320", stats=stats)
    assert table.column("id").to_pylist() == list(range(250, 320))
    assert (stats.row_groups_total, stats.row_groups_read) == (10, 2)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("row_filter", "kept"),
    [
        ("id >= 10 AND id < 2990", range(10, 2990)),
        ("id >= 0 OR id IS NULL", range(3000)),
        ("id < 0", range(0)),
    ],
)
async def test_a_filtered_row_group_comes_out_in_batches_of_at_most_batch_rows(
    row_filter: str, kept: range
) -> None:
    """The filter runs over a whole row group at once; what passes still streams in batches
    of ``batch_rows``, in file order."""
    from aioiceberg.read import read_tasks

    n = 3000
    data = pa.table({"id": pa.array(range(n), pa.int64())}).cast(
        pa.schema([pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    )
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=n)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/b.parquet", buf.getvalue())
    task = _task("memory://t/b.parquet", FileFormat.PARQUET, len(buf.getvalue()), n)
    batches = [b async for b in read_tasks(store, [task], SCHEMA, row_filter=row_filter, batch_rows=700)]
    assert [v for b in batches for v in b.column(0).to_pylist()] == list(kept)
    assert all(0 < b.num_rows <= 700 for b in batches)


@pytest.mark.anyio
async def test_strings_the_filter_does_not_read_pass_it_as_dictionaries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dictionary-encoded strings outside the filter are decoded only for the rows that
    survive it; a chunk that fell back to plain pages is read plain (as a dictionary it
    would be hashed); what comes out is the same either way."""
    from aioiceberg.read.parquet_ranges import ParquetSource, open_parquet

    n = 30_000
    ids = {b"PARQUET:field_id": b"1"}, {b"PARQUET:field_id": b"2"}, {b"PARQUET:field_id": b"3"}
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            # unique and long: the dictionary fills up (1 MiB) and the rest falls back to plain
            "name": [f"user-{i:012d}-" + "x" * 48 for i in range(n)],
            "region": [None if i % 7 == 0 else ["eu", "us", "ap"][i % 3] for i in range(n)],
        }
    )
    with_ids = [pa.field(f.name, f.type, metadata=m) for f, m in zip(data.schema, ids, strict=True)]
    data = data.cast(pa.schema(with_ids))
    buf = io.BytesIO()
    pq.write_table(data, buf)  # one row group
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/s.parquet", buf.getvalue())
    task = _task("memory://t/s.parquet", FileFormat.PARQUET, len(buf.getvalue()), n)

    source = await open_parquet(store, "memory://t/s.parquet", len(buf.getvalue()))
    assert [source._dictionary_encoded(0, i) for i in range(3)] == [False, False, True]
    decoded = source.read_row_group(0, [0, 1, 2], [1, 2])
    assert [str(t) for t in decoded.schema.types] == [
        "int64",
        "string",
        "dictionary<values=string, indices=int32, ordered=0>",
    ]

    last = f"user-{n - 1:012d}-" + "x" * 48
    asked: set[int] = set()
    encoded = ParquetSource._encoded

    def spy(self: ParquetSource, rg: int, as_dictionary: list[int]) -> tuple[str, ...]:
        asked.update(as_dictionary)  # the filter's columns (read first) are never offered
        return encoded(self, rg, as_dictionary)

    monkeypatch.setattr(ParquetSource, "_encoded", spy)
    plain = pa.table({f.name: data.column(f.name) for f in data.schema}).cast(
        pa.schema([(f.name, f.type) for f in data.schema])
    )
    for text, keep, offered in (
        ("id >= 1000 AND id < 1400", lambda r: 1000 <= r["id"] < 1400, [1, 2]),
        ("region = 'eu'", lambda r: r["region"] == "eu", [0, 1]),
        (f"id < 50 OR name = '{last}'", lambda r: r["id"] < 50 or r["id"] == n - 1, [2]),
        ("", lambda r: True, []),
    ):
        asked.clear()
        table = await read_to_table(store, [task], SCHEMA, row_filter=text or None)
        assert sorted(asked) == offered, text
        assert [str(t) for t in table.schema.types] == ["int64", "string", "string"]
        assert table.to_pylist() == [r for r in plain.to_pylist() if keep(r)], text


def test_read_benchmark_runs_in_tiny_mode() -> None:
    out = run_tiny("read.py")
    assert "ours/PyIceberg" in out and "peak RSS" in out


class _CountingIO(MemoryFileIO):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, int, int]] = []

    async def read(self, location: str) -> bytes:
        data = await super().read(location)
        self.requests.append(("get", 0, len(data)))
        return data

    async def read_block(self, location: str, start: int, length: int):  # type: ignore[no-untyped-def]
        self.requests.append(("range", start, length))
        return await super().read_block(location, start, length)


@pytest.mark.anyio
async def test_small_parquet_file_is_fetched_in_one_get() -> None:
    store = _CountingIO().bind_runtime(default_runtime())
    task = await random_parquet(store, "memory://t/small.parquet", 20_000, 2_000)
    stats = ReadMetrics()
    table = await read_to_table(store, [task], PAIR, row_filter="id >= 4100 AND id < 4200", stats=stats)
    assert table.column("id").to_pylist() == list(range(4100, 4200))
    assert (stats.row_groups_total, stats.row_groups_read) == (10, 1)
    assert [r[0] for r in store.requests] == ["get"]


@pytest.mark.anyio
@pytest.mark.parametrize("budget", [None, 1])
async def test_large_parquet_file_tail_read_and_coalesced_row_groups(
    monkeypatch: pytest.MonkeyPatch, budget: int | None
) -> None:
    from aioiceberg.read import parquet_ranges as parquet

    store = _CountingIO().bind_runtime(default_runtime())
    task = await random_parquet(store, "memory://t/large.parquet", 200_000, 20_000)
    size = task.file.file_size_in_bytes
    monkeypatch.setattr(parquet, "WHOLE_FILE_MAX", size - 1)  # too big to fetch whole
    monkeypatch.setattr(parquet, "TAIL_READ", size // 4)
    if budget is not None:
        monkeypatch.setattr(parquet, "READ_BUDGET", budget)
    stats = ReadMetrics()
    table = await read_to_table(store, [task], PAIR, stats=stats)
    assert table.column("id").to_pylist() == list(range(200_000))
    assert stats.row_groups_read == 10
    assert store.requests[0] == ("range", -(size // 4), size // 4)  # footer + last row groups
    # the rest of the file: one coalesced request, or one per row group outside the tail
    # when the budget allows only one row group per run
    assert len(store.requests) == 2 if budget is None else len(store.requests) > 2

    store.requests.clear()
    selective = await read_to_table(store, [task], PAIR, row_filter="id >= 20500 AND id < 60500")
    assert selective.column("id").to_pylist() == list(range(20_500, 60_500))
    if budget is None:
        assert len(store.requests) == 2  # tail, then row groups 1-3 in one request


@pytest.mark.anyio
async def test_columns_the_name_mapping_cannot_resolve_read_as_null_and_keep_every_row() -> None:
    """A Parquet file without field ids under a mapping that resolves none (or some) of its
    columns: every row is still returned, unresolved columns as NULL (no silent row loss)."""
    from aioiceberg.spec.name_mapping import name_mapping_from_json

    data = pa.table({"id": pa.array(range(10), pa.int64()), "name": [f"n{i}" for i in range(10)]})
    buf = io.BytesIO()
    pq.write_table(data, buf, row_group_size=4)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/plain.parquet", buf.getvalue())
    task = _task("memory://t/plain.parquet", FileFormat.PARQUET, len(buf.getvalue()), 10)
    empty = await read_to_table(store, [task], SCHEMA, name_mapping=name_mapping_from_json("[]"))
    assert empty.num_rows == 10
    assert empty.to_pylist() == [{"id": None, "name": None, "region": None}] * 10
    only_id = name_mapping_from_json('[{"field-id": 1, "names": ["id"]}]')
    some = await read_to_table(store, [task], SCHEMA, name_mapping=only_id)
    assert some.column("id").to_pylist() == list(range(10))
    assert some.column("name").to_pylist() == [None] * 10


@pytest.mark.anyio
async def test_a_projection_of_no_field_reads_no_column_and_raises_nothing() -> None:
    """With nothing selected no column is read, so there are no field ids to look for: the
    answer is PyIceberg's (0.12) for ``selected_fields=()``, an empty table, not an error
    about the file lacking ids. With the file column asked for, each row still has one."""
    from aioiceberg.spec.arrow import schema_to_arrow

    data = pa.table({"id": pa.array(range(10), pa.int64()), "name": [f"n{i}" for i in range(10)]})
    with_ids = data.cast(schema_to_arrow(Schema(*SCHEMA.fields[:2])))
    buf = io.BytesIO()
    pq.write_table(with_ids, buf, row_group_size=4)
    store = MemoryFileIO().bind_runtime(default_runtime())
    await store.write("memory://t/ids.parquet", buf.getvalue())
    task = _task("memory://t/ids.parquet", FileFormat.PARQUET, len(buf.getvalue()), 10)
    nothing = await read_to_table(store, [task], Schema())
    assert (nothing.num_rows, nothing.num_columns) == (0, 0)
    files = await read_to_table(store, [task], Schema(), include_file_column=True)
    assert files.num_rows == 10 and set(files.column(0).to_pylist()) == {"memory://t/ids.parquet"}


async def _two_parquet_files(store: MemoryFileIO) -> list[FileScanTask]:
    from aioiceberg.spec.arrow import schema_to_arrow

    tasks = []
    for i in range(2):
        rows = pa.table(
            {"id": pa.array([10 * i, 10 * i + 1, 10 * i + 2], pa.int64()), "name": ["a", "b", "c"]}
        ).append_column("region", pa.array(["eu", None, "us"]))
        buf = io.BytesIO()
        pq.write_table(rows.cast(schema_to_arrow(SCHEMA)), buf)
        path = f"memory://t/{i}.parquet"
        await store.write(path, buf.getvalue())
        tasks.append(
            _task(path, FileFormat.PARQUET, len(buf.getvalue()), 3, residual=bind(SCHEMA, "id >= 0"))
        )
    return tasks


@pytest.mark.anyio
async def test_a_residual_bound_by_hand_still_follows_sqls_rule_for_nulls() -> None:
    """A task built by hand may carry a residual bound with Iceberg's rule (``!=`` true on a
    null): the reader applies SQL's, as to the planner's tasks and to ``row_filter``."""
    store = MemoryFileIO().bind_runtime(default_runtime())
    tasks = await _two_parquet_files(store)
    hand_built = [
        FileScanTask(t.file, (), bind(SCHEMA, "region != 'eu'"), UNPARTITIONED, SCHEMA) for t in tasks
    ]
    table = await read_to_table(store, hand_built, SCHEMA)
    assert table.column("id").to_pylist() == [2, 12]
    # the same filter as row_filter, over both tasks (bound once for the read)
    table = await read_to_table(store, tasks, SCHEMA, table_schema=SCHEMA, row_filter="region != 'eu'")
    assert table.column("id").to_pylist() == [2, 12]


@pytest.mark.anyio
async def test_read_options_below_one_are_refused_naming_the_option() -> None:
    store = MemoryFileIO().bind_runtime(default_runtime())
    tasks = await _two_parquet_files(store)
    with pytest.raises(ValidationError, match="read option 'files_in_flight' must be >= 1, got 0"):
        await read_to_table(store, tasks, SCHEMA, files_in_flight=0)
    with pytest.raises(ValidationError, match="read option 'batch_rows' must be >= 1, got 0"):
        await read_to_table(store, tasks, SCHEMA, batch_rows=0)


async def _files_of_100_ids(n: int) -> tuple[MemoryFileIO, list[FileScanTask]]:
    """``n`` Parquet files of 100 ids each (no field ids: read through a name mapping)."""
    store = MemoryFileIO().bind_runtime(default_runtime())
    tasks = []
    for i in range(n):
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64())}), buf)
        path = f"memory://t/{i}.parquet"
        await store.write(path, buf.getvalue())
        tasks.append(_task(path, FileFormat.PARQUET, len(buf.getvalue()), 100))
    return store, tasks


@pytest.mark.anyio
async def test_a_read_stream_left_unclosed_does_not_cancel_its_consumer() -> None:
    """``break`` out of ``read_tasks`` without closing it: the loop's finalizer closes the
    stream in another task, and its reads' task group must not cancel the task that had
    iterated it (they run in a task of their own), nor leave an error behind."""
    from aioiceberg.read import read_tasks

    store, tasks = await _files_of_100_ids(4)
    mapping = create_mapping_from_schema(SCHEMA)
    first, errors = await first_then_settle(
        read_tasks(store, tasks, SCHEMA, name_mapping=mapping, batch_rows=10, files_in_flight=2)
    )
    assert first.num_rows == 10
    assert errors == []
    await anyio.sleep(0)  # this task was not cancelled: it runs on
    # and the same tasks read whole, closed or not, are all there
    rows = [b async for b in read_tasks(store, tasks, SCHEMA, name_mapping=mapping, batch_rows=10)]
    assert sum(b.num_rows for b in rows) == 400


@pytest.mark.anyio
async def test_a_read_stopped_early_leaves_no_stream_unclosed() -> None:
    """Each file's batches come through a stream pair; a consumer that stops after its first
    batch (files still queued behind it), or a read cancelled at any point, must close them
    all: one left to the collector warns (``ResourceWarning``, an error under ``-W error``)."""
    from aioiceberg.read import read_tasks

    store, tasks = await _files_of_100_ids(8)
    mapping = create_mapping_from_schema(SCHEMA)

    def read(files_in_flight: int) -> Any:
        return read_tasks(
            store, tasks, SCHEMA, name_mapping=mapping, batch_rows=10, files_in_flight=files_in_flight
        )

    async def read_all(files_in_flight: int) -> None:
        async for _ in read(files_in_flight):
            await anyio.sleep(0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for files_in_flight in (1, 2, 4, 8):
            async with aclosing(read(files_in_flight)) as stream:
                async for _ in stream:
                    break
            for seconds in (0, 0.0005, 0.001, 0.003):
                with anyio.move_on_after(seconds):
                    await read_all(files_in_flight)
        gc.collect()
        await anyio.sleep(0.01)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
