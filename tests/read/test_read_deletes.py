"""Row-level deletes: position and equality delete files, and v3 deletion vectors."""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema as PySchema
from pyiceberg.types import LongType, NestedField, StringType
from pyroaring import BitMap
from read_helpers import duckdb_connection, duckdb_rows, our_rows, rows_of

from aioiceberg.io import LocalFileIO
from aioiceberg.read import ReadMetrics, decode_deletion_vector, read_to_table
from aioiceberg.runtime import default_runtime
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.table_scan import TableScan

FIELD_ID = b"PARQUET:field_id"


def _table(tmp: Path) -> Any:
    catalog = SqlCatalog("del", uri=f"sqlite:///{tmp}/c.db", warehouse=(tmp / "wh").as_uri())
    catalog.create_namespace("db")
    schema = PySchema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "region", StringType(), required=False),
    )
    table = catalog.create_table("db.t", schema, properties={"format-version": "2"})
    for start in (0, 100):
        ids = range(start, start + 100)
        table.append(
            pa.table(
                {
                    "id": pa.array(list(ids), pa.int64()),
                    "name": pa.array([f"n{i % 10}" for i in ids]),
                    "region": pa.array([["eu", "us", None][i % 3] for i in ids]),
                }
            )
        )
    return table


def _data_files(table: Any) -> list[str]:
    return sorted(t.file.file_path for t in table.scan().plan_files())


def _write_parquet(path: str, table: pa.Table) -> DataFile:
    local = path.removeprefix("file://")
    pq.write_table(table, local)
    return DataFile(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=table.num_rows,
        file_size_in_bytes=Path(local).stat().st_size,
    )


def _position_deletes(path: str, pairs: Sequence[tuple[str, int]]) -> DataFile:
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {FIELD_ID: b"2147483546"}),
            pa.field("pos", pa.int64(), False, {FIELD_ID: b"2147483545"}),
        ]
    )
    ordered = sorted(pairs)
    table = pa.table([[p for p, _ in ordered], [i for _, i in ordered]], schema=schema)
    f = _write_parquet(path, table)
    return DataFile(**{**_fields(f), "content": DataFileContent.POSITION_DELETES})


def _equality_deletes(path: str, columns: dict[str, tuple[int, pa.Array]]) -> DataFile:
    schema = pa.schema(
        [pa.field(n, a.type, True, {FIELD_ID: str(fid).encode()}) for n, (fid, a) in columns.items()]
    )
    table = pa.table([a for _, a in columns.values()], schema=schema)
    f = _write_parquet(path, table)
    ids = tuple(fid for fid, _ in columns.values())
    return DataFile(**{**_fields(f), "content": DataFileContent.EQUALITY_DELETES, "equality_ids": ids})


def _fields(f: DataFile) -> dict[str, Any]:
    return {name: getattr(f, name) for name in f.__dataclass_fields__}


def _commit_deletes(table: Any, deletes: list[DataFile]) -> str:
    """A new snapshot adding ``deletes`` in a delete manifest; returns the new metadata file."""
    meta_path = Path(table.metadata_location.removeprefix("file://"))
    obj = json.loads(meta_path.read_text())
    md = parse_table_metadata(meta_path.read_bytes())
    parent = md.current_snapshot()
    assert parent is not None
    snapshot_id = int(time.time() * 1000) % 1_000_000_000 + 7
    seq = obj["last-sequence-number"] + 1
    meta_dir = meta_path.parent
    manifest_path = f"{meta_dir.as_uri()}/{uuid.uuid4()}-m0.avro"
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, d) for d in deletes]
    data, manifest = write_manifest(
        entries,
        md.spec(),
        md.schema(),
        2,
        snapshot_id,
        ManifestContent.DELETES,
        manifest_path=manifest_path,
    )
    (meta_dir / manifest_path.rsplit("/", 1)[1]).write_bytes(data)
    existing = read_manifest_list(Path(parent.manifest_list.removeprefix("file://")).read_bytes())
    list_bytes = write_manifest_list([*existing, manifest], 2, snapshot_id, parent.snapshot_id, seq)
    list_path = meta_dir / f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
    list_path.write_bytes(list_bytes)
    now = int(time.time() * 1000)
    obj["snapshots"].append(
        {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": parent.snapshot_id,
            "sequence-number": seq,
            "timestamp-ms": now,
            "manifest-list": list_path.as_uri(),
            "summary": {"operation": "delete"},
            "schema-id": obj["current-schema-id"],
        }
    )
    obj["current-snapshot-id"] = snapshot_id
    obj["last-sequence-number"] = seq
    obj["refs"] = {"main": {"snapshot-id": snapshot_id, "type": "branch"}}
    obj["snapshot-log"].append({"snapshot-id": snapshot_id, "timestamp-ms": now})
    obj["last-updated-ms"] = now
    new_path = meta_dir / f"99999-{uuid.uuid4()}.metadata.json"
    new_path.write_text(json.dumps(obj))
    return new_path.as_uri()


COLUMNS = ["id", "name", "region"]


