"""An asyncio service over one Iceberg table: ingest in micro-batches, answer queries meanwhile.

Events arrive on a queue; one writer task commits whatever has queued up as one append (one
snapshot per batch, not per event), while query tasks scan the table concurrently on the same
event loop. Every catalog and table shares one ``Runtime`` (connections, caches, worker threads),
closed once at the end. Run: ``python examples/async_service.py [WAREHOUSE]`` (default: a
temporary directory); it needs only the core install (``pip install aioiceberg``).
"""

import asyncio
import sys
import tempfile
from datetime import UTC, datetime, timedelta

import pyarrow as pa

import aioiceberg
from aioiceberg.runtime import Runtime

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("region", pa.string())])
START = datetime(2024, 5, 1, tzinfo=UTC)


async def produce(queue: asyncio.Queue[dict[str, object] | None], count: int) -> None:
    for i in range(count):
        await queue.put({"id": i, "ts": START + timedelta(hours=i), "region": ("eu", "us", "ap")[i % 3]})
        if i % 50 == 0:
            await asyncio.sleep(0.01)  # events arrive over time
    await queue.put(None)  # end of stream


async def write(table: aioiceberg.Table, queue: asyncio.Queue[dict[str, object] | None]) -> int:
    """Commit what has queued since the last commit: one append per micro-batch."""
    commits, done = 0, False
    while not done:
        events = [await queue.get()]
        while not queue.empty():
            events.append(queue.get_nowait())
        done = events[-1] is None
        rows = [event for event in events if event is not None]
        if rows:
            await table.append(pa.Table.from_pylist(rows, schema=SCHEMA))
            commits += 1
    return commits


async def query(catalog: aioiceberg.Catalog, region: str) -> int:
    table = await catalog.load_table("shop.events")  # the latest commit when the query starts
    scan = table.scan(row_filter=f"region = '{region}' AND ts >= '2024-05-05T00:00:00+00:00'")
    return int((await scan.to_arrow()).num_rows)


async def main(warehouse: str) -> None:
    async with Runtime(manifest_cache_bytes=64 << 20) as runtime:
        catalog = aioiceberg.connect(warehouse, runtime=runtime)
        table = await catalog.create_table("shop.events", schema=SCHEMA, partition_by=["day(ts)"])
        queue: asyncio.Queue[dict[str, object] | None] = asyncio.Queue()
        writer = asyncio.create_task(write(table, queue))
        await produce(queue, 1000)
        while not writer.done():  # queries run while the writer commits
            print("eu rows so far:", await query(catalog, "eu"))
            await asyncio.sleep(0.02)
        commits = await writer
        counts = await asyncio.gather(*(query(catalog, region) for region in ("eu", "us", "ap")))
        print(f"{commits} commits; rows since May 5 by region (eu, us, ap): {counts}")
        assert sum(counts) == 1000 - 96  # 4 days of hourly events come before the 5th


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            asyncio.run(main(folder))
