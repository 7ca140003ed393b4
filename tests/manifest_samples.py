"""Manifests we write by hand for the manifest tests: one with a partition value of every
awkward kind (NaN, -0.0, nulls, UUIDs, decimals), and files whose stats test every corner
of pruning, with small manifests of them that one batch decodes together."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from aioiceberg.spec.values import to_bytes

# where damaged manifests claim to be: errors must name it
LOCATION = "s3://bucket/wh/db/t/metadata/abc-m0.avro"

# The sample: a partition field of each type, and values that are hard to round-trip
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "d", DoubleType()),
    NestedField(5, "u", UUIDType()),
    NestedField(6, "amount", DecimalType(9, 2)),
    NestedField(7, "day", DateType()),
    schema_id=3,
)
SPEC = PartitionSpec(
    2,
    (
        PartitionField((1,), 1000, parse_transform("bucket[16]"), "id_bucket"),
        PartitionField((2,), 1001, parse_transform("truncate[3]"), "name_trunc"),
        PartitionField((3,), 1002, parse_transform("hour"), "ts_hour"),
        PartitionField((4,), 1003, parse_transform("identity"), "d"),
        PartitionField((5,), 1004, parse_transform("identity"), "u"),
        PartitionField((6,), 1005, parse_transform("identity"), "amount"),
        PartitionField((7,), 1006, parse_transform("identity"), "day"),
    ),
)
U1 = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
U2 = uuid.UUID("0db3e2a8-9d1d-42b9-aa7b-74ebe558dceb")


def sample_file(
    i: int, partition: tuple[Any, ...], content: DataFileContent = DataFileContent.DATA, **kw: Any
) -> DataFile:
    """File ``i`` of the sample, with stats for ``id`` and ``name``."""
    return DataFile(
        content,
        f"file:///wh/data/{content.name.lower()}-{i}.parquet",
        FileFormat.PARQUET,
        partition,
        10 + i,
        1000 + i,
        column_sizes={1: 50 + i, 2: 60},
        value_counts={1: 10 + i, 2: 10 + i},
        null_value_counts={1: 0, 2: i},
        nan_value_counts={4: 0},
        lower_bounds={1: to_bytes(i, LongType()), 2: b"a"},
        upper_bounds={1: to_bytes(i + 100, LongType()), 2: b"z"},
        split_offsets=(4,),
        sort_order_id=0 if content != DataFileContent.POSITION_DELETES else None,
        spec_id=SPEC.spec_id,
        **kw,
    )


PARTITIONS = [
    (3, "abc", 475000, 1.5, U1, Decimal("12.34"), 19844),
    (7, None, 475001, float("nan"), U2, Decimal("-0.50"), 19845),
    (0, "zzz", None, -0.0, None, None, None),
]


def sample_entries() -> list[ManifestEntry]:
    """An added entry that inherits its snapshot and sequence numbers, an existing and a deleted one."""
    return [
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, PARTITIONS[0])),
        ManifestEntry(ManifestEntryStatus.EXISTING, 11, 4, 3, sample_file(1, PARTITIONS[1])),
        ManifestEntry(ManifestEntryStatus.DELETED, 12, 5, 5, sample_file(2, PARTITIONS[2])),
    ]


def write_sample(
    format_version: int, codec: str = "deflate", tmp: Path | None = None
) -> tuple[bytes, ManifestFile]:
    """The sample manifest's bytes, in memory or under ``tmp``."""
    entries = sample_entries()
    if format_version == 1:
        entries = [ManifestEntry(e.status, e.snapshot_id, None, None, e.data_file) for e in entries]
    path = f"file://{tmp}/m-v{format_version}.avro" if tmp else f"mem://m-v{format_version}.avro"
    return write_manifest(entries, SPEC, SCHEMA, format_version, 99, codec=codec, manifest_path=path)  # type: ignore[arg-type]


def same_entries(a: Sequence[ManifestEntry], b: Sequence[ManifestEntry]) -> bool:
    """Equal entries; NaN partition values compare unequal to themselves, so their reprs."""
    return len(a) == len(b) and all(x == y or repr(x) == repr(y) for x, y in zip(a, b, strict=True))


def simple_file(i: int, partition: tuple[Any, ...], **kw: Any) -> DataFile:
    """A data file with no stats but ``kw``."""
    return DataFile(
        DataFileContent.DATA,
        f"file:///wh/data/{i}.parquet",
        FileFormat.PARQUET,
        partition,
        10,
        100,
        **kw,
    )


