"""A service: N concurrent clients in one process querying one open table, vs PyIceberg 0.12.

The table is plan.py's shape (M manifests x E data files, ``day(ts)`` + ``bucket(16, id)``,
manifest m holds day m, the same stats per entry), but every data file is real: a small
Parquet file of ``--rows`` rows whose values lie inside the entry's bounds and partition
(every id of a file falls in the file's bucket), and the manifests carry the real sizes and
counts. Each client loops over queries, alternately a random day (one manifest, E files)
and ``id = x`` for the lowest id of a random file (every manifest read, one row back), each
a plan plus a read to Arrow. Row counts are checked against what the table holds.

aioiceberg: one ``Runtime()``, the table loaded once by ``aioiceberg.load_table(meta,
options, runtime=rt)``, N asyncio tasks looping ``table.scan(row_filter=f).to_arrow()``.
PyIceberg: ``StaticTable.from_metadata`` once, a thread pool of N threads looping
``table.scan(row_filter=f).to_arrow()`` on the shared table. Each (engine, N) runs in a
fresh process: one untimed random-day query, then ``--seconds`` of load. Queries still
running at the deadline are not counted as done; their time so far enters the latency
percentiles as a lower bound (the "open" column counts them).

    .venv/bin/python benchmarks/service.py --scratch DIR        # 500x1000, nginx + 20 ms
    .venv/bin/python benchmarks/service.py --tiny               # seconds; nginx if installed
    .venv/bin/python benchmarks/service.py --plan-only ...      # benchmarks/service_plan.py

``--plan-only`` runs ``service_plan.py`` with the other arguments: issue 33's service case
(a 100k-file table, plans only, sequential and concurrent new-filter queries, warm queries).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aioiceberg.testing.synthetic import (  # noqa: E402
    BUCKETS,
    DAY_MICROS,
    FIRST_DAY,
    SNAPSHOT_ID,
    data_file,
    day_range,
    empty_metadata,
    manifest_list_path,
    snapshot_metadata,
)

# ---------------------------------------------------------------------------------------------
# The table: plan.py's entries, each backed by a real Parquet file


def _disk_path(disk_root: str, location: str) -> Path:
    """Where ``location`` lives on disk: ``s3://bucket/key`` under the nginx root, or a file URI."""
    if location.startswith("s3://"):
        return Path(disk_root, location.removeprefix("s3://"))
    return Path(location.removeprefix("file://"))


