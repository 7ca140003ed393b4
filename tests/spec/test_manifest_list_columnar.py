"""The columnar manifest-list reader builds exactly the rows fastavro's reader builds, or
refuses (None) and leaves the list to it: on our lists (v1-v3), on PyIceberg's, on lists
written with an Avro schema of their own (Java's v1 names, missing optional fields), and
on damaged bytes."""

from __future__ import annotations

import io
import random
from typing import Any

import anyio
import fastavro
import numpy as np
import pytest
from pyiceberg_manifests import load_or_write_tables, local_path

from aioiceberg.errors import CorruptFileError
from aioiceberg.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary, write_manifest_list
from aioiceberg.spec.manifest.columnar_list import (
    COLUMNAR_LIST_MIN_ROWS,
    NATIVE_LIST_MIN_ROWS,
    ManifestRows,
    decode_manifest_list,
    decode_manifest_rows,
    read_manifest_list_columnar,
)
from aioiceberg.spec.manifest.fastavro_reader import read_manifest_list
from aioiceberg.spec.manifest.native_decode import native_available
from aioiceberg.spec.manifest.snapshot import THREAD_LIST_BYTES, listed_manifests
from aioiceberg.spec.metadata import Snapshot

pytest.importorskip("polars")


def _rows(n: int, version: int) -> list[ManifestFile]:
    rng = random.Random(n * 10 + version)
    out = []
    for i in range(n):
        summaries: tuple[PartitionFieldSummary, ...] | None = (
            PartitionFieldSummary(False, None if i % 3 == 0 else False, i.to_bytes(4, "little"), None),
            PartitionFieldSummary(i % 2 == 0, True, None, b"\xff" * (i % 5)),
        )
        if i % 7 == 0:
            summaries = None
        elif i % 11 == 0:
            summaries = ()
        deletes = version > 1 and i % 4 == 3
        out.append(
            ManifestFile(
                f"s3://b/t/metadata/m{i}.avro",
                1000 + rng.randrange(10**6),
                i % 3,
                ManifestContent.DELETES if deletes else ManifestContent.DATA,
                None if version > 1 and i % 5 == 0 else i,
                None if version > 1 and i % 5 == 0 else max(0, i - 2),
                77 if i % 5 == 0 else 10 + i,
                rng.randrange(100),
                rng.randrange(100),
                rng.randrange(3),
                rng.randrange(10**9),
                rng.randrange(10**9),
                rng.randrange(10),
                summaries,
                b"km" if i % 13 == 0 else None,
                None,
            )
        )
    return out


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_our_lists_read_the_same(version: int, codec: str) -> None:
    data = write_manifest_list(_rows(300, version), version, 77, 76, 9, first_row_id=1000, codec=codec)  # type: ignore[arg-type]
    want = read_manifest_list(data)
    got = read_manifest_list_columnar(data)
    assert got is not None and got == want
    assert all(type(g) is ManifestFile for g in got)
    assert decode_manifest_list(data) == want


@pytest.mark.parametrize("version", [1, 2, 3])
def test_rows_built_as_read_equal_the_eager_readers(version: int) -> None:
    data = write_manifest_list(_rows(300, version), version, 77, 76, 9, first_row_id=1000)
    want = read_manifest_list(data)
    rows = decode_manifest_rows(data)
    assert isinstance(rows, ManifestRows)
    assert rows[7] == want[7] and rows[-1] == want[-1] and rows[5:9] == want[5:9]
    assert rows._built.count(None) == 300 - 5  # only what was read (rows 5-8 and 299) was built
    assert list(rows) == want and len(rows) == 300
    with pytest.raises(IndexError):
        rows[300]
    assert list(rows.spec_ids()) == [mf.partition_spec_id for mf in want]


