"""Scan planning: aioiceberg vs PyIceberg 0.12 on synthetic v2 tables, side by side.

Tables: M manifests x E entries, ten columns with full stats, partitioned by day(ts) and
bucket(16, id); manifest m holds day m only, so a day range prunes by summaries while
``id = x`` and ``c0 < x`` (a non-partition column: metrics only) must read every manifest.
Each (engine, store, size, filter) is timed in a fresh process (median of ``--repeat``),
so pool and client start-up are paid as a user pays them; peak RSS is the process's.
The clock holds the same for both engines: from opening the table (``aioiceberg.load_table``
/ ``StaticTable.from_metadata``; "load" is that step alone) to the last task. Module imports,
those each engine would make lazily on its first plan included (:func:`_warm_imports`), come
before it, and the CPU column counts them (benchmarks/README.md, "What the clock holds").
The service case: one warm
process plans one 1% day range, then a second 1% day range (other manifests) is timed.

Every aioiceberg shape is measured twice: through ``async for`` and through the blocking API
(``aioiceberg.sync``, a plain ``for`` over ``plan_files()``, as a PySpark driver plans, or
over ``plan_batches()`` with ``--output batches``, as the async run does): the
"blocking" columns, each beside its ratio to the async time (1.00x: the blocking API costs
nothing over the async one). Each of the ``--repeat`` blocking processes first plans cold with
the runtime's default caches, as the async process does, then fills a cache that holds the
table with an untimed plan and plans again from it: a warm sample.

Writers (``--writer ours,java,pyiceberg``): the same table (the same entries, stats and
manifest list) with its manifests laid out as our writer writes them (fastavro's ~16 KB blocks,
~38 entries each), as Java Iceberg 1.12 writes them (deflate, 64,000-byte blocks, Java's header)
or as PyIceberg 0.12's own manifest writer writes them (one deflated block per entry); see
plan_writers.py. Each writer's table is its own (``t<M>x<E>-<writer>``; ours: ``t<M>x<E>``).

The verdict below the matrix holds every cold cell (a fresh process's plan) to the targets of
issue 33 through each API: PyIceberg's time at least 3x ours everywhere, 8x on 2000x50 and
500x1000. On a store with a per-request delay, each filtered cell also gets its request floor
(request_floor.py): the plan's three dependent requests alone (metadata, manifest list, the
manifests the filter keeps), through obstore and through raw sockets, beside what 8x would need.
Each unfiltered cell is held to issue 33's bound, 1.2 x (decode floor on one core / cores +
fetch floor), per plan: every cold plan of ours is measured against fetch and decode floors
taken right before and right after it, so the machine's speed, which drifts here by up to 1.9x
within minutes, moves both sides alike.

Stores: ``local`` (file://), ``moto``, ``moto20ms`` (moto behind the latency proxy) and
``nginx`` (static files as path-style S3 plus ``--delay-ms`` per request, see
nginx_store.py: unlike moto it costs next to no CPU per GET and keeps connections open).

    .venv/bin/python benchmarks/plan.py                # the full matrix (long: see README)
    .venv/bin/python benchmarks/plan.py --tiny         # seconds: keeps the script from rotting
    .venv/bin/python benchmarks/plan.py --sizes 50x50 --stores nginx --repeat 1
    .venv/bin/python benchmarks/plan.py --sizes 2000x50 --stores nginx --writer ours,java,pyiceberg \
        --scratch /work/scratch/plan-bench --build-only    # build (or find) the tables, measure nothing
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aioiceberg.io import FileIO, resolve_io  # noqa: E402
from aioiceberg.testing.synthetic import build_table, filters, service_filters  # noqa: E402
from benchmarks.plan_writers import WRITERS, layout, relayout, table_name  # noqa: E402

if TYPE_CHECKING:
    from aioiceberg.scan.decode import PruneContext
    from aioiceberg.spec.manifest import ManifestFile
    from aioiceberg.spec.metadata import TableMetadata
    from benchmarks.request_floor import Floor

# ---------------------------------------------------------------------------------------------
# One measurement, in a fresh process


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _warm_imports(engine: str, meta: str) -> None:
    """Import what each engine would import lazily during its first plan, so the clock
    measures planning, not module loading (the CPU column still counts the imports)."""
    if engine == "aioiceberg":
        import contextlib

        import anyio._backends._asyncio  # noqa: F401  (anyio loads its backend on first use)

        from aioiceberg.spec.manifest.columnar import columnar_available

        if meta.startswith("s3://"):
            # A plan's S3 path is obstore's: it never imports aiobotocore. Importing that here
            # (24k objects) made a 30-40 ms full collection fall inside our clock.
            import obstore.store  # noqa: F401

            import aioiceberg.io.obstore_s3  # noqa: F401
        if columnar_available():
            with contextlib.suppress(ImportError):
                import polars  # noqa: F401
    else:
        import pyarrow.fs  # noqa: F401

        # what StaticTable.from_metadata imports on first use (~13 ms that fell inside its clock);
        # pyiceberg.io.pyarrow imports pandas (~0.3 s), outside the clock as it always was
        import pyiceberg.avro.decoder_fast
        import pyiceberg.catalog.noop
        import pyiceberg.io.pyarrow
        import pyiceberg.serializers  # noqa: F401


PAUSE_GC_ENV = "AIOICEBERG_BENCH_PAUSE_GC"


def _runtime() -> Any:
    """The runtime our plans use: the default one, or one that pauses the GC (--pause-gc)."""
    from aioiceberg.runtime import Runtime, default_runtime

    return Runtime(pause_gc=True) if os.environ.get(PAUSE_GC_ENV) == "1" else default_runtime()


async def _plan_ours(
    meta: str, row_filter: str, options: dict[str, str], twice: bool, cache_mb: int, output: str = "tasks"
) -> dict[str, Any]:
    """One plan through the public API, table loading inside the clock, as a user runs it."""
    import aioiceberg
    from aioiceberg.scan.cache import ManifestCache, ManifestListCache

    # The cached-repeat run gets a cache big enough for the table; other runs the default.
    # ``Table.scan`` hands extra keywords to the planner, so the caches go in by the public API.
    caches: dict[str, Any] = {}
    if twice:
        caches = {"cache": ManifestCache(cache_mb * 1024 * 1024), "manifest_list_cache": ManifestListCache()}
    runtime = _runtime()
    # resolved (and so imported) before the clock, as the blocking worker's ``sync`` and
    # PyIceberg's ``StaticTable`` are: the clock measures planning, not module loading
    load_table = aioiceberg.load_table
    start = time.perf_counter()
    table = await load_table(meta, options, runtime=runtime)
    loaded = time.perf_counter() - start
    scan = table.scan(row_filter=row_filter or None, **caches)
    n = await _planned(scan, output)
    elapsed = time.perf_counter() - start
    out: dict[str, Any] = {
        "seconds": elapsed,
        "load_s": loaded,
        "tasks": n,
        "ttft": (scan.metrics.time_to_first_task_s or 0.0) + (elapsed - (scan.metrics.planning_time_s or 0)),
        "metrics": scan.metrics.as_dict(),
    }
    # one plan, tasks dropped as they come: its peak, before any second plan adds to it
    out["peak_rss_first_mb"] = _peak_rss_mb()
    if twice:
        # the same table object (no metadata re-read): only planning is repeated, to the same
        # output (a task plan's repeat builds a task object per file again)
        start = time.perf_counter()
        m = await _planned(table.scan(row_filter=row_filter or None, **caches), output)
        out["second_seconds"] = time.perf_counter() - start
        assert m == n
    await table.io.aclose()
    return out


def _plan_blocking(
    meta: str, row_filter: str, options: dict[str, str], twice: bool, cache_mb: int, output: str = "tasks"
) -> dict[str, Any]:
    """:func:`_plan_ours` through the blocking API: a plain ``for`` in the main thread, over
    the same output (``plan_batches()``'s blocking twin for ``--output batches``)."""
    from aioiceberg import sync
    from aioiceberg.scan.cache import ManifestCache, ManifestListCache

    start = time.perf_counter()
    table = sync.load_table(meta, options, runtime=_runtime())
    loaded = time.perf_counter() - start
    # the timed cold plan runs with the runtime's default caches, as the async worker's does:
    # given the warm sample's big cache it kept every decoded manifest (545 MB against 127 MB
    # on 500x1000), ~0.27 s of page faults the async column it is compared with never paid
    scan = table.scan(row_filter=row_filter or None)
    n = _planned_blocking(scan, output)
    elapsed = time.perf_counter() - start
    out: dict[str, Any] = {
        "seconds": elapsed,
        "load_s": loaded,
        "tasks": n,
        "ttft": (scan.metrics.time_to_first_task_s or 0.0) + (elapsed - (scan.metrics.planning_time_s or 0)),
        "metrics": scan.metrics.as_dict(),
        "peak_rss_first_mb": _peak_rss_mb(),
    }
    if twice:  # the warm sample: a cache that holds the table, filled by an untimed plan
        caches: dict[str, Any] = {
            "cache": ManifestCache(cache_mb * 1024 * 1024),
            "manifest_list_cache": ManifestListCache(),
        }
        _planned_blocking(table.scan(row_filter=row_filter or None, **caches), output)
        start = time.perf_counter()
        m = _planned_blocking(table.scan(row_filter=row_filter or None, **caches), output)
        out["second_seconds"] = time.perf_counter() - start
        assert m == n
    sync.shutdown()
    return out


async def _planned(scan: Any, output: str) -> int:
    """The plan's tasks, counted as they come: a task object each, or rows of task batches
    (``output == "batches"``: columnar, no object per file)."""
    n = 0
    if output == "batches":
        async for batch in scan.plan_batches():
            n += batch.num_rows
    else:
        async for _ in scan.plan_files():
            n += 1
    return n


def _planned_blocking(scan: Any, output: str) -> int:
    """:func:`_planned` through the blocking API."""
    if output == "batches":
        return sum(batch.num_rows for batch in scan.plan_batches())
    return sum(1 for _ in scan.plan_files())


def _settle() -> None:
    """A warm service has long since collected what its start left behind. Without this the
    timed plan paid a full collection of the objects the imports left (62k, ~20 ms here),
    which a service pays once, not per query: a 500x1000 plan itself promotes ~1,700 objects,
    a full collection every ~10 plans."""
    gc.collect()


async def _service_ours(
    meta: str, first: str, queries: list[str], options: dict[str, str], delay_ms: float
) -> dict[str, Any]:
    """A warm process (client open, pool started, default caches) gets queries on other days,
    each timed; then, in the same process, each query's floor (see :func:`_service_floors`)."""
    import aioiceberg

    table = await aioiceberg.load_table(meta, options, runtime=_runtime())
    warm = 0
    async for _ in table.scan(row_filter=first).plan_files():
        warm += 1
    seconds, tasks = [], []
    for text in queries:
        _settle()
        start = time.perf_counter()
        scan = table.scan(row_filter=text)
        n = 0
        async for _ in scan.plan_files():
            n += 1
        seconds.append(time.perf_counter() - start)
        tasks.append(n)
    floors = await _service_floors(table, queries, delay_ms)
    await table.io.aclose()
    return {"seconds": seconds, "tasks": tasks, "floors": floors, "first_tasks": warm}


def _service_blocking(meta: str, first: str, queries: list[str], options: dict[str, str]) -> dict[str, Any]:
    """:func:`_service_ours` through the blocking API (its floors are the async run's)."""
    from aioiceberg import sync

    table = sync.load_table(meta, options, runtime=_runtime())
    warm = sum(1 for _ in table.scan(row_filter=first).plan_files())
    seconds, tasks = [], []
    for text in queries:
        _settle()
        start = time.perf_counter()
        tasks.append(sum(1 for _ in table.scan(row_filter=text).plan_files()))
        seconds.append(time.perf_counter() - start)
    sync.shutdown()
    return {"seconds": seconds, "tasks": tasks, "first_tasks": warm}


async def _service_floors(table: Any, queries: list[str], delay_ms: float) -> list[float]:
    """Each query's floor: one round trip (the manifests it reads, fetched at once; the
    manifest list is cached) plus decoding those manifests on one core, measured in the
    process that ran the queries, right after them (the machine's state of that moment)."""
    from aioiceberg.scan.decode import decode_and_prune_batch
    from aioiceberg.scan.plan_metrics import PlanMetrics

    floors = []
    for text in queries:
        planner = table.scan(row_filter=text).planner
        metrics = PlanMetrics()
        data, deletes = planner.select(await planner.manifests(metrics), metrics)
        chosen = [*deletes, *data]
        blobs = await asyncio.gather(*(table.io.read(mf.manifest_path) for mf in chosen))
        items = list(zip(blobs, chosen, strict=True))
        planner.prune_context.evaluators()  # untimed, as a service has built its evaluators
        gc.collect()
        gc.freeze()  # a service's decode walks none of what the process holds
        try:
            start = time.perf_counter()
            for i in range(0, len(items), 64):
                decode_and_prune_batch(items[i : i + 64], planner.prune_context)
            floors.append(delay_ms / 1000 + (time.perf_counter() - start))
        finally:
            gc.unfreeze()
    return floors


def _plan_pyiceberg(meta: str, row_filter: str, options: dict[str, str]) -> dict[str, Any]:
    from pyiceberg.table import StaticTable

    start = time.perf_counter()
    table = StaticTable.from_metadata(meta, properties=options)
    loaded = time.perf_counter() - start
    scan = table.scan(row_filter=row_filter) if row_filter else table.scan()
    it = iter(scan.plan_files())
    first = next(it, None)
    ttft = time.perf_counter() - start
    n = (first is not None) + sum(1 for _ in it)
    return {"seconds": time.perf_counter() - start, "load_s": loaded, "tasks": n, "ttft": ttft}


def _service_pyiceberg(meta: str, first: str, queries: list[str], options: dict[str, str]) -> dict[str, Any]:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(meta, properties=options)
    warm = sum(1 for _ in table.scan(row_filter=first).plan_files())
    seconds, tasks = [], []
    for text in queries:
        _settle()
        start = time.perf_counter()
        tasks.append(sum(1 for _ in table.scan(row_filter=text).plan_files()))
        seconds.append(time.perf_counter() - start)
    return {"seconds": seconds, "tasks": tasks, "first_tasks": warm}


# The worker that plans through the blocking API (``aioiceberg.sync``).
BLOCKING = "aioiceberg-blocking"


def worker_main(args: argparse.Namespace) -> None:
    options = json.loads(args.options)
    _warm_imports("aioiceberg" if args.worker == BLOCKING else args.worker, args.meta)
    if args.service is not None and args.worker == "aioiceberg":
        queries = json.loads(args.service)
        out = asyncio.run(_service_ours(args.meta, args.filter, queries, options, args.delay_ms))
    elif args.service is not None and args.worker == BLOCKING:
        out = _service_blocking(args.meta, args.filter, json.loads(args.service), options)
    elif args.service is not None:
        out = _service_pyiceberg(args.meta, args.filter, json.loads(args.service), options)
    elif args.worker == "aioiceberg":
        out = asyncio.run(_plan_ours(args.meta, args.filter, options, args.twice, args.cache_mb, args.output))
    elif args.worker == BLOCKING:
        out = _plan_blocking(args.meta, args.filter, options, args.twice, args.cache_mb, args.output)
    else:
        out = _plan_pyiceberg(args.meta, args.filter, options)
    out["peak_rss_mb"] = _peak_rss_mb()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = usage.ru_utime + usage.ru_stime  # every thread, imports included
    print(json.dumps(out))


def measure(
    engine: str,
    meta: str,
    row_filter: str,
    options: dict[str, str],
    twice: bool = False,
    cache_mb: int = 0,
    service: list[str] | None = None,
    delay_ms: float = 0.0,
    output: str = "tasks",
) -> dict[str, Any]:
    """Run one worker in a fresh process; ``service``: the later queries of the service case;
    ``output``: ``batches`` consumes ``plan_batches()`` (Arrow) instead of tasks."""
    cmd = [sys.executable, __file__, "--worker", engine, "--meta", meta, "--filter", row_filter]
    cmd += ["--options", json.dumps(options), "--output", output]
    cmd += ["--twice", "--cache-mb", str(cache_mb)] if twice else []
    cmd += ["--service", json.dumps(service), "--delay-ms", str(delay_ms)] if service is not None else []
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} worker failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------------------------
# Floors: fetching every manifest byte at the same concurrency, and decoding them


