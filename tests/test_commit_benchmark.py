"""The commit benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_commit_benchmark_tiny_mode_reports_every_case() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "commit.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(lines) > 10
    assert any("pyiceberg" in line for line in lines)
    assert all(line.split("|")[6].strip() == "0" for line in lines[1:])
