"""The expression benchmark's tiny mode runs and prints a row per filter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_expression_benchmark_tiny_mode_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "expressions.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 3, done.stdout  # the header and at least two filters
    assert all(len(r.split("|")) == 9 for r in rows), rows
