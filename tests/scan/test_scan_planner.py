"""Planner behaviour on synthetic tables: streaming, caching, metrics, deletes, decoders."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from benchmark_runs import run_tiny
from loop_helpers import loop_ticks

from aioiceberg.errors import NotFoundError, ValidationError
from aioiceberg.io import FileIO, LocalFileIO, MemoryFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.scan import decode as decode_module
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from aioiceberg.spec.metadata import Operation, Snapshot, SnapshotLogEntry, Summary, TableMetadata
from aioiceberg.spec.metadata_json import new_table_metadata, parse_table_metadata
from aioiceberg.spec.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import LongType, NestedField, StringType
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, filters

ROOT = Path(__file__).resolve().parents[2]


def _fresh(**kw: Any) -> dict[str, Any]:
    return {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache(), "decode_workers": 0, **kw}


async def _table(tmp_path: Path, manifests: int = 12, entries: int = 30) -> tuple[FileIO, TableMetadata]:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", manifests, entries)
    return io, parse_table_metadata(await io.read(meta), meta)


async def _paths(scan: TableScan) -> list[str]:
    return [t.file.file_path async for t in scan.plan_files()]


@pytest.mark.anyio
async def test_metrics_count_what_was_skipped_and_read(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 12, 30)
    text = filters(12, 30)["day_1pct"]  # one day of twelve
    scan = TableScan(io, md, text, **_fresh())
    paths = await _paths(scan)
    m = scan.metrics
    assert len(paths) == 30
    assert (m.manifests_total, m.manifests_skipped_by_summaries, m.manifests_read) == (12, 11, 1)
    assert m.entries_read == 30 and m.tasks == 30
    assert m.bytes_fetched > 0 and m.time_to_first_task_s is not None
    scan = TableScan(io, md, filters(12, 30)["id_eq"], **_fresh())
    assert len(await _paths(scan)) == 1
    m = scan.metrics
    assert m.manifests_read == 12 and m.entries_read == 360
    assert m.entries_skipped_by_partition + m.entries_skipped_by_metrics == 359
    assert m.entries_skipped_by_partition > 0 and m.entries_skipped_by_metrics > 0


@pytest.mark.anyio
async def test_second_plan_of_a_snapshot_comes_from_the_cache(tmp_path: Path) -> None:
    io, md = await _table(tmp_path)
    kw = _fresh()
    first = TableScan(io, md, "c0 < 1000", **kw)
    expected = await _paths(first)
    second = TableScan(io, md, "c0 < 1000", **kw)
    assert await _paths(second) == expected or sorted(await _paths(second)) == sorted(expected)
    assert second.metrics.manifest_list_from_cache
    assert second.metrics.manifests_from_cache == 12 and second.metrics.manifests_read == 0
    assert second.metrics.bytes_fetched == 0
    # another filter is pruned from the manifests kept decoded: nothing is fetched or decoded,
    # and it keeps what a plan of a fresh runtime keeps
    other = TableScan(io, md, "c0 >= 1000", **kw)
    got = await _paths(other)
    assert other.metrics.manifests_read == 0 and other.metrics.manifests_from_cache == 12
    assert other.metrics.bytes_fetched == 0
    fresh = TableScan(io, md, "c0 >= 1000", **_fresh())
    assert sorted(got) == sorted(await _paths(fresh)) and fresh.metrics.manifests_read == 12
    assert set(got).isdisjoint(expected) and len(got) + len(expected) == 360


@pytest.mark.anyio
async def test_a_cached_repeat_yields_the_tasks_the_first_plan_built(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 6, 20)
    kw = _fresh()
    for text in ("", "c0 < 1000"):
        first = [t async for t in TableScan(io, md, text, **kw).plan_files()]
        again = TableScan(io, md, text, **kw)
        second = [t async for t in again.plan_files()]
        assert again.metrics.manifests_from_cache == 6 and again.metrics.manifests_read == 0
        assert again.metrics.tasks == len(first)
        # equal tasks, built afresh from the cached rows (a view keeps no task objects)
        key = lambda t: t.file.file_path  # noqa: E731
        assert sorted(second, key=key) == sorted(first, key=key)
        assert not {id(t) for t in second} & {id(t) for t in first}
        assert all(t.delete_files == () and t.start == 0 and t.length is None for t in second)
    # splitting is not memoised: the same cached view gives split tasks when asked
    split = [t async for t in TableScan(io, md, **{**kw, "split_size": 1 << 20}).plan_files()]
    assert len(split) == 3 * 6 * 20 and {t.length for t in split} != {None}
    # nor is a plan with a limit different: it stops after enough rows from the memo too
    limited = TableScan(io, md, limit=2500, **{**kw, "io_concurrency": 1, "channel_size": 1})
    assert len(await _paths(limited)) == 3


@pytest.mark.anyio
@pytest.mark.parametrize("owned", [False, True], ids=["async-for", "async-with"])
async def test_a_plan_the_caches_hold_is_decided_without_stages(tmp_path: Path, owned: bool) -> None:
    """A hot table's repeat starts no pipeline task and counts what the stages would count;
    with one view missing it goes on through the stages from the same choice, counting once."""
    io, md = await _table(tmp_path, 12, 30)
    kw = _fresh()
    text = "c0 < 1000"
    first = TableScan(io, md, text, **kw)
    expected = sorted(await _paths(first))

    async def plan(scan: TableScan) -> tuple[list[str], int]:
        """The paths, and the most tasks alive beside this one while they came."""
        paths, most, base = [], 0, _live_tasks()
        async with contextlib.AsyncExitStack() as stack:
            stream = scan.plan_files()
            tasks = await stack.enter_async_context(stream) if owned else stream
            async for t in tasks:
                paths.append(t.file.file_path)
                most = max(most, len(_live_tasks() - base))
        return paths, most

    again = TableScan(io, md, text, **kw)
    paths, alive = await plan(again)
    assert sorted(paths) == expected and alive == 0
    m, f = again.metrics, first.metrics
    assert (m.manifests_total, m.manifests_skipped_by_summaries) == (
        f.manifests_total,
        f.manifests_skipped_by_summaries,
    )
    assert (m.manifests_from_cache, m.manifests_read, m.tasks) == (f.manifests_read, 0, len(expected))
    assert m.manifest_list_from_cache and m.time_to_first_task_s is not None and m.planning_time_s is not None
    # one manifest gone (decoded and its views): the stages read it, the rest comes from the
    # cache, nothing counted twice
    cache = kw["cache"]
    evicted = next(iter(cache._items))[:2]
    for key in [k for k in cache._items if k[:2] == evicted]:
        del cache._items[key]
    partial = TableScan(io, md, text, **kw)
    paths, _ = await plan(partial)
    assert sorted(paths) == expected
    m = partial.metrics
    assert (m.manifests_total, m.manifests_from_cache, m.manifests_read) == (12, 11, 1)


@pytest.mark.anyio
async def test_a_plan_decided_from_the_caches_lets_the_loop_run_between_manifests(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 12, 30)
    kw = _fresh()
    await _paths(TableScan(io, md, **kw))
    seen = []
    async with loop_ticks() as ticks:
        async for _ in TableScan(io, md, **kw).plan_files():
            seen.append(ticks.count)
    assert len(seen) == 360 and seen[-1] - seen[0] >= 11  # at least once a manifest


@pytest.mark.anyio
async def test_a_streaming_plan_builds_each_task_as_it_is_taken(tmp_path: Path) -> None:
    """A caller that drops each task holds one at a time: none lives on in a view or a batch
    (where the cycle collector would promote it and walk it at every full collection)."""
    io, md = await _table(tmp_path, 6, 50)
    where = str(tmp_path)
    kw = _fresh()
    for cached in (False, True):  # the first plan fills the cache, the repeat reads it
        live: list[int] = []
        n = 0
        scan = TableScan(io, md, **kw)
        async for task in scan.plan_files():
            n += 1
            if n % 25 == 0:
                live.append(
                    sum(
                        1
                        for o in gc.get_objects()
                        if isinstance(o, FileScanTask) and where in o.file.file_path
                    )
                )
            del task
        assert n == 300 and live and max(live) == 1, (cached, live)
        assert scan.metrics.manifests_from_cache == (6 if cached else 0)


@pytest.mark.anyio
async def test_cached_views_with_deletes_do_not_reuse_delete_free_tasks() -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType()))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, parse_transform("identity"), "cat"),))
    md = new_table_metadata(schema, spec, UNSORTED, f"memory://t-{uuid.uuid4().hex}", {}, 2)
    D, P = DataFileContent.DATA, DataFileContent.POSITION_DELETES
    md = await _commit(io, md, [([_file("a1", D, ("a",), 0)], spec, ManifestContent.DATA)])
    kw = _fresh()
    before = [t async for t in TableScan(io, md, **kw).plan_files()]
    assert [t.delete_files for t in before] == [()]
    md = await _commit(io, md, [([_file("pos-a-2", P, ("a",), 0)], spec, ManifestContent.DELETES)])
    after = [t async for t in TableScan(io, md, **kw).plan_files()]
    # the data manifest's view came from the cache, its tasks did not
    assert [[d.file_path for d in t.delete_files] for t in after] == [["pos-a-2"]]


def test_cache_keys_on_length_as_well_as_path() -> None:
    from aioiceberg.scan.cache import CachedManifest

    cache = ManifestCache(max_bytes=10_000)
    cache.put("s3://b/m.avro", 100, "v", CachedManifest((), 0, 0, 0, 10))
    assert cache.get("s3://b/m.avro", 100, "v") is not None
    assert cache.get("s3://b/m.avro", 101, "v") is None
    for i in range(100):  # the byte bound evicts least recently used views
        cache.put(f"p{i}", 1, "v", CachedManifest((), 0, 0, 0, 1000))
    assert cache.size_bytes <= 10_000 and cache.get("s3://b/m.avro", 100, "v") is None


@pytest.mark.anyio
async def test_a_plan_bigger_than_half_the_cache_keeps_its_first_manifests(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 12, 30)
    # one manifest's view, as the plan's decoder (fastavro or columnar) holds it
    roomy = ManifestCache(max_bytes=1 << 30)
    await _paths(TableScan(io, md, **{**_fresh(io_concurrency=1), "cache": roomy}))
    assert len(roomy) == 12
    one = roomy.size_bytes // 12
    cache = ManifestCache(max_bytes=one * 9)  # half holds four of the twelve views
    kw = {**_fresh(io_concurrency=1), "cache": cache}
    first = TableScan(io, md, **kw)
    expected = sorted(await _paths(first))
    assert len(cache) == 4 and cache.size_bytes <= cache.max_bytes // 2
    second = TableScan(io, md, **kw)
    assert sorted(await _paths(second)) == expected
    assert second.metrics.manifests_from_cache == 4 and second.metrics.manifests_read == 8
    assert len(cache) == 4  # the repeat does not evict what it found


def test_cache_estimate_counts_empty_metric_maps() -> None:
    from aioiceberg.scan.cache import estimate_size

    def entry(stats: dict[int, Any] | None) -> ManifestEntry:
        f = DataFile(DataFileContent.DATA, "p", FileFormat.PARQUET, (), 1, 1, *([stats] * 6))
        return ManifestEntry(ManifestEntryStatus.ADDED, 1, 1, 1, f)

    bare, empty, full = (estimate_size([entry(s)] * 100) for s in (None, {}, dict.fromkeys(range(10), 5)))
    # six empty dicts are ~400 bytes an entry: no longer counted as nothing
    assert bare + 100 * 6 * 64 <= empty < full


class _GatedIO(LocalFileIO):
    """Local files, but reads of ``gated`` paths wait until the test opens the gate."""

    def __init__(self, gated: set[str]) -> None:
        super().__init__(fsync=False)
        self.gated = gated
        self.gate = anyio.Event()

    async def read(self, location: str) -> bytes:
        if location in self.gated:
            await self.gate.wait()
        return await super().read(location)

    async def read_range(self, location: str, start: int, length: int) -> bytes:
        if location in self.gated:
            await self.gate.wait()
        return await super().read_range(location, start, length)


@pytest.mark.anyio
async def test_first_task_arrives_before_the_last_manifest_is_read(tmp_path: Path) -> None:
    _, md = await _table(tmp_path, 6, 10)
    snap = md.current_snapshot()
    assert snap is not None
    scan0 = TableScan(LocalFileIO(fsync=False).bind_runtime(default_runtime()), md, **_fresh())
    last = (await scan0.planner.manifests())[-1].manifest_path
    io = _GatedIO({last}).bind_runtime(default_runtime())
    scan = TableScan(io, md, **_fresh(io_concurrency=2))
    async with contextlib.aclosing(scan.plan_files()) as tasks:
        first = await tasks.__anext__()  # the gate is shut: this returns only if planning streams
        assert first.file.file_path and not io.gate.is_set()
        io.gate.set()
        rest = [t async for t in tasks]
    assert len(rest) == 59


@pytest.mark.anyio
async def test_closing_early_stops_the_pipeline(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 8, 20)
    scan = TableScan(io, md, **_fresh(io_concurrency=1, channel_size=1))
    async with contextlib.aclosing(scan.plan_files()) as tasks:
        async for _ in tasks:
            break
    assert scan.metrics.manifests_read < 8


@pytest.mark.anyio
async def test_process_columnar_and_thread_decoding_agree(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 8, 40)
    decoder = io.runtime.decoder(2)
    decoder.start()
    deadline = time.monotonic() + 240  # a bound under the suite's 300 s timeout, not a timing check
    while not decoder.warm and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert decoder.warm, "the worker processes never answered"
    for name, text in filters(8, 40).items():
        threaded = TableScan(io, md, text, **_fresh(columnar=False))
        procs = TableScan(io, md, text, **_fresh(decode_workers=2, process_threshold_bytes=0, columnar=False))
        columnar = TableScan(io, md, text, **_fresh(decode_workers=2, columnar_min_entries=0))
        a = sorted([(t.file.file_path, str(t.residual)) async for t in threaded.plan_files()])
        b = sorted([(t.file.file_path, str(t.residual)) async for t in procs.plan_files()])
        c = sorted([(t.file.file_path, str(t.residual)) async for t in columnar.plan_files()])
        assert a == b == c, name
        assert procs.metrics.decoded_in_processes == procs.metrics.manifests_read
        assert columnar.metrics.decoded_columnar == columnar.metrics.manifests_read
        assert threaded.metrics.decoded_columnar == 0
        for m in (procs.metrics, columnar.metrics):
            assert (m.entries_read, m.entries_skipped_by_partition, m.entries_skipped_by_metrics) == (
                threaded.metrics.entries_read,
                threaded.metrics.entries_skipped_by_partition,
                threaded.metrics.entries_skipped_by_metrics,
            )


class _DoneAtOnce:
    """A stand-in pool whose jobs are finished before ``submit`` returns."""

    def __init__(self, max_workers: int, mp_context: Any) -> None:
        self.submitted = 0

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(fn(*args))
        self.submitted += 1
        return fut

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def test_decoder_start_with_workers_that_answer_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm-up jobs already done when their callbacks are added (what heavy load makes
    likely) used to deadlock ``start()``: the callback ran in the caller, under its lock."""
    monkeypatch.setattr(decode_module, "ProcessPoolExecutor", _DoneAtOnce)
    decoder = decode_module.Decoder(2)
    starter = threading.Thread(target=decoder.start, args=(True,), daemon=True)
    starter.start()
    starter.join(60)  # a guard against hanging the suite, not a timing check
    assert not starter.is_alive(), "Decoder.start() deadlocked"
    assert decoder.warm
    decoder.start()  # idempotent
    decoder.shutdown()
    assert not decoder.warm


