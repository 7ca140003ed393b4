"""The write benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_write_benchmark_runs_in_tiny_mode() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "write.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "aioiceberg is" in result.stdout
