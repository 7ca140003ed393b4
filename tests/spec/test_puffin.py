"""Puffin files: layout per the spec, codecs, footer validation, theta-sketch blobs."""

from __future__ import annotations

import json
import random
import struct
import uuid
from decimal import Decimal

import datasketches
import lz4.frame
import mmh3
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioiceberg import __version__
from aioiceberg.errors import CorruptFileError, IcebergError, UnsupportedError, ValidationError
from aioiceberg.spec.puffin import (
    FOOTER_TRAILER_SIZE,
    MAGIC,
    NDV_PROPERTY,
    THETA_SKETCH_BLOB_TYPE,
    BlobMetadata,
    PuffinFile,
    PuffinWriter,
    blob_metadata_from_json,
    blob_metadata_to_json,
    build_theta_sketch,
    decompress_blob,
    footer_size_from_tail,
    read_blob,
    read_footer,
    sketch_input_bytes,
    theta_sketch_estimate,
)
from aioiceberg.spec.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, StringType

LOC = "s3://bucket/tbl/metadata/stats-1.puffin"


def hand_built(blobs: bytes, payload: bytes, flags: bytes = b"\x00\x00\x00\x00") -> bytes:
    """A file assembled straight from the spec's layout, without our writer."""
    return MAGIC + blobs + MAGIC + payload + struct.pack("<i", len(payload)) + flags + MAGIC


def sample_file(*, codec: str | None = None, compress_footer: bool = False) -> tuple[bytes, list[bytes]]:
    payloads = [b"first blob" * 20, bytes(range(256)) * 4, b""]
    writer = PuffinWriter(compress_footer=compress_footer)
    for i, data in enumerate(payloads):
        writer.add_blob(
            f"type-{i}",
            data,
            fields=(i + 1, 7),
            snapshot_id=1000 + i,
            sequence_number=i,
            compression_codec=codec,
            properties={"n": str(i)},
        )
    return writer.finish(), payloads


# --------------------------------------------------------------------------- spec layout, by hand


def test_hand_built_file_decodes_per_spec_layout() -> None:
    blob1 = b"raw-bytes"
    blob2 = zstandard.ZstdCompressor().compress(b"zstd payload" * 10)
    blob3 = lz4.frame.compress(b"lz4 payload" * 10, store_size=True)
    off2 = 4 + len(blob1)
    off3 = off2 + len(blob2)
    payload = (
        '{"blobs":['
        f'{{"type":"t1","fields":[1],"snapshot-id":5,"sequence-number":2,"offset":4,"length":{len(blob1)}}},'
        f'{{"type":"t2","fields":[2,3],"snapshot-id":-6,"sequence-number":3,"offset":{off2},'
        f'"length":{len(blob2)},"compression-codec":"zstd","properties":{{"k":"v"}}}},'
        f'{{"type":"t3","fields":[],"snapshot-id":7,"sequence-number":4,"offset":{off3},'
        f'"length":{len(blob3)},"compression-codec":"lz4","future-key":1}}'
        '],"properties":{"created-by":"hand \u00e9"}}'
    ).encode()
    data = hand_built(blob1 + blob2 + blob3, payload)

    footer = read_footer(data, location=LOC)

    assert footer.properties == {"created-by": "hand é"}
    assert footer.blobs[0] == BlobMetadata("t1", (1,), 5, 2, 4, len(blob1), None, {})
    assert footer.blobs[1] == BlobMetadata("t2", (2, 3), -6, 3, off2, len(blob2), "zstd", {"k": "v"})
    assert footer.blobs[2].fields == () and footer.blobs[2].compression_codec == "lz4"
    assert [read_blob(data, b) for b in footer.blobs] == [blob1, b"zstd payload" * 10, b"lz4 payload" * 10]


def test_empty_file_with_only_magic_and_footer() -> None:
    data = hand_built(b"", b'{"blobs":[]}')
    assert read_footer(data) == PuffinFile(blobs=(), properties={})


def test_hand_built_lz4_compressed_footer() -> None:
    payload = (
        b'{"blobs":[{"type":"t","fields":[1],"snapshot-id":1,"sequence-number":1,"offset":4,"length":2}]}'
    )
    data = hand_built(b"ab", lz4.frame.compress(payload, store_size=True), flags=b"\x01\x00\x00\x00")
    footer = read_footer(data)
    assert read_blob(data, footer.blobs[0]) == b"ab"


