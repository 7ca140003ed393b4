"""The service benchmark's tiny mode runs end to end (local disk, and nginx when installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmark_runs import run_tiny  # noqa: E402

from benchmarks.nginx_store import nginx_missing  # noqa: E402

MISSING = nginx_missing(delay_ms=0)


@pytest.mark.parametrize(
    "store",
    ["local", pytest.param("nginx", marks=pytest.mark.skipif(MISSING is not None, reason=MISSING or ""))],
)
def test_service_benchmark_tiny_mode_runs(store: str, tmp_path: Path) -> None:
    out = run_tiny("service.py", "--store", store)
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| aioiceberg |")]
    rows += [line.split("|") for line in out.splitlines() if line.startswith("| pyiceberg |")]
    assert sorted((r[1].strip(), r[2].strip()) for r in rows) == [
        ("aioiceberg", "1"),
        ("aioiceberg", "2"),
        ("pyiceberg", "1"),
        ("pyiceberg", "2"),
    ]
    assert all(int(r[3]) > 0 for r in rows)  # every run finished queries (row counts are checked)
    expected = "store local" if store == "local" else "store nginx"
    assert any(line.startswith(expected) for line in out.splitlines())
