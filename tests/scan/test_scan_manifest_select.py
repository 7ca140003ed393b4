"""Choosing manifests in bulk: never a manifest the ManifestEvaluator keeps is dropped."""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioiceberg.expressions import ManifestEvaluator
from aioiceberg.expressions.parser import parse
from aioiceberg.io import LocalFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan.cache import ManifestCache, ManifestListCache
from aioiceberg.scan.manifest_select import BULK_MIN_MANIFESTS, ManifestListing, may_match
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.spec.manifest import ManifestContent, ManifestFile, columnar_list, write_manifest_list
from aioiceberg.spec.manifest.columnar_list import ManifestRows, decode_manifest_rows
from aioiceberg.spec.manifest.manifest_file import PartitionFieldSummary
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import IntegerType, LongType, NestedField, StringType, TimestamptzType
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, filters

SCHEMA = Schema(
    NestedField(1, "ts", TimestamptzType()),
    NestedField(2, "id", LongType()),
    NestedField(3, "c", IntegerType()),
    NestedField(4, "s", StringType()),
)
SPECS = {
    0: PartitionSpec(
        0,
        (
            PartitionField((1,), 1000, parse_transform("day"), "ts_day"),
            PartitionField((2,), 1001, parse_transform("identity"), "id"),
            PartitionField((3,), 1002, parse_transform("identity"), "c"),
        ),
    ),
    1: PartitionSpec(1, (PartitionField((4,), 1000, parse_transform("identity"), "s"),)),
}
WIDTHS = {0: (4, 8, 4), 1: (None,)}  # the bytes each field's bound takes (None: a string)

# a bound: absent, of its own width, of another width, or a string's
bound_of = st.one_of(
    st.none(),
    st.integers(-6, 6).map(lambda v: ("ok", v)),
    st.sampled_from([b"", b"\x01", b"\x00\x00\x01", b"\x01" * 12]),
)


def _bytes(found: Any, width: int | None) -> bytes | None:
    if found is None or isinstance(found, bytes):
        return found
    v = found[1]
    if width is None:
        return str(v).encode()
    return struct.pack("<i" if width == 4 else "<q", v)


@st.composite
def manifests(draw: st.DrawFn) -> ManifestFile:
    spec_id = draw(st.sampled_from([0, 0, 0, 1]))
    widths = WIDTHS[spec_id]
    shape = draw(st.sampled_from(["ok", "ok", "ok", "ok", "none", "short"]))
    summaries: tuple[PartitionFieldSummary, ...] | None = None
    if shape != "none":
        built = []
        for w in widths:
            lo, hi = _bytes(draw(bound_of), w), _bytes(draw(bound_of), w)
            built.append(PartitionFieldSummary(draw(st.booleans()), None, lo, hi))
        summaries = tuple(built[:-1] if shape == "short" else built)
    return ManifestFile("m.avro", 1, spec_id, ManifestContent.DATA, 1, 1, 1, 1, 0, 0, partitions=summaries)


COLUMNS = ["ts", "id", "c", "s"]
LITERALS = {
    "ts": ["'1970-01-03T00:00:00+00:00'", "'1970-01-01T12:00:00+00:00'", "'1969-12-30T00:00:00+00:00'"],
    "id": ["-3", "0", "2", "5"],
    "c": ["-1", "0", "4"],
    "s": ["'1'", "'-2'"],
}


@st.composite
def predicates(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(COLUMNS))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!=", "IN", "IS NULL"]))
    if op == "IS NULL":
        return f"{column} IS NULL"
    lit = draw(st.sampled_from(LITERALS[column]))
    return f"{column} IN ({lit}, {lit})" if op == "IN" else f"{column} {op} {lit}"


row_filters = st.recursive(
    predicates(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
        inner.map(lambda p: f"NOT ({p})"),
    ),
    max_leaves=4,
)


def _filters(text: str) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for spec_id, spec in SPECS.items():
        ev = ManifestEvaluator(SCHEMA, spec, parse(text))
        fields = spec.partition_type(SCHEMA).fields
        out[spec_id] = (ev.partition_filter, {f.field_id: i for i, f in enumerate(fields)}, len(fields))
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(manifests(), min_size=BULK_MIN_MANIFESTS, max_size=BULK_MIN_MANIFESTS + 20), row_filters)
def test_bulk_choice_keeps_every_manifest_the_evaluator_keeps(mfs: list[ManifestFile], text: str) -> None:
    listing = ManifestListing(mfs)
    chosen = may_match(listing, _filters(text))
    assert chosen is not None
    # a list decoded columnar is chosen from alike, from its columns, building none of its rows
    rows = decode_manifest_rows(write_manifest_list(mfs, 1, 1, None, 1), min_rows=0)
    assert isinstance(rows, ManifestRows)
    again = may_match(ManifestListing(rows), _filters(text))
    assert again is not None and again.tolist() == chosen.tolist()
    assert rows._built.count(None) == len(mfs)
    kept = set(chosen.tolist())
    evaluators = {spec_id: ManifestEvaluator(SCHEMA, spec, parse(text)) for spec_id, spec in SPECS.items()}
    for i, mf in enumerate(mfs):
        exact = evaluators[mf.partition_spec_id].eval(mf.partitions)
        assert not exact or i in kept, (text, mf.partitions)


