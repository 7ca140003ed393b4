"""Synthetic v2 tables for planning tests and load tests: manifests only, no data files.

M manifests x E entries, ten columns with full stats, partitioned by ``day(ts)`` and
``bucket(16, id)``; manifest m holds day m only, so a day range prunes by summaries while
``id = x`` and ``c0 < x`` (a non-partition column: metrics only) must read every manifest.
The planner's tests and ``benchmarks/plan.py`` build their tables here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from aioiceberg.io import FileIO
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.metadata import (
    Operation,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    Summary,
    TableMetadata,
)
from aioiceberg.spec.metadata_json import new_table_metadata, serialize_table_metadata
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import DoubleType, LongType, NestedField, StringType, TimestamptzType
from aioiceberg.spec.values import to_bytes

__all__ = [
    "BUCKETS",
    "DAY_MICROS",
    "FIRST_DAY",
    "SNAPSHOT_ID",
    "bench_schema",
    "bench_spec",
    "build_table",
    "data_file",
    "day_iso",
    "day_range",
    "empty_metadata",
    "filters",
    "manifest_list_path",
    "service_filters",
    "snapshot_metadata",
]

FIRST_DAY = 19000  # 2022-01-08
DAY_MICROS = 86_400_000_000
BUCKETS = 16
SNAPSHOT_ID = 1
_TS = 1_700_000_000_000  # the snapshot's time (fixed: tables built twice are alike)
_BUCKET = parse_transform(f"bucket[{BUCKETS}]")


def bench_schema() -> Schema:
    fields = [
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "c0", LongType()),
        NestedField(4, "c1", LongType()),
        NestedField(5, "c2", DoubleType()),
        NestedField(6, "c3", DoubleType()),
        NestedField(7, "c4", StringType()),
        NestedField(8, "c5", StringType()),
        NestedField(9, "c6", LongType()),
        NestedField(10, "c7", LongType()),
    ]
    return Schema(*fields)


def bench_spec() -> PartitionSpec:
    return PartitionSpec(
        0,
        (
            PartitionField((2,), 1000, parse_transform("day"), "ts_day"),
            PartitionField((1,), 1001, parse_transform(f"bucket[{BUCKETS}]"), "id_bucket"),
        ),
    )


def data_file(schema: Schema, location: str, m: int, i: int, per_manifest: int) -> DataFile:
    k = m * per_manifest + i
    day = FIRST_DAY + m
    lo_id, hi_id = k * 1000, k * 1000 + 999
    ts0 = day * DAY_MICROS + i * 1_000_000
    bounds_lo: dict[int, Any] = {1: lo_id, 2: ts0, 3: k * 10, 4: -k, 5: 0.5 * k, 6: -1.0, 7: f"a{k:08d}"}
    bounds_hi: dict[int, Any] = {1: hi_id, 2: ts0 + 999_999, 3: k * 10 + 9, 4: k, 5: 0.5 * k + 1, 6: 1.0}
    bounds_hi |= {7: f"z{k:08d}", 8: "zz", 9: k + 100, 10: 5}
    bounds_lo |= {8: "aa", 9: k, 10: 0}
    ids = range(1, 11)
    bucket = _BUCKET.apply(lo_id, LongType())
    return DataFile(
        DataFileContent.DATA,
        f"{location}/data/ts_day={day}/id_bucket={bucket}/{k:09d}-{uuid.uuid4().hex[:8]}.parquet",
        FileFormat.PARQUET,
        (day, bucket),
        1000,
        4 * 1024 * 1024 + i,
        column_sizes={c: 1000 + c for c in ids},
        value_counts={c: 1000 for c in ids},
        null_value_counts={c: 0 for c in ids},
        nan_value_counts={5: 0, 6: 0},
        lower_bounds={c: to_bytes(v, schema.find_type(c)) for c, v in bounds_lo.items()},  # type: ignore[arg-type]
        upper_bounds={c: to_bytes(v, schema.find_type(c)) for c, v in bounds_hi.items()},  # type: ignore[arg-type]
        split_offsets=(4, 1 << 20, 2 << 20, 3 << 20),
        sort_order_id=0,
    )


def empty_metadata(location: str) -> TableMetadata:
    """The table before its one snapshot (the schema's ids as assigned)."""
    return new_table_metadata(bench_schema(), bench_spec(), UNSORTED, location, {}, 2, last_updated_ms=_TS)


def manifest_list_path(location: str) -> str:
    return f"{location}/metadata/snap-{SNAPSHOT_ID}-{uuid.uuid4().hex[:8]}.avro"


def snapshot_metadata(location: str, list_path: str) -> tuple[str, bytes]:
    """The metadata file (its location and bytes) of the table whose one snapshot lists its
    manifests at ``list_path``."""
    md = empty_metadata(location)
    snap = Snapshot(SNAPSHOT_ID, None, 1, _TS, list_path, Summary(Operation.APPEND), md.schema().schema_id)
    md = md.replace(
        snapshots=(snap,),
        current_snapshot_id=SNAPSHOT_ID,
        last_sequence_number=1,
        snapshot_log=(SnapshotLogEntry(SNAPSHOT_ID, _TS),),
        refs={"main": SnapshotRef(SNAPSHOT_ID)},
    )
    return f"{location}/metadata/00001-{uuid.uuid4().hex}.metadata.json", serialize_table_metadata(md)


async def build_table(
    io: FileIO,
    location: str,
    manifests: int,
    entries: int,
    relayout: Callable[[bytes, ManifestFile], bytes] | None = None,
) -> str:
    """Write the synthetic table under ``location``; returns its metadata file location.
    ``relayout`` re-writes each manifest's bytes (the same entries as another writer lays them
    out); the manifest list then gives the new lengths."""
    md = empty_metadata(location)
    schema = md.schema()
    sem = asyncio.Semaphore(16)
    written = []

    async def one(m: int) -> None:
        entries_m = [
            ManifestEntry(
                ManifestEntryStatus.ADDED, None, None, None, data_file(schema, location, m, i, entries)
            )
            for i in range(entries)
        ]
        path = f"{location}/metadata/m{m:05d}-{uuid.uuid4().hex[:8]}.avro"
        data, mf = write_manifest(entries_m, md.spec(), schema, 2, SNAPSHOT_ID, manifest_path=path)
        if relayout is not None:
            data = relayout(data, mf)
            mf = dataclasses.replace(mf, manifest_length=len(data))
        async with sem:
            await io.write(path, data)
        written.append((m, mf))

    await asyncio.gather(*(one(m) for m in range(manifests)))
    ordered = [mf for _, mf in sorted(written, key=lambda p: p[0])]
    list_path = manifest_list_path(location)
    await io.write(list_path, write_manifest_list(ordered, 2, SNAPSHOT_ID, None, 1))
    meta_path, meta = snapshot_metadata(location, list_path)
    await io.write(meta_path, meta)
    return meta_path


def day_iso(day: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=day)).isoformat()


