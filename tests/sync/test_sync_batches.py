"""The blocking iterators hand items over in sequences: none lost, repeated or reordered,
the producer bounded by ``prefetch`` items, and ``break``, garbage collection, errors and
Ctrl-C still reach the work on the loop."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import aioiceberg
from aioiceberg import sync
from aioiceberg._sync.runner import BlockingLoop
from aioiceberg._sync.twin import PLAN_BATCHES_PREFETCH, PLAN_PREFETCH
from aioiceberg.errors import IcebergError
from aioiceberg.io import resolve_io
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.testing.synthetic import build_table

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS, ENTRIES = 6, 40


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> str:
    location = tmp_path_factory.mktemp("batches").as_uri() + "/t"

    async def build() -> str:
        io = resolve_io(location, {}, runtime=default_runtime())
        try:
            return await build_table(io, location, MANIFESTS, ENTRIES)
        finally:
            await io.aclose()

    return asyncio.run(build())


# more tasks than one prefetch holds: a plan left early cannot have handed them all over
BIG_MANIFESTS, BIG_ENTRIES = 72, 64
assert BIG_MANIFESTS * BIG_ENTRIES > PLAN_PREFETCH + BIG_ENTRIES


@pytest.fixture(scope="module")
def big_meta(tmp_path_factory: pytest.TempPathFactory) -> str:
    location = tmp_path_factory.mktemp("batches-big").as_uri() + "/t"

    async def build() -> str:
        io = resolve_io(location, {}, runtime=default_runtime())
        try:
            return await build_table(io, location, BIG_MANIFESTS, BIG_ENTRIES)
        finally:
            await io.aclose()

    return asyncio.run(build())


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingLoop]:
    own = BlockingLoop()
    yield own
    own.shutdown()


def _key(task: FileScanTask) -> int:
    """The synthetic file's number: manifest * ENTRIES + its place in the manifest."""
    return int(task.file.file_path.rsplit("/", 1)[1].split("-", 1)[0])


async def _async_keys(meta: str, **scan: Any) -> list[int]:
    table = await aioiceberg.load_table(meta)
    try:
        return [_key(t) async for t in table.scan(**scan).plan_files()]
    finally:
        await table.io.aclose()


