"""The plan-only service benchmark's tiny mode runs end to end (local disk, and nginx when
installed); its workers check every plan's task count against the table, so a run that
prints its tables planned right."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmark_runs import run_tiny, table_lines  # noqa: E402

from benchmarks.nginx_store import nginx_missing  # noqa: E402

MISSING = nginx_missing(delay_ms=0)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize(
    "store",
    ["local", pytest.param("nginx", marks=pytest.mark.skipif(MISSING is not None, reason=MISSING or ""))],
)
def test_service_plan_benchmark_tiny_mode_runs(store: str) -> None:
    out = run_tiny("service_plan.py", "--store", store)
    rows = [_cells(line) for line in table_lines(out)]
    sequential = {
        r[0]: r for r in rows if r[0] in ("aioiceberg", "aioiceberg-sync", "pyiceberg") and len(r) > 12
    }
    assert sorted(sequential) == ["aioiceberg", "aioiceberg-sync", "pyiceberg"]
    assert all(int(r[2]) == 6 for r in sequential.values())  # --tiny: six sequential queries each
    load = sorted((r[0], r[1], r[2]) for r in rows if r[0] in ("aioiceberg", "pyiceberg") and len(r) == 12)
    assert load == [("aioiceberg", "2", "-"), ("pyiceberg", "2", "1"), ("pyiceberg", "2", "2")]
    measures = [r[0] for r in rows]
    assert "sequential p50 s (async for)" in measures
    assert "sequential p50 s (blocking)" in measures
    assert any(m.startswith("QPS at N = 2 (PyIceberg's best: ") for m in measures)
    assert any(m.startswith("warm id= query on cached manifests") for m in measures)
    expected = "store local" if store == "local" else "store nginx"
    assert any(line.startswith(expected) for line in out.splitlines())


def test_service_benchmark_delegates_plan_only() -> None:
    """``service.py --plan-only`` is the same measurement (issue 33 names service.py)."""
    out = run_tiny("service.py", "--plan-only", "--store", "local", "--phases", "sequential")
    assert "plans only" in out
    assert any(line.startswith("| aioiceberg-sync |") for line in out.splitlines())
