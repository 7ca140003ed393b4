"""Tables other engines wrote, in shapes we once refused: each fixture is a PyIceberg table
rewritten the way another writer leaves it, read here and checked against PyIceberg and
DuckDB wherever they can read it too."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import fastavro
import pyarrow as pa
import pytest
from maint_helpers import duckdb_ids

import aioiceberg
from aioiceberg.errors import CorruptFileError
from aioiceberg.scan import ManifestCache, ManifestListCache, TableScan

pytestmark = pytest.mark.anyio

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])


def _batch(seed: int, n: int = 10) -> pa.Table:
    return pa.table(
        {"id": [seed * 100 + i for i in range(n)], "cat": [f"c{(seed + i) % 3}" for i in range(n)]},
        schema=ARROW_SCHEMA,
    )


def pyiceberg_table(root: Path, version: int, properties: dict[str, str] | None = None) -> Any:
    """A table partitioned by ``cat`` with three appends, written by PyIceberg."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = SqlCatalog("foreign", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "cat", StringType(), required=False)
    )
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
    props = {"format-version": str(version), **(properties or {})}
    table = catalog.create_table("db.t", schema, partition_spec=spec, properties=props)
    for seed in range(3):
        table.append(_batch(seed))
    return catalog.load_table("db.t")


def local(uri: str) -> Path:
    return Path(urlparse(uri).path) if uri.startswith("file:") else Path(uri)


def rewrite_avro(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Re-encode an Avro file in place with ``change`` applied to every record."""
    reader = fastavro.reader(io.BytesIO(path.read_bytes()))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    records = list(reader)
    for rec in records:
        change(rec)
    out = io.BytesIO()
    fastavro.writer(out, reader.writer_schema, records, metadata=meta, codec=reader.codec)
    path.write_bytes(out.getvalue())


def pyiceberg_ids(metadata_location: str, snapshot_id: int | None = None) -> list[int]:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(metadata_location)
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())


async def our_ids(location: str, snapshot_id: int | None = None) -> list[int]:
    table = await aioiceberg.load_table(location)
    return sorted((await table.scan(snapshot_id=snapshot_id).to_arrow())["id"].to_pylist())


def first_leaf(error: BaseException) -> BaseException:
    """The error itself, or the first one inside a group (task groups wrap what they raise)."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


ALL_IDS = sorted(seed * 100 + i for seed in range(3) for i in range(10))


# -- class 5: a manifest_length that disagrees with the object ------------------------------------


async def test_a_wrong_manifest_length_in_the_list_is_only_a_hint(tmp_path: Path) -> None:
    table = pyiceberg_table(tmp_path, 2)
    location = table.metadata_location
    manifest_list = local(table.current_snapshot().manifest_list)
    rewrite_avro(manifest_list, lambda rec: rec.update(manifest_length=rec["manifest_length"] + 31))

    assert await our_ids(location) == ALL_IDS
    assert pyiceberg_ids(location) == ALL_IDS
    assert duckdb_ids(location) == ALL_IDS
    # Planned twice (the second from the caches, keyed by the listed length) and filtered.
    ours = await aioiceberg.load_table(location)
    caches = {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache()}
    for _ in range(2):
        scan = TableScan(ours.io, ours.metadata, row_filter="cat = 'c1'", **caches)  # type: ignore[arg-type]
        assert sum(t.file.record_count for t in [t async for t in scan.plan_files()]) == 10
    assert scan.metrics.manifests_from_cache == 3


async def test_a_truncated_manifest_is_still_corrupt_whatever_the_list_says(tmp_path: Path) -> None:
    table = pyiceberg_table(tmp_path, 2)
    manifest_list = local(table.current_snapshot().manifest_list)
    victim = local(next(iter(table.current_snapshot().manifests(table.io))).manifest_path)
    victim.write_bytes(victim.read_bytes()[:-40])
    ours = await aioiceberg.load_table(table.metadata_location)
    with pytest.raises(Exception) as info:
        await ours.scan().to_arrow()
    error = first_leaf(info.value)
    assert isinstance(error, CorruptFileError) and victim.name in str(error)
    assert manifest_list.exists()
