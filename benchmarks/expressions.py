"""Row-filter compile and evaluation costs: what planning pays per filter and per file.

Compile: building each evaluator (bind, NOT rewrite, projection, closures) and the Arrow and
JSON forms of a filter. Evaluate: 100k calls of each compiled evaluator over the 1000 data
files (ten columns with full stats) of ``aioiceberg.testing.synthetic``, or their partition
tuples. Each figure is the best of ``--repeat`` short samples (10 compiles, or 10k calls,
scaled), so a busy machine's preemptions drop out.

    .venv/bin/python benchmarks/expressions.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from aioiceberg.expressions import (
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    PartitionEvaluator,
    ResidualEvaluator,
    StrictMetricsEvaluator,
    bind,
    compile_row_filter,
    parse,
)
from aioiceberg.expressions.arrow_filter import to_arrow_expression
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.serde import expression_to_json
from aioiceberg.testing.synthetic import bench_schema, bench_spec, data_file

FILES = 1000
EVALS = 100_000
SCHEMA = bench_schema()
SPEC = bench_spec()
FILTERS = {
    "id_eq": "id = 123456",
    "range": "c0 >= 5000 AND c0 < 5100",
    "in": "c1 IN (-3, 7, 11, 250, 999)",
    "like": "c4 LIKE 'a00000%'",
    "mixed": (
        "(ts >= '2022-01-09T00:00:00+00:00' AND ts < '2022-01-11T00:00:00+00:00' AND c0 > 100)"
        " OR (id = 5 AND c2 < 3.5) OR NOT (c5 = 'zz' OR c1 != 4) OR c3 IS NULL OR c4 NOT IN ('a', 'b')"
    ),
}


def best(repeat: int, fn: Callable[[], Any]) -> float:
    """The shortest of ``repeat`` runs of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


SAMPLE_COMPILES = 10
SAMPLE_ROUNDS = 10  # x FILES calls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--tiny", action="store_true", help="one round: keeps the script from rotting")
    args = p.parse_args()
    if args.tiny:
        args.repeat = 1
    files = [data_file(SCHEMA, "s3://b/t", m, i, FILES // 4) for m in range(4) for i in range(FILES // 4)]
    parts = [f.partition for f in files]
    print(
        "| filter | compile all us | bind_row_filter us | inclusive 100k ms | strict 100k ms |"
        " partition 100k ms | residual 100k ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, text in FILTERS.items():
        expr = parse(text)
        bound = bind(SCHEMA, expr)

        def compile_all(expr: Any = expr, bound: Any = bound) -> None:
            for _ in range(SAMPLE_COMPILES):
                InclusiveMetricsEvaluator(SCHEMA, expr)
                StrictMetricsEvaluator(SCHEMA, expr)
                ManifestEvaluator(SCHEMA, SPEC, expr)
                PartitionEvaluator(SCHEMA, SPEC, expr)
                ResidualEvaluator(SCHEMA, SPEC, expr)
                compile_row_filter(bound)
                to_arrow_expression(bound)
                expression_to_json(bound)

        def bind_rf(expr: Any = expr) -> None:
            for _ in range(SAMPLE_COMPILES):
                bind_row_filter(SCHEMA, expr)

        inc, strict = InclusiveMetricsEvaluator(SCHEMA, expr), StrictMetricsEvaluator(SCHEMA, expr)
        part, res = PartitionEvaluator(SCHEMA, SPEC, expr), ResidualEvaluator(SCHEMA, SPEC, expr)

        def run(fn: Callable[[Any], Any], items: list[Any]) -> Callable[[], None]:
            def go() -> None:
                for _ in range(SAMPLE_ROUNDS):
                    for x in items:
                        fn(x)

            return go

        per_100k = EVALS / (SAMPLE_ROUNDS * FILES) * 1e3
        row = [
            best(args.repeat, compile_all) / SAMPLE_COMPILES * 1e6,
            best(args.repeat, bind_rf) / SAMPLE_COMPILES * 1e6,
            best(args.repeat, run(inc.eval, files)) * per_100k,
            best(args.repeat, run(strict.eval, files)) * per_100k,
            best(args.repeat, run(part.eval, parts)) * per_100k,
            best(args.repeat, run(res.residual_for, parts)) * per_100k,
        ]
        print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in row) + " |")


if __name__ == "__main__":
    main()
