"""Manifest decode throughput: the Avro decoders side by side on manifests as Java and PyIceberg write them.

Run: ``.venv/bin/python benchmarks/manifest_decode.py`` (``--tiny``: a few entries, one round, for the suite).

The first table decodes the same manifests (10 columns of stats, partitioned by ``day(ts)`` and
``bucket(16, id)``, deflate) with every candidate: entries per CPU-second on one thread (CPU time
of the whole process: steady on a shared machine, and it counts a library's own threads) with
the ratio to ``polars.read_avro``, the decoder the columnar path uses; two threads each decoding
their own copies at once (wall time: a speedup needs two idle cores); whether a thread of Python
runs beside the decoder (it releases the GIL); and whether the values come out as fastavro reads
them. Java-shaped manifests have ~64 KB blocks (Avro's default sync interval); PyIceberg 0.12
writes one block per entry. Readers that take only paths read a tmpfs copy. Candidates that are
not installed print as such; none of them is a dependency of the project.

The second table decodes many manifests in one call; the third is our own decoders. The
last one re-blocks manifests (``aioiceberg.spec.manifest.avro_blocks.reblock``: every record in
one uncompressed block) before ``polars.read_avro``, against polars on the original bytes, over
Java- and PyIceberg-shaped manifests and a sweep of entries per block.
``planner`` prices DataFusion as a planner would run it (bytes through a tmpfs file, the table
cast to polars' layout) against our polars path, per 500-entry manifest (benchmarks/README.md,
Round 14). ``native`` puts the compiled decoder (``native/``, built at install where cargo
exists) beside the polars path it replaces, bytes in, the same Arrow table out, one thread and
two at once (benchmarks/README.md, Round 15).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import io
import json
import os
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import fastavro.write
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aioiceberg.spec.manifest import (  # noqa: E402
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest,
    write_manifest,
)
from aioiceberg.spec.manifest.avro_blocks import reblock  # noqa: E402
from aioiceberg.spec.manifest.columnar import _to_arrow, avro_layout, open_columnar  # noqa: E402
from aioiceberg.spec.manifest.native_decode import decode_native, native_available  # noqa: E402
from aioiceberg.testing.synthetic import bench_schema, bench_spec  # noqa: E402
from aioiceberg.testing.synthetic import data_file as bench_data_file  # noqa: E402
from benchmarks.plan_writers import pyiceberg_entry  # noqa: E402

N_ENTRIES = 1000
JAVA_SYNC_INTERVAL = 64_000  # Avro's DataFileWriter default, which Iceberg's Java writer keeps
STATS = (
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)
# What a planner needs besides the stats maps (for projections that skip them).
NO_STATS = ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes")


# -- manifests as Java and PyIceberg write them -----------------------------------------------


def _entries(n_entries: int) -> list[ManifestEntry]:
    """The synthetic table's manifest entries (``aioiceberg.testing.synthetic``), all ADDED."""
    schema = bench_schema()
    return [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            bench_data_file(schema, "s3://bucket/wh/db/t", 7, i, n_entries),
        )
        for i in range(n_entries)
    ]


def our_manifest(n_entries: int, format_version: int = 2) -> bytes:
    """The synthetic table's manifest as our writer writes it (fastavro's 16 KB blocks)."""
    entries = _entries(n_entries)
    return write_manifest(
        entries, bench_spec(), bench_schema(), format_version, 1, manifest_path="mem://m.avro"
    )[0]


def java_manifest(n_entries: int, format_version: int) -> bytes:
    """The synthetic table's manifest re-blocked at Java's sync interval: our writer keeps
    fastavro's 16 KB blocks."""
    data = our_manifest(n_entries, format_version)
    reader = fastavro.reader(io.BytesIO(data))
    records = list(reader)
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(
        out,
        fastavro.parse_schema(json.loads(reader.metadata["avro.schema"])),
        records,
        codec="deflate",
        metadata=metadata,
        sync_interval=JAVA_SYNC_INTERVAL,
        validator=False,
    )
    return out.getvalue()


def pyiceberg_manifest(n_entries: int) -> bytes:
    """The same entries written by PyIceberg's own manifest writer (v2, deflate)."""
    # pyiceberg: the benchmark's comparison client, not installed everywhere
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import write_manifest as py_write_manifest
    from pyiceberg.partitioning import PartitionField as PyField
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import BucketTransform, DayTransform
    from pyiceberg.types import DoubleType, StringType, TimestamptzType
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyNested

    ours = bench_schema()
    kinds: list[Any] = [PyLong(), TimestamptzType(), PyLong(), PyLong(), DoubleType(), DoubleType()]
    kinds += [StringType(), StringType(), PyLong(), PyLong()]
    schema = PySchema(
        *[
            PyNested(f.field_id, f.name, t, required=f.required)
            for f, t in zip(ours.fields, kinds, strict=True)
        ]
    )
    spec = PySpec(
        PyField(2, 1000, DayTransform(), "ts_day"), PyField(1, 1001, BucketTransform(16), "id_bucket")
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "m.avro")
        with py_write_manifest(2, spec, schema, PyArrowFileIO().new_output(path), 1, "deflate") as writer:
            for e in _entries(n_entries):
                writer.add(pyiceberg_entry(ManifestEntry(e.status, 1, None, None, e.data_file), 2))
        return Path(path).read_bytes()


