"""The columnar decoder's warm-up, asked for by a plan on an event loop, starts once the
plan's task yields (its manifest-list request is under way by then), not while the loop is
about to send that request; asked for outside a loop it starts at once. A fresh process
each: the warm-up runs once a process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from aioiceberg.spec.manifest.columnar import columnar_available

pytestmark = pytest.mark.skipif(not columnar_available(), reason="needs the columnar decoder (polars)")

ON_A_LOOP = """
import asyncio, threading
from aioiceberg.runtime import default_runtime

def warming() -> bool:
    return any(t.name == "aioiceberg-columnar-warm" for t in threading.enumerate())

async def main() -> None:
    runtime = default_runtime()
    runtime.warm_columnar()
    assert not warming() and not runtime.columnar_ready, "started before the caller yielded"
    runtime.warm_columnar()  # asked again: still one warm-up
    await asyncio.sleep(0)
    await asyncio.to_thread(default_runtime().columnar_done.wait, 120)
    assert runtime.columnar_ready
    print("ok")

asyncio.run(main())
"""

OFF_A_LOOP = """
from aioiceberg.runtime import default_runtime

runtime = default_runtime()
runtime.warm_columnar()
assert runtime.columnar_done.wait(120)
print("ok")
"""


@pytest.mark.parametrize("code", [ON_A_LOOP, OFF_A_LOOP], ids=["on-a-loop", "off-a-loop"])
def test_the_warm_up_runs_once_the_caller_lets_it(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