def test_writer_lays_out_bytes_as_the_spec_says() -> None:
    writer = PuffinWriter(created_by="test 1")
    writer.add_blob("t", b"xyz", fields=[3], snapshot_id=9, sequence_number=8)
    data = writer.finish()

    assert data[:4] == MAGIC and data[4:7] == b"xyz" and data[7:11] == MAGIC and data[-4:] == MAGIC
    assert data[-8:-4] == b"\x00\x00\x00\x00"
    (size,) = struct.unpack("<i", data[-12:-8])
    assert json.loads(data[11 : 11 + size]) == {
        "blobs": [
            {"type": "t", "fields": [3], "snapshot-id": 9, "sequence-number": 8, "offset": 4, "length": 3}
        ],
        "properties": {"created-by": "test 1"},
    }
    assert writer.footer_size == len(data) - 7 == footer_size_from_tail(data)
    assert writer.file_size == len(data)


def test_default_created_by_names_aioiceberg_version() -> None:
    footer = read_footer(PuffinWriter().finish())
    assert footer.properties == {"created-by": f"aioiceberg {__version__}"}


def test_json_shape_round_trips_and_keeps_python_names_apart() -> None:
    blob = BlobMetadata("t", (1, 2), 3, 4, 5, 6, "zstd", {"a": "b"})
    obj = blob_metadata_to_json(blob)
    assert set(obj) == {
        "type",
        "fields",
        "snapshot-id",
        "sequence-number",
        "offset",
        "length",
        "compression-codec",
        "properties",
    }
    assert blob_metadata_from_json(obj) == blob


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("codec", [None, "lz4", "zstd"])
@pytest.mark.parametrize("compress_footer", [False, True])
def test_round_trip(codec: str | None, compress_footer: bool) -> None:
    data, payloads = sample_file(codec=codec, compress_footer=compress_footer)
    assert (data[-8] & 1) == compress_footer

    footer = read_footer(data, location=LOC)

    assert [b.compression_codec for b in footer.blobs] == [codec] * 3
    assert [b.fields for b in footer.blobs] == [(1, 7), (2, 7), (3, 7)]
    assert [b.properties for b in footer.blobs] == [{"n": "0"}, {"n": "1"}, {"n": "2"}]
    assert [read_blob(data, b) for b in footer.blobs] == payloads


@pytest.mark.parametrize("compress_footer", [False, True])
def test_footer_read_from_tail_then_blobs_by_range(compress_footer: bool) -> None:
    data, payloads = sample_file(codec="zstd", compress_footer=compress_footer)
    last = data[-FOOTER_TRAILER_SIZE:]
    needed = footer_size_from_tail(last, location=LOC)
    footer = read_footer(data[-needed:], file_size=len(data), location=LOC)
    got = [decompress_blob(data[b.offset : b.offset + b.length], b, location=LOC) for b in footer.blobs]
    assert got == payloads


def test_tail_shorter_than_footer_is_a_caller_error() -> None:
    data, _ = sample_file()
    with pytest.raises(ValidationError, match="footer_size_from_tail"):
        read_footer(data[-20:], file_size=len(data))


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_pyiceberg_reads_what_we_write(codec: str | None) -> None:
    from pyiceberg.table.puffin import PuffinFile as PyIcebergPuffin

    data, payloads = sample_file(codec=codec)
    theirs = PyIcebergPuffin(data)
    assert theirs.footer.properties == {"created-by": f"aioiceberg {__version__}"}
    assert [b.snapshot_id for b in theirs.footer.blobs] == [1000, 1001, 1002]
    assert [theirs.get_blob_payload(b) for b in theirs.footer.blobs] == payloads


# --------------------------------------------------------------------------- bad input


def test_bad_magic_at_start() -> None:
    data, _ = sample_file()
    with pytest.raises(CorruptFileError, match="bad magic at start of Puffin file") as info:
        read_footer(b"XFA1" + data[4:], location=LOC)
    assert info.value.location == LOC and LOC in str(info.value)


def test_bad_magic_at_end() -> None:
    data, _ = sample_file()
    with pytest.raises(CorruptFileError, match=f"{LOC}: bad magic at end"):
        read_footer(data[:-1] + b"2", location=LOC)


def test_bad_magic_at_start_of_footer() -> None:
    payload = b'{"blobs":[]}'
    data = MAGIC + b"PFA2" + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
    with pytest.raises(CorruptFileError, match="bad magic at start of footer"):
        read_footer(data, location=LOC)


