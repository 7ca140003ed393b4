"""A plan's tasks as Arrow record batches hold what its FileScanTasks hold, row for row."""

from __future__ import annotations

import dataclasses
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.errors import ValidationError
from aioiceberg.expressions.serde import expression_to_json
from aioiceberg.io import FileIO, LocalFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.scan.task_batches import TASK_SCHEMA, batch_of_rows, batch_of_tasks, task_batch
from aioiceberg.spec.manifest import (
    DataFile,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.manifest.columnar import ColumnarRows
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.metadata import Operation, Snapshot, SnapshotRef, Summary, TableMetadata
from aioiceberg.spec.metadata_json import new_table_metadata, parse_table_metadata, serialize_table_metadata
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask, content_file_to_json
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import IntegerType, NestedField
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import (
    SNAPSHOT_ID,
    bench_schema,
    bench_spec,
    build_table,
    data_file,
    filters,
    manifest_list_path,
)


def _caches(**kw: Any) -> dict[str, Any]:
    return {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache(), "decode_workers": 0, **kw}


async def _table(tmp_path: Path) -> tuple[FileIO, TableMetadata]:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", 6, 40)
    return io, parse_table_metadata(await io.read(meta), meta)


def _expected(task: FileScanTask) -> dict[str, Any]:
    f = task.file
    return {
        "file_path": f.file_path,
        "file_format": f.file_format.value,
        "spec_id": task.spec.spec_id,
        "partition": content_file_to_json(f, task.spec, task.schema)["partition"],
        "record_count": f.record_count,
        "file_size_in_bytes": f.file_size_in_bytes,
        "start": task.start,
        "length": task.length,
        "residual": expression_to_json(task.residual),
        "first_row_id": f.first_row_id,
        "delete_files": [d.file_path for d in task.delete_files],
    }


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    out = []
    for batch in batches:
        assert batch.schema == TASK_SCHEMA
        for row in batch.to_pylist():
            row["partition"] = json.loads(row["partition"])
            row["residual"] = json.loads(row["residual"])
            row["delete_files"] = [d["file_path"] for d in row["delete_files"]]
            out.append(row)
    return sorted(out, key=lambda r: (r["file_path"], r["start"]))


@pytest.mark.anyio
@pytest.mark.parametrize("split", [None, 1 << 20], ids=["whole", "split"])
async def test_batches_hold_what_the_tasks_hold(tmp_path: Path, split: int | None) -> None:
    io, md = await _table(tmp_path)
    kw = _caches(split_size=split)
    texts = [*filters(6, 40).values(), "c4 > 'a00000100'", "ts >= '2022-01-10T00:00:00+00:00'"]
    for text in texts:
        tasks = [t async for t in TableScan(io, md, text, **kw).plan_files()]
        scan = TableScan(io, md, text, **kw)
        batches = [task_batch(scan.planner, seq) async for seq in scan.plan_files().batches()]
        expected = sorted((_expected(t) for t in tasks), key=lambda r: (r["file_path"], r["start"]))
        assert _rows(batches) == expected, text
        assert sum(b.num_rows for b in batches) == len(tasks) > 0
        # plan_batches renders partition values once for the plan: the same batches
        shared = [b async for b in TableScan(io, md, text, **kw).plan_batches()]
        assert _rows(shared) == expected, text
    # a ts bound on whole days leaves nothing for the rows of files the partition decides
    assert any(r["residual"] == {"type": "true"} for r in _rows(batches))


@pytest.mark.anyio
async def test_delete_files_ride_with_their_data_files(tmp_path: Path) -> None:
    """Position deletes are listed with each data file they apply to."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    table = await catalog.create_table(
        "db.t",
        schema=schema,
        partition_by=["part"],
        format_version=2,
        properties={"write.delete.mode": "merge-on-read"},
    )
    for k in range(3):
        ids = list(range(k * 10, k * 10 + 10))
        await table.append(pa.table({"id": ids, "part": ["a" if i % 2 else "b" for i in ids]}, schema=schema))
    await table.delete("id IN (3, 14, 15, 27)")
    scan = table.scan(row_filter="id > 1")
    tasks = [t async for t in scan.plan_files()]
    assert any(t.delete_files for t in tasks)
    batches = [b async for b in table.scan(row_filter="id > 1").plan_batches()]
    expected = sorted((_expected(t) for t in tasks), key=lambda r: (r["file_path"], r["start"]))
    assert _rows(batches) == expected
    # the delete file's own fields come through, not only its path
    deletes = [d for b in batches for row in b.to_pylist() for d in row["delete_files"]]
    assert deletes and all(d["content"] == 1 and d["record_count"] >= 1 for d in deletes)


@pytest.mark.anyio
async def test_partition_values_rendered_once_a_plan_render_as_each_alone(tmp_path: Path) -> None:
    """Values kept across a plan's batches (ints, strings, booleans) and values that are not
    (floats: 0.0 equals -0.0) give each file the partition JSON its task gives it."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema(
        [
            pa.field("x", pa.float64()),
            pa.field("s", pa.string()),
            pa.field("b", pa.bool_()),
            pa.field("n", pa.int64()),
        ]
    )
    table = await catalog.create_table("db.t", schema=schema, partition_by=["x", "s", "b", "n"])
    xs, ss, bs, ns = (
        [0.0, -0.0, 1.5, None],
        ["\u00e9t\u00e9", "a", None, '"q"'],
        [True, False, None, True],
        [1, 0, None, 1],
    )
    for k in range(3):  # three manifests: the values recur across batches
        rows = [(xs[(i + k) % 4], ss[i % 4], bs[(i + 2 * k) % 4], ns[(i + k) % 4]) for i in range(8)]
        await table.append(
            pa.Table.from_pylist([dict(zip("xsbn", r, strict=True)) for r in rows], schema=schema)
        )
    tasks = [t async for t in table.scan().plan_files()]
    batches = [b async for b in table.scan().plan_batches()]
    expected = sorted((_expected(t) for t in tasks), key=lambda r: (r["file_path"], r["start"]))
    assert len(batches) >= 3
    assert _rows(batches) == expected
    # and as text: what json.dumps writes for the task's partition object
    by_path = {t.file.file_path: t for t in tasks}
    for batch in batches:
        for path, text in zip(
            batch.column("file_path").to_pylist(), batch.column("partition").to_pylist(), strict=True
        ):
            t = by_path[path]
            assert text == json.dumps(
                content_file_to_json(t.file, t.spec, t.schema)["partition"], sort_keys=True
            )


