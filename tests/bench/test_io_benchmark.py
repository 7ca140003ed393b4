"""The GET benchmark still runs (tiny mode); no timing assertions."""

from __future__ import annotations

from benchmark_runs import run_tiny


def test_store_get_benchmark_runs_in_tiny_mode() -> None:
    table = [line for line in run_tiny("store_get.py", timeout=120).splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in table[2:]] == ["1", "8", "32", "128"]