def test_bulk_choice_drops_what_readable_bounds_refute() -> None:
    def mf(day: int) -> ManifestFile:
        lo = hi = struct.pack("<i", day)
        parts = (
            PartitionFieldSummary(False, None, lo, hi),
            PartitionFieldSummary(False, None, struct.pack("<q", 1), struct.pack("<q", 9)),
            PartitionFieldSummary(True, None, None, None),
        )
        return ManifestFile(f"m{day}", 1, 0, ManifestContent.DATA, 1, 1, 1, 1, 0, 0, partitions=parts)

    listing = ManifestListing([mf(d) for d in range(100)])
    text = "ts >= '1970-01-11T00:00:00+00:00' AND ts < '1970-01-13T00:00:00+00:00' AND id > 0"
    chosen = may_match(listing, _filters(text))
    assert chosen is not None and chosen.tolist() == [10, 11]
    assert may_match(ManifestListing(listing[: BULK_MIN_MANIFESTS - 1]), _filters(text)) is None


@pytest.mark.anyio
async def test_a_plan_of_many_manifests_selects_what_the_evaluator_selects(tmp_path: Path) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", 2 * BULK_MIN_MANIFESTS, 4)
    md = parse_table_metadata(await io.read(meta), meta)
    for text in filters(2 * BULK_MIN_MANIFESTS, 4).values():
        planner = TableScan(io, md, text).planner
        listing = await planner.manifests()
        assert isinstance(listing, ManifestListing)
        m = PlanMetrics()
        data, deletes = planner.select(listing, m)
        ev = ManifestEvaluator(planner.schema, md.spec(), planner.bound_filter)
        assert data == [mf for mf in listing if ev.eval(mf.partitions)] and not deletes, text
        assert m.manifests_total - m.manifests_skipped_by_summaries == len(data)
        again = planner.select(listing, PlanMetrics())  # the columns built once serve again
        assert again == (data, deletes)


@pytest.mark.anyio
async def test_a_plan_reading_most_of_a_long_list_builds_its_rows_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A columnar list builds rows as they are read: a filtered plan builds the few it keeps,
    and a plan that reads hundreds builds them in a worker thread, not on the event loop."""
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", 1000, 1)  # a list decoded in a thread
    md = parse_table_metadata(await io.read(meta), meta)
    kw = {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache(), "decode_workers": 0}
    narrow = TableScan(io, md, filters(1000, 1)["day_1pct"], **kw)
    assert len([t async for t in narrow.plan_files()]) == 10
    listing = await narrow.planner.manifests()
    assert isinstance(listing, ManifestListing) and len(listing.unbuilt(None)) == 990
    built_on_loop: list[bool] = []
    build = columnar_list._new_manifest_file

    def watched(*args: Any) -> ManifestFile:
        built_on_loop.append(threading.current_thread() is threading.main_thread())
        return build(*args)

    monkeypatch.setattr(columnar_list, "_new_manifest_file", watched)
    for owned in (False, True):  # the second finds them built
        wide = TableScan(io, md, **kw)
        if owned:
            async with wide.plan_files() as tasks:
                n = len([t async for t in tasks])
        else:
            n = len([t async for t in wide.plan_files()])
        assert n == 1000 and not listing.unbuilt(None)
    # the first manifest read is chosen on the loop (one row), the others in a thread
    assert len(built_on_loop) == 990 and sum(built_on_loop) == 1


@pytest.mark.anyio
async def test_a_long_lists_first_manifest_is_requested_before_its_other_rows_are_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan reading most of a long list fetches its first manifest while the list's other
    rows are built: the build waits here until that request is made (the old order, all
    rows first, timed out), and the plan's tasks and counts are those of a plan whose rows
    were all built beforehand."""
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io, f"file://{tmp_path}/t", 1000, 1)
    md = parse_table_metadata(await io.read(meta), meta)
    text = filters(1000, 1)["metrics_only"]  # the summaries narrow nothing
    lists = ManifestListCache()
    requested = threading.Event()
    read = io.read_expecting

    async def watched_read(location: str, size: int) -> bytes:
        requested.set()
        return await read(location, size)

    waited: list[bool] = []
    build = columnar_list._new_manifest_file

    def slow_build(*args: Any) -> ManifestFile:
        if threading.current_thread() is not threading.main_thread() and not waited:
            waited.append(requested.wait(5))
        return build(*args)

    monkeypatch.setattr(io, "read_expecting", watched_read)
    monkeypatch.setattr(columnar_list, "_new_manifest_file", slow_build)
    first = TableScan(io, md, text, cache=ManifestCache(), manifest_list_cache=lists, decode_workers=0)
    tasks = [t.file.file_path async for t in first.plan_files()]
    assert waited == [True]
    again = TableScan(io, md, text, cache=ManifestCache(), manifest_list_cache=lists, decode_workers=0)
    assert sorted(tasks) == sorted([t.file.file_path async for t in again.plan_files()])
    a, b = first.planner.metrics.as_dict(), again.planner.metrics.as_dict()
    counts = ("manifests_total", "manifests_skipped_by_summaries", "manifests_read", "entries_read", "tasks")
    assert [a[k] for k in counts] == [b[k] for k in counts]
    assert a["manifests_total"] == a["manifests_read"] == 1000 and b["manifest_list_from_cache"]