def test_the_blocking_api_yields_the_same_batches(tmp_path: Path) -> None:
    from aioiceberg import sync

    catalog = sync.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("db.t", schema=schema)
    for k in range(4):
        table.append(pa.table({"id": list(range(k * 5, k * 5 + 5))}, schema=schema))
    scan = table.scan(row_filter="id >= 7")
    tasks = list(scan.plan_files())
    batches = list(table.scan(row_filter="id >= 7").plan_batches())
    assert sorted(_expected(t)["file_path"] for t in tasks) == [r["file_path"] for r in _rows(batches)]
    assert len(tasks) == 3  # the first append's file holds no id >= 7


async def _both_paths(scan: TableScan) -> tuple[list[pa.RecordBatch], list[pa.RecordBatch], int]:
    """The plan's batches as ``task_batch`` makes them (from the decoded columns where it
    can), and each again from the entries' built rows or task objects; and how many came
    from columns."""
    planner = scan.planner
    got: list[pa.RecordBatch] = []
    again: list[pa.RecordBatch] = []
    from_columns = 0
    async with aclosing(scan.plan_files().batches()) as batches:
        async for seq in batches:
            entries = seq.entries if isinstance(seq, LazyTasks) else None
            if isinstance(entries, ColumnarRows):
                assert not entries.built  # nothing read them as rows before the batch
                from_columns += 1
                got.append(task_batch(planner, seq))
                rows = EntryRows(entries.rows, entries.spec_id)
                again.append(batch_of_rows(planner, rows))
                assert batch_of_tasks(planner, list(seq)).equals(again[-1])
            else:
                got.append(task_batch(planner, seq))
                again.append(batch_of_tasks(planner, list(seq)))
    return got, again, from_columns


def _table_of(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches, schema=TASK_SCHEMA)


