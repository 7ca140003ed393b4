"""Every program in examples/ runs to the end (exit 0) as a user would run it: this
interpreter, an empty working folder, a clean environment (tests/process_env.py). The
examples check their own results with ``assert``, so a wrong answer fails here too."""

from __future__ import annotations

from pathlib import Path

import pytest
from process_env import run_as_user
from servers.jvm import QUICK_PYSPARK_ENV

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NEEDS = {"spark_pipeline.py": ("pyspark",), "rest_server.py": ("pyiceberg", "duckdb", "aiohttp")}
TIMEOUT_S = 180


def params() -> list[object]:
    return [
        pytest.param(path, id=path.stem, marks=[pytest.mark.slow] if "spark" in path.stem else [])
        for path in sorted(EXAMPLES.glob("*.py"))
    ]


def test_the_examples_are_there() -> None:
    assert {path.name for path in EXAMPLES.glob("*.py")} >= {
        "async_service.py",
        "spark_pipeline.py",
        "rest_server.py",
    }


@pytest.mark.parametrize("example", params())
def test_example_runs(example: Path, tmp_path: Path) -> None:
    for module in NEEDS.get(example.name, ()):
        pytest.importorskip(module)
    source = example.read_text()
    assert source.startswith('"""') and len(source.splitlines()) <= 90, "documented at the top, and short"
    quick = QUICK_PYSPARK_ENV if "pyspark" in NEEDS.get(example.name, ()) else None  # Spark's JVM: C1 only
    run_as_user(example, tmp_path, TIMEOUT_S, example.name, quick)
    assert list(tmp_path.iterdir()) == [], "an example cleans up after itself"
