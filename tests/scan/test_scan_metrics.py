"""Scan metrics as the README uses them: ``plan_files()`` then ``to_arrow()`` on one scan, the
second plan served by the cache, and what ``str()`` / ``repr()`` show of both."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg import sync
from aioiceberg.scan.plan_metrics import PlanMetrics

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
PARTITION_BY = ["region", "day(ts)"]
# four appends over three regions (one file per region each, ids i*100 .. i*100+99), then one
# of 'us' alone: its manifest's summaries rule it out for 'eu'
APPENDS = [(i, ("eu", "us", "ap")) for i in range(4)] + [(4, ("us",))]
FILTER = "region = 'eu' AND id >= 250"
# of the 12 files in the four manifests read: 8 of other regions, 2 'eu' files below id 250
EXPECTED = {
    "manifests_total": 5,
    "manifests_skipped_by_summaries": 1,
    "entries_read": 12,
    "entries_skipped_by_partition": 8,
    "entries_skipped_by_metrics": 2,
    "tasks": 2,
}
ROWS = 150  # 'eu' ids 250..399
DAY = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def _rows(i: int, regions: tuple[str, ...]) -> pa.Table:
    ids = [i * 100 + k for _ in regions for k in range(100)]
    names = [r for r in regions for _ in range(100)]
    return pa.table({"id": ids, "region": names, "ts": [DAY] * len(ids)}, schema=SCHEMA)


def _decided(m: PlanMetrics) -> dict[str, Any]:
    """What the plan decided (the same however it was served)."""
    return {k: getattr(m, k) for k in EXPECTED}


def _check_pair(first: PlanMetrics, second: PlanMetrics) -> None:
    """``first`` fetched and decoded its manifests; ``second`` (the same scan again) found
    them in the cache and reports the same skips."""
    assert second is not first
    assert _decided(first) == _decided(second) == EXPECTED
    assert first.files_kept == second.files_kept == 2
    assert not first.from_cache and first.bytes_fetched > 0 and first.manifests_read == 4
    assert second.from_cache and second.manifest_list_from_cache
    assert (second.bytes_fetched, second.manifests_read, second.manifests_from_cache) == (0, 0, 4)
    decided = "2 of 12 files kept (10 skipped: 8 by partition, 2 by column stats); 2 tasks"
    manifests = "4 of 5 manifests read (1 skipped by partition summaries)"
    for m in (first, second):
        text = str(m).splitlines()
        assert text[:2] == [
            decided,
            manifests + f"; {m.manifests_read} decoded, {m.manifests_from_cache} from cache",
        ]
        assert len(text) == 3 and "first task after " in text[2] and ", planned in " in text[2]
    assert str(second).splitlines()[2].startswith("plan from cache: nothing fetched or decoded; ")
    assert "plan from cache" not in str(first) and "B fetched; " in str(first).splitlines()[2]


@pytest.mark.anyio
async def test_plan_then_read_reports_the_same_skips_from_the_cache(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        table = await catalog.create_table("db.events", schema=SCHEMA, partition_by=PARTITION_BY)
        for i, regions in APPENDS:
            await table.append(_rows(i, regions))
        scan = table.scan(row_filter=FILTER, selected_fields=("id", "ts"))
        paths = [task.file.file_path async for task in scan.plan_files()]
        first = scan.metrics
        rows = await scan.to_arrow()
        second = scan.metrics
    assert len(paths) == 2 and rows.num_rows == ROWS
    _check_pair(first, second)


@pytest.mark.anyio
async def test_a_cached_plan_through_the_stages_counts_alike(tmp_path: Path) -> None:
    """Splitting plans through the stages even when every view is cached: the counts and the
    flag are the same as for a plan decided from the cache at once."""
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        table = await catalog.create_table("db.events", schema=SCHEMA, partition_by=PARTITION_BY)
        for i, regions in APPENDS:
            await table.append(_rows(i, regions))
        scan = table.scan(row_filter=FILTER, split_size=1 << 20)
        assert len([t async for t in scan.plan_files()]) == 2
        first = scan.metrics
        assert len([t async for t in scan.plan_files()]) == 2
        _check_pair(first, scan.metrics)


def test_the_blocking_api_reports_the_same(tmp_path: Path) -> None:
    with sync.connect(str(tmp_path)) as catalog:
        table = catalog.create_table("db.events", schema=SCHEMA, partition_by=PARTITION_BY)
        for i, regions in APPENDS:
            table.append(_rows(i, regions))
        scan = table.scan(row_filter=FILTER, selected_fields=("id", "ts"))
        paths = [task.file.file_path for task in scan.plan_files()]
        first = scan.metrics
        rows = scan.to_arrow()
        second = scan.metrics
    assert len(paths) == 2 and rows.num_rows == ROWS
    _check_pair(first, second)


def test_repr_shows_the_counters_set_one_a_line_and_rebuilds_them() -> None:
    assert str(PlanMetrics()) == "no plan run yet" and repr(PlanMetrics()) == "PlanMetrics()"
    m = PlanMetrics(
        manifests_total=40,
        manifests_skipped_by_summaries=37,
        manifests_read=3,
        entries_read=480,
        entries_skipped_by_partition=460,
        entries_skipped_by_metrics=8,
        bytes_fetched=1_234_567,
        tasks=12,
        time_to_first_task_s=0.035,
        planning_time_s=1.5,
    )
    lines = repr(m).splitlines()
    assert lines[0] == "PlanMetrics(" and lines[-1] == ")" and len(lines) == 12
    assert "    entries_skipped_by_metrics=8," in lines and not any("from_cache" in x for x in lines)
    assert eval(repr(m), {"PlanMetrics": PlanMetrics}) == m
    assert str(m).splitlines() == [
        "12 of 480 files kept (468 skipped: 460 by partition, 8 by column stats); 12 tasks",
        "3 of 40 manifests read (37 skipped by partition summaries); 3 decoded, 0 from cache",
        "1.2 MB fetched; first task after 35 ms, planned in 1.50 s",
    ]
