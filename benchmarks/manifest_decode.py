"""Manifest decode throughput: entries/s for a 1000-entry v2 manifest with stats for 10 columns.

Run: ``.venv/bin/python benchmarks/manifest_decode.py``. Compares plain fastavro dicts, our full
decode, and our decode keeping stats for two columns only (``columns_needed``).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

import fastavro

from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest,
    write_manifest,
)
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import DateType, LongType, NestedField, StringType

N_ENTRIES = 1000
N_COLUMNS = 10


def synthetic_manifest(n_entries: int = N_ENTRIES, n_columns: int = N_COLUMNS) -> bytes:
    fields = [NestedField(1, "day", DateType()), NestedField(2, "region", StringType())]
    fields += [NestedField(i, f"c{i}", LongType()) for i in range(3, n_columns + 1)]
    schema = Schema(*fields)
    spec = PartitionSpec(
        0,
        (
            PartitionField((1,), 1000, parse_transform("identity"), "day"),
            PartitionField((2,), 1001, parse_transform("identity"), "region"),
        ),
    )
    ids = range(1, n_columns + 1)
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            DataFile(
                DataFileContent.DATA,
                f"s3://bucket/warehouse/db/t/data/day={i % 365}/region=eu/{i:08d}-0-abcdef.parquet",
                FileFormat.PARQUET,
                (19000 + i % 365, "eu"),
                100_000 + i,
                64 * 1024 * 1024 + i,
                column_sizes={c: 1000 * c + i for c in ids},
                value_counts={c: 100_000 + i for c in ids},
                null_value_counts={c: i % 7 for c in ids},
                nan_value_counts={},
                lower_bounds={c: (i * c).to_bytes(8, "little") for c in ids},
                upper_bounds={c: (i * c + 1000).to_bytes(8, "little") for c in ids},
                split_offsets=(4, 1 << 20, 1 << 21),
                sort_order_id=0,
            ),
        )
        for i in range(n_entries)
    ]
    data, _ = write_manifest(entries, spec, schema, 2, 1, manifest_path="mem://m.avro")
    return data


def rate(fn: Callable[[], object], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return N_ENTRIES / best


def _pyiceberg_rate(data: bytes) -> float:
    import tempfile
    from pathlib import Path

    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestContent, ManifestFile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.avro"
        path.write_bytes(data)
        mf = ManifestFile.from_args(
            manifest_path=str(path),
            manifest_length=len(data),
            partition_spec_id=0,
            content=ManifestContent.DATA,
            sequence_number=1,
            min_sequence_number=1,
            added_snapshot_id=1,
        )
        file_io = PyArrowFileIO()
        return rate(lambda: mf.fetch_manifest_entry(file_io, discard_deleted=False))


def main() -> None:
    data = synthetic_manifest()
    print(f"manifest: {N_ENTRIES} entries, {N_COLUMNS} columns of stats, {len(data)} bytes")
    results = {
        "fastavro dicts only": rate(lambda: list(fastavro.reader(io.BytesIO(data)))),
        "read_manifest (full stats)": rate(lambda: read_manifest(data)),
        "read_manifest (columns_needed={3,4})": rate(lambda: read_manifest(data, columns_needed={3, 4})),
        "read_manifest (columns_needed=set())": rate(lambda: read_manifest(data, columns_needed=set())),
    }
    try:
        results["pyiceberg fetch_manifest_entry (baseline)"] = _pyiceberg_rate(data)
    except ImportError:
        pass
    for name, r in results.items():
        print(f"{name:40s} {r:10,.0f} entries/s")


if __name__ == "__main__":
    main()