@pytest.mark.parametrize("size", [10_000, -5, 2**31 - 1])
def test_bad_footer_length(size: int) -> None:
    data, _ = sample_file()
    bad = data[:-12] + struct.pack("<i", size) + data[-8:]
    with pytest.raises(CorruptFileError, match=f"{LOC}: bad footer payload size"):
        read_footer(bad, location=LOC)


def test_footer_length_off_by_one_is_caught_by_footer_magic() -> None:
    data, _ = sample_file()
    (size,) = struct.unpack("<i", data[-12:-8])
    bad = data[:-12] + struct.pack("<i", size + 1) + data[-8:]
    with pytest.raises(CorruptFileError, match="bad magic at start of footer"):
        read_footer(bad, location=LOC)


@pytest.mark.parametrize("keep", [0, 3, 11])
def test_truncated_file(keep: int) -> None:
    data, _ = sample_file()
    with pytest.raises(CorruptFileError, match=f"{LOC}: truncated Puffin file"):
        read_footer(data[:keep], location=LOC)


def test_file_cut_short_at_the_end() -> None:
    data, _ = sample_file()
    with pytest.raises(CorruptFileError, match="bad magic at end"):
        read_footer(data[:-3], location=LOC)


def test_truncated_blob_range() -> None:
    data, _ = sample_file(codec="zstd")
    blob = read_footer(data).blobs[1]
    with pytest.raises(CorruptFileError, match=f"{LOC}: truncated Puffin file: blob"):
        read_blob(data[: blob.offset + 1], blob, location=LOC)
    with pytest.raises(CorruptFileError, match="truncated blob"):
        decompress_blob(data[blob.offset : blob.offset + blob.length - 1], blob, location=LOC)


def test_blob_range_outside_blob_area() -> None:
    payload = (
        b'{"blobs":[{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":9}]}'
    )
    with pytest.raises(CorruptFileError, match="outside the blob area"):
        read_footer(hand_built(b"abc", payload), location=LOC)


def test_bit_flipped_footer_json() -> None:
    data, _ = sample_file()
    start = data.index(b'{"blobs"')
    flipped = bytearray(data)
    flipped[start] ^= 0x01  # '{' -> 'z'
    with pytest.raises(CorruptFileError, match=f"{LOC}: footer payload is not valid UTF-8 JSON"):
        read_footer(bytes(flipped), location=LOC)


def test_bit_flipped_footer_key() -> None:
    data, _ = sample_file()
    at = data.index(b'"offset"') + 2
    flipped = bytearray(data)
    flipped[at] ^= 0x02  # "offset" -> "odfset"
    with pytest.raises(CorruptFileError, match="footer blob 0: missing required field 'offset'"):
        read_footer(bytes(flipped), location=LOC)


def test_bit_flipped_compressed_footer() -> None:
    data, _ = sample_file(compress_footer=True)
    size = footer_size_from_tail(data)
    flipped = bytearray(data)
    flipped[len(data) - size + 4] ^= 0x10  # inside the LZ4 frame magic
    with pytest.raises(CorruptFileError, match="footer payload: invalid LZ4 frame"):
        read_footer(bytes(flipped), location=LOC)


@pytest.mark.parametrize(
    ("blob", "problem"),
    [
        ('{"type":1,"fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":0}', "'type'"),
        (
            '{"type":"t","fields":[true],"snapshot-id":1,"sequence-number":1,"offset":4,"length":0}',
            "'fields'",
        ),
        (
            '{"type":"t","fields":[],"snapshot-id":"1","sequence-number":1,"offset":4,"length":0}',
            "snapshot-id",
        ),
        ('{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":-1}', "negative"),
        ('{"type":"t","fields":[],"snapshot-id":1,"offset":4,"length":0}', "sequence-number"),
        (
            '{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,"offset":4,"length":0,'
            '"properties":{"a":1}}',
            "properties",
        ),
    ],
)
def test_malformed_blob_metadata(blob: str, problem: str) -> None:
    data = hand_built(b"", f'{{"blobs":[{blob}]}}'.encode())
    with pytest.raises(CorruptFileError, match=problem):
        read_footer(data, location=LOC)


def test_unknown_compression_codec_in_footer() -> None:
    payload = (
        b'{"blobs":[{"type":"t","fields":[],"snapshot-id":1,"sequence-number":1,'
        b'"offset":4,"length":3,"compression-codec":"snappy"}]}'
    )
    with pytest.raises(CorruptFileError, match=f"{LOC}: footer blob 0: unknown compression codec 'snappy'"):
        read_footer(hand_built(b"abc", payload), location=LOC)


