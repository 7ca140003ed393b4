"""The Spark benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

import pytest
from benchmark_runs import run_tiny


def test_spark_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    assert "the floor" in run_tiny("spark.py", timeout=280)
