"""Commit contention: N appender processes on one table, default retry settings, per protocol.

Each appender is its own process (as separate jobs or hosts would be), so the in-process
lock does not serialise them: they race through the commit protocol. Tables keep the
default ``commit.retry.*`` properties. Reported per case: commits/s, attempts per commit,
and give-ups (appends that ended in an error). Afterwards the table must hold every
acknowledged append exactly once.

    .venv/bin/python benchmarks/contention.py                    # 4, 8, 16 appenders
    .venv/bin/python benchmarks/contention.py --tiny             # seconds; what the test runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.string())])
PROTOCOLS = ("local", "s3", "dynamodb")


@dataclass
class Result:
    protocol: str
    appenders: int
    commits: int
    attempts: int
    give_ups: int
    seconds: float
    in_table: int

    @property
    def rate(self) -> float:
        return self.commits / self.seconds if self.seconds else 0.0


def s3_options(endpoint: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.path-style-access": "true",
        "dynamodb.endpoint": endpoint,
    }


async def _worker(
    root: str, lock: str | None, options: dict[str, str], writer: int, appends: int, at: float
) -> None:
    import aioiceberg
    from aioiceberg.errors import IcebergError

    catalog = aioiceberg.connect(root, lock=lock, storage_options=options or None)
    table = await catalog.load_table("db.t")
    await asyncio.sleep(max(0.0, at - time.time()))
    acked: list[int] = []
    attempts = give_ups = 0
    errors: list[str] = []
    for j in range(appends):
        start = writer * 1_000_000 + j * 10
        data = pa.table({"id": list(range(start, start + 3)), "writer": [f"w{writer}"] * 3}, schema=SCHEMA)
        try:
            await table.append(data)
            acked.extend(range(start, start + 3))
        except IcebergError as exc:
            give_ups += 1
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
        attempts += table.last_commit.attempts
    print(
        json.dumps(
            {"acked": acked, "attempts": attempts, "give_ups": give_ups, "end": time.time(), "errors": errors}
        )
    )


async def _setup(protocol: str, endpoint: str | None, scratch: str) -> tuple[str, str | None, dict[str, str]]:
    import aioiceberg

    if protocol == "local":
        root, lock, options = os.path.join(scratch, f"wh-{uuid.uuid4().hex[:8]}"), None, {}
    else:
        from servers.backends import create_bucket

        assert endpoint is not None
        bucket = await create_bucket(endpoint)
        root, options = f"s3://{bucket}/wh", s3_options(endpoint)
        lock = f"dynamodb://contention_{uuid.uuid4().hex[:8]}" if protocol == "dynamodb" else None
    catalog = aioiceberg.connect(root, lock=lock, storage_options=options or None)
    await catalog.create_table("db.t", schema=SCHEMA)
    await catalog.aclose()
    return root, lock, options


async def _count(root: str, lock: str | None, options: dict[str, str]) -> tuple[list[int], int]:
    import aioiceberg

    catalog = aioiceberg.connect(root, lock=lock, storage_options=options or None)
    table = await catalog.load_table("db.t")
    ids = (await table.scan().to_arrow()).column("id").to_pylist()
    snapshots = len(table.snapshots())
    await catalog.aclose()
    return ids, snapshots


def run_case(protocol: str, appenders: int, appends: int, endpoint: str | None, scratch: str) -> Result:
    from aioiceberg.runtime import close_all_clients

    async def setup() -> tuple[str, str | None, dict[str, str]]:
        try:
            return await _setup(protocol, endpoint, scratch)
        finally:
            await close_all_clients()

    root, lock, options = asyncio.run(setup())
    at = time.time() + 2.0 + 0.4 * appenders  # every process imported and loaded by then
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps([root, lock, options, w, appends, at])],
            stdout=subprocess.PIPE,
            env=env,
        )
        for w in range(appenders)
    ]
    outs = [json.loads(p.communicate()[0].decode().strip().splitlines()[-1]) for p in procs]
    acked = [i for o in outs for i in o["acked"]]

    async def count() -> tuple[list[int], int]:
        try:
            return await _count(root, lock, options)
        finally:
            await close_all_clients()

    ids, snapshots = asyncio.run(count())
    if sorted(ids) != sorted(acked) or snapshots != len(acked) // 3:
        raise SystemExit(f"{protocol} x{appenders}: acknowledged appends lost or duplicated")
    for o in outs:
        for error in o["errors"][:2]:
            print(f"  give-up ({protocol} x{appenders}): {error}", file=sys.stderr)
    return Result(
        protocol,
        appenders,
        len(acked) // 3,
        sum(o["attempts"] for o in outs),
        sum(o["give_ups"] for o in outs),
        max(o["end"] for o in outs) - at,
        snapshots,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 appenders x 2 appends per protocol")
    parser.add_argument("--appenders", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--appends", type=int, default=5, help="appends per appender")
    parser.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        from aioiceberg.runtime import close_all_clients

        root, lock, options, writer, appends, at = json.loads(args.worker)

        async def work() -> None:
            try:
                await _worker(root, lock, options, writer, appends, at)
            finally:
                await close_all_clients()

        asyncio.run(work())
        return
    counts, appends = ([2], 2) if args.tiny else (args.appenders, args.appends)
    from servers.moto import MotoServer

    results: list[Result] = []
    with tempfile.TemporaryDirectory() as scratch, MotoServer() as moto:
        for protocol in args.protocols:
            for n in counts:
                result = run_case(protocol, n, appends, None if protocol == "local" else moto.url, scratch)
                results.append(result)
                print(
                    f"{protocol:<9} {n:>3} appenders: {result.commits:>4} commits in "
                    f"{result.seconds:6.2f} s = {result.rate:6.1f}/s, "
                    f"{result.attempts / max(1, result.commits):4.2f} attempts/commit, "
                    f"{result.give_ups} give-ups",
                    flush=True,
                )
    print("\n| protocol | appenders | commits | commits/s | attempts per commit | give-ups |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r.protocol} | {r.appenders} | {r.commits} | {r.rate:.1f} | "
            f"{r.attempts / max(1, r.commits):.2f} | {r.give_ups} |"
        )


if __name__ == "__main__":
    main()