@pytest.mark.anyio
@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
@pytest.mark.parametrize("deletes", [False, True], ids=["no-deletes", "deletes"])
async def test_batches_from_columns_equal_batches_from_rows(
    tmp_path: Path, version: int, partitioned: bool, deletes: bool
) -> None:
    """A manifest's batch taken from its decoded columns equals the one built from its rows
    (and from its task objects), row for row, in order."""
    if deletes and version == 1:
        pytest.skip("v1 tables have no row-level deletes")
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])
    table = await catalog.create_table(
        "db.t",
        schema=schema,
        partition_by=["part"] if partitioned else [],
        format_version=version,
        properties={"write.delete.mode": "merge-on-read"} if deletes else {},
    )
    for k in range(3):
        ids = list(range(k * 40, k * 40 + 40))
        data = pa.table({"id": ids, "part": [f"p{i % 5}" if i % 7 else None for i in ids]}, schema=schema)
        if partitioned:
            await table.append(data)
        else:
            for i in range(0, 40, 10):  # several files a manifest
                await table.append(data.slice(i, 10))
    if deletes:
        await table.delete("id IN (3, 44, 45, 97)")
    for text in [None, "id > 1", "part = 'p2'", "id < 30 or part = 'p4'"]:
        for min_entries in (0, 100):  # columnar for every manifest; small ones in the batch lane
            scan = table.scan(row_filter=text, **_caches(columnar_min_entries=min_entries))
            got, again, from_columns = await _both_paths(scan)
            assert _table_of(got).equals(_table_of(again)), (text, min_entries)
            tasks = [t async for t in table.scan(row_filter=text, **_caches()).plan_files()]
            expected = sorted((_expected(t) for t in tasks), key=lambda r: (r["file_path"], r["start"]))
            assert _rows(got) == expected, (text, min_entries)
            if min_entries == 0 and not deletes and version > 1:
                assert from_columns > 0  # the columnar path was taken (v1 is read by fastavro)


@pytest.mark.anyio
async def test_batches_from_columns_of_a_synthetic_table(tmp_path: Path) -> None:
    """Many partitions a manifest and residuals that differ by partition, cold and cached."""
    io, md = await _table(tmp_path)
    kw = _caches(columnar_min_entries=0)
    texts = [*filters(6, 40).values(), "ts >= '2022-01-10T00:00:00+00:00'"]
    for text in texts:
        for _ in range(2):  # the second plan prunes the manifests the first kept decoded
            got, again, from_columns = await _both_paths(TableScan(io, md, text, **kw))
            assert _table_of(got).equals(_table_of(again)), text
            assert from_columns > 0 or not got, text


@pytest.mark.anyio
async def test_batches_from_columns_of_integer_partitions(tmp_path: Path) -> None:
    """Integer partition values (grouped by packing them into one key): nulls, a value
    shared by a manifest's every file, values too far apart for a table of slots, rows
    taken by a filter, and residuals that differ by partition."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("k", pa.int32()),
            pa.field("one", pa.int64()),
            pa.field("far", pa.int64()),
        ]
    )
    table = await catalog.create_table("db.t", schema=schema, partition_by=["k", "one", "far"])
    ks = [None, 3, -2, 7, 3]
    # per manifest: one value; too far apart to pack; too far apart for a table of slots
    fars: list[list[int | None]] = [[9], [-(1 << 62), 1 << 62, 0, None, 5], [-(10**6), 10**6, 0, None, 5]]
    for m in range(3):
        ids = list(range(m * 20, m * 20 + 20))
        rows: dict[str, list[Any]] = {
            "id": ids,
            "k": [ks[(i // 4 + m) % 5] for i in ids],  # four ids a file
            "one": [m * 1000 - 1] * 20,
            "far": [fars[m][i % len(fars[m])] for i in ids],
        }
        await table.append(pa.table(rows, schema=schema))
    for text in [None, "id > 4", "id >= 30", "k = 3", "k IS NULL OR far > 0", "one = 999"]:
        scan = table.scan(row_filter=text, **_caches(columnar_min_entries=0))
        got, again, from_columns = await _both_paths(scan)
        assert from_columns > 0, text
        assert _table_of(got).equals(_table_of(again)), text
        tasks = [t async for t in table.scan(row_filter=text, **_caches()).plan_files()]
        expected = sorted((_expected(t) for t in tasks), key=lambda r: (r["file_path"], r["start"]))
        assert _rows(got) == expected, text


@pytest.mark.anyio
async def test_batches_from_columns_of_other_partition_values(tmp_path: Path) -> None:
    """Floats (0.0 and -0.0 render apart), strings, booleans and nulls through the columns."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("x", pa.float64()), pa.field("s", pa.string()), pa.field("b", pa.bool_())])
    table = await catalog.create_table("db.t", schema=schema, partition_by=["x", "s", "b"])
    xs, ss, bs = [0.0, -0.0, 1.5, None], ["\u00e9t\u00e9", "a", None, '"q"'], [True, False, None, True]
    for k in range(3):
        rows = [(xs[(i + k) % 4], ss[i % 4], bs[(i + 2 * k) % 4]) for i in range(8)]
        await table.append(
            pa.Table.from_pylist([dict(zip("xsb", r, strict=True)) for r in rows], schema=schema)
        )
    for text in [None, "x > 0.5 OR s = 'a'"]:
        got, again, from_columns = await _both_paths(
            table.scan(row_filter=text, **_caches(columnar_min_entries=0))
        )
        assert from_columns > 0
        assert _table_of(got).equals(_table_of(again)), text
        if text is None:
            texts = {p for b in got for p in b.column("partition").to_pylist()}
            assert any('"1000": -0.0' in p for p in texts) and any('"1000": 0.0' in p for p in texts)


