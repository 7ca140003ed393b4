"""Commit throughput: appends/s with 1, 4 and 16 concurrent appenders per commit protocol.

Protocols: local file system, S3 conditional writes (moto), S3 + DynamoDB (moto), each on
plain moto and behind the proxy adding 20 ms per request; beside them PyIceberg's
SqlCatalog (sqlite) appending to the same store. Appenders are asyncio tasks in one
process (aioiceberg) or threads (PyIceberg, whose API blocks). Retries are counted. The
engine label says whether ``commit.in-process-lock`` (tasks of one process take turns) is
on; with several appenders each aioiceberg protocol also runs with it off (racing).

    .venv/bin/python benchmarks/commit.py            # full run
    .venv/bin/python benchmarks/commit.py --tiny     # seconds; what the test runs
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from servers.moto import FAKE_CREDENTIALS, MotoServer  # noqa: E402
from servers.proxy import FaultConfig, FaultProxy  # noqa: E402

import aioiceberg  # noqa: E402
from aioiceberg.io import S3FileIO  # noqa: E402
from aioiceberg.runtime import close_all_clients, default_runtime  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.string())])
RETRY = {
    "commit.retry.num-retries": "1000",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "500",
}


@dataclass
class Result:
    store: str
    engine: str
    appenders: int
    commits: int
    attempts: int
    seconds: float
    failures: int

    @property
    def rate(self) -> float:
        return self.commits / self.seconds if self.seconds else 0.0


def batch(writer: int, j: int) -> pa.Table:
    start = writer * 1_000_000 + j * 10
    return pa.table({"id": list(range(start, start + 10)), "writer": [f"w{writer}"] * 10}, schema=SCHEMA)


def s3_options(endpoint: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.path-style-access": "true",
        "dynamodb.endpoint": endpoint,
    }


async def new_bucket(endpoint: str) -> str:
    io = S3FileIO(s3_options(endpoint)).bind_runtime(default_runtime())
    bucket = f"bench-{uuid.uuid4().hex[:16]}"
    await (await io.runtime.clients.get(io.options)).create_bucket(Bucket=bucket)
    return bucket


async def run_aioiceberg(
    root: str,
    lock: str | None,
    options: dict[str, str] | None,
    appenders: int,
    appends: int,
    in_process_lock: bool,
) -> tuple[int, int, float, int]:
    catalog = aioiceberg.connect(root, lock=lock, storage_options=options)
    props = {**RETRY, "commit.in-process-lock": str(in_process_lock).lower()}
    name = f"db.t{uuid.uuid4().hex[:8]}"
    await catalog.create_table(name, schema=SCHEMA, properties=props)
    attempts = commits = failures = 0

    async def appender(w: int) -> None:
        nonlocal attempts, commits, failures
        table = await catalog.load_table(name)
        for j in range(appends):
            try:
                await table.append(batch(w, j))
                commits += 1
            except Exception:
                failures += 1
            attempts += table.last_commit.attempts

    start = time.perf_counter()
    await asyncio.gather(*(appender(w) for w in range(appenders)))
    return commits, attempts, time.perf_counter() - start, failures


def run_pyiceberg(
    warehouse: str, options: dict[str, str] | None, appenders: int, appends: int
) -> tuple[int, int, float, int]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import CommitFailedException

    props = {k: v for k, v in (options or {}).items() if k.startswith("s3.") and k != "s3.path-style-access"}
    db = Path(tempfile.mkdtemp()) / "catalog.db"
    catalog = SqlCatalog("bench", uri=f"sqlite:///{db}", warehouse=warehouse, **props)
    catalog.create_namespace("db")
    name = f"db.t{uuid.uuid4().hex[:8]}"
    catalog.create_table(name, schema=SCHEMA)
    commits = attempts = failures = 0
    lock = threading.Lock()

    def appender(w: int) -> None:
        nonlocal commits, attempts, failures
        table = catalog.load_table(name)
        for j in range(appends):
            for _ in range(1000):
                with lock:
                    attempts += 1
                try:
                    table.append(batch(w, j))
                    with lock:
                        commits += 1
                    break
                except CommitFailedException:
                    table.refresh()
                    time.sleep(0.005)
            else:
                with lock:
                    failures += 1

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(appenders)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return commits, attempts, time.perf_counter() - start, failures


async def bench(tiny: bool, pyiceberg: bool) -> list[Result]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("pyiceberg").setLevel(logging.ERROR)
    for k, v in FAKE_CREDENTIALS.items():
        os.environ.setdefault(k, v)
    counts = (1, 4) if tiny else (1, 4, 16)
    appends_total = 4 if tiny else 16
    results: list[Result] = []
    # warm-up, not reported: first-use imports and caches would land on the first row
    await run_aioiceberg(tempfile.mkdtemp(), None, None, 1, 2, True)
    if pyiceberg:
        await asyncio.to_thread(run_pyiceberg, f"file://{tempfile.mkdtemp()}/py", None, 1, 2)
    with MotoServer() as moto, FaultProxy(moto.url, FaultConfig(delay_ms=20)) as slow:
        stores = [("local", None)] + [("moto", moto.url)] + ([] if tiny else [("moto+20ms", slow.url)])
        for store, endpoint in stores:
            for appenders in counts:
                appends = max(1, appends_total // appenders)
                if endpoint is None:
                    root = tempfile.mkdtemp()
                    targets = [("aioiceberg conditional", root, None, None)]
                    py_warehouse, py_options = f"file://{root}/py", None
                else:
                    bucket = await new_bucket(moto.url)
                    options = s3_options(endpoint)
                    targets = [
                        ("aioiceberg conditional", f"s3://{bucket}/wh", None, options),
                        (
                            "aioiceberg dynamodb",
                            f"s3://{bucket}/wh",
                            f"dynamodb://bench_{bucket[-8:]}",
                            options,
                        ),
                    ]
                    py_warehouse, py_options = f"s3://{bucket}/py", options
                for engine, root, lock, options in targets:
                    modes = (True,) if appenders == 1 else (True, False)
                    for in_process in modes:
                        label = f"{engine} [in-process lock {'on' if in_process else 'off'}]"
                        c, a, s, f = await run_aioiceberg(root, lock, options, appenders, appends, in_process)
                        results.append(Result(store, label, appenders, c, a, s, f))
                if pyiceberg:
                    c, a, s, f = await asyncio.to_thread(
                        run_pyiceberg, py_warehouse, py_options, appenders, appends
                    )
                    results.append(Result(store, "pyiceberg SqlCatalog", appenders, c, a, s, f))
        await close_all_clients()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few commits per case, for the test suite")
    parser.add_argument("--no-pyiceberg", action="store_true")
    args = parser.parse_args(argv)
    results = asyncio.run(bench(args.tiny, not args.no_pyiceberg))
    baseline = {(r.store, r.appenders): r.rate for r in results if r.engine.startswith("pyiceberg")}
    print("| store | engine | appenders | commits | attempts | failed | commits/s | vs PyIceberg |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        base = baseline.get((r.store, r.appenders))
        ratio = f"{r.rate / base:.2f}x" if base else "-"
        cells = (r.store, r.engine, r.appenders, r.commits, r.attempts, r.failures, f"{r.rate:.1f}", ratio)
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)


if __name__ == "__main__":
    main()