@dataclass(frozen=True)
class Manifest:
    label: str
    data: bytes
    path: str  # a tmpfs copy, for readers that take only paths
    entries: int
    expected: list[dict[str, Any]]  # fastavro's records: the reference values


# -- candidates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    name: str
    returns: str
    decode: Callable[[Manifest], Any]
    rows: Callable[[Any], list[dict[str, Any]]] | None  # output as fastavro-like records, to compare
    full: bool = True  # every field; False: a projection (only the fields it has are compared)


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _arrow_rows(table: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _polars_rows(frame: Any) -> list[dict[str, Any]]:
    return _arrow_rows(frame.to_arrow())


def _no_stats_schema(data: bytes) -> dict[str, Any]:
    """The manifest's writer schema without the stats maps (fastavro then skips them)."""
    schema: dict[str, Any] = json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])
    for field in schema["fields"]:
        if field["name"] == "data_file":
            inner = field["type"]
            inner["fields"] = [f for f in inner["fields"] if f["name"] not in STATS]
    return schema


def _zlib_floor(m: Manifest) -> int:
    """Inflate every block and nothing else: the decompression share of any decoder."""
    layout = avro_layout(m.data)
    assert layout is not None
    total = 0
    for start, _end in layout.blocks:
        pos = start
        for _ in range(2):  # the block's count and size: zig-zag varints
            shift = value = 0
            while True:
                b = m.data[pos]
                pos += 1
                value |= (b & 0x7F) << shift
                if not b & 0x80:
                    break
                shift += 7
        size = value >> 1
        total += len(zlib.decompress(m.data[pos : pos + size], -15))
    return total


