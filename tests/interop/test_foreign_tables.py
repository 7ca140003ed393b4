"""Tables other engines wrote, in shapes we once refused: each fixture is a PyIceberg table
rewritten the way another writer leaves it, read here and checked against PyIceberg and
DuckDB wherever they can read it too."""

from __future__ import annotations

import gzip
import io
import json
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
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.spec.manifest import ManifestContent, snapshot_manifests
from aioiceberg.spec.metadata_json import parse_table_metadata, serialize_table_metadata
from aioiceberg.table_scan import TableScan

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


async def test_a_manifest_longer_than_listed_is_read_whole(tmp_path: Path) -> None:
    """Manifests are fetched by their listed length plus one byte; a longer file is read again
    whole rather than cut short."""
    table = pyiceberg_table(tmp_path, 2)
    location = table.metadata_location
    manifest_list = local(table.current_snapshot().manifest_list)
    rewrite_avro(manifest_list, lambda rec: rec.update(manifest_length=rec["manifest_length"] - 31))

    assert await our_ids(location) == ALL_IDS
    assert pyiceberg_ids(location) == ALL_IDS


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


# -- class 1: v1 snapshots that list their manifests inline ---------------------------------------


def inline_manifests(metadata_file: Path) -> dict[int, list[str]]:
    """Rewrite every snapshot of a v1 metadata file to name its manifests inline (``manifests``,
    no ``manifest-list``, as early Java v1 writers did) and delete the manifest lists, so
    nothing can read them. Returns each snapshot's manifest paths."""
    doc = json.loads(metadata_file.read_text())
    assert doc["format-version"] == 1
    listed: dict[int, list[str]] = {}
    for snap in doc["snapshots"]:
        manifest_list = snap.pop("manifest-list")
        reader = fastavro.reader(io.BytesIO(local(manifest_list).read_bytes()))
        snap["manifests"] = listed[snap["snapshot-id"]] = [r["manifest_path"] for r in reader]
        local(manifest_list).unlink()
    metadata_file.write_text(json.dumps(doc))
    return listed


async def test_v1_snapshots_that_list_manifests_inline_read_like_their_lists(tmp_path: Path) -> None:
    table = pyiceberg_table(tmp_path, 1)
    location = table.metadata_location
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    expected = {s: pyiceberg_ids(location, s) for s in snapshots}
    expected_c1 = sorted(table.scan(row_filter="cat = 'c1'").to_arrow()["id"].to_pylist())
    assert duckdb_ids(location) == ALL_IDS == expected[snapshots[-1]]

    listed = inline_manifests(local(location))
    ours = await aioiceberg.load_table(location)
    assert all(
        s.manifest_list is None and s.manifests == tuple(listed[s.snapshot_id])
        for s in ours.metadata.snapshots
    )
    for s in snapshots:
        assert await our_ids(location, s) == expected[s]
    got = await ours.scan(row_filter="cat = 'c1'").to_arrow()
    assert sorted(got["id"].to_pylist()) == expected_c1

    rows = await snapshot_manifests(ours.io, ours.metadata.snapshots[-1])
    assert [m.manifest_path for m in rows] == listed[snapshots[-1]]
    for m in rows:
        assert m.manifest_length == local(m.manifest_path).stat().st_size
        assert (m.partition_spec_id, m.content, m.sequence_number, m.min_sequence_number) == (
            0,
            ManifestContent.DATA,
            0,
            0,
        )
        assert m.added_snapshot_id == snapshots[-1] and m.added_files_count is not None
    assert sum(m.added_rows_count or 0 for m in rows) + sum(m.existing_rows_count or 0 for m in rows) == 30
    # The metadata file keeps the inline list when we write it back.
    again = parse_table_metadata(serialize_table_metadata(ours.metadata))
    assert again.snapshots == ours.metadata.snapshots


async def test_writes_on_top_of_an_inline_snapshot(tmp_path: Path) -> None:
    """Our own v1 table, its snapshots rewritten inline: append, delete, rewrite manifests
    and expire all start from inline manifests; PyIceberg and DuckDB read the result."""
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", ARROW_SCHEMA, partition_by=["cat"], format_version=1)
    for seed in range(3):
        await table.append(_batch(seed))
    inline_manifests(local(table.metadata_location))
    table = await catalog.load_table("db.t")
    current = table.current_snapshot()
    assert current is not None and current.manifest_list is None
    first = table.metadata.snapshots[0].snapshot_id
    inline = [s.snapshot_id for s in table.metadata.snapshots]

    await table.append(_batch(3))
    await table.delete("id = 5 or id = 101")
    expected = sorted({*ALL_IDS, *range(300, 310)} - {5, 101})
    assert await our_ids(table.metadata_location) == expected
    assert await our_ids(table.metadata_location, first) == list(range(10))

    await table.rewrite_manifests()
    result = await table.expire_snapshots(snapshot_ids=inline)
    assert result.deleted_manifest_lists == []  # the inline snapshots had none
    assert all(s.manifest_list is not None for s in table.metadata.snapshots)
    # PyIceberg and DuckDB refuse a metadata file with inline snapshots; with them expired
    # they read what we wrote on top of them.
    assert await our_ids(table.metadata_location) == expected
    assert pyiceberg_ids(table.metadata_location) == expected
    assert duckdb_ids(table.metadata_location) == expected


