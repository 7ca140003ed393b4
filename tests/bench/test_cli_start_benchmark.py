"""The command-line start-up benchmark's tiny mode runs and prints its four rows."""

from __future__ import annotations

from benchmark_runs import run_tiny, table_lines


def test_cli_start_benchmark_tiny_mode_runs() -> None:
    rows = table_lines(run_tiny("cli_start.py", timeout=120))
    assert [r.split("|")[1].strip() for r in rows] == [
        "command",
        "`python -c pass`",
        '`python -c "import pyarrow"`',
        "`aioiceberg --help`",
        "`aioiceberg -w DIR history bench.events`",
    ], rows
    assert all(len(r.split("|")) == 5 for r in rows), rows
