"""``register`` checks once per SparkContext that Spark's Python workers can run aioiceberg,
and says in one line which Python they run and how to fix it when they cannot (instead of a
long Py4J traceback from the first query).

One session for the module: PySpark starts workers with ``SparkContext.pythonExec`` (set
from ``PYSPARK_PYTHON`` when the context starts), so the tests point it at another Python
for a while instead of starting a JVM per case."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from spark_sessions import local_session

import aioiceberg.spark
from aioiceberg.errors import SparkSetupError


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-setup-tests", log_level="OFF", conf={"spark.task.maxFailures": "1"})


@contextmanager
def workers_running(spark: Any, python: str) -> Iterator[None]:
    context = spark.sparkContext
    before = context.pythonExec
    context.pythonExec = python
    try:
        yield
    finally:
        context.pythonExec = before


def python_without_aioiceberg() -> str:
    """The interpreter this venv was made from: same version, none of the venv's packages."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs a virtualenv, whose base interpreter lacks its packages")
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not base.is_file():
        pytest.skip(f"no base interpreter at {base}")
    # the workers' working directory is this process's: a checkout there is importable
    probe = [str(base), "-c", "import aioiceberg.spark.source"]
    if subprocess.run(probe, cwd=os.getcwd(), capture_output=True).returncode == 0:
        pytest.skip(f"{base} can import aioiceberg")
    return str(base)


def one_line(error: BaseException) -> str:
    """The error's message, checked to be one line and shown without a Py4J traceback."""
    message = str(error)
    assert "\n" not in message, message
    shown = "".join(traceback.format_exception(error))
    assert shown.count("Traceback") == 1 and "py4j" not in shown.lower(), shown
    return message


def test_workers_on_a_python_without_aioiceberg_fail_register_in_one_line(spark: Any) -> None:
    python = python_without_aioiceberg()
    with workers_running(spark, python), pytest.raises(SparkSetupError) as info:
        aioiceberg.spark.register(spark)
    message = one_line(info.value)
    assert f"workers run {python}, which cannot run aioiceberg (ModuleNotFoundError: " in message, message
    assert "os.environ['PYSPARK_PYTHON'] = sys.executable" in message, message


def test_a_worker_program_that_does_not_exist_fails_register_in_one_line(spark: Any, tmp_path: Path) -> None:
    python = str(tmp_path / "no-such-python")
    with workers_running(spark, python), pytest.raises(SparkSetupError) as info:
        aioiceberg.spark.register(spark)
    message = one_line(info.value)
    assert f'cannot run aioiceberg (Cannot run program "{python}"' in message, message
    assert "PYSPARK_PYTHON" in message, message


def test_register_checks_the_workers_once_per_context(spark: Any) -> None:
    tracker = spark.sparkContext.statusTracker()
    aioiceberg.spark.register(spark)  # checked already by local_session, or now
    jobs = sorted(tracker.getJobIdsForGroup())
    aioiceberg.spark.register(spark)
    assert sorted(tracker.getJobIdsForGroup()) == jobs
    rows = spark.createDataFrame([(1,)], "id long").collect()  # a job: the tracker does see them
    assert rows[0]["id"] == 1
    assert len(tracker.getJobIdsForGroup()) > len(jobs)
