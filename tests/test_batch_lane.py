"""The batch lane: small manifests fetched in one burst are decoded together."""

from __future__ import annotations

import anyio
import pytest
from test_manifest_columnar import PRUNE_SCHEMA, PRUNE_SPEC, _same, _small_manifests

from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.scan.decode import BatchLane, DecodeResult, PruneContext, decode_and_prune
from aioiceberg.spec.manifest import ManifestFile


def _lane(gather: bool) -> BatchLane:
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    lane = BatchLane(ctx, anyio.CapacityLimiter(2))
    lane.gather = gather
    return lane


def _items() -> list[tuple[bytes, ManifestFile]]:
    every = _small_manifests()
    return [every[i] for i in (0, 1, 2, 4, 5)]  # one writer, one spec: one batch can hold them


async def _land(
    lane: BatchLane,
    item: tuple[bytes, ManifestFile],
    delay: float,
    fetch_s: float,
    out: dict[str, DecodeResult],
) -> None:
    await anyio.sleep(delay)
    lane.fetch_ended()
    data, mf = item
    out[mf.manifest_path] = await lane.decode(data, mf, fetch_s)


@pytest.mark.anyio
async def test_a_burst_is_decoded_in_two_calls_the_first_arrival_alone() -> None:
    lane, items = _lane(True), _items()
    out: dict[str, DecodeResult] = {}
    for _ in items:
        lane.fetch_started()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i, item in enumerate(items):  # they land 50 ms apart: each could be decoded alone
                tg.start_soon(_land, lane, item, 0.05 * i, 10.0, out)
    assert lane.batches == 2
    for data, mf in items:
        want = decode_and_prune(data, mf, lane.ctx, False)
        assert _same(out[mf.manifest_path].entries, want.entries), mf.manifest_path
        assert out[mf.manifest_path].entries_read == want.entries_read


@pytest.mark.anyio
async def test_a_burst_that_lands_at_once_still_decodes_its_first_arrival_alone() -> None:
    """The first task waits for one small decode, not for the whole burst's."""
    lane, items = _lane(True), _items()
    out: dict[str, DecodeResult] = {}
    for _ in items:
        lane.fetch_started()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(_land, lane, item, 0.0, 10.0, out)
    assert lane.batches == 2
    assert len(out) == len(items)


@pytest.mark.anyio
async def test_a_fetch_that_never_lands_holds_the_others_no_longer_than_their_own_fetch() -> None:
    lane, items = _lane(True), _items()[:3]
    out: dict[str, DecodeResult] = {}
    for _ in range(4):  # the fourth fetch is still under way when the test ends
        lane.fetch_started()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i, item in enumerate(items):
                tg.start_soon(_land, lane, item, 0.01 * i, 0.2, out)
    assert len(out) == 3
    assert lane.batches == 2


@pytest.mark.anyio
async def test_a_failed_fetch_releases_the_arrivals_waiting_for_it() -> None:
    lane, items = _lane(True), _items()[:2]
    out: dict[str, DecodeResult] = {}
    for _ in range(3):
        lane.fetch_started()

    async def fail_later() -> None:
        await anyio.sleep(0.3)
        lane.fetch_ended()  # its fetch raised: nothing arrives from it

    with anyio.fail_after(20):  # the arrivals' own bound (60 s) is not what lets them go
        async with anyio.create_task_group() as tg:
            tg.start_soon(fail_later)
            for i, item in enumerate(items):
                tg.start_soon(_land, lane, item, 0.01 * i, 60.0, out)
    assert len(out) == 2


@pytest.mark.anyio
async def test_without_a_burst_each_arrival_is_decoded_as_it_lands() -> None:
    lane, items = _lane(False), _items()[:3]
    out: dict[str, DecodeResult] = {}
    for _ in items:
        lane.fetch_started()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i, item in enumerate(items):
                tg.start_soon(_land, lane, item, 0.3 * i, 60.0, out)
    assert lane.batches == 3
