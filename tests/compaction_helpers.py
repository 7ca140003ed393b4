"""Shared by the compaction tests: a table of many small files, written fast, and file bounds."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.values import from_bytes
from aioiceberg.table import Table
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_data_files

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("x", pa.int32()),
        pa.field("y", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("region", pa.string()),
    ]
)
REGIONS = ("eu", "us", "ap")


def file_rows(index: int, count: int, seed: int = 7) -> pa.Table:
    """Rows of small file ``index``: ids in a block of their own, x, y and names spread over the
    whole range (so every input file spans nearly all of it), one region per file."""
    rnd = random.Random(seed * 1_000_003 + index)
    ids = list(range(index * count, (index + 1) * count))
    return pa.table(
        {
            "id": ids,
            "x": [rnd.randrange(0, 10_000) for _ in ids],
            "y": [rnd.uniform(-1000.0, 1000.0) for _ in ids],
            "name": [f"n{rnd.randrange(0, 100_000):06d}" for _ in ids],
            "region": [REGIONS[index % len(REGIONS)]] * count,
        },
        schema=SCHEMA,
    )


async def add_small_files(table: Table, files: int, rows_per_file: int, at_once: int = 32) -> None:
    """``files`` data files of ``rows_per_file`` rows each, written concurrently and committed
    as one append (thousands of appends would take minutes)."""
    md = table.metadata
    provider = LocationProvider(table.location, md.properties)
    schema, spec = md.schema(), md.spec()
    gate = asyncio.Semaphore(at_once)

    async def one(i: int) -> list[DataFile]:
        async with gate:
            return await write_data_files(
                table.io, schema, spec, file_rows(i, rows_per_file), provider, md.properties, task_id=i
            )

    written = await asyncio.gather(*(one(i) for i in range(files)))
    await table.append_data_files([f for batch in written for f in batch])


def bounds(table: Table, f: DataFile, column: str) -> tuple[Any, Any]:
    """A data file's (lower, upper) bound of ``column``."""
    field = table.metadata.schema().find_field(column)
    lower = (f.lower_bounds or {})[field.field_id]
    upper = (f.upper_bounds or {})[field.field_id]
    return from_bytes(lower, field.field_type), from_bytes(upper, field.field_type)  # type: ignore[arg-type]


def mean_width(table: Table, files: Sequence[DataFile], column: str) -> float:
    """The mean width of the files' ``column`` ranges."""
    widths = [float(hi - lo) for lo, hi in (bounds(table, f, column) for f in files)]
    return sum(widths) / len(widths)


def sorted_rows(data: pa.Table) -> list[tuple[Any, ...]]:
    cols = [c for c in SCHEMA.names if c in data.column_names]
    return sorted(zip(*(data.column(c).to_pylist() for c in cols), strict=True))