class _SlowToStart(_DoneAtOnce):
    """A stand-in pool whose creation blocks until the test lets it finish (as a real one
    blocks until the forkserver has imported its preload)."""

    gate: ClassVar[threading.Event] = threading.Event()
    created: ClassVar[list[_SlowToStart]] = []

    def __init__(self, max_workers: int, mp_context: Any) -> None:
        super().__init__(max_workers, mp_context)
        self.closed = False
        _SlowToStart.gate.wait(60)
        _SlowToStart.created.append(self)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self.closed = True


def _wait_until(condition: Any) -> bool:
    deadline = time.monotonic() + 60  # a guard against hanging the suite, not a timing check
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


def test_decoder_start_does_not_wait_for_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_module, "ProcessPoolExecutor", _SlowToStart)
    monkeypatch.setattr(_SlowToStart, "gate", threading.Event())
    monkeypatch.setattr(_SlowToStart, "created", [])
    decoder = decode_module.Decoder(2)
    decoder.start()  # returns while the pool is still being created
    assert not decoder.warm and not _SlowToStart.created
    decoder.start()  # already starting: no second pool
    _SlowToStart.gate.set()
    assert _wait_until(lambda: decoder.warm)
    assert len(_SlowToStart.created) == 1
    decoder.shutdown()
    assert _SlowToStart.created[0].closed and not decoder.warm


