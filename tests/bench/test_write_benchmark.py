"""The write benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

from benchmark_runs import run_tiny


def test_write_benchmark_runs_in_tiny_mode() -> None:
    assert "aioiceberg is" in run_tiny("write.py", timeout=120)
