"""The columnar manifest path (polars -> Arrow) against the fastavro reader, entry for entry.

Both decoders run over the same manifests: PyIceberg-written v1 and v2 (partitioned and
not, with DELETED entries from copy-on-write deletes and overwrites), ours v1-v3 (data and
delete manifests, many partition types, v3 row ids), and damaged files. Where the
columnar path declines (v1, some partition types, damage) the fastavro reader decides,
so corrupt input still raises ``CorruptFileError``. Pruning on columns must keep exactly
the entries the per-entry evaluators keep, including for awkward stats.
"""

from __future__ import annotations

import dataclasses
import gc
import random
from pathlib import Path
from typing import Any, Literal

import pytest
from manifest_samples import (
    LOCATION,
    PARTITIONS,
    PRUNE_SCHEMA,
    PRUNE_SPEC,
    SCHEMA,
    SPEC,
    awkward_files,
    same_entries,
    sample_file,
    simple_file,
    small_manifests,
    write_sample,
)
from pyiceberg_manifests import load_or_write_tables, local_path

from aioiceberg.errors import CorruptFileError, InvalidMetadataError
from aioiceberg.expressions import InclusiveMetricsEvaluator, bind, parse, rewrite_not
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.scan.columnar_prune import certain
from aioiceberg.scan.decode import PruneContext, decode_and_prune
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.columnar import (
    open_columnar,
    read_manifest_entries_columnar,
)
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

pytest.importorskip("polars")

COLUMN_CHOICES: list[frozenset[int] | None] = [None, frozenset(), frozenset({1, 2})]


def _agree(data: bytes, manifest: ManifestFile | None = None) -> bool:
    """Both decoders give identical entries; True when the columnar path was used."""
    used = False
    for columns in COLUMN_CHOICES:
        for discard in (False, True):
            want = read_manifest(data, manifest, columns_needed=columns, discard_deleted=discard).entries
            got = read_manifest_entries_columnar(
                data, manifest, columns_needed=columns, discard_deleted=discard
            )
            if got is not None:
                used = True
                assert same_entries(got, want)
    return used


