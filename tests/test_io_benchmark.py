"""The GET benchmark still runs (tiny mode); no timing assertions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_store_get_benchmark_runs_in_tiny_mode() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "store_get.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in table[2:]] == ["1", "8", "32", "128"]
