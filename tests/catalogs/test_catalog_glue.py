"""The Glue catalog against moto's Glue and S3 (one moto server, a bucket and a database per
test), with PyIceberg's GlueCatalog as the other engine and DuckDB as an independent reader.

moto implements Glue but does not enforce ``VersionId`` on UpdateTable (a stale id is
accepted: ``test_moto_glue_ignores_a_stale_version_id`` shows it). So what real Glue
guarantees across processes (a writer that read version N loses if the table moved) cannot
be shown here; these tests cover what does not depend on it: the check that the table still
points at the commit's base before UpdateTable (a stale writer rebases), writers of one
process taking turns, and UpdateTable calls that get no answer.
"""

from __future__ import annotations

from typing import Any

import anyio
import pyarrow as pa
import pytest
from glue_helpers import fresh_database, glue_catalog, glue_database, glue_entry, glue_options
from maint_helpers import duckdb_ids
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy

import aioiceberg
from aioiceberg import sync
from aioiceberg.catalogs.glue import GlueOptions, GluePointer
from aioiceberg.commit.protocols.commit_point import COMMIT_POINT_PROPERTY
from aioiceberg.commit.protocols.pointer_swap import Pointer
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    InvalidPropertyError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotFoundError,
    ReadOnlyTableError,
    TableAlreadyExistsError,
    TableNotFoundError,
    ValidationError,
)
from aioiceberg.spec.types import DoubleType

pytestmark = pytest.mark.usefixtures("aws_clients_closed")

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _rows(ids: list[int], prefix: str = "n") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{prefix}{i}" for i in ids]}, schema=SCHEMA)


def _pyiceberg(endpoint: str, warehouse: str) -> Any:
    from pyiceberg.catalog.glue import GlueCatalog as PyGlueCatalog

    credentials = {"access-key-id": "testing", "secret-access-key": "testing", "region": "us-east-1"}
    return PyGlueCatalog(
        "py",
        **{"glue.endpoint": endpoint, "s3.endpoint": endpoint, "warehouse": warehouse},
        **{f"glue.{k}": v for k, v in credentials.items()},
        **{f"s3.{k}": v for k, v in credentials.items()},
    )


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.sort_by("id").to_pylist()
    return rows


def _is_linear(table: aioiceberg.Table) -> None:
    history = table.history()
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]


# -- with PyIceberg ------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_pyiceberg_table_we_append_delete_and_evolve_reads_back_in_pyiceberg(
    moto_endpoint: str,
) -> None:
    catalog, warehouse = await glue_catalog(moto_endpoint)
    py = _pyiceberg(moto_endpoint, warehouse)
    db = fresh_database()
    py.create_namespace(db)
    py_table = py.create_table(f"{db}.t", schema=SCHEMA)
    py_table.append(_rows([1, 2, 3, 4, 5]))

    async with catalog:
        table = await catalog.load_table(f"{db}.t")
        assert table.location == f"{warehouse}/{db}.db/t"  # PyIceberg's Hive-style default
        await table.append(_rows([6, 7]))
        await table.delete("id = 3")
        async with table.update_schema() as update:
            update.add_column("score", DoubleType())
        with_score = pa.table(
            {"id": pa.array([8], pa.int64()), "name": ["n8"], "score": pa.array([0.5], pa.float64())}
        )
        await table.append(with_score)
        entry = await glue_entry(catalog, db, "t")

    assert table.properties[COMMIT_POINT_PROPERTY] == "catalog:glue"
    parameters = entry["Parameters"]
    assert parameters["metadata_location"] == table.metadata_location
    assert parameters["previous_metadata_location"] == table.metadata.metadata_log[-1].metadata_file
    assert [c["Name"] for c in entry["StorageDescriptor"]["Columns"]] == ["id", "name", "score"]
    assert entry["StorageDescriptor"]["Columns"][2]["Type"] == "double"

    result = py.load_table(f"{db}.t").scan().to_arrow()
    assert result.column_names == ["id", "name", "score"]
    expected = [{"id": i, "name": f"n{i}", "score": None} for i in (1, 2, 4, 5, 6, 7)]
    assert _sorted(result) == [*expected, {"id": 8, "name": "n8", "score": 0.5}]


