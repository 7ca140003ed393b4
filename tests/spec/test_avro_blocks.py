"""Re-blocked manifests hold the same records as the originals, and damage gives None.

Manifests come from our writer (v1-v3, deflate and null, fastavro's 16 KB blocks) and from
PyIceberg 0.12 (a SqlCatalog table on a local warehouse: appends, a delete and an
overwrite; one entry per block). Each is decoded before and after re-blocking by the
fastavro reader (entries and metadata) and by ``polars.read_avro`` (the Arrow table).
"""

from __future__ import annotations

import dataclasses
import io
import random
import warnings
import zlib
from pathlib import Path
from typing import Any, Literal

import fastavro
import pyarrow as pa
import pytest

from aioiceberg.spec.manifest import (
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    read_manifest_list,
    write_manifest,
)
from aioiceberg.spec.manifest.avro_blocks import read_long as _read_long
from aioiceberg.spec.manifest.avro_blocks import reblock
from aioiceberg.spec.manifest.columnar import avro_layout
from aioiceberg.testing.synthetic import bench_schema, bench_spec, data_file

pl = pytest.importorskip("polars")


def _ours(format_version: int, codec: Literal["deflate", "null"], n: int = 300) -> tuple[bytes, ManifestFile]:
    schema = bench_schema()
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED if i % 3 else ManifestEntryStatus.EXISTING,
            None if i % 3 else 5,
            None if i % 3 or format_version == 1 else 4,
            None if i % 3 or format_version == 1 else 4,
            data_file(schema, "file:///wh/db/t", 3, i, n),
        )
        for i in range(n)
    ]
    path = f"mem://ours-v{format_version}-{codec}.avro"
    return write_manifest(entries, bench_spec(), schema, format_version, 9, codec=codec, manifest_path=path)


def _blocks(data: bytes) -> list[tuple[int, int]]:
    """Each block's (record count, stored byte size)."""
    layout = avro_layout(data)
    assert layout is not None
    out = []
    for start, _ in layout.blocks:
        count, pos = _read_long(data, start)
        out.append((count, _read_long(data, pos)[0]))
    return out


def _polars(data: bytes) -> pa.Table | str:
    try:
        table: pa.Table = pl.read_avro(io.BytesIO(data)).to_arrow()
    except Exception as exc:  # polars refuses some files (PyIceberg's v1): both must then fail
        return type(exc).__name__
    return table


def _assert_same_records(data: bytes, mf: ManifestFile | None) -> bytes:
    """``data`` re-blocked decodes as ``data`` does; returns the re-blocked bytes."""
    out = reblock(data)
    assert out is not None
    before, after = fastavro.reader(io.BytesIO(data)), fastavro.reader(io.BytesIO(out))
    assert after.codec == "null"
    assert after.writer_schema == before.writer_schema
    assert {k: v for k, v in after.metadata.items() if k != "avro.codec"} == {
        k: v for k, v in before.metadata.items() if k != "avro.codec"
    }
    assert list(after) == list(before)
    want, got = read_manifest(data, mf), read_manifest(out, mf)
    assert got.metadata == want.metadata
    assert got.entries == want.entries and len(got.entries) > 0
    if mf is not None:
        assert read_manifest(out, dataclasses.replace(mf, manifest_length=len(out))).entries == want.entries
    original, reblocked = _polars(data), _polars(out)
    if isinstance(original, str):
        assert reblocked == original
    else:
        assert isinstance(reblocked, pa.Table) and reblocked.equals(original)
    return out


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_our_manifests_reblock_to_the_same_records(
    format_version: int, codec: Literal["deflate", "null"]
) -> None:
    data, mf = _ours(format_version, codec)
    assert len(_blocks(data)) > 1  # fastavro's 16 KB blocks: several to join
    out = _assert_same_records(data, mf)
    assert len(_blocks(out)) == 1 and _blocks(out)[0][0] == 300


def test_a_size_cap_starts_new_blocks_at_block_boundaries() -> None:
    data, mf = _ours(2, "deflate")
    records = [zlib.decompress(b, -15) for b in _stored(data)]
    cap = 2 * max(len(r) for r in records)
    out = reblock(data, cap)
    assert out is not None
    got = _blocks(out)
    assert 1 < len(got) < len(records)
    assert all(size <= cap for _, size in got) and sum(c for c, _ in got) == 300
    assert read_manifest(out, mf).entries == read_manifest(data, mf).entries
    assert reblock(data, 1) is not None  # a cap below one block: one output block per input block
    assert len(_blocks(reblock(data, 1) or b"")) == len(records)


def _stored(data: bytes) -> list[bytes]:
    layout = avro_layout(data)
    assert layout is not None
    out = []
    for start, end in layout.blocks:
        _, pos = _read_long(data, start)
        _, pos = _read_long(data, pos)
        out.append(data[pos:end])
    return out


def test_an_uncompressed_single_block_comes_back_as_is_and_an_empty_manifest_reblocks() -> None:
    data, _ = _ours(2, "null", n=3)
    assert len(_blocks(data)) == 1
    assert reblock(data) is data
    empty, mf = write_manifest([], bench_spec(), bench_schema(), 2, 9, manifest_path="mem://e.avro")
    out = reblock(empty)
    assert out is not None and _blocks(out) == []
    assert read_manifest(out, mf).entries == read_manifest(empty, mf).entries == []