def test_partition_bounds_are_read_from_the_columns() -> None:
    """What a bulk choice reads without building rows: each row's bound of one summary, where
    the row has as many summaries as asked (rows without summaries, or with none, have not)."""
    data = write_manifest_list(_rows(300, 2), 2, 77, 76, 9)
    want = read_manifest_list(data)
    rows = decode_manifest_rows(data)
    assert isinstance(rows, ManifestRows)
    picked = np.array([0, 1, 2, 7, 11, 22, 299, 150], dtype=np.int64)
    for fields in (1, 2):
        for position in range(fields):
            for upper in (False, True):
                shaped, raw = rows.partition_bounds(picked, position, upper, fields)
                for i, ok, got in zip(picked.tolist(), shaped, raw, strict=True):
                    parts = want[i].partitions
                    assert ok == (parts is not None and len(parts) == fields)
                    summary = parts[position] if ok and parts is not None else None
                    assert got == (
                        None if summary is None else summary.upper_bound if upper else summary.lower_bound
                    )
    assert rows._built.count(None) == 300


def test_short_lists_are_left_to_fastavro() -> None:
    data = write_manifest_list(_rows(20, 2), 2, 77, 76, 9)
    assert read_manifest_list_columnar(data) is None  # below min_rows: polars is not even imported
    assert read_manifest_list_columnar(data, min_rows=0) == read_manifest_list(data)


@pytest.mark.skipif(not native_available(), reason="the compiled decoder is not installed")
@pytest.mark.parametrize("version", [1, 2, 3])
def test_lists_under_polars_threshold_go_columnar_with_the_compiled_decoder(version: int) -> None:
    """The compiled decoder imports nothing, so a list of a few dozen rows is already cheaper
    decoded columnar (a 500-row list: 1.9 ms against fastavro's 5.6); it is small enough to be
    decoded on the loop, where every plan of the snapshot waits for it."""
    n = NATIVE_LIST_MIN_ROWS + 2
    assert n < COLUMNAR_LIST_MIN_ROWS
    data = write_manifest_list(_rows(n, version), version, 77, 76, 9, first_row_id=1000)  # type: ignore[arg-type]
    assert len(data) < THREAD_LIST_BYTES
    rows = decode_manifest_rows(data)
    assert isinstance(rows, ManifestRows)
    assert list(rows) == read_manifest_list(data)
    few = _rows(NATIVE_LIST_MIN_ROWS - 1, version)
    fewer = write_manifest_list(few, version, 77, 76, 9, first_row_id=1000)  # type: ignore[arg-type]
    assert not isinstance(decode_manifest_rows(fewer), ManifestRows)
    assert read_manifest_list_columnar(fewer) is None


