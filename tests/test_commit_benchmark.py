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


def test_contention_benchmark_tiny_mode_lands_every_append() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "contention.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    table = [line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    rows = [line.split("|") for line in table]
    assert [r[1].strip() for r in rows[1:]] == ["local", "s3", "dynamodb"]
    assert all(r[3].strip() == "4" and r[6].strip() == "0" for r in rows[1:])  # commits, give-ups
