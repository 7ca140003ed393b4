"""The expression benchmark's tiny mode runs and prints a row per filter."""

from __future__ import annotations

from benchmark_runs import run_tiny, table_lines


def test_expression_benchmark_tiny_mode_runs() -> None:
    rows = table_lines(run_tiny("expressions.py", timeout=120))
    assert len(rows) >= 3, rows  # the header and at least two filters
    assert all(len(r.split("|")) == 9 for r in rows), rows
