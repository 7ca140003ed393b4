"""Parquet data-file write throughput: aioiceberg's write_data_files vs PyIceberg, same table, same run.

    python benchmarks/write.py            # 2M rows, best of 3
    python benchmarks/write.py --tiny     # seconds-long smoke run

Both write the same Arrow table to the local file system with the same table (schema,
field ids, properties: zstd, 512 MiB target) and produce data files with metrics; neither
commits. PyIceberg's side is ``pyiceberg.io.pyarrow._dataframe_to_data_files``, the data
file half of ``Table.append``. Throughput is in Arrow (in-memory) MB and rows per second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aioiceberg.io import LocalFileIO  # noqa: E402
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec  # noqa: E402
from aioiceberg.spec.schema_json import schema_from_json  # noqa: E402
from aioiceberg.spec.transforms import parse_transform  # noqa: E402
from aioiceberg.write import LocationProvider, write_data_files  # noqa: E402


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "user": pa.array(rng.integers(0, 50_000, rows, dtype=np.int64)),
            "amount": pa.array(rng.normal(100, 30, rows)),
            "category": pa.array([f"cat-{i}" for i in rng.integers(0, 200, rows)]),
            "ts": pa.array(
                (1_700_000_000_000_000 + rng.integers(0, 86_400_000_000 * 30, rows)).astype("datetime64[us]")
            ),
            "note": pa.array([f"note {i} {i * 7919 % 104729}" for i in range(rows)]),
        }
    )


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu-workers", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args()
    rows, repeats = (20_000, 1) if args.tiny else (args.rows, args.repeats)

    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.partitioning import PartitionField as PyPartitionField
    from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
    from pyiceberg.transforms import DayTransform

    table = make_table(rows)
    mb = table.nbytes / 1e6
    work = Path(tempfile.mkdtemp(prefix="aioiceberg-bench-write-"))
    try:
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/warehouse"
        )
        catalog.create_namespace("b")
        results: list[tuple[str, str, float, int]] = []
        for label, partitioned in (("unpartitioned", False), ("day(ts)", True)):
            name = f"b.t_{int(partitioned)}"
            py_table = catalog.create_table(name, schema=table.schema)
            schema = schema_from_json(json.loads(py_table.schema().model_dump_json(by_alias=True)))
            ts_id = schema.find_field("ts").field_id
            spec = PartitionSpec()
            if partitioned:
                spec = PartitionSpec.of(PartitionField((ts_id,), 1000, parse_transform("day"), "ts_day"))
                with py_table.update_spec() as update:
                    update.add_field("ts", DayTransform(), "ts_day")
                py_table = catalog.load_table(name)
                assert py_table.spec() == PyPartitionSpec(
                    PyPartitionField(ts_id, 1000, DayTransform(), "ts_day"), spec_id=1
                )

            location = py_table.location()

            def ours(spec: PartitionSpec = spec, schema: Any = schema, location: str = location) -> Any:
                async def run() -> Any:
                    return await write_data_files(
                        LocalFileIO(fsync=False),
                        schema,
                        spec,
                        table,
                        LocationProvider(location.removeprefix("file://")),
                        {},
                        cpu_workers=args.cpu_workers,
                    )

                return anyio.run(run)

            def theirs(py_table: Any = py_table) -> Any:
                files = _dataframe_to_data_files(table_metadata=py_table.metadata, df=table, io=py_table.io)
                return list(files)

            t_ours, files_ours = best_of(repeats, ours)
            t_theirs, files_theirs = best_of(repeats, theirs)
            results.append((label, "aioiceberg", t_ours, len(files_ours)))
            results.append((label, "pyiceberg", t_theirs, len(files_theirs)))
            assert sum(f.record_count for f in files_ours) == rows
            assert sum(f.record_count for f in files_theirs) == rows
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{rows:,} rows, {mb:.1f} MB of Arrow data, best of {repeats}, cpu_workers={args.cpu_workers}")
    print(f"{'layout':<14} {'writer':<11} {'seconds':>8} {'MB/s':>8} {'rows/s':>12} {'files':>6}")
    for label, writer, seconds, files in results:
        speed = f"{mb / seconds:8.1f} {rows / seconds:12,.0f}"
        print(f"{label:<14} {writer:<11} {seconds:8.3f} {speed} {files:6d}")
    for i in range(0, len(results), 2):
        ratio = results[i + 1][2] / results[i][2]
        print(f"{results[i][0]}: aioiceberg is {ratio:.2f}x PyIceberg's throughput")


if __name__ == "__main__":
    main()
