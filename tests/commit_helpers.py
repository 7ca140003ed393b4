"""Helpers shared by the commit and table tests (no tests here).

Run as a script it is one appender process: ``root lock options identifier writer appends``
in, the acknowledged ids (JSON) out.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.string())])


def rows(writer: str, start: int, count: int = 3) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + count), pa.int64()), "writer": [writer] * count},
        schema=ARROW_SCHEMA,
    )


def s3_options(endpoint: str) -> dict[str, Any]:
    from servers.plugin import s3_storage_options

    return {**s3_storage_options(endpoint), "dynamodb.endpoint": endpoint}


FAST_RETRY = {
    "commit.retry.num-retries": "200",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}


async def run_writer(
    root: str,
    lock: str | None,
    options: dict[str, Any] | None,
    identifier: str,
    writer: str,
    appends: int,
    *,
    close: bool = False,
) -> list[int]:
    """Append ``appends`` batches of 3 rows with ids ``base + 10 * j``; returns acknowledged ids.

    ``close`` closes the catalog's store at the end: only for a writer alone on its loop,
    since the loop's S3 client is shared by every catalog with the same options."""
    import aioiceberg

    catalog = aioiceberg.connect(root, lock=lock, storage_options=options)
    acknowledged: list[int] = []
    table = await catalog.load_table(identifier)
    base = int(writer.lstrip("pw")) * 100_000
    for j in range(appends):
        data = rows(writer, base + j * 10)
        await table.append(data)
        acknowledged.extend(data.column("id").to_pylist())
    if close:
        await catalog.aclose()
    return acknowledged


def _main() -> None:
    import asyncio
    import json
    import sys

    from aioiceberg.runtime import close_all_clients

    root, lock, options, identifier, writer, appends = sys.argv[1:7]

    async def run() -> list[int]:
        try:
            return await run_writer(
                root, lock or None, json.loads(options) or None, identifier, writer, int(appends), close=True
            )
        finally:
            await close_all_clients()

    print(json.dumps(asyncio.run(run())))


if __name__ == "__main__":
    _main()
