"""Running a check in a forked child, bounded so that a hang fails the test instead of CI."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest


def in_forked_child(check: Callable[[], bool], what: str, bound_s: float = 60) -> None:
    """Fork, run ``check`` in the child (exit 0 when it returns True) and assert the child's
    success; ``bound_s`` bounds a hang, it is not a timing check. ``what`` names the work in
    the failure."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + bound_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung {what}")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
