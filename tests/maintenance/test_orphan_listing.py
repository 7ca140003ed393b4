"""The listing orphan removal compares against the referenced set: one listing yields both
the objects and the temp files of writers that died, and the listing split into entries
(what Spark's executors share) names exactly what the whole listing names."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from maint_helpers import SCHEMA, ids, rows

import aioiceberg
from aioiceberg.io import LocalFileIO
from aioiceberg.io.local import LOCK_NAME, TMP_PREFIX
from aioiceberg.maintenance.orphans import list_candidates, remove_orphan_files, split_entries
from aioiceberg.maintenance.reachable import normalize
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.anyio

OLD = time.time() - 10 * 86400
CUTOFF = time.time() - 86400


async def make_tree(io: LocalFileIO, root: Path) -> set[Path]:
    """A table folder with the shapes a split meets; returns the files old enough to list."""
    old = [
        *(root / "data" / "p=0" / f"{i}.parquet" for i in range(4)),  # few: split into files
        *(root / "data" / "p=1" / f"{i:02d}.parquet" for i in range(20)),  # many: listed whole
        root / "data" / "x",  # an object whose name starts its sibling folder's
        root / "data" / "x_old" / "y.parquet",
        root / "data" / "s=a b" / "f%2F1.parquet",  # names a URI spells otherwise
        root / "metadata" / "v1.metadata.json",
        root / "metadata" / "deep" / "a" / "b" / "c.avro",
    ]
    for path in old:
        await io.write(str(path), b"x")
    pointer = await io.write(str(root / "metadata" / "version-hint.text"), b"1")
    await io.write_if_match(str(root / "metadata" / "version-hint.text"), b"2", pointer.etag)
    assert (root / "metadata" / LOCK_NAME).exists()
    old.append(root / "metadata" / "version-hint.text")
    dead = [root / "data" / "p=0" / f"{TMP_PREFIX}dead", root / "data" / "p=1" / f"{TMP_PREFIX}dead"]
    for path in dead:
        path.write_bytes(b"half")  # what a killed writer leaves
    for path in [*old, *dead, root / "metadata" / LOCK_NAME]:
        os.utime(path, (OLD, OLD))
    await io.write(str(root / "data" / "p=0" / "new.parquet"), b"x")  # of a commit in flight
    return {*old, *dead}


async def listed(io: LocalFileIO, prefix: str, entries: list[str] | None = None) -> list[str]:
    return [info.location async for info in list_candidates(io, prefix, CUTOFF, entries)]


SPELLINGS: list[Callable[[Path], str]] = [lambda p: p.as_uri(), str]


@pytest.mark.parametrize("spell", SPELLINGS, ids=["uri", "path"])
async def test_one_listing_finds_objects_and_a_dead_writers_temp_files(
    tmp_path: Path, spell: Callable[[Path], str]
) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    expected = await make_tree(io, tmp_path / "tbl")
    found = await listed(io, spell(tmp_path / "tbl") + "/")
    assert sorted(found) == sorted(spell(p) for p in expected)
    assert len(found) == len(set(found))
    assert sum(TMP_PREFIX in loc for loc in found) == 2


@pytest.mark.parametrize("spell", SPELLINGS, ids=["uri", "path"])
async def test_a_split_listing_names_exactly_what_the_whole_listing_names(
    tmp_path: Path, spell: Callable[[Path], str]
) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    await make_tree(io, tmp_path / "tbl")
    prefix = spell(tmp_path / "tbl") + "/"
    whole = sorted(await listed(io, prefix))
    for want in (1, 3, 8, 40, 1000):
        entries = await split_entries(io, prefix, want)
        assert entries is not None
        assert len(entries) >= min(want, 2)
        parts = [loc for entry in entries for loc in await listed(io, prefix, [entry])]
        assert sorted(parts) == whole, want  # each object once, none missed
        if want == 1000:  # split down to single files: those listed without their folder
            assert spell(tmp_path / "tbl" / "data" / "p=0" / f"{TMP_PREFIX}dead") in entries
            assert spell(tmp_path / "tbl" / "data" / "x") in entries
            assert spell(tmp_path / "tbl" / "data" / "p=1") + "/" in entries  # 21 files: whole
            assert not any(e.endswith(LOCK_NAME) for e in entries)
    # a listing of a prefix inside the table: the split of that folder alone
    inner = spell(tmp_path / "tbl" / "data") + "/"
    entries = await split_entries(io, inner, 1000)
    assert entries is not None
    parts = sorted([loc for entry in entries for loc in await listed(io, inner, [entry])])
    assert parts == sorted(await listed(io, inner)) == [loc for loc in whole if loc.startswith(inner)]


async def test_an_entry_gone_since_the_split_lists_nothing(tmp_path: Path) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    await make_tree(io, tmp_path / "tbl")
    prefix = (tmp_path / "tbl").as_uri() + "/"
    entries = await split_entries(io, prefix, 1000)
    assert entries is not None
    gone = (tmp_path / "tbl" / "data" / "x").as_uri()
    assert gone in entries
    await io.delete(gone)
    assert await listed(io, prefix, [gone]) == []
    (tmp_path / "tbl" / "data" / "x").mkdir()  # a folder where the object was: not an object
    assert await listed(io, prefix, [gone]) == []


async def test_a_table_at_a_file_uri_keeps_its_files_in_folders_whose_names_a_uri_escapes(
    tmp_path: Path,
) -> None:
    # a listing spells ``region=a b/`` as ``region%3Da%20b/``, a manifest as written: both
    # name one file, which is not an orphan
    table = await aioiceberg.connect((tmp_path / "wh").as_uri()).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    assert table.location.startswith("file:///")
    await table.append(rows(0, 6))
    stray = f"{table.location}/data/region=eu/stray.parquet"
    await table.io.write(stray, b"x")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    removed = await table.remove_orphan_files(older_than=later)
    assert [normalize(p) for p in removed] == [normalize(stray)]
    assert ids(await table.scan().to_arrow()) == list(range(6))


async def test_a_file_named_as_javas_file_system_names_it_is_not_an_orphan(tmp_path: Path) -> None:
    # Java's Hadoop file system does not decode escapes: a partition value ``a/b`` is the
    # folder ``region=a%2Fb`` on disk and in the manifest; our store decodes, so the listed
    # object decodes to that name while the manifest's location decodes to ``region=a/b``
    table = await aioiceberg.connect((tmp_path / "wh").as_uri()).create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    await table.append(rows(0, 6))
    [task, *_] = [t async for t in table.scan().plan_files()]
    java_dir = Path(normalize(table.location)) / "data" / "region=a%2Fb"
    java_dir.mkdir(parents=True)
    on_disk = java_dir / "java.parquet"
    on_disk.write_bytes(Path(normalize(task.file.file_path)).read_bytes())
    as_java_writes = f"{table.location}/data/region=a%2Fb/java.parquet"
    await table.append_data_files([dataclasses.replace(task.file, file_path=as_java_writes)])
    stray = java_dir / "stray.parquet"
    stray.write_bytes(b"x")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    removed = await table.remove_orphan_files(older_than=later)
    assert [normalize(p) for p in removed] == [str(stray)]
    assert on_disk.exists()


async def test_a_table_at_a_one_slash_file_uri_loses_its_stray_and_keeps_every_live_file(
    tmp_path: Path,
) -> None:
    # Java's Hadoop file system writes ``file:/x``; the local store lists ``file:///x``: the
    # two (and a plain ``/x``) name one folder, so its old stray is an orphan and nothing else
    table = await aioiceberg.connect(f"file:{tmp_path / 'wh'}").create_table(
        "db.t", schema=SCHEMA, partition_by=["region"]
    )
    await table.append(rows(0, 6))
    await table.append(rows(6, 4))
    assert table.location.startswith("file:/") and not table.location.startswith("file://")
    assert table.metadata_location.startswith(table.location)
    live = [t.file.file_path async for t in table.scan().plan_files()]
    assert live and all(p.startswith(table.location) for p in live)
    stray = Path(normalize(table.location)) / "data" / "region=eu" / "stray.parquet"
    stray.write_bytes(b"x")
    files = {p for p in Path(normalize(table.location)).rglob("*") if p.is_file() and p.name != LOCK_NAME}
    for path in files:
        os.utime(path, (OLD, OLD))  # every file older than the default three days

    folder = str(Path(normalize(table.location)) / "data")  # the same table as a plain path
    in_folder = await remove_orphan_files(table, dry_run=True, location=folder)
    assert [normalize(p) for p in in_folder] == [str(stray)]
    removed = await table.remove_orphan_files()
    assert [normalize(p) for p in removed] == [str(stray)]
    left = {p for p in Path(normalize(table.location)).rglob("*") if p.is_file() and p.name != LOCK_NAME}
    assert left == files - {stray}
    assert all(Path(normalize(p)).exists() for p in live)
    assert ids(await table.scan().to_arrow()) == list(range(10))
