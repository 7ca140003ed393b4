"""The commit benchmark runs end to end in its tiny mode (no timing assertions)."""

from __future__ import annotations

from benchmark_runs import run_tiny, table_lines


def test_commit_benchmark_tiny_mode_reports_every_case() -> None:
    lines = table_lines(run_tiny("commit.py"))
    assert len(lines) > 10
    assert any("pyiceberg" in line for line in lines)
    assert all(line.split("|")[6].strip() == "0" for line in lines[1:])


def test_contention_benchmark_tiny_mode_lands_every_append() -> None:
    rows = [line.split("|") for line in table_lines(run_tiny("contention.py"))]
    assert [r[1].strip() for r in rows[1:]] == ["local", "s3", "dynamodb"]
    assert all(r[3].strip() == "4" and r[6].strip() == "0" for r in rows[1:])  # commits, give-ups