async def _written_table(
    io: FileIO, location: str, manifests: list[list[DataFile]], spec: PartitionSpec, written_with: Schema
) -> str:
    """A table of the bench schema and ``spec`` whose one snapshot lists these manifests,
    their partition values written as ``written_with`` types them; its metadata location."""
    md = new_table_metadata(bench_schema(), spec, UNSORTED, location, {}, 2)
    written = []
    for m, files in enumerate(manifests):
        entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
        path = f"{location}/metadata/m{m:05d}.avro"
        data, mf = write_manifest(entries, spec, written_with, 2, SNAPSHOT_ID, manifest_path=path)
        await io.write(path, data)
        written.append(mf)
    list_path = manifest_list_path(location)
    await io.write(list_path, write_manifest_list(written, 2, SNAPSHOT_ID, None, 1))
    snap = Snapshot(SNAPSHOT_ID, None, 1, md.last_updated_ms, list_path, Summary(Operation.APPEND), 0)
    md = md.replace(
        snapshots=(snap,),
        current_snapshot_id=SNAPSHOT_ID,
        last_sequence_number=1,
        refs={"main": SnapshotRef(SNAPSHOT_ID)},
    )
    meta = f"{location}/metadata/00001-t.metadata.json"
    await io.write(meta, serialize_table_metadata(md))
    return meta


@pytest.mark.anyio
async def test_batches_from_columns_of_manifests_of_several_formats(tmp_path: Path) -> None:
    """A manifest of several file formats, and one of a format other than Parquet."""
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    location = f"file://{tmp_path}/t"
    schema = bench_schema()
    formats = [FileFormat.PARQUET, FileFormat.AVRO, FileFormat.ORC]
    manifests = [
        [
            dataclasses.replace(data_file(schema, location, 0, i, 9), file_format=formats[i % 3])
            for i in range(9)
        ],
        [
            dataclasses.replace(data_file(schema, location, 1, i, 9), file_format=FileFormat.ORC)
            for i in range(9)
        ],
        [data_file(schema, location, 2, i, 9) for i in range(9)],
    ]
    meta = await _written_table(io, location, manifests, bench_spec(), schema)
    md = parse_table_metadata(await io.read(meta), meta)
    for text in ["", "id >= 3000"]:
        got, again, from_columns = await _both_paths(
            TableScan(io, md, text, **_caches(columnar_min_entries=0))
        )
        assert from_columns > 0
        assert _table_of(got).equals(_table_of(again)), text
    by_path = {f.file_path: f.file_format.value for files in manifests for f in files}
    rows = [r for b in got for r in b.select(["file_path", "file_format"]).to_pylist()]
    assert {r["file_format"] for r in rows} == {"PARQUET", "AVRO", "ORC"}
    assert all(by_path[r["file_path"]] == r["file_format"] for r in rows)


@pytest.mark.anyio
async def test_a_partition_value_that_cannot_be_rendered_names_its_first_file(tmp_path: Path) -> None:
    """Integers where the spec's field is a string: the batch fails naming the file of the
    first such value (in the manifest's order), as the rows' batch names it."""
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    location = f"file://{tmp_path}/t"
    schema = bench_schema()  # field 8 (c5) is a string
    spec = PartitionSpec(0, (PartitionField((8,), 1000, parse_transform("identity"), "c5"),))
    written_with = Schema(
        *[NestedField(8, "c5", IntegerType()) if f.field_id == 8 else f for f in schema.fields]
    )
    values = [7, 3, 7, 5]  # the first file's value is not the least
    files = [
        dataclasses.replace(data_file(schema, location, 0, i, 4), partition=(v,))
        for i, v in enumerate(values)
    ]
    meta = await _written_table(io, location, [files], spec, written_with)
    md = parse_table_metadata(await io.read(meta), meta)
    scan = TableScan(io, md, "", **_caches(columnar_min_entries=0))
    seqs = [seq async for seq in scan.plan_files().batches()]
    assert len(seqs) == 1 and isinstance(seqs[0], LazyTasks) and isinstance(seqs[0].entries, ColumnarRows)
    entries = seqs[0].entries
    with pytest.raises(ValidationError) as from_columns:
        task_batch(scan.planner, seqs[0])
    with pytest.raises(ValidationError) as from_rows:
        batch_of_rows(scan.planner, EntryRows(entries.rows, entries.spec_id))
    assert str(from_columns.value) == str(from_rows.value)
    assert str(from_columns.value).startswith(f"{files[0].file_path}: partition field 'c5'")