# -- class 7: gzip metadata files ------------------------------------------------------------------


def gzip_metadata(table: Any, name: Callable[[int, str], str]) -> list[Path]:
    """Compress every metadata file of ``table`` and rename it as Java does under
    ``write.metadata.compression-codec=gzip``; ``name(version, old_name)`` gives the new name."""
    folder = local(table.metadata_location).parent
    out = []
    for i, path in enumerate(sorted(folder.glob("*.metadata.json"))):
        target = folder / name(i + 1, path.name)
        target.write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
        out.append(target)
    return out


@pytest.mark.parametrize("suffix", [".gz.metadata.json", ".metadata.json.gz"])
async def test_gzip_metadata_with_java_catalog_names_loads_by_location(tmp_path: Path, suffix: str) -> None:
    table = pyiceberg_table(tmp_path, 2)
    files = gzip_metadata(table, lambda _, old: old.replace(".metadata.json", suffix))
    location = str(local(table.location()))
    ours = await aioiceberg.load_table(location)
    assert local(ours.metadata_location) == files[-1] and ours.read_only  # a foreign table, as before
    assert await our_ids(location) == ALL_IDS
    assert await our_ids(str(files[-1])) == ALL_IDS
    if suffix == ".gz.metadata.json":  # PyIceberg takes any other name for a table location
        assert pyiceberg_ids(str(files[-1])) == ALL_IDS


@pytest.mark.parametrize("hint", [True, False])
@pytest.mark.parametrize("suffix", [".gz.metadata.json", ".metadata.json.gz"])
async def test_gzip_metadata_with_hadoop_names_loads_and_commits(
    tmp_path: Path, hint: bool, suffix: str
) -> None:
    table = pyiceberg_table(tmp_path, 2)
    files = gzip_metadata(table, lambda version, _: f"v{version}{suffix}")
    folder = files[-1].parent
    if hint:
        (folder / "version-hint.text").write_text(str(len(files)))
    location = str(local(table.location()))
    ours = await aioiceberg.load_table(location)
    assert local(ours.metadata_location) == files[-1] and not ours.read_only
    assert await our_ids(location) == ALL_IDS

    # Our commit keeps Java's gzip name, so a Java writer of the next version contends for it.
    await ours.append(_batch(3))
    written = folder / f"v{len(files) + 1}.gz.metadata.json"
    assert local(ours.metadata_location) == written
    assert written.read_bytes()[:2] == b"\x1f\x8b"
    expected = sorted([*ALL_IDS, *range(300, 310)])
    assert await our_ids(location) == expected
    assert pyiceberg_ids(str(written)) == expected
    assert duckdb_ids(str(written)) == expected


# ---------------------------------------------------------------------------------------------
# Time travel binds the filter to the snapshot's own schema


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["snapshot_id", "tag", "as_of"])
async def test_time_travel_filters_on_a_column_dropped_since(tmp_path: Path, how: str) -> None:
    """``b`` existed at the old snapshot and was dropped after it: a filter on ``b`` binds to
    the snapshot's schema (the rows it reads), as PyIceberg and Java do."""
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.int64())])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema)
    await table.append(pa.table({"a": [1, 2, 3], "b": [10, None, 30]}, schema=schema))
    old = table.current_snapshot()
    assert old is not None
    async with table.update_schema() as u:
        u.delete_column("b")
    await table.append(pa.table({"a": [4]}))
    if how == "snapshot_id":
        scan = table.scan(snapshot_id=old.snapshot_id, row_filter="b IS NULL")
    elif how == "tag":
        async with table.manage_snapshots() as ms:
            ms.create_tag("before", old.snapshot_id)
        scan = table.scan(ref="before", row_filter="b IS NULL")
    else:
        scan = table.scan(as_of=old.timestamp_ms, row_filter="b IS NULL")
    rows = (await scan.to_arrow()).to_pylist()
    assert rows == [{"a": 2, "b": None}]
    assert len([t async for t in scan.plan_files()]) == 1
    # the current state has no b: the same filter is an error naming it
    with pytest.raises(aioiceberg.errors.ExpressionError, match="'b'"):
        table.scan(row_filter="b IS NULL")


