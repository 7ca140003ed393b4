"""Several manifests decoded by the compiled decoder in one call (``decode_native_joined``).

The joined table must equal the manifests decoded one by one and concatenated, for our
writer's blocks, Java's 64 KB deflate blocks and PyIceberg's one-entry blocks (each container
with its own sync marker), with the deflate and null codecs and empty manifests anywhere in
the list. Headers whose metadata differ are declined; a damaged manifest raises
``CorruptFileError`` naming it, wherever it sits. The batch lane built on it groups manifests
by their header bytes without walking a block in Python, and gives what decoding them one by
one gives.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal

import fastavro
import fastavro.write
import pyarrow as pa
import pytest
from manifest_samples import same_entries
from pyiceberg_manifests import load_or_write_tables, local_path

from aioiceberg.errors import CorruptFileError
from aioiceberg.expressions import bind, parse, rewrite_not
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.io import LocalFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.scan import decode as scan_decode
from aioiceberg.scan.decode import PruneContext, decode_and_prune, decode_and_prune_batch
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.spec.manifest import (
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    native_decode,
    read_manifest_list,
    write_manifest,
)
from aioiceberg.spec.manifest.avro_blocks import header_length
from aioiceberg.spec.manifest.columnar import ColumnarRows, avro_layout, open_columnar, open_columnar_batch
from aioiceberg.spec.manifest.native_decode import decode_native, decode_native_joined, native_available
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import bench_schema, bench_spec, build_table, data_file, filters

pytestmark = pytest.mark.skipif(not native_available(), reason="built without a Rust toolchain (no cargo)")

Codec = Literal["deflate", "null"]
Item = tuple[bytes, ManifestFile]
SIZES = (3, 40, 0, 120, 1, 75)  # entries per manifest: an empty one in the middle
LANE_MANIFESTS = 40


def _ours(codec: Codec, sizes: tuple[int, ...] = SIZES) -> list[Item]:
    """Manifests of the synthetic table as our writer writes them (one header for all)."""
    schema, spec = bench_schema(), bench_spec()
    out: list[Item] = []
    for m, n in enumerate(sizes):
        entries = [
            ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, data_file(schema, "s3://b/t", m, i, n))
            for i in range(n)
        ]
        path = f"s3://b/t/metadata/m{m}.avro"
        data, mf = write_manifest(entries, spec, schema, 2, 40 + m, codec=codec, manifest_path=path)
        out.append((data, dataclasses.replace(mf, sequence_number=3 + m, min_sequence_number=3 + m)))
    return out


def _relaid(data: bytes, codec: Codec, per_block: int | None) -> bytes:
    """``data``'s records and metadata re-written by fastavro (a sync marker of its own) in
    Java's 64 KB blocks (None) or ``per_block`` records a block (1: PyIceberg's layout)."""
    reader = fastavro.reader(io.BytesIO(data))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    out = io.BytesIO()
    interval = 64_000 if per_block is None else 1 << 30
    writer = fastavro.write.Writer(out, schema, codec, interval, metadata, validator=False)
    for i, record in enumerate(reader, 1):
        writer.write(record)
        if per_block is not None and i % per_block == 0:
            writer.flush()
    writer.flush()
    return out.getvalue()


def _layout(items: list[Item], codec: Codec, layout: str) -> list[Item]:
    if layout == "ours":
        return items
    per_block = None if layout == "java" else 1
    out = []
    for data, mf in items:
        relaid = _relaid(data, codec, per_block)
        out.append((relaid, dataclasses.replace(mf, manifest_length=len(relaid))))
    return out


def _joined_raw(datas: list[bytes]) -> object:
    """The extension's own answer (the module is absent where the tests are skipped)."""
    decoder = native_decode._manifest_native
    assert decoder is not None
    return decoder.decode_arrow_joined(datas)


def _one_by_one(datas: list[bytes]) -> tuple[pa.Table, list[int]]:
    tables = []
    for data in datas:
        table = decode_native(data)
        assert table is not None
        tables.append(table)
    return pa.concat_tables(tables), [t.num_rows for t in tables]


def _ctx(text: str, native: bool = True) -> PruneContext:
    expr: Expression = rewrite_not(bind(bench_schema(), parse(text))) if text else AlwaysTrue()
    return PruneContext.build(bench_schema(), {0: bench_spec()}, expr, True, None, native_decoder=native)


# -- the joined table ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["deflate", "null"])
@pytest.mark.parametrize("layout", ["ours", "java", "pyiceberg"])
def test_joined_equals_one_by_one_concatenated(codec: Codec, layout: str) -> None:
    items = _layout(_ours(codec), codec, layout)
    datas = [data for data, _ in items]
    if layout != "ours":  # each container has its own sync marker
        assert len({data[header_length(data) or 0 :][:16] for data in datas}) == len(datas)
    if layout == "pyiceberg":
        blocks = avro_layout(datas[1])
        assert blocks is not None and len(blocks.blocks) == SIZES[1]
    found = decode_native_joined(datas)
    assert found is not None
    table, counts = found
    want, want_counts = _one_by_one(datas)
    assert counts == want_counts == list(SIZES)
    assert table.schema.equals(want.schema)
    assert table.equals(want)