@pytest.fixture(scope="module")
def pyiceberg_tables(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return load_or_write_tables(tmp_path_factory)


def test_pyiceberg_lists_read_the_same(pyiceberg_tables: list[Any]) -> None:
    checked = 0
    for table in pyiceberg_tables:
        for snapshot in table.snapshots():
            data = local_path(snapshot.manifest_list).read_bytes()
            got = read_manifest_list_columnar(data, min_rows=0)
            assert got is not None
            assert got == read_manifest_list(data)
            checked += 1
    assert checked > 0


def _list_with_schema(
    fields: list[dict[str, Any]], rows: list[dict[str, Any]], meta: dict[str, str]
) -> bytes:
    buf = io.BytesIO()
    schema = {"type": "record", "name": "manifest_file", "fields": fields}
    fastavro.writer(buf, fastavro.parse_schema(schema), rows, metadata=meta)
    return buf.getvalue()


BASE_FIELDS: list[dict[str, Any]] = [
    {"name": "manifest_path", "type": "string"},
    {"name": "manifest_length", "type": "long"},
    {"name": "partition_spec_id", "type": "int"},
    {"name": "added_snapshot_id", "type": ["null", "long"]},
]


def test_foreign_schemas_agree_or_refuse() -> None:
    records = [
        {"manifest_path": f"m{i}", "manifest_length": i, "partition_spec_id": 0, "added_snapshot_id": i}
        for i in range(300)
    ]
    # a bare v1 list: no content, sequence numbers, counts or summaries
    bare = _list_with_schema(BASE_FIELDS, records, {"format-version": "1"})
    assert read_manifest_list_columnar(bare) == read_manifest_list(bare)
    # Java's v1 names for the counts: a field this reader does not know is left to fastavro
    java = _list_with_schema(
        [*BASE_FIELDS, {"name": "added_data_files_count", "type": ["null", "int"]}],
        [{**r, "added_data_files_count": 3} for r in records],
        {"format-version": "1"},
    )
    assert read_manifest_list_columnar(java) is None
    assert decode_manifest_list(java) == read_manifest_list(java)
    # a known name with another type
    odd = _list_with_schema(
        [*BASE_FIELDS, {"name": "added_files_count", "type": "long"}],
        [{**r, "added_files_count": 3} for r in records],
        {"format-version": "2"},
    )
    assert read_manifest_list_columnar(odd) is None
    # a content value outside its enum: refused here, reported by fastavro's reader
    bad = _list_with_schema(
        [*BASE_FIELDS, {"name": "content", "type": "int"}],
        [{**r, "content": 5 if i == 150 else 0} for i, r in enumerate(records)],
        {"format-version": "2"},
    )
    assert read_manifest_list_columnar(bad) is None
    with pytest.raises(CorruptFileError):
        decode_manifest_list(bad, "s3://b/list.avro")
    # an unsupported format version
    future = _list_with_schema(BASE_FIELDS, records, {"format-version": "9"})
    assert read_manifest_list_columnar(future) is None


def test_damaged_lists_raise_as_fastavro_says() -> None:
    data = write_manifest_list(_rows(300, 2), 2, 77, 76, 9)
    for cut in (len(data) // 2, len(data) - 5, 40):
        damaged = data[:cut]
        assert read_manifest_list_columnar(damaged) is None
        with pytest.raises(CorruptFileError):
            decode_manifest_list(damaged, "s3://b/list.avro")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    try:
        want: list[ManifestFile] | BaseException = read_manifest_list(bytes(flipped))
    except CorruptFileError as e:
        want = e
    got = read_manifest_list_columnar(bytes(flipped))
    if isinstance(want, BaseException):
        assert got is None
    else:
        assert got is None or got == want


class _Bytes:
    """An object reader over one stored list (the spec layer's ``ObjectReader``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read(self, location: str) -> bytes:
        return self.data


@pytest.mark.parametrize("rows", [NATIVE_LIST_MIN_ROWS - 1, NATIVE_LIST_MIN_ROWS + 30])
def test_a_damaged_short_list_read_for_a_plan_names_itself(rows: int) -> None:
    """Lists under ``THREAD_LIST_BYTES`` are decoded on the loop, columnar from a few dozen
    rows: a damaged one still raises the reader's typed error naming the list (never an
    Arrow or decoder error), whichever decoder met it first."""
    data = write_manifest_list(_rows(rows, 2), 2, 77, 76, 9)
    assert len(data) < THREAD_LIST_BYTES
    snap = Snapshot(77, 76, 9, 0, "s3://b/t/metadata/snap-77.avro")
    whole = anyio.run(listed_manifests, _Bytes(data), snap)
    assert list(whole) == read_manifest_list(data)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    for damaged in (data[: len(data) // 2], data[: len(data) - 5], bytes(flipped)):
        try:
            want: list[ManifestFile] | None = read_manifest_list(damaged)
        except CorruptFileError:
            want = None
        if want is None:
            with pytest.raises(CorruptFileError) as err:
                anyio.run(listed_manifests, _Bytes(damaged), snap)
            assert "snap-77.avro" in str(err.value)
        else:  # a flip fastavro reads through: the rows it reads
            assert list(anyio.run(listed_manifests, _Bytes(damaged), snap)) == want
