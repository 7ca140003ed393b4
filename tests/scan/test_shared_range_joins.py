"""Manifests decoded in one call reach a caller of task batches as one range of that call,
not one batch a manifest."""

from __future__ import annotations

import anyio
import pytest
from manifest_samples import PRUNE_SCHEMA, PRUNE_SPEC, small_manifests

from aioiceberg.expressions.tree import AlwaysTrue
from aioiceberg.scan.bound_filter import BoundFilter
from aioiceberg.scan.cache import CachedManifest
from aioiceberg.scan.decode import PruneContext, decode_and_prune_batch
from aioiceberg.scan.pipeline import Decoded, _with_waiting
from aioiceberg.scan.task_builder import TaskBuilder
from aioiceberg.spec.manifest.columnar import ColumnarRows


def _range(view: object) -> tuple[object, int, int]:
    assert isinstance(view, ColumnarRows) and view.shared is not None
    return view.shared


def _views() -> list[ColumnarRows]:
    """One writer's small manifests decoded in one call: each a range of the call's rows."""
    every = small_manifests()
    items = [every[i] for i in (0, 1, 2, 4, 5)]
    ctx = PruneContext.build(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True, None)
    views = [r.entries for r in decode_and_prune_batch(items, ctx, True)]
    assert all(isinstance(v, ColumnarRows) and v.shared is not None for v in views)
    return [v for v in views if isinstance(v, ColumnarRows)]


async def _joined(first: ColumnarRows, behind: list[ColumnarRows]) -> list[object]:
    builder = TaskBuilder(BoundFilter(PRUNE_SCHEMA, {0: PRUNE_SPEC}, AlwaysTrue(), True), None)
    send, receive = anyio.create_memory_object_stream[Decoded](len(behind))
    with send:
        for view in behind:
            send.send_nowait(CachedManifest(view, len(view), 0, 0, 0))
    with receive:
        return list(await _with_waiting(receive, first, builder))


@pytest.mark.anyio
async def test_consecutive_ranges_of_one_call_are_handed_over_as_one() -> None:
    views = _views()
    got = await _joined(views[0], views[1:])
    assert len(got) == 1
    joined = got[0]
    assert isinstance(joined, ColumnarRows)
    group, start, stop = _range(joined)
    assert (group, start) == _range(views[0])[:2] and stop == _range(views[-1])[2]
    assert len(joined) == sum(len(v) for v in views)
    assert joined.rows == [row for v in views for row in v.rows]


@pytest.mark.anyio
async def test_a_range_that_does_not_follow_ends_the_join() -> None:
    """Out of order (another thread's call may land in between): what follows is handed over
    after the joined part, in the order decoded."""
    views = _views()
    got = await _joined(views[0], [views[1], views[3], views[2]])
    assert len(got) == 2
    joined, rest = got
    assert _range(joined)[1:] == (_range(views[0])[1], _range(views[1])[2])
    assert rest is views[3]
