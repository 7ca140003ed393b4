"""Helpers shared by the commit and table tests (no tests here).

``append_rows`` uses the write layer when it is present; until then it writes one
unpartitioned Parquet file with pyarrow and commits it with ``append_data_files``.
"""

from __future__ import annotations

import io as _io
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.table import Table

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.string())])


def rows(writer: str, start: int, count: int = 3) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + count), pa.int64()), "writer": [writer] * count},
        schema=ARROW_SCHEMA,
    )


def write_layer_ready() -> bool:
    try:
        import aioiceberg.write.parquet  # noqa: F401
    except ImportError:
        return False
    return True


async def data_file_for(table: Table, data: pa.Table) -> DataFile:
    """One unpartitioned Parquet data file (test fixture, not a writer of the library)."""
    schema = table.schema()
    arrow = data.cast(schema_to_arrow(schema))
    buffer = _io.BytesIO()
    pq.write_table(arrow, buffer)
    path = f"{table.location}/data/{uuid.uuid4().hex}.parquet"
    payload = buffer.getvalue()
    await table.io.write(path, payload)
    return DataFile(
        DataFileContent.DATA,
        path,
        FileFormat.PARQUET,
        (),
        data.num_rows,
        len(payload),
        spec_id=table.spec().spec_id,
    )


async def append_rows(table: Table, data: pa.Table) -> None:
    if write_layer_ready() or not table.spec().is_unpartitioned:
        await table.append(data)
    else:
        await table.append_data_files([await data_file_for(table, data)])


def s3_options(endpoint: str) -> dict[str, Any]:
    from servers.plugin import s3_storage_options

    return {**s3_storage_options(endpoint), "dynamodb.endpoint": endpoint}


FAST_RETRY = {
    "commit.retry.num-retries": "200",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}


async def run_writer(
    root: str, lock: str | None, options: dict[str, Any] | None, identifier: str, writer: str, appends: int
) -> list[int]:
    """Append ``appends`` batches of 3 rows with ids ``base + 10 * j``; returns acknowledged ids."""
    import aioiceberg

    catalog = aioiceberg.connect(root, lock=lock, storage_options=options)
    acknowledged: list[int] = []
    table = await catalog.load_table(identifier)
    base = int(writer.lstrip("pw")) * 100_000
    for j in range(appends):
        data = rows(writer, base + j * 10)
        await append_rows(table, data)
        acknowledged.extend(data.column("id").to_pylist())
    return acknowledged


def _main() -> None:
    import asyncio
    import json
    import sys

    root, lock, options, identifier, writer, appends = sys.argv[1:7]
    ids = asyncio.run(
        run_writer(root, lock or None, json.loads(options) or None, identifier, writer, int(appends))
    )
    print(json.dumps(ids))


if __name__ == "__main__":
    _main()
