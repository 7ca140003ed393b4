"""Views decoded while the caller was busy reach it joined, as one batch, holding what each
manifest's batch would hold."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.scan import ManifestCache, ManifestListCache, PlanMetrics
from aioiceberg.scan.pipeline import JOIN_MIN_ROWS, LazyTasks
from aioiceberg.scan.task_batches import TASK_SCHEMA, batch_of_rows, task_batch
from aioiceberg.spec.manifest.columnar import ColumnarRows
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.table import Table

MANIFESTS = 8


def _caches(**kw: Any) -> dict[str, Any]:
    return {
        "cache": ManifestCache(),
        "manifest_list_cache": ManifestListCache(),
        "columnar_min_entries": 0,
        **kw,
    }


async def _table(tmp_path: Path, partition_by: list[str], version: int = 2) -> Table:
    """``MANIFESTS`` appends (a manifest each) of 12 files."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("k", pa.int32()), pa.field("s", pa.string())])
    table = await catalog.create_table(
        "db.t", schema=schema, partition_by=partition_by, format_version=version
    )
    for m in range(MANIFESTS):
        ids = list(range(m * 12, m * 12 + 12))
        data = pa.table(
            {
                "id": ids,
                "k": [None if i % 5 == 0 else (i * 7 + m) % 4 - 1 for i in ids],
                "s": [f"v{(i + m) % 3}" for i in ids],
            },
            schema=schema,
        )
        await table.append(data)
    return table


async def _parts(table: Table, text: str | None) -> tuple[Any, list[ColumnarRows]]:
    """The plan's views as columns, one per manifest (whatever batches they came in)."""
    scan = table.scan(row_filter=text, **_caches())
    views: list[ColumnarRows] = []
    async with aclosing(scan.plan_files().batches()) as batches:
        async for seq in batches:
            assert isinstance(seq, LazyTasks) and isinstance(seq.entries, ColumnarRows)
            views.extend(ColumnarRows((part,), seq.entries.spec_id) for part in seq.entries.parts)
    return scan.planner, views


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("partition_by", "version"),
    [(["k"], 2), (["k", "bucket(3, id)"], 3), ([], 2), (["s"], 2), (["k", "s"], 3)],
    ids=["int", "int-bucket-v3", "unpartitioned", "string", "int-string-v3"],
)
async def test_a_joined_batch_equals_its_manifests_batches(
    tmp_path: Path, partition_by: list[str], version: int
) -> None:
    """Integer partitions are grouped once for all the manifests; other values, per manifest
    and then joined; kept rows taken (a filter) or all of them; row ids of v3."""
    table = await _table(tmp_path, partition_by, version)
    for text in [None, "id > 20", "k = 1 OR id < 5", "s = 'v1'"]:
        planner, views = await _parts(table, text)
        assert len(views) >= 2, text
        each = [task_batch(planner, LazyTasks(planner.tasks, view)) for view in views]
        parts = [part for view in views for part in view.parts]
        joined = ColumnarRows(parts, views[0].spec_id)
        got = task_batch(planner, LazyTasks(planner.tasks, joined))
        assert got.schema == TASK_SCHEMA
        assert pa.Table.from_batches([got]).equals(pa.Table.from_batches(each, schema=TASK_SCHEMA)), text
        # and as the rows' batch renders them
        rows = batch_of_rows(planner, EntryRows(ColumnarRows(parts, views[0].spec_id).rows, views[0].spec_id))
        assert got.equals(rows), text


@pytest.mark.anyio
async def test_a_slow_caller_takes_what_was_decoded_meanwhile_in_one_batch(tmp_path: Path) -> None:
    """Once every manifest is decoded while the caller holds its first batch, the rest come
    as one batch; the rows are the plan's tasks."""
    table = await _table(tmp_path, ["k"])
    metrics = PlanMetrics()
    scan = table.scan(**_caches())
    batches: list[pa.RecordBatch] = []
    async with aclosing(scan.plan_batches(metrics)) as stream:
        async for batch in stream:
            batches.append(batch)
            for _ in range(500):  # until the other manifests are decoded (or 5 s)
                if metrics.manifests_read == MANIFESTS:
                    break
                await asyncio.sleep(0.01)
    assert metrics.manifests_read == MANIFESTS
    assert len(batches) == 2
    tasks = [t async for t in table.scan(**_caches()).plan_files()]
    assert sorted(p for b in batches for p in b.column("file_path").to_pylist()) == sorted(
        t.file.file_path for t in tasks
    )


@pytest.mark.anyio
async def test_batches_after_the_first_wait_for_a_few_manifests(tmp_path: Path) -> None:
    """A caller as fast as the plan gets its first batch at once and then batches of at
    least JOIN_MIN_ROWS tasks, or all the plan has left: here, all of it in one."""
    assert MANIFESTS * 12 < JOIN_MIN_ROWS
    table = await _table(tmp_path, ["k"])
    batches = [b async for b in table.scan(**_caches()).plan_batches()]
    assert len(batches) <= 2
    tasks = [t async for t in table.scan(**_caches()).plan_files()]
    assert sum(b.num_rows for b in batches) == len(tasks) >= MANIFESTS
