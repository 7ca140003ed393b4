"""The Spark maintenance actions remove exactly what the single-process versions remove.

Each table is built once, its warehouse copied aside (mtimes kept); the single-process
version runs on it, the copy is put back at the same path (metadata names absolute
paths), and the Spark version runs on that same table in a local[2] session. The files
each removed and the objects left must be equal.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.spark_cluster import session_builder

import aioiceberg.spark
from aioiceberg import sync
from aioiceberg._sync import default_loop
from aioiceberg.errors import LocationNotAllowedError
from aioiceberg.io.resolve import BACKEND_OPTION, resolve_io
from aioiceberg.maintenance.expire import ExpireResult
from aioiceberg.runtime import default_runtime
from aioiceberg.spark.actions.delete_orphan_files import delete_orphan_files
from aioiceberg.spark.actions.expire_snapshots import expire_snapshots
from aioiceberg.spark.actions.rewrite_manifests import rewrite_manifests

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = session_builder(
        "local[2]", "aioiceberg-actions", {"spark.ui.showConsoleProgress": "false"}
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    aioiceberg.spark.register(session)
    yield session
    session.stop()


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids]}, schema=SCHEMA)


def build(root: Path) -> sync.Table:
    return build_at(str(root))


def build_at(root: str, storage_options: dict[str, str] | None = None) -> sync.Table:
    """A partitioned table with appends, a delete and an overwrite: several snapshots,
    DELETED entries, files only old snapshots reach."""
    catalog = sync.connect(root, storage_options=storage_options)
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["region"])
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
