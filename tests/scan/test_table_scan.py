"""Create, append and read back through the public async API, on local FS and moto S3."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from stream_helpers import first_then_settle

import aioiceberg


def events(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "region": pa.array([["eu", "us", "ap"][i % 3] for i in range(start, start + n)]),
            "ts": pa.array(
                [1_714_521_600_000_000 + i * 3_600_000_000 for i in range(start, start + n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "v": pa.array([float(i) / 7 for i in range(start, start + n)]),
        }
    )


async def check_roundtrip(root: str, storage_options: dict[str, Any] | None = None) -> None:
    async with aioiceberg.connect(root, storage_options=storage_options) as catalog:
        table = await catalog.create_table(
            "db.events", schema=events(0, 1).schema, partition_by=["day(ts)", "bucket(4, id)"]
        )
        await table.append(events(0, 300))
        await table.append(events(300, 200))
        everything = await table.scan().to_arrow()
        assert everything.num_rows == 500
        assert sorted(everything.column("id").to_pylist()) == list(range(500))

        scan = table.scan(row_filter="region = 'eu' AND id >= 250", selected_fields=("id", "region"))
        rows = await scan.to_arrow()
        assert rows.column_names == ["id", "region"]
        expected = [i for i in range(250, 500) if i % 3 == 0]
        assert sorted(rows.column("id").to_pylist()) == expected
        assert set(pc.unique(rows.column("region")).to_pylist()) == {"eu"}

        batches = [b async for b in table.scan(row_filter="id < 10").to_batches()]
        assert sum(b.num_rows for b in batches) == 10

        first_snapshot = table.snapshots()[0].snapshot_id
        old = await table.scan(snapshot_id=first_snapshot).to_arrow()
        assert old.num_rows == 300


@pytest.mark.anyio
async def test_append_then_scan_returns_exactly_the_matching_rows_on_local_fs(tmp_path: Path) -> None:
    await check_roundtrip(str(tmp_path / "warehouse"))


@pytest.mark.anyio
async def test_append_then_scan_returns_exactly_the_matching_rows_on_s3(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    await check_roundtrip(f"s3://{bucket}/warehouse", s3_storage_options(moto_endpoint))


async def _four_appends(catalog: Any) -> Any:
    table = await catalog.create_table("db.t", schema=events(0, 1).schema)
    for start in range(0, 400, 100):
        await table.append(events(start, 100))
    return table


@pytest.mark.anyio
async def test_breaking_out_of_a_batch_stream_stops_cleanly(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await _four_appends(catalog)
        async with aclosing(table.scan().to_batches()) as stream:
            first, errors = await first_then_settle(stream)
        assert first.num_rows > 0
        assert errors == []
        assert (await table.scan().to_arrow()).num_rows == 400  # nothing left half-open


@pytest.mark.anyio
@pytest.mark.parametrize("stream", ["plan_files", "plan_batches"])
async def test_an_abandoned_plan_stream_does_not_cancel_its_consumer(tmp_path: Path, stream: str) -> None:
    """The plan's own streams, left after their first item: their stages run in a task of
    their own, which the finalizer's close cancels."""
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await _four_appends(catalog)
        # no name holds the stream: it is left to the collector
        first, errors = await first_then_settle(getattr(table.scan(), stream)())
        assert first is not None
        assert errors == []
        assert len([t async for t in table.scan().plan_files()]) == 4  # nothing left half-open


@pytest.mark.anyio
async def test_an_abandoned_batch_stream_does_not_cancel_its_consumer(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await _four_appends(catalog)
        first, errors = await first_then_settle(table.scan().to_batches())
        assert first.num_rows > 0
        assert errors == []
