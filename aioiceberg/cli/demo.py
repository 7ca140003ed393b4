"""``aioiceberg demo``: one tour of the engine on a generated, partitioned event table.

Appends arrive in time order (each covers its own run of days), as ingestion usually
does, so each manifest's partition summary covers few days and a time filter can skip
whole manifests as well as files: the pruning figures printed come from the planner.
Written against the async API (run with ``anyio.run``) since that is the engine's face.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

import anyio
import numpy as np
import pyarrow as pa
from rich.console import Console

import aioiceberg

__all__ = ["events", "run_demo"]

DAYS = 28
START = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
REGIONS = ("eu", "us", "ap", "sa", "af", "me")
KINDS = ("view", "click", "cart", "purchase", "refund")


def events(first_id: int, n: int, first_day: int, days: int, seed: int) -> pa.Table:
    """``n`` synthetic events spread over ``days`` days from ``first_day`` (vectorised, no Python loop)."""
    rng = np.random.default_rng(seed)
    start_us = int((START + dt.timedelta(days=first_day)).timestamp() * 1_000_000)
    ts = np.sort(rng.integers(start_us, start_us + days * 86_400_000_000, n, dtype=np.int64))
    region_ix = rng.choice(len(REGIONS), n, p=[0.3, 0.3, 0.2, 0.1, 0.05, 0.05])
    kind_ix = rng.choice(len(KINDS), n, p=[0.6, 0.25, 0.08, 0.05, 0.02])
    return pa.table(
        {
            "id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "user_id": pa.array(rng.integers(1, 200_000, n, dtype=np.int64)),
            "region": pa.DictionaryArray.from_arrays(
                pa.array(region_ix.astype(np.int32)), pa.array(REGIONS)
            ).cast(pa.string()),
            "kind": pa.DictionaryArray.from_arrays(pa.array(kind_ix.astype(np.int32)), pa.array(KINDS)).cast(
                pa.string()
            ),
            "amount": pa.array(np.round(rng.gamma(2.0, 20.0, n), 2)),
        }
    )


def _day(offset: int) -> str:
    return (START + dt.timedelta(days=offset)).isoformat()


def run_demo(
    warehouse: str,
    storage_options: Mapping[str, Any] | None,
    lock: str | None,
    table_name: str,
    rows: int,
    appends: int,
    console: Console,
) -> None:
    anyio.run(_demo, warehouse, storage_options, lock, table_name, rows, appends, console)


async def _demo(
    warehouse: str,
    storage_options: Mapping[str, Any] | None,
    lock: str | None,
    table_name: str,
    rows: int,
    appends: int,
    console: Console,
) -> None:
    say = console.print
    total_started = time.perf_counter()
    async with aioiceberg.connect(warehouse, lock=lock, storage_options=storage_options) as catalog:
        say(f"[bold]aioiceberg demo[/bold]: warehouse {catalog.root}")
        if await catalog.table_exists(table_name):
            await catalog.drop_table(table_name, purge=True)
            say(f"dropped the previous {table_name} (purge)")
        schema = events(0, 1, 0, 1, 0).schema
        table = await catalog.create_table(table_name, schema=schema, partition_by=["day(ts)"])
        say(f"1. created {table_name}, partitioned by day(ts), at {table.location}")

        # -- appends ------------------------------------------------------------------------
        per_append, days_per = rows // appends, DAYS // appends
        first_id = 0
        for k in range(appends):
            n = per_append if k < appends - 1 else rows - per_append * (appends - 1)
            days = days_per if k < appends - 1 else DAYS - days_per * (appends - 1)
            data = events(first_id, n, k * days_per, days, seed=k)
            first_id += n
            started = time.perf_counter()
            await table.append(data)
            took = time.perf_counter() - started
            summary = table.current_snapshot().summary  # type: ignore[union-attr]
            files = summary.get("added-data-files", "?") if summary is not None else "?"
            say(
                f"2.{k + 1} appended {n:,} rows ({data.nbytes / 2**20:.0f} MiB in Arrow) as {files} files "
                f"for days {k * days_per + 1}-{k * days_per + days} in {took:.2f} s "
                f"({n / took / 1e6:.2f}M rows/s)"
            )

        # -- schema evolution ---------------------------------------------------------------
        if hasattr(table, "update_schema"):
            started = time.perf_counter()
            async with table.update_schema() as update:
                update.add_column("channel", "string", doc="added by the demo after the data")
            say(
                f"3. evolved the schema in {time.perf_counter() - started:.2f} s: added optional column "
                f"'channel' (schema id {table.schema().schema_id}); old rows read it as null, "
                "no file rewritten"
            )
        else:
            say("3. schema evolution: not available in this version (Table.update_schema is missing)")

        # -- delete -------------------------------------------------------------------------
        delete_filter = f"region = 'ap' AND ts < '{_day(1)}'"
        if hasattr(table, "delete"):
            before = _total(table)
            started = time.perf_counter()
            await table.delete(delete_filter)
            after = _total(table)
            say(
                f"4. deleted {before - after:,} rows where {delete_filter} in "
                f"{time.perf_counter() - started:.2f} s ({after:,} rows left)"
            )
        else:
            say("4. row deletes: not available in this version (Table.delete is missing)")

        # -- plan and scan with a filter ----------------------------------------------------
        row_filter = f"ts >= '{_day(DAYS - 3)}' AND region = 'eu'"
        scan = table.scan(row_filter=row_filter, selected_fields=("id", "ts", "region", "amount"))
        started = time.perf_counter()
        tasks = [task async for task in scan.plan_files()]
        plan_s = time.perf_counter() - started
        m = scan.metrics
        total_files = int(_summary(table, "total-data-files"))
        say(f"5. planned  {row_filter}")
        say(
            f"   in {plan_s * 1000:.1f} ms: {len(tasks)} of {total_files} data files to read; "
            f"manifests: {m.manifests_skipped_by_summaries} of {m.manifests_total} skipped by partition "
            f"summaries; files: {m.entries_skipped_by_partition} skipped by partition, "
            f"{m.entries_skipped_by_metrics} by column metrics"
        )
        started = time.perf_counter()
        result = await table.scan(
            row_filter=row_filter, selected_fields=("id", "ts", "region", "amount")
        ).to_arrow()
        scan_s = time.perf_counter() - started
        scanned = sum(t.file.record_count for t in tasks)
        say(
            f"6. scanned {result.num_rows:,} matching rows (from {scanned:,} rows in the planned files) "
            f"in {scan_s:.2f} s"
        )
        started = time.perf_counter()
        everything = await table.scan(selected_fields=("id", "amount")).to_arrow()
        full_s = time.perf_counter() - started
        say(
            f"7. full scan of 2 columns: {everything.num_rows:,} rows in {full_s:.2f} s "
            f"({everything.num_rows / full_s / 1e6:.1f}M rows/s)"
        )
        say(f"   {len(table.snapshots())} snapshots; try: aioiceberg history {table_name}")
    say(f"[bold]done[/bold] in {time.perf_counter() - total_started:.1f} s")


def _summary(table: aioiceberg.Table, key: str) -> str:
    snap = table.current_snapshot()
    value = snap.summary.get(key) if snap is not None and snap.summary is not None else None
    return value or "0"


def _total(table: aioiceberg.Table) -> int:
    return int(_summary(table, "total-records"))
