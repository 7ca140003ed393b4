"""The warehouse catalog: namespaces with properties, listing, rename (local) and drop, with and
without purge, checked against what is left on the store."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.errors import (
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "region": [["eu", "us"][i % 2] for i in range(start, start + n)],
        }
    )


def files_under(path: Path) -> list[str]:
    return sorted(
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(".aioiceberg")
    )


@pytest.mark.anyio
async def test_namespaces_keep_properties_and_list_beside_implicit_ones(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        await catalog.create_namespace("sales", {"owner": "ana", "tier": "gold"})
        await catalog.create_namespace("sales.eu")
        await catalog.create_table("ops.logs", SCHEMA)  # "ops" exists only through its table
        with pytest.raises(NamespaceAlreadyExistsError):
            await catalog.create_namespace("sales")
        with pytest.raises(NamespaceAlreadyExistsError):
            await catalog.create_namespace("ops")

        assert await catalog.list_namespaces() == ["ops", "sales"]
        assert await catalog.list_namespaces("sales") == ["sales.eu"]
        assert await catalog.load_namespace_properties("sales") == {"owner": "ana", "tier": "gold"}
        assert await catalog.load_namespace_properties("ops") == {}
        with pytest.raises(NamespaceNotFoundError):
            await catalog.load_namespace_properties("nope")

        updated = await catalog.update_namespace_properties("sales", removals=["tier"], updates={"pii": "no"})
        assert updated == {"owner": "ana", "pii": "no"}
        assert await catalog.load_namespace_properties("sales") == updated
        await catalog.update_namespace_properties("ops", updates={"team": "sre"})
        assert await catalog.load_namespace_properties("ops") == {"team": "sre"}

        with pytest.raises(NamespaceNotEmptyError, match=r"sales\.eu"):
            await catalog.drop_namespace("sales")
        await catalog.drop_namespace("sales.eu")
        await catalog.drop_namespace("sales")
        assert await catalog.list_namespaces() == ["ops"]
        with pytest.raises(NamespaceNotFoundError):
            await catalog.drop_namespace("sales")
        with pytest.raises(ValidationError):
            await catalog.create_namespace("ops.logs")  # a table's name


@pytest.mark.anyio
async def test_list_tables_shows_only_direct_children(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        for name in ("db.b", "db.a", "db.sub.c", "other.d"):
            await catalog.create_table(name, SCHEMA)
        assert await catalog.list_tables("db") == ["db.a", "db.b"]
        assert await catalog.list_tables("db.sub") == ["db.sub.c"]
        assert await catalog.list_namespaces() == ["db", "other"]
        assert await catalog.list_namespaces("db") == ["db.sub"]


@pytest.mark.anyio
async def test_rename_on_local_moves_the_directory_and_keeps_every_snapshot_readable(
    tmp_path: Path,
) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.old", SCHEMA, partition_by=["region"])
        await table.append(rows(0, 10))
        first = table.current_snapshot()
        await table.append(rows(10, 5))
        await catalog.create_table("db.taken", SCHEMA)
        with pytest.raises(TableAlreadyExistsError):
            await catalog.rename_table("db.old", "db.taken")
        with pytest.raises(TableNotFoundError):
            await catalog.rename_table("db.missing", "db.new")

        moved = await catalog.rename_table("db.old", "archive.new")
        assert not (tmp_path / "wh" / "db" / "old").exists()
        assert await catalog.list_tables("db") == ["db.taken"]
        assert await catalog.list_tables("archive") == ["archive.new"]
        assert moved.location == str(tmp_path / "wh" / "archive" / "new")
        assert (await moved.scan().to_arrow()).num_rows == 15
        assert first is not None
        assert (await moved.scan(snapshot_id=first.snapshot_id).to_arrow()).num_rows == 10
        await moved.append(rows(15, 1))  # and it still commits
        text = "".join(p.read_text() for p in (tmp_path / "wh" / "archive").rglob("*.metadata.json"))
        assert "/db/old" not in text


@pytest.mark.anyio
async def test_rename_on_s3_is_refused_with_the_reason(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    async with aioiceberg.connect(
        f"s3://{bucket}/wh", storage_options=s3_storage_options(moto_endpoint)
    ) as c:
        await c.create_table("db.t", SCHEMA)
        with pytest.raises(UnsupportedError, match="copying every file"):
            await c.rename_table("db.t", "db.u")


@pytest.mark.anyio
async def test_drop_without_purge_unregisters_and_keeps_data_and_latest_metadata(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.t", SCHEMA)
        await table.append(rows(0, 7))
        await table.append(rows(7, 3))
        location = tmp_path / "wh" / "db" / "t"
        before = files_under(location)

        kept = await catalog.drop_table("db.t")

        assert kept is not None and kept.endswith(".metadata.json") and "00003-dropped-" in kept
        after = files_under(location)
        removed = {"metadata/v1.metadata.json", "metadata/v2.metadata.json", "metadata/v3.metadata.json"}
        assert set(before) - set(after) == removed | {"metadata/version-hint.text"}
        assert set(after) - set(before) == {os.path.relpath(kept, location)}
        assert [f for f in after if f.startswith("data/")] == [f for f in before if f.startswith("data/")]
        assert not await catalog.namespace_exists("db")  # it held only what was dropped
        assert not await catalog.table_exists("db.t")
        with pytest.raises(TableNotFoundError):
            await catalog.load_table("db.t")
        with pytest.raises(TableNotFoundError):
            await catalog.drop_table("db.t")

        # still readable by its kept metadata file or its location (read-only) ...
        assert (await (await aioiceberg.load_table(kept)).scan().to_arrow()).num_rows == 10
        by_location = await aioiceberg.load_table(str(location))
        assert by_location.read_only and (await by_location.scan().to_arrow()).num_rows == 10
        # ... and registering it undoes the drop
        back = await catalog.register_table("db.t", kept)
        assert (await back.scan().to_arrow()).num_rows == 10
        await back.append(rows(10, 1))
        assert (await (await catalog.load_table("db.t")).scan().to_arrow()).num_rows == 11
        with pytest.raises(ValidationError, match="belongs to the table at"):
            await catalog.register_table("db.elsewhere", kept)


@pytest.mark.anyio
async def test_drop_with_purge_deletes_everything_under_the_location(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.t", SCHEMA, partition_by=["region"])
        await table.append(rows(0, 10))
        await catalog.create_table("db.keep", SCHEMA)
        assert await catalog.drop_table("db.t", purge=True) is None
        assert files_under(tmp_path / "wh" / "db" / "t") == []
        assert files_under(tmp_path / "wh" / "db") == [
            "keep/metadata/v1.metadata.json",
            "keep/metadata/version-hint.text",
        ]
        # the name is free again
        again = await catalog.create_table("db.t", SCHEMA)
        assert again.version == 1 and again.current_snapshot() is None


@pytest.mark.anyio
async def test_a_drop_that_stopped_midway_blocks_create_until_dropped_again(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        table = await catalog.create_table("db.t", SCHEMA)
        await table.append(rows(0, 2))
        meta = tmp_path / "wh" / "db" / "t" / "metadata"
        (meta / "version-hint.text").unlink()
        (meta / "v1.metadata.json").unlink()  # as if the drop crashed after deleting v1
        assert not await catalog.table_exists("db.t")
        with pytest.raises(TableAlreadyExistsError, match="drop it again"):
            await catalog.create_table("db.t", SCHEMA)
        await catalog.drop_table("db.t")
        assert sorted(p.name for p in meta.glob("v*.metadata.json")) == []
        await catalog.create_table("db.t", SCHEMA)


@pytest.mark.anyio
async def test_drop_on_s3_leaves_only_what_is_documented(moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    root = f"s3://{bucket}/wh"
    async with aioiceberg.connect(root, storage_options=s3_storage_options(moto_endpoint)) as catalog:
        for name in ("db.a", "db.b"):
            table = await catalog.create_table(name, SCHEMA)
            await table.append(rows(0, 4))
        kept = await catalog.drop_table("db.a")
        await catalog.drop_table("db.b", purge=True)
        left = sorted([info.location async for info in catalog.io.list(f"{root}/db/")])
        assert kept in left
        assert not any(p.startswith(f"{root}/db/b/") for p in left)
        assert not any(p.rsplit("/", 1)[-1].startswith("v") and "metadata.json" in p for p in left)
        assert any(p.startswith(f"{root}/db/a/data/") for p in left)
        assert not await catalog.namespace_exists("db")  # it held only what was dropped


@pytest.mark.anyio
async def test_the_format_version_property_picks_the_version_and_is_not_stored(tmp_path: Path) -> None:
    """As in PyIceberg and Java: ``format-version`` is a reserved property that chooses the version."""
    catalog = aioiceberg.connect(str(tmp_path))
    schema = pa.schema([("id", pa.int64())])
    for version in (1, 3):
        table = await catalog.create_table(
            f"db.v{version}", schema=schema, properties={"format-version": str(version)}
        )
        reread = await aioiceberg.load_table(table.location)
        assert reread.metadata.format_version == version
        assert "format-version" not in reread.properties
    with pytest.raises(ValidationError, match="'format-version' must be 1, 2 or 3, not 'x'"):
        await catalog.create_table("db.bad", schema=schema, properties={"format-version": "x"})
    with pytest.raises(ValidationError, match="disagree"):
        await catalog.create_table(
            "db.both", schema=schema, properties={"format-version": "1"}, format_version=3
        )
    assert sorted(await catalog.list_tables("db")) == ["db.v1", "db.v3"]  # nothing left of the refused ones
