"""The compaction benchmark runs end to end in its tiny mode (a smoke run: 40 files, one
process and Spark local[2], no cluster, no Java; no timing assertions): every run's rows are
checked against the source by the script, and its table is printed."""

from __future__ import annotations

import pytest
from benchmark_runs import run_tiny, table_lines


@pytest.mark.timeout(300)  # Spark's start on a loaded machine
def test_compaction_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    out = run_tiny("compaction.py", timeout=240)
    lines = table_lines(out)
    runs = {tuple(cell.strip() for cell in line.strip("| ").split(" | ")[:2]) for line in lines}
    for strategy in ("binpack", "sort"):
        assert ("Table.rewrite_data_files, one process", strategy) in runs
        assert ("spark.actions.rewrite_data_files, Spark local[2]", strategy) in runs
        assert any(run.startswith("floor") and s == strategy for run, s in runs)
    assert "40 files x 50 rows" in out
    # every run compacted its copy: 40 files in, one per partition out
    assert all("40 -> 8" in line for line in lines[1:])
