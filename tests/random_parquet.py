"""A Parquet file of random longs, for the reads that count bytes and requests: its values
do not compress, so its size follows its row count and its row groups are of one size."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.io import FileIO
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField

# the file's schema: ``id`` counts up from 0, ``name`` is noise
PAIR = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "name", LongType(), required=False)
)


async def random_parquet(store: FileIO, path: str, rows: int, row_group_size: int) -> FileScanTask:
    """Write the file of ``rows`` rows at ``path`` in ``store``; the task that reads all of it."""
    ids = np.arange(rows, dtype=np.int64)
    noise = np.random.default_rng(0).integers(0, 2**62, rows, dtype=np.int64)  # incompressible
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
            pa.field("name", pa.int64(), metadata={b"PARQUET:field_id": b"2"}),
        ]
    )
    buf = io.BytesIO()
    pq.write_table(pa.table([ids, noise], schema=schema), buf, row_group_size=row_group_size)
    await store.write(path, buf.getvalue())
    data = DataFile(DataFileContent.DATA, path, FileFormat.PARQUET, (), rows, len(buf.getvalue()))
    return FileScanTask(data, (), AlwaysTrue(), PartitionSpec(0, ()), PAIR)