@pytest.fixture(scope="module")
def pyiceberg_tables(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    return load_or_write_tables(tmp_path_factory)


def test_pyiceberg_v1_and_v2_manifests_decode_identically(pyiceberg_tables: list[Any]) -> None:
    used = {1: 0, 2: 0}
    partitioned_v2 = unpartitioned_v2 = 0
    for table in pyiceberg_tables:
        for snapshot in table.snapshots():
            for mf in read_manifest_list(local_path(snapshot.manifest_list).read_bytes()):
                data = local_path(mf.manifest_path).read_bytes()
                columnar = _agree(data, mf)
                if columnar:
                    used[table.format_version] += 1
                    if table.spec().fields:
                        partitioned_v2 += 1
                    else:
                        unpartitioned_v2 += 1
                assert _agree(data) is columnar  # without the list row: nothing inherited
    assert used[1] == 0  # v1 manifests always take the fastavro path
    assert partitioned_v2 > 0 and unpartitioned_v2 > 0


# SPEC without its uuid and decimal fields, which the columnar path leaves to fastavro
COLUMNAR_FIELDS = (0, 1, 2, 3, 6)
COLUMNAR_SPEC = PartitionSpec(SPEC.spec_id, tuple(SPEC.fields[i] for i in COLUMNAR_FIELDS))


def _write_columnar(format_version: int, codec: Literal["deflate", "null"]) -> tuple[bytes, ManifestFile]:
    """``write_sample``'s entries under COLUMNAR_SPEC: a manifest both decoders read (from v2 on)."""
    entries = [
        ManifestEntry(
            e.status,
            e.snapshot_id,
            e.sequence_number if format_version > 1 else None,
            e.file_sequence_number if format_version > 1 else None,
            dataclasses.replace(
                e.data_file, partition=tuple(e.data_file.partition[i] for i in COLUMNAR_FIELDS)
            ),
        )
        for e in read_manifest(write_sample(2)[0]).entries
    ]
    path = f"mem://c-v{format_version}.avro"
    return write_manifest(entries, COLUMNAR_SPEC, SCHEMA, format_version, 99, codec=codec, manifest_path=path)


@pytest.mark.parametrize("format_version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_our_manifests_decode_identically(format_version: int, codec: Literal["deflate", "null"]) -> None:
    data, mf = _write_columnar(format_version, codec)
    listed = read_manifest_list(write_manifest_list([mf], format_version, 99, 98, 6, first_row_id=500))[0]
    columnar = format_version > 1  # v1 manifests always take the fastavro path
    assert _agree(data, listed) is columnar
    assert _agree(data) is columnar  # without the list row: nothing inherited
    # uuid and decimal partition values: fastavro decides, and the columnar path says so
    fallback, fallback_mf = write_sample(format_version, codec)
    assert read_manifest_entries_columnar(fallback, fallback_mf) is None


def test_delete_manifests_decode_identically(tmp_path: Path) -> None:
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            sample_file(0, PARTITIONS[0], DataFileContent.POSITION_DELETES),
        ),
        ManifestEntry(
            ManifestEntryStatus.EXISTING,
            5,
            3,
            3,
            sample_file(1, PARTITIONS[1], DataFileContent.EQUALITY_DELETES, equality_ids=(1, 2)),
        ),
    ]
    data, mf = write_manifest(
        entries, SPEC, SCHEMA, 2, 5, ManifestContent.DELETES, manifest_path=f"file://{tmp_path}/d.avro"
    )
    (listed,) = read_manifest_list(write_manifest_list([mf], 2, 5, 4, 9))
    assert not _agree(data, listed)  # SPEC's uuid and decimal fields: fastavro decides
    columnar = [
        dataclasses.replace(
            e, data_file=dataclasses.replace(e.data_file, partition=e.data_file.partition[:4])
        )
        for e in entries
    ]
    spec = PartitionSpec(SPEC.spec_id, SPEC.fields[:4])
    data, mf = write_manifest(
        columnar, spec, SCHEMA, 2, 5, ManifestContent.DELETES, manifest_path="mem://d.avro"
    )
    (listed,) = read_manifest_list(write_manifest_list([mf], 2, 5, 4, 9))
    assert _agree(data, listed)


def test_supported_partition_types_decode_columnar_and_others_fall_back() -> None:
    schema = Schema(
        NestedField(1, "b", BooleanType()),
        NestedField(2, "i", IntegerType()),
        NestedField(3, "l", LongType()),
        NestedField(4, "f", FloatType()),
        NestedField(5, "d", DoubleType()),
        NestedField(6, "s", StringType()),
        NestedField(7, "bin", BinaryType()),
        NestedField(8, "dt", DateType()),
        NestedField(9, "ts", TimestampType()),
        NestedField(10, "tz", TimestamptzType()),
        NestedField(11, "t", TimeType()),
    )

    def manifest(ids: range) -> bytes:
        spec = PartitionSpec(
            0,
            tuple(
                PartitionField((i,), 1000 + i, parse_transform("identity"), schema.find_field(i).name)
                for i in ids
            ),
        )
        rows = [
            (True, -5, 1 << 40, 2.5, -0.0, "é", b"\x00\xff", -3, -1, 1_700_000_000_123_456, 3_600_000_001),
            (None,) * 11,
            (False, 0, -1, float("nan"), 1e300, "", b"", 19000, 0, -7, 0),
        ]
        entries = [
            ManifestEntry(
                ManifestEntryStatus.ADDED, None, None, None, simple_file(k, tuple(r[i - 1] for i in ids))
            )
            for k, r in enumerate(rows)
        ]
        return write_manifest(entries, spec, schema, 2, 1, manifest_path="mem://p.avro")[0]

    assert _agree(manifest(range(1, 11)))  # everything but time decodes columnar
    assert not _agree(manifest(range(1, 12)))  # time-micros: the fastavro reader decides
    one = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, simple_file(0, ()))]
    assert _agree(write_manifest(one, UNPARTITIONED, schema, 2, 1, manifest_path="mem://u.avro")[0])
    empty = write_manifest([], UNPARTITIONED, schema, 2, 1, manifest_path="mem://e.avro")[0]
    assert read_manifest(empty).entries == []
    assert read_manifest_entries_columnar(empty) in (None, [])  # declined or empty alike


