"""Tables with many small position delete files, some of their rows dangling (shared by the
single-process and Spark tests of ``rewrite_position_delete_files``)."""

from __future__ import annotations

import pyarrow as pa
from maint_helpers import SCHEMA, rows

from aioiceberg.catalog import Catalog
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.read.formats import decode_file
from aioiceberg.spec.manifest import DataFileContent, FileFormat, ManifestContent
from aioiceberg.table import Table

MOR = {"write.delete.mode": "merge-on-read", "format-version": "2"}
BATCH = 30  # rows per append: one data file per region (3 regions)
DELETES = 6  # delete commits: each writes one position delete file per region


async def deleted_table(catalog: Catalog, name: str = "db.t") -> tuple[Table, list[int]]:
    """``name``: 3 appends of 30 rows over 3 region partitions, 6 deletes each naming rows of
    the first two appends in every region (18 small delete files), then the first append's
    rows overwritten (its data files dropped: half of every delete file's rows dangle).
    Returns the table and the ids it holds."""
    table = await catalog.create_table(name, schema=SCHEMA, partition_by=["region"], properties=MOR)
    for i in range(3):
        await table.append(rows(i * BATCH, BATCH))
    gone: set[int] = set()
    for k in range(DELETES):
        doomed = [3 * k, 3 * k + 1, 3 * k + 2, 3 * k + 33, 3 * k + 34, 3 * k + 35]
        gone |= set(doomed)
        await table.delete(f"id in ({', '.join(map(str, doomed))})")
    await table.overwrite(rows(100, 3), f"id < {BATCH}")
    kept = [i for i in range(3 * BATCH) if i >= BATCH and i not in gone] + [100, 101, 102]
    return table, sorted(kept)


async def live_files(table: Table) -> tuple[set[str], list[tuple[str, int, int | None]]]:
    """The current snapshot's live data file paths, and its live position delete files as
    (path, record count, data sequence number)."""
    snap = table.current_snapshot()
    assert snap is not None
    walker = ManifestWalker(table.io)
    data: set[str] = set()
    deletes: list[tuple[str, int, int | None]] = []
    for m in await walker.manifests(snap):
        for e in await walker.entries(m):
            if not e.is_live:
                continue
            if m.content == ManifestContent.DATA:
                data.add(e.data_file.file_path)
            elif e.data_file.content == DataFileContent.POSITION_DELETES:
                deletes.append((e.data_file.file_path, e.data_file.record_count, e.sequence_number))
    return data, sorted(deletes)


async def delete_rows(table: Table) -> pa.Table:
    """Every (file_path, pos) row of the live position delete files, sorted."""
    _, deletes = await live_files(table)
    tables = []
    for path, _, _ in deletes:
        t = decode_file(await table.io.read(path), FileFormat.PARQUET, path)
        tables.append(t.select(["file_path", "pos"]))
    if not tables:
        return pa.table({"file_path": pa.array([], pa.string()), "pos": pa.array([], pa.int64())})
    return pa.concat_tables(tables).sort_by([("file_path", "ascending"), ("pos", "ascending")])