@pytest.mark.anyio
async def test_our_namespace_and_partitioned_table_are_pyicebergs_too(moto_endpoint: str) -> None:
    catalog, warehouse = await glue_catalog(moto_endpoint)
    db = fresh_database()
    async with catalog:
        await catalog.create_namespace(db, {"owner": "team-a", "Description": "events of team a"})
        table = await catalog.create_table(f"{db}.t", schema=SCHEMA, partition_by=["bucket(4, id)"])
        await table.append(_rows([1, 2, 3]))
        entry = await glue_entry(catalog, db, "t")

        py = _pyiceberg(moto_endpoint, warehouse)
        assert (db,) in py.list_namespaces()
        assert py.load_namespace_properties(db) == {"owner": "team-a", "Description": "events of team a"}
        assert py.list_tables(db) == [(db, "t")]
        py_table = py.load_table(f"{db}.t")
        assert py_table.location() == table.location == f"{warehouse}/{db}.db/t"
        assert py_table.spec().fields[0].transform.__class__.__name__ == "BucketTransform"
        py_table.append(_rows([4, 5], prefix="p"))

        ours = await catalog.load_table(f"{db}.t")
        expected = [*_rows([1, 2, 3]).to_pylist(), *_rows([4, 5], prefix="p").to_pylist()]
        assert _sorted(await ours.scan().to_arrow()) == expected
        assert _sorted(py.load_table(f"{db}.t").scan().to_arrow()) == expected
        assert duckdb_ids(ours.metadata_location, moto_endpoint) == [1, 2, 3, 4, 5]
        _is_linear(ours)

        # and we commit again on top of PyIceberg's commit
        await ours.append(_rows([6]))
        assert len(py.load_table(f"{db}.t").scan().to_arrow()) == 6

    assert entry["TableType"] == "EXTERNAL_TABLE"
    assert entry["Parameters"]["table_type"] == "ICEBERG"
    assert entry["StorageDescriptor"]["Location"] == table.location
    columns = entry["StorageDescriptor"]["Columns"]
    assert [(c["Name"], c["Type"], c["Parameters"]["iceberg.field.optional"]) for c in columns] == [
        ("id", "bigint", "false"),
        ("name", "string", "true"),
    ]


# -- concurrency ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_stale_writer_rebases_on_the_commit_it_missed(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, warehouse, db):
        # without the in-process turn the stale writer starts its commit from what it loaded
        await catalog.create_table(f"{db}.t", schema=SCHEMA, properties={"commit.in-process-lock": "false"})
        stale = await catalog.load_table(f"{db}.t")
        py = _pyiceberg(moto_endpoint, warehouse)
        py.load_table(f"{db}.t").append(_rows([1, 2], prefix="p"))  # the writer it missed

        await stale.append(_rows([3, 4]))
        assert stale.last_commit.attempts == 2  # refused once (the pointer moved), then rebased

        table = await catalog.load_table(f"{db}.t")
        assert [r["id"] for r in _sorted(await table.scan().to_arrow())] == [1, 2, 3, 4]
        assert len(table.snapshots()) == 2
        _is_linear(table)
        # the refused attempt's metadata file was deleted: one file per version
        names = [i.location async for i in table.io.list(f"{table.location}/metadata/")]
        assert len([n for n in names if n.endswith(".metadata.json")]) == table.version + 1 == 3


@pytest.mark.anyio
async def test_moto_glue_ignores_a_stale_version_id(moto_endpoint: str) -> None:
    """Why the cross-process race is not tested here: real Glue would refuse the second
    UpdateTable (ConcurrentModificationException), moto applies it."""
    async with glue_database(moto_endpoint) as (catalog, _, db):
        await catalog.glue.write("create_table", DatabaseName=db, TableInput={"Name": "plain"})
        version = (await glue_entry(catalog, db, "plain"))["VersionId"]
        for value in ("1", "2"):
            table_input = {"Name": "plain", "Parameters": {"v": value}}
            await catalog.glue.write(
                "update_table", DatabaseName=db, TableInput=table_input, VersionId=version
            )
        assert (await glue_entry(catalog, db, "plain"))["Parameters"] == {"v": "2"}


@pytest.mark.anyio
async def test_swap_from_a_moved_pointer_is_refused_before_update_table(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, _, db):
        table = await catalog.create_table(f"{db}.t", schema=SCHEMA)
        first = table.metadata_location
        await table.append(_rows([1]))
        pointer = catalog.pointer((db,), "t")
        assert isinstance(pointer, GluePointer)
        with pytest.raises(CommitFailedError, match=f"glue table {db}.t moved on"):
            await pointer.swap(
                Pointer(first), f"{table.location}/metadata/00009-x.metadata.json", table.metadata
            )
        assert (await glue_entry(catalog, db, "t"))["Parameters"][
            "metadata_location"
        ] == table.metadata_location


def _update_table(request: Any) -> bool:
    return bool(request.headers.get("X-Amz-Target", "").endswith(".UpdateTable"))


