"""The Spark benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_spark_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "spark.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the floor" in result.stdout