# ---------------------------------------------------------------------------------------------
# uuid columns in row filters (Arrow has no compute kernels for its uuid extension type)


@pytest.mark.anyio
async def test_uuid_columns_filter_top_level_and_nested_and_delete(tmp_path: Path) -> None:
    import uuid

    ids = [uuid.UUID(int=i * 7919) for i in range(1, 6)]
    inner = pa.struct([pa.field("v", pa.uuid()), pa.field("n", pa.int64())])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("u", pa.uuid()), pa.field("s", inner)])
    data = pa.table(
        {
            "id": [1, 2, 3, 4, 5, 6],
            "u": pa.array([*(x.bytes for x in ids), None], pa.uuid()),
            "s": pa.StructArray.from_arrays(
                [pa.array([*(x.bytes for x in ids), None], pa.uuid()), pa.array([0, 1, 2, 3, 4, 9])],
                fields=list(inner),
            ),
        },
        schema=schema,
    )
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema)
    await table.append(data)

    async def ids_where(text: str) -> list[int]:
        return sorted((await table.scan(row_filter=text).to_arrow()).column("id").to_pylist())

    assert await ids_where(f"u = '{ids[1]}'") == [2]
    assert await ids_where(f"u != '{ids[1]}'") == [1, 3, 4, 5]  # NULL is not returned
    assert await ids_where(f"u IN ('{ids[0]}', '{ids[4]}')") == [1, 5]
    assert await ids_where(f"u > '{ids[2]}'") == [4, 5]
    assert await ids_where("u IS NULL") == [6]
    assert await ids_where(f"s.v = '{ids[3]}'") == [4]
    out = await table.scan(row_filter=f"u = '{ids[1]}'").to_arrow()
    assert out.schema.field("u").type == pa.uuid()  # the result keeps the uuid type
    assert out.column("u").to_pylist() == [ids[1]]
    await table.delete(f"u = '{ids[0]}' OR s.v = '{ids[2]}'")
    assert await ids_where("") == [2, 4, 5, 6]


def test_uuid_initial_defaults_project_top_level_and_inside_a_struct() -> None:
    """A v3 ``initial-default`` of type uuid fills a field the file lacks, with the uuid type,
    also as a struct's child (where a wrong child type fails the whole struct)."""
    import uuid

    from aioiceberg.read.column_projection import project_columns
    from aioiceberg.spec.schema import Schema
    from aioiceberg.spec.types import LongType, NestedField, StructType, UUIDType

    value = uuid.UUID(int=42)
    inner = StructType(
        NestedField(2, "x", LongType()), NestedField(3, "u", UUIDType(), initial_default=value)
    )
    schema = Schema(NestedField(1, "s", inner), NestedField(4, "top", UUIDType(), initial_default=value))
    ids = {b"PARQUET:field_id": b"2"}
    src = pa.StructArray.from_arrays([pa.array([1, 2])], fields=[pa.field("x", pa.int64(), metadata=ids)])
    field = pa.field("s", src.type, metadata={b"PARQUET:field_id": b"1"})
    s, top = project_columns([src], [field], schema, 2)
    assert (
        s.type == pa.struct([pa.field("x", pa.int64()), pa.field("u", pa.uuid())])
        or s.type.field(1).type == pa.uuid()
    )
    assert s.to_pylist() == [{"x": 1, "u": value}, {"x": 2, "u": value}]
    assert top.type == pa.uuid() and top.to_pylist() == [value, value]