def candidates() -> list[Candidate | tuple[str, str]]:
    """Every decoder to try; (name, why not) for those that cannot be tried here."""
    out: list[Candidate | tuple[str, str]] = []
    pl = _optional("polars")
    if pl is not None:
        out += [
            Candidate(
                "polars.read_avro",
                "polars (Arrow)",
                lambda m: pl.read_avro(io.BytesIO(m.data)),
                _polars_rows,
            ),
            Candidate(
                "polars.read_avro -> to_arrow (columnar path)",
                "Arrow",
                lambda m: pl.read_avro(io.BytesIO(m.data)).to_arrow(),
                _arrow_rows,
            ),
            Candidate(
                "re-block, then polars.read_avro -> to_arrow",
                "Arrow",
                lambda m: pl.read_avro(io.BytesIO(reblock(m.data) or m.data)).to_arrow(),
                _arrow_rows,
            ),
            Candidate(
                "polars.read_avro columns=[status, data_file]",
                "polars (Arrow)",
                lambda m: pl.read_avro(io.BytesIO(m.data), columns=["status", "data_file"]),
                _polars_rows,
                full=False,
            ),
            Candidate(
                "polars.read_avro columns=[status..file_seq] (no data_file)",
                "polars (Arrow)",
                lambda m: pl.read_avro(
                    io.BytesIO(m.data),
                    columns=["status", "snapshot_id", "sequence_number", "file_sequence_number"],
                ),
                _polars_rows,
                full=False,
            ),
        ]
    pa_ = _optional("polars_avro")
    if pa_ is None:
        out.append(("polars-avro (arrow-avro)", "not installed"))
    else:
        out.append(
            Candidate(
                "polars_avro.read_avro (arrow-avro)",
                "polars (Arrow)",
                lambda m: pa_.read_avro(io.BytesIO(m.data)),
                _polars_rows,
            )
        )
    df = _optional("datafusion")
    if df is None:
        out.append(("datafusion", "not installed"))
    else:
        local = threading.local()

        def ctx() -> Any:
            if not hasattr(local, "ctx"):
                local.ctx = df.SessionContext(df.SessionConfig().with_target_partitions(1))
            return local.ctx

        def df_projected(m: Manifest) -> Any:
            c = df.col("data_file")
            frame = (
                ctx()
                .read_avro(m.path)
                .select(
                    df.col("status"),
                    *(c[name].alias(name) for name in ("file_path", "partition", "record_count")),
                )
            )
            return frame.to_arrow_table()

        def df_projected_rows(table: Any) -> list[dict[str, Any]]:
            return [{"status": r.pop("status"), "data_file": r} for r in _arrow_rows(table)]

        def df_from_bytes(m: Manifest) -> Any:
            """DataFusion reads only paths: the bytes go through a tmpfs file first."""
            with tempfile.NamedTemporaryFile(dir=Path(m.path).parent, suffix=".avro") as f:
                f.write(m.data)
                f.flush()
                return ctx().read_avro(f.name).to_arrow_table()

        out += [
            Candidate(
                "datafusion read_avro (file)",
                "Arrow",
                lambda m: ctx().read_avro(m.path).to_arrow_table(),
                _arrow_rows,
            ),
            Candidate("datafusion read_avro (bytes via a tmpfs file)", "Arrow", df_from_bytes, _arrow_rows),
            Candidate(
                "datafusion read_avro select status, file_path, partition, record_count",
                "Arrow",
                df_projected,
                df_projected_rows,
                full=False,
            ),
        ]
    out += _duckdb_candidates()
    rugo = _optional("rugo.avro")
    if rugo is None:
        out.append(("rugo", "not installed"))
    else:

        def rugo_read(m: Manifest, columns: list[str] | None) -> Any:
            pyarrow = importlib.import_module("pyarrow")
            with rugo.read_avro(m.data, columns=columns, max_threads=1) as reader:
                return pyarrow.concat_tables([morsel.to_arrow() for morsel in reader])

        def rugo_rows(table: Any) -> list[dict[str, Any]]:
            out_rows = []
            for r in _arrow_rows(table):
                row: dict[str, Any] = {}
                for key, value in r.items():  # dotted names: fields inside records
                    *parents, leaf = key.split(".")
                    at = row
                    for p in parents:
                        at = at.setdefault(p, {})
                    at[leaf] = value
                out_rows.append(row)
            return out_rows

        dotted = ["status", *(f"data_file.{f}" for f in NO_STATS if f != "partition")]
        dotted += ["data_file.partition.ts_day", "data_file.partition.id_bucket"]
        out += [
            Candidate(
                "rugo.avro.read_avro", "Arrow (records as JSON text)", lambda m: rugo_read(m, None), rugo_rows
            ),
            Candidate(
                "rugo.avro.read_avro dotted columns, no stats",
                "Arrow",
                lambda m: rugo_read(m, dotted),
                rugo_rows,
                full=False,
            ),
        ]
    jet = _optional("jetliner")
    if jet is None:
        out.append(("jetliner", "not installed"))
    else:
        out.append(
            Candidate("jetliner.read_avro (file)", "polars", lambda m: jet.read_avro(m.path), _polars_rows)
        )
    no_stats: dict[bytes, Any] = {}

    def fastavro_no_stats(m: Manifest) -> list[Any]:
        schema = no_stats.get(m.data)
        if schema is None:
            schema = no_stats[m.data] = fastavro.parse_schema(_no_stats_schema(m.data))
        return list(fastavro.reader(io.BytesIO(m.data), reader_schema=schema))

    def fastavro_blocks(m: Manifest) -> list[Any]:
        return [r for block in fastavro.block_reader(io.BytesIO(m.data)) for r in block]

    out += [
        Candidate("fastavro.reader", "dicts", lambda m: list(fastavro.reader(io.BytesIO(m.data))), list),
        Candidate(
            "fastavro.reader return_record_name=True",
            "dicts",
            lambda m: list(fastavro.reader(io.BytesIO(m.data), return_record_name=True)),
            list,
        ),
        Candidate(
            "fastavro.reader reader_schema without stats", "dicts", fastavro_no_stats, list, full=False
        ),
        Candidate("fastavro.block_reader", "dicts", fastavro_blocks, list),
        Candidate("zlib inflate only (floor)", "bytes", _zlib_floor, None),
    ]
    if native_available():
        out.append(
            Candidate(
                "aioiceberg native decoder (native/)", "Arrow", lambda m: decode_native(m.data), _arrow_rows
            )
        )
    return out


def _duckdb_candidates() -> list[Candidate | tuple[str, str]]:
    duckdb = _optional("duckdb")
    ext = _optional("duckdb_extension_avro")
    if duckdb is None or ext is None:
        return [("duckdb avro extension", "duckdb or duckdb-extension-avro not installed")]
    files = sorted(Path(ext.__file__).parent.glob("extensions/*/avro.duckdb_extension"))
    if not files:
        return [("duckdb avro extension", "no extension file in duckdb-extension-avro")]
    db = duckdb.connect(config={"autoinstall_known_extensions": "false", "threads": "1"})
    db.execute(f"LOAD '{files[-1]}'")
    local = threading.local()

    def cursor() -> Any:
        if not hasattr(local, "cur"):
            local.cur = db.cursor()
        return local.cur

    def rows(table: Any) -> list[dict[str, Any]]:
        out = _arrow_rows(table)
        for r in out:  # Arrow maps come back as (key, value) pairs
            d = r.get("data_file") or {}
            for name in STATS:
                if d.get(name) is not None:
                    d[name] = [{"key": k, "value": v} for k, v in d[name]]
        return out

    def projected(m: Manifest) -> Any:
        sql = "SELECT status, {'file_path': data_file.file_path, 'partition': data_file.partition, "
        sql += "'record_count': data_file.record_count} AS data_file FROM read_avro(?)"
        return cursor().execute(sql, [m.path]).to_arrow_table()

    return [
        Candidate(
            "duckdb read_avro (file)",
            "Arrow",
            lambda m: cursor().execute("SELECT * FROM read_avro(?)", [m.path]).to_arrow_table(),
            rows,
        ),
        Candidate(
            "duckdb read_avro select file_path, partition, record_count", "Arrow", projected, rows, full=False
        ),
    ]


