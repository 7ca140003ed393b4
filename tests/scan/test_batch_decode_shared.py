"""Small manifests decoded in one call: their entries and task batches are built once for the
call and cut per manifest, and the bulk readers of bounds, counts and partition groups read
what the per-value ones read."""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.expressions import parse
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.scan.bound_arrays import bound_kind
from aioiceberg.scan.decode import PruneContext, decode_and_prune, decode_and_prune_batch
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.scan.task_batches import TASK_SCHEMA, Rendered, batch_of_rows, task_batch
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from aioiceberg.spec.manifest.columnar import ColumnarRows, fixed_width_items, open_columnar
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import DoubleType, IntegerType, LongType, NestedField, StringType
from aioiceberg.spec.values import to_bytes

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "s", StringType()),
    NestedField(3, "n", IntegerType()),
    NestedField(4, "x", DoubleType()),
    schema_id=0,
)
SPEC = PartitionSpec(
    0,
    (
        PartitionField((1,), 1000, parse_transform("bucket[4]"), "id_bucket"),
        PartitionField((2,), 1001, parse_transform("identity"), "s"),
    ),
)


def _file(k: int) -> DataFile:
    """Stats with the corners the bulk readers must read as the per-value ones: a 4-byte
    bound of the long column, a missing bound, a null count left out, NaN counts."""
    lower: dict[int, bytes] = {
        1: to_bytes(k * 10, LongType()),
        3: to_bytes(k, IntegerType()),
        4: to_bytes(0.5 * k, DoubleType()),
    }
    upper: dict[int, bytes] = {1: to_bytes(k * 10 + 9, LongType()), 3: to_bytes(k + 3, IntegerType())}
    if k % 5 == 1:
        lower[1] = to_bytes(k * 10, IntegerType())  # written before id was promoted from int
    if k % 7 == 2:
        del upper[1]
    nulls = {1: 0, 2: k % 3, 3: 0} if k % 4 else {1: 0, 3: 0}
    return DataFile(
        DataFileContent.DATA,
        f"s3://b/data/f{k:03d}.parquet",
        FileFormat.PARQUET,
        (k % 4, None if k % 6 == 5 else f"p{k % 3}"),
        10 + k,
        1000 + k,
        value_counts={1: 10 + k, 2: 10 + k, 3: 10 + k, 4: 10 + k},
        null_value_counts=nulls,
        nan_value_counts={4: k % 2},
        lower_bounds=lower,
        upper_bounds=upper,
        split_offsets=(4,) if k % 2 else None,
        spec_id=0,
    )


def _manifests(count: int = 6, per: int = 7) -> list[tuple[bytes, ManifestFile]]:
    """Small manifests of one writer (one header), added by different snapshots at different
    sequence numbers, with existing and deleted entries."""
    out = []
    for m in range(count):
        entries = [
            ManifestEntry(
                ManifestEntryStatus.DELETED if i == 3 else ManifestEntryStatus.ADDED,
                70 if i == 3 else None,
                2 if i == 3 else None,
                2 if i == 3 else None,
                _file(m * per + i),
            )
            for i in range(per)
        ]
        path = f"s3://b/metadata/m{m}.avro"
        data, mf = write_manifest(entries, SPEC, SCHEMA, 2, 100 + m, manifest_path=path)
        out.append((data, dataclasses.replace(mf, sequence_number=10 + m, min_sequence_number=10 + m)))
    return out


def _context(text: str) -> PruneContext:
    expr: Expression = bind_row_filter(SCHEMA, parse(text), True) if text else AlwaysTrue()
    return PruneContext.build(SCHEMA, {0: SPEC}, expr, True, None)