def test_decoder_shut_down_while_starting_closes_the_late_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_module, "ProcessPoolExecutor", _SlowToStart)
    monkeypatch.setattr(_SlowToStart, "gate", threading.Event())
    monkeypatch.setattr(_SlowToStart, "created", [])
    decoder = decode_module.Decoder(2)
    decoder.start()
    decoder.shutdown()  # before the pool exists
    decoder.start()  # a new start is not confused with the abandoned one
    _SlowToStart.gate.set()
    created = _SlowToStart.created
    assert _wait_until(lambda: len(created) == 2 and decoder.warm and any(p.closed for p in created))
    closed = [p.closed for p in created]
    assert sorted(closed) == [False, True]  # the abandoned pool was closed, the new one kept
    decoder.shutdown()


@pytest.mark.anyio
async def test_split_offsets_split_large_files_into_tasks(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 1, 3)
    scan = TableScan(io, md, **_fresh(split_size=1 << 19))
    tasks = [t async for t in scan.plan_files()]
    assert len(tasks) == 3 * 4
    by_file: dict[str, list[tuple[int, int | None]]] = {}
    for t in tasks:
        by_file.setdefault(t.file.file_path, []).append((t.start, t.length))
    for path, ranges in by_file.items():
        size = next(t.file.file_size_in_bytes for t in tasks if t.file.file_path == path)
        ranges.sort()
        assert ranges[0][0] == 4 and sum(length or 0 for _, length in ranges) == size - 4
    whole = [t async for t in TableScan(io, md, **_fresh(split_size=1 << 30)).plan_files()]
    assert len(whole) == 3 and all(t.length is None and t.start == 0 for t in whole)