# -- measuring ---------------------------------------------------------------------------------


def _same(expected: Any, got: Any, full: bool, where: str = "") -> str | None:
    """Where ``got`` differs from fastavro's value (None: the same); a projection is compared on
    the fields it kept."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return where or "row"
        if full and set(got) != set(expected):
            return f"{where}: fields {sorted(set(expected) ^ set(got))}"
        for key, value in got.items():
            if key not in expected:
                return f"{where}.{key}: not in the file"
            problem = _same(expected[key], value, full, f"{where}.{key}" if where else key)
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return where
        for e, g in zip(expected, got, strict=True):
            problem = _same(e, g, full, where)
            if problem:
                return problem
        return None
    if isinstance(expected, dt.date) and isinstance(got, str):
        return where  # a date as text
    return None if expected == got and type(expected) is type(got) else where


def check(candidate: Candidate, m: Manifest) -> str:
    try:
        out = candidate.decode(m)
    except Exception as exc:  # a candidate that cannot read the file says why in the table
        return "fails: " + " ".join(str(exc).replace(m.path, "<file>").split())[:70]
    if candidate.rows is None:
        return "n/a"
    got = candidate.rows(out)
    if len(got) != len(m.expected):
        return f"{len(got)} rows of {len(m.expected)}"
    for e, g in zip(m.expected, got, strict=True):
        problem = _same(e, g, candidate.full)
        if problem:
            return f"differs at {problem}"
    return "intact" if candidate.full else "intact (projection)"


@dataclass(frozen=True)
class Plan:
    rounds: int
    entries_per_round: int  # each round decodes the manifest this many entries' worth of times


@dataclass(frozen=True)
class Rate:
    wall: float  # entries/s of wall time
    cpu: float  # entries/s of the process's CPU time (every thread's): steady on a shared machine


def _timed(run: Callable[[], None], entries: int, rounds: int) -> Rate:
    wall = cpu = float("inf")
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        run()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return Rate(entries / wall, entries / max(cpu, 1e-9))


def one_thread(fn: Callable[[Manifest], Any], m: Manifest, plan: Plan) -> Rate:
    reps = max(1, plan.entries_per_round // m.entries)

    def run() -> None:
        for _ in range(reps):
            fn(m)

    return _timed(run, reps * m.entries, plan.rounds)


def two_threads(fn: Callable[[Manifest], Any], m: Manifest, plan: Plan) -> Rate:
    """Two threads decoding their own copies at once: twice one thread's wall rate if the GIL is
    released and both cores are free."""
    reps = max(1, plan.entries_per_round // m.entries)

    def run() -> None:
        def work() -> None:
            for _ in range(reps):
                fn(m)

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return _timed(run, 2 * reps * m.entries, plan.rounds)


def _spin(started: threading.Event, stop: threading.Event, out: list[float]) -> None:
    """Count loop turns until ``stop``: bytecode that runs only while this thread has the GIL."""
    turns = 0
    start = time.thread_time()
    started.set()
    while not stop.is_set():
        turns += 1
    out += [turns, time.thread_time() - start]


def gil_free(fn: Callable[[Manifest], Any], m: Manifest, seconds: float) -> float:
    """Python work another thread got done while the decoder ran, per CPU-second of decoding.

    A spinning thread counts loop turns; its turns, at the rate it turns alone, are the seconds
    it held the GIL. A tiny switch interval hands the GIL over within microseconds of a
    request, so the spinner gets it only where the decoder lets it go: ~0 for a decoder that
    holds it through a native call, ~1 (cores allowing) for one that releases it; fastavro,
    which builds Python objects, trades it at every bytecode boundary but never runs beside
    the spinner. ``m`` is large: between two calls the spinner may keep the GIL for an OS time
    slice on a loaded machine, which must stay small against one call. Unlike a two-thread
    wall time, this needs no idle core."""
    started, stop = threading.Event(), threading.Event()
    alone: list[float] = []
    threading.Timer(max(seconds / 5, 0.05), stop.set).start()
    _spin(started, stop, alone)
    turn_rate = max(alone[0], 1) / max(alone[1], 1e-6)
    started, stop = threading.Event(), threading.Event()
    spun: list[float] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        spinner = threading.Thread(target=_spin, args=(started, stop, spun))
        spinner.start()
        started.wait()
        cpu, until = time.process_time(), time.perf_counter() + seconds
        while time.perf_counter() < until:
            fn(m)
        stop.set()
        spinner.join()
        cpu = time.process_time() - cpu
    finally:
        sys.setswitchinterval(interval)
    return spun[0] / turn_rate / max(cpu - spun[1], 1e-9)


def enlarged(m: Manifest, times: int) -> Manifest:
    """``m``'s entries ``times`` over in one Java-shaped manifest (beside ``m``'s file)."""
    reader = fastavro.reader(io.BytesIO(m.data))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    records = m.expected * times
    fastavro.writer(out, schema, records, "deflate", JAVA_SYNC_INTERVAL, metadata, validator=False)
    path = Path(m.path).with_name("enlarged.avro")
    path.write_bytes(out.getvalue())
    return Manifest(f"{m.label} x {times}", out.getvalue(), str(path), len(records), records)


def manifests(tiny: bool, stack: ExitStack) -> list[Manifest]:
    sizes = (20, 50, 100) if tiny else (100, 250, 1000)
    mid = sizes[1]
    shm = Path("/dev/shm")
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None)))
    made: list[tuple[str, bytes, int]] = [(f"v2 Java {n}", java_manifest(n, 2), n) for n in sizes]
    made.append((f"v1 Java {mid}", java_manifest(mid, 1), mid))
    try:
        made.append((f"v2 PyIceberg {mid}", pyiceberg_manifest(mid), mid))
    except ImportError:
        pass
    out = []
    for i, (label, data, n) in enumerate(made):
        path = folder / f"m{i}.avro"
        path.write_bytes(data)
        expected: list[Any] = list(fastavro.reader(io.BytesIO(data)))
        out.append(Manifest(label, data, str(path), n, expected))
    return out


def _k(rate: float) -> str:
    return f"{rate / 1000:,.0f}k" if rate >= 10_000 else f"{rate / 1000:.1f}k"


def matrix(tiny: bool) -> None:
    plan = Plan(1, 1) if tiny else Plan(5, 5000)
    with ExitStack() as stack:
        ms = manifests(tiny, stack)
        ref = ms[1]  # the 250-entry v2 Java manifest: the threads column and the checks
        big = enlarged(ref, 2 if tiny else 80)
        checked = [ref, *ms[3:]]
        for m in ms:
            blocks = avro_layout(m.data)
            print(f"{m.label}: {len(m.data):,} bytes, {len(blocks.blocks) if blocks else '?'} blocks")
        print()
        head = ["decoder", "returns", *(m.label for m in ms), f"2 threads, {ref.label}", "GIL free", "values"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        polars_rates: dict[str, Rate] = {}
        for c in candidates():
            if isinstance(c, tuple):
                name, why = c
                print("| " + " | ".join([name, "-", *("-" for _ in ms), "-", "-", why]) + " |")
                continue
            verdict = {m.label: check(c, m) for m in checked}
            cells = []
            rates: dict[str, Rate] = {}
            for m in ms:
                if verdict.get(m.label, "").startswith("fails"):
                    cells.append("fails")
                    continue
                try:
                    rate = one_thread(c.decode, m, plan)
                except Exception:  # read by none of the checks above: a failure shows as one
                    cells.append("fails")
                    continue
                rates[m.label] = rate
                base = polars_rates.get(m.label)
                cells.append(f"{_k(rate.cpu)} ({rate.cpu / base.cpu:.2f}x)" if base else _k(rate.cpu))
            if c.name == "polars.read_avro":
                polars_rates = rates
            if ref.label in rates:
                both, one = two_threads(c.decode, ref, plan), rates[ref.label]
                parallel = both.wall / both.cpu  # CPU-seconds per wall second
                cells.append(
                    f"{_k(both.wall)} ({both.wall / one.wall:.2f}x one's wall, {parallel:.2f} cores)"
                )
                cells.append(f"{gil_free(c.decode, big, 0.02 if tiny else 0.5):.2f}")
            else:
                cells += ["-", "-"]
            by_verdict: dict[str, list[str]] = {}
            for label, said in verdict.items():
                by_verdict.setdefault(said, []).append(label)
            values = "; ".join(f"{said} ({', '.join(labels)})" for said, labels in by_verdict.items())
            print("| " + " | ".join([c.name, c.returns, *cells, values]) + " |")
        print(
            "\nOne thread: entries per CPU-second of the process (all its threads), (Nx): ratio to"
            " polars.read_avro on the same manifest. Two threads: entries per wall second, its ratio to"
            " one thread's wall rate, and CPU-seconds used per wall second. GIL free: seconds of Python"
            f" a spinning thread ran per CPU-second of decoding {big.label} (~0: the decoder holds the GIL)."
        )
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"Load average at the end: {load} ({os.cpu_count()} cores).")


def rate(fn: Callable[[], object], rounds: int = 5) -> float:
    """``N_ENTRIES`` per CPU-second of the process (steadier than wall time on a shared machine)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return N_ENTRIES / max(best, 1e-9)


