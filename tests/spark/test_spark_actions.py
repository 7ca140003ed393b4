"""``aioiceberg.spark.actions`` in one local[2] SparkSession (one JVM start for them all).

- ``rewrite_data_files``: tables of many small files (several partitions, deletes)
  compacted by bin-pack, sort and z-order, one Spark task per file group; rows checked with
  our reader, PyIceberg and DuckDB.
- ``delete_orphan_files``, ``expire_snapshots``, ``rewrite_manifests`` remove exactly what
  the single-process versions remove: each table is built once, its warehouse copied aside
  (mtimes kept); the single-process version runs on it, the copy is put back at the same
  path (metadata names absolute paths), and the Spark version runs on that same table. The
  files each removed and the objects left must be equal.
- ``plan_files`` on executors returns exactly the tasks the single-process planner returns
  (``Table.scan().plan_batches()``), on a multi-manifest table with delete files, with and
  without a filter; and on a small table shaped as the planning benchmark's
  (``aioiceberg.testing.synthetic``) under the benchmark's four filters, against
  ``Table.scan(filter).plan_files()``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from compaction_helpers import SCHEMA, add_small_files, bounds, mean_width, sorted_rows
from maint_helpers import duckdb_ids, ids, pyiceberg_table
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from spark_sessions import local_session

from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import LocationNotAllowedError, RewriteFailedError
from aioiceberg.expressions.serde import expression_to_json
from aioiceberg.io.resolve import BACKEND_OPTION, resolve_io
from aioiceberg.maintenance.expire import ExpireResult
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.actions import (
    delete_orphan_files,
    expire_snapshots,
    plan_files,
    rewrite_data_files,
    rewrite_manifests,
)
from aioiceberg.spark.actions.distributed_plan import collect_tasks
from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, filters

MAINT_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
PLAN_SCHEMA = pa.schema(
    [pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("v", pa.int64())]
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-actions")


# -- rewrite_data_files ----------------------------------------------------------------------


def small_file_table(root: Path, files: int, rows_per_file: int, **kwargs: Any) -> sync.Table:
    table = sync.connect(str(root)).create_table("db.t", schema=SCHEMA, partition_by=["region"], **kwargs)
    default_loop.run(add_small_files(table.aio, files, rows_per_file))
    table.refresh()
    return table


def data_files(table: sync.Table) -> list[DataFile]:
    return [t.file for t in table.scan(include_column_stats=True).plan_files()]


def listing(table: sync.Table) -> set[str]:
    async def listed() -> set[str]:
        return {o.location async for o in table.aio.io.list(table.location + "/")}

    return default_loop.run(listed())


def assert_readers_agree(table: sync.Table, expected: list[tuple[Any, ...]]) -> None:
    assert sorted_rows(table.scan().to_arrow()) == expected
    assert sorted_rows(pyiceberg_table(table.aio).scan().to_arrow()) == expected
    assert duckdb_ids(table.metadata_location) == sorted(r[0] for r in expected)


def test_bin_pack_compacts_many_small_files_with_deletes(spark: Any, tmp_path: Path) -> None:
    # 60 files, 20 a partition: enough for several output files per partition
    table = small_file_table(tmp_path / "wh", 60, 20, properties={"write.delete.mode": "merge-on-read"})
    table.delete("x < 1000")  # position deletes over most files
    table.refresh()
    expected = sorted_rows(table.scan().to_arrow())
    before = data_files(table)
    assert len(before) == 60
    target = sum(f.file_size_in_bytes for f in before) // 12  # about 4 files per partition
    result = rewrite_data_files(spark, table.location, target_file_size=target)
    table.refresh()
    after = data_files(table)
    assert len(result.rewritten_files) == 60 and result.groups == len(result.added_files) == len(after)
    assert 3 <= len(after) <= 24 and not result.failed_groups
    assert len(result.snapshot_ids) == 1 and result.snapshot_id == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary["operation"] == "replace"
    assert_readers_agree(table, expected)
    assert not result.added_files or all(p in listing(table) for p in result.added_files)


def test_sort_and_zorder_with_partial_progress(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "wh", 90, 60, format_version=3)
    expected = sorted_rows(table.scan().to_arrow())
    before = data_files(table)
    target = max(f.file_size_in_bytes for f in before) * 2  # several sorted files per partition
    snapshots = len(table.metadata.snapshots)
    result = rewrite_data_files(
        spark,
        table,
        sort_order="x",
        target_file_size=target,
        options={
            "partial-progress.enabled": "true",
            "partial-progress.max-commits": "2",
            "rewrite-all": "true",
        },
    )
    table.refresh()
    assert result.groups == 3 and len(result.snapshot_ids) == 2 and not result.failed_groups
    assert len(table.metadata.snapshots) == snapshots + 2
    for sid in result.snapshot_ids:
        snap = table.metadata.snapshot_by_id(sid)
        assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    after = data_files(table)
    assert sorted_rows(table.scan().to_arrow()) == expected
    assert mean_width(table.aio, after, "x") < mean_width(table.aio, before, "x") / 3
    for region in ("eu", "us", "ap"):  # within a partition the sorted files barely overlap
        ranges = sorted(bounds(table.aio, f, "x") for f in after if tuple(f.partition) == (region,))
        overlaps = sum(1 for (_, hi), (lo, _) in itertools.pairwise(ranges) if hi > lo)
        assert overlaps < len(ranges) / 2

    z = rewrite_data_files(
        spark,
        table,
        zorder_by=["x", "y"],
        target_file_size=target,
        options={"rewrite-all": "true"},
    )
    table.refresh()
    zfiles = data_files(table)
    assert len(z.snapshot_ids) == 1 and len(zfiles) == len(z.added_files)
    assert sorted_rows(table.scan().to_arrow()) == expected
    box = sum(
        (bounds(table.aio, f, "x")[1] - bounds(table.aio, f, "x")[0])
        * (bounds(table.aio, f, "y")[1] - bounds(table.aio, f, "y")[0])
        for f in zfiles
    ) / len(zfiles)
    assert box < mean_width(table.aio, before, "x") * mean_width(table.aio, before, "y") / 3
    assert ids(pyiceberg_table(table.aio).scan().to_arrow()) == sorted(r[0] for r in expected)


def test_a_group_that_fails_on_its_executor(spark: Any, tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "wh", 8, 20)
    victim = data_files(table)[0]
    default_loop.run(table.aio.io.delete(victim.file_path))  # its group cannot be read
    version, files = table.version, listing(table)
    options = {"rewrite-all": "true", "max-file-group-size-bytes": "1"}  # one file per group
    with pytest.raises(RewriteFailedError, match="nothing was committed"):
        rewrite_data_files(spark, table.location, options=options)
    assert table.refresh().version == version and listing(table) == files  # nothing written stays
    result = rewrite_data_files(
        spark, table.location, options={**options, "partial-progress.enabled": "true"}
    )
    assert result.groups == 8 and len(result.failed_groups) == 1 and len(result.rewritten_files) == 7
    assert "ObjectNotFoundError" in result.errors[0] or "NotFound" in result.errors[0]
    table.refresh()
    assert victim.file_path in {f.file_path for f in data_files(table)}  # left out, not lost


# -- delete_orphan_files, expire_snapshots, rewrite_manifests ----------------------------


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids]}, schema=MAINT_SCHEMA)


def build(root: Path) -> sync.Table:
    return build_at(str(root))


def build_at(root: str, storage_options: dict[str, str] | None = None) -> sync.Table:
    """A partitioned table with appends, a delete and an overwrite: several snapshots,
    DELETED entries, files only old snapshots reach."""
    catalog = sync.connect(root, storage_options=storage_options)
    table = catalog.create_table("db.t", schema=MAINT_SCHEMA, partition_by=["region"])
    for k in range(3):
        table.append(rows(k * 30, 30))
    table.delete("id < 10")
    table.overwrite(rows(200, 12), "region = 'eu'")
    table.append(rows(300, 9))
    return table.refresh()


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def relative(paths: list[str], root: Path) -> list[str]:
    return sorted(str(Path(p.removeprefix("file://").removeprefix("file:")).relative_to(root)) for p in paths)


def compare(
    tmp_path: Path, root: Path, single: Callable[[], list[str]], distributed: Callable[[], list[str]]
) -> tuple[list[str], set[str]]:
    """Run ``single`` on the table, restore it, run ``distributed``; both removed the same,
    and left the same objects. Returns what was removed (relative) and what is left."""
    saved = tmp_path / "saved"
    shutil.copytree(root, saved, symlinks=True)
    removed_single = relative(single(), root)
    left_single = files_under(root)
    shutil.rmtree(root)
    shutil.copytree(saved, root, symlinks=True)
    removed_spark = relative(distributed(), root)
    assert removed_spark == removed_single
    assert files_under(root) == left_single
    return removed_spark, left_single


def add_strays(table: sync.Table, root: Path) -> dict[str, Path]:
    """Orphans inside the table (old, recent, a dead writer's temp file, one with a ``..``
    name) and files beside its location that share its name as a string prefix."""
    location = Path(table.location.removeprefix("file://"))
    old = time.time() - 10 * 86400
    made = {
        "old": location / "data" / "region=eu" / "stray-old.parquet",
        "old_top": location / "stray-top.bin",
        "dots": location / "data" / "..hidden.parquet",
        "recent": location / "data" / "stray-recent.parquet",
        "temp": location / "metadata" / ".aioiceberg-tmp-dead",
        "beside": location.parent / (location.name + "-other") / "data.parquet",
        "beside_file": location.parent / (location.name + ".parquet"),
        "outside": root / "outside" / "keep.parquet",
    }
    for name, path in made.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        if name != "recent":
            os.utime(path, (old, old))
    (location / "linked").symlink_to(root / "outside", target_is_directory=True)
    return made


def test_delete_orphan_files_removes_what_one_process_removes(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    table = build(root)
    for path in (root / "db" / "t").rglob("*"):  # the table's own files: old too
        os.utime(path, (time.time() - 5 * 86400,) * 2)
    made = add_strays(table, root)
    location = table.location

    removed, left = compare(
        tmp_path,
        root,
        lambda: sync.load_table(location).remove_orphan_files(dt.timedelta(days=3)),
        lambda: delete_orphan_files(spark, location, older_than=dt.timedelta(days=3)),
    )
    assert "db/t/data/region=eu/stray-old.parquet" in removed
    assert "db/t/data/..hidden.parquet" in removed
    assert "db/t/stray-top.bin" in removed
    assert any(".aioiceberg-tmp-dead" in r for r in removed)
    assert "db/t/data/stray-recent.parquet" not in removed
    for name in ("beside", "beside_file", "outside"):
        assert str(made[name].relative_to(root)) in left
    assert sorted(sync.load_table(location).scan().to_arrow().column("id").to_pylist()) == sorted(build_ids())


def test_delete_orphan_files_keeps_a_file_named_as_javas_file_system_names_it(
    spark: Any, tmp_path: Path
) -> None:
    # Java writes a partition value a/b into a file:// warehouse as the folder region=a%2Fb,
    # on disk and in the manifest: not an orphan, though the location decodes elsewhere
    table = sync.connect((tmp_path / "wh").as_uri()).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    table.append(
        pa.table(
            {"id": [1, 2], "x": [1, 2], "y": [0.5, 1.5], "name": ["a", "b"], "region": ["eu", "eu"]},
            schema=SCHEMA,
        )
    )
    [task] = list(table.scan().plan_files())
    folder = tmp_path / "wh" / "db" / "t" / "data" / "region=a%2Fb"
    folder.mkdir(parents=True)
    source = Path(task.file.file_path.removeprefix("file://"))
    (folder / "java.parquet").write_bytes(source.read_bytes())
    (folder / "stray.parquet").write_bytes(b"x")
    java_spelled = f"{table.location}/data/region=a%2Fb/java.parquet"
    table.append_data_files([dataclasses.replace(task.file, file_path=java_spelled)])
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    expected = sync.load_table(table.location).remove_orphan_files(later, dry_run=True)
    got = delete_orphan_files(spark, table.location, older_than=later, dry_run=True)
    assert sorted(got) == sorted(expected)
    assert [Path(unquote(p.removeprefix("file://"))).name for p in got] == ["stray.parquet"]


def build_ids() -> list[int]:
    ids = [i for i in range(90) if i >= 10 and i % 3 != 0] + list(range(200, 212)) + list(range(300, 309))
    return ids


def test_delete_orphan_files_dry_run_and_location(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    table = build(root)
    add_strays(table, root)
    before = files_under(root)
    expected = sync.load_table(table.location).remove_orphan_files(dt.timedelta(0), dry_run=True)
    got = delete_orphan_files(spark, table.location, older_than=dt.timedelta(0), dry_run=True)
    assert got == expected and len(got) >= 5
    assert files_under(root) == before  # a dry run deletes nothing
    data = table.location + "/data"
    only_data = delete_orphan_files(
        spark, table.location, older_than=dt.timedelta(0), location=data, dry_run=True
    )
    assert only_data and all(p.startswith(data + "/") for p in only_data)
    for outside in (table.location + "/../t-other", str(root / "outside"), table.location + "-other"):
        with pytest.raises(LocationNotAllowedError):
            delete_orphan_files(spark, table.location, location=outside, dry_run=True)


def result_files(result: ExpireResult, root: Path) -> list[str]:
    return relative(result.deleted_files, root)


def test_expire_snapshots_removes_what_one_process_removes(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    table = build(root)
    location = table.location
    cutoff = int(time.time() * 1000) + 60_000
    results: dict[str, ExpireResult] = {}

    def single() -> list[str]:
        results["single"] = sync.load_table(location).expire_snapshots(older_than=cutoff, retain_last=2)
        return results["single"].deleted_files

    def distributed() -> list[str]:
        results["spark"] = expire_snapshots(spark, location, older_than=cutoff, retain_last=2)
        return results["spark"].deleted_files

    preview = expire_snapshots(spark, location, older_than=cutoff, retain_last=2, dry_run=True)
    removed, _ = compare(tmp_path, root, single, distributed)
    assert relative(preview.deleted_files, root) == removed
    one, two = results["single"], results["spark"]
    assert one.expired_snapshot_ids == two.expired_snapshot_ids and len(two.expired_snapshot_ids) == 4
    for field in ("deleted_content_files", "deleted_manifests", "deleted_manifest_lists"):
        assert relative(getattr(one, field), root) == relative(getattr(two, field), root), field
    assert two.deleted_content_files and two.deleted_manifests and not two.failed_deletes
    assert len(sync.load_table(location).snapshots()) == 2
    assert sorted(sync.load_table(location).scan().to_arrow().column("id").to_pylist()) == build_ids()


def test_rewrite_manifests_matches_one_process(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    table = build(root)
    location = table.location

    expected_rows = sorted(table.scan().to_arrow().column("id").to_pylist())
    single = sync.load_table(location).rewrite_manifests()
    single_md = sync.load_table(location).metadata
    shutil.rmtree(root)
    table = build(root)
    got = rewrite_manifests(spark, table.location)
    assert len(got.rewritten_manifests) == len(single.rewritten_manifests) > 1
    assert len(got.added_manifests) == len(single.added_manifests)
    assert got.kept_manifests == single.kept_manifests
    after = sync.load_table(location)
    assert after.metadata.current_snapshot().summary.operation.value == (  # type: ignore[union-attr]
        single_md.current_snapshot().summary.operation.value  # type: ignore[union-attr]
    )
    assert sorted(after.scan().to_arrow().column("id").to_pylist()) == expected_rows


def test_delete_orphan_files_on_s3_matches_one_process(spark: Any, moto_endpoint: str) -> None:
    """On an object store one executor task lists the location whole; the answer is the same,
    and keys beside the location or holding ``..`` segments are never deleted."""
    options = s3_storage_options(moto_endpoint)
    bucket = default_loop.run(create_bucket(moto_endpoint))
    table = build_at(f"s3://{bucket}/wh", options)
    io = table.io
    location = table.location
    strays = [f"{location}/data/stray.parquet", f"{location}/metadata/old.avro", f"{location}/top.bin"]
    kept = [
        f"{location}-other/data.parquet",
        f"{location}.parquet",
        f"{location}/data/../../escape.parquet",  # inside as a key, outside as a path
    ]
    # obstore refuses a key with '..' segments: that one goes through aiobotocore
    boto = resolve_io(location, {**options, BACKEND_OPTION: "aiobotocore"}, runtime=default_runtime())
    for path in strays + kept:
        default_loop.run((boto if "/../" in path else io).write(path, b"x"))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    expected = sync.load_table(location, options).remove_orphan_files(later, dry_run=True)
    assert sorted(expected) == sorted(strays)
    assert delete_orphan_files(spark, location, options, older_than=later, dry_run=True) == expected
    assert delete_orphan_files(spark, location, options, older_than=later) == expected
    for path in strays:
        assert not default_loop.run(io.exists(path))
    for path in kept:
        assert default_loop.run(boto.exists(path))
    assert (
        sorted(sync.load_table(location, options).scan().to_arrow().column("id").to_pylist()) == build_ids()
    )


# -- plan_files -------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[2, 3])
def table(request: Any, tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    """Eight appends (eight data manifests), position deletes (or v3 deletion vectors)
    from two merge-on-read deletes, one partitioned, one not."""
    root = tmp_path_factory.mktemp(f"plan-v{request.param}")
    t = sync.connect(str(root)).create_table(
        "db.t",
        schema=PLAN_SCHEMA,
        partition_by=["region"],
        properties={"write.delete.mode": "merge-on-read", "format-version": str(request.param)},
    )
    for k in range(8):
        ids = list(range(k * 40, k * 40 + 40))
        t.append(
            pa.table(
                {"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": [i % 11 for i in ids]},
                schema=PLAN_SCHEMA,
            )
        )
    t.delete("id IN (" + ", ".join(str(i) for i in range(0, 320, 7)) + ")")
    t.delete("region = 'us' AND v = 3")
    return t.refresh()


def canon(tasks: pa.Table) -> list[tuple[Any, ...]]:
    rows = tasks.to_pylist()
    out = []
    for r in rows:
        r["delete_files"] = sorted(tuple(sorted(d.items(), key=lambda kv: kv[0])) for d in r["delete_files"])
        out.append(tuple(sorted(r.items(), key=lambda kv: kv[0])))
    return sorted(out, key=repr)


def single_process(table: sync.Table, row_filter: str, **options: Any) -> pa.Table:
    scan: TableScan = table.scan(row_filter, **options).aio

    async def batches() -> list[pa.RecordBatch]:
        return [b async for b in scan.plan_batches()]

    found = default_loop.run(batches())
    return pa.Table.from_batches(found, schema=found[0].schema) if found else pa.table({})


@pytest.mark.parametrize("row_filter", ["", "region = 'eu'", "id > 150 AND v < 5", "region = 'nowhere'"])
def test_plan_files_returns_the_single_process_tasks(spark: Any, table: sync.Table, row_filter: str) -> None:
    df = plan_files(spark, table.location, filter=row_filter, parallelism=3)
    got = collect_tasks(df)
    expected = single_process(table, row_filter)
    assert canon(got) == canon(expected) if expected.num_rows else got.num_rows == 0
    if row_filter == "":
        assert got.num_rows == 8 * 3  # a file per partition per append
        assert any(len(d) for d in got.column("delete_files").to_pylist())
    assert [f.name for f in df.schema.fields] == [
        "file_path",
        "file_format",
        "spec_id",
        "partition",
        "record_count",
        "file_size_in_bytes",
        "start",
        "length",
        "residual",
        "first_row_id",
        "delete_files",
    ]


def test_plan_files_splits_and_reads_options_as_the_source_does(spark: Any, table: sync.Table) -> None:
    first = table.snapshots()[2].snapshot_id
    df = plan_files(spark, table.location, {"snapshot-id": str(first), "filter": "v > 2"})
    assert canon(collect_tasks(df)) == canon(single_process(table, "v > 2", snapshot_id=first))
    split = plan_files(spark, table.location, {"split-size": "1"}, filter="region = 'ap'")
    assert canon(collect_tasks(split)) == canon(single_process(table, "region = 'ap'", split_size=1))


# the planning benchmark's table (benchmarks/plan.py), small: ten columns of stats, day and
# bucket partitions, one snapshot
BENCH_MANIFESTS, BENCH_ENTRIES = 12, 50


@pytest.fixture(scope="module")
def bench_table(tmp_path_factory: pytest.TempPathFactory) -> sync.Table:
    location = (tmp_path_factory.mktemp("plan-bench") / "t").as_uri()
    io = resolve_io(location, runtime=default_runtime())
    default_loop.run(build_table(io, location, BENCH_MANIFESTS, BENCH_ENTRIES))
    return sync.load_table(location)


TaskKey = tuple[str, int, int | None, tuple[str, ...], str]


def task_key(path: str, start: int, length: int | None, deletes: list[str], residual: str) -> TaskKey:
    return (path, start, length, tuple(sorted(deletes)), json.dumps(json.loads(residual), sort_keys=True))


def object_key(task: FileScanTask) -> TaskKey:
    residual = json.dumps(expression_to_json(task.residual))
    deletes = [d.file_path for d in task.delete_files]
    return task_key(task.file.file_path, task.start, task.length, deletes, residual)


def row_key(row: dict[str, Any]) -> TaskKey:
    deletes = [d["file_path"] for d in row["delete_files"]]
    return task_key(row["file_path"], row["start"], row["length"], deletes, row["residual"])


# tasks each filter leaves: all files, one day (one manifest), one file, some files
BENCH_COUNTS = {"none": BENCH_MANIFESTS * BENCH_ENTRIES, "day_1pct": BENCH_ENTRIES, "id_eq": 1}


@pytest.mark.parametrize("name", ["none", "day_1pct", "id_eq", "metrics_only"])
def test_plan_files_on_the_planning_benchmark_table(spark: Any, bench_table: sync.Table, name: str) -> None:
    row_filter = filters(BENCH_MANIFESTS, BENCH_ENTRIES)[name]
    got = collect_tasks(plan_files(spark, bench_table.location, filter=row_filter, parallelism=4))
    found = sorted(row_key(r) for r in got.to_pylist())
    expected = sorted(object_key(t) for t in bench_table.scan(row_filter).plan_files())
    assert found == expected
    assert len(found) == BENCH_COUNTS[name] if name in BENCH_COUNTS else 0 < len(found) < BENCH_COUNTS["none"]