def _process_cpu_s(pids: tuple[int, ...]) -> float:
    """User + system CPU seconds of other processes (the S3 server's), 0 when unknown."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    return total


# The bound's decode sample: the columnar decoder on this many manifests spread over the list,
# the best of this many passes (one pass of the first 20 moved by up to 15% from run to run,
# and the bound with it); --tiny brackets each plan with a smaller, single pass
DECODE_SAMPLE = 60
DECODE_PASSES = 3
TINY_DECODE_SAMPLE = 10


@dataclass
class TableBytes:
    """What :func:`floors` fetched and the bound's brackets reuse: the manifest list, and the
    decode sample's bytes, kept in an anonymous file rather than in memory (a worker inherits
    its parent's resident set in its peak RSS), so a bracket decodes them without a refetch."""

    meta: str
    options: dict[str, str]
    manifests: list[ManifestFile]
    ctx: PruneContext
    sample: list[tuple[ManifestFile, int]]  # each sampled manifest and its offset in ``spill``
    spill: BinaryIO

    @property
    def entries(self) -> int:
        return _entries(self.manifests)


def _entries(manifests: list[ManifestFile]) -> int:
    return sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in manifests)


def _sample(manifests: list[ManifestFile], size: int) -> list[ManifestFile]:
    """``size`` manifests spread over the list."""
    return manifests[:: max(1, len(manifests) // size)][:size]


async def _manifest_list(io: FileIO, meta: str) -> tuple[TableMetadata, list[ManifestFile]]:
    from aioiceberg.spec.manifest import read_manifest_list
    from aioiceberg.spec.metadata_json import parse_table_metadata

    md = parse_table_metadata(await io.read(meta), meta)
    snap = md.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    return md, read_manifest_list(await io.read(snap.manifest_list))


async def _fetch_all(
    io: FileIO, manifests: list[ManifestFile], concurrency: int
) -> tuple[dict[str, bytes], float]:
    """Every manifest fetched at once (``concurrency`` in flight): their bytes and the seconds."""
    sem = asyncio.Semaphore(concurrency)
    data: dict[str, bytes] = {}

    async def get(path: str) -> None:
        async with sem:
            data[path] = await io.read(path)

    start = time.perf_counter()
    await asyncio.gather(*(get(m.manifest_path) for m in manifests))
    return data, time.perf_counter() - start


def _decode_per_entry(
    blobs: list[tuple[ManifestFile, bytes]], ctx: PruneContext, columnar: bool, passes: int
) -> float:
    """Seconds per entry decoding ``blobs`` on one core, the best of ``passes``."""
    from aioiceberg.scan.decode import decode_and_prune

    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        n = 0
        for m, blob in blobs:
            if len(blob) == m.manifest_length:
                n += decode_and_prune(blob, m, ctx, columnar).entries_read
        best = min(best, (time.perf_counter() - start) / max(1, n))
    return best


async def floors(
    meta: str,
    options: dict[str, str],
    concurrency: int = 64,
    server_pids: tuple[int, ...] = (),
    keep: int = DECODE_SAMPLE,
) -> tuple[dict[str, float], TableBytes]:
    """The table's floors, and its bytes for the bound's brackets (``keep``: their sample)."""
    from aioiceberg.expressions.tree import AlwaysTrue
    from aioiceberg.scan.decode import PruneContext, decode_and_prune

    io = resolve_io(meta, options, runtime=_runtime())
    md, manifests = await _manifest_list(io, meta)
    server_before = _process_cpu_s(server_pids)
    data, fetch = await _fetch_all(io, manifests, concurrency)
    server_ms_per_get = 1000 * (_process_cpu_s(server_pids) - server_before) / max(1, len(manifests))
    await io.aclose()

    ctx = PruneContext.build(md.schema(), md.specs_by_id(), AlwaysTrue(), True, frozenset())
    per_entry: dict[bool, float] = {}
    for columnar in (False, True):
        # fastavro: the first 20 manifests once (~1 s). The columnar decoder, which the bound
        # is taken against: DECODE_SAMPLE manifests, the best of DECODE_PASSES
        sample = _sample(manifests, DECODE_SAMPLE) if columnar else manifests[:20]
        if sample:  # untimed: the first call imports polars and warms its pool
            decode_and_prune(data.get(sample[0].manifest_path) or b"", sample[0], ctx, columnar)
        blobs = [(m, data.get(m.manifest_path) or b"") for m in sample]
        per_entry[columnar] = _decode_per_entry(blobs, ctx, columnar, DECODE_PASSES if columnar else 1)
    total_entries = _entries(manifests)
    blocks = sum(layout(blob)[1] for blob in data.values())
    spill = tempfile.TemporaryFile()
    kept: list[tuple[ManifestFile, int]] = []
    for m in _sample(manifests, keep):
        kept.append((m, spill.tell()))
        spill.write(data.get(m.manifest_path) or b"")
    spill.flush()
    return {
        "manifests": len(manifests),
        "entries_per_block": total_entries / max(1, blocks),
        "fetch_s": fetch,
        "decode_1core_s": per_entry[False] * total_entries,
        "decode_columnar_1thread_s": per_entry[True] * total_entries,
        "bytes_mb": sum(m.manifest_length for m in manifests) / 1e6,
        "server_ms_per_get": server_ms_per_get,
    }, TableBytes(meta, options, manifests, ctx, kept, spill)


async def _fetch_floor(table: TableBytes, concurrency: int = 64) -> float:
    """Every manifest fetched at once through a new client, as :func:`floors` fetches them
    (after the metadata and the manifest list, untimed)."""
    io = resolve_io(table.meta, table.options, runtime=_runtime())
    try:
        await _manifest_list(io, table.meta)
        return (await _fetch_all(io, table.manifests, concurrency))[1]
    finally:
        await io.aclose()


def _decode_floor(table: TableBytes, passes: int) -> float:
    """The columnar decoder on the kept sample on one core, scaled to every entry."""
    fd = table.spill.fileno()
    blobs = [(m, os.pread(fd, m.manifest_length, offset)) for m, offset in table.sample]
    return _decode_per_entry(blobs, table.ctx, True, passes) * table.entries


# Issue 33's bound for a cold unfiltered plan: BOUND_FACTOR x (decode floor / cores + fetch floor)
BOUND_FACTOR = 1.2
CORES = os.cpu_count() or 1


@dataclass
class Bracketed:
    """One timed plan and the floors of its moment (the mean of those right before and after it)."""

    seconds: float
    fetch_s: float
    decode_s: float

    @property
    def bound(self) -> float:
        return BOUND_FACTOR * (self.decode_s / CORES + self.fetch_s)

    @property
    def ratio(self) -> float:
        return self.seconds / self.bound


def _bracket(table: TableBytes, tiny: bool) -> tuple[float, float]:
    """The floors of this moment, for the plan beside it: (fetch s, decode on one core s)."""
    fetch = asyncio.run(_fetch_floor(table))
    return fetch, _decode_floor(table, 1 if tiny else DECODE_PASSES)


# ---------------------------------------------------------------------------------------------
# The matrix


@dataclass
class Store:
    name: str
    root: str
    options: dict[str, str]
    server_pids: tuple[int, ...] = ()  # the S3 server's processes, whose CPU per GET is reported
    group: str = "local"  # stores of one group serve the same objects: a table is built once
    disk_root: str | None = None  # nginx: tables are written here as <bucket>/<key>
    delay_ms: float = 0.0  # added to every request (the service case's floor counts it)

    def existing(self, location: str) -> str | None:
        """The newest metadata file of a table already on local disk (``--scratch`` reuse)."""
        if self.group == "local":
            folder = Path(location.removeprefix("file://"), "metadata")
        elif self.disk_root is not None:
            folder = Path(self.disk_root, location.removeprefix("s3://"), "metadata")
        else:
            return None
        found = sorted(folder.glob("*.metadata.json"))
        if not found:
            return None
        return found[-1].as_uri() if self.group == "local" else f"{location}/metadata/{found[-1].name}"


@contextmanager
def stores(wanted: list[str], scratch: Path, delay_ms: float) -> Iterator[list[Store]]:
    out: list[Store] = []
    stack: list[Any] = []
    try:
        if "local" in wanted:
            out.append(Store("local", f"file://{scratch}/tables", {}))
        if {"moto", "moto20ms"} & set(wanted):
            from tests.servers.moto import FAKE_CREDENTIALS, MotoServer
            from tests.servers.proxy import FaultConfig, FaultProxy

            os.environ.update({k: v for k, v in FAKE_CREDENTIALS.items() if k not in os.environ})
            moto = MotoServer().start()
            stack.append(moto)
            pid = moto.process.pid if moto.process is not None else None
            base = {
                "s3.region": "us-east-1",
                "s3.access-key-id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "s3.secret-access-key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            }
            import boto3  # type: ignore[import-untyped]

            boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket="bench")
            pids = (pid,) if pid is not None else ()
            if "moto" in wanted:
                out.append(
                    Store("moto", "s3://bench/tables", {**base, "s3.endpoint": moto.url}, pids, "moto")
                )
            if "moto20ms" in wanted:
                proxy = FaultProxy(moto.url, FaultConfig(delay_ms=delay_ms)).start()
                stack.append(proxy)
                options = {**base, "s3.endpoint": proxy.url}
                out.append(
                    Store(f"moto+{delay_ms:g}ms", "s3://bench/tables", options, pids, "moto", None, delay_ms)
                )
        if "nginx" in wanted:
            from benchmarks.nginx_store import start_or_skip

            disk = scratch / "nginx-root"
            nginx = start_or_skip(disk, delay_ms)  # None (and one line saying why) without nginx
            if nginx is not None:
                stack.append(nginx)
                name = f"nginx+{delay_ms:g}ms" if delay_ms > 0 else "nginx"
                out.append(
                    Store(
                        name, "s3://bench/tables", nginx.options(), nginx.pids(), "nginx", str(disk), delay_ms
                    )
                )
        yield out
    finally:
        for item in reversed(stack):
            item.stop()


def fmt(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--tiny",
        action="store_true",
        help="a few seconds: 4x20 tables, local only, one run, two filters; every engine and API "
        "on the first cell, our async plan alone on the others (the second writer on the first "
        "filter only); the service case on the first writer only, with one query",
    )
    p.add_argument("--sizes", default="50x50,2000x50,500x1000,200x5000")
    p.add_argument(
        "--stores",
        default=None,
        help="local,moto,moto20ms,nginx (default local,moto,nginx; --tiny: local)",
    )
    p.add_argument(
        "--filters", default=None, help="default none,day_1pct,id_eq,metrics_only; --tiny: none,day_1pct"
    )
    p.add_argument(
        "--writer",
        default=None,
        help="whose manifest layout: ours, java, pyiceberg or a comma list (default ours; --tiny: ours,java)",
    )
    p.add_argument(
        "--build-only",
        action="store_true",
        help="build (or, with --scratch, find) every table of the matrix, print where, measure nothing",
    )
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--pyiceberg-repeat", type=int, default=None, help="default: --repeat")
    p.add_argument(
        "--delay-ms", type=float, default=20.0, help="per request, for moto20ms and nginx (0: none)"
    )
    p.add_argument("--no-pyiceberg", action="store_true")
    p.add_argument("--worker", choices=["aioiceberg", BLOCKING, "pyiceberg"])
    p.add_argument("--meta")
    p.add_argument("--filter", default="")
    p.add_argument(
        "--output",
        choices=["tasks", "batches"],
        default="tasks",
        help="what the aioiceberg workers (async and blocking) consume: tasks, or plan_batches() "
        "(Arrow, columnar output)",
    )
    p.add_argument("--options", default="{}")
    p.add_argument("--twice", action="store_true")
    p.add_argument("--service", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--cache-mb",
        type=int,
        default=2048,
        help="manifest cache of the extra run that plans twice in one process (default 2048)",
    )
    p.add_argument(
        "--scratch",
        help="local tables live here (kept) instead of a temporary directory, and a table "
        "already built there is reused",
    )
    p.add_argument(
        "--pause-gc",
        action="store_true",
        help="our plans run on Runtime(pause_gc=True): the cyclic GC held off while entries are built",
    )
    p.add_argument("--build", help=argparse.SUPPRESS)
    p.add_argument("--size", help=argparse.SUPPRESS)
    p.add_argument("--disk-root", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.pause_gc:  # the worker processes inherit it
        os.environ[PAUSE_GC_ENV] = "1"
    if args.build:
        m, e = (int(v) for v in args.size.split("x"))
        if args.disk_root:
            from benchmarks.s3_on_disk import S3OnDiskIO

            io: FileIO = S3OnDiskIO(args.disk_root).bind_runtime(_runtime())
        else:
            io = resolve_io(args.build, json.loads(args.options), runtime=_runtime())
        print(asyncio.run(_build_and_close(io, args.build, m, e, args.writer or "ours")))
        return
    if args.worker:
        worker_main(args)
        return
    # Workers import modules lazily inside the clock. A module without bytecode on disk (a
    # fresh checkout run with PYTHONDONTWRITEBYTECODE=1) compiles there on every run: 2000x50
    # with 1% of days measured 0.145 s that way against 0.129 s compiled (10 runs each).
    import compileall

    compileall.compile_dir(str(ROOT / "aioiceberg"), quiet=1)
    if args.tiny:  # one writer besides ours, so its path does not rot
        args.sizes, args.stores, args.repeat = "4x20", args.stores or "local", 1
        args.writer = args.writer or "ours,java"
        args.filters = args.filters or "none,day_1pct"  # all tasks, and pruning by partition
    args.filters = args.filters or "none,day_1pct,id_eq,metrics_only"
    args.stores = args.stores or "local,moto,nginx"
    writers = (args.writer or "ours").split(",")
    for writer in writers:
        relayout(writer)  # an unknown name fails here, before anything is built
    pyi_repeat = args.pyiceberg_repeat or args.repeat
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    wanted_filters = args.filters.split(",")
    service_queries = 1 if args.tiny else SERVICE_QUERIES
    with (
        (
            contextlib.nullcontext(args.scratch)
            if args.scratch
            else tempfile.TemporaryDirectory(prefix="plan-bench-")
        ) as tmp,
        stores(args.stores.split(","), Path(tmp), args.delay_ms) as store_list,
    ):
        # moto and moto+proxy share one bucket: build there once, plan through both endpoints
        built: dict[tuple[str, int, int, str], str] = {}
        if args.build_only:
            for store in store_list:
                for m, e in sizes:
                    for writer in writers:
                        meta = _table(built, store, m, e, writer, bool(args.scratch))
                        print(f"{store.name} {m}x{e} {writer}: {meta}", flush=True)
            return
        service_rows: list[str] = []
        tables: list[str] = []
        cells: list[Cell] = []
        print(
            "| store | M x E | writer | filter | tasks | aioiceberg s | PyIceberg s | PyI / async | "
            "CPU ours s | CPU PyI s | CPU ratio | ttft ours s | ttft PyI s | load ours s | load PyI s | "
            "RSS ours MB | RSS PyI MB | 2nd plan s | 1st / 2nd | fetch floor s | server CPU ms/GET | "
            "decode floor 1 core s (fastavro / columnar) | load | blocking s | PyI / blocking | "
            "blocking / async | blocking 2nd plan s | blocking / async 2nd | "
            "request floor s (obstore / raw sockets) |"
        )
        print("|" + "---|" * 29)
        for store in store_list:
            for m, e in sizes:
                for writer in writers:
                    meta = _table(built, store, m, e, writer, bool(args.scratch))
                    keep = TINY_DECODE_SAMPLE if args.tiny else DECODE_SAMPLE
                    fl, fetched = asyncio.run(
                        floors(meta, store.options, server_pids=store.server_pids, keep=keep)
                    )
                    tables.append(
                        f"| {store.name} | {m}x{e} | {writer} | {fl['manifests']} | {fl['bytes_mb']:.1f} | "
                        f"{fl['entries_per_block']:.1f} |"
                    )
                    for name, text in filters(m, e).items():
                        if name not in wanted_filters:
                            continue
                        if args.tiny and writer != writers[0] and name != wanted_filters[0]:
                            continue  # --tiny: a second writer's path, not the matrix again
                        # --tiny: every engine on the first cell; the others' paths through one
                        async_only = args.tiny and bool(cells)
                        bracket = fetched if name == "none" else None  # the bound: unfiltered plans
                        cell = _cell(
                            store, m, e, writer, name, text, meta, fl, args, pyi_repeat, async_only, bracket
                        )
                        cells.append(cell)
                        print(cell.row, flush=True)
                    if args.tiny and writer != writers[0]:
                        continue  # --tiny: the service case on the first writer only
                    service_rows.append(
                        _service_row(
                            store,
                            meta,
                            m,
                            e,
                            writer,
                            args.repeat,
                            0 if args.no_pyiceberg else pyi_repeat,
                            service_queries,
                        )
                    )
        print()
        print(
            "Tables: each writer's manifests as the planners fetch them (entries per Avro block: the "
            "layout the decoders see)."
        )
        print("| store | M x E | writer | manifests | manifest MB | entries per block |")
        print("|---|---|---|---|---|---|")
        print("\n".join(tables))
        if any(c.bracketed_async for c in cells):
            print()
            print(_bound(cells, args.tiny))
        if not args.no_pyiceberg:
            print()
            print(_verdict(cells))
        if any(c.floor_runs for c in cells):
            print()
            print(_request_floors(cells))
        print()
        print(
            f"Service case: one warm process plans day_1pct, then {service_queries} other 1% day "
            "ranges (manifests not read yet), each timed; fresh processes as above. Floor: one round "
            "trip plus decoding the manifests the query reads on one core, measured in the same "
            "process right after the queries. Times and the floor are medians of every query; "
            "ours / floor is the median of each query's own ratio, beside their range."
        )
        print(
            "| M x E | store | writer | tasks | queries | ours s | PyIceberg s | ratio | floor s | "
            "ours / floor | range | load | blocking s | blocking / async |"
        )
        print("|" + "---|" * 14)
        print("\n".join(service_rows), flush=True)


def _table(
    built: dict[tuple[str, int, int, str], str], store: Store, m: int, e: int, writer: str, reuse: bool
) -> str:
    """The table's metadata location: built in this run, found in ``--scratch``, or built now."""
    key = (store.group, m, e, writer)
    loc = f"{store.root}/{table_name(m, e, writer)}"
    if key not in built and reuse:
        found = store.existing(loc)
        if found:
            built[key] = found
    if key not in built:
        # built in a child: ru_maxrss survives fork+exec, so a big parent would
        # inflate every measured worker's peak RSS
        built[key] = _build_in_child(store, loc, m, e, writer)
    return built[key]


@dataclass
class Cell:
    """One measured cell: its printed row and what the verdict needs."""

    row: str
    label: str
    size: tuple[int, int]
    writer: str
    ratio_async: float
    ratio_blocking: float
    seconds_async: float = math.nan
    seconds_pyiceberg: float = math.nan
    # the request floor (filtered cells on a store with a delay; see _floor_of)
    manifests_read: int = 0
    floor_obstore: Floor | None = None
    floor_raw: Floor | None = None
    floor_runs: int = 0  # fresh processes per client: 0, no floor taken
    raw_skipped: str = ""  # why the raw-socket floor was not taken
    # unfiltered cells: each cold plan with the floors taken right before it (see _bound)
    output: str = "tasks"
    bracketed_async: list[Bracketed] = field(default_factory=list)
    bracketed_blocking: list[Bracketed] = field(default_factory=list)


# the request floor is taken for plans reading at most this many manifests (a plan's
# io_concurrency: all of them requested at once)
FLOOR_MANIFESTS_MAX = 64


def _floor_of(store: Store, meta: str, text: str, runs: int) -> dict[str, Any]:
    """The cell's request floor (request_floor.py), as :class:`Cell` fields."""
    # imported here: the workers import this module, and must hold nothing more before the clock
    from benchmarks.request_floor import plan_requests, raw_endpoint, request_floor

    requests = asyncio.run(plan_requests(meta, store.options, text))
    if len(requests.manifests) > FLOOR_MANIFESTS_MAX:
        # a plan reading every manifest is bound by fetching and decoding, not by its three
        # round trips (its floors are the fetch and decode floors); thousands of GETs at once
        # would only measure the store refusing connections
        return {}
    # the raw client's GETs go unsigned: only a store that checks no signature answers them
    unsigned = store.group == "nginx"
    return {
        "manifests_read": len(requests.manifests),
        "floor_obstore": request_floor(requests, store.options, runs, "obstore"),
        "floor_raw": request_floor(requests, store.options, runs, "raw") if unsigned else None,
        "floor_runs": runs,
        "raw_skipped": raw_endpoint(store.options)[1] if unsigned else "raw sockets: nginx only (unsigned)",
    }


def _cell(
    store: Store,
    m: int,
    e: int,
    writer: str,
    name: str,
    text: str,
    meta: str,
    fl: dict[str, float],
    args: argparse.Namespace,
    pyi_repeat: int,
    async_only: bool = False,
    table: TableBytes | None = None,
) -> Cell:
    """``async_only``: our async plan alone, once and without its cached sample (a tiny run's
    later cells: their filter's or writer's path, not every engine again). A tiny run's first
    cell's async process plans twice, its cached sample too (one process, not two).
    ``table``: each of our cold plans is bracketed by the floors of its moment (the bound)."""
    merged = args.tiny and not async_only
    pyi_repeat = 0 if args.no_pyiceberg or async_only else pyi_repeat
    # interleaved, so a change in machine load hits both engines alike
    ours: list[dict[str, Any]] = []
    blocked: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    bracketed: dict[str, list[Bracketed]] = {"aioiceberg": [], BLOCKING: []}

    def timed(engine: str, twice: bool) -> dict[str, Any]:
        before = _bracket(table, args.tiny) if table is not None else None
        run = measure(engine, meta, text, store.options, twice, args.cache_mb, output=args.output)
        if table is not None and before is not None:
            # and right after: the machine's speed moved by up to 1.5x between a bracket and
            # its plan a second later; the mean of the two is the plan's moment
            after = _bracket(table, args.tiny)
            fetch, decode = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
            bracketed[engine].append(Bracketed(run["seconds"], fetch, decode))
        return run

    for i in range(max(args.repeat, pyi_repeat)):
        if i < args.repeat:
            ours.append(timed("aioiceberg", merged))
            if not async_only:  # a cold sample with the default caches, then a warm one
                blocked.append(timed(BLOCKING, True))
        if i < pyi_repeat:
            theirs.append(measure("pyiceberg", meta, text, store.options))
    cached: dict[str, Any] | None = ours[-1] if merged else None
    if not merged and not async_only:  # one more process plans twice with a cache that holds the table
        cached = measure("aioiceberg", meta, text, store.options, True, args.cache_mb, output=args.output)
    where = f"{store.name} {m}x{e} {writer} {name}"
    if blocked and {r["tasks"] for r in blocked} != {ours[0]["tasks"]}:
        raise SystemExit(f"{where}: blocking task counts differ: {ours[0]['tasks']} vs {blocked[0]['tasks']}")
    if theirs and {r["tasks"] for r in theirs} != {ours[0]["tasks"]}:
        raise SystemExit(f"{where}: task counts differ: {ours[0]['tasks']} vs {theirs[0]['tasks']}")
    nan = float("nan")
    t_blocking = statistics.median(r["seconds"] for r in blocked) if blocked else nan
    second = cached["second_seconds"] if cached else nan
    first_cached = cached["seconds"] if cached else nan
    second_blocking = statistics.median(r["second_seconds"] for r in blocked) if blocked else nan
    t_ours = statistics.median(r["seconds"] for r in ours)
    t_pyi = statistics.median(r["seconds"] for r in theirs) if theirs else float("nan")
    c_ours = statistics.median(r["cpu_s"] for r in ours)
    c_pyi = statistics.median(r["cpu_s"] for r in theirs) if theirs else float("nan")
    row = (
        f"| {store.name} | {m}x{e} | {writer} | {name} | {ours[0]['tasks']} | {fmt(t_ours)} | "
        f"{fmt(t_pyi)} | "
        f"{t_pyi / t_ours:.1f}x | {fmt(c_ours)} | {fmt(c_pyi)} | {c_pyi / c_ours:.1f}x | "
        f"{fmt(statistics.median(r['ttft'] for r in ours))} | "
        f"{fmt(statistics.median(r['ttft'] for r in theirs)) if theirs else '-'} | "
        f"{fmt(statistics.median(r['load_s'] for r in ours))} | "
        f"{fmt(statistics.median(r['load_s'] for r in theirs)) if theirs else '-'} | "
        f"{max(r['peak_rss_first_mb'] for r in ours):.0f} | "
        f"{max(r['peak_rss_mb'] for r in theirs) if theirs else float('nan'):.0f} | "
        f"{fmt(second)} | "
        f"{first_cached / second:.0f}x | {fmt(fl['fetch_s'])} | "
        f"{fl['server_ms_per_get']:.2f} | "
        f"{fmt(fl['decode_1core_s'])} / {fmt(fl['decode_columnar_1thread_s'])} | "
        f"{os.getloadavg()[0]:.1f} | {fmt(t_blocking)} | {t_pyi / t_blocking:.1f}x | "
        f"{t_blocking / t_ours:.2f}x | {fmt(second_blocking)} | {second_blocking / second:.2f}x |"
    )
    # Filtered cells on a store with a delay: their dependent requests alone (a tiny run: on
    # the cell every engine runs, once per client)
    floor: dict[str, Any] = {}
    if store.delay_ms > 0 and name != "none" and not async_only:
        floor = _floor_of(store, meta, text, 1 if args.tiny else max(args.repeat, 3))
    obstore_floor, raw_floor = floor.get("floor_obstore"), floor.get("floor_raw")
    row += (
        f" {fmt(obstore_floor.seconds) if obstore_floor else '-'} / "
        f"{fmt(raw_floor.seconds) if raw_floor else '-'} |"
        if floor
        else " - |"
    )
    row = row.replace(" nanx |", " - |").replace(" nan |", " - |")  # not measured
    return Cell(
        row,
        where,
        (m, e),
        writer,
        t_pyi / t_ours,
        t_pyi / t_blocking,
        t_ours,
        t_pyi,
        **floor,
        output=args.output,
        bracketed_async=bracketed["aioiceberg"],
        bracketed_blocking=bracketed[BLOCKING],
    )


# Issue 33's targets for cold plans: PyIceberg's time over ours, on every cell / on these sizes.
TARGET_EVERY = 3.0
TARGET_SIZES = ((2000, 50), (500, 1000))
TARGET_SIZED = 8.0


def _verdict(cells: list[Cell]) -> str:
    """Each target through each API: the cells it covers, how many meet it, the worst one."""
    lines = [
        "Verdict, cold plans (fresh processes; PyIceberg s / ours s, medians): each target through each API.",
        "| target | API | cells | met | by writer (met / cells) | worst cell | worst ratio | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sized = " and ".join(f"{m}x{e}" for m, e in TARGET_SIZES)
    targets = [
        (f">= {TARGET_EVERY:g}x every cold cell", TARGET_EVERY, cells),
        (f">= {TARGET_SIZED:g}x on {sized}", TARGET_SIZED, [c for c in cells if c.size in TARGET_SIZES]),
    ]
    for target, bar, covered in targets:
        for api in ("async", "blocking"):

            def ratio(c: Cell, api: str = api) -> float:
                return c.ratio_async if api == "async" else c.ratio_blocking

            # a tiny run's second writer is measured through one API
            measured = [c for c in covered if not math.isnan(ratio(c))]
            if not measured:
                lines.append(f"| {target} | {api} | 0 | - | - | - | - | not measured |")
                continue
            met = [c for c in measured if ratio(c) >= bar]
            by_writer = ", ".join(
                f"{w} {sum(1 for c in met if c.writer == w)}/{sum(1 for c in measured if c.writer == w)}"
                for w in WRITERS
                if any(c.writer == w for c in measured)
            )
            worst = min(measured, key=ratio)
            verdict = "met" if len(met) == len(measured) else "missed"
            lines.append(
                f"| {target} | {api} | {len(measured)} | {len(met)} | {by_writer} | {worst.label} | "
                f"{ratio(worst):.1f}x | {verdict} |"
            )
    return "\n".join(lines)


def _request_floors(cells: list[Cell]) -> str:
    """Each filtered cell beside its request floor and what issue 33's target would need of it."""
    from benchmarks.request_floor import describe  # the workers do not import it (see _floor_of)

    floored = [c for c in cells if c.floor_runs]
    runs = sorted({c.floor_runs for c in floored})
    lines = [
        "Request floor: each filtered cell's dependent requests alone (GET the metadata JSON, then "
        "the manifest list, then every manifest the filter keeps at once), timed from the client's "
        f"creation in a fresh process, median of {'/'.join(map(str, runs))} per client, stages as "
        "their medians (metadata + list + manifests, ms): through obstore with our store settings, "
        "and through raw HTTP/1.1 on asyncio sockets (unsigned, the first connection kept, one new "
        "connection per extra concurrent GET). \"Target needs\" is PyIceberg's time over the cell's "
        f"target ({TARGET_SIZED:g}x on {' and '.join(f'{m}x{e}' for m, e in TARGET_SIZES)}, else "
        f"{TARGET_EVERY:g}x): below the raw-socket floor, no client on this rig can meet it.",
        "| cell | manifests read | ours s | PyIceberg s | target needs <= s | obstore floor | "
        "raw-socket floor | ours over obstore floor ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    sentences = []
    for c in floored:
        bar = TARGET_SIZED if c.size in TARGET_SIZES else TARGET_EVERY
        needs = c.seconds_pyiceberg / bar
        above = 1000 * (c.seconds_async - c.floor_obstore.seconds) if c.floor_obstore else math.nan
        raw = describe(c.floor_raw) if c.floor_raw else c.raw_skipped or "-"
        lines.append(
            f"| {c.label} | {c.manifests_read} | {fmt(c.seconds_async)} | "
            f"{'-' if math.isnan(needs) else fmt(c.seconds_pyiceberg)} | "
            f"{'-' if math.isnan(needs) else f'{bar:g}x: {fmt(needs)}'} | {describe(c.floor_obstore)} | "
            f"{raw} | {'-' if math.isnan(above) else f'{above:.1f}'} |"
        )
        wants = "PyIceberg not run" if math.isnan(needs) else f"{bar:g}x needs <= {needs:.3f} s"
        alone = [f"obstore {c.floor_obstore.seconds:.3f} s"] if c.floor_obstore else []
        alone += [f"raw sockets {c.floor_raw.seconds:.3f} s"] if c.floor_raw else []
        sentences.append(
            f"- {c.label}: {wants}; requests alone: {', '.join(alone) or '-'}; ours {c.seconds_async:.3f} s."
        )
    return "\n".join([*lines, "", *sentences])


def _bound(cells: list[Cell], tiny: bool) -> str:
    """Issue 33's bound on each unfiltered cell, each plan against the floors of its moment."""
    sample, passes = (TINY_DECODE_SAMPLE, 1) if tiny else (DECODE_SAMPLE, DECODE_PASSES)
    lines = [
        f"Bound, cold unfiltered plans: {BOUND_FACTOR:g} x (decode floor on one core / {CORES} cores "
        "+ fetch floor), floors taken right before and after each plan",
        "Each plan is divided by the bound of the floors measured right before and right after it "
        "(their mean; fetch: every "
        "manifest at once, 64 in flight; decode: the columnar decoder on "
        f"{sample} manifests, best of {passes}, scaled to every entry), so a drift in the machine's "
        "speed moves a plan and its bound together; the ratios are the medians of those pairs "
        "(min-max beside them), met at <= 1.00. The bound is the columnar plan's (`--output "
        "batches`, no Python object per file); a `tasks` row is shown beside it, not held to it.",
        "| cell (store, M x E, writer, filter) | output | async s | blocking s | fetch floor s | "
        "decode floor 1 core s | bound s | async / bound | blocking / bound | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def med(values: list[float]) -> str:
        return fmt(statistics.median(values)) if values else "-"

    for c in cells:
        if not c.bracketed_async:
            continue
        both = [*c.bracketed_async, *c.bracketed_blocking]
        cols: list[str] = []
        verdicts: list[str] = []
        for api, pairs in (("async", c.bracketed_async), ("blocking", c.bracketed_blocking)):
            if not pairs:
                cols.append("-")
                verdicts.append(f"{api} not measured")
                continue
            ratios = sorted(p.ratio for p in pairs)
            median = statistics.median(ratios)
            cols.append(f"{median:.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x)")
            if c.output != "batches":  # the bound is the columnar plan's (no object per file)
                verdicts.append(f"{api}: tasks, not held to it")
                continue
            verdicts.append(f"{api} {'met' if round(median, 2) <= 1.0 else 'missed'}")  # as printed
        lines.append(
            f"| {c.label} | {c.output} | {med([p.seconds for p in c.bracketed_async])} | "
            f"{med([p.seconds for p in c.bracketed_blocking])} | {med([p.fetch_s for p in both])} | "
            f"{med([p.decode_s for p in both])} | {med([p.bound for p in both])} | {cols[0]} | {cols[1]} | "
            f"{', '.join(verdicts)} |"
        )
    return "\n".join(lines)


# Queries per process in the service case: each sample is one query, and a fresh process's
# state (where its allocator, threads and caches stand) no longer weighs a third of the verdict.
SERVICE_QUERIES = 5


def _service_row(
    store: Store,
    meta: str,
    m: int,
    e: int,
    writer: str,
    repeat: int,
    pyi_repeat: int,
    n_queries: int = SERVICE_QUERIES,
) -> str:
    first, queries = service_filters(m, n_queries)
    ours: list[dict[str, Any]] = []
    blocked: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for i in range(max(repeat, pyi_repeat)):
        if i < repeat:
            run = measure("aioiceberg", meta, first, store.options, service=queries, delay_ms=store.delay_ms)
            ours.append(run)
            blocked.append(measure(BLOCKING, meta, first, store.options, service=queries))
        if i < pyi_repeat:
            theirs.append(measure("pyiceberg", meta, first, store.options, service=queries))
    if any(r["tasks"] != ours[0]["tasks"] for r in [*ours, *blocked, *theirs]):
        raise SystemExit(f"service task counts differ: {ours[0]['tasks']} vs {theirs[0]['tasks']}")
    t_ours = statistics.median(t for r in ours for t in r["seconds"])
    t_pyi = statistics.median(t for r in theirs for t in r["seconds"]) if theirs else float("nan")
    t_blocking = statistics.median(t for r in blocked for t in r["seconds"])
    floor = statistics.median(f for r in ours for f in r["floors"])
    ratios = sorted(t / f for r in ours for t, f in zip(r["seconds"], r["floors"], strict=True))
    return (
        f"| {m}x{e} | {store.name} | {writer} | {ours[0]['tasks'][0]} | {len(ratios)} | {fmt(t_ours)} | "
        f"{fmt(t_pyi) if theirs else '-'} | {t_pyi / t_ours:.1f}x | {fmt(floor)} | "
        f"{statistics.median(ratios):.2f}x | {ratios[0]:.2f}-{ratios[-1]:.2f}x | "
        f"{os.getloadavg()[0]:.1f} | {fmt(t_blocking)} | {t_blocking / t_ours:.2f}x |"
    )


def _build_in_child(store: Store, location: str, m: int, e: int, writer: str) -> str:
    cmd = [
        sys.executable,
        __file__,
        "--build",
        location,
        "--size",
        f"{m}x{e}",
        "--options",
        json.dumps(store.options),
        "--writer",
        writer,
    ]
    if store.disk_root is not None:  # nginx serves files: write them with their s3:// paths
        cmd += ["--disk-root", store.disk_root]
    # PyIceberg's writer takes ~0.5-2.5 ms an entry: 500x1000 as PyIceberg writes it takes minutes
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=4 * 3600)
    if done.returncode != 0:
        raise RuntimeError(f"building {location} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


async def _build_and_close(io: FileIO, location: str, m: int, e: int, writer: str) -> str:
    try:
        return await build_table(io, location, m, e, relayout(writer))
    finally:
        await io.aclose()


if __name__ == "__main__":
    main()