def _assert_fallback_decides(data: bytes) -> None:
    try:
        want = read_manifest(data, location=LOCATION).entries
    except InvalidMetadataError as e:  # CorruptFileError is one
        with pytest.raises(type(e)):
            _decode(data, AlwaysTrue())
        return
    got = read_manifest_entries_columnar(data, location=LOCATION)
    assert got is None or same_entries(got, want)


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_damaged_manifests_raise_corrupt_or_agree(codec: str) -> None:
    data, _ = write_sample(2, codec)
    header_end = data.index(b"manifest_entry") + 200
    rng = random.Random(11)
    for _ in range(150):
        pos = rng.randrange(header_end, len(data))
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        _assert_fallback_decides(bytes(flipped))
    for cut in (len(data) // 2, len(data) - 20, len(data) - 1):
        _assert_fallback_decides(data[:cut])
        with pytest.raises(CorruptFileError):
            _decode(data[:cut], AlwaysTrue())


# ---------------------------------------------------------------------------------------------
# Pruning on columns keeps exactly what the per-entry evaluators keep

PRUNE_FILTERS = [
    "",
    "id = 125",
    "id < 50",
    "id <= 49 OR id > 380",
    "id >= 200 AND id < 230",
    "id > 395",
    "ts >= 100000 AND n < 120",
    "n = 7",
    "s < 'a010'",
    "s LIKE 'b03%'",
    "x > 1.5",
    "id IN (5, 105, 305)",
    "id IS NULL",
    "id IS NOT NULL AND id != 3",
    "day = '2022-01-09'",
    "NOT (id < 100)",
    "false",
]


def _decode(data: bytes, expr: Expression, columnar: bool = True) -> list[ManifestEntry]:
    bound = rewrite_not(bind(PRUNE_SCHEMA, expr))
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, bound, True, None)
    mf = ManifestFile(LOCATION, len(data), 0, ManifestContent.DATA, 3, 3, 77)
    return decode_and_prune(data, mf, ctx, columnar).entries


@pytest.mark.parametrize("text", PRUNE_FILTERS)
def test_columnar_pruning_keeps_exactly_what_the_evaluators_keep(text: str) -> None:
    files = awkward_files()
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    entries.append(ManifestEntry(ManifestEntryStatus.DELETED, 70, 2, 2, simple_file(99, (0, 19000))))
    data, _ = write_manifest(entries, PRUNE_SPEC, PRUNE_SCHEMA, 2, 77, manifest_path=LOCATION)
    assert open_columnar(data) is not None
    expr = parse(text) if text else AlwaysTrue()
    want = _decode(data, expr, columnar=False)
    got = _decode(data, expr, columnar=True)
    assert got == want


@pytest.mark.parametrize("text", PRUNE_FILTERS)
def test_rows_certain_to_match_are_rows_the_evaluator_keeps(text: str) -> None:
    """``certain`` lets rows skip the evaluator: each one it marks, the evaluator keeps."""
    files = awkward_files()
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data, _ = write_manifest(entries, PRUNE_SPEC, PRUNE_SCHEMA, 2, 77, manifest_path=LOCATION)
    cm = open_columnar(data)
    assert cm is not None
    expr = parse(text) if text else AlwaysTrue()
    evaluator = InclusiveMetricsEvaluator(PRUNE_SCHEMA, rewrite_not(bind(PRUNE_SCHEMA, expr)))
    sure = certain(evaluator.expr, cm, cm.rows).tolist()
    decoded = cm.entries(cm.rows)
    assert [e.data_file for e in decoded] == files
    for entry, marked in zip(decoded, sure, strict=True):
        if marked:
            assert evaluator.eval(entry.data_file), entry.data_file.file_path
    if text in (
        "",
        "id >= 200 AND id < 230",
        "id <= 49 OR id > 380",
        "NOT (id < 100)",
        "s < 'a010'",
    ):
        assert any(sure)  # the fast path is taken where bounds and counts decide
    if text == "false":
        assert not any(sure)