def _assert_same_plan(got: list[int], expected: list[int]) -> None:
    assert sorted(got) == sorted(expected)  # none lost, none twice
    assert len(set(got)) == len(got)
    for m in range(MANIFESTS):  # each manifest's tasks in the manifest's order
        mine = [k for k in got if k // ENTRIES == m]
        assert mine == sorted(mine) == [k for k in expected if k // ENTRIES == m]


@pytest.mark.parametrize(
    "scan",
    [{}, {"row_filter": f"id >= {ENTRIES * 1000 + 5}"}, {"limit": 50 * 1000}],
    ids=["all", "filtered", "limit"],
)
def test_blocking_plan_yields_every_task_once_in_manifest_order(meta: str, scan: dict[str, Any]) -> None:
    expected = asyncio.run(_async_keys(meta, **scan))
    assert expected
    table = sync.load_table(meta)
    first = [_key(t) for t in table.scan(**scan).plan_files()]
    # planned again: the manifests now come from the cache, decided without the stages
    again = table.scan(**scan)
    second = [_key(t) for t in again.plan_files()]
    assert again.metrics.tasks == len(expected)
    if "limit" not in scan:
        _assert_same_plan(first, expected)
        _assert_same_plan(second, expected)
        return
    # a limit keeps the files of whichever manifests are decided first, and manifests decode
    # at once: as many tasks, each once, each a task of the whole plan, in manifest order
    everything = set(asyncio.run(_async_keys(meta)))
    for got in (first, second):
        assert len(got) == len(expected) == len(set(got)) and set(got) <= everything
        for m in range(MANIFESTS):
            mine = [k for k in got if k // ENTRIES == m]
            assert mine == sorted(mine)


def test_blocking_plan_counts_the_tasks_it_handed_over(meta: str) -> None:
    table = sync.load_table(meta)
    scan = table.scan()
    assert sum(1 for _ in scan.plan_files()) == MANIFESTS * ENTRIES
    assert scan.metrics.tasks == MANIFESTS * ENTRIES
    assert scan.metrics.time_to_first_task_s is not None and scan.metrics.planning_time_s is not None


def _hosted_plans(scan: sync.TableScan | None = None) -> int:
    """Plans still running on the blocking API's loop, once a cancelled one had time to end
    (closing a blocking iterator asks the loop to cancel its work, and does not wait); with
    ``scan``, also until its plan was finished."""

    async def count() -> int:
        found = 0
        for _ in range(500):
            tasks = (t for t in asyncio.all_tasks() if not t.done())
            found = sum(getattr(t.get_coro(), "__qualname__", "") == "_stages_in_own_task" for t in tasks)
            if not found and (scan is None or scan.metrics.planning_time_s is not None):
                break
            await asyncio.sleep(0.01)
        return found

    return default_runtime().blocking.run(count())


@pytest.mark.parametrize("how", ["close", "drop"])
@pytest.mark.parametrize("cached", [False, True], ids=["stages", "decided-from-cache"])
def test_leaving_a_blocking_plan_early_ends_its_work_on_the_loop(
    big_meta: str, how: str, cached: bool
) -> None:
    table = sync.load_table(big_meta)
    total = BIG_MANIFESTS * BIG_ENTRIES
    # a cache that holds nothing: every plan runs the stages
    scan = table.scan() if cached else table.scan(cache=ManifestCache(0))
    if cached:
        assert sum(1 for _ in table.scan().plan_files()) == total  # fills the cache
    tasks = scan.plan_files()
    taken = [task for task, _ in zip(tasks, range(3), strict=False)]
    assert len(taken) == 3
    if how == "close":
        tasks.close()  # type: ignore[attr-defined]
    else:
        del tasks
        gc.collect()
    assert _hosted_plans(scan) == 0
    assert scan.metrics.planning_time_s is not None  # the plan was finished
    # at most one prefetch and the manifest that overran it crossed
    assert scan.metrics.tasks <= PLAN_PREFETCH + BIG_ENTRIES < total
    assert sum(1 for _ in table.scan().plan_files()) == total  # the loop still serves


def test_breaking_out_of_a_blocking_plan_cancels_the_stages(meta: str) -> None:
    """Without ``close()``: the iterator's frame ends the plan as the loop leaves it."""
    table = sync.load_table(meta)

    def first_three() -> list[FileScanTask]:
        out = []
        for task in table.scan(cache=ManifestCache(0)).plan_files():
            out.append(task)
            if len(out) == 3:
                break
        return out

    assert len(first_three()) == 3
    assert _hosted_plans() == 0


def test_a_failing_plan_raises_the_same_typed_error_blocking_and_async(meta: str, tmp_path: Path) -> None:
    # a copy of the table whose third manifest is gone
    location = tmp_path.as_uri() + "/broken"

    async def broken() -> str:
        io = resolve_io(location, {}, runtime=default_runtime())
        try:
            return await build_table(io, location, MANIFESTS, ENTRIES)
        finally:
            await io.aclose()

    broken_meta = asyncio.run(broken())
    victim = sorted((tmp_path / "broken" / "metadata").glob("m00002-*.avro"))[0]
    victim.unlink()
    with pytest.raises(IcebergError) as async_error:
        asyncio.run(_async_keys(broken_meta))
    got: list[int] = []
    with pytest.raises(IcebergError) as blocking_error:
        for task in sync.load_table(broken_meta).scan().plan_files():
            got.append(_key(task))
    assert type(blocking_error.value) is type(async_error.value)
    assert victim.name in str(blocking_error.value)
    assert all(k // ENTRIES != 2 for k in got)


async def _async_batches(meta: str) -> list[tuple[str, ...]]:
    table = await aioiceberg.load_table(meta)
    try:
        return [tuple(b.column("file_path").to_pylist()) async for b in table.scan().plan_batches()]
    finally:
        await table.io.aclose()


def test_blocking_plan_batches_are_the_async_ones(big_meta: str) -> None:
    """More manifests than the twin's prefetch of batches, and a caller slower than the
    loop: every manifest's files still cross whole (alone or joined with others decoded
    while the caller was busy), once."""

    def manifest_of(path: str) -> int:  # files are numbered across the table
        return int(path.rsplit("/", 1)[1].split("-")[0]) // BIG_ENTRIES

    manifests: dict[int, list[str]] = {}
    for paths in asyncio.run(_async_batches(big_meta)):
        for path in paths:
            manifests.setdefault(manifest_of(path), []).append(path)
    assert len(manifests) == BIG_MANIFESTS > PLAN_BATCHES_PREFETCH
    scan = sync.load_table(big_meta).scan(cache=ManifestCache(0))
    crossed = []
    for batch in scan.plan_batches():
        paths = batch.column("file_path").to_pylist()
        at = 0
        while at < len(paths):
            whole = manifests[manifest_of(paths[at])]
            assert paths[at : at + len(whole)] == whole
            crossed.append(manifest_of(paths[at]))
            at += len(whole)
        threading.Event().wait(0.001)  # a caller slower than the loop: the queue fills
    assert sorted(crossed) == sorted(manifests)
    assert scan.metrics.tasks == BIG_MANIFESTS * BIG_ENTRIES


@pytest.mark.parametrize("how", ["close", "drop"])
def test_leaving_blocking_plan_batches_early_ends_the_plan(big_meta: str, how: str) -> None:
    scan = sync.load_table(big_meta).scan(cache=ManifestCache(0))
    batches = scan.plan_batches()
    first = next(batches).num_rows  # a manifest's, or a few decoded at once, joined
    assert first and first % BIG_ENTRIES == 0
    if how == "close":
        batches.close()  # type: ignore[attr-defined]
    else:
        del batches
        gc.collect()
    assert _hosted_plans(scan) == 0
    assert scan.metrics.tasks < BIG_MANIFESTS * BIG_ENTRIES


# --- the runner itself, on a loop of the test's own


class Source:
    """Sequences of consecutive numbers, noting how far the consumer lagged at each step."""

    def __init__(self, sizes: Sequence[int], fail_after: int | None = None) -> None:
        self.sizes = sizes
        self.fail_after = fail_after
        self.produced = 0
        self.consumed = 0  # written by the consumer's thread
        self.ahead: list[int] = []
        self.closed = threading.Event()

    async def batches(self) -> AsyncIterator[Sequence[int]]:
        try:
            for i, size in enumerate(self.sizes):
                if i == self.fail_after:
                    raise ValueError(f"source failed at sequence {i}")
                batch = list(range(self.produced, self.produced + size))
                yield batch
                self.produced += size
                if size:
                    self.ahead.append(self.produced - self.consumed)
                await asyncio.sleep(0)
        finally:
            self.closed.set()

    async def items(self) -> AsyncIterator[int]:
        async for batch in self.batches():
            for item in batch:
                yield item


def _drain(source: Source, it: Iterator[int], slow: bool = False) -> list[int]:
    out = []
    for item in it:
        out.append(item)
        source.consumed += 1
        if slow and item % 16 == 0:
            threading.Event().wait(0.001)  # let the loop run ahead if it may
    return out


@pytest.mark.parametrize("prefetch", [1, 5, 64])
def test_sequences_cross_whole_in_order_and_prefetch_bounds_the_items_ahead(
    loop: BlockingLoop, prefetch: int
) -> None:
    sizes = [3, 0, 1, 7, 2, 30, 4, 4, 4, 4, 1, 1, 1, 12] * 3
    source = Source(sizes)
    got = _drain(source, loop.iterate_batches(source.batches, prefetch), slow=True)
    assert got == list(range(sum(sizes)))
    assert source.closed.is_set()
    # when the pump asks for the next sequence, what it handed and the caller has not taken
    # is within prefetch items, or one longer sequence that crossed alone
    assert max(source.ahead) <= max(prefetch, max(sizes))
    for ahead, size in zip(source.ahead, [s for s in sizes if s], strict=True):
        assert ahead <= max(prefetch, size)


def test_single_items_still_stream_in_order_within_prefetch(loop: BlockingLoop) -> None:
    sizes = [5] * 20
    source = Source(sizes)
    got = _drain(source, loop.iterate(source.items, 4), slow=True)
    assert got == list(range(100))
    assert max(source.ahead) <= 4


def test_the_pump_fills_the_queue_while_the_caller_holds_its_first_item(loop: BlockingLoop) -> None:
    """The producer waits on the caller only when the queue is full: nothing the caller does
    after its first item lets the pump run, yet it hands over a whole prefetch."""
    source = Source([4] * 50)
    it = loop.iterate_batches(source.batches, 16)
    assert next(it) == 0
    for _ in range(1000):
        if source.produced >= 16:
            break
        threading.Event().wait(0.005)
    threading.Event().wait(0.05)  # room for a pump that would overrun its bound
    # a whole prefetch, counting the sequence in the caller's hand; the next waits for room
    assert source.produced == 16
    assert list(it) == list(range(1, 200))
    assert source.closed.is_set()


@pytest.mark.parametrize("prefetch", [1, 2, 3])
def test_no_wake_up_is_lost_when_the_caller_keeps_pace_with_a_full_queue(
    loop: BlockingLoop, prefetch: int
) -> None:
    """A caller that takes items as fast as the pump hands them keeps the queue at its bound,
    so the pump waits for room again and again: a wake-up lost between the two threads would
    leave both waiting (here: the drain not finishing in its thread)."""
    sizes = [1, 2, 1, 3] * 2500
    source = Source(sizes)
    got: list[int] = []
    drain = threading.Thread(target=lambda: got.extend(loop.iterate_batches(source.batches, prefetch)))
    drain.start()
    drain.join(120)
    assert not drain.is_alive(), f"stalled after {len(got)} of {sum(sizes)} items"
    assert got == list(range(sum(sizes)))


def test_an_error_arrives_after_the_items_before_it_as_itself(loop: BlockingLoop) -> None:
    source = Source([4, 4, 4, 4], fail_after=2)
    got: list[int] = []
    with pytest.raises(ValueError, match="source failed at sequence 2"):
        got.extend(loop.iterate_batches(source.batches, 3))
    assert got == list(range(8))
    assert source.closed.is_set()


@pytest.mark.parametrize("how", ["break", "drop"])
def test_leaving_early_closes_the_async_iterator_on_the_loop(loop: BlockingLoop, how: str) -> None:
    source = Source([10] * 1000)
    it = loop.iterate_batches(source.batches, 8)
    for item in it:
        if item == 15:
            break
    if how == "drop":
        del it
        gc.collect()
    else:
        it.close()  # type: ignore[attr-defined]
    assert source.closed.wait(10)
    assert source.produced < 1000 * 10


CTRL_C = """
import asyncio, sys, threading
from aioiceberg._sync.runner import BlockingLoop
from aioiceberg._sync.twin import PLAN_BATCHES_PREFETCH, PLAN_PREFETCH

closed = threading.Event()

async def forever():
    try:
        yield [1, 2]
        await asyncio.sleep(3600)
        yield [3]
    finally:
        closed.set()

loop = BlockingLoop()
try:
    for item in loop.iterate_batches(forever):
        if item == 2:
            print("waiting", flush=True)
except KeyboardInterrupt:
    print("interrupted", closed.wait(30), flush=True)
    sys.exit(0)
sys.exit(3)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="needs POSIX signals")
def test_ctrl_c_while_waiting_stops_the_work_on_the_loop() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CTRL_C)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "waiting"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.strip() == "interrupted True"