# -- PyIceberg 0.12 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pyiceberg_manifests(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, bytes, ManifestFile]]:
    """Every manifest of a partitioned v1 and v2 PyIceberg table: (format version, bytes, list row)."""
    pytest.importorskip("pyiceberg_core", reason="PyIceberg needs pyiceberg-core for bucket/day")
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import BucketTransform, IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    wh = tmp_path_factory.mktemp("reblock_wh")
    catalog = SqlCatalog("t", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(2, 1000, IdentityTransform(), "region"),
        PartitionField(1, 1001, BucketTransform(8), "b"),
    )
    found = []
    for version in (1, 2):
        table = catalog.create_table(
            f"db.t{version}", schema, partition_spec=spec, properties={"format-version": str(version)}
        )
        for seed in range(2):
            ids = list(range(seed * 100, seed * 100 + 100))
            regions = ["eu", "us", "ap"]
            table.append(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "region": pa.array([regions[i % 3] for i in ids], pa.string()),
                    }
                )
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table.delete("id < 10")
        snapshot = table.current_snapshot()
        assert snapshot is not None
        listed = Path(snapshot.manifest_list.removeprefix("file://")).read_bytes()
        for mf in read_manifest_list(listed):
            found.append((version, Path(mf.manifest_path.removeprefix("file://")).read_bytes(), mf))
    catalog.close()
    return found


def test_pyiceberg_manifests_reblock_to_the_same_records(
    pyiceberg_manifests: list[tuple[int, bytes, ManifestFile]],
) -> None:
    many = 0
    for version, data, mf in pyiceberg_manifests:
        blocks = _blocks(data)
        assert all(count == 1 for count, _ in blocks)  # PyIceberg: one entry per block
        many += len(blocks) > 1
        out = _assert_same_records(data, mf)
        assert _blocks(out)[0][0] == len(blocks) and len(_blocks(out)) == 1, version
    assert many >= 4


# -- what it refuses ---------------------------------------------------------------------------


def _with_codec(data: bytes, codec: bytes) -> bytes:
    """``data`` (written with codec null) relabelled: its map's entries are plainly counted."""
    old = b"\x14avro.codec\x08null"
    assert data.count(old) == 1
    return data.replace(old, b"\x14avro.codec" + bytes([len(codec) * 2]) + codec)


def test_codecs_it_does_not_handle_give_none() -> None:
    data, _ = _ours(2, "null")
    for codec in (b"snappy", b"zstandard", b"bzip2", b"xz", b"nonsense"):
        assert reblock(_with_codec(data, codec)) is None


def _block_starts(data: bytes) -> list[int]:
    layout = avro_layout(data)
    assert layout is not None
    return [start for start, _ in layout.blocks]


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_damaged_containers_give_none(codec: Literal["deflate", "null"]) -> None:
    data, _ = _ours(2, codec)
    starts = _block_starts(data)
    boundaries = {s for s in starts} | {len(data)}
    for cut in range(0, len(data), 211):  # cut anywhere but at a block's edge: not a container
        if cut not in boundaries:
            assert reblock(data[:cut]) is None, cut
    for cut in sorted(boundaries)[1:]:  # cut at a block's edge: a container of fewer blocks
        out = reblock(data[:cut])
        assert out is not None
        assert list(fastavro.reader(io.BytesIO(out))) == list(fastavro.reader(io.BytesIO(data[:cut])))
    layout = avro_layout(data)
    assert layout is not None
    sync_at = layout.blocks[1][1]  # the second block's marker
    wrong = bytearray(data)
    wrong[sync_at + 3] ^= 0xFF
    assert reblock(bytes(wrong)) is None
    negative = bytearray(data)
    assert negative[starts[1]] & 0x01 == 0  # a positive count's zig-zag varint
    negative[starts[1]] |= 0x01  # the same varint negated
    assert reblock(bytes(negative)) is None
    assert reblock(data + b"\x00") is None  # a block cut off after its count
    assert reblock(data + data[starts[0] :][:5]) is None
    assert reblock(b"") is None and reblock(b"Obj\x01") is None and reblock(b"not avro at all") is None


def test_a_block_that_does_not_inflate_gives_none() -> None:
    data, _ = _ours(2, "deflate")
    layout = avro_layout(data)
    assert layout is not None
    start, end = layout.blocks[0]
    count, pos = _read_long(data, start)
    _, pos = _read_long(data, pos)
    stored = data[pos:end]
    short = stored[: len(stored) // 2]  # a stream cut off, its block's size and marker consistent
    assert reblock(data[:start] + _zz(count) + _zz(len(short)) + short + data[end:]) is None
    garbage = bytes(b ^ 0x5A for b in stored)
    assert reblock(data[:pos] + garbage + data[end:]) is None


def _zz(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_a_header_map_in_sized_blocks_is_read_and_rewritten() -> None:
    """Avro lets a map block carry a negative count and its byte size; fastavro reads that."""
    data, mf = _ours(2, "deflate")
    layout = avro_layout(data)
    assert layout is not None
    header = layout.header
    count, pos = _read_long(header, 4)
    body = header[pos:-1]  # the entries, without the closing zero
    sized = b"Obj\x01" + _zz(-count) + _zz(len(body)) + body + b"\x00"
    rewritten = sized + data[len(header) :]
    assert list(fastavro.reader(io.BytesIO(rewritten))) == list(fastavro.reader(io.BytesIO(data)))
    out = reblock(rewritten)
    assert out is not None
    assert read_manifest(out, mf).entries == read_manifest(data, mf).entries


def test_random_damage_never_raises() -> None:
    rng = random.Random(7)
    sources = [_ours(2, "deflate", n=120)[0], _ours(2, "null", n=120)[0]]
    for _ in range(300):
        data = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        out: Any = reblock(bytes(data[: rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data))
        assert out is None or isinstance(out, bytes)