async def test_stats_of_a_column_the_name_mapping_no_longer_resolves_do_not_prune(tmp_path: Path) -> None:
    """Class 3: plain Parquet added under a full mapping carries stats for ``b``; once the
    mapping drops ``b`` the read returns it as NULL, so planning, reading and deleting must
    stop believing those stats (``b IS NULL`` matches every row)."""
    import pyarrow.parquet as pq

    from aioiceberg.spec.name_mapping import create_mapping_from_schema, name_mapping_to_json

    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.plain", schema=schema)
    full = create_mapping_from_schema(table.schema())
    async with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": name_mapping_to_json(full)})
    paths = []
    for k in range(2):
        path = tmp_path / f"plain-{k}.parquet"
        pq.write_table(
            pa.table({"a": [k * 10 + i for i in range(5)], "b": [f"v{i}" for i in range(5)]}), path
        )
        paths.append(str(path))
    await table.add_files(paths)
    # under the full mapping the stats hold: no NULL b anywhere, so nothing is planned
    assert [t async for t in table.scan(row_filter="b IS NULL").plan_files()] == []
    assert (await table.scan(row_filter="b = 'v1'").to_arrow()).num_rows == 2

    only_a = [f for f in full if f.names[0] == "a"]
    async with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": name_mapping_to_json(type(full)(only_a))})
    everything = await table.scan().to_arrow()
    assert everything.num_rows == 10 and everything.column("b").null_count == 10
    planned = [t async for t in table.scan(row_filter="b IS NULL").plan_files()]
    assert len(planned) == 2
    assert (await table.scan(row_filter="b IS NULL").to_arrow()).num_rows == 10
    assert (await table.scan(row_filter="b = 'v1'").to_arrow()).num_rows == 0
    assert (await table.scan(row_filter="a >= 12 AND b IS NULL").to_arrow()).num_rows == 3
    # deleting goes by the same rule: the rows the read shows as matching are deleted
    await table.delete("b IS NULL AND a < 10")
    assert sorted((await table.scan().to_arrow()).column("a").to_pylist()) == list(range(10, 15))


# DuckDB's ``column_mapping_delete`` table (data/persistent/name_mapping, its version 3.2): a v1
# table whose one data file has no field ids, the stats written under a full mapping, and then
# every field removed from ``schema.name-mapping.default``. Rebuilt here in that shape.
MAPPING_FILTERS = [
    "a IS NULL AND b IS NULL",
    "a IS NULL",
    "b IS NULL",
    "a IS NOT NULL",
    "b IS NOT NULL",
    "a = 0",
    "b = 0",
    "a < 100 OR b IS NULL",
    "NOT (a IS NULL)",
]


async def test_a_table_whose_mapping_resolves_no_column_reads_every_column_as_null(tmp_path: Path) -> None:
    """``a`` is required and ``b`` optional; with the mapping emptied no column resolves and
    both read as NULL, as the spec says of a column a file lacks and as DuckDB counts, in the
    plan, the filtered rows and the unfiltered read alike (Java fails the read of ``a``)."""
    import pyarrow.parquet as pq
    from maint_helpers import duckdb_connection

    from aioiceberg.spec.name_mapping import create_mapping_from_schema, name_mapping_to_json

    schema = pa.schema([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.int64())])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema, format_version=1)
    assert table.schema().find_field("a").required
    async with table.transaction() as tx:
        full = name_mapping_to_json(create_mapping_from_schema(table.schema()))
        tx.set_properties({"schema.name-mapping.default": full})
    path = tmp_path / "no-ids.parquet"
    n = 10_000
    pq.write_table(pa.table({"a": pa.array(range(n), pa.int32()), "b": [i % 1000 for i in range(n)]}), path)
    await table.add_files([str(path)])
    con = duckdb_connection()

    async def counts(location: str) -> dict[str, tuple[int, int, int]]:
        ours = await aioiceberg.load_table(location)
        out = {}
        for text in MAPPING_FILTERS:
            scan = ours.scan(row_filter=text)
            planned = sum(t.file.record_count for t in [t async for t in scan.plan_files()])
            rows = (await scan.to_arrow()).num_rows
            (duck,) = con.execute(f"SELECT count(*) FROM iceberg_scan('{location}') WHERE {text}").fetchone()
            out[text] = (planned, rows, duck)
        return out

    # under the full mapping: values as written, and the stats prune
    before = await counts(table.metadata_location)
    assert {k: v[1:] for k, v in before.items()} == {k: (v[2], v[2]) for k, v in before.items()}
    assert before["a IS NULL AND b IS NULL"] == (0, 0, 0) and before["a = 0"][1] == 1

    async with table.transaction() as tx:
        tx.set_properties({"schema.name-mapping.default": "[]"})
    after = await counts(table.metadata_location)
    for text, (planned, rows, duck) in after.items():
        assert rows == duck, text
        assert planned >= rows, text  # the plan never drops a row the read returns
    assert after["a IS NULL AND b IS NULL"] == (n, n, n)
    assert after["a IS NOT NULL"][1:] == after["a = 0"][1:] == (0, 0)

    ours = await aioiceberg.load_table(table.metadata_location)
    column_a = await ours.scan(selected_fields=("a",)).to_arrow()
    duck_a = con.execute(
        f"SELECT count(*), count(a) FROM iceberg_scan('{ours.metadata_location}')"
    ).fetchone()
    assert (column_a.num_rows, column_a.num_rows - column_a.column("a").null_count) == duck_a == (n, 0)
    assert column_a.schema.field("a").nullable  # the column the scan returns holds NULLs
    assert ours.schema().find_field("a").required  # the table's schema is unchanged