@pytest.mark.anyio
async def test_update_table_without_an_answer_is_settled_by_reading_back(
    moto_endpoint: str, fault_proxy: FaultProxy
) -> None:
    warehouse = f"s3://{await create_bucket(moto_endpoint)}/wh"
    options = {**s3_storage_options(moto_endpoint), "glue.endpoint": fault_proxy.url}
    db = fresh_database()
    async with aioiceberg.connect("glue://", warehouse=warehouse, storage_options=options) as catalog:
        await catalog.create_namespace(db)
        table = await catalog.create_table(f"{db}.t", schema=SCHEMA)

        # applied, answer lost: the read-back finds our file and the commit stands (once)
        fault_proxy.configure(drop_filter=_update_table, drop_next=1)
        await table.append(_rows([1, 2]))
        assert fault_proxy.stats.dropped == 1
        reloaded = await catalog.load_table(f"{db}.t")
        assert reloaded.metadata_location == table.metadata_location
        assert [r["id"] for r in _sorted(await reloaded.scan().to_arrow())] == [1, 2]

        # not applied, a 503: it cannot be told from one still in flight, so unknown, files kept
        fault_proxy.configure(refuse_filter=_update_table)
        with pytest.raises(CommitStateUnknownError, match="no answer to the swap"):
            await table.append(_rows([3]))
        fault_proxy.reset()
        after = await catalog.load_table(f"{db}.t")
        assert after.metadata_location == reloaded.metadata_location
        names = [i.location async for i in after.io.list(f"{after.location}/metadata/")]
        assert len([n for n in names if n.endswith(".metadata.json")]) == 3  # v0, v1 and the kept one


# -- tables and namespaces -----------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_database_location_places_its_tables_and_a_bare_catalog_creates_none(
    moto_endpoint: str,
) -> None:
    """Glue's own part of where tables go (the rest is the catalog contract's)."""
    catalog, warehouse = await glue_catalog(moto_endpoint)
    db, other = fresh_database(), fresh_database()
    async with catalog:
        await catalog.create_namespace(db)
        await catalog.create_namespace(other, {"location": f"{warehouse}/elsewhere"})
        assert (await catalog.load_namespace_properties(other))["location"] == f"{warehouse}/elsewhere"
        placed = await catalog.create_table(f"{other}.p", schema=SCHEMA)
        assert placed.location == f"{warehouse}/elsewhere/p"
        table = await catalog.create_table(f"{db}.t", schema=SCHEMA)
        assert table.location == f"{warehouse}/{db}.db/t"  # PyIceberg's Hive-style default
        renamed = await catalog.rename_table(f"{db}.t", f"{other}.r")
        assert renamed.location == table.location  # the files stay where they are
        entry = await glue_entry(catalog, other, "r")
        assert entry["StorageDescriptor"]["Location"] == table.location

        # without a warehouse the catalog has no roots: no table is created, not even where a
        # database's location says
        async with aioiceberg.connect("glue://", storage_options=glue_options(moto_endpoint)) as bare:
            assert bare.root == "glue://"
            for name in (f"{db}.x", f"{other}.y"):
                with pytest.raises(LocationNotAllowedError, match=r"has no warehouse.*warehouse="):
                    await bare.create_table(name, schema=SCHEMA)
                assert not await bare.table_exists(name)

        assert await catalog.update_namespace_properties(
            other, removals=["location"], updates={"a": "1"}
        ) == {"a": "1"}
        assert await catalog.load_namespace_properties(other) == {"a": "1"}


