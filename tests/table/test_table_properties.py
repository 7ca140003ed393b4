"""Typed table properties through the public API: a bad value is refused where it is set,
raised (naming key, value and what is allowed) where a write or commit needs it, and a
table another engine left with odd values still reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.commit.protocols.commit_point import CommitPoint
from aioiceberg.commit.protocols.dynamodb import DynamoDbOptions
from aioiceberg.errors import InvalidPropertyError, TableNotFoundError, ValidationError
from aioiceberg.spec.properties import PROPERTIES, TableProperties

pytestmark = pytest.mark.anyio

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("cat", pa.string())])


def rows(seed: int, n: int = 10) -> pa.Table:
    return pa.table(
        {"id": [seed * 100 + i for i in range(n)], "cat": [f"c{i % 3}" for i in range(n)]}, schema=SCHEMA
    )


def data_files(root: Path) -> set[Path]:
    return set(root.rglob("*.parquet"))


async def test_create_table_refuses_a_bad_value_naming_key_value_and_allowed(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        with pytest.raises(InvalidPropertyError) as info:
            await catalog.create_table(
                "db.t", SCHEMA, properties={"vendor.knob": "x", "write.target-file-size-bytes": "512MB"}
            )
        assert info.value.key == "write.target-file-size-bytes"
        assert info.value.value == "512MB"
        assert "'512MB'" in str(info.value) and "a positive integer" in str(info.value)
        assert isinstance(info.value, ValidationError) and not info.value.retryable
        with pytest.raises(TableNotFoundError):
            await catalog.load_table("db.t")


async def test_set_properties_refuses_a_bad_value_and_the_table_keeps_the_old_one(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        table = await catalog.create_table("db.t", SCHEMA, properties={"write.delete.mode": "copy-on-write"})
        version = table.metadata_location
        named = r"write\.delete\.mode='merge-on-write'.*merge-on-read"
        with pytest.raises(InvalidPropertyError, match=named):
            await table.set_properties({"write.delete.mode": "merge-on-write"})
        with pytest.raises(
            InvalidPropertyError, match=r"write\.metadata\.metrics\.column\.id='truncate\(0\)'"
        ):
            await table.set_properties({"write.metadata.metrics.column.id": "truncate(0)"})
        with pytest.raises(
            InvalidPropertyError, match=r"commit\.manifest-merge\.enabled='maybe'.*true or false"
        ):
            await table.set_properties({"commit.manifest-merge.enabled": "maybe"})
        reloaded = await catalog.load_table("db.t")
        assert reloaded.metadata_location == version
        assert reloaded.properties["write.delete.mode"] == "copy-on-write"
        assert "write.metadata.metrics.column.id" not in reloaded.properties


async def test_unknown_properties_and_good_values_pass_through_untouched(tmp_path: Path) -> None:
    props = {
        "vendor.knob": "  anything, at all ",
        "write.parquet.compression-codec": "SNAPPY",
        "write.target-file-size-bytes": "1048576",
        "write.metadata.metrics.column.cat": "truncate(4)",
    }
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        table = await catalog.create_table("db.t", SCHEMA, properties=props)
        await table.append(rows(0))
        reloaded = await catalog.load_table("db.t")
        assert {k: reloaded.properties[k] for k in props} == props
        assert (await reloaded.scan().to_arrow()).num_rows == 10
        (file,) = data_files(tmp_path)
        import pyarrow.parquet as pq

        assert pq.ParquetFile(file).metadata.row_group(0).column(0).compression == "SNAPPY"


async def test_a_bad_property_set_by_another_engine_fails_only_the_write_that_needs_it(
    tmp_path: Path,
) -> None:
    location = pyiceberg_table(
        tmp_path,
        {
            "write.target-file-size-bytes": "huge",
            "history.expire.max-snapshot-age-ms": "a week",
            "read.split.target-size": "-1",
        },
    )
    table = await aioiceberg.load_table(location)
    assert not table.read_only
    assert (await table.scan().to_arrow()).num_rows == 10  # reads do not need any of them
    assert table.properties["write.target-file-size-bytes"] == "huge"  # kept as written
    before = data_files(tmp_path)
    with pytest.raises(InvalidPropertyError, match=r"write\.target-file-size-bytes='huge'") as info:
        await table.append(rows(1))
    assert info.value.key == "write.target-file-size-bytes"
    assert data_files(tmp_path) == before
    with pytest.raises(InvalidPropertyError, match=r"history\.expire\.max-snapshot-age-ms='a week'"):
        await table.expire_snapshots()
    await table.expire_snapshots(older_than=0)  # given explicitly, the property is not needed
    # Fixing the property through our API makes the table writable again.
    await table.set_properties({"write.target-file-size-bytes": str(64 * 1024 * 1024)})
    await table.append(rows(1))
    assert (await (await aioiceberg.load_table(location)).scan().to_arrow()).num_rows == 20


async def test_a_bad_commit_property_fails_the_commit_and_leaves_no_files(tmp_path: Path) -> None:
    location = pyiceberg_table(tmp_path, {"commit.retry.num-retries": "many"})
    table = await aioiceberg.load_table(location)
    before = data_files(tmp_path)
    named = r"commit\.retry\.num-retries='many'.*non-negative integer"
    with pytest.raises(InvalidPropertyError, match=named):
        await table.append(rows(1))
    assert data_files(tmp_path) == before
    assert (await aioiceberg.load_table(location)).metadata_location == table.metadata_location


async def test_a_bad_delete_mode_fails_the_delete_that_needs_it(tmp_path: Path) -> None:
    location = pyiceberg_table(tmp_path, {"write.delete.mode": "merge-on-whenever"})
    table = await aioiceberg.load_table(location)
    await table.delete("id = 999")  # no file holds it: no rewrite, so the mode is not needed
    assert (await table.scan().to_arrow()).num_rows == 10
    with pytest.raises(InvalidPropertyError, match=r"write\.delete\.mode='merge-on-whenever'"):
        await table.delete("id = 3")


def test_every_property_has_a_default_its_parser_accepts() -> None:
    props = TableProperties()
    for key, prop in PROPERTIES.items():
        assert props.get(prop) == prop.default, key
        assert not props.is_set(prop)


def test_a_property_is_parsed_once_and_the_object_is_frozen() -> None:
    props = TableProperties({"schema.name-mapping.default": '[{"field-id": 1, "names": ["id"]}]'})
    assert props.name_mapping is props.name_mapping
    with pytest.raises(AttributeError):
        props.raw = {}  # type: ignore[misc]


@pytest.mark.parametrize(
    ("uri", "named"),
    [
        ("dynamodb://commits?mode=lese", "mode='lese'"),
        ("dynamodb://commits?mdoe=lease", "unknown option mdoe='lease'"),
        ("dynamodb://commits?lease_ms=10s", "lease_ms='10s'"),
        ("dynamodb://commits?create_table=nope", "create_table='nope'"),
        ("dynamodb://commits?mode=lease&mode=commit", "repeated option mode"),
    ],
)
def test_a_commit_point_uri_with_an_unknown_option_or_value_is_refused(uri: str, named: str) -> None:
    for parse in (CommitPoint.parse, DynamoDbOptions.from_uri):
        with pytest.raises(InvalidPropertyError, match=named) as info:
            parse(uri)
        assert "mode, lease_ms, create_table, endpoint, region" in str(info.value) or info.value.key in str(
            info.value
        )


async def test_connect_with_a_misspelt_lock_option_fails_before_any_commit(tmp_path: Path) -> None:
    with pytest.raises(InvalidPropertyError, match=r"'commit' or 'lease'"):
        aioiceberg.connect(str(tmp_path), lock="dynamodb://commits?mode=lese")


# -- a table written by PyIceberg --------------------------------------------------------------


def pyiceberg_table(root: Path, odd: dict[str, str]) -> str:
    """A v2 table PyIceberg created, appended to, and then gave ``odd`` properties (PyIceberg
    stores any string); its metadata files renamed v1..vN so that we can commit to it."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog: Any = SqlCatalog("peer", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA, properties={"format-version": "2"})
    table.append(rows(0))
    with table.transaction() as tx:
        tx.set_properties(odd)
    table = catalog.load_table("db.t")
    folder = Path(urlparse(table.metadata_location).path).parent
    for i, path in enumerate(sorted(folder.glob("*.metadata.json"))):
        path.rename(folder / f"v{i + 1}.metadata.json")
    return str(Path(urlparse(table.location()).path))


@pytest.mark.anyio
async def test_write_metadata_path_takes_manifests_lists_and_statistics(tmp_path: Path) -> None:
    """``write.metadata.path`` moves every new metadata object but the warehouse version files
    (the commit point readers find in ``{location}/metadata``); PyIceberg reads the result."""
    from pyiceberg.table import StaticTable

    elsewhere = tmp_path / "meta-elsewhere"
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table(
            "db.t", schema=rows(0).schema, properties={"write.metadata.path": str(elsewhere)}
        )
        await table.append(rows(0))
        await table.append(rows(1))
        await table.compute_statistics()
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.manifest_list is not None
        assert snapshot.manifest_list.startswith(f"{elsewhere}/snap-")
        objects = {p.name for p in elsewhere.iterdir()}
        assert any(n.endswith("-m0.avro") for n in objects) and any(n.endswith(".stats") for n in objects)
        assert not list((tmp_path / "wh/db/t/metadata").glob("*.avro"))
        expected = pa.concat_tables([rows(0), rows(1)]).sort_by("id")
        assert (await table.scan().to_arrow()).sort_by("id") == expected
        peer = StaticTable.from_metadata(table.metadata_location)
        assert peer.scan().to_arrow().sort_by("id") == expected