def test_decoded_rows_hold_nothing_the_collector_tracks() -> None:
    """A decoded view is rows of plain values: once the collector has seen them, none is
    tracked (no dict or list inside, however the stats look), and reading them gives the
    entries fastavro gives."""
    files = [
        dataclasses.replace(
            f,
            split_offsets=(4, 40 + i) if i % 3 else None,
            nan_value_counts=None if i % 5 == 0 else f.nan_value_counts,
            column_sizes={} if i % 2 else None,
        )
        for i, f in enumerate(awkward_files())
    ]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data, _ = write_manifest(entries, PRUNE_SPEC, PRUNE_SCHEMA, 2, 77, manifest_path=LOCATION)
    for text in ("", "id < 250"):
        decoded = _decode(data, parse(text) if text else AlwaysTrue())
        assert isinstance(decoded, EntryRows) and len(decoded) > 20
        rows = decoded.rows  # built when first read
        gc.collect()  # a row can be looked at before the tuples inside it are: twice
        gc.collect()
        assert [i for i, row in enumerate(rows) if gc.is_tracked(row)] == []
        assert decoded == _decode(data, parse(text) if text else AlwaysTrue(), columnar=False)
    everything = _decode(data, AlwaysTrue())
    assert [e.data_file for e in everything] == files == list(everything.data_files())
    assert {(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in everything} == {(77, 3, 3)}
    assert everything[3:5] == list(everything)[3:5] and everything[-1] == list(everything)[-1]
    assert everything.select([i % 2 == 0 for i in range(len(files))]) == list(everything)[::2]


@pytest.mark.parametrize("columns", COLUMN_CHOICES)
def test_rows_asked_for_in_any_order_read_as_fastavro_gives_them(columns: frozenset[int] | None) -> None:
    """Metric maps are grouped by output row, not by file order: a subset of rows in a
    shuffled order reads each row's own stats."""
    files = [
        dataclasses.replace(f, nan_value_counts=None if i % 5 == 0 else f.nan_value_counts)
        for i, f in enumerate(awkward_files())
    ]
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
    data, _ = write_manifest(entries, PRUNE_SPEC, PRUNE_SCHEMA, 2, 77, manifest_path=LOCATION)
    want = read_manifest(data, columns_needed=columns).entries
    cm = open_columnar(data, columns_needed=columns)
    assert cm is not None
    order = [i for i in random.Random(7).sample(range(len(files)), len(files)) if i % 4][:30]
    assert cm.entries(order) == [want[i] for i in order]
    assert cm.entries(sorted(order)[:5]) == [want[i] for i in sorted(order)[:5]]


# ---------------------------------------------------------------------------------------------
# Building helpers: a faster constructor for frozen dataclasses, and pausing the collector


def test_frozen_builder_makes_ordinary_frozen_instances() -> None:
    import dataclasses
    import pickle

    build = frozen_builder(DataFile)
    assert build is not DataFile  # the fast path applies to DataFile
    args = (DataFileContent.DATA, "s3://b/f.parquet", FileFormat.PARQUET, (1, "x"), 10, 100)
    rest = ({}, {1: 2}, None, None, {1: b"a"}, {1: b"z"}, None, (4,), None, 0, None, None, None, None, 3)
    fast, slow = build(*args, *rest), DataFile(*args, *rest)
    assert type(fast) is DataFile and fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert pickle.loads(pickle.dumps(fast)) == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.record_count = 1  # type: ignore[misc]


def test_frozen_builder_keeps_post_init_unless_trusted() -> None:
    import dataclasses

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    assert frozen_builder(Checked) is Checked
    trusted = frozen_builder(Checked, trusted=True)
    assert trusted is not Checked and trusted(3) == Checked(3)

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        n: int

    assert frozen_builder(NoSlots) is NoSlots


def test_gc_paused_nests_and_respects_a_disabled_collector() -> None:
    import gc

    from aioiceberg.runtime import collector_paused as gc_paused

    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the outer pause is still on
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


# ---------------------------------------------------------------------------------------------
# Small manifests decoded together


@pytest.mark.parametrize("text", ["", "id = 125", "id < 50", "day = '2022-01-09'", "id IS NULL", "false"])
def test_small_manifests_decoded_together_match_one_by_one(text: str) -> None:
    from aioiceberg.scan.decode import decode_and_prune_batch
    from aioiceberg.spec.manifest.columnar import open_columnar_batch

    items = small_manifests()
    expr = parse(text) if text else AlwaysTrue()
    bound = rewrite_not(bind(PRUNE_SCHEMA, expr))
    specs = {
        0: PRUNE_SPEC,
        3: PartitionSpec(3, (PartitionField((1,), 1000, parse_transform("bucket[4]"), "id_bucket"),)),
    }
    ctx = PruneContext.build(PRUNE_SCHEMA, specs, bound, True, None)
    same_writer = [items[i] for i in (0, 1, 2, 4, 5)]
    assert open_columnar_batch(same_writer) is not None  # the batch path is really taken
    got = decode_and_prune_batch(items, ctx)
    want = [decode_and_prune(data, mf, ctx, False) for data, mf in items]
    assert len(got) == len(want)
    for g, w, (_, mf) in zip(got, want, items, strict=True):
        assert same_entries(g.entries, w.entries), mf.manifest_path
        assert (g.entries_read, g.skipped_by_partition, g.skipped_by_metrics) == (
            w.entries_read,
            w.skipped_by_partition,
            w.skipped_by_metrics,
        ), mf.manifest_path
    assert sum(r.columnar for r in got) >= 5


def test_a_batch_refuses_what_it_cannot_decode_alike() -> None:
    from aioiceberg.spec.manifest.columnar import avro_layout, open_columnar_batch

    items = small_manifests()
    v2 = [items[0], items[1]]
    assert open_columnar_batch(v2) is not None
    assert open_columnar_batch([items[0], items[3]]) is None  # another spec: another header
    assert open_columnar_batch([items[8], items[9]]) is None  # v1
    data, mf = items[0]
    assert (
        open_columnar_batch([(data, dataclasses_replace(mf, manifest_length=len(data) + 1)), items[1]])
        is None
    )
    assert avro_layout(data[:-3]) is None  # a cut-off block
    assert avro_layout(b"not avro") is None


def test_a_damaged_manifest_in_a_batch_raises_as_alone() -> None:
    from aioiceberg.scan.decode import decode_and_prune_batch

    items = small_manifests()[:3]
    data, mf = items[1]
    broken = data[:-20] + bytes(20)
    items[1] = (broken, mf)
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    with pytest.raises(CorruptFileError):
        decode_and_prune(broken, mf, ctx, False)
    with pytest.raises(CorruptFileError):
        decode_and_prune_batch(items, ctx)


def dataclasses_replace(mf: ManifestFile, **changes: Any) -> ManifestFile:
    import dataclasses

    return dataclasses.replace(mf, **changes)


def test_the_columnar_warm_up_decodes_through_the_columnar_path() -> None:
    """The runtime runs it in a thread and swallows its errors (a warm-up must not fail a
    plan), so a warm-up broken by a later change would go unnoticed but for this test."""
    from aioiceberg.scan import decode

    seen: list[bool] = []
    real = decode._decode_group

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        seen.append(out is not None and all(r.columnar for r in out))
        return out

    decode._decode_group = spy  # type: ignore[assignment]
    try:
        decode.warm_columnar_decoder()
    finally:
        decode._decode_group = real  # type: ignore[assignment]
    assert seen == [True]
