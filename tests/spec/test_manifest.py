"""Manifests and manifest lists: decoded the same as PyIceberg decodes them, and the files we
write decoded the same by PyIceberg and by plain fastavro."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from manifest_samples import (
    LOCATION,
    PARTITIONS,
    SCHEMA,
    SPEC,
    U1,
    U2,
    sample_entries,
    sample_file,
    write_sample,
)
from pyiceberg_manifests import load_or_write_tables, local_path

from aioiceberg.errors import (
    CorruptFileError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatVersionError,
    ValidationError,
)
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    iter_manifest_entries,
    manifest_entry_schema,
    read_manifest,
    read_manifest_list,
    read_manifest_metadata,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.manifest.columnar import avro_layout, read_manifest_entries_columnar
from aioiceberg.spec.manifest.entry_rows import STAT_FIELDS
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    TimestampNanoType,
    TimestamptzType,
    TimeType,
)
from aioiceberg.spec.values import to_bytes

pyiceberg_manifest = pytest.importorskip("pyiceberg.manifest")

from pyiceberg.io.pyarrow import PyArrowFileIO  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Tables written by PyIceberg


@pytest.fixture(scope="module")
def pyiceberg_tables(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return load_or_write_tables(tmp_path_factory)


def _compare_manifest_file(ours: ManifestFile, theirs: Any) -> None:
    assert ours.manifest_path == theirs.manifest_path
    assert ours.manifest_length == theirs.manifest_length
    assert ours.partition_spec_id == theirs.partition_spec_id
    assert int(ours.content) == int(theirs.content)
    assert ours.sequence_number == theirs.sequence_number
    assert ours.min_sequence_number == theirs.min_sequence_number
    assert ours.added_snapshot_id == theirs.added_snapshot_id
    for name in (
        "added_files_count",
        "existing_files_count",
        "deleted_files_count",
        "added_rows_count",
        "existing_rows_count",
        "deleted_rows_count",
        "key_metadata",
    ):
        assert getattr(ours, name) == getattr(theirs, name), name
    if theirs.partitions is None:
        assert ours.partitions is None
    else:
        assert ours.partitions is not None
        assert [(s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in ours.partitions] == [
            (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in theirs.partitions
        ]


def _py_partition(values: Any) -> tuple[Any, ...]:
    return tuple(values[i] for i in range(len(values)))


def _compare_entry(ours: ManifestEntry, theirs: Any, their_partition: tuple[Any, ...] | None = None) -> None:
    assert int(ours.status) == int(theirs.status)
    assert ours.snapshot_id == theirs.snapshot_id
    assert ours.sequence_number == theirs.sequence_number
    assert ours.file_sequence_number == theirs.file_sequence_number
    a, b = ours.data_file, theirs.data_file
    assert a.file_path == b.file_path
    assert int(a.content) == int(b.content)
    assert a.file_format.value == b.file_format.value
    assert _nan_equal(a.partition, their_partition or _py_partition(b.partition))
    assert a.record_count == b.record_count
    assert a.file_size_in_bytes == b.file_size_in_bytes
    for name in STAT_FIELDS:
        assert getattr(a, name) == getattr(b, name), name
    assert a.key_metadata == b.key_metadata
    assert list(a.split_offsets or []) == list(b.split_offsets or [])
    assert a.sort_order_id == b.sort_order_id
    assert a.spec_id == b.spec_id


def test_pyiceberg_manifest_lists_and_manifests_decode_identically(pyiceberg_tables: list[Any]) -> None:
    file_io = PyArrowFileIO()
    checked_entries = 0
    statuses: set[int] = set()
    for table in pyiceberg_tables:
        for snapshot in table.snapshots():
            data = local_path(snapshot.manifest_list).read_bytes()
            ours = read_manifest_list(data, snapshot.manifest_list)
            theirs = list(pyiceberg_manifest.read_manifest_list(file_io.new_input(snapshot.manifest_list)))
            assert len(ours) == len(theirs)
            for our_mf, their_mf in zip(ours, theirs, strict=True):
                _compare_manifest_file(our_mf, their_mf)
                manifest = read_manifest(local_path(our_mf.manifest_path).read_bytes(), our_mf)
                assert manifest.metadata.format_version == table.format_version
                their_entries = their_mf.fetch_manifest_entry(file_io, discard_deleted=False)
                assert len(manifest.entries) == len(their_entries)
                for e, t in zip(manifest.entries, their_entries, strict=True):
                    _compare_entry(e, t)
                    statuses.add(int(e.status))
                    checked_entries += 1
    assert statuses == {0, 1, 2}  # appends, the copy-on-write delete and overwrite
    assert checked_entries > 100


def test_pyiceberg_manifest_metadata_parses_to_table_schema_and_spec(pyiceberg_tables: list[Any]) -> None:
    for table in pyiceberg_tables:
        snapshot = table.current_snapshot()
        mf = read_manifest_list(local_path(snapshot.manifest_list).read_bytes())[0]
        meta = read_manifest_metadata(local_path(mf.manifest_path).read_bytes(), mf.manifest_path)
        assert meta.format_version == table.format_version
        assert meta.content == ManifestContent.DATA
        assert meta.partition_spec_id == table.spec().spec_id
        spec = meta.partition_spec()
        assert [(f.source_id, f.field_id, str(f.transform), f.name) for f in spec.fields] == [
            (f.source_id, f.field_id, str(f.transform), f.name) for f in table.spec().fields
        ]
        assert [f.name for f in meta.schema().fields] == [f.name for f in table.schema().fields]


def test_day_and_hour_partition_values_are_ints_in_the_value_convention(pyiceberg_tables: list[Any]) -> None:
    table = next(t for t in pyiceberg_tables if t.name()[-1] == "hour_v2")
    mf = read_manifest_list(local_path(table.current_snapshot().manifest_list).read_bytes())[0]
    entry = read_manifest(local_path(mf.manifest_path).read_bytes(), mf).entries[0]
    ts_hour, day, amount = entry.data_file.partition
    assert ts_hour is None or isinstance(ts_hour, int)
    assert isinstance(day, int) and dt.date(1970, 1, 1) + dt.timedelta(days=day) >= dt.date(2024, 5, 1)
    assert isinstance(amount, Decimal)


# ---------------------------------------------------------------------------------------------
# Files we write


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_written_manifest_reads_back_with_inherited_values(format_version: int, codec: str) -> None:
    data, mf = write_sample(format_version, codec)
    assert mf.manifest_length == len(data)
    assert (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count) == (1, 1, 1)
    assert (mf.added_rows_count, mf.existing_rows_count, mf.deleted_rows_count) == (10, 11, 12)
    assert mf.sequence_number is None
    assert mf.added_snapshot_id == 99
    assert fastavro.reader(io.BytesIO(data)).codec == codec
    listed = read_manifest_list(write_manifest_list([mf], format_version, 99, 98, 6, first_row_id=500))[0]
    manifest = read_manifest(data, listed)
    added, existing, deleted = manifest.entries
    expected = sample_entries()
    for got, want in zip(manifest.entries, expected, strict=True):
        assert _nan_equal(got.data_file.partition, want.data_file.partition)
        assert got.data_file.lower_bounds == want.data_file.lower_bounds
        assert got.data_file.column_sizes == want.data_file.column_sizes
        assert got.data_file.spec_id == SPEC.spec_id
    assert added.snapshot_id == 99 and deleted.snapshot_id == 99 and existing.snapshot_id == 11
    if format_version == 1:
        assert [e.sequence_number for e in manifest.entries] == [0, 0, 0]
        assert listed.sequence_number == 0
    else:
        assert listed.sequence_number == 6 and listed.min_sequence_number == 4
        assert (added.sequence_number, added.file_sequence_number) == (6, 6)
        assert (existing.sequence_number, existing.file_sequence_number) == (4, 3)
        assert (deleted.sequence_number, deleted.file_sequence_number) == (5, 5)
    if format_version == 3:
        assert listed.first_row_id == 500
        # Row ids cover live data files in order: added (10 rows) then existing (11 rows).
        assert (added.data_file.first_row_id, existing.data_file.first_row_id) == (500, 510)
        assert deleted.data_file.first_row_id is None
    else:
        assert all(e.data_file.first_row_id is None for e in manifest.entries)


def _nan_equal(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and x != x and y != y) for x, y in zip(a, b, strict=True)
    )


def test_partition_summaries_track_nulls_nans_and_bounds() -> None:
    _, mf = write_sample(2)
    assert mf.partitions is not None
    s = {f.name: mf.partitions[i] for i, f in enumerate(SPEC.fields)}
    assert s["id_bucket"].lower_bound == to_bytes(0, IntegerType())
    assert s["id_bucket"].upper_bound == to_bytes(7, IntegerType())
    assert s["name_trunc"].contains_null and s["name_trunc"].upper_bound == b"zzz"
    assert s["d"].contains_nan and not s["d"].contains_null
    assert s["d"].lower_bound == to_bytes(-0.0, DoubleType()) and s["d"].upper_bound == to_bytes(
        1.5, DoubleType()
    )
    assert s["u"].lower_bound == U2.bytes and s["u"].upper_bound == U1.bytes
    assert s["amount"].lower_bound == to_bytes(Decimal("-0.50"), DecimalType(9, 2))
    assert s["day"].contains_null and s["day"].upper_bound == to_bytes(19845, DateType())


def _walk_fields(schema: Any, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(schema, list):
        for s in schema:
            _walk_fields(s, out)
    elif isinstance(schema, dict):
        for f in schema.get("fields", []):
            out.append(f)
            _walk_fields(f["type"], out)
        if "items" in schema:
            _walk_fields(schema["items"], out)
    return out


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_plain_fastavro_sees_field_ids_names_and_metadata(format_version: int) -> None:
    data, mf = write_sample(format_version)
    r = fastavro.reader(io.BytesIO(data))
    rows = list(r)
    schema = json.loads(r.metadata["avro.schema"])
    meta = r.metadata
    assert schema["name"] == "manifest_entry"
    data_file = next(f for f in schema["fields"] if f["name"] == "data_file")
    assert data_file["field-id"] == 2 and data_file["type"]["name"] == "r2"
    partition = next(f for f in data_file["type"]["fields"] if f["name"] == "partition")
    assert partition["field-id"] == 102 and partition["type"]["name"] == "r102"
    assert [f["field-id"] for f in partition["type"]["fields"]] == [f.field_id for f in SPEC.fields]
    assert all("field-id" in f for f in _walk_fields(schema, []))
    by_name = {f["name"]: f for f in data_file["type"]["fields"]}
    lower = by_name["lower_bounds"]["type"][1]
    assert lower["logicalType"] == "map" and lower["items"]["name"] == "k126_v127"
    assert [f["field-id"] for f in lower["items"]["fields"]] == [126, 127]
    assert by_name["split_offsets"]["type"][1]["element-id"] == 133
    assert ("content" in by_name) == (format_version >= 2)
    assert ("block_size_in_bytes" in by_name) == (format_version == 1)
    assert ("referenced_data_file" in by_name) == (format_version == 3)
    assert json.loads(meta["schema"])["schema-id"] == 3
    assert meta["schema-id"] == "3" and meta["partition-spec-id"] == "2"
    assert meta["format-version"] == str(format_version)
    assert [f["field-id"] for f in json.loads(meta["partition-spec"])] == [f.field_id for f in SPEC.fields]
    assert meta.get("content") == (None if format_version == 1 else "data")
    assert rows[0]["data_file"]["partition"]["ts_hour"] == 475000
    if format_version >= 2:
        assert rows[0]["sequence_number"] is None and rows[0]["file_sequence_number"] is None

    listing = write_manifest_list([mf], format_version, 99, None, 6, first_row_id=0)
    r = fastavro.reader(io.BytesIO(listing))
    schema = json.loads(r.metadata["avro.schema"])
    meta = r.metadata
    rows = list(r)
    assert schema["name"] == "manifest_file"
    assert all("field-id" in f for f in _walk_fields(schema, []))
    partitions = next(f for f in schema["fields"] if f["name"] == "partitions")["type"][1]
    assert partitions["element-id"] == 508 and partitions["items"]["name"] == "r508"
    assert meta["snapshot-id"] == "99" and meta["parent-snapshot-id"] == "null"
    assert meta["format-version"] == str(format_version)
    assert meta.get("sequence-number") == (None if format_version == 1 else "6")
    assert meta.get("first-row-id") == ("0" if format_version == 3 else None)
    assert rows[0]["manifest_path"] == mf.manifest_path


@pytest.mark.parametrize("format_version", [1, 2])
def test_pyiceberg_reads_what_we_write(format_version: int, tmp_path: Path) -> None:
    data, mf = write_sample(format_version, tmp=tmp_path)
    local_path(mf.manifest_path).write_bytes(data)
    list_path = tmp_path / "snap.avro"
    list_path.write_bytes(write_manifest_list([mf], format_version, 99, 98, 6))
    file_io = PyArrowFileIO()
    (their_mf,) = pyiceberg_manifest.read_manifest_list(file_io.new_input(str(list_path)))
    (our_mf,) = read_manifest_list(list_path.read_bytes())
    _compare_manifest_file(our_mf, their_mf)
    theirs = their_mf.fetch_manifest_entry(file_io, discard_deleted=False)
    ours = read_manifest(data, our_mf).entries
    assert len(theirs) == 3
    for e, t in zip(ours, theirs, strict=True):
        t_partition = list(_py_partition(t.data_file.partition))
        # Some PyIceberg versions leave uuid partition values as the 16 raw bytes.
        if isinstance(t_partition[4], bytes):
            t_partition[4] = uuid.UUID(bytes=t_partition[4])
        _compare_entry(e, t, tuple(t_partition))


def test_v2_delete_manifest_with_position_and_equality_deletes(tmp_path: Path) -> None:
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            sample_file(0, PARTITIONS[0], DataFileContent.POSITION_DELETES),
        ),
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            sample_file(1, PARTITIONS[0], DataFileContent.EQUALITY_DELETES, equality_ids=(1, 2)),
        ),
    ]
    data, mf = write_manifest(
        entries, SPEC, SCHEMA, 2, 5, ManifestContent.DELETES, manifest_path=f"file://{tmp_path}/d.avro"
    )
    assert mf.content == ManifestContent.DELETES
    assert read_manifest_metadata(data).content == ManifestContent.DELETES
    (listed,) = read_manifest_list(write_manifest_list([mf], 2, 5, 4, 9))
    assert listed.content == ManifestContent.DELETES and listed.sequence_number == 9
    pos, eq = read_manifest(data, listed).entries
    assert pos.data_file.content == DataFileContent.POSITION_DELETES and pos.data_file.sort_order_id is None
    assert eq.data_file.equality_ids == (1, 2) and eq.sequence_number == 9
    # PyIceberg agrees on contents and equality ids.
    local_path(mf.manifest_path).write_bytes(data)
    (tp, te) = pyiceberg_manifest.ManifestFile.from_args(
        manifest_path=mf.manifest_path,
        manifest_length=len(data),
        partition_spec_id=SPEC.spec_id,
        content=pyiceberg_manifest.ManifestContent.DELETES,
        sequence_number=9,
        min_sequence_number=9,
        added_snapshot_id=5,
    ).fetch_manifest_entry(PyArrowFileIO())
    assert int(tp.data_file.content) == 1 and int(te.data_file.content) == 2
    assert list(te.data_file.equality_ids) == [1, 2]


def test_v3_deletion_vector_fields_round_trip() -> None:
    dv = DataFile(
        DataFileContent.POSITION_DELETES,
        "file:///wh/data/dv.puffin",
        FileFormat.PUFFIN,
        PARTITIONS[0],
        3,
        900,
        referenced_data_file="file:///wh/data/data-0.parquet",
        content_offset=4,
        content_size_in_bytes=120,
    )
    data, mf = write_manifest(
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, dv)],
        SPEC,
        SCHEMA,
        3,
        7,
        ManifestContent.DELETES,
        manifest_path="mem://dv.avro",
    )
    (listed,) = read_manifest_list(write_manifest_list([mf], 3, 7, None, 2, first_row_id=100))
    assert listed.first_row_id is None  # delete manifests get no row ids
    (entry,) = read_manifest(data, listed).entries
    got = entry.data_file
    assert got.is_deletion_vector
    assert (got.referenced_data_file, got.content_offset, got.content_size_in_bytes) == (
        "file:///wh/data/data-0.parquet",
        4,
        120,
    )


def test_partition_types_round_trip_in_the_value_convention() -> None:
    schema = Schema(
        NestedField(1, "b", BooleanType()),
        NestedField(2, "i", IntegerType()),
        NestedField(3, "f", FloatType()),
        NestedField(4, "t", TimeType()),
        NestedField(5, "tz", TimestamptzType()),
        NestedField(6, "ns", TimestampNanoType()),
        NestedField(7, "fx", FixedType(3)),
        NestedField(8, "bin", BinaryType()),
        NestedField(9, "fx2", FixedType(3)),
    )
    spec = PartitionSpec(
        0,
        tuple(
            PartitionField((f.field_id,), 1000 + i, parse_transform("identity"), f.name)
            for i, f in enumerate(schema.fields)
        ),
    )
    values = (
        True,
        -5,
        2.5,
        3_600_000_001,
        1_700_000_000_123_456,
        1_700_000_000_123_456_789,
        b"abc",
        b"\x00\xff",
        b"xyz",
    )
    entry = ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, values))
    data, _ = write_manifest([entry], spec, schema, 3, 1, manifest_path="mem://t.avro")
    (got,) = read_manifest(data).entries
    assert got.data_file.partition == values


# ---------------------------------------------------------------------------------------------
# Inheritance and writer rules


def test_null_snapshot_id_and_sequence_numbers_inherit_only_for_added_entries() -> None:
    data, mf = write_sample(2)
    listed = ManifestFile(mf.manifest_path, mf.manifest_length, mf.partition_spec_id, mf.content, 8, 4, 77)
    # Without the list row, nulls stay null: nothing to inherit from.
    added = read_manifest(data).entries[0]
    assert (added.snapshot_id, added.sequence_number, added.file_sequence_number) == (99, None, None)
    added, existing, _ = read_manifest(data, listed).entries
    assert (added.sequence_number, added.file_sequence_number) == (8, 8)
    assert existing.sequence_number == 4


def test_existing_entries_need_sequence_numbers_in_v2() -> None:
    entry = ManifestEntry(ManifestEntryStatus.EXISTING, 3, None, None, sample_file(0, PARTITIONS[0]))
    with pytest.raises(ValidationError):
        write_manifest([entry], SPEC, SCHEMA, 2, 4, manifest_path="mem://x.avro")


def test_manifest_list_refuses_to_assign_a_sequence_number_to_another_snapshots_manifest() -> None:
    _, mf = write_sample(2)
    with pytest.raises(ValidationError):
        write_manifest_list([mf], 2, 1234, None, 5)


def test_v1_rejects_delete_files() -> None:
    entry = ManifestEntry(
        ManifestEntryStatus.ADDED,
        None,
        None,
        None,
        sample_file(0, PARTITIONS[0], DataFileContent.POSITION_DELETES),
    )
    with pytest.raises(ValidationError):
        write_manifest([entry], SPEC, SCHEMA, 1, 4, ManifestContent.DELETES, manifest_path="mem://x.avro")


def test_columns_needed_keeps_only_those_stats() -> None:
    data, _ = write_sample(2)
    full = read_manifest(data).entries[0].data_file
    slim = read_manifest(data, columns_needed={2}).entries[0].data_file
    assert full.lower_bounds == {1: to_bytes(0, LongType()), 2: b"a"}
    assert slim.lower_bounds == {2: b"a"} and slim.column_sizes == {2: 60} and slim.nan_value_counts == {}
    assert slim.partition == full.partition


def test_iter_and_discard_deleted() -> None:
    data, _ = write_sample(2)
    statuses = [e.status for e in iter_manifest_entries(data, discard_deleted=True)]
    assert statuses == [ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING]


# ---------------------------------------------------------------------------------------------
# Damaged input


def _assert_corrupt(data: bytes, *, list_: bool = False) -> None:
    with pytest.raises(InvalidMetadataError) as info:
        if list_:
            read_manifest_list(data, LOCATION)
        else:
            read_manifest(data, location=LOCATION)
    assert LOCATION in str(info.value)


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_truncated_manifest_is_corrupt(codec: str) -> None:
    data, _ = write_sample(2, codec)
    for cut in (0, 3, 10, len(data) // 2, len(data) - 20, len(data) - 1):
        with pytest.raises(CorruptFileError) as info:
            read_manifest(data[:cut], location=LOCATION)
        assert LOCATION in str(info.value)


def test_a_disputed_length_is_a_hint_the_content_decides() -> None:
    # Other writers list lengths that disagree with the object; PyIceberg, DuckDB and Java
    # read on. An intact file reads as if the length were right, in both decoders.
    data, mf = write_sample(2)
    expected = repr(read_manifest(data, mf).entries)  # repr: a partition value is NaN
    for wrong in (len(data) + 31, len(data) - 31, 0):
        listed = dataclasses.replace(mf, manifest_length=wrong)
        assert repr(read_manifest(data, listed).entries) == expected
        assert repr(list(iter_manifest_entries(data, listed))) == expected
        assert read_manifest_entries_columnar(data, listed) is None  # fastavro decides
    # Bytes after the last block are still damage the decoder reports.
    with pytest.raises(CorruptFileError, match="damaged"):
        read_manifest(data + b"\x00", mf)


def _one_block_per_entry(data: bytes) -> bytes:
    reader = fastavro.reader(io.BytesIO(data))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, list(reader), metadata=meta, codec="null", sync_interval=1)
    return out.getvalue()


def test_a_manifest_cut_at_a_block_boundary_is_caught_by_the_listed_counts() -> None:
    data, mf = write_sample(2)
    data = _one_block_per_entry(data)
    layout = avro_layout(data)
    assert layout is not None and len(layout.blocks) == 3
    cut = data[: layout.blocks[0][1] + 16]  # the first block and its sync marker: valid Avro
    assert len(list(fastavro.reader(io.BytesIO(cut)))) == 1
    listed = dataclasses.replace(mf, manifest_length=len(data))
    with pytest.raises(CorruptFileError, match="holds 1 entries but the manifest list counts 3") as info:
        read_manifest(cut, listed)
    assert mf.manifest_path in str(info.value)
    with pytest.raises(CorruptFileError, match="counts 3"):
        list(iter_manifest_entries(cut, listed))
    # Without counts (allowed in v1 lists) nothing is left to check against.
    unknown = dataclasses.replace(listed, added_files_count=None)
    assert len(read_manifest(cut, unknown).entries) == 1


def test_wrong_magic_and_random_bytes_are_corrupt() -> None:
    data, _ = write_sample(2)
    for bad in (b"PAR1" + data[4:], bytes(random.Random(1).randrange(256) for _ in range(500)), b"", b"{}"):
        with pytest.raises(CorruptFileError, match="not an Avro file"):
            read_manifest(bad, location=LOCATION)
        with pytest.raises(CorruptFileError, match="not an Avro file"):
            read_manifest_list(bad, LOCATION)


def test_flipped_sync_marker_is_corrupt() -> None:
    data, _ = write_sample(2, "deflate")
    flipped = bytearray(data)
    flipped[-1] ^= 0x10
    _assert_corrupt(bytes(flipped))


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_bit_flips_in_the_data_blocks_are_corrupt_or_decode_cleanly(codec: str) -> None:
    # Avro carries no checksum: a flip inside a value (a count, a path byte) decodes to a
    # different but well-formed value. Every flip must either decode or raise CorruptFileError
    # naming the file; most land on structure (lengths, varints, deflate, sync) and are caught.
    data, _ = write_sample(2, codec)
    header_end = data.index(b"manifest_entry") + 200
    rng = random.Random(7)
    detected = 0
    for _ in range(100):
        pos = rng.randrange(header_end, len(data))
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        try:
            read_manifest(bytes(flipped), location=LOCATION)
        except CorruptFileError as e:
            assert LOCATION in str(e)
            detected += 1
    assert detected >= 50


def test_unknown_format_version_is_unsupported() -> None:
    partition_type = SPEC.partition_type(SCHEMA)
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        fastavro.parse_schema(manifest_entry_schema(2, partition_type)),
        [],
        metadata={"format-version": "9"},
    )
    with pytest.raises(UnsupportedFormatVersionError, match="9") as info:
        read_manifest(buf.getvalue(), location=LOCATION)
    assert LOCATION in str(info.value)
    _, mf = write_sample(2)
    listing = write_manifest_list([mf], 2, 99, None, 1).replace(b"\x02\x32", b"\x02\x37")
    with pytest.raises(UnsupportedFormatVersionError):
        read_manifest_list(listing)


def test_manifest_list_is_not_a_manifest() -> None:
    _, mf = write_sample(2)
    listing = write_manifest_list([mf], 2, 99, None, 1)
    with pytest.raises(InvalidMetadataError, match="not a manifest"):
        read_manifest(listing, location=LOCATION)
    data, _ = write_sample(2)
    with pytest.raises(InvalidMetadataError, match="not a manifest list"):
        read_manifest_list(data, LOCATION)


_VALID_MANIFEST = write_sample(2, "null")[0]
_VALID_LIST = write_manifest_list([write_sample(2)[1]], 2, 99, None, 1, codec="null")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(["manifest", "list"]),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.one_of(st.none(), st.floats(0, 1)),
)
def test_fuzzed_files_raise_only_iceberg_errors(
    which: str, edits: list[tuple[float, int]], cut: float | None
) -> None:
    data = bytearray(_VALID_MANIFEST if which == "manifest" else _VALID_LIST)
    for where, value in edits:
        data[int(where * len(data))] = value
    if cut is not None:
        data = data[: int(cut * len(data))]
    try:
        if which == "manifest":
            read_manifest(bytes(data), location=LOCATION)
        else:
            read_manifest_list(bytes(data), LOCATION)
    except Exception as e:  # only an IcebergError may escape
        assert isinstance(e, IcebergError), repr(e)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_iceberg_errors(blob: bytes) -> None:
    for data in (blob, b"Obj\x01" + blob):
        for read in (
            lambda d: read_manifest(d, location=LOCATION),
            lambda d: read_manifest_list(d, LOCATION),
        ):
            try:
                read(data)
            except Exception as e:  # only an IcebergError may escape
                assert isinstance(e, IcebergError), repr(e)
