"""The orphan removal benchmark runs end to end in its tiny mode (a smoke run: 300 orphans,
Spark at its smallest; no timing assertions): one process and Spark local[2] must name the
same orphans, Spark deletes them, and the table is printed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from benchmark_runs import ROOT, run_tiny, table_lines


@pytest.mark.timeout(300)  # Spark's start on a loaded machine
def test_orphans_benchmark_runs_in_tiny_mode() -> None:
    pytest.importorskip("pyspark")
    out = run_tiny("orphans.py", timeout=240)
    runs = {line.split(" | ")[0].removeprefix("| ") for line in table_lines(out)}
    assert "raw listing, one process (floor)" in runs
    assert "delete_orphan_files, Spark local[2] (deleting)" in runs
    assert "300 orphans" in out


@pytest.mark.timeout(180)
def test_orphans_benchmark_runs_in_one_process_without_spark() -> None:
    out = run_tiny("orphans.py", "--one-process", timeout=150)
    runs = {line.split(" | ")[0].removeprefix("| ") for line in table_lines(out)}
    assert "orphan listing: objects and temp files (best of 3)" in runs
    assert "remove_orphan_files, one process (deleting)" in runs
    assert not any("Spark" in run for run in runs)
    assert "300 orphans" in out


def test_versitygw_store_without_its_binary_stops_with_the_build_command() -> None:
    """The suite builds no Go: a missing gateway binary stops the run before any work, naming
    how to build it."""
    env = {k: v for k, v in os.environ.items() if k != "VERSITYGW"}
    env["PATH"] = os.path.dirname(sys.executable)  # no versitygw on it
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "orphans.py"), "--tiny", "--store", "versitygw"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode != 0
    assert "no versitygw binary" in done.stderr
    assert "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0" in done.stderr