@pytest.mark.parametrize("text", ["", "id >= 20", "s = 'p1'", "n < 9 or x > 3.0", "id = 41"])
def test_a_batch_decode_cuts_one_build_of_its_rows_per_manifest(text: str) -> None:
    items = _manifests()
    ctx = _context(text)
    results = decode_and_prune_batch(items, ctx)
    shared = {
        id(r.entries.shared[0]) for r in results if isinstance(r.entries, ColumnarRows) and r.entries.shared
    }
    kept = [r for r in results if len(r.entries)]
    assert kept and all(isinstance(r.entries, ColumnarRows) for r in kept)
    assert len(shared) == 1  # one call's rows: one build for every manifest of it
    for (data, mf), got in zip(items, results, strict=True):
        want = decode_and_prune(data, mf, ctx, columnar=False)  # fastavro: the reference
        assert list(got.entries) == list(want.entries), mf.manifest_path
        assert (got.entries_read, got.skipped_by_partition, got.skipped_by_metrics) == (
            want.entries_read,
            want.skipped_by_partition,
            want.skipped_by_metrics,
        )
    first, second = kept[0].entries, kept[-1].entries
    assert isinstance(first, ColumnarRows) and isinstance(second, ColumnarRows)
    assert first.shared is not None and second.shared is not None
    group = first.shared[0]
    rows = first.rows  # builds the call's rows once ...
    assert second.rows[0] is group.rows()[second.shared[1]]  # ... and the others are cut from them
    assert rows[0] is group.rows()[first.shared[1]]


def test_the_decoded_part_of_each_manifest_is_its_own_rows() -> None:
    """What the cache keeps of each manifest (its rows of the call's columns) prunes to the
    same entries as the manifest decoded alone."""
    items = _manifests()
    for (data, mf), got in zip(items, decode_and_prune_batch(items, _context("")), strict=True):
        assert got.decoded is not None
        ((cm, rows),) = got.decoded
        assert len(rows) == got.entries_read
        alone = open_columnar(data, mf, discard_deleted=True)
        assert alone is not None
        assert EntryRows(cm.built_rows(rows, None), 0).rows == alone.built_rows(alone.rows, None)


def _planner_batches(scan: Any) -> Any:
    return scan.plan_files().batches()