@pytest.mark.anyio
async def test_limit_stops_after_enough_rows(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 6, 10)
    scan = TableScan(io, md, limit=2500, **_fresh(io_concurrency=1, channel_size=1))
    assert len(await _paths(scan)) == 3  # 1000 rows per file


@pytest.mark.anyio
async def test_snapshot_selection_errors_are_clear(tmp_path: Path) -> None:
    io, md = await _table(tmp_path, 1, 1)
    with pytest.raises(NotFoundError, match="snapshot 42"):
        TableScan(io, md, snapshot_id=42)
    with pytest.raises(NotFoundError, match="no branch or tag named 'nope'"):
        TableScan(io, md, ref="nope")
    with pytest.raises(NotFoundError, match="no snapshot was current"):
        TableScan(io, md, as_of=1)
    with pytest.raises(ValidationError, match="at most one"):
        TableScan(io, md, snapshot_id=1, ref="main")
    assert len(await _paths(TableScan(io, md, ref="main", **_fresh()))) == 1


@pytest.mark.anyio
async def test_empty_table_plans_nothing() -> None:
    schema = Schema(NestedField(1, "id", LongType()))
    md = new_table_metadata(schema, UNPARTITIONED, UNSORTED, "memory://empty", {}, 2)
    assert (
        await _paths(TableScan(MemoryFileIO().bind_runtime(default_runtime()), md, "id = 1", **_fresh()))
        == []
    )