# Pruning on stats, and small manifests decoded together
PRUNE_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "n", IntegerType()),
    NestedField(4, "s", StringType()),
    NestedField(5, "x", DoubleType()),
    NestedField(6, "day", DateType()),
)
PRUNE_SPEC = PartitionSpec(
    0,
    (
        PartitionField((1,), 1000, parse_transform("bucket[4]"), "id_bucket"),
        PartitionField((6,), 1001, parse_transform("identity"), "day"),
    ),
)


def awkward_files() -> list[DataFile]:
    """Files whose stats test every corner the prefilter must leave to the evaluator."""

    def long_b(value: int) -> bytes:
        return to_bytes(value, LongType())

    def int_b(value: int) -> bytes:
        return to_bytes(value, IntegerType())

    out: list[DataFile] = []
    for k in range(48):
        lo, hi = k * 10, k * 10 + 9
        lower: dict[int, bytes] = {1: long_b(lo), 2: long_b(lo * 1000), 3: int_b(lo), 4: f"a{k:03d}".encode()}
        upper: dict[int, bytes] = {1: long_b(hi), 2: long_b(hi * 1000), 3: int_b(hi), 4: f"b{k:03d}".encode()}
        values = {1: 10, 2: 10, 3: 10, 4: 10, 5: 10}
        nulls = {1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
        nans = {5: 1 if k % 12 == 7 else 0}
        record_count = 10
        kind = k % 12
        if kind == 1:
            lower[1] = int_b(lo)  # a 4-byte bound of a long (promoted int): not readable in bulk
        elif kind == 2:
            del lower[1], upper[1]  # no bounds: may match
        elif kind == 3:
            nulls[1] = 10  # nulls only: the evaluator drops it for comparisons
        elif kind == 4:
            record_count = -1  # unknown size: always kept
        elif kind == 5:
            upper[1] = b"\x01"  # an undecodable bound
        elif kind == 6:
            record_count = 0
        elif kind == 8:
            nans[1] = 10  # NaNs only (a count the spec reserves for floats): dropped too
        elif kind == 9:
            del nulls[1]  # no null count: not "nulls only"
        elif kind == 10:
            del values[1]  # no value count, every row null: not "nulls only" either
            nulls[1] = 10
        elif kind == 11:
            values[1], nulls[1] = 0, 0  # a zero value count is falsy in the evaluator
        partition = (k % 4, 19000 + k % 3)
        out.append(
            DataFile(
                DataFileContent.DATA,
                f"file:///wh/p/{k}.parquet",
                FileFormat.PARQUET,
                partition,
                record_count,
                100,
                value_counts=values,
                null_value_counts=nulls,
                nan_value_counts=nans,
                lower_bounds=lower,
                upper_bounds=upper,
            )
        )
    return out


def small_manifests() -> list[tuple[bytes, ManifestFile]]:
    """Manifests of one writer (shared header) added by different snapshots at different
    sequence numbers, with existing and deleted entries, plus ones that cannot share a batch:
    another spec, v1, an empty one."""
    files = awkward_files()
    out: list[tuple[bytes, ManifestFile]] = []
    for m in range(9):
        chunk = files[m * 4 : m * 4 + 5]
        entries = [
            ManifestEntry(
                ManifestEntryStatus.ADDED if i % 3 else ManifestEntryStatus.EXISTING,
                None if i % 3 else 40 + m,
                None if i % 3 else m,
                None if i % 3 else m,
                f,
            )
            for i, f in enumerate(chunk)
        ]
        if m % 4 == 1:
            entries.append(
                ManifestEntry(ManifestEntryStatus.DELETED, 70, 2, 2, simple_file(90 + m, (0, 19000)))
            )
        path = f"file:///wh/metadata/m{m}.avro"
        version = 1 if m == 7 else 2
        data, _ = write_manifest(entries, PRUNE_SPEC, PRUNE_SCHEMA, version, 100 + m, manifest_path=path)
        mf = ManifestFile(path, len(data), 0, ManifestContent.DATA, 10 + m, 10 + m, 100 + m)
        out.append((data, mf))
    other = PartitionSpec(3, (PartitionField((1,), 1000, parse_transform("bucket[4]"), "id_bucket"),))
    data, _ = write_manifest(
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, simple_file(500, (1,)))],
        other,
        PRUNE_SCHEMA,
        2,
        300,
        manifest_path="file:///wh/metadata/other.avro",
    )
    out.insert(
        3,
        (data, ManifestFile("file:///wh/metadata/other.avro", len(data), 3, ManifestContent.DATA, 5, 5, 300)),
    )
    data, _ = write_manifest([], PRUNE_SPEC, PRUNE_SCHEMA, 2, 301, manifest_path="file:///wh/metadata/e.avro")
    out.append(
        (data, ManifestFile("file:///wh/metadata/e.avro", len(data), 0, ManifestContent.DATA, 6, 6, 301))
    )
    return out