@pytest.mark.anyio
async def test_errors_name_the_object_and_what_is_wrong(moto_endpoint: str) -> None:
    async with glue_database(moto_endpoint) as (catalog, _, db):
        with pytest.raises(NamespaceAlreadyExistsError, match=f"glue database '{db}' already exists"):
            await catalog.create_namespace(db)
        with pytest.raises(TableNotFoundError, match=f"glue table {db}.nope"):
            await catalog.load_table(f"{db}.nope")
        with pytest.raises(TableNotFoundError, match=r"glue table no_such_db\.t"):
            await catalog.load_table("no_such_db.t")
        with pytest.raises(NamespaceNotFoundError, match="'no_such_db' does not exist"):
            await catalog.create_table("no_such_db.t", schema=SCHEMA)
        with pytest.raises(ValidationError, match=r"'database\.table'"):
            await catalog.load_table("a.b.c")

        table = await catalog.create_table(f"{db}.t", schema=SCHEMA)
        with pytest.raises(TableAlreadyExistsError, match=f"glue table {db}.t already exists"):
            await catalog.create_table(f"{db}.t", schema=SCHEMA)

        # a Glue table that is not Iceberg's: named, never loaded, listed or dropped as one
        csv = {"Name": "csv", "TableType": "EXTERNAL_TABLE", "Parameters": {"classification": "csv"}}
        await catalog.glue.write("create_table", DatabaseName=db, TableInput=csv)
        with pytest.raises(TableNotFoundError, match=f"glue table {db}.csv is not an Iceberg table"):
            await catalog.load_table(f"{db}.csv")
        with pytest.raises(TableNotFoundError, match="not an Iceberg table"):
            await catalog.drop_table(f"{db}.csv")
        assert not await catalog.table_exists(f"{db}.csv")
        assert await catalog.list_tables(db) == [f"{db}.t"]
        with pytest.raises(TableAlreadyExistsError):
            await catalog.create_table(f"{db}.csv", schema=SCHEMA)

        # by its location the table is read-only, and says which catalog holds it
        by_location = await aioiceberg.load_table(table.location, glue_options(moto_endpoint))
        assert by_location.read_only and "catalog:glue" in (by_location.read_only_reason or "")
        with pytest.raises(ReadOnlyTableError, match="glue"):
            await by_location.append(_rows([1]))


def test_uri_options_and_their_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidPropertyError, match="unknown option regoin="):
        GlueOptions.from_uri("glue://?regoin=eu-west-1")
    with pytest.raises(InvalidPropertyError, match="skip_archive='maybe'"):
        GlueOptions.from_uri("glue://?skip_archive=maybe")
    with pytest.raises(ValidationError, match="not a Glue catalog URI"):
        GlueOptions.from_uri("glue://123456789012")
    with pytest.raises(InvalidPropertyError, match="unknown option"):
        aioiceberg.connect("glue://?endpont=http://x", warehouse="s3://b/wh")

    stored = {
        "glue.endpoint": "http://glue",
        "glue.region": "eu-west-1",
        "glue.id": "111111111111",
        "glue.skip-archive": "false",
        "s3.access-key-id": "s3key",
        "s3.secret-access-key": "s3secret",
        "glue.access-key-id": "gluekey",
        "glue.secret-access-key": "gluesecret",
    }
    options = GlueOptions.from_uri("glue://?region=eu-north-1&catalog_id=222222222222", stored)
    assert (options.endpoint_url, options.region, options.catalog_id) == (
        "http://glue",
        "eu-north-1",
        "222222222222",
    )
    assert (options.access_key_id, options.secret_access_key, options.skip_archive) == (
        "gluekey",
        "gluesecret",
        False,
    )
    # s3.* credentials and region serve Glue too when no glue.* ones are given, as for DynamoDB
    fallback = GlueOptions.from_uri(
        "glue://", {"s3.access-key-id": "k", "s3.secret-access-key": "s", "s3.region": "r"}
    )
    assert (fallback.access_key_id, fallback.region, fallback.skip_archive) == ("k", "r", True)
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert GlueOptions.from_uri("glue://").region == "ap-south-1"


@pytest.mark.anyio
async def test_standard_aws_configuration_alone_reaches_glue(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", moto_endpoint)  # botocore's service-specific endpoint
    warehouse = f"s3://{await create_bucket(moto_endpoint)}/wh"
    db = fresh_database()
    async with aioiceberg.connect(
        "glue://", warehouse=warehouse, storage_options=s3_storage_options(moto_endpoint)
    ) as catalog:
        await catalog.create_namespace(db)
        table = await catalog.create_table(f"{db}.t", schema=SCHEMA)
        await table.append(_rows([1]))
    assert (db,) in _pyiceberg(moto_endpoint, warehouse).list_namespaces()


@pytest.mark.anyio
async def test_blocking_catalog(moto_endpoint: str) -> None:
    warehouse = f"s3://{await create_bucket(moto_endpoint)}/wh"
    db = fresh_database()
    uri = f"glue://?endpoint={moto_endpoint}&region=us-east-1&skip_archive=false&catalog_id=123456789012"

    def script() -> list[int]:
        with sync.connect(
            uri, warehouse=warehouse, storage_options=s3_storage_options(moto_endpoint)
        ) as catalog:
            catalog.create_namespace(db, {"owner": "script"})
            table = catalog.create_table(f"{db}.t", schema=SCHEMA)
            table.append(_rows([1, 2]))
            assert catalog.list_tables(db) == [f"{db}.t"]
            return sorted(catalog.load_table(f"{db}.t").scan().to_arrow().column("id").to_pylist())

    assert await anyio.to_thread.run_sync(script) == [1, 2]
