"""The batch lane: small manifests fetched in one burst are decoded together."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from manifest_samples import PRUNE_SCHEMA, PRUNE_SPEC, same_entries, small_manifests

from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.scan.decode import BatchLane, DecodeResult, PruneContext, decode_and_prune
from aioiceberg.spec.manifest import ManifestFile


def _items() -> list[tuple[bytes, ManifestFile]]:
    every = small_manifests()
    return [every[i] for i in (0, 1, 2, 4, 5)]  # one writer, one spec: one batch can hold them


async def _burst(
    items: list[tuple[bytes, ManifestFile]],
    step: float,
    fetch_s: float,
    *,
    gather: bool = True,
    in_flight: int | None = None,
    failed_after: float | None = None,
    columnar_alone: bool = False,
) -> tuple[BatchLane, dict[str, DecodeResult]]:
    """Fetches start for ``items`` (or ``in_flight`` of them); item ``i`` lands ``i * step``
    seconds in, its fetch having taken ``fetch_s``. ``failed_after``: one more fetch, started
    with them, fails then (it ends and nothing arrives from it)."""
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    lane = BatchLane(ctx, anyio.CapacityLimiter(2), columnar_alone=lambda: columnar_alone)
    lane.gather = gather
    out: dict[str, DecodeResult] = {}
    for _ in range(len(items) if in_flight is None else in_flight):
        lane.fetch_started()

    async def land(i: int) -> None:
        await anyio.sleep(i * step)
        lane.fetch_ended()
        data, mf = items[i]
        out[mf.manifest_path] = await lane.decode(data, mf, fetch_s)

    async def fail(after: float) -> None:
        await anyio.sleep(after)
        lane.fetch_ended()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            if failed_after is not None:
                lane.fetch_started()
                tg.start_soon(fail, failed_after)
            for i in range(len(items)):
                tg.start_soon(land, i)
    return lane, out


@pytest.mark.anyio
async def test_a_burst_is_decoded_in_two_calls_the_first_arrival_alone() -> None:
    items = _items()
    lane, out = await _burst(items, 0.05, 10.0)  # 50 ms apart: each could be decoded alone
    assert lane.batches == 2
    for data, mf in items:
        want = decode_and_prune(data, mf, lane.ctx, False)
        assert same_entries(out[mf.manifest_path].entries, want.entries), mf.manifest_path
        assert out[mf.manifest_path].entries_read == want.entries_read


@pytest.mark.anyio
@pytest.mark.parametrize("columnar_alone", [False, True])
async def test_the_first_arrival_decodes_alone_with_the_decoder_the_lane_picks(columnar_alone: bool) -> None:
    """Alone, a manifest takes the columnar decoder once the lane says it is ready (it
    releases the GIL, so the loop hands the other responses over meanwhile), else fastavro;
    both give the reference's entries."""
    items = _items()
    lane, out = await _burst(items, 0.05, 10.0, columnar_alone=columnar_alone)
    first = out[items[0][1].manifest_path]
    assert lane.batches == 2 and first.columnar is columnar_alone
    want = decode_and_prune(*items[0], lane.ctx, False)
    assert same_entries(first.entries, want.entries) and first.entries_read == want.entries_read


@pytest.mark.anyio
async def test_a_burst_that_lands_at_once_still_decodes_its_first_arrival_alone() -> None:
    """The first task waits for one small decode, not for the whole burst's."""
    lane, out = await _burst(_items(), 0.0, 10.0)
    assert lane.batches == 2
    assert len(out) == 5


@pytest.mark.anyio
async def test_a_fetch_that_never_lands_holds_the_others_no_longer_than_their_own_fetch() -> None:
    # a fourth fetch is still under way when the test ends
    lane, out = await _burst(_items()[:3], 0.01, 0.2, in_flight=4)
    assert len(out) == 3
    assert lane.batches == 2


