"""A service that keeps a 100k-file table loaded and plans filters it has never seen, vs PyIceberg 0.12.

Issue 33's service case: one runtime, the table loaded once, every query a new filter,
nginx + 20 ms. Plans only: the table is ``aioiceberg.testing.synthetic``'s (M manifests x E
entries, ten columns with full stats, deflate, ``day(ts)`` + ``bucket(16, id)``, manifest m
holds day m), whose data files do not exist, so each query plans every task and reads no
row (``service.py`` measures plan + read on a table with real data files). Every query's
task count is checked, after the clock, against what the table's bounds allow.

Queries cycle through six kinds, each with new values (no filter text repeats in a
process): ``id = x`` (one file, every manifest read), a day range with second offsets (a
few manifests), ``c0`` in a range (metrics only, every manifest), ``c4 < 'a...' AND c6 >=``
(strings, every manifest), two days AND (``c1 > y OR c2 < z``), and ``id IN`` three values.

Measured, each engine in fresh processes, one after another:

1. sequential: the table loaded once, a cold first query (``id =``), then ``--queries``
   new-filter queries, median and p99; aioiceberg through ``async for`` on one ``Runtime``
   and through the blocking ``aioiceberg.sync`` (its default runtime), PyIceberg through
   ``StaticTable.from_metadata`` once and ``scan(row_filter=f).plan_files()``;
2. warm: after those, ``--warm`` more ``id =`` queries (new values, every manifest read
   again, all of them fetched before): the time of a query on cached manifests;
3. throughput at N concurrent queries for ``--seconds`` (after one untimed ``id =`` query):
   aioiceberg as N asyncio tasks on one runtime, PyIceberg as N queries kept in flight on a
   thread pool of each of ``--threads`` sizes up to N, the best taken;
4. peak RSS of every process (``VmHWM``; our decoder processes beside it).

    .venv/bin/python benchmarks/service_plan.py --scratch DIR   # 400x250 (100k files), nginx + 20 ms
    .venv/bin/python benchmarks/service_plan.py --tiny          # seconds
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from aioiceberg.runtime import default_runtime  # noqa: E402
from aioiceberg.testing.synthetic import DAY_MICROS, FIRST_DAY  # noqa: E402
from benchmarks.service import children_hwm_mb, peak_rss_mb  # noqa: E402

KINDS = ("id", "day", "c0", "str", "mix", "in")
TARGET_RATIO = 20.0
TARGET_WARM_S = 0.050

# ---------------------------------------------------------------------------------------------
# Queries: new filters, and what the table holds for each


def _iso(micros: int) -> str:
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)).isoformat()


@dataclasses.dataclass(frozen=True)
class Query:
    kind: str
    text: str
    params: tuple[int, ...]


class Queries:
    """New filters over the synthetic table, and their exact task counts.

    File k (manifest m = k // E, entry i = k % E) has ``id`` in [1000k, 1000k + 999], ``ts``
    in [day m + i s, + 999999 us], ``c0`` in [10k, 10k + 9], ``c1`` in [-k, k], ``c2`` in
    [k/2, k/2 + 1], ``c4`` from ``a%08d`` to ``z%08d`` and ``c6`` in [k, k + 100]
    (``synthetic.data_file``); a filter keeps the files whose bounds it may match.
    """

    def __init__(self, manifests: int, entries: int, seed: int) -> None:
        self.m, self.e = manifests, entries
        self.files = manifests * entries
        self.rng = random.Random(seed)
        self.seen: set[str] = set()
        k = np.arange(self.files, dtype=np.int64)
        self.k = k
        self.ts_lo = (FIRST_DAY + k // entries) * DAY_MICROS + (k % entries) * 1_000_000
        self.ts_hi = self.ts_lo + 999_999

    def next(self, kind: str) -> Query:
        while True:
            q = self._draw(kind)
            if q.text not in self.seen:
                self.seen.add(q.text)
                return q

    def _draw(self, kind: str) -> Query:
        r, files = self.rng, self.files
        if kind == "id":
            k = r.randrange(files)
            return Query(kind, f"id = {k * 1000}", (k,))
        if kind == "day":
            t0 = (FIRST_DAY + r.randrange(self.m)) * DAY_MICROS + r.randrange(max(1, self.e)) * 1_000_000
            t1 = t0 + r.randrange(1, 2 * 86_400) * 1_000_000
            return Query(kind, f"ts >= '{_iso(t0)}' AND ts < '{_iso(t1)}'", (t0, t1))
        if kind == "c0":
            k, a, w = r.randrange(files), r.randrange(10), r.randrange(1, 51)
            return Query(kind, f"c0 >= {10 * k + a} AND c0 < {10 * (k + w)}", (10 * k + a, 10 * (k + w)))
        if kind == "str":
            k, w = r.randrange(1, files), r.randrange(0, 200)
            return Query(kind, f"c4 < 'a{k:08d}' AND c6 >= {k - w}", (k, k - w))
        if kind == "mix":
            d = r.randrange(self.m)
            lo, hi = d * self.e, min(files, (d + 2) * self.e)
            y, z = r.randrange(lo, hi), r.randrange(lo, hi)
            t0 = (FIRST_DAY + d) * DAY_MICROS
            days = f"ts >= '{_iso(t0)}' AND ts < '{_iso(t0 + 2 * DAY_MICROS)}'"
            text = f"{days} AND (c1 > {y} OR c2 < {z / 2 + 0.25})"
            return Query(kind, text, (t0, t0 + 2 * DAY_MICROS, y, z))
        if kind == "in":
            ks = sorted(r.sample(range(files), min(3, files)))
            return Query(kind, f"id IN ({', '.join(str(k * 1000) for k in ks)})", tuple(ks))
        raise ValueError(f"unknown query kind {kind!r}")

    def expected(self, q: Query) -> int:
        k, p = self.k, q.params
        if q.kind == "id":
            return 1
        if q.kind == "in":
            return len(p)
        if q.kind == "day":
            return int(np.count_nonzero((self.ts_hi >= p[0]) & (self.ts_lo < p[1])))
        if q.kind == "c0":
            return int(np.count_nonzero((10 * k + 9 >= p[0]) & (10 * k < p[1])))
        if q.kind == "str":
            return int(np.count_nonzero((k < p[0]) & (k + 100 >= p[1])))
        if q.kind == "mix":
            days = (self.ts_hi >= p[0]) & (self.ts_lo < p[1])
            return int(np.count_nonzero(days & ((k > p[2]) | (k / 2 < p[3] / 2 + 0.25))))
        raise ValueError(f"unknown query kind {q.kind!r}")


def _pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


def _check(gen: Queries, done: list[tuple[Query, int, float]]) -> list[str]:
    bad = []
    for q, n, _ in done:
        want = gen.expected(q)
        if n != want:
            bad.append(f"{q.text!r}: {n} tasks, expected {want}")
    return bad[:5]


# ---------------------------------------------------------------------------------------------
# Sequential: cold first query, new filters one after another, then warm all-manifest queries


def _sequence(args: argparse.Namespace, gen: Queries) -> list[Query]:
    """The first query (cold), ``--queries`` cycling kinds, ``--warm`` ``id =`` ones."""
    return (
        [gen.next("id")]
        + [gen.next(KINDS[n % len(KINDS)]) for n in range(args.queries)]
        + [gen.next("id") for _ in range(args.warm)]
    )


def _sequential_result(
    args: argparse.Namespace, gen: Queries, done: list[tuple[Query, int, float]]
) -> dict[str, Any]:
    seq = done[1 : 1 + args.queries]
    warm = done[1 + args.queries :]
    lat = [s for _, _, s in seq]
    return {
        "cold_s": done[0][2],
        "queries": len(seq),
        "p50_s": _pct(lat, 0.5),
        "p99_s": _pct(lat, 0.99),
        "kind_p50_s": {kd: _pct([s for q, _, s in seq if q.kind == kd], 0.5) for kd in KINDS},
        "warm_p50_s": _pct([s for _, _, s in warm], 0.5),
        "warm_max_s": max((s for _, _, s in warm), default=float("nan")),
        "tasks": sum(n for _, n, _ in done),
        "bad": _check(gen, done),
    }


def _timed_sync(plan: Callable[[str], int], queries: list[Query]) -> list[tuple[Query, int, float]]:
    done = []
    for q in queries:
        t0 = time.perf_counter()
        n = plan(q.text)
        done.append((q, n, time.perf_counter() - t0))
    return done


def _runtime(args: argparse.Namespace) -> Any:
    from aioiceberg.runtime import Runtime

    return Runtime(manifest_cache_bytes=args.cache_mb << 20) if args.cache_mb else Runtime()


async def _ours_table(args: argparse.Namespace, rt: Any) -> Callable[[str], Awaitable[int]]:
    import aioiceberg

    table = await aioiceberg.load_table(args.meta, json.loads(args.options), runtime=rt)

    async def plan(text: str) -> int:
        n = 0
        async for _ in table.scan(row_filter=text).plan_files():
            n += 1
        return n

    return plan


async def _seq_async(args: argparse.Namespace, gen: Queries) -> dict[str, Any]:
    async with _runtime(args) as rt:
        plan = await _ours_table(args, rt)
        done = []
        for q in _sequence(args, gen):
            t0 = time.perf_counter()
            n = await plan(q.text)
            done.append((q, n, time.perf_counter() - t0))
        out = _sequential_result(args, gen, done)
        out["children_rss_mb"] = children_hwm_mb()  # before the runtime stops them
        return out


def _seq_sync(args: argparse.Namespace, gen: Queries) -> dict[str, Any]:
    from aioiceberg import sync

    table = sync.load_table(args.meta, json.loads(args.options))

    def plan(text: str) -> int:
        return sum(1 for _ in table.scan(row_filter=text).plan_files())

    out = _sequential_result(args, gen, _timed_sync(plan, _sequence(args, gen)))
    out["children_rss_mb"] = children_hwm_mb()
    return out


def _pyiceberg_plan(args: argparse.Namespace) -> Callable[[str], int]:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(args.meta, properties=json.loads(args.options))

    def plan(text: str) -> int:
        return sum(1 for _ in table.scan(row_filter=text).plan_files())

    return plan


def _seq_pyiceberg(args: argparse.Namespace, gen: Queries) -> dict[str, Any]:
    plan = _pyiceberg_plan(args)
    return _sequential_result(args, gen, _timed_sync(plan, _sequence(args, gen)))


# ---------------------------------------------------------------------------------------------
# Throughput: N queries in flight for --seconds


class Load:
    """Finished queries before the deadline, and start times of those still running."""

    def __init__(self, seconds: float) -> None:
        self.lock = threading.Lock()
        self.done: list[tuple[Query, int, float]] = []
        self.running: dict[int, float] = {}
        self.errors: list[BaseException] = []
        self.seconds = seconds
        self.deadline = time.perf_counter() + seconds

    def finished(self, token: int, q: Query, n: int, start: float) -> bool:
        """Records a query; whether the client goes on."""
        end = time.perf_counter()
        with self.lock:
            self.running.pop(token, None)
            if end <= self.deadline:
                self.done.append((q, n, end - start))
        return end < self.deadline

    def summary(self, gen: Queries) -> dict[str, Any]:
        with self.lock:
            done = list(self.done)
            open_ = [self.deadline - s for s in self.running.values()]
        lat = sorted([(s, False) for _, _, s in done] + [(s, True) for s in open_])

        def pct(p: float) -> tuple[float, bool]:
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else (float("nan"), False)

        return {
            "queries": len(done),
            "qps": len(done) / self.seconds,
            "open": len(open_),
            "p50_s": pct(0.5)[0],
            "p50_open": pct(0.5)[1],  # the percentile is a running query's time so far
            "p99_s": pct(0.99)[0],
            "p99_open": pct(0.99)[1],
            "bad": _check(gen, done),
        }


async def _load_async(args: argparse.Namespace, gen: Queries) -> dict[str, Any]:
    async with _runtime(args) as rt:
        plan = await _ours_table(args, rt)
        await plan(gen.next("id").text)  # untimed: every manifest read once
        load = Load(args.seconds)
        tokens = iter(range(1 << 62))

        async def client(c: int) -> None:
            n = c
            while True:
                q = gen.next(KINDS[n % len(KINDS)])
                n += 1
                token = next(tokens)
                start = load.running[token] = time.perf_counter()
                count = await plan(q.text)
                if not load.finished(token, q, count, start):
                    return

        tasks = [asyncio.create_task(client(c)) for c in range(args.clients)]
        await asyncio.wait(tasks, timeout=max(0.0, load.deadline - time.perf_counter()))
        out = load.summary(gen)
        out["children_rss_mb"] = children_hwm_mb()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks:
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        return out


def _load_pyiceberg(args: argparse.Namespace, gen: Queries) -> dict[str, Any]:
    plan = _pyiceberg_plan(args)
    plan(gen.next("id").text)  # untimed, as ours
    pool = ThreadPoolExecutor(args.threads)
    load = Load(args.seconds)
    tokens = iter(range(1 << 62))

    def submit(n: int) -> None:
        with load.lock:
            q = gen.next(KINDS[n % len(KINDS)])
            token = next(tokens)
            start = load.running[token] = time.perf_counter()

        def done(f: Future[int]) -> None:
            exc = f.exception()
            if exc is not None:
                load.errors.append(exc)
                return
            if load.finished(token, q, f.result(), start):
                submit(n + 1)

        pool.submit(plan, q.text).add_done_callback(done)

    for c in range(args.clients):  # N queries in flight, each client's next one on its finish
        submit(c)
    time.sleep(max(0.0, load.deadline - time.perf_counter()))
    if load.errors:
        raise load.errors[0]
    return load.summary(gen)


# ---------------------------------------------------------------------------------------------
# Worker processes


def worker_main(args: argparse.Namespace) -> None:
    gen = Queries(args.manifests, args.entries, args.seed)
    load0 = os.getloadavg()[0]
    if args.worker in ("aioiceberg", "aioiceberg-sync"):
        import anyio._backends._asyncio  # noqa: F401  (anyio loads its backend on first use)
    if args.worker == "aioiceberg" and args.clients:
        out = asyncio.run(_load_async(args, gen))
    elif args.worker == "aioiceberg":
        out = asyncio.run(_seq_async(args, gen))
    elif args.worker == "aioiceberg-sync":
        out = _seq_sync(args, gen)
    elif args.clients:
        out = _load_pyiceberg(args, gen)
    else:
        out = _seq_pyiceberg(args, gen)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["peak_rss_mb"] = peak_rss_mb()
    out.setdefault("children_rss_mb", children_hwm_mb())
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    out["load"] = [load0, os.getloadavg()[0]]
    print(json.dumps(out), flush=True)
    os._exit(0)  # PyIceberg's threads may still be inside a query: do not wait for them


def measure(
    engine: str,
    meta: str,
    options: dict[str, str],
    args: argparse.Namespace,
    clients: int = 0,
    threads: int = 0,
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", engine, "--meta", meta, "--options", json.dumps(options)]
    cmd += ["--size", f"{args.manifests}x{args.entries}", "--seed", str(args.seed)]
    seconds = args.pyiceberg_seconds if engine == "pyiceberg" and args.pyiceberg_seconds else args.seconds
    cmd += ["--queries", str(args.queries), "--warm", str(args.warm), "--seconds", str(seconds)]
    cmd += ["--clients", str(clients), "--threads", str(threads), "--cache-mb", str(args.cache_mb)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600, cwd=ROOT)
    what = f"{engine} N={clients} threads={threads}" if clients else f"{engine} sequential"
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["bad"]:
        raise RuntimeError(f"{what} planned wrong task counts: {result['bad']}")
    return result


# ---------------------------------------------------------------------------------------------
# The table


def existing_table(disk_root: Path, location: str) -> str | None:
    """The metadata file of a table already built there (``--scratch`` reuse)."""
    from benchmarks.service import existing_table as found

    return found(str(disk_root), location)


def build(disk_root: Path, location: str, manifests: int, entries: int) -> str:
    """Write the synthetic table (manifests, list, metadata; no data files) under the nginx root
    with its final ``s3://`` paths, or at a local location."""
    from aioiceberg.io import FileIO
    from aioiceberg.testing.synthetic import build_table

    async def go() -> str:
        io: FileIO
        if location.startswith("s3://"):
            from benchmarks.s3_on_disk import S3OnDiskIO

            io = S3OnDiskIO(disk_root).bind_runtime(default_runtime())
        else:
            from aioiceberg.io import resolve_io

            io = resolve_io(location, {}, runtime=default_runtime())
        try:
            return await build_table(io, location, manifests, entries)
        finally:
            await io.aclose()

    return asyncio.run(go())


# ---------------------------------------------------------------------------------------------
# Report


def _s(x: float) -> str:
    return f"{x:.3f}" if x == x else "-"


def _lat(r: dict[str, Any], p: str) -> str:
    return f"{'>=' if r[p + '_open'] else ''}{r[p + '_s']:.3f}"


def _x(theirs: float, ours: float) -> str:
    return f"{theirs / ours:.1f}x" if ours > 0 and theirs == theirs and ours == ours else "-"


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report_sequential(seq: dict[str, dict[str, Any]]) -> None:
    print("\nSequential new-filter queries (one table load, one runtime):\n")
    print(
        "| engine | cold first s | queries | p50 s | p99 s | "
        + " | ".join(f"p50 {k} s" for k in KINDS)
        + " | warm id= p50 s | warm id= max s | peak RSS MB | decoder procs RSS MB | CPU s | load |"
    )
    print("|" + "---|" * (11 + len(KINDS)))
    for engine, r in seq.items():
        kinds = " | ".join(_s(r["kind_p50_s"][k]) for k in KINDS)
        print(
            f"| {engine} | {r['cold_s']:.3f} | {r['queries']} | {r['p50_s']:.3f} | {r['p99_s']:.3f} | "
            f"{kinds} | "
            f"{_s(r['warm_p50_s'])} | {_s(r['warm_max_s'])} | {r['peak_rss_mb']:.0f} | "
            f"{r['children_rss_mb']:.0f} | {r['cpu_s']:.1f} | {r['load'][0]:.1f} / {r['load'][1]:.1f} |",
            flush=True,
        )


def report_load(load: dict[tuple[str, int, int], dict[str, Any]]) -> None:
    print("\nThroughput, N queries in flight (after one untimed query; open: running at the deadline):\n")
    print(
        "| engine | N | threads | queries | QPS | p50 s | p99 s | open | peak RSS MB | "
        "decoder procs RSS MB | CPU s | load |"
    )
    print("|" + "---|" * 12)
    for (engine, n, t), r in load.items():
        print(
            f"| {engine} | {n} | {t or '-'} | {r['queries']} | {r['qps']:.2f} | {_lat(r, 'p50')} | "
            f"{_lat(r, 'p99')} | {r['open']} | {r['peak_rss_mb']:.0f} | {r['children_rss_mb']:.0f} | "
            f"{r['cpu_s']:.1f} | {r['load'][0]:.1f} / {r['load'][1]:.1f} |",
            flush=True,
        )


def report_targets(
    seq: dict[str, dict[str, Any]], load: dict[tuple[str, int, int], dict[str, Any]], clients: list[int]
) -> None:
    print("\nAgainst issue 33's targets:\n")
    print("| measure | aioiceberg | PyIceberg | ratio | target | |")
    print("|---|---|---|---|---|---|")
    py = seq.get("pyiceberg")
    for engine in ("aioiceberg", "aioiceberg-sync"):
        ours = seq.get(engine)
        if ours is None:
            continue
        api = "async for" if engine == "aioiceberg" else "blocking"
        if py is not None:
            for p in ("p50", "p99"):
                ratio = py[p + "_s"] / ours[p + "_s"]
                target = f">= {TARGET_RATIO:g}x" if p == "p50" else "(printed)"
                mark = _met(ratio >= TARGET_RATIO) if p == "p50" else ""
                print(
                    f"| sequential {p} s ({api}) | {ours[p + '_s']:.3f} | {py[p + '_s']:.3f} | "
                    f"{ratio:.1f}x | {target} | {mark} |"
                )
        warm = ours["warm_p50_s"]
        print(
            f"| warm id= query on cached manifests s ({api}) | {_s(warm)} | "
            f"{_s(py['warm_p50_s']) if py else '-'} | {_x(py['warm_p50_s'], warm) if py else '-'} | "
            f"< {TARGET_WARM_S:g} s | {_met(warm < TARGET_WARM_S)} |"
        )
        rss = ours["peak_rss_mb"] + ours["children_rss_mb"]
        if py is not None:
            print(
                f"| peak RSS MB, sequential ({api}) | {rss:.0f} | {py['peak_rss_mb']:.0f} | "
                f"{rss / py['peak_rss_mb']:.2f}x ours/theirs | - | |"
            )
    for n in clients:
        ours = load.get(("aioiceberg", n, 0))
        theirs = [(r["qps"], t, r) for (e, nn, t), r in load.items() if e == "pyiceberg" and nn == n]
        if ours is None or not theirs:
            continue
        qps, t, best = max(theirs, key=lambda p: (p[0], -p[1]))
        ratio = ours["qps"] / qps if qps else float("inf")
        print(
            f"| QPS at N = {n} (PyIceberg's best: {t} threads) | {ours['qps']:.2f} | {qps:.2f} | "
            f"{ratio:.1f}x | >= {TARGET_RATIO:g}x | {_met(ratio >= TARGET_RATIO)} |"
        )
        print(
            f"| p99 s at N = {n} | {_lat(ours, 'p99')} | {_lat(best, 'p99')} | "
            f"{_x(best['p99_s'], ours['p99_s'])} | (printed) | |"
        )
        rss = ours["peak_rss_mb"] + ours["children_rss_mb"]
        print(
            f"| peak RSS MB at N = {n} | {rss:.0f} | {best['peak_rss_mb']:.0f} | "
            f"{rss / best['peak_rss_mb']:.2f}x ours/theirs | - | |"
        )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="seconds: a 4x20 table, N = 2, threads 1, 2")
    p.add_argument("--size", default="400x250", help="manifests x entries per manifest")
    p.add_argument("--queries", type=int, default=24, help="sequential new-filter queries per engine")
    p.add_argument("--warm", type=int, default=5, help="id = queries after them, on cached manifests")
    p.add_argument("--clients", default="16,64", help="N: queries in flight")
    p.add_argument("--threads", default="1,4,16,64", help="PyIceberg's pool sizes (those above N skipped)")
    p.add_argument("--seconds", type=float, default=30.0, help="each throughput run")
    p.add_argument(
        "--pyiceberg-seconds",
        type=float,
        default=0.0,
        help="PyIceberg's throughput runs (0: --seconds); its queries take seconds each",
    )
    p.add_argument("--store", choices=["nginx", "local"], default=None, help="default nginx")
    p.add_argument("--delay-ms", type=float, default=None, help="nginx, per request (default 20; tiny 0)")
    p.add_argument("--engines", default="aioiceberg,aioiceberg-sync,pyiceberg")
    p.add_argument("--phases", default="sequential,load")
    p.add_argument("--cache-mb", type=int, default=0, help="our runtime's manifest cache (0: the default)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scratch", help="the table is kept here and reused (default: a temporary folder)")
    p.add_argument("--worker", choices=["aioiceberg", "aioiceberg-sync", "pyiceberg"], help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiny:
        args.size, args.queries, args.warm, args.seconds = "4x20", 6, 2, 1.0
        if not args.worker:
            args.clients, args.threads = "2", "1,2"
        args.delay_ms = 0.0 if args.delay_ms is None else args.delay_ms
    args.manifests, args.entries = (int(v) for v in args.size.split("x"))
    if args.worker:
        args.clients, args.threads = int(args.clients), int(args.threads)
        worker_main(args)
        return
    delay = 20.0 if args.delay_ms is None else args.delay_ms
    engines = args.engines.split(",")
    clients = [int(v) for v in args.clients.split(",") if v]
    with ExitStack() as stack:
        scratch = (
            Path(args.scratch) if args.scratch else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        )
        disk = scratch / "nginx-root"
        from benchmarks.nginx_store import open_bench_store

        opened = open_bench_store(stack, disk, args.store or "nginx", delay, args.tiny)
        if opened is None:
            return
        store, options, name = opened.kind, opened.options, opened.name
        tag = f"plan{args.manifests}x{args.entries}"
        location = f"s3://bench/tables/{tag}" if store == "nginx" else f"file://{scratch}/tables/{tag}"
        meta = existing_table(disk, location)
        if meta is None:
            t0 = time.perf_counter()
            meta = build(disk, location, args.manifests, args.entries)
            print(f"built {location} in {time.perf_counter() - t0:.1f} s", flush=True)
        print(
            f"store {name}, table {args.manifests}x{args.entries} ({args.manifests * args.entries} files, "
            f"plans only), {args.queries} sequential + {args.warm} warm queries, {args.seconds:g} s per "
            f"throughput run (PyIceberg's {args.pyiceberg_seconds or args.seconds:g} s), "
            f"loadavg at start {os.getloadavg()}",
            flush=True,
        )
        seq: dict[str, dict[str, Any]] = {}
        load: dict[tuple[str, int, int], dict[str, Any]] = {}
        if "sequential" in args.phases:
            for engine in engines:
                seq[engine] = measure(engine, meta, options, args)
            report_sequential(seq)
        if "load" in args.phases:
            for n in clients:
                if "aioiceberg" in engines:
                    load[("aioiceberg", n, 0)] = measure("aioiceberg", meta, options, args, n)
                if "pyiceberg" in engines:
                    for t in (int(v) for v in args.threads.split(",")):
                        if t <= n:
                            load[("pyiceberg", n, t)] = measure("pyiceberg", meta, options, args, n, t)
            report_load(load)
        report_targets(seq, load, clients)
        print(
            f"\nfloor: with the manifest list cached, a query whose manifests are not in memory "
            f"needs one round trip for them ({delay:g} ms); one whose manifests are cached needs none"
        )


if __name__ == "__main__":
    main()
