"""Planning from memory: manifests kept decoded answer filters they have never seen.

A runtime keeps each manifest the columnar decoder read as its columns with every stat;
a later plan under any filter prunes them without a fetch or a decode, all manifests at
once when every one it needs is held. Each case compares the warm plan's files with a
plan of a fresh cache (which decodes from the files), so the test fails if memory and
the files disagree.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aioiceberg.io import FileIO, LocalFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, day_range, filters

FILTERS = [
    "",
    "id = 4001000",
    "id = 1",
    "id >= 2000000 AND id < 2100000",
    "id < 5000 OR id > 11000000",
    "c0 < 30",
    "c0 >= 30 AND c0 < 50",
    "NOT (c0 < 100)",
    "id IN (4001000, 9000000, 17000)",
    "id NOT IN (4001000)",
    "c1 IS NULL",
    "c1 IS NOT NULL",
    "c4 = 'a00000003'",
    "c4 > 'y'",
    "c4 < 'a00000010'",
    "c4 LIKE 'a0000001%'",
    "c5 = 'ab'",
    "c2 > 10.5",
    "c2 < 3 OR c3 IS NAN",
    "c3 > 1.0",
    "ts >= '2022-01-10T00:00:00+00:00' AND id > 3000000",
]


def _polars_warm() -> None:
    default_runtime().columnar_done.wait(30)


async def _all_decoded(io: FileIO, md: TableMetadata, kw: dict[str, Any], manifests: int) -> None:
    """Plan until the cache holds every manifest decoded. A lone manifest decoded by fastavro
    while polars warms up (a cold process's first) is kept as a view only; the next plan that
    needs it decodes it again, columnar, and keeps it."""
    for attempt in range(3):
        _, scan = await _plan(io, md, f"c0 < {-attempt}", **kw)
        if scan.metrics.manifests_read == 0:
            break
        await asyncio.to_thread(_polars_warm)
    assert scan.metrics.manifests_read == 0
    decoded = [k for k in kw["cache"]._items if k[2] == "decoded"]
    assert len(decoded) == manifests


def _caches(**kw: Any) -> dict[str, Any]:
    return {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache(), "decode_workers": 0, **kw}


async def _table(tmp_path: Path, manifests: int, entries: int) -> tuple[FileIO, TableMetadata]:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", manifests, entries)
    return io, parse_table_metadata(await io.read(meta), meta)


async def _plan(
    io: FileIO, md: TableMetadata, text: str, **kw: Any
) -> tuple[list[tuple[str, int]], TableScan]:
    scan = TableScan(io, md, text, **kw)
    return sorted([(t.file.file_path, t.file.record_count) async for t in scan.plan_files()]), scan


@pytest.mark.anyio
@pytest.mark.parametrize("vectorized", [True, False], ids=["bulk", "per-entry"])
@pytest.mark.parametrize(("manifests", "entries"), [(12, 30), (3, 1200)], ids=["batched", "ahead"])
async def test_new_filters_are_pruned_from_memory(
    tmp_path: Path, manifests: int, entries: int, vectorized: bool
) -> None:
    """Small manifests decoded in batches (parts of a shared batch) and big ones whose first
    blocks were decoded apart (two parts) alike, pruned in bulk or entry by entry."""
    io, md = await _table(tmp_path, manifests, entries)
    kw = _caches(vectorized=vectorized)
    warm_up, _ = await _plan(io, md, "", **kw)
    assert len(warm_up) == manifests * entries
    await _all_decoded(io, md, kw, manifests)
    tried = 0
    for text in [*FILTERS, *filters(manifests, entries).values(), day_range(1, 1)]:
        tried += 1
        got, scan = await _plan(io, md, text, **kw)
        m = scan.metrics
        assert m.manifests_read == 0 and m.bytes_fetched == 0, text
        assert m.manifests_from_cache + m.manifests_skipped_by_summaries == manifests, text
        expected, fresh = await _plan(io, md, text, **_caches())
        assert got == expected, text
        assert fresh.metrics.manifests_read > 0 or not expected
        # what the metrics count agrees: the same entries read and the same kept
        f = fresh.metrics
        assert (m.entries_read, m.files_kept) == (f.entries_read, f.files_kept), text
    assert tried == len(FILTERS) + 5


@pytest.mark.anyio
async def test_a_cache_too_small_for_the_table_still_plans_right(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 12, 30)
    kw = _caches(cache=ManifestCache(max_bytes=200_000))
    await _plan(io, md, "", **kw)
    for text in ("id = 4001000", "c0 < 30", ""):
        got, _ = await _plan(io, md, text, **kw)
        expected, _ = await _plan(io, md, text, **_caches())
        assert got == expected, text
    assert kw["cache"].size_bytes <= 200_000


@pytest.mark.anyio
async def test_a_small_table_in_memory_is_planned_without_stages(tmp_path: Path) -> None:
    """Few entries held decoded: pruned on the loop, no pipeline, nothing kept per filter."""
    io, md = await _table(tmp_path, 12, 30)
    kw = _caches()
    await _plan(io, md, "", **kw)
    await _all_decoded(io, md, kw, 12)
    cache: ManifestCache = kw["cache"]
    before = set(cache._items)
    text = filters(12, 30)["id_eq"]
    first, scan = await _plan(io, md, text, **kw)
    assert scan.metrics.from_cache and len(first) == 1
    again, scan = await _plan(io, md, text, **kw)
    assert again == first and scan.metrics.from_cache
    # the decoded manifests and a merge of them: no view per filter
    assert {k[2] for k in set(cache._items) - before} <= {"merged"}


@pytest.mark.anyio
async def test_plans_with_deletes_or_splits_from_memory_match_a_fresh_plan(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 6, 40)
    kw = _caches()
    await _plan(io, md, "", **kw)
    await _all_decoded(io, md, kw, 6)
    for extra in ({"split_size": 1 << 20}, {"limit": 2500}):
        got, scan = await _plan(io, md, "c0 < 100", **kw, **extra)
        expected, _ = await _plan(io, md, "c0 < 100", **_caches(), **extra)
        assert scan.metrics.manifests_read == 0
        if "limit" in extra:
            assert len(got) == len(expected)  # the first files that hold enough rows
        else:
            assert got == expected


@pytest.mark.anyio
async def test_plans_at_once_on_a_cold_table_decode_each_manifest_once(tmp_path: Path) -> None:
    """Concurrent plans missing the same manifests: one fetches and decodes each, the others
    wait and prune what it kept."""
    io, md = await _table(tmp_path, 12, 30)
    kw = _caches()
    texts = [f"c0 < {10 * k + 5}" for k in range(8)]
    results = await asyncio.gather(*(_plan(io, md, text, **kw) for text in texts))
    read = sum(scan.metrics.manifests_read for _, scan in results)
    # each manifest once (a lone one decoded by fastavro while polars warms up is kept as a
    # view only, and may be read again by each plan)
    assert 12 <= read <= 12 + len(texts)
    for text, (got, _) in zip(texts, results, strict=True):
        expected, _ = await _plan(io, md, text, **_caches())
        assert got == expected, text
    assert not kw["cache"]._loading  # every load ended


@pytest.mark.anyio
async def test_a_view_of_most_of_a_manifest_is_not_kept_as_rows(tmp_path: Path) -> None:
    """When a manifest's columns do not fit the plan's half of the cache, an unfiltered view
    (every entry) is not built into rows to be kept, while a selective filter's view is."""
    io, md = await _table(tmp_path, 4, 600)
    probe = _caches()
    await _plan(io, md, "", **probe)
    decoded = [v for k, v in probe["cache"]._items.items() if k[2] == "decoded"]
    assert len(decoded) == 4
    # the plan's half of the cache holds two manifests' columns (~684 KB each), then room for
    # a third's rows (~380 KB) but not its columns
    column_bytes = max(v.size for v in decoded)
    kw = _caches(cache=ManifestCache(max_bytes=2 * (2 * column_bytes + 500_000)))
    everything, _ = await _plan(io, md, "", **kw)
    assert len(everything) == 4 * 600
    kept = kw["cache"]._items
    assert len(kept) == 2, "two manifests' columns, and no unfiltered view kept as rows"
    text = "id = 4001000"
    got, _ = await _plan(io, md, text, **kw)
    expected, _ = await _plan(io, md, text, **_caches())
    assert got == expected
    views = [v for k, v in kw["cache"]._items.items() if k[2] != "decoded"]
    assert views and all(len(v.entries) * 4 < v.entries_read for v in views)


async def _tasks(io: FileIO, md: TableMetadata, text: str, **kw: Any) -> tuple[list[str], TableScan]:
    """Every field of every task (its data file's whole record included), sorted."""
    scan = TableScan(io, md, text, **kw)
    return sorted([repr(t) async for t in scan.plan_files()]), scan


@pytest.mark.anyio
@pytest.mark.parametrize(("manifests", "entries"), [(12, 30), (3, 1200)], ids=["batched", "whole"])
async def test_a_plan_reading_no_metrics_skips_them_only_where_the_cache_keeps_nothing(
    tmp_path: Path, manifests: int, entries: int
) -> None:
    """An unfiltered plan keeps no stats on its tasks, so manifests the cache will not keep
    are decoded without their metric maps. Its tasks are the same whatever the cache holds;
    what the cache holds is whole (any later filter plans as from the files); and with room
    for some manifests only, some are decoded each way."""
    io, md = await _table(tmp_path, manifests, entries)
    everything, big = await _tasks(io, md, "", **_caches())
    assert len(everything) == manifests * entries and big.metrics.decoded_without_stats == 0
    per_manifest = entries * 1200  # ~what one manifest's columns hold in the cache
    mixed = 0
    for max_bytes in (0, 2 * per_manifest, 5 * per_manifest):
        kw = _caches(cache=ManifestCache(max_bytes=max_bytes))
        got, scan = await _tasks(io, md, "", **kw)
        m = scan.metrics
        assert got == everything, max_bytes
        assert 0 < m.decoded_without_stats <= m.manifests_read == manifests, max_bytes
        if max_bytes == 0:
            assert m.decoded_without_stats == manifests
        mixed += m.decoded_without_stats < m.manifests_read
        for text in ("id = 4001000", "c0 < 30", "c4 > 'y'"):
            got, _ = await _tasks(io, md, text, **kw)
            expected, _ = await _tasks(io, md, text, **_caches())
            assert got == expected, (max_bytes, text)
    assert mixed, "no cache size gave a plan that decoded some manifests each way"
    # a plan that reads metrics (a filter, or stats kept on its tasks) decodes them all
    for text, extra in (("c0 < 1000", {}), ("", {"include_column_stats": True})):
        _, scan = await _tasks(io, md, text, **_caches(cache=ManifestCache(max_bytes=0)), **extra)
        assert scan.metrics.decoded_without_stats == 0 and scan.metrics.manifests_read == manifests