def _pyiceberg_rate(data: bytes, rounds: int) -> float:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestContent, ManifestFile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.avro"
        path.write_bytes(data)
        mf = ManifestFile.from_args(
            manifest_path=str(path),
            manifest_length=len(data),
            partition_spec_id=0,
            content=ManifestContent.DATA,
            sequence_number=1,
            min_sequence_number=1,
            added_snapshot_id=1,
        )
        file_io = PyArrowFileIO()
        return rate(lambda: mf.fetch_manifest_entry(file_io, discard_deleted=False), rounds)


def batched(tiny: bool) -> None:
    """Many manifests in one call: DataFusion lists a folder and decodes its files on
    ``target_partitions`` threads of its own; polars-avro takes a list of buffers."""
    pl, pa_, df = _optional("polars"), _optional("polars_avro"), _optional("datafusion")
    count, n = (4, 20) if tiny else (80, 250)
    data = java_manifest(n, 2)
    plan = Plan(1 if tiny else 5, 1)
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        for i in range(count):
            (Path(tmp) / f"m{i}.avro").write_bytes(data)
        runs: dict[str, Callable[[], Any]] = {}
        if pl is not None:
            runs["polars.read_avro, one call per manifest"] = lambda: [
                pl.read_avro(io.BytesIO(data)).to_arrow() for _ in range(count)
            ]
        if pa_ is not None:
            runs["polars_avro.read_avro, a list of buffers"] = lambda: pa_.read_avro(
                [io.BytesIO(data) for _ in range(count)]
            )
        for parts in (1, 2) if df is not None else ():
            ctx = df.SessionContext(df.SessionConfig().with_target_partitions(parts))

            def folder(ctx: Any = ctx, tmp: str = tmp) -> Any:
                return ctx.read_avro(tmp).to_arrow_table()

            runs[f"datafusion read_avro(folder), target_partitions={parts}"] = folder
        print(f"\nMany manifests in one call: {count} x v2 Java {n}")
        print("| decoder | entries/CPU-s | entries/wall-s | cores used |")
        print("|---|---|---|---|")
        for name, fn in runs.items():

            def run(fn: Callable[[], Any] = fn) -> None:
                fn()

            r = _timed(run, count * n, plan.rounds)
            print(f"| {name} | {_k(r.cpu)} | {_k(r.wall)} | {r.wall / r.cpu:.2f} |")