@pytest.mark.anyio
async def test_position_deletes_shared_by_two_data_files_are_read_once(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    table = _table(tmp_path)
    a, b = _data_files(table)
    base = (tmp_path / "wh" / "db").as_uri()
    deletes = _position_deletes(f"{base}/pos-deletes.parquet", [(a, 0), (a, 5), (a, 99), (b, 1), (b, 50)])
    location = _commit_deletes(table, [deletes])
    io = LocalFileIO().bind_runtime(default_runtime())
    stats = ReadMetrics()
    for row_filter in ("", "id < 10", "region = 'eu'", "id >= 100"):
        ours = await our_rows(io, location, row_filter, stats=stats)
        duck = duckdb_rows(duckdb_connection(), location.removeprefix("file://"), row_filter, COLUMNS)
        theirs = StaticTable.from_metadata(location).scan(row_filter=row_filter or "True").to_arrow()
        assert rows_of(ours) == duck == rows_of(theirs, COLUMNS)
    full = await our_rows(io, location, stats=(one := ReadMetrics()))
    assert full.num_rows == 195
    assert one.delete_files_read == 1


@pytest.mark.anyio
async def test_equality_deletes_match_null_to_null_and_multiple_columns(tmp_path: Path) -> None:
    table = _table(tmp_path)
    base = (tmp_path / "wh" / "db").as_uri()
    by_region = _equality_deletes(f"{base}/eq-region.parquet", {"region": (3, pa.array([None], pa.string()))})
    by_pair = _equality_deletes(
        f"{base}/eq-pair.parquet",
        {"id": (1, pa.array([1, 4, 150, 7], pa.int64())), "name": (2, pa.array(["n1", "n4", "n0", "wrong"]))},
    )
    location = _commit_deletes(table, [by_region, by_pair])
    ours = await our_rows(LocalFileIO().bind_runtime(default_runtime()), location)
    expected = [
        (i, f"n{i % 10}", ["eu", "us", None][i % 3])
        for i in range(200)
        if i % 3 != 2 and i not in (1, 4, 150)
    ]
    assert rows_of(ours) == rows_of(expected)
    duck = duckdb_rows(duckdb_connection(), location.removeprefix("file://"), "", COLUMNS)
    assert rows_of(ours) == duck


def _deletion_vector(positions: Sequence[int]) -> bytes:
    """A deletion-vector-v1 blob: BE length, magic, portable 64-bit roaring, BE CRC-32."""
    highs: dict[int, list[int]] = {}
    for p in positions:
        highs.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    vector = struct.pack("<Q", len(highs))
    for high in sorted(highs):
        bitmap = BitMap(highs[high])
        bitmap.run_optimize()
        vector += struct.pack("<I", high) + bitmap.serialize()
    body = b"\xd1\xd3\x39\x64" + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_deletion_vector_decodes_array_bitmap_and_run_containers() -> None:
    positions = [3, 7, *range(70_000, 80_000, 2), *range(200_000, 230_000), (5 << 32) + 11]
    assert decode_deletion_vector(_deletion_vector(positions)).tolist() == sorted(positions)


def test_deletion_vector_with_bad_crc_is_rejected() -> None:
    from aioiceberg.errors import CorruptFileError

    blob = bytearray(_deletion_vector([1, 2, 3]))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptFileError):
        decode_deletion_vector(bytes(blob))


@pytest.mark.anyio
async def test_deletion_vector_in_a_puffin_file_removes_its_rows(tmp_path: Path) -> None:
    from aioiceberg.spec.puffin import PuffinWriter

    table = _table(tmp_path)
    io = LocalFileIO().bind_runtime(default_runtime())
    md = parse_table_metadata(await io.read(table.metadata_location))
    tasks = [t async for t in TableScan(io, md, decode_workers=0).plan_files()]
    target = tasks[0].file
    writer = PuffinWriter()
    blob = writer.add_blob(
        "deletion-vector-v1",
        _deletion_vector([0, 2, 98]),
        fields=[2147483645],
        snapshot_id=1,
        sequence_number=1,
        properties={"referenced-data-file": target.file_path, "cardinality": "3"},
    )
    puffin_path = tmp_path / "dv.puffin"
    puffin_path.write_bytes(writer.finish())
    dv = DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=puffin_path.as_uri(),
        file_format=FileFormat.PUFFIN,
        partition=(),
        record_count=3,
        file_size_in_bytes=puffin_path.stat().st_size,
        referenced_data_file=target.file_path,
        content_offset=blob.offset,
        content_size_in_bytes=blob.length,
    )
    with_dv = [FileScanTask(t.file, (dv,), t.residual, t.spec, t.schema) for t in tasks]
    result = await read_to_table(io, with_dv, md.schema(), include_file_column=True, include_pos_column=True)
    plain = await read_to_table(io, tasks, md.schema(), include_file_column=True, include_pos_column=True)
    gone = {(target.file_path, p) for p in (0, 2, 98)}
    kept = {(f, p) for f, p in zip(plain["_file"].to_pylist(), plain["_pos"].to_pylist(), strict=True)} - gone
    assert set(zip(result["_file"].to_pylist(), result["_pos"].to_pylist(), strict=True)) == kept
    assert result.num_rows == plain.num_rows - 3
