"""Whether Spark's Python workers can run the data source, checked once per SparkContext.

Workers start ``PYSPARK_PYTHON`` (``python3`` on PATH when unset), not the driver's
interpreter: a script run with a venv's Python otherwise fails its first query with a
long Py4J traceback ending in ``No module named 'aioiceberg'``.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from typing import Any

from aioiceberg.errors import SparkSetupError

# on the SparkContext: the worker Python a check passed for (PySpark reads PYSPARK_PYTHON
# into ``SparkContext.pythonExec`` once, when the context starts)
CHECKED_ATTRIBUTE = "_aioiceberg_checked_python"
# the module every data source task imports first: it pulls in pyarrow and pyspark's API
WORKER_MODULE = "aioiceberg.spark.source"
# the line of a failed job that says why: a Python exception, a Spark error class, or a
# program that could not be started
REASON = re.compile(r"(?:\b[A-Za-z_][\w.]*(?:Error|Exception)(?:: |$)|\[[A-Z_]+\] |Cannot run program ).*")


def check_workers(spark: Any) -> None:
    """Run one tiny job whose worker imports aioiceberg's data source; raise
    ``SparkSetupError`` in one line (which Python, what failed, how to fix it) if it cannot."""
    try:
        context = spark.sparkContext
        python = str(context.pythonExec)
    except Exception:
        return  # Spark Connect: no RDDs here, and the server's workers are the server's own
    if getattr(context, CHECKED_ATTRIBUTE, None) == python:
        return
    failure = ""
    for _ in range(2):  # a worker lost once under load is not a setup problem: only twice is
        try:
            [(executable, problem)] = context.parallelize([0], 1).map(_probe(WORKER_MODULE)).collect()
            break
        except Exception as exc:  # the worker did not run (no such program, another Python version)
            failure = _reason(str(exc))
    else:
        raise SparkSetupError(_message(python, failure))
    if problem:
        where = python if executable == python else f"{python} ({executable})"
        raise SparkSetupError(_message(where, problem))
    setattr(context, CHECKED_ATTRIBUTE, python)


def _probe(module: str) -> Callable[[int], list[str]]:
    # a closure, so cloudpickle ships it by value: the worker needs nothing of ours to run it
    def probe(_: int) -> list[str]:

        try:
            importlib.import_module(module)
        except Exception as exc:
            return [sys.executable, f"{type(exc).__name__}: {exc}"]
        return [sys.executable, ""]

    return probe


def _reason(text: str) -> str:
    """The line of a failed job's (Py4J, multi-line) message that says why it failed."""
    found = [m.group(0).strip() for m in map(REASON.search, text.splitlines()) if m]
    started = [line[line.index("Cannot run program ") :] for line in found if "Cannot run program " in line]
    specific = [line for line in found if not line.startswith(("org.apache.spark.", "py4j.", "java."))]
    first = text.strip().splitlines()[:1] or ["unknown error"]
    reason = (started or specific or found or first)[-1]
    return reason if len(reason) <= 300 else reason[:297] + "..."


def _message(python: str, reason: str) -> str:
    return (
        f"Spark's Python workers run {python}, which cannot run aioiceberg ({reason}): set "
        f"PYSPARK_PYTHON to a Python that has aioiceberg before the SparkSession starts, e.g. "
        f"os.environ['PYSPARK_PYTHON'] = sys.executable (here {sys.executable}), "
        f"or install aioiceberg[spark] in {python}"
    )