def test_writer_refuses_unknown_codec() -> None:
    with pytest.raises(UnsupportedError, match="gzip"):
        PuffinWriter().add_blob(
            "t", b"x", fields=[], snapshot_id=1, sequence_number=1, compression_codec="gzip"
        )


@pytest.mark.parametrize(
    "flags", [b"\x02\x00\x00\x00", b"\x80\x00\x00\x00", b"\x00\x01\x00\x00", b"\x00\x00\x00\x80"]
)
def test_unknown_flag(flags: bytes) -> None:
    data = hand_built(b"", b'{"blobs":[]}', flags=flags)
    with pytest.raises(UnsupportedError, match=f"{LOC}: unsupported Puffin footer flags {flags.hex()}"):
        read_footer(data, location=LOC)


def test_zstd_blob_without_content_size_is_rejected() -> None:
    raw = zstandard.ZstdCompressor(write_content_size=False).compress(b"abc" * 10)
    blob = BlobMetadata("t", (), 1, 1, 4, len(raw), "zstd")
    with pytest.raises(CorruptFileError, match="content size"):
        decompress_blob(raw, blob, location=LOC)


def test_compressed_blob_with_trailing_garbage_is_rejected() -> None:
    for codec, raw, problem in [
        ("zstd", zstandard.ZstdCompressor().compress(b"abc") + b"junk", "invalid Zstandard frame"),
        ("lz4", lz4.frame.compress(b"abc") + b"junk", "not exactly one complete LZ4 frame"),
    ]:
        blob = BlobMetadata("t", (), 1, 1, 4, len(raw), codec)
        with pytest.raises(CorruptFileError, match=problem):
            decompress_blob(raw, blob, location=LOC)


def test_decompression_size_is_capped() -> None:
    raw = zstandard.ZstdCompressor().compress(bytes(10_000))
    blob = BlobMetadata("t", (), 1, 1, 4, len(raw), "zstd")
    with pytest.raises(CorruptFileError, match="limit"):
        decompress_blob(raw, blob, max_size=1000)


# --------------------------------------------------------------------------- fuzz


def _read_everything(data: bytes) -> None:
    footer = read_footer(data, location=LOC)
    for blob in footer.blobs:
        content = read_blob(data, blob, location=LOC)
        if blob.type == THETA_SKETCH_BLOB_TYPE:
            theta_sketch_estimate(content, location=LOC)


def _sketch_file(compress_footer: bool, codec: str | None) -> bytes:
    writer = PuffinWriter(compress_footer=compress_footer)
    writer.add_theta_sketch(range(50), field_id=1, snapshot_id=1, sequence_number=1, compression_codec=codec)
    writer.add_blob(
        "raw", b"0123456789", fields=[2], snapshot_id=1, sequence_number=1, compression_codec=codec
    )
    return writer.finish()


_VALID_FILES = [_sketch_file(f, c) for f in (False, True) for c in (None, "lz4", "zstd")]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes_raise_only_iceberg_errors(data: bytes) -> None:
    for candidate in (data, MAGIC + data + MAGIC, MAGIC + data):
        try:
            _read_everything(candidate)
        except Exception as e:  # only an IcebergError may escape
            assert isinstance(e, IcebergError), repr(e)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(_VALID_FILES),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=4),
    st.integers(min_value=0),
    st.booleans(),
)
def test_fuzz_mutated_files_raise_only_iceberg_errors(
    base: bytes, edits: list[tuple[int, int]], cut: int, truncate: bool
) -> None:
    data = bytearray(base)
    for pos, value in edits:
        data[pos % len(data)] = value
    mutated = bytes(data[: cut % (len(data) + 1)] if truncate else data)
    try:
        _read_everything(mutated)
    except Exception as e:  # only an IcebergError may escape
        assert isinstance(e, IcebergError), repr(e)


# --------------------------------------------------------------------------- theta sketches


def test_theta_sketch_ndv_within_error_for_10k_distinct_values() -> None:
    values = [f"value-{i}" for i in range(10_000)] * 2
    sketch = build_theta_sketch(values)
    compact = datasketches.compact_theta_sketch.deserialize(sketch)
    assert compact.is_estimation_mode()
    estimate = theta_sketch_estimate(sketch)
    # Three standard deviations, as the sketch itself bounds it, and the textbook 3/sqrt(k).
    assert compact.get_lower_bound(3) <= 10_000 <= compact.get_upper_bound(3)
    assert abs(estimate - 10_000) / 10_000 < 3 / 4096**0.5


