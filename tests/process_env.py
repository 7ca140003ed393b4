"""The environment of a "clean" child process for programs a user would paste or run: the
docs' snippets and examples/.

No ``PYSPARK_*``, ``AIOICEBERG_*`` or ``AWS_*`` variables, and when the tests run from a venv,
its ``bin`` is not on ``PATH``: ``python3`` there is not this interpreter, as for a user who
runs ``.venv/bin/python script.py`` without activating the venv (Spark's workers must then be
pointed at it by the program itself).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

CLEARED = ("PYSPARK_", "AIOICEBERG_", "AWS_")


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    if sys.prefix != sys.base_prefix:
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
        env.pop("VIRTUAL_ENV", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_as_user(
    script: Path, cwd: Path, timeout_s: float, what: str, extra_env: Mapping[str, str] | None = None
) -> None:
    """Run ``script`` with this interpreter in ``cwd`` and a clean environment (plus
    ``extra_env``: settings of the test's own, such as JVM flags); a non-zero exit fails the
    test with the end of its output (a time-out propagates)."""
    import pytest

    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env={**clean_env(), **(extra_env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        pytest.fail(
            f"{what} failed (exit {done.returncode}):\n--- stdout\n{done.stdout[-3000:]}\n"
            f"--- stderr\n{done.stderr[-6000:]}"
        )
