"""Planning never imports pandas: pyarrow imports it on its first conversion between Arrow
and numpy or Python values (~0.3 CPU-s with the GIL held), which a cold plan paid on its
critical path. Checked in a fresh interpreter, where nothing else imported it first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    import aioiceberg
    from aioiceberg import sync
    from aioiceberg.io import resolve_io
    from aioiceberg.runtime import default_runtime
    from aioiceberg.testing.synthetic import build_table, filters

    M, E = 260, 8  # over 256 manifests: the list is decoded into columns

    async def plans() -> tuple[str, list[object]]:
        io = resolve_io("memory://w/t", {}, runtime=default_runtime())
        meta = await build_table(io, "memory://w/t", M, E)
        out: list[object] = [["built", "", "", 0, "pandas" in sys.modules]]
        table = await aioiceberg.load_table(meta)
        for name, text in filters(M, E).items():
            for native in (True, False):  # the compiled decoder, and polars
                scan = table.scan(row_filter=text or None, native_decoder=native)
                n = len([t async for t in scan.plan_files()])
                out.append(["async", str(native), name, n, "pandas" in sys.modules])
        return meta, out

    meta, out = asyncio.run(plans())
    blocking = sync.load_table(meta)
    for name, text in filters(M, E).items():
        n = sum(1 for _ in blocking.scan(row_filter=text or None).plan_files())
        out.append(["blocking", "True", name, n, "pandas" in sys.modules])
    print(json.dumps(out))
    """
)


def test_plans_of_every_shape_leave_pandas_unimported() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    tasks = {"": 0, "none": 260 * 8, "day_1pct": 2 * 8, "id_eq": 1, "metrics_only": 1}
    assert len(rows) == 1 + 8 + 4
    for api, native, name, n, imported in rows:  # the first: building the table
        assert n == tasks[name], (api, native, name)
        assert imported is False, f"pandas imported by then: {api} {name} (native decoder: {native})"