def test_pyiceberg_written_manifests_join(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Manifests PyIceberg itself wrote (one entry a block, zlib's checksum after each deflate
    stream), grouped by header as the batch lane groups them."""
    joined = 0
    for table in load_or_write_tables(tmp_path_factory):
        if table.format_version != 2:
            continue
        groups: dict[bytes, list[bytes]] = {}
        for snapshot in table.snapshots():
            for mf in read_manifest_list(local_path(snapshot.manifest_list).read_bytes()):
                data = local_path(mf.manifest_path).read_bytes()
                end = header_length(data)
                assert end is not None
                groups.setdefault(data[:end], []).append(data)
        for datas in groups.values():
            if len(datas) < 2:
                continue
            found = decode_native_joined(datas)
            assert found is not None
            want, counts = _one_by_one(datas)
            assert found[1] == counts
            assert found[0].equals(want)
            joined += 1
    assert joined > 0


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_empty_manifests_anywhere(codec: Codec) -> None:
    items = _ours(codec, (0, 5, 0, 0, 7, 0))
    datas = [data for data, _ in items]
    found = decode_native_joined(datas)
    assert found is not None
    want, counts = _one_by_one(datas)
    assert found[1] == counts == [0, 5, 0, 0, 7, 0]
    assert found[0].equals(want)
    empty = [data for data, _ in _ours(codec, (0, 0))]
    found = decode_native_joined(empty)
    assert found is not None
    alone = decode_native(empty[0])
    assert alone is not None
    assert found[1] == [0, 0]
    assert found[0].num_rows == 0 and found[0].schema.equals(alone.schema)
    one = decode_native_joined(datas[1:2])  # a list of one: that manifest alone
    assert one is not None and one[0].equals(decode_native(datas[1])) and one[1] == [5]
    assert decode_native_joined([]) is None


def test_headers_that_differ_are_declined() -> None:
    deflated = [data for data, _ in _ours("deflate", (4, 5))]
    plain = [data for data, _ in _ours("null", (4, 5))]
    assert isinstance(_joined_raw([deflated[0], plain[1]]), str)  # codec
    assert decode_native_joined([deflated[0], deflated[1], plain[0]]) is None
    reader = fastavro.reader(io.BytesIO(deflated[1]))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    fastavro.writer(out, schema, list(reader), "deflate", metadata=metadata | {"extra": "x"})
    assert decode_native_joined([deflated[0], out.getvalue()]) is None  # one more key
    # the batch refuses such a pair; each decodes alone
    items = _ours("deflate", (4, 5))
    other = (plain[1], dataclasses.replace(items[1][1], manifest_length=len(plain[1])))
    assert open_columnar_batch([items[0], other]) is None
    assert open_columnar_batch(items) is not None


# -- damage --------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["deflate", "null"])
@pytest.mark.parametrize("layout", ["ours", "pyiceberg"])
def test_a_damaged_manifest_in_the_middle_is_named(codec: Codec, layout: str) -> None:
    items = _layout(_ours(codec), codec, layout)
    datas = [data for data, _ in items]
    locations = [mf.manifest_path for _, mf in items]
    at = 3
    data = datas[at]
    end = header_length(data)
    assert end is not None
    sync = data[end : end + 16]
    damaged = {
        "cut short": data[:-7],
        "a foreign sync marker": data[: end + 16] + data[end + 16 :].replace(sync, bytes(16)),
        "bytes after the last block": data + b"\x02\x02",
        "a bad magic": b"Obj\x02" + data[4:],
        "a header cut short": data[: end + 5],
        "a record cut short": data[: len(data) - 16 - 3] + data[len(data) - 16 :],
    }
    for what, broken in damaged.items():
        datas_broken = [*datas[:at], broken, *datas[at + 1 :]]
        with pytest.raises(ValueError, match=rf"^container {at}: ") as raw:
            _joined_raw(datas_broken)
        assert getattr(raw.value, "container", None) == at, what
        with pytest.raises(CorruptFileError, match="container 3") as typed:
            decode_native_joined(datas_broken, locations)
        assert typed.value.location == locations[at], what
        with pytest.raises(CorruptFileError):
            decode_native(broken)  # as it is alone
        # the batch lane leaves such a batch to the manifests decoded one by one
        broken_items = [*items[:at], (broken, dataclasses.replace(items[at][1], manifest_length=len(broken)))]
        assert open_columnar_batch(broken_items) is None, what


def test_a_damaged_first_manifest_is_named() -> None:
    datas = [data for data, _ in _ours("deflate", (3, 4))]
    with pytest.raises(ValueError, match=r"^container 0: ") as raw:
        _joined_raw([datas[0][:-3], datas[1]])
    assert getattr(raw.value, "container", None) == 0
    with pytest.raises(CorruptFileError, match="container 0"):
        decode_native_joined([b"not avro", datas[1]], ["s3://b/x.avro", None])


# -- the batch lane on it ------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["ours", "java", "pyiceberg"])
def test_a_batch_decodes_as_polars_and_one_by_one(layout: str) -> None:
    items = _layout(_ours("deflate"), "deflate", layout)
    native = open_columnar_batch(items, discard_deleted=True)
    polars = open_columnar_batch(items, discard_deleted=True, native=False)
    assert native is not None and polars is not None
    assert native.owner is not None and polars.owner is not None
    assert native.owner.tolist() == polars.owner.tolist()
    assert same_entries(native.entries(native.rows), polars.entries(polars.rows))
    alone = []
    for data, mf in items:
        cm = open_columnar(data, mf, discard_deleted=True)
        assert cm is not None
        alone += cm.entries(cm.rows)
    assert same_entries(native.entries(native.rows), alone)


@pytest.mark.parametrize("layout", ["ours", "pyiceberg"])
@pytest.mark.parametrize("text", ["", "id < 60000", "ts >= '2022-01-09T00:00:00+00:00'", "false"])
def test_the_batch_lane_gives_what_one_by_one_gives(
    layout: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the compiled decoder the lane groups by header bytes and never walks the blocks in
    Python (``avro_layout``); polars (``native_decoder=False``) still gets them located."""
    items = _layout(_ours("deflate"), "deflate", layout)
    want = [decode_and_prune(data, mf, _ctx(text), False) for data, mf in items]
    polars = decode_and_prune_batch(items, _ctx(text, native=False))

    def no_walk(data: bytes) -> Any:
        raise AssertionError("the compiled decoder's batch walked the blocks in Python")

    monkeypatch.setattr(scan_decode, "avro_layout", no_walk)
    batches: list[int] = []
    real = scan_decode._decode_group

    def counted(batch: list[Item], *args: Any) -> Any:
        found = real(batch, *args)
        batches.append(len(batch) if found is not None else 0)
        return found

    monkeypatch.setattr(scan_decode, "_decode_group", counted)
    native = decode_and_prune_batch(items, _ctx(text))
    assert batches == [len(items)]  # one batch of all (none was decoded alone)
    for got in (native, polars):
        assert len(got) == len(want)
        for g, w, (_, mf) in zip(got, want, items, strict=True):
            assert g.columnar, mf.manifest_path
            assert same_entries(g.entries, w.entries), mf.manifest_path
            assert (g.entries_read, g.skipped_by_partition, g.skipped_by_metrics) == (
                w.entries_read,
                w.skipped_by_partition,
                w.skipped_by_metrics,
            ), mf.manifest_path


@pytest.mark.anyio
@pytest.mark.parametrize("native", [True, False])
async def test_one_entry_blocks_join_the_batch_lane_with_the_compiled_decoder(
    tmp_path: Path, native: bool
) -> None:
    """Mid-sized manifests in PyIceberg's layout: with the compiled decoder they are decoded
    with those waiting (views of a shared call); with polars they stay alone (joining them
    walks every block in Python). Either way the plan keeps what fastavro keeps."""
    io_ = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    one_entry = functools.partial(_relaid_for_table, codec="deflate", per_block=1)
    meta = await build_table(io_, f"file://{tmp_path}/t", LANE_MANIFESTS, 200, relayout=one_entry)
    md = parse_table_metadata(await io_.read(meta), meta)
    default_runtime().warm_columnar()
    joined_views = 0
    for text in [*filters(LANE_MANIFESTS, 200).values(), "id > 500 AND c0 < 30"]:
        scan = TableScan(
            io_,
            md,
            text,
            cache=ManifestCache(),
            manifest_list_cache=ManifestListCache(),
            io_concurrency=8,
            decode_workers=1,
            native_decoder=native,
        )
        got: list[str] = []
        async with aclosing(scan.plan_files().batches()) as batches:
            async for seq in batches:
                entries = seq.entries if isinstance(seq, LazyTasks) else None
                if isinstance(entries, ColumnarRows) and entries.shared is not None:
                    joined_views += 1  # a view of a call that decoded several manifests
                got.extend(t.file.file_path for t in seq)
        reference = TableScan(
            io_, md, text, cache=ManifestCache(), manifest_list_cache=ManifestListCache(), columnar=False
        )
        expected = [t.file.file_path async for t in reference.plan_files()]
        assert sorted(got) == sorted(expected), text
    assert (joined_views > 0) is native


def _relaid_for_table(data: bytes, mf: ManifestFile, *, codec: Codec, per_block: int | None) -> bytes:
    return _relaid(data, codec, per_block)


def test_header_length_finds_the_sync_marker() -> None:
    data = _ours("null", (2,))[0][0]
    end = header_length(data)
    layout = avro_layout(data)
    assert layout is not None and end == len(layout.header)
    assert data[end : end + 16] == layout.sync
    assert header_length(b"not avro") is None
    assert header_length(data[: end + 15]) is None  # the marker cut short
    assert header_length(data[:20]) is None
