"""Scan throughput (rows/s, MB/s) of aioiceberg's read path vs PyIceberg and DuckDB, same table, same run.

    python benchmarks/read.py            # 1M rows: local FS, moto, moto + 20 ms, nginx + 20 ms
    python benchmarks/read.py --tiny     # seconds-long smoke run (used by the tests)
    python benchmarks/read.py --stores nginx --latency-ms 20

The nginx store (nginx_store.py) serves a copy of the moto bucket as static files, plus
``--latency-ms`` per request: unlike moto it costs next to no CPU per GET and keeps
connections open. Without nginx it is skipped with one line saying what to install.

Each cell is the best of ``--rounds`` runs. DuckDB and we run twice: as shipped (DuckDB's
external file cache and our runtime's data file cache serve repeated rounds from memory)
and with those caches off. MB/s counts the Arrow bytes produced. Each side opens its store
client once per store and reuses it in every round (ours: the blocking API, whose background
loop and runtime keep theirs, as a script calls it; PyIceberg: one FileIO; DuckDB: one
connection); every round still reads the metadata JSON, plans (both planners keep a
process-wide manifest cache) and reads. The peak-RSS line runs a batch-by-batch scan in a
fresh process and compares its peak memory with the size of the table it streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from servers.moto import FAKE_CREDENTIALS, MotoServer  # noqa: E402
from servers.plugin import s3_storage_options  # noqa: E402
from servers.proxy import FaultConfig, FaultProxy  # noqa: E402

for _k, _v in FAKE_CREDENTIALS.items():
    os.environ.setdefault(_k, _v)


def make_data(n: int) -> pa.Table:
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "region": pa.array([["eu", "us", "ap", "sa"][i % 4] for i in range(n)]),
            "ts": pa.array([base + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
            "v": pa.array([i * 0.25 for i in range(n)], pa.float64()),
            "name": pa.array([f"name-{i % 1000}" for i in range(n)]),
            "qty": pa.array([i % 97 for i in range(n)], pa.int32()),
        }
    )


def write_table(warehouse: str, tmp: Path, rows: int, options: dict[str, str]) -> str:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{tmp}/{abs(hash(warehouse))}.db", warehouse=warehouse, **options
    )
    catalog.create_namespace("db")
    data = make_data(rows)
    table = catalog.create_table(
        "db.events", data.schema, properties={"write.parquet.row-group-limit": str(max(rows // 8, 1000))}
    )
    files = 4
    step = rows // files
    for i in range(files):
        table.append(data.slice(i * step, step if i < files - 1 else rows - i * step))
    return str(table.metadata_location)


class Ours:
    """aioiceberg's blocking API, as a script calls it: every round loads the table by its
    metadata file, plans and reads. Its background loop and the runtime's clients serve
    every round, as they serve a process."""

    def __init__(self, location: str, options: dict[str, str], data_cache: bool = True) -> None:
        from aioiceberg.runtime import Runtime

        self.location, self.options = location, options
        # ``data_cache=False``: a runtime that keeps no data file bytes between reads (the
        # default one keeps small remote files, as DuckDB's external file cache does)
        self.runtime = None if data_cache else Runtime(data_cache_bytes=0)

    def scan(self, row_filter: str) -> pa.Table:
        from aioiceberg import sync

        table = sync.load_table(self.location, self.options, runtime=self.runtime)
        result: pa.Table = table.scan(row_filter=row_filter or None, decode_workers=0).to_arrow()
        return result

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close_sync()


class PyIceberg:
    """One PyIceberg FileIO per store, reused by every round (each round reloads the metadata)."""

    def __init__(self, location: str, options: dict[str, str]) -> None:
        from pyiceberg.io import load_file_io

        self.location = location
        self.io = load_file_io(properties=options, location=location)

    def scan(self, row_filter: str) -> pa.Table:
        from pyiceberg.catalog.noop import NoopCatalog
        from pyiceberg.serializers import FromInputFile
        from pyiceberg.table import StaticTable

        metadata = FromInputFile.table_metadata(self.io.new_input(self.location))
        table = StaticTable(
            identifier=("static-table", self.location),
            metadata_location=self.location,
            metadata=metadata,
            io=self.io,
            catalog=NoopCatalog("static-table"),
        )
        return table.scan(row_filter=row_filter or "True").to_arrow()


STORES = ("local", "moto", "moto20ms", "nginx")


def duckdb_scan(con: Any, location: str, row_filter: str) -> pa.Table:
    where = f" WHERE {row_filter}" if row_filter else ""
    return con.execute(
        f"SELECT * FROM iceberg_scan('{location.removeprefix('file://')}'){where}"
    ).to_arrow_table()


def best(fn: Callable[[], pa.Table], rounds: int) -> tuple[float, pa.Table]:
    times, result = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    assert result is not None
    return min(times), result


def _peak_rss_kb() -> float:
    """VmHWM: unlike ru_maxrss it starts afresh at exec, so it is this process's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1])
    import resource

    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def rss_child(location: str, options_json: str) -> None:
    """Stream the table batch by batch, keep nothing; print peak RSS and bytes streamed."""
    from aioiceberg.io import resolve_io
    from aioiceberg.read import read_tasks
    from aioiceberg.runtime import default_runtime
    from aioiceberg.spec.metadata_json import parse_table_metadata
    from aioiceberg.table_scan import TableScan

    async def run() -> int:
        options = json.loads(options_json)
        io = resolve_io(location, options, runtime=default_runtime())
        md = parse_table_metadata(await io.read(location), location)
        tasks = [t async for t in TableScan(io, md, decode_workers=0).plan_files()]
        total = 0
        async for batch in read_tasks(io, tasks, md.schema(), files_in_flight=2):
            total += batch.nbytes
        await io.aclose()
        return total

    before = _peak_rss_kb()
    total = asyncio.run(run())
    peak = _peak_rss_kb()
    print(
        json.dumps(
            {"peak_rss_mb": peak / 1024, "baseline_rss_mb": before / 1024, "streamed_mb": total / 2**20}
        )
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--latency-ms", type=float, default=20.0, help="per request, for moto20ms and nginx (0: none)"
    )
    parser.add_argument(
        "--stores",
        default=None,
        help=f"comma-separated, of {','.join(STORES)} (default: all; --tiny: local,moto,moto20ms)",
    )
    parser.add_argument("--rss-child", nargs=2, metavar=("LOCATION", "OPTIONS_JSON"))
    parser.add_argument(
        "--per-row-group-requests",
        action="store_true",
        help="the earlier request layout, for comparison: a 64 KiB footer read, then one "
        "request (set) per row group; no whole-file GETs, no larger tail, no multi-row-group runs",
    )
    args = parser.parse_args(argv)
    if args.per_row_group_requests:
        from aioiceberg.read import parquet_ranges as parquet

        parquet.WHOLE_FILE_MAX = 0
        parquet.TAIL_READ = parquet.FOOTER_READ
        parquet.READ_BUDGET = 0
    if args.rss_child:
        rss_child(*args.rss_child)
        # Skip interpreter teardown: it occasionally aborts in native code ("terminate
        # called without an active exception") after the measurement is printed.
        sys.stdout.flush()
        os._exit(0)
    rows = 20_000 if args.tiny else args.rows
    rounds = 1 if args.tiny else args.rounds
    wanted = (args.stores or ("local,moto,moto20ms" if args.tiny else ",".join(STORES))).split(",")
    if set(wanted) - set(STORES):
        parser.error(f"unknown stores {sorted(set(wanted) - set(STORES))}; known: {','.join(STORES)}")
    from read_helpers import duckdb_connection

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        moto = stack.enter_context(MotoServer())
        import boto3

        boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1").create_bucket(Bucket="bench")
        local = write_table((tmp / "wh").as_uri(), tmp, rows, {})
        # the peak-RSS line streams the local table, so it is always written; S3 ones on demand
        remote = (
            write_table("s3://bench/wh", tmp, rows, s3_storage_options(moto.url))
            if wanted != ["local"]
            else ""
        )
        stores: dict[str, tuple[str, dict[str, str], str | None]] = {}
        if "local" in wanted:
            stores["local"] = (local, {}, None)
        if "moto" in wanted:
            stores["moto"] = (remote, s3_storage_options(moto.url), moto.url)
        if "moto20ms" in wanted:
            proxy = stack.enter_context(FaultProxy(moto.url, FaultConfig(delay_ms=args.latency_ms)))
            stores[f"moto+{args.latency_ms:g}ms"] = (remote, s3_storage_options(proxy.url), proxy.url)
        if "nginx" in wanted:
            from benchmarks.nginx_store import start_or_skip
            from benchmarks.s3_on_disk import mirror_bucket

            disk = tmp / "nginx-root"
            nginx = start_or_skip(disk, args.latency_ms)  # None (one line saying why) without nginx
            if nginx is not None:
                stack.callback(nginx.stop)
                mirror_bucket(moto.url, "bench", disk)  # same keys, so the same s3:// paths
                name = f"nginx+{args.latency_ms:g}ms" if args.latency_ms > 0 else "nginx"
                stores[name] = (remote, nginx.options(), nginx.url)
        selective = f"id < {rows // 100}"
        lines = [
            f"read benchmark: {rows} rows, 6 columns, 4 files; best of {rounds}"
            + ("; per-row-group requests" if args.per_row_group_requests else ""),
            "| store | scan | ours rows/s | ours MB/s | PyIceberg rows/s | DuckDB rows/s "
            "| ours, no data cache, rows/s | DuckDB, no file cache, rows/s | ours/PyIceberg "
            "| ours/DuckDB | both without their caches: ours/DuckDB |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for store, (location, options, endpoint) in stores.items():
            con = duckdb_connection(endpoint)
            # DuckDB keeps remote file blocks in memory across queries (on by default since
            # 1.3), and so does our default runtime for small data files: repeated rounds read
            # the data from memory. The second connection, and our second side, read the
            # store every round, as PyIceberg does.
            cold = duckdb_connection(endpoint)
            cold.execute("SET enable_external_file_cache = false")
            our_side, py_side = Ours(location, options), PyIceberg(location, options)
            our_cold = Ours(location, options, data_cache=False)
            # warm-up: open the clients (a one-off per process, not per scan)
            our_side.scan(selective)
            our_cold.scan(selective)
            py_side.scan(selective)
            duckdb_scan(con, location, selective)
            duckdb_scan(cold, location, selective)
            for scan_name, row_filter in (("full", ""), ("selective", selective)):
                t_ours, table = best(functools.partial(our_side.scan, row_filter), rounds)
                t_ours_cold, cold_table = best(functools.partial(our_cold.scan, row_filter), rounds)
                t_py, py_table = best(functools.partial(py_side.scan, row_filter), rounds)
                t_duck, duck_table = best(functools.partial(duckdb_scan, con, location, row_filter), rounds)
                t_cold, _ = best(functools.partial(duckdb_scan, cold, location, row_filter), rounds)
                assert table.num_rows == cold_table.num_rows == py_table.num_rows == duck_table.num_rows, (
                    store,
                    scan_name,
                )
                n = table.num_rows
                lines.append(
                    f"| {store} | {scan_name} | {n / t_ours:,.0f} | {table.nbytes / 2**20 / t_ours:,.1f} "
                    f"| {n / t_py:,.0f} | {n / t_duck:,.0f} | {n / t_ours_cold:,.0f} | {n / t_cold:,.0f} "
                    f"| {t_py / t_ours:.2f} | {t_duck / t_ours:.2f} | {t_cold / t_ours_cold:.2f} |"
                )
            con.close()
            cold.close()
            our_side.close()
            our_cold.close()
        child = subprocess.run(
            [sys.executable, __file__, "--rss-child", local, "{}"], capture_output=True, text=True, check=True
        )
        rss = json.loads(child.stdout.strip().splitlines()[-1])
        data_mb = sum(f.stat().st_size for f in (tmp / "wh").rglob("*.parquet")) / 2**20
        lines.append("")
        lines.append(
            f"batch-by-batch scan (local): peak RSS {rss['peak_rss_mb']:.0f} MB "
            f"(interpreter + imports before the scan: {rss['baseline_rss_mb']:.0f} MB) "
            f"for {rss['streamed_mb']:.0f} MB of Arrow data streamed from {data_mb:.1f} MB of Parquet"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
