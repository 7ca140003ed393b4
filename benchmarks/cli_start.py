"""Command-line start-up: what a user waits for before ``aioiceberg`` prints anything.

Median wall (and CPU) time of ``--runs`` process starts each of ``aioiceberg --help`` and
``aioiceberg -w DIR history T`` (a metadata-only command, on a partitioned table with a few
snapshots that the script makes first), beside two floors: ``python -c pass`` and
``python -c "import pyarrow"``. The console script and the interpreter are those of the
running virtual environment.

    .venv/bin/python benchmarks/cli_start.py            # 10 starts each
    .venv/bin/python benchmarks/cli_start.py --tiny     # 2 starts each, for the test suite
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from aioiceberg import sync

TABLE = "bench.events"


def make_table(warehouse: str, appends: int) -> None:
    """A table partitioned by day with ``appends`` snapshots: what ``history`` lists."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("region", pa.string())])
    with sync.connect(warehouse) as catalog:
        table = catalog.create_table(TABLE, schema=schema, partition_by=["day(ts)"])
        for i in range(appends):
            rows = 100
            table.append(
                pa.table(
                    {
                        "id": pa.array(range(i * rows, (i + 1) * rows), pa.int64()),
                        "ts": pa.array([1_700_000_000_000_000 + n * 3_600_000_000 for n in range(rows)])
                        .cast(pa.int64())
                        .cast(pa.timestamp("us", tz="UTC")),
                        "region": pa.array(["eu", "us"] * (rows // 2)),
                    },
                    schema=schema,
                )
            )


def median_start(argv: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU (user + system) seconds of ``runs`` starts of ``argv`` (each must
    exit 0). CPU time hardly moves when other work shares the cores; wall time does."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="process starts per command")
    parser.add_argument("--tiny", action="store_true", help="2 starts each (the test suite's run)")
    args = parser.parse_args()
    runs = 2 if args.tiny else args.runs
    python = sys.executable
    script = str(Path(python).parent / "aioiceberg")
    with tempfile.TemporaryDirectory() as warehouse:
        make_table(warehouse, appends=2 if args.tiny else 5)
        commands = {
            "python -c pass": [python, "-c", "pass"],
            'python -c "import pyarrow"': [python, "-c", "import pyarrow"],
            "aioiceberg --help": [script, "--help"],
            f"aioiceberg -w DIR history {TABLE}": [script, "-w", warehouse, "history", TABLE],
        }
        load = os.getloadavg()[0]
        print(f"median of {runs} process starts, {sys.executable}, load average {load:.1f}")
        print("| command | wall s | CPU s |")
        print("|---|---:|---:|")
        for name, argv in commands.items():
            wall, cpu = median_start(argv, runs)
            print(f"| `{name}` | {wall:.3f} | {cpu:.3f} |", flush=True)


if __name__ == "__main__":
    main()
