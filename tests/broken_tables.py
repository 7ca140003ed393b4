"""Tables with one object broken on disk, for the tests that check what a broken object raises."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import aioiceberg
from aioiceberg.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.int64())])


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "x": [None if i % 3 == 0 else i for i in ids]}, schema=SCHEMA)


async def _table(root: Path) -> Table:
    catalog = aioiceberg.connect(str(root))
    table = await catalog.create_table("db.t", schema=SCHEMA)
    await table.append(_rows(0, 40))
    await table.append(_rows(40, 40))
    return table


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


async def _data_files(table: Table) -> list[str]:
    return sorted({t.file.file_path async for t in table.scan().plan_files()})


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _bad_magic(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-4] + b"XXXX")


def _garbage_footer(path: Path) -> None:
    data = bytearray(path.read_bytes())
    footer_len = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_len
    data[start : start + footer_len] = os.urandom(footer_len)
    path.write_bytes(bytes(data))


def _wrong_type(path: Path) -> None:
    table = pq.read_table(path)
    ids = table.column("id").to_pylist()
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"}),
            pa.field("x", pa.string(), metadata={"PARQUET:field_id": "2"}),
        ]
    )
    pq.write_table(pa.table({"id": ids, "x": [f"s{i}" for i in ids]}, schema=schema), path)


def _missing(path: Path) -> None:
    path.unlink()


def _not_parquet(path: Path) -> None:
    path.write_text("id,x\n1,2\n")


async def _break_data_file(table: Table, how: Callable[[Path], None]) -> str:
    victim = (await _data_files(table))[0]
    how(_local(victim))
    return victim


async def _break_manifest(table: Table, how: Callable[[Path], None] = _truncate) -> str:
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    from aioiceberg.spec.manifest import read_manifest_list

    manifests = read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list)
    victim = manifests[0].manifest_path
    how(_local(victim))
    return victim


async def _break_manifest_list(table: Table) -> str:
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    _truncate(_local(snap.manifest_list))
    return snap.manifest_list


async def _remove_manifest_list(table: Table) -> str:
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    _missing(_local(snap.manifest_list))
    return snap.manifest_list


def _listing(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".aioiceberg")}
