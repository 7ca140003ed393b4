"""One table, one commit point: every load path commits through the one the table records."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import ARROW_SCHEMA, rows, s3_options
from servers.backends import create_bucket

import aioiceberg
from aioiceberg import sync
from aioiceberg.commit.protocols.base import version_path
from aioiceberg.commit.protocols.commit_point import (
    COMMIT_POINT_PROPERTY,
    CommitPoint,
    commit_point_of,
)
from aioiceberg.commit.protocols.conditional import ConditionalWriteProtocol
from aioiceberg.commit.protocols.dynamodb import DynamoDbProtocol
from aioiceberg.errors import CommitPointMismatchError, ReadOnlyTableError, ValidationError
from aioiceberg.spec.metadata import MetadataLogEntry

pytestmark = pytest.mark.usefixtures("aws_clients_closed")


async def _dynamodb_table(endpoint: str) -> tuple[aioiceberg.Catalog, str, dict[str, Any]]:
    bucket = await create_bucket(endpoint)
    lock = f"dynamodb://commits_{uuid.uuid4().hex[:8]}"
    options = s3_options(endpoint)
    catalog = aioiceberg.connect(f"s3://{bucket}/wh", lock=lock, storage_options=options)
    table = await catalog.create_table("db.t", schema=ARROW_SCHEMA)
    await table.append(rows("a", 0))
    return catalog, lock, options


def _ids(table: Any) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.anyio
async def test_dynamodb_table_loaded_by_location_commits_through_dynamodb(moto_endpoint: str) -> None:
    catalog, lock, options = await _dynamodb_table(moto_endpoint)
    location = catalog.table_location("db.t")
    by_location = await aioiceberg.load_table(location, options)
    assert isinstance(by_location.protocol, DynamoDbProtocol)
    assert by_location.properties[COMMIT_POINT_PROPERTY] == lock
    await by_location.append(rows("b", 10))

    # the catalog sees the append made by location, and its next append builds on it
    through_catalog = await catalog.load_table("db.t")
    assert through_catalog.version == 3
    await through_catalog.append(rows("c", 20))
    again = await aioiceberg.load_table(location, options)
    history = again.history()
    assert len(history) == 3
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]
    assert _ids(await again.scan().to_arrow()) == [0, 1, 2, 10, 11, 12, 20, 21, 22]


@pytest.mark.anyio
async def test_blocking_load_by_location_of_a_dynamodb_table_commits_through_it(moto_endpoint: str) -> None:
    catalog, _, options = await _dynamodb_table(moto_endpoint)
    location = catalog.table_location("db.t")
    # from another thread's loop, as a script would
    import anyio.to_thread

    def append_blocking() -> None:
        table = sync.load_table(location, options)
        table.append(rows("b", 10))

    await anyio.to_thread.run_sync(append_blocking)
    table = await catalog.load_table("db.t")
    assert table.version == 3 and len(table.snapshots()) == 2


@pytest.mark.anyio
async def test_dynamodb_table_by_location_without_dynamodb_is_read_only_and_says_which_option(
    moto_endpoint: str,
) -> None:
    catalog, lock, options = await _dynamodb_table(moto_endpoint)
    location = catalog.table_location("db.t")
    # a DynamoDB endpoint that holds no commit table of that name: the table must not be adopted
    other = {**options, "dynamodb.endpoint": moto_endpoint.replace("127.0.0.1", "localhost")}
    other["dynamodb.region"] = "eu-west-3"
    table = await aioiceberg.load_table(location, other)
    assert table.read_only
    assert _ids(await table.scan().to_arrow()) == [0, 1, 2]
    with pytest.raises(ReadOnlyTableError, match=f"lock='{lock}'"):
        await table.append(rows("b", 10))
    assert (await catalog.load_table("db.t")).version == 2


@pytest.mark.anyio
async def test_dynamodb_table_by_metadata_file_is_read_only(moto_endpoint: str) -> None:
    catalog, _, options = await _dynamodb_table(moto_endpoint)
    table = await catalog.load_table("db.t")
    for metadata_file in (table.metadata_location, version_path(table.location, table.version)):
        static = await aioiceberg.load_table(metadata_file, options)
        assert static.read_only
        with pytest.raises(ReadOnlyTableError, match="metadata file"):
            await static.append(rows("b", 10))
    assert (await catalog.load_table("db.t")).version == 2


@pytest.mark.anyio
async def test_conditional_table_opened_through_a_dynamodb_catalog_keeps_its_commit_point(
    moto_endpoint: str,
) -> None:
    bucket = await create_bucket(moto_endpoint)
    options = s3_options(moto_endpoint)
    plain = aioiceberg.connect(f"s3://{bucket}/wh", storage_options=options)
    table = await plain.create_table("db.t", schema=ARROW_SCHEMA)
    assert table.properties[COMMIT_POINT_PROPERTY] == "conditional-writes"
    lock = f"dynamodb://commits_{uuid.uuid4().hex[:8]}"
    locked = aioiceberg.connect(f"s3://{bucket}/wh", lock=lock, storage_options=options)
    through_lock = await locked.load_table("db.t")
    assert isinstance(through_lock.protocol, ConditionalWriteProtocol)
    await through_lock.append(rows("a", 0))
    by_location = await aioiceberg.load_table(table.location, options, lock=lock)
    assert isinstance(by_location.protocol, ConditionalWriteProtocol)
    await by_location.append(rows("b", 10))
    await table.refresh()
    assert table.version == 3 and len(table.snapshots()) == 2


@pytest.mark.anyio
async def test_a_protocol_refuses_to_commit_a_table_that_names_another(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=ARROW_SCHEMA)
    async with table.transaction() as tx:
        tx.set_properties({"note": "x"})
    forged = table.metadata.replace(
        properties={**table.properties, COMMIT_POINT_PROPERTY: "dynamodb://elsewhere"}
    )
    from aioiceberg.commit.protocols.base import TableState

    with pytest.raises(CommitPointMismatchError, match="dynamodb://elsewhere"):
        await table.protocol.commit_table(  # type: ignore[union-attr]
            TableState(forged, table.metadata_location, table.version), [], []
        )
    assert (await catalog.load_table("db.t")).version == table.version


def test_commit_point_values() -> None:
    assert str(CommitPoint.parse("dynamodb://T?mode=lease&endpoint=http://x")) == "dynamodb://T?mode=lease"
    assert CommitPoint.parse("dynamodb://T").same_as(CommitPoint("dynamodb", None))
    assert not CommitPoint.parse("dynamodb://T").same_as(CommitPoint.parse("dynamodb://U"))
    with pytest.raises(ValidationError, match="lese"):
        CommitPoint.parse("dynamodb://T?mode=lese")
    with pytest.raises(ValidationError, match="unknown commit point"):
        CommitPoint.parse("glue")


@pytest.mark.anyio
async def test_a_table_committed_through_dynamodb_before_the_property_is_recognised(tmp_path: Path) -> None:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=ARROW_SCHEMA)
    old_file = f"{table.location}/metadata/00001-{uuid.uuid4().hex}.metadata.json"
    legacy = table.metadata.replace(
        properties={},
        metadata_log=(MetadataLogEntry(old_file, 1),),
    )
    point = commit_point_of(legacy)
    assert point is not None and point.kind == "dynamodb" and point.table is None
    assert commit_point_of(table.metadata.replace(properties={})) is None


@pytest.mark.anyio
async def test_orphan_removal_keeps_what_the_dynamodb_protocol_writes_for_readers(moto_endpoint: str) -> None:
    import datetime as dt

    from maint_helpers import duckdb_ids
    from pyiceberg.table import StaticTable

    catalog, _, options = await _dynamodb_table(moto_endpoint)
    table = await catalog.load_table("db.t")
    for i in range(1, 4):
        await table.append(rows("a", 10 * i))
    stale = await aioiceberg.load_table(table.location, options)
    await table.append(rows("a", 40))
    removed = await stale.remove_orphan_files(older_than=dt.timedelta(0))
    # works from the latest version, whatever version the object was loaded at
    assert not any(p.endswith(".parquet") or p.endswith(".avro") for p in removed), removed
    assert version_path(table.location, table.version) not in removed
    expected = sorted(10 * i + j for i in range(5) for j in range(3))
    static = StaticTable.from_metadata(table.location, properties=_pyiceberg_s3(moto_endpoint))
    assert _ids(static.scan().to_arrow()) == expected
    assert duckdb_ids(table.location, moto_endpoint) == expected
    by_location = await aioiceberg.load_table(table.location, options)
    assert not by_location.read_only and _ids(await by_location.scan().to_arrow()) == expected


def _pyiceberg_s3(endpoint: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }


@pytest.mark.anyio
async def test_orphan_removal_removes_a_killed_writers_temp_files(tmp_path: Path) -> None:
    import datetime as dt
    import os

    from aioiceberg.io.local import TMP_PREFIX

    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=ARROW_SCHEMA)
    await table.append(rows("a", 0))
    metadata = os.path.join(table.location, "metadata")
    leftovers = [os.path.join(metadata, f"{TMP_PREFIX}dead{i}") for i in range(3)]
    for path in leftovers:
        with open(path, "wb") as f:
            f.write(b"half a metadata file")
    recent = os.path.join(table.location, "data", f"{TMP_PREFIX}inflight")
    with open(recent, "wb") as f:
        f.write(b"x")
    old = 1_000_000_000
    for path in leftovers:
        os.utime(path, (old, old))
    assert sorted(await table.remove_orphan_files(older_than=dt.timedelta(days=1))) == sorted(leftovers)
    assert not any(os.path.exists(p) for p in leftovers)
    assert os.path.exists(recent)  # too young: may be a write in flight
    assert _ids(await (await catalog.load_table("db.t")).scan().to_arrow()) == [0, 1, 2]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["local", "dynamodb"])
async def test_orphan_removal_brings_readers_by_location_to_the_latest_version(
    protocol: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A writer killed after its commit point but before the version hint (and, on DynamoDB,
    the ``v{N}`` copy) leaves readers by location one version behind: maintenance repairs it."""
    import datetime as dt

    from maint_helpers import duckdb_ids
    from pyiceberg.table import StaticTable

    from aioiceberg.commit.protocols.base import version_hint_path

    endpoint: str | None = None
    if protocol == "local":
        catalog = aioiceberg.connect(str(tmp_path / "wh"))
        table = await catalog.create_table("db.t", schema=ARROW_SCHEMA)
        await table.append(rows("a", 0))
        options: dict[str, Any] = {}
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        assert endpoint is not None
        catalog, _, options = await _dynamodb_table(endpoint)
        table = await catalog.load_table("db.t")
    await table.append(rows("a", 10))
    # the crash: the hint still names the version before, and DynamoDB's copy is missing
    await table.io.write(version_hint_path(table.location), str(table.version - 1).encode())
    if protocol == "dynamodb":
        await table.io.delete(version_path(table.location, table.version))
    py_props = {} if endpoint is None else _pyiceberg_s3(endpoint)
    stale = StaticTable.from_metadata(table.location, properties=py_props)
    assert _ids(stale.scan().to_arrow()) == [0, 1, 2]  # the crash is real for readers by location

    await table.remove_orphan_files(older_than=dt.timedelta(0))
    expected = [0, 1, 2, 10, 11, 12]
    latest = StaticTable.from_metadata(table.location, properties=py_props)
    assert _ids(latest.scan().to_arrow()) == expected
    assert duckdb_ids(table.location, endpoint) == expected
    by_location = await aioiceberg.load_table(table.location, options or None)
    assert not by_location.read_only and by_location.version == table.version