def ours(tiny: bool) -> None:
    rounds = 1 if tiny else 5
    data = java_manifest(N_ENTRIES, 2) if not tiny else java_manifest(N_ENTRIES // 10, 2)
    n = len(list(fastavro.reader(io.BytesIO(data))))
    scale = N_ENTRIES / n  # rate() counts N_ENTRIES per call
    print(f"\nOur decoders, v2 Java {n}: {len(data):,} bytes")
    results: dict[str, Callable[[], object]] = {
        "fastavro dicts only": lambda: list(fastavro.reader(io.BytesIO(data))),
        "read_manifest (full stats)": lambda: read_manifest(data),
        "read_manifest (columns_needed={3,4})": lambda: read_manifest(data, columns_needed={3, 4}),
        "read_manifest (columns_needed=set())": lambda: read_manifest(data, columns_needed=set()),
        "open_columnar (polars + ColumnarManifest)": lambda: open_columnar(data),
    }
    print("| decoder | entries/CPU-s |")
    print("|---|---|")
    for name, fn in results.items():
        print(f"| {name} | {rate(fn, rounds) / scale:,.0f} |")
    try:
        print(f"| pyiceberg fetch_manifest_entry (baseline) | {_pyiceberg_rate(data, rounds) / scale:,.0f} |")
    except ImportError:
        pass


def blocked(data: bytes, per_block: int) -> bytes:
    """``data``'s records re-written (deflate) with ``per_block`` records in each block."""
    reader = fastavro.reader(io.BytesIO(data))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    schema = fastavro.parse_schema(json.loads(reader.metadata["avro.schema"]))
    out = io.BytesIO()
    writer = fastavro.write.Writer(out, schema, "deflate", 1 << 30, metadata, validator=False)
    for i, record in enumerate(reader, 1):
        writer.write(record)
        if i % per_block == 0:
            writer.flush()
    writer.flush()
    return out.getvalue()


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def reblocking(tiny: bool) -> None:
    """polars on the original bytes against re-block + polars (both steps timed), per manifest
    shape: the medians of rounds that alternate the two, so load changes hit both alike."""
    pl = _optional("polars")
    if pl is None:
        print("\nRe-blocking: polars not installed")
        return
    sizes = (20, 50, 100) if tiny else (100, 250, 1000)
    mid, sweep_n = sizes[1], sizes[2]
    shapes: list[tuple[str, bytes]] = [(f"v2 Java {n}", java_manifest(n, 2)) for n in sizes]
    try:
        shapes.append((f"v2 PyIceberg {mid}", pyiceberg_manifest(mid)))
    except ImportError:
        pass
    if not tiny:
        shapes.append(("v2 Java 10000", java_manifest(10_000, 2)))
    base = java_manifest(sweep_n, 2)
    for k in (1, 2, 5, 10) if tiny else (1, 2, 5, 10, 20, 50, 100, 250, 1000):
        shapes.append((f"v2 {sweep_n}, {k} per block", blocked(base, k)))
    rounds, budget = (1, 1) if tiny else (9, 4000)

    def original(data: bytes) -> Any:
        return pl.read_avro(io.BytesIO(data)).to_arrow()

    def reblocked(data: bytes) -> Any:
        return pl.read_avro(io.BytesIO(reblock(data) or data)).to_arrow()

    print("\nRe-blocking before polars.read_avro -> to_arrow (entries per CPU-second, medians)")
    print(
        "| manifest | bytes | blocks | entries per block | polars | re-block + polars | ratio |"
        " re-block alone (share) | same table |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, data in shapes:
        layout = avro_layout(data)
        assert layout is not None
        n, blocks = layout.rows, len(layout.blocks)
        joined = reblock(data)
        same = joined is not None and original(joined).equals(original(data))
        reps = max(1, budget // n)
        times: dict[str, list[float]] = {"orig": [], "new": [], "alone": []}
        for _ in range(rounds):
            for key, fn in (("orig", original), ("new", reblocked), ("alone", reblock)):
                start = time.process_time()
                for _ in range(reps):
                    fn(data)
                times[key].append((time.process_time() - start) / reps)
        orig, new, alone = (_median(times[k]) for k in ("orig", "new", "alone"))
        r_orig, r_new = n / max(orig, 1e-9), n / max(new, 1e-9)
        cells = [label, f"{len(data):,}", str(blocks), f"{n / max(blocks, 1):.0f}", _k(r_orig), _k(r_new)]
        cells += [f"{r_new / r_orig:.2f}x", f"{alone * 1e3:.2f} ms ({alone / max(new, 1e-9):.0%})"]
        cells.append("yes" if same else "NO")
        print("| " + " | ".join(cells) + " |")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Load average at the end: {load} ({os.cpu_count()} cores).")


def _large(t: Any) -> Any:
    """The Arrow type polars gives for ``t``: large strings, binaries and lists."""
    if pa.types.is_string(t):
        return pa.large_string()
    if pa.types.is_binary(t):
        return pa.large_binary()
    if pa.types.is_list(t):
        return pa.large_list(_large(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _large(f.type)) for f in t])
    return t


def _joined(datas: list[bytes]) -> bytes:
    """The manifests' blocks under the first one's header (they share it), as the planner
    joins small manifests before one decode."""
    layouts = [avro_layout(d) for d in datas]
    first = layouts[0]
    assert first is not None
    parts = [first.header, first.sync]
    for data, layout in zip(datas, layouts, strict=True):
        assert layout is not None
        for start, end in layout.blocks:
            parts += (data[start:end], first.sync)
    return b"".join(parts)


def planner(tiny: bool) -> None:
    """What a planner pays per manifest, bytes in, the columnar layout out: our polars path
    (re-blocked, ``read_avro``, ``to_arrow``) against DataFusion as a planner would have to run
    it (the bytes written to a tmpfs file, ``read_avro`` of the path, the table cast to polars'
    layout, the file removed), one manifest per call and 8 joined per call."""
    pl, df = _optional("polars"), _optional("datafusion")
    if pl is None or df is None:
        print("\nPlanner's decode: needs polars and datafusion")
        return
    n, count, rounds = (50, 8, 1) if tiny else (500, 40, 5)
    shapes = {f"Java {n} (64 KB blocks)": java_manifest(n, 2)}
    try:
        shapes[f"PyIceberg {n} (1 entry a block)"] = pyiceberg_manifest(n)
    except ImportError:
        pass
    local = threading.local()
    shm = Path("/dev/shm")
    tmp_dir = str(shm) if shm.is_dir() else None

    def ours(data: bytes) -> Any:
        return pl.read_avro(io.BytesIO(reblock(data) or data)).to_arrow()

    def theirs(data: bytes) -> Any:
        ctx = getattr(local, "ctx", None)
        if ctx is None:
            ctx = local.ctx = df.SessionContext(df.SessionConfig().with_target_partitions(1))
        fd, name = tempfile.mkstemp(dir=tmp_dir, suffix=".avro")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            table = ctx.read_avro(name).to_arrow_table()
        finally:
            os.unlink(name)
        return table.cast(pa.schema([pa.field(f.name, _large(f.type)) for f in table.schema]))

    def per_call(fn: Callable[[bytes], Any], calls: list[bytes], threads: int) -> tuple[float, float]:
        """(CPU ms, wall ms) per manifest, medians of ``rounds``."""
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(rounds):
            w, c = time.perf_counter(), time.process_time()
            if threads == 1:
                for data in calls:
                    fn(data)
            else:
                halves = [calls[: len(calls) // 2], calls[len(calls) // 2 :]]
                workers = [threading.Thread(target=lambda h=h: [fn(d) for d in h]) for h in halves]
                for t in workers:
                    t.start()
                for t in workers:
                    t.join()
            cpu.append((time.process_time() - c) * 1000 / count)
            wall.append((time.perf_counter() - w) * 1000 / count)
        return _median(cpu), _median(wall)

    print(
        f"\nPlanner's decode, bytes to polars' Arrow layout, {count} manifests (CPU ms / wall ms a manifest)"
    )
    print("| manifests | call | threads | polars | DataFusion | polars / DataFusion (CPU) |")
    print("|---|---|---|---|---|---|")
    for label, data in shapes.items():
        if not theirs(data).equals(ours(data)):
            print(f"| {label} | - | - | - | differs | - |")
            continue
        runs = [("one manifest", [data] * count, 1), ("one manifest", [data] * count, 2)]
        runs.append(("8 joined", [_joined([data] * 8)] * (count // 8), 1))
        for call, calls, threads in runs:
            pc_, pw = per_call(ours, calls, threads)
            dc, dw = per_call(theirs, calls, threads)
            cells = [label, call, str(threads), f"{pc_:.2f} / {pw:.2f}", f"{dc:.2f} / {dw:.2f}"]
            print("| " + " | ".join(cells) + f" | {pc_ / dc:.2f}x |")
    print(f"Load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}.")


def native(tiny: bool) -> None:
    """The compiled decoder against the polars path (re-block, ``read_avro``, ``to_arrow``): CPU
    ms per manifest, one thread, and wall ms per manifest with two threads decoding at once
    (the parse runs without the GIL: on two idle cores two threads take about half the wall
    time); "GIL free" is :func:`gil_free` on the manifest (Python another thread ran per
    CPU-second of decoding: needs no idle core)."""
    if not native_available():
        print("\nNative decoder: not built (no cargo at install)")
        return
    n, big, rounds = (50, 400, 3) if tiny else (500, 4000, 7)
    shapes = {f"Java {n} (64 KB blocks)": java_manifest(n, 2)}
    try:
        shapes[f"PyIceberg {n} (1 entry a block)"] = pyiceberg_manifest(n)
    except ImportError:
        pass
    shapes[f"ours {n} (16 KB blocks, synthetic tables)"] = our_manifest(n)
    shapes[f"Java {big} (64 KB blocks)"] = java_manifest(big, 2)

    def polars_path(data: bytes) -> Any:
        return _to_arrow(data, native=False)

    def native_path(data: bytes) -> Any:
        return _to_arrow(data, native=True)

    def per_manifest(fn: Callable[[bytes], Any], data: bytes, threads: int) -> tuple[float, float]:
        """(CPU ms, wall ms) per manifest, medians of ``rounds``; ``calls`` manifests a round."""
        calls = max(2, 4000 // n if len(data) < 1 << 20 else 2) * threads
        cpu: list[float] = []
        wall: list[float] = []
        for _ in range(rounds):
            w, c = time.perf_counter(), time.process_time()
            if threads == 1:
                for _ in range(calls):
                    fn(data)
            else:
                share = calls // threads
                workers = [
                    threading.Thread(target=lambda k=share: [fn(data) for _ in range(k)])
                    for _ in range(threads)
                ]
                for t in workers:
                    t.start()
                for t in workers:
                    t.join()
            cpu.append((time.process_time() - c) * 1000 / calls)
            wall.append((time.perf_counter() - w) * 1000 / calls)
        return _median(cpu), _median(wall)

    print("\nNative decoder against the polars path, bytes to the same Arrow table (ms a manifest)")
    print(
        "| manifest | bytes | same table | polars CPU | native CPU | speedup |"
        " polars 2 threads wall | native 2 threads wall | native 1 -> 2 threads | GIL free polars / native |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, data in shapes.items():
        want, got = polars_path(data), native_path(data)
        same = "yes" if got.equals(want) else "NO"
        p_cpu, _ = per_manifest(polars_path, data, 1)
        n_cpu, n_wall = per_manifest(native_path, data, 1)
        _, p2 = per_manifest(polars_path, data, 2)
        _, n2 = per_manifest(native_path, data, 2)
        cells = [label, f"{len(data):,}", same, f"{p_cpu:.3f}", f"{n_cpu:.3f}", f"{p_cpu / n_cpu:.1f}x"]
        cells += [f"{p2:.3f}", f"{n2:.3f}", f"{n_wall / n2:.2f}x"]
        m = Manifest(label, data, "", 0, [])
        spin = 0.05 if tiny else 0.5
        free = [
            gil_free(lambda m: polars_path(m.data), m, spin),
            gil_free(lambda m: native_path(m.data), m, spin),
        ]
        cells.append(f"{free[0]:.2f} / {free[1]:.2f}")
        print("| " + " | ".join(cells) + " |")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"Load average at the end: {load} ({os.cpu_count()} cores).")


SECTIONS: dict[str, Callable[[bool], None]] = {
    "matrix": matrix,
    "batched": batched,
    "ours": ours,
    "reblock": reblocking,
    "planner": planner,
    "native": native,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tiny", action="store_true", help="a few entries, one round (for the suite)")
    parser.add_argument("--section", choices=sorted(SECTIONS), action="append", help="only these tables")
    args = parser.parse_args()
    for name, run in SECTIONS.items():
        if args.section is None or name in args.section:
            run(args.tiny)


if __name__ == "__main__":
    main()