@pytest.mark.anyio
async def test_a_failed_fetch_releases_the_arrivals_waiting_for_it() -> None:
    # the arrivals' own bound (60 s) is not what lets them go: the 30 s limit would fail first
    _, out = await _burst(_items()[:2], 0.01, 60.0, failed_after=0.3)
    assert len(out) == 2


@pytest.mark.anyio
async def test_without_a_burst_each_arrival_is_decoded_as_it_lands() -> None:
    lane, out = await _burst(_items()[:3], 0.3, 60.0, gather=False)
    assert lane.batches == 3
    assert len(out) == 3


@pytest.mark.anyio
async def test_what_arrives_during_a_decode_is_taken_by_the_lane_thread() -> None:
    """Outside a burst, a lane thread that ends a decode takes what arrived meanwhile itself:
    the next batch does not wait for the event loop, which a plan keeps busy building task
    batches. Here the loop is blocked while the thread works; nothing is left waiting."""
    items = _items()
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    gate = threading.Event()  # holds the first decode until the others have arrived

    def columnar_alone() -> bool:
        return gate.wait(10)

    lane = BatchLane(ctx, anyio.CapacityLimiter(1), columnar_alone=columnar_alone)
    out: dict[str, DecodeResult] = {}

    async def one(data: bytes, mf: ManifestFile) -> None:
        out[mf.manifest_path] = await lane.decode(data, mf)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, *items[0])
            for _ in range(5):
                await anyio.sleep(0)  # the first takes the lane and its thread starts
            for data, mf in items[1:]:
                tg.start_soon(one, data, mf)
            for _ in range(5):
                await anyio.sleep(0)  # the others are queued, waiting for the lane
            assert len(lane._pending) == len(items) - 1
            gate.set()
            time.sleep(1.0)  # the loop blocked: only the lane thread can take the others
            assert len(lane._pending) == 0
    assert lane.batches == 2  # the first alone, then the rest in one call
    for data, mf in items:
        want = decode_and_prune(data, mf, ctx, False)
        assert same_entries(out[mf.manifest_path].entries, want.entries), mf.manifest_path


@pytest.mark.anyio
async def test_a_waiter_is_answered_when_its_batch_ends_not_when_the_lane_goes_idle() -> None:
    """A manifest taken by a busy lane thread gets its result as soon as its batch is decoded,
    while the thread goes on with later arrivals. Its waiter once waited for the lane's
    limiter, free only when the thread found nothing more to take: in a plan, every fetch
    worker (each waiting on its decode) was set free at once, and the next fetches came in
    waves with the decoders idle between them."""
    items = _items()
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    gates = [threading.Event() for _ in range(3)]
    calls = iter(gates)

    def columnar_alone() -> bool:  # each decode call waits for its own gate
        return next(calls).wait(10)

    lane = BatchLane(ctx, anyio.CapacityLimiter(1), columnar_alone=columnar_alone)
    out: dict[str, DecodeResult] = {}

    async def one(data: bytes, mf: ManifestFile) -> None:
        out[mf.manifest_path] = await lane.decode(data, mf)

    async def settle() -> None:
        for _ in range(10):
            await anyio.sleep(0.01)

    (a_data, a), (b_data, b), (c_data, c) = items[:3]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, a_data, a)
            await settle()  # a's decode has started, and waits for its gate
            tg.start_soon(one, b_data, b)
            await settle()
            gates[0].set()  # a decoded; the thread takes b and waits
            with anyio.fail_after(10):
                while lane._pending:
                    await anyio.sleep(0.01)
            tg.start_soon(one, c_data, c)
            await settle()
            gates[1].set()  # b decoded; the thread takes c and waits
            with anyio.fail_after(10):
                while b.manifest_path not in out:
                    await anyio.sleep(0.01)
            # the lane is still busy (a's waiter drives it): b did not wait for it
            assert a.manifest_path not in out and c.manifest_path not in out
            gates[2].set()
    assert lane.batches == 3
    for data, mf in items[:3]:
        want = decode_and_prune(data, mf, ctx, False)
        assert same_entries(out[mf.manifest_path].entries, want.entries), mf.manifest_path