@pytest.mark.anyio
async def test_task_batches_of_manifests_decoded_together_are_slices_of_one(tmp_path: Path) -> None:
    """Each manifest's batch is its slice of the call's batch, equal to the one built from its
    rows; and a plan of many small manifests decodes some together (so this path ran)."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    table = await catalog.create_table("db.t", schema=schema, partition_by=["part"])
    for k in range(12):  # one small manifest an append
        ids = list(range(k * 6, k * 6 + 6))
        await table.append(pa.table({"id": ids, "part": [f"p{i % 3}" for i in ids]}, schema=schema))
    seen_shared = 0
    for text in [None, "id > 20", "part = 'p1'"]:
        options: dict[str, Any] = {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache()}
        scan = table.scan(row_filter=text, columnar_min_entries=100, decode_workers=1, **options)
        planner = scan.planner
        rendered = Rendered(planner)
        got: list[pa.RecordBatch] = []
        again: list[pa.RecordBatch] = []
        async with aclosing(_planner_batches(scan)) as batches:
            async for seq in batches:
                assert isinstance(seq, LazyTasks)
                entries = seq.entries
                assert isinstance(entries, EntryRows)
                if isinstance(entries, ColumnarRows) and entries.shared is not None:
                    seen_shared += 1
                got.append(task_batch(planner, seq, rendered))
                again.append(batch_of_rows(planner, EntryRows(list(entries.rows), entries.spec_id)))
        whole = pa.Table.from_batches(got, schema=TASK_SCHEMA)
        assert whole.equals(pa.Table.from_batches(again, schema=TASK_SCHEMA)), text
        tasks = [t async for t in table.scan(row_filter=text).plan_files()]
        assert sorted(whole.column("file_path").to_pylist()) == sorted(t.file.file_path for t in tasks)
    assert seen_shared > 0


def _binary(values: list[bytes | None], large: bool) -> pa.Array:
    return pa.array(values, pa.large_binary() if large else pa.binary())


@pytest.mark.parametrize("large", [False, True])
def test_bounds_read_in_bulk_as_one_by_one(large: bool) -> None:
    raw: list[bytes | None] = [
        to_bytes(5, LongType()),
        to_bytes(-7, IntegerType()),
        None,
        b"",
        b"\x01\x02\x03",
        to_bytes(2**40, LongType()),
        to_bytes(1.5, DoubleType()),
    ]
    arr = _binary(raw * 3, large).slice(2, 15)  # an offset into the buffers
    window = (raw * 3)[2:17]
    for t in (LongType(), IntegerType(), DoubleType()):
        kind = bound_kind(t)
        assert kind is not None and kind.bulk is not None
        found = kind.bulk(arr)
        assert found is not None
        ok_bulk, values_bulk = found
        ok_one, values_one = kind.read(window)
        assert ok_bulk.tolist() == ok_one.tolist()
        assert values_bulk.dtype == values_one.dtype
        # bit for bit: 8 bytes of a long read as a double may be NaN
        assert values_bulk.tobytes() == values_one.tobytes()
    # not binary: the per-value reader decides
    assert fixed_width_items(pa.array([1, 2], pa.int64()), {8: "<i8"}, np.int64) is None
    assert bound_kind(StringType()) is not None and bound_kind(StringType()).bulk is None  # type: ignore[union-attr]


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize(
    ("kind_of", "values"),
    [
        (LongType(), [to_bytes(v, LongType()) for v in (5, -7, 2**40, -(2**62), 0)]),
        (LongType(), [to_bytes(v, IntegerType()) for v in (5, -7, 2**30, 0, 1)]),  # promoted: 4 bytes
        (IntegerType(), [to_bytes(v, IntegerType()) for v in (5, -7, 2**30, 0, 1)]),
        (DoubleType(), [to_bytes(v, DoubleType()) for v in (1.5, -0.0, float("inf"), 2.0**60, 3.25)]),
    ],
)
def test_bounds_of_one_width_read_as_one_array(kind_of: Any, values: list[bytes], large: bool) -> None:
    """Values of one width lie end to end and are read without a gather: the same result,
    bit for bit, as one by one, from a slice of the buffers too."""
    kind = bound_kind(kind_of)
    assert kind is not None and kind.bulk is not None
    arr = _binary(values * 4, large)
    for start, length in ((0, len(arr)), (3, 11), (7, 1)):
        found = kind.bulk(arr.slice(start, length))
        assert found is not None
        ok_bulk, values_bulk = found
        ok_one, values_one = kind.read((values * 4)[start : start + length])
        assert ok_bulk.tolist() == ok_one.tolist() == [True] * length
        assert values_bulk.dtype == values_one.dtype
        assert values_bulk.tobytes() == values_one.tobytes()
        assert values_bulk.flags.writeable  # a copy, not a view of the Arrow buffer
    # one value of an unreadable width: the gather reads the rest
    odd = _binary([*values, b"\x01\x02\x03", *values], large)
    found = kind.bulk(odd)
    assert found is not None
    ok_one, values_one = kind.read([*values, b"\x01\x02\x03", *values])
    assert found[0].tolist() == ok_one.tolist() and not found[0][len(values)]
    assert found[1].tobytes() == values_one.tobytes()


def test_counts_and_partition_groups_read_in_bulk_as_one_by_one() -> None:
    data, mf = _manifests(1, 40)[0]
    cm = open_columnar(data, mf)
    assert cm is not None
    every = np.arange(cm.entries_read, dtype=np.int64)
    index, uniques = cm.partition_groups()
    assert [uniques[i] for i in index.tolist()] == cm.partitions(every)
    assert len(set(uniques)) == len(uniques)
    for name in ("value_counts", "null_value_counts", "nan_value_counts"):
        for fid in (1, 2, 3, 4, 9):
            col = cm.count_column(name, fid, every)
            rows = cm.built_rows(every, None)
            at = 10 + ["column_sizes", "value_counts", "null_value_counts", "nan_value_counts"].index(name)
            for i, row in enumerate(rows):
                flat = row[at] or ()
                mapped = dict(zip(flat[::2], flat[1::2], strict=True))
                if fid in mapped:
                    assert col.state[i] == 1 and col.values[i] == mapped[fid], (name, fid, i)
                else:
                    assert col.state[i] == 0, (name, fid, i)