@pytest.mark.anyio
@pytest.mark.parametrize("purge", [False, True])
async def test_dropping_a_dynamodb_table_forgets_its_items_so_the_name_starts_afresh(
    moto_endpoint: str, purge: bool
) -> None:
    catalog, _, _ = await _dynamodb_table(moto_endpoint)
    protocol = catalog.protocol
    assert isinstance(protocol, DynamoDbProtocol)
    location = catalog.table_location("db.t")
    assert await protocol.dynamo.latest(protocol.table_id(location)) is not None
    await catalog.drop_table("db.t", purge=purge)
    assert await protocol.dynamo.latest(protocol.table_id(location)) is None
    again = await catalog.create_table("db.t", schema=ARROW_SCHEMA)  # version 1 again
    await again.append(rows("b", 10))
    assert again.version == 2
    assert _ids(await (await catalog.load_table("db.t")).scan().to_arrow()) == [10, 11, 12]
    await catalog.aclose()


@pytest.mark.anyio
async def test_renaming_is_refused_where_the_commit_point_cannot_follow_the_files(
    moto_endpoint: str, tmp_path: Path
) -> None:
    from aioiceberg.errors import UnsupportedError

    lock = f"dynamodb://commits_{uuid.uuid4().hex[:8]}"
    async with aioiceberg.connect(
        str(tmp_path / "wh"), lock=lock, storage_options=s3_options(moto_endpoint)
    ) as c:
        await c.create_table("db.t", schema=ARROW_SCHEMA)
        with pytest.raises(UnsupportedError, match="does not move with the files"):
            await c.rename_table("db.t", "db.u")
        assert await c.table_exists("db.t") and not await c.table_exists("db.u")