def day_range(first: int, span: int) -> str:
    """Manifests ``first`` to ``first + span - 1`` (manifest m holds day m)."""
    return f"ts >= '{day_iso(FIRST_DAY + first)}' AND ts < '{day_iso(FIRST_DAY + first + span)}'"


def filters(manifests: int, entries: int) -> dict[str, str]:
    """The four filters, in syntax both engines parse."""
    span = max(1, manifests // 100)
    mid = manifests // 2
    target = (mid * entries + entries // 3) * 1000  # the lowest id of one file
    return {
        "none": "",
        "day_1pct": day_range(mid, span),
        "id_eq": f"id = {target}",
        "metrics_only": f"c0 < {10 * max(1, entries // 20)}",
    }


def service_filters(manifests: int, queries: int = 1) -> tuple[str, list[str]]:
    """The service case's plans: ``day_1pct``, then up to ``queries`` other 1% day ranges
    from a quarter in, disjoint from it and from each other (none of their manifests read
    by an earlier plan)."""
    span = max(1, manifests // 100)
    mid = manifests // 2
    others: list[str] = []
    start = manifests // 4
    while len(others) < queries and start + span <= manifests:
        if start + span <= mid or start >= mid + span:
            others.append(day_range(start, span))
            start += span
        else:
            start = mid + span
    return day_range(mid, span), others
