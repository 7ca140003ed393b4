"""Running a benchmark's tiny mode from a test: every script in benchmarks/ keeps one, run by
the suite so that it does not rot (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_tiny(script: str, *args: str, timeout: int = 240, env: dict[str, str] | None = None) -> str:
    """``benchmarks/<script> --tiny <args>`` in a child process: its stdout (a failed run fails
    the test with the tail of its stderr)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--tiny", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def table_lines(stdout: str) -> list[str]:
    """The Markdown table rows a benchmark printed (header included, separators not)."""
    return [line for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
