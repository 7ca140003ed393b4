"""The orphan removal benchmark runs end to end in its tiny mode (2,000 orphans; no timing
assertions): one process and Spark local[2] must name the same orphans, and Spark deletes them."""

from __future__ import annotations

import pytest
from benchmark_runs import run_tiny, table_lines


@pytest.mark.timeout(480)  # Spark's start on a loaded machine
def test_orphans_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    out = run_tiny("orphans.py", timeout=420)
    runs = {line.split(" | ")[0].removeprefix("| ") for line in table_lines(out)}
    assert "raw listing, one process (floor)" in runs
    assert "delete_orphan_files, Spark local[2] (deleting)" in runs
    assert "2,000 orphans" in out