# -- equality and position deletes by sequence number ------------------------------------------


def _file(
    path: str, content: DataFileContent, partition: tuple[Any, ...], spec_id: int, **kw: Any
) -> DataFile:
    return DataFile(content, path, FileFormat.PARQUET, partition, 10, 100, spec_id=spec_id, **kw)


async def _commit(
    io: FileIO, md: TableMetadata, manifests: list[tuple[list[DataFile], PartitionSpec, ManifestContent]]
) -> TableMetadata:
    """One snapshot adding one manifest per group, on top of the current one."""
    from aioiceberg.spec.manifest import read_manifest_list

    parent = md.current_snapshot()
    old = []
    if parent is not None and parent.manifest_list is not None:
        old = read_manifest_list(await io.read(parent.manifest_list))
    snapshot_id = (parent.snapshot_id + 1) if parent else 1
    seq = md.last_sequence_number + 1
    new = []
    for files, spec, content in manifests:
        entries = [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in files]
        path = f"{md.location}/m-{uuid.uuid4().hex}.avro"
        data, mf = write_manifest(entries, spec, md.schema(), 2, snapshot_id, content, manifest_path=path)
        await io.write(path, data)
        new.append(mf)
    lpath = f"{md.location}/snap-{snapshot_id}.avro"
    parent_id = parent.snapshot_id if parent else None
    await io.write(lpath, write_manifest_list([*old, *new], 2, snapshot_id, parent_id, seq))
    snap = Snapshot(snapshot_id, parent_id, seq, 1000 * seq, lpath, Summary(Operation.APPEND), 0)
    return md.replace(
        snapshots=(*md.snapshots, snap),
        current_snapshot_id=snapshot_id,
        last_sequence_number=seq,
        snapshot_log=(*md.snapshot_log, SnapshotLogEntry(snapshot_id, 1000 * seq)),
    )


@pytest.mark.anyio
async def test_delete_files_apply_by_sequence_number_partition_and_path() -> None:
    io = MemoryFileIO().bind_runtime(default_runtime())
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType()))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, parse_transform("identity"), "cat"),))
    md = new_table_metadata(schema, spec, UNSORTED, f"memory://t-{uuid.uuid4().hex}", {}, 2)
    unpartitioned = PartitionSpec(1, ())
    md = md.replace(partition_specs=(*md.partition_specs, unpartitioned))
    D, P, E = DataFileContent.DATA, DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES
    md = await _commit(
        io, md, [([_file("a1", D, ("a",), 0), _file("b1", D, ("b",), 0)], spec, ManifestContent.DATA)]
    )
    path_lo = {2147483546: b"a1"}
    md = await _commit(
        io,
        md,
        [
            (
                [
                    _file("eq-a-2", E, ("a",), 0, equality_ids=(1,)),
                    _file("pos-a-2", P, ("a",), 0, lower_bounds=path_lo, upper_bounds=path_lo),
                ],
                spec,
                ManifestContent.DELETES,
            ),
            ([_file("eq-global-2", E, (), 1, equality_ids=(1,))], unpartitioned, ManifestContent.DELETES),
        ],
    )
    md = await _commit(
        io,
        md,
        [
            ([_file("a3", D, ("a",), 0)], spec, ManifestContent.DATA),
            (
                [_file("pos-a-3", P, ("a",), 0), _file("eq-a-3", E, ("a",), 0, equality_ids=(1,))],
                spec,
                ManifestContent.DELETES,
            ),
        ],
    )
    scan = TableScan(io, md, **_fresh())
    got = {t.file.file_path: sorted(d.file_path for d in t.delete_files) async for t in scan.plan_files()}
    assert got == {
        # seq 1: every later delete of its partition, the global one, the path-bound one
        "a1": ["eq-a-2", "eq-a-3", "eq-global-2", "pos-a-2", "pos-a-3"],
        "b1": ["eq-global-2"],
        # seq 3: position deletes of the same sequence number apply, equality deletes do not
        "a3": ["pos-a-3"],
    }
    assert scan.metrics.delete_files == 5


def test_delete_index_ignores_deletes_bounded_to_other_paths() -> None:
    index = DeleteIndex()
    bounded = _file(
        "pos",
        DataFileContent.POSITION_DELETES,
        ("a",),
        0,
        lower_bounds={2147483546: b"s3://b/f1"},
        upper_bounds={2147483546: b"s3://b/f3"},
    )
    index.add(ManifestEntry(ManifestEntryStatus.ADDED, 1, 2, 2, bounded))
    assert index.for_data_file(1, _file("s3://b/f2", DataFileContent.DATA, ("a",), 0)) == (bounded,)
    assert index.for_data_file(1, _file("s3://b/f4", DataFileContent.DATA, ("a",), 0)) == ()
    assert index.for_data_file(3, _file("s3://b/f2", DataFileContent.DATA, ("a",), 0)) == ()