def _write(disk_root: str, location: str, data: bytes) -> None:
    path = _disk_path(disk_root, location)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _file_rows(k: int, i: int, day: int, ids: list[int], rows: int) -> dict[str, list[Any]]:
    """Values inside the bounds `synthetic.data_file` gives file k (entry i of its day)."""
    n = len(ids)
    ts0 = day * DAY_MICROS + i * 1_000_000
    step = max(1, n - 1)
    return {
        "id": ids,
        "ts": [ts0 + j * (999_999 // step) for j in range(n)],
        "c0": [k * 10 + j % 10 for j in range(n)],
        "c1": [(j % (2 * k + 1)) - k for j in range(n)],
        "c2": [0.5 * k + j / step for j in range(n)],
        "c3": [-1.0 + 2.0 * j / step for j in range(n)],
        "c4": [f"{chr(97 + j % 26)}{k:08d}" for j in range(n)],
        "c5": [chr(97 + j % 26) * 2 for j in range(n)],
        "c6": [k + j % 101 for j in range(n)],
        "c7": [j % 6 for j in range(n)],
    }


def _build_manifest(disk_root: str, location: str, m: int, entries: int, rows: int) -> tuple[int, Any]:
    """Write manifest m's data files and the manifest; returns (m, its ManifestFile)."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aioiceberg.spec.arrow import schema_to_arrow
    from aioiceberg.spec.manifest import ManifestEntry, ManifestEntryStatus, write_manifest
    from aioiceberg.spec.transforms import parse_transform
    from aioiceberg.spec.types import LongType

    md = empty_metadata(location)
    schema = md.schema()
    arrow_schema = schema_to_arrow(schema)
    first = m * entries * 1000
    all_ids = np.arange(first, first + entries * 1000, dtype=np.int64)
    buckets = parse_transform(f"bucket[{BUCKETS}]").apply_arrow(pa.array(all_ids), LongType())
    buckets_np = buckets.to_numpy(zero_copy_only=False)
    day = FIRST_DAY + m
    out = []
    for i in range(entries):
        k = m * entries + i
        block = slice(i * 1000, i * 1000 + 1000)
        same = all_ids[block][buckets_np[block] == buckets_np[block][0]]  # the file's bucket only
        picks = same[np.linspace(0, len(same) - 1, min(rows, len(same))).astype(int)]
        values = _file_rows(k, i, day, sorted({int(v) for v in picks}), rows)
        if len(values["id"]) != rows:
            raise ValueError(f"file {k} holds {len(values['id'])} ids of its bucket, not {rows}")
        table = pa.Table.from_pydict(values, schema=arrow_schema)
        sink = io.BytesIO()
        pq.write_table(table, sink)
        data = sink.getvalue()
        meta = pq.read_metadata(io.BytesIO(data))
        entry = data_file(schema, location, m, i, entries)
        n = table.num_rows
        entry = dataclasses.replace(
            entry,
            record_count=n,
            file_size_in_bytes=len(data),
            column_sizes={
                c + 1: meta.row_group(0).column(c).total_compressed_size for c in range(meta.num_columns)
            },
            value_counts={c: n for c in range(1, 11)},
            split_offsets=(4,),
        )
        _write(disk_root, entry.file_path, data)
        out.append(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, entry))
    path = f"{location}/metadata/m{m:05d}-{uuid.uuid4().hex[:8]}.avro"
    manifest, mf = write_manifest(out, md.spec(), schema, 2, SNAPSHOT_ID, manifest_path=path)
    _write(disk_root, path, manifest)
    return m, mf


def build_service_table(
    disk_root: str, location: str, manifests: int, entries: int, rows: int, workers: int = 2
) -> str:
    """Build the table (data files, manifests, list, metadata); returns the metadata location."""
    from aioiceberg.spec.manifest import write_manifest_list

    with ProcessPoolExecutor(workers) as pool:
        jobs = [pool.submit(_build_manifest, disk_root, location, m, entries, rows) for m in range(manifests)]
        done = sorted((j.result() for j in jobs), key=lambda p: p[0])
    list_path = manifest_list_path(location)
    _write(disk_root, list_path, write_manifest_list([mf for _, mf in done], 2, SNAPSHOT_ID, None, 1))
    meta_path, meta = snapshot_metadata(location, list_path)
    _write(disk_root, meta_path, meta)
    return meta_path


def existing_table(disk_root: str, location: str) -> str | None:
    """The metadata file of a table already built there (``--scratch`` reuse), if complete."""
    found = sorted(_disk_path(disk_root, f"{location}/metadata").glob("*.metadata.json"))
    return f"{location}/metadata/{found[-1].name}" if found else None


# ---------------------------------------------------------------------------------------------
# Queries: the same sequence for both engines


def query(rng: random.Random, n: int, manifests: int, entries: int) -> tuple[str, str]:
    """Query n of a client: (kind, filter); even ones a random day, odd ones ``id =``."""
    if n % 2 == 0:
        return "day", day_range(rng.randrange(manifests), 1)
    k = rng.randrange(manifests * entries)
    return "id", f"id = {k * 1000}"  # the lowest id of file k, always present


class Recorder:
    """Latencies of finished queries and start times of running ones (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[tuple[str, float]] = []
        self.running: dict[int, float] = {}
        self.bad: list[str] = []
        self.deadline = float("inf")
        self.result: dict[str, Any] = {}

    def finished(self, token: int, kind: str, start: float, rows: int, expected: int) -> None:
        end = time.perf_counter()
        with self.lock:
            self.running.pop(token, None)
            if end <= self.deadline:
                self.done.append((kind, end - start))
            if rows != expected and len(self.bad) < 5:
                self.bad.append(f"{kind}: {rows} rows, expected {expected}")

    def summary(self, seconds: float) -> dict[str, Any]:
        with self.lock:
            done = list(self.done)
            open_ = [self.deadline - s for s in self.running.values()]
        lat = sorted([(d, False) for _, d in done] + [(d, True) for d in open_])

        def pct(p: float) -> tuple[float, bool]:
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else (float("nan"), False)

        def kind_p50(kind: str) -> float:
            xs = sorted(d for k, d in done if k == kind)
            return xs[len(xs) // 2] if xs else float("nan")

        return {
            "queries": len(done),
            "qps": len(done) / seconds,
            "open": len(open_),
            "p50_s": pct(0.50)[0],
            "p99_s": pct(0.99)[0],
            "p50_open": pct(0.50)[1],  # the percentile is a running query's time so far
            "p99_open": pct(0.99)[1],
            "max_s": lat[-1][0] if lat else float("nan"),
            "p50_day_s": kind_p50("day"),
            "p50_id_s": kind_p50("id"),
            "bad": self.bad,
        }


# ---------------------------------------------------------------------------------------------
# Workers (fresh process per engine and N)


async def _ours(args: argparse.Namespace, rec: Recorder) -> None:
    import aioiceberg
    from aioiceberg.runtime import Runtime

    options = json.loads(args.options)
    scan_options: dict[str, Any] = {}
    if args.files_in_flight:
        scan_options["files_in_flight"] = args.files_in_flight
    runtime = Runtime(manifest_cache_bytes=args.cache_mb << 20) if args.cache_mb else Runtime()
    async with runtime as rt:
        table = await aioiceberg.load_table(args.meta, options, runtime=rt)
        warm = await table.scan(row_filter=day_range(0, 1), **scan_options).to_arrow()
        assert warm.num_rows == args.entries * args.rows_per_day_file
        counter = iter(range(1 << 62))

        async def client(c: int) -> None:
            rng = random.Random(args.seed * 1000 + c)
            n = c  # clients start on different kinds
            while time.perf_counter() < rec.deadline:
                kind, text = query(rng, n, args.manifests, args.entries)
                n += 1
                token = next(counter)
                start = time.perf_counter()
                rec.running[token] = start
                result = await table.scan(row_filter=text, **scan_options).to_arrow()
                expected = args.entries * args.rows_per_day_file if kind == "day" else 1
                rec.finished(token, kind, start, result.num_rows, expected)

        rec.deadline = time.perf_counter() + args.seconds
        tasks = [asyncio.create_task(client(c)) for c in range(args.clients)]
        await asyncio.wait(tasks, timeout=max(0.0, rec.deadline - time.perf_counter()))
        rec.result = rec.summary(args.seconds)
        rec.result["children_rss_mb"] = children_hwm_mb()  # before the runtime stops them
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _pyiceberg(args: argparse.Namespace, rec: Recorder) -> None:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(args.meta, properties=json.loads(args.options))
    warm = table.scan(row_filter=day_range(0, 1)).to_arrow()
    assert warm.num_rows == args.entries * args.rows_per_day_file
    counter = iter(range(1 << 62))
    errors: list[BaseException] = []

    def client(c: int) -> None:
        rng = random.Random(args.seed * 1000 + c)
        n = c
        try:
            while time.perf_counter() < rec.deadline:
                kind, text = query(rng, n, args.manifests, args.entries)
                n += 1
                with rec.lock:
                    token = next(counter)
                    start = time.perf_counter()
                    rec.running[token] = start
                result = table.scan(row_filter=text).to_arrow()
                expected = args.entries * args.rows_per_day_file if kind == "day" else 1
                rec.finished(token, kind, start, result.num_rows, expected)
        except BaseException as exc:  # reported, not swallowed
            errors.append(exc)

    rec.deadline = time.perf_counter() + args.seconds
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(args.clients)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, rec.deadline - time.perf_counter()))
    rec.result = rec.summary(args.seconds)
    if errors:
        raise errors[0]


def peak_rss_mb() -> float:
    """This process's peak RSS since its exec (``VmHWM``). ``ru_maxrss`` is not that: Linux
    carries the parent's peak across fork and exec, so every worker of a parent that built a
    big table would report at least the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_hwm_mb() -> float:
    """Peak RSS of this process's live children (our manifest decoder processes), summed."""
    total = 0.0
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[1] != me:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


def worker_main(args: argparse.Namespace) -> None:
    rec = Recorder()
    load0 = os.getloadavg()[0]
    if args.worker == "aioiceberg":
        import anyio._backends._asyncio  # noqa: F401

        asyncio.run(_ours(args, rec))
    else:
        _pyiceberg(args, rec)
    out = rec.result
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["peak_rss_mb"] = peak_rss_mb()
    out.setdefault("children_rss_mb", children_hwm_mb())
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    out["load"] = [load0, os.getloadavg()[0]]
    print(json.dumps(out), flush=True)
    os._exit(0)  # PyIceberg's threads may still be inside a query: do not wait for them


def measure(
    engine: str, meta: str, options: dict[str, str], clients: int, args: argparse.Namespace
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", engine, "--meta", meta, "--options", json.dumps(options)]
    cmd += ["--clients", str(clients), "--seconds", str(args.seconds), "--seed", str(args.seed)]
    cmd += ["--size", f"{args.manifests}x{args.entries}", "--rows", str(args.rows)]
    if args.files_in_flight:
        cmd += ["--files-in-flight", str(args.files_in_flight)]
    if args.cache_mb:
        cmd += ["--cache-mb", str(args.cache_mb)]
    done = subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=args.seconds + 900, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(f"{engine} N={clients} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["bad"]:
        raise RuntimeError(f"{engine} N={clients} returned wrong row counts: {result['bad']}")
    return result


# ---------------------------------------------------------------------------------------------


def _lat(r: dict[str, Any], p: str) -> str:
    """A percentile; ">=" when it is the time so far of a query still running at the deadline."""
    return f"{'>=' if r[p + '_open'] else ''}{r[p + '_s']:.3f}"


def main(argv: list[str] | None = None) -> None:
    rest = sys.argv[1:] if argv is None else argv
    if "--plan-only" in rest:
        from benchmarks.service_plan import main as plan_only

        plan_only([a for a in rest if a != "--plan-only"])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="seconds: a 4x20 table, N = 1, 2, 2 s each")
    p.add_argument("--size", default="500x1000", help="manifests x data files per manifest")
    p.add_argument("--rows", type=int, default=20, help="rows per data file (at most ~60: one bucket)")
    p.add_argument("--clients", default="1,16,64")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--store", choices=["nginx", "local"], default=None, help="default nginx")
    p.add_argument("--delay-ms", type=float, default=None, help="nginx, per request (default 20; tiny 0)")
    p.add_argument("--engines", default="aioiceberg,pyiceberg")
    p.add_argument("--files-in-flight", type=int, default=0, help="our read option (0: the default)")
    p.add_argument(
        "--cache-mb", type=int, default=0, help="our runtime's manifest cache (0: the default, 256 MB)"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scratch", help="tables are kept here and reused (default: a temporary folder)")
    p.add_argument("--build-workers", type=int, default=2)
    p.add_argument("--worker", choices=["aioiceberg", "pyiceberg"], help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiny:
        args.size, args.clients, args.seconds = "4x20", "1,2", 2.0
        args.delay_ms = 0.0 if args.delay_ms is None else args.delay_ms
    args.manifests, args.entries = (int(v) for v in args.size.split("x"))
    if args.worker:
        args.clients = int(args.clients)
        args.rows_per_day_file = args.rows  # the builder checks every file holds exactly that
        worker_main(args)
        return
    delay = 20.0 if args.delay_ms is None else args.delay_ms
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
        tag = f"svc{args.manifests}x{args.entries}r{args.rows}"
        location = f"s3://bench/tables/{tag}" if store == "nginx" else f"file://{scratch}/tables/{tag}"
        meta = existing_table(str(disk), location)
        if meta is None:
            t0 = time.perf_counter()
            meta = build_service_table(
                str(disk), location, args.manifests, args.entries, args.rows, args.build_workers
            )
            print(f"built {location} in {time.perf_counter() - t0:.1f} s", flush=True)
        print(
            f"store {name}, table {args.manifests}x{args.entries} ({args.rows} rows per file), "
            f"{args.seconds:g} s per run, loadavg at start {os.getloadavg()}",
            flush=True,
        )
        print(
            "| engine | N | queries | QPS | p50 s | p99 s | max s | open | p50 day s | p50 id s | "
            "peak RSS MB | decoder procs RSS MB | CPU s | load (start / end) |"
        )
        print("|" + "---|" * 14, flush=True)
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for n in (int(v) for v in args.clients.split(",")):
            for engine in args.engines.split(","):
                r = results[(engine, n)] = measure(engine, meta, options, n, args)
                print(
                    f"| {engine} | {n} | {r['queries']} | {r['qps']:.2f} | {_lat(r, 'p50')} | "
                    f"{_lat(r, 'p99')} | {r['max_s']:.3f} | {r['open']} | {r['p50_day_s']:.3f} | "
                    f"{r['p50_id_s']:.3f} | {r['peak_rss_mb']:.0f} | {r['children_rss_mb']:.0f} | "
                    f"{r['cpu_s']:.1f} | {r['load'][0]:.1f} / {r['load'][1]:.1f} |",
                    flush=True,
                )
        print()
        print("| N | QPS ours / PyIceberg | p99 PyIceberg / ours |")
        print("|---|---|---|")
        for n in (int(v) for v in args.clients.split(",")):
            ours, theirs = results.get(("aioiceberg", n)), results.get(("pyiceberg", n))
            if ours and theirs:
                qps = f"{ours['qps'] / theirs['qps']:.1f}x" if theirs["qps"] else "-"
                p99 = theirs["p99_s"] / ours["p99_s"]
                censored = " (a running query's time so far: a lower bound)" if theirs["p99_open"] else ""
                print(f"| {n} | {qps} | {p99:.1f}x{censored} |")
        print(
            f"\nfloor: with the manifest list cached (both engines keep it), a query needs 2 "
            f"sequential round trips (its manifests, then its data files) = {2 * delay:g} ms at "
            "unbounded concurrency, plus CPU"
        )


if __name__ == "__main__":
    main()
