"""Java's escaped file locations: Java Iceberg on a local Hadoop file system names a data file
of an identity partition on ``a/b`` as ``file:/.../data/region=a%2Fb/...parquet`` and puts it
at that literal folder (``:`` is ``%3A``, a space ``+``, ``%`` itself ``%25``); a location read
the URI way (percent-decoded) names a file that does not exist. We read such tables, filter
them, remove orphans from them without touching a live file, and expire their snapshots,
deleting the expired files from where Java put them. The warehouse is a ``file://`` URI: given
a plain path, Java writes plain paths (``/.../p=a%2Fb/f``), which name the file as they read.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from pathlib import Path
from typing import Any

import anyio.to_thread
import pyarrow as pa
import pytest
from servers.java_spark import JavaSpark

import aioiceberg
from aioiceberg.spec.manifest import read_manifest, read_manifest_list
from aioiceberg.table import Table

pytestmark = pytest.mark.xdist_group("java")

REGIONS = ["a/b", "x y", "10:30", "p%q", "plain"]
Row = tuple[Any, ...]


def rows_of(table: pa.Table) -> list[Row]:
    return sorted(zip(table.column("id").to_pylist(), table.column("region").to_pylist(), strict=True))


def on_disk(location: str) -> str:
    """Where Java's Hadoop file system keeps a ``file:`` location: the path as written."""
    path = location.removeprefix("file:")
    return path[2:] if path.startswith("//") else path


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def java_rows(java: JavaSpark, name: str) -> list[Row]:
    await java_sql(java, f"REFRESH TABLE {name}")
    return rows_of(await anyio.to_thread.run_sync(java.arrow, f"SELECT id, region FROM {name}"))


async def live_files(table: Table) -> set[str]:
    """Manifests, data and delete files of the current snapshot, as its metadata spells them."""
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    found = {snap.manifest_list}
    for mf in read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list):
        found.add(mf.manifest_path)
        for e in read_manifest(await table.io.read(mf.manifest_path), mf).entries:
            if e.is_live:
                found.add(e.data_file.file_path)
    return found


def values(rows: list[Row]) -> str:
    return ", ".join(f"({i}, '{r}')" for i, r in rows)


@pytest.mark.anyio
@pytest.mark.parametrize("version", [2, 3])
async def test_tables_java_wrote_at_escaped_locations_read_clean_and_expire(
    java_spark: JavaSpark, tmp_path: Path, version: int
) -> None:
    warehouse = tmp_path / "wh"
    cat = java_spark.catalog(
        f"esc_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=f"file://{warehouse}", cache_enabled="false"
    )
    ns = f"db_{uuid.uuid4().hex[:8]}"
    name = f"{cat}.{ns}.t"
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(
        java_spark,
        f"CREATE TABLE {name} (id BIGINT, region STRING) USING iceberg PARTITIONED BY (region) "
        f"TBLPROPERTIES ('format-version'='{version}', 'write.delete.mode'='merge-on-read')",
    )
    rows = [(i, REGIONS[i % len(REGIONS)]) for i in range(10)]
    await java_sql(java_spark, f"INSERT INTO {name} VALUES {values(rows)}")
    if version == 3:  # a deletion vector in an escaped folder, naming an escaped data file
        await java_sql(java_spark, f"DELETE FROM {name} WHERE id IN (0, 3)")
        rows = [r for r in rows if r[0] not in (0, 3)]
    want = sorted(rows)
    assert await java_rows(java_spark, name) == want

    # Java wrote the escaped spellings, in the metadata and on disk
    located = [str(p) for (p,) in await java_sql(java_spark, f"SELECT file_path FROM {name}.files")]
    escaped = [p for p in located if "region=a%2Fb/" in p]
    assert escaped and all(os.path.isfile(on_disk(p)) for p in located)
    assert any("region=10%3A30/" in p for p in located)

    table = await aioiceberg.load_table(str(warehouse / ns / "t"))
    assert rows_of(await table.scan().to_arrow()) == want
    for region in REGIONS:
        got = rows_of(await table.scan(row_filter=f"region = '{region}'").to_arrow())
        assert got == [r for r in want if r[1] == region], region

    # orphan removal keeps every live file, however spelled
    live = await live_files(table)
    assert set(located) <= live
    removed = await table.remove_orphan_files(older_than=dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert not {on_disk(p) for p in removed} & {on_disk(p) for p in live}
    assert all(os.path.isfile(on_disk(p)) for p in live)
    await table.refresh()
    assert rows_of(await table.scan().to_arrow()) == want
    assert await java_rows(java_spark, name) == want

    # expiry after an overwrite deletes the replaced files from where Java put them
    rows = [(i, REGIONS[i % len(REGIONS)]) for i in range(100, 105)]
    await java_sql(java_spark, f"INSERT OVERWRITE {name} VALUES {values(rows)}")
    want = sorted(rows)
    await table.refresh()
    replaced = live - await live_files(table)
    assert any("region=a%2Fb/" in p for p in replaced)
    await table.expire_snapshots(older_than=dt.datetime.now(dt.UTC) + dt.timedelta(days=1), retain_last=1)
    left = [p for p in replaced if os.path.exists(on_disk(p))]
    assert not left
    await table.refresh()
    assert rows_of(await table.scan().to_arrow()) == want
    assert await java_rows(java_spark, name) == want