def test_benchmark_tiny_mode_runs() -> None:
    """Two filters on the table as we write it, one on the table as Java writes it (``--tiny``:
    the first cell by every engine and API, the others by our async plan)."""
    out = run_tiny("plan.py", timeout=240).splitlines()
    cells = [line.split("|") for line in out if line.startswith("| local | 4x20 |")]
    plans = [(c[3].strip(), c[4].strip()) for c in cells if len(c) > 10]  # not the tables' rows
    filters = ("none", "day_1pct")
    assert plans == [*(("ours", f) for f in filters), ("java", "none")]
    assert len([line for line in out if line.startswith("| >= 3x every cold cell |")]) == 2  # per API


def _pipeline_tasks() -> list[asyncio.Task[Any]]:
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and "_stages_in_own_task" in getattr(t.get_coro(), "__qualname__", "")
    ]


async def _settle() -> None:
    for _ in range(200):
        if not _pipeline_tasks():
            return
        await asyncio.sleep(0.01)


@contextlib.contextmanager
def _loop_errors(caplog: pytest.LogCaptureFixture) -> Iterator[list[dict[str, Any]]]:
    """Errors the event loop reports (unhandled task errors, failed finalisers) and logs."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        with caplog.at_level(logging.WARNING):
            yield seen
    finally:
        loop.set_exception_handler(previous)


@pytest.mark.anyio
async def test_breaking_out_of_the_loop_needs_no_aclosing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    io, md = await _table(tmp_path, 8, 20)
    with _loop_errors(caplog) as seen:
        scan = TableScan(io, md, **_fresh(io_concurrency=2, channel_size=1))
        async for _ in scan.plan_files():
            break
        gc.collect()
        await _settle()
        assert not _pipeline_tasks()
        # closing from another task, after a partial read
        tasks = TableScan(io, md, **_fresh(io_concurrency=2, channel_size=1)).plan_files()
        await tasks.__anext__()
        await asyncio.create_task(tasks.aclose())  # type: ignore[arg-type]
        assert not _pipeline_tasks()
    assert seen == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # the plan still runs to completion afterwards
    assert len(await _paths(TableScan(io, md, **_fresh()))) == 160


@pytest.mark.anyio
async def test_abandoned_iterator_is_finalised_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    io, md = await _table(tmp_path, 8, 20)
    with _loop_errors(caplog) as seen:
        scan = TableScan(io, md, **_fresh(io_concurrency=2, channel_size=1))
        tasks = scan.plan_files()
        first = await tasks.__anext__()
        assert first.file.file_path
        assert _pipeline_tasks()  # blocked on the full queue
        del tasks
        gc.collect()  # the loop's finaliser hook closes the generator in a new task
        await _settle()
        assert not _pipeline_tasks()
    assert seen == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert scan.metrics.manifests_read < 8


@pytest.mark.anyio
async def test_cached_manifests_are_keyed_by_store_and_what_their_entries_inherit() -> None:
    """One shared cache, two stores holding different tables at the very same paths (two
    endpoints, say): each plan sees its own files. And a manifest listed with other
    inherited values is another key."""
    import dataclasses

    from aioiceberg.scan.planner import manifest_cache_key

    schema = Schema(NestedField(1, "id", LongType()))
    location = "memory://same-layout/t"
    base = new_table_metadata(schema, UNPARTITIONED, UNSORTED, location, {}, 2)
    kw = _fresh()

    async def store_with(data_file: str) -> tuple[FileIO, TableMetadata, ManifestFile]:
        io = MemoryFileIO().bind_runtime(default_runtime())
        entries = [
            ManifestEntry(
                ManifestEntryStatus.ADDED, None, None, None, _file(data_file, DataFileContent.DATA, (), 0)
            )
        ]
        path = f"{location}/metadata/m.avro"
        data, mf = write_manifest(entries, UNPARTITIONED, schema, 2, 1, codec="null", manifest_path=path)
        await io.write(path, data)
        await io.write(f"{location}/metadata/snap-1.avro", write_manifest_list([mf], 2, 1, None, 1))
        snap = Snapshot(1, None, 1, 1000, f"{location}/metadata/snap-1.avro", Summary(Operation.APPEND), 0)
        md = base.replace(
            snapshots=(snap,),
            current_snapshot_id=1,
            last_sequence_number=1,
            snapshot_log=(SnapshotLogEntry(1, 1000),),
        )
        return io, md, mf

    io_a, md_a, mf_a = await store_with(f"{location}/data/aaaa.parquet")
    io_b, md_b, mf_b = await store_with(f"{location}/data/bbbb.parquet")
    assert mf_a.manifest_length == mf_b.manifest_length  # the old key (path, length) collided
    assert await _paths(TableScan(io_a, md_a, **kw)) == [f"{location}/data/aaaa.parquet"]
    assert await _paths(TableScan(io_b, md_b, **kw)) == [f"{location}/data/bbbb.parquet"]
    assert await _paths(TableScan(io_a, md_a, **kw)) == [f"{location}/data/aaaa.parquet"]
    relisted = dataclasses.replace(mf_a, sequence_number=5, min_sequence_number=5)
    assert manifest_cache_key(io_a, relisted) != manifest_cache_key(io_a, mf_a)
    assert manifest_cache_key(io_a, mf_a) != manifest_cache_key(io_b, mf_a)


def _live_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done()}


@pytest.mark.anyio
async def test_a_plan_entered_with_async_with_runs_its_stages_in_the_callers_task_group(
    tmp_path: Path,
) -> None:
    io, md = await _table(tmp_path, 8, 20)
    before = _live_tasks()
    scan = TableScan(io, md, **_fresh(io_concurrency=2, channel_size=1))
    async with scan.plan_files() as tasks:
        first = await tasks.__anext__()
        assert first.file.file_path
        assert not _pipeline_tasks()  # no pipeline task of its own: the stages are ours
        assert _live_tasks() - before  # the stages, blocked on the full streams
    assert _live_tasks() == before  # leaving the block cancelled and awaited every stage
    assert scan.metrics.manifests_read < 8
    assert scan.metrics.tasks == 1
    async with scan.plan_files() as tasks:
        assert len([t async for t in tasks]) == 160


@pytest.mark.anyio
@pytest.mark.parametrize("owned", [False, True], ids=["async-for", "async-with"])
async def test_a_manifest_that_fails_to_load_reaches_the_caller_as_itself(
    tmp_path: Path, owned: bool
) -> None:
    """Errors travel down the streams as items: the caller gets the store's typed error,
    not an ExceptionGroup, and nothing is left running."""
    io, md = await _table(tmp_path, 8, 20)
    scan = TableScan(io, md, **_fresh(io_concurrency=2))
    victim = (await scan.planner.manifests())[3].manifest_path
    await io.delete(victim)
    before = _live_tasks()
    with pytest.raises(NotFoundError) as caught:
        if owned:
            async with scan.plan_files() as tasks:
                async for _ in tasks:
                    pass
        else:
            async for _ in scan.plan_files():
                pass
    assert victim.removeprefix("file://") in str(caught.value)
    await _settle()
    assert _live_tasks() == before


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("days", "ids", "positions"),
    [
        ((2, 5), None, (0,)),  # a ts range, hours into day 2 of the table: day only
        ((2, 5), 40000, (0, 1)),  # and an id bound: day and bucket
        (None, None, ()),  # c0 only, in no partition field: one residual for every tuple
    ],
)
async def test_residuals_are_shared_by_tuples_equal_on_the_fields_the_filter_reads(
    tmp_path: Path, days: tuple[int, int] | None, ids: int | None, positions: tuple[int, ...]
) -> None:
    """Every task's residual is what the ResidualEvaluator gives for its own tuple, while
    the planner computes one per distinct value of the partition fields the filter reads."""
    from aioiceberg.expressions.partition_projection import ResidualEvaluator
    from aioiceberg.testing.synthetic import FIRST_DAY, day_iso

    text = "c0 < 100000"
    if days is not None:
        start = day_iso(FIRST_DAY + days[0]).replace("T00:", "T06:")
        text = f"ts >= '{start}' AND ts < '{day_iso(FIRST_DAY + days[1])}'"
    if ids is not None:
        text += f" AND id > {ids}"

    io, md = await _table(tmp_path, 12, 30)
    scan = TableScan(io, md, text, **_fresh())
    tasks = [t async for t in scan.plan_files()]
    planner = scan.planner
    reference = ResidualEvaluator(planner.schema, md.spec(), planner.bound_filter)
    assert reference.positions == positions and tasks
    for t in tasks:
        assert t.residual == reference.residual_for(t.file.partition), t.file.partition
    distinct = {tuple(t.file.partition[i] for i in positions) for t in tasks}
    if len(positions) < 2:  # fewer residuals than partition tuples
        assert len({t.file.partition for t in tasks}) > len(distinct)
    assert len({id(t.residual) for t in tasks}) <= len(distinct)


@pytest.mark.anyio
async def test_a_big_first_manifest_sends_its_first_blocks_ahead(tmp_path: Path) -> None:
    """The first tasks of a plan whose first manifest is big come from that manifest's first
    blocks, decoded on their own; the plan still yields every task once, in the order the
    reference (fastavro) decoder gives, counts each entry once, and caches the whole view."""
    from aioiceberg.scan.planner import AHEAD_MIN_ENTRIES, AHEAD_ROWS

    io, md = await _table(tmp_path, 3, AHEAD_MIN_ENTRIES)
    for text in ("", "c0 < 1000", filters(3, AHEAD_MIN_ENTRIES)["id_eq"]):
        kw = _fresh(io_concurrency=1)  # one worker: manifests in list order, on both sides
        scan = TableScan(io, md, text, **kw)
        got = await _paths(scan)
        reference = await _paths(TableScan(io, md, text, **_fresh(io_concurrency=1, columnar=False)))
        assert got == reference and len(set(got)) == len(got), text
        m = scan.metrics
        assert m.entries_read == 3 * AHEAD_MIN_ENTRIES and m.tasks == len(got)
        if text == "":  # every entry matches: the first blocks' rows all went ahead
            assert AHEAD_ROWS <= m.entries_ahead < AHEAD_MIN_ENTRIES
        again = TableScan(io, md, text, **kw)
        assert await _paths(again) == got
        assert again.metrics.manifests_from_cache == 3 and again.metrics.entries_ahead == 0
    # a manifest below the threshold is decoded whole, as before
    io, md = await _table(tmp_path / "small", 2, AHEAD_MIN_ENTRIES - 1)
    small = TableScan(io, md, "", **_fresh(io_concurrency=1))
    await _paths(small)
    assert small.metrics.entries_ahead == 0


def test_a_manifest_splits_into_two_containers_of_its_blocks() -> None:
    import fastavro

    from aioiceberg.spec.manifest.columnar import avro_layout, split_blocks

    schema = {"type": "record", "name": "r", "fields": [{"name": "i", "type": "long"}]}
    buf = io.BytesIO()
    fastavro.writer(buf, schema, ({"i": i} for i in range(5000)), sync_interval=200, codec="deflate")
    data = buf.getvalue()
    layout = avro_layout(data)
    assert layout is not None and len(layout.blocks) > 10
    parts = split_blocks(data, 300)
    assert parts is not None
    head, rest = ([r["i"] for r in fastavro.reader(io.BytesIO(p))] for p in parts)
    assert 300 <= len(head) < 5000 and head + rest == list(range(5000))
    assert split_blocks(data, 5000) is None  # the first part would be the whole file
    one = io.BytesIO()
    fastavro.writer(one, schema, [{"i": 1}])
    assert split_blocks(one.getvalue(), 1) is None and split_blocks(b"not avro", 1) is None


@pytest.mark.anyio
async def test_a_big_first_manifest_damaged_past_its_first_blocks_fails_the_plan_as_itself(
    tmp_path: Path,
) -> None:
    """The first part decodes and its tasks may go out; the damaged rest cannot be decoded
    apart, so the whole manifest is decoded the usual way, which names what is wrong."""
    from aioiceberg.errors import IcebergError
    from aioiceberg.scan.planner import AHEAD_MIN_ENTRIES
    from aioiceberg.spec.manifest.columnar import avro_layout

    io, md = await _table(tmp_path, 2, AHEAD_MIN_ENTRIES)
    scan = TableScan(io, md, "", **_fresh(io_concurrency=1))
    first = (await scan.planner.manifests())[0]
    path = first.manifest_path.removeprefix("file://")
    data = bytearray(Path(path).read_bytes())
    layout = avro_layout(bytes(data))
    assert layout is not None and len(layout.blocks) > 4
    start, end = layout.blocks[-2]
    data[start + (end - start) // 2 : end] = b"\xff" * (end - start - (end - start) // 2)
    Path(path).write_bytes(bytes(data))
    with pytest.raises(IcebergError) as caught:
        await _paths(scan)
    assert path in str(caught.value)
    assert scan.metrics.entries_ahead > 0  # the first part went ahead before the rest failed


@pytest.mark.anyio
async def test_a_plans_first_whole_manifest_decode_runs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first decode's tasks are the plan's first; a second decode beside it on the same
    cores only delayed them. The others may then run side by side."""
    from aioiceberg.scan.decode import Decoder

    io, md = await _table(tmp_path, 6, 300)
    spans: list[tuple[float, float]] = []
    real = Decoder.decode

    async def timed(self: Decoder, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await real(self, *args, **kwargs)
        finally:
            spans.append((start, time.perf_counter()))

    monkeypatch.setattr(Decoder, "decode", timed)
    scan = TableScan(io, md, **_fresh(decode_workers=2, columnar_min_entries=1))
    assert len(await _paths(scan)) == 1800
    assert len(spans) == 6
    first = min(spans)
    assert all(start >= first[1] for start, _ in spans if (start, _) != first)


@pytest.mark.anyio
async def test_a_long_plans_other_fetches_start_once_its_first_request_is_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first manifest's request goes out alone, first in line; the others follow it at
    once, not after its decode (which cost every big plan a round trip and a decode)."""
    from aioiceberg.scan.manifest_loader import ManifestLoader

    io, md = await _table(tmp_path, 8, 20)
    events: list[str] = []
    read, load = io.read_expecting, ManifestLoader.load

    async def watched_read(location: str, size: int) -> bytes:
        events.append("read")
        return await read(location, size)

    async def watched_load(self: ManifestLoader, *args: Any, **kwargs: Any) -> Any:
        view = await load(self, *args, **kwargs)
        events.append("decoded")
        return view

    monkeypatch.setattr(io, "read_expecting", watched_read)
    monkeypatch.setattr(ManifestLoader, "load", watched_load)
    scan = TableScan(io, md, **_fresh(io_concurrency=4))
    assert len(await _paths(scan)) == 160
    assert events[0] == "read" and events.count("read") == 8
    assert events.index("decoded") > 1, events  # others asked for before the first was decoded
