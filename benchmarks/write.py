"""Parquet data-file write throughput: aioiceberg's write_data_files vs PyIceberg, same table, same run.

    python benchmarks/write.py            # 1M rows (63 MB of Arrow data), 7 interleaved rounds
    python benchmarks/write.py --tiny     # seconds-long smoke run

Both sides turn the same in-memory Arrow table into Parquet data files on the local file
system, for the same Iceberg table (schema, field ids, properties), and describe them with
metrics; neither commits. What each side does is printed with the results. The same
writer settings apply to both: zstd at pyarrow's default level, row groups of at most
1,048,576 rows, 1 MiB pages, 2 MiB dictionary pages, 512 MiB target file size.

* aioiceberg: ``write_data_files`` — validate the table against the schema, split it by
  partition, encode each file in worker threads (``--cpu-workers`` at a time), upload it
  with ``LocalFileIO`` (``fsync=False``), and build metrics from the footer plus NaN counts.
* PyIceberg: ``pyiceberg.io.pyarrow._dataframe_to_data_files``, the data-file half of
  ``Table.append`` — on the partitioned layout its own split (``_determine_partitions``,
  one filter per partition) is part of the timed work — writing through
  ``PyArrowFileIO`` on its default thread pool (``min(32, cores + 4)`` threads), with
  statistics from the footer (no NaN counts).

The sides run alternately (the order flips every round) so load from other processes
hits both alike; the table shows the median, fastest and slowest round. Throughput is
in Arrow (in-memory) MB and rows per second; the ratio is of medians. Before timing,
each layout is checked once: the same files per partition, rows, value / null counts
and bounds on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aioiceberg.io import LocalFileIO  # noqa: E402
from aioiceberg.runtime import default_runtime  # noqa: E402
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


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _ours_summary(files: list[Any]) -> Counter[Any]:
    return Counter(
        (
            tuple(f.partition),
            f.record_count,
            tuple(sorted(f.value_counts.items())),
            tuple(sorted(f.null_value_counts.items())),
            tuple(sorted(f.lower_bounds.items())),
            tuple(sorted(f.upper_bounds.items())),
        )
        for f in files
    )


def _theirs_summary(files: list[Any]) -> Counter[Any]:
    return Counter(
        (
            tuple(f.partition[i] for i in range(len(f.partition))),
            f.record_count,
            tuple(sorted(f.value_counts.items())),
            tuple(sorted(f.null_value_counts.items())),
            tuple(sorted(f.lower_bounds.items())),
            tuple(sorted(f.upper_bounds.items())),
        )
        for f in files
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds per side")
    parser.add_argument("--cpu-workers", type=int, default=2, help="aioiceberg's encoding threads")
    parser.add_argument("--io-concurrency", type=int, default=8, help="aioiceberg's concurrent uploads")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args()
    rows, rounds = (20_000, 1) if args.tiny else (args.rows, args.rounds)

    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.partitioning import PartitionField as PyPartitionField
    from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
    from pyiceberg.transforms import DayTransform
    from pyiceberg.utils.concurrent import ExecutorFactory

    table = make_table(rows)
    mb = table.nbytes / 1e6
    work = Path(tempfile.mkdtemp(prefix="aioiceberg-bench-write-"))
    results: list[tuple[str, str, list[float], int]] = []
    try:
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/warehouse"
        )
        catalog.create_namespace("b")
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
            location = py_table.location().removeprefix("file://")
            properties = dict(py_table.properties)

            def ours(
                spec: PartitionSpec = spec,
                schema: Any = schema,
                location: str = location,
                props: Any = properties,
            ) -> Any:
                async def run() -> Any:
                    return await write_data_files(
                        LocalFileIO(fsync=False).bind_runtime(default_runtime()),
                        schema,
                        spec,
                        table,
                        LocationProvider(location, props),
                        props,
                        cpu_workers=args.cpu_workers,
                        io_concurrency=args.io_concurrency,
                    )

                return anyio.run(run)

            def theirs(py_table: Any = py_table) -> Any:
                return list(
                    _dataframe_to_data_files(table_metadata=py_table.metadata, df=table, io=py_table.io)
                )

            # Untimed check that both sides wrote the same thing.
            files_ours, files_theirs = ours(), theirs()
            assert sum(f.record_count for f in files_ours) == rows
            assert _ours_summary(files_ours) == _theirs_summary(files_theirs), f"{label}: outputs differ"
            shutil.rmtree(f"{location}/data", ignore_errors=True)

            times: dict[str, list[float]] = {"aioiceberg": [], "pyiceberg": []}
            for r in range(rounds):
                order = [("aioiceberg", ours), ("pyiceberg", theirs)]
                for writer, fn in order if r % 2 == 0 else order[::-1]:
                    seconds, files = timed(fn)
                    times[writer].append(seconds)
                    assert sum(f.record_count for f in files) == rows
                shutil.rmtree(f"{location}/data", ignore_errors=True)
            results.append((label, "aioiceberg", times["aioiceberg"], len(files_ours)))
            results.append((label, "pyiceberg", times["pyiceberg"], len(files_theirs)))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    py_threads = ExecutorFactory.get_or_create()._max_workers
    print(
        f"{rows:,} rows, {mb:.1f} MB of Arrow data; {rounds} interleaved rounds per side; "
        f"{os.cpu_count()} cores, 1-min load average {load:.1f} at the end"
    )
    print(
        f"aioiceberg: write_data_files, conform + split + zstd Parquet in {args.cpu_workers} encoding "
        f"threads, {args.io_concurrency} concurrent uploads (LocalFileIO, no fsync), "
        "footer metrics + NaN counts"
    )
    print(
        f"pyiceberg:  _dataframe_to_data_files, its partition split (timed) + zstd Parquet on "
        f"{py_threads} pool threads (PyArrowFileIO), footer statistics"
    )
    print("both: same schema and table properties, row groups <= 1,048,576 rows, outputs checked equal")
    head = f"{'median s':>9} {'min s':>7} {'max s':>7} {'MB/s':>7} {'rows/s':>11} {'files':>6}"
    print(f"{'layout':<14} {'writer':<11} {head}")
    for label, writer, times_, files in results:
        med = statistics.median(times_)
        print(
            f"{label:<14} {writer:<11} {med:9.3f} {min(times_):7.3f} {max(times_):7.3f} "
            f"{mb / med:7.1f} {rows / med:11,.0f} {files:6d}"
        )
    for i in range(0, len(results), 2):
        ratio = statistics.median(results[i + 1][2]) / statistics.median(results[i][2])
        print(f"{results[i][0]}: aioiceberg is {ratio:.2f}x PyIceberg's throughput (median vs median)")


if __name__ == "__main__":
    main()