def test_theta_sketch_matches_datasketches_for_longs_and_strings() -> None:
    # datasketches hashes a Python int as 8 little-endian bytes and a str as its UTF-8
    # bytes: the same bytes Iceberg serializes a long and a string to.
    for n in (0, 1, 2, 100, 4096, 4097, 10_000, 30_000):
        ints = list(range(-n // 2, n - n // 2))
        strings = [f"s{i}é" for i in range(n)]
        for values in (ints, strings):
            reference = datasketches.update_theta_sketch()
            for v in values:
                reference.update(v)
            reference.trim()
            assert build_theta_sketch(values) == reference.compact().serialize(), n


def test_theta_sketch_is_independent_of_input_order() -> None:
    values = list(range(20_000))
    shuffled = values[:]
    random.Random(7).shuffle(shuffled)
    assert build_theta_sketch(values) == build_theta_sketch(shuffled)


def test_theta_sketch_hashes_the_iceberg_single_value_bytes() -> None:
    # An Iceberg int is 4 bytes: it must not hash like a long.
    as_int = build_theta_sketch([1, 2, 3], value_type=IntegerType())
    assert as_int == build_theta_sketch([struct.pack("<i", v) for v in (1, 2, 3)])
    assert as_int != build_theta_sketch([1, 2, 3], value_type=LongType())
    hashes = sorted(mmh3.hash64(struct.pack("<i", v), seed=9001, signed=False)[0] >> 1 for v in (1, 2, 3))
    assert list(struct.unpack("<3Q", as_int[16:])) == hashes


@pytest.mark.parametrize(
    ("value", "value_type", "expected"),
    [
        (1, IntegerType(), b"\x01\x00\x00\x00"),
        (1, LongType(), b"\x01" + bytes(7)),
        (1, None, b"\x01" + bytes(7)),
        (1.0, FloatType(), struct.pack("<f", 1.0)),
        (1.0, DoubleType(), struct.pack("<d", 1.0)),
        (1.0, None, struct.pack("<d", 1.0)),
        ("é", StringType(), b"\xc3\xa9"),
        (True, None, b"\x01"),
        (b"\xff\x00", None, b"\xff\x00"),
        (uuid.UUID(int=1), None, bytes(15) + b"\x01"),
        (Decimal("-1.28"), DecimalType(5, 2), b"\x80"),
        (Decimal("1.28"), DecimalType(5, 2), b"\x00\x80"),
    ],
)
def test_sketch_input_serialization(value: object, value_type: object, expected: bytes) -> None:
    assert sketch_input_bytes(value, value_type) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "value_type"),
    [
        (2**31, IntegerType()),
        ("x", LongType()),
        (object(), None),
        (1.5, IntegerType()),
        (2**63, None),
        ("\ud800", None),
    ],
)
def test_sketch_input_rejects_values_the_type_cannot_hold(value: object, value_type: object) -> None:
    with pytest.raises(ValidationError):
        sketch_input_bytes(value, value_type)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_theta_blob_round_trip_with_ndv_property(codec: str | None) -> None:
    writer = PuffinWriter()
    meta = writer.add_theta_sketch(
        [*range(100), None, 5], field_id=4, snapshot_id=11, sequence_number=3, compression_codec=codec
    )
    data = writer.finish()

    blob = read_footer(data, location=LOC).blobs[0]
    assert blob == meta
    assert blob.type == "apache-datasketches-theta-v1" and blob.fields == (4,)
    assert blob.properties == {NDV_PROPERTY: "100"}  # exact below 4096 distinct values
    assert theta_sketch_estimate(read_blob(data, blob)) == 100.0


def test_ndv_property_truncates_the_estimate() -> None:
    writer = PuffinWriter()
    meta = writer.add_theta_sketch(range(10_000), field_id=1, snapshot_id=1, sequence_number=1)
    estimate = theta_sketch_estimate(read_blob(writer.finish(), meta))
    assert meta.properties[NDV_PROPERTY] == str(int(estimate))


def test_corrupt_theta_sketch_blob() -> None:
    with pytest.raises(CorruptFileError, match=f"{LOC}: invalid apache-datasketches-theta-v1 blob"):
        theta_sketch_estimate(b"\x03\x03\x03\x00", location=LOC)
