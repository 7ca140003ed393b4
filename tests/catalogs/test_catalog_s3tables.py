"""The S3 Tables catalog against moto's S3 Tables and S3 (one moto server, a table bucket per
test): each table's files live in the storage bucket moto assigns it, on the same endpoint.

moto enforces the version token of UpdateTableMetadataLocation (a stale one is a 409
ConflictException), so the race between writers of different processes is real here.

PyIceberg 0.12 has no S3 Tables catalog of its own: it reaches S3 Tables only through a
Glue database federated with S3 Tables (``GlueCatalog._create_table_s3tables``) or through
the service's Iceberg REST endpoint, and moto implements neither (its Glue knows nothing of
S3 Tables, and it has no S3 Tables REST endpoint). Its generic catalogs cannot write into
S3 Tables storage either: before writing a metadata file they check it does not exist,
which lists the storage, and S3 Tables storage refuses listing (405). So PyIceberg reads our
tables through ``StaticTable.from_metadata``, and writes into one as its own S3 Tables path
does: its SqlCatalog writing metadata without that check (PyIceberg's
``_write_metadata_no_exist_check``), then the S3 Tables pointer moved with the version token.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pyarrow as pa
import pytest
from commit_helpers import FAST_RETRY
from maint_helpers import duckdb_ids
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy

import aioiceberg
from aioiceberg import sync
from aioiceberg.catalogs.s3tables import S3TablesCatalog, S3TablesOptions
from aioiceberg.commit.protocols.commit_point import COMMIT_POINT_PROPERTY
from aioiceberg.errors import (
    CommitStateUnknownError,
    InvalidPropertyError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    ReadOnlyTableError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.io.s3_client import S3Options
from aioiceberg.runtime import Runtime
from aioiceberg.spec.types import DoubleType

pytestmark = pytest.mark.usefixtures("aws_clients_closed")

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _rows(ids: list[int], prefix: str = "n") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{prefix}{i}" for i in ids]}, schema=SCHEMA)


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _py_properties(endpoint: str) -> dict[str, str]:
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }


async def _table_bucket(endpoint: str) -> str:
    """A fresh table bucket's ARN (moto's S3 Tables lives as long as the session's server)."""
    runtime = Runtime()
    try:
        client = await runtime.clients.get(S3Options(endpoint_url=endpoint, region="us-east-1"), "s3tables")
        created = await client.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:16]}")
    finally:
        await runtime.aclose()
    return str(created["arn"])


def _uri(arn: str, endpoint: str) -> str:
    return f"s3tables://{arn}?endpoint={endpoint}"


async def _catalog(endpoint: str) -> S3TablesCatalog:
    catalog = aioiceberg.connect(
        _uri(await _table_bucket(endpoint), endpoint), storage_options=s3_storage_options(endpoint)
    )
    assert isinstance(catalog, S3TablesCatalog)
    return catalog


async def _pointer(catalog: S3TablesCatalog, namespace: str, name: str) -> dict[str, Any]:
    found = await catalog.service.metadata_location(namespace, name)
    assert found is not None
    return found


def _is_linear(table: aioiceberg.Table, count: int) -> None:
    history = table.history()
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]
    assert len(table.snapshots()) == len(history) == count


def _pyiceberg_writer(tmp_path: Path, endpoint: str) -> Any:
    """PyIceberg's SqlCatalog writing metadata as PyIceberg's own S3 Tables path does."""
    from pyiceberg.catalog.glue import GlueCatalog as PyGlueCatalog
    from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

    class PyIcebergS3TablesWriter(PySqlCatalog):
        _write_metadata = staticmethod(PyGlueCatalog._write_metadata_no_exist_check)

    return PyIcebergS3TablesWriter(
        "py", uri=f"sqlite:///{tmp_path / 'py.db'}", warehouse=tmp_path.as_uri(), **_py_properties(endpoint)
    )


# -- with PyIceberg and DuckDB ---------------------------------------------------------------------
@pytest.mark.anyio
async def test_we_append_delete_and_evolve_and_pyiceberg_and_duckdb_read_it_back(moto_endpoint: str) -> None:
    from pyiceberg.table import StaticTable

    async with await _catalog(moto_endpoint) as catalog:
        await catalog.create_namespace("events")
        table = await catalog.create_table("events.t", schema=SCHEMA)
        await table.append(_rows([1, 2, 3, 4, 5]))
        await table.append(_rows([6, 7]))
        await table.delete("id = 3")
        async with table.update_schema() as update:
            update.add_column("score", DoubleType())
        with_score = pa.table(
            {"id": pa.array([8], pa.int64()), "name": ["n8"], "score": pa.array([0.5], pa.float64())}
        )
        await table.append(with_score)
        pointer = await _pointer(catalog, "events", "t")
        loaded = await catalog.load_table("events.t")

    # the table's files are in the storage S3 Tables assigned it; the pointer names our file
    assert table.location == pointer["warehouseLocation"] and "--table-s3" in table.location
    assert pointer["metadataLocation"] == table.metadata_location == loaded.metadata_location
    assert table.metadata_location.startswith(f"{table.location}/metadata/00005-")
    assert table.properties[COMMIT_POINT_PROPERTY] == "catalog:s3tables"
    _is_linear(loaded, 4)

    static = StaticTable.from_metadata(table.metadata_location, properties=_py_properties(moto_endpoint))
    result = static.scan().to_arrow()
    assert result.column_names == ["id", "name", "score"]
    expected = [{"id": i, "name": f"n{i}", "score": None} for i in (1, 2, 4, 5, 6, 7)]
    assert result.sort_by("id").to_pylist() == [*expected, {"id": 8, "name": "n8", "score": 0.5}]
    assert duckdb_ids(table.metadata_location, moto_endpoint) == [1, 2, 4, 5, 6, 7, 8]


@pytest.mark.anyio
async def test_pyiceberg_commits_into_our_table_and_our_stale_writer_rebases_on_it(
    moto_endpoint: str, tmp_path: Path
) -> None:
    from pyiceberg.table import StaticTable
    from pyiceberg.types import DoubleType as PyDoubleType

    async with await _catalog(moto_endpoint) as catalog:
        await catalog.create_namespace("ns")
        # without the in-process turn, the stale writer commits from what it loaded
        table = await catalog.create_table(
            "ns.t", schema=SCHEMA, properties={**FAST_RETRY, "commit.in-process-lock": "false"}
        )
        await table.append(_rows([1, 2, 3]))
        stale = await catalog.load_table("ns.t")

        # PyIceberg appends, deletes and evolves, writing into the table's storage ...
        py = _pyiceberg_writer(tmp_path, moto_endpoint)
        py.create_namespace("ns")
        py_table = py.register_table("ns.t", table.metadata_location)
        py_table.append(_rows([4, 5], prefix="p"))
        py_table.delete("id = 2")
        with py_table.update_schema() as update:
            update.add_column("score", PyDoubleType())
        py_table = py.load_table("ns.t")
        # ... and moves the S3 Tables pointer with the version token, as its S3 Tables path does
        token = (await _pointer(catalog, "ns", "t"))["versionToken"]
        await catalog.service.write(
            "update_table_metadata_location",
            namespace="ns",
            name="t",
            versionToken=token,
            metadataLocation=py_table.metadata_location,
        )

        # our writer loaded before: S3 Tables refuses its token, it rebases once and lands
        await stale.append(_rows([6]))
        assert stale.last_commit.attempts == 2
        ours = await catalog.load_table("ns.t")
        assert ours.metadata_location == stale.metadata_location
        assert ours.schema().find_field("score") is not None
        await ours.delete("id = 4")
        _is_linear(ours, 5)
        pointer = await _pointer(catalog, "ns", "t")

    assert pointer["metadataLocation"] == ours.metadata_location
    # PyIceberg's commits are in our history; PyIceberg reads back exactly what we did
    assert py_table.metadata.current_snapshot_id in {s.snapshot_id for s in ours.snapshots()}
    static = StaticTable.from_metadata(ours.metadata_location, properties=_py_properties(moto_endpoint))
    rows = static.scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [
        {"id": 1, "name": "n1", "score": None},
        {"id": 3, "name": "n3", "score": None},
        {"id": 5, "name": "p5", "score": None},
        {"id": 6, "name": "n6", "score": None},
    ]


# -- concurrency ---------------------------------------------------------------------------------
WORKER = """
import asyncio, json, pathlib, sys, time
import pyarrow as pa
import aioiceberg

async def main(uri, options, writer, barrier):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    done, attempts = [], []
    async with aioiceberg.connect(uri, storage_options=json.loads(options)) as catalog:
        table = await catalog.load_table("ns.t")
        pathlib.Path(barrier, f"ready-{writer}").touch()
        deadline = time.monotonic() + 60
        while not pathlib.Path(barrier, "go").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for k in range(3):
            i = 1000 * writer + k
            await table.append(pa.table({"id": [i], "name": [f"p{writer}"]}, schema=schema))
            done.append(i)
            attempts.append(table.last_commit.attempts)
    print(json.dumps({"ids": done, "attempts": attempts}))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""


@pytest.mark.anyio
async def test_processes_racing_through_the_version_token_lose_nothing(
    moto_endpoint: str, tmp_path: Path
) -> None:
    arn = await _table_bucket(moto_endpoint)
    uri, options = _uri(arn, moto_endpoint), s3_storage_options(moto_endpoint)
    async with aioiceberg.connect(uri, storage_options=options) as catalog:
        await catalog.create_namespace("ns")
        await catalog.create_table("ns.t", schema=SCHEMA, properties=FAST_RETRY)
        acknowledged: list[int] = []
        attempts: list[int] = []

        async def process(w: int) -> None:
            command = [sys.executable, "-c", WORKER, uri, json.dumps(options), str(w + 1), str(tmp_path)]
            result = await anyio.run_process(command, check=False)
            assert result.returncode == 0, result.stderr.decode()
            report = json.loads(result.stdout)
            acknowledged.extend(report["ids"])
            attempts.extend(report["attempts"])

        async def start_together() -> None:
            # every process has connected and loaded the table before any appends
            deadline = time.monotonic() + 60
            while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            (tmp_path / "go").touch()

        async with anyio.create_task_group() as tg:
            tg.start_soon(start_together)
            for w in range(4):
                tg.start_soon(process, w)

        table = await catalog.load_table("ns.t")
        found = _ids(await table.scan().to_arrow())
        assert len(acknowledged) == 12 and found == sorted(acknowledged) == sorted(set(found))
        _is_linear(table, 12)
        # the token was refused and commits rebased: this race was not run one at a time
        assert len(attempts) == 12 and sum(attempts) > 12, f"attempts per append: {sorted(attempts)}"


def _metadata_swap(request: Any) -> bool:
    return bool(request.method == "PUT" and request.path.endswith("/metadata-location"))


@pytest.mark.anyio
async def test_a_swap_without_an_answer_is_settled_by_reading_the_pointer_back(
    moto_endpoint: str, fault_proxy: FaultProxy
) -> None:
    arn = await _table_bucket(moto_endpoint)
    options = s3_storage_options(moto_endpoint)  # files straight to moto, S3 Tables through the proxy
    async with aioiceberg.connect(_uri(arn, fault_proxy.url), storage_options=options) as catalog:
        await catalog.create_namespace("ns")
        table = await catalog.create_table("ns.t", schema=SCHEMA)

        # applied, answer lost: the pointer names our file, so the commit stands (once)
        fault_proxy.configure(drop_filter=_metadata_swap, drop_next=1)
        await table.append(_rows([1, 2]))
        assert fault_proxy.stats.dropped == 1 and table.last_commit.attempts == 1
        reloaded = await catalog.load_table("ns.t")
        assert reloaded.metadata_location == table.metadata_location
        assert _ids(await reloaded.scan().to_arrow()) == [1, 2]

        # not applied, a 503: it cannot be told from one still in flight, so unknown
        fault_proxy.configure(refuse_filter=_metadata_swap)
        with pytest.raises(CommitStateUnknownError, match="no answer to the swap"):
            await table.append(_rows([3]))
        assert fault_proxy.stats.slowdowns == 1  # sent once: a 5xx write is never sent again
        fault_proxy.reset()
        after = await catalog.load_table("ns.t")
        assert after.metadata_location == reloaded.metadata_location
        await after.append(_rows([4]))
        assert _ids(await after.scan().to_arrow()) == [1, 2, 4]


# -- tables and namespaces -----------------------------------------------------------------------
@pytest.mark.anyio
async def test_rename_keeps_the_files_and_drop_deletes_them(moto_endpoint: str) -> None:
    """S3 Tables' own part of rename and drop (the rest is the catalog contract's)."""
    async with await _catalog(moto_endpoint) as catalog:
        await catalog.create_namespace("a")
        await catalog.create_namespace("b", {})  # no properties is fine
        assert await catalog.update_namespace_properties("a") == {}
        table = await catalog.create_table("a.t", schema=SCHEMA)
        await table.append(_rows([1, 2]))
        moved = await catalog.rename_table("a.t", "b.m")
        assert moved.location == table.location  # the files stay where S3 Tables put them
        with pytest.raises(TableNotFoundError, match=r"s3tables table a\.t does not exist"):
            await table.append(_rows([9]))  # its name moved on
        with pytest.raises(NamespaceNotFoundError, match="'nope' does not exist"):
            await catalog.rename_table("b.m", "nope.m")

        # dropping deletes the files with the table: nothing is kept to register back
        assert await catalog.drop_table("b.m") is None
        with pytest.raises(StoreError):
            await moved.io.read(moved.metadata_location)
        with pytest.raises(TableNotFoundError, match=r"b\.m does not exist"):
            await catalog.purge_table("b.m")
        with pytest.raises(UnsupportedError, match="cannot adopt an existing metadata file"):
            await catalog.register_table("a.back", moved.metadata_location)


@pytest.mark.anyio
async def test_a_failed_create_gives_the_name_back(moto_endpoint: str) -> None:
    """The first metadata file written outside the table's storage is refused by S3 Tables:
    the reservation made by CreateTable is deleted, so the name can be created again."""
    elsewhere = f"s3://{await create_bucket(moto_endpoint)}/metadata"
    async with await _catalog(moto_endpoint) as catalog:
        await catalog.create_namespace("ns")
        with pytest.raises(ValidationError, match=r"s3tables table ns\.t: S3 Tables refused"):
            await catalog.create_table("ns.t", schema=SCHEMA, properties={"write.metadata.path": elsewhere})
        assert await catalog.service.metadata_location("ns", "t") is None
        table = await catalog.create_table("ns.t", schema=SCHEMA)
        await table.append(_rows([1]))

        # a table another tool created without metadata: not ours to load, but droppable
        await catalog.service.write("create_table", namespace="ns", name="bare", format="ICEBERG")
        assert not await catalog.table_exists("ns.bare")
        with pytest.raises(TableNotFoundError, match=r"ns\.bare exists in S3 Tables without metadata"):
            await catalog.load_table("ns.bare")
        with pytest.raises(TableAlreadyExistsError, match=r"ns\.bare already exists"):
            await catalog.create_table("ns.bare", schema=SCHEMA)
        await catalog.drop_table("ns.bare")
        assert await catalog.list_tables("ns") == ["ns.t"]


@pytest.mark.anyio
async def test_errors_name_the_object_and_what_is_wrong(moto_endpoint: str) -> None:
    async with await _catalog(moto_endpoint) as catalog:
        await catalog.create_namespace("ns")
        with pytest.raises(NamespaceAlreadyExistsError, match="s3tables namespace 'ns' already exists"):
            await catalog.create_namespace("ns")
        with pytest.raises(UnsupportedError, match="namespaces carry no properties"):
            await catalog.create_namespace("other", {"owner": "me"})
        assert not await catalog.namespace_exists("other")
        with pytest.raises(UnsupportedError, match="no properties to update"):
            await catalog.update_namespace_properties("ns", updates={"owner": "me"})
        with pytest.raises(TableNotFoundError, match=r"s3tables table ns\.nope does not exist"):
            await catalog.load_table("ns.nope")
        with pytest.raises(TableNotFoundError, match=r"s3tables table nope\.t does not exist"):
            await catalog.load_table("nope.t")
        with pytest.raises(NamespaceNotFoundError, match="namespace 'nope' does not exist in table bucket"):
            await catalog.create_table("nope.t", schema=SCHEMA)
        with pytest.raises(ValidationError, match=r"'namespace\.table'"):
            await catalog.load_table("a.b.c")
        with pytest.raises(ValidationError, match="table name 'Events' is not valid: it must be 1 to 255"):
            await catalog.create_table("ns.Events", schema=SCHEMA)
        with pytest.raises(ValidationError, match="namespace name 'aws_x' is not valid"):
            await catalog.create_namespace("aws_x")

        table = await catalog.create_table("ns.t", schema=SCHEMA)
        await table.append(_rows([1]))
        with pytest.raises(TableAlreadyExistsError, match=r"s3tables table ns\.t already exists"):
            await catalog.create_table("ns.t", schema=SCHEMA)
        with pytest.raises(NamespaceNotEmptyError, match=r"'ns' is not empty: it holds ns\.t"):
            await catalog.drop_namespace("ns")
        assert await catalog.namespace_exists("ns")

        # by its metadata file the table is read-only, and says which catalog holds it
        options = s3_storage_options(moto_endpoint)
        by_file = await aioiceberg.load_table(table.metadata_location, options)
        assert by_file.read_only and "commits through catalog:s3tables" in (by_file.read_only_reason or "")
        with pytest.raises(ReadOnlyTableError, match="s3tables catalog"):
            await by_file.append(_rows([2]))
        # by its location it cannot be found: S3 Tables storage refuses listing
        with pytest.raises(StoreError, match=r"cannot be listed.*loads through its catalog"):
            await aioiceberg.load_table(table.location, options)


def test_uri_options_and_their_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    arn = "arn:aws:s3tables:eu-west-1:111122223333:bucket/analytics"
    with pytest.raises(InvalidPropertyError, match="unknown option regoin="):
        S3TablesOptions.from_uri(f"s3tables://{arn}?regoin=eu-west-1")
    with pytest.raises(InvalidPropertyError, match="unknown option"):
        aioiceberg.connect(f"s3tables://{arn}?endpont=http://x")
    with pytest.raises(InvalidPropertyError, match="repeated option"):
        S3TablesOptions.from_uri(f"s3tables://{arn}?region=a&region=b")
    for bad in (
        "s3tables://analytics",
        "s3tables://arn:aws:s3:eu-west-1:111122223333:bucket/x",
        "s3tables://",
    ):
        with pytest.raises(ValidationError, match="table bucket's ARN"):
            S3TablesOptions.from_uri(bad)
    with pytest.raises(ValidationError, match="places every table's files itself"):
        aioiceberg.connect(f"s3tables://{arn}", warehouse="s3://b/wh")

    plain = S3TablesOptions.from_uri(f"s3tables://{arn}")
    assert (plain.table_bucket_arn, plain.region, plain.endpoint_url, plain.bucket) == (
        arn,
        "eu-west-1",
        None,
        "analytics",
    )
    assert S3TablesOptions.from_uri(f"s3tables:{arn}") == plain  # the form without slashes
    stored = {
        "s3tables.endpoint": "http://tables",
        "s3tables.region": "eu-north-1",
        "s3tables.access-key-id": "tkey",
        "s3tables.secret-access-key": "tsecret",
        "s3.access-key-id": "s3key",
        "s3.secret-access-key": "s3secret",
        "s3.region": "us-west-2",
    }
    options = S3TablesOptions.from_uri(f"s3tables://{arn}?endpoint=http://uri&profile=p", stored)
    assert (options.endpoint_url, options.region, options.profile) == ("http://uri", "eu-north-1", "p")
    assert (options.access_key_id, options.secret_access_key) == ("tkey", "tsecret")
    # s3.* credentials serve S3 Tables when no s3tables.* ones are given; never the S3 region
    fallback = S3TablesOptions.from_uri(f"s3tables://{arn}", {k: v for k, v in stored.items() if "s3." in k})
    assert (fallback.access_key_id, fallback.region) == ("s3key", "eu-west-1")
    catalog = aioiceberg.connect(f"s3tables://{arn}")
    assert isinstance(catalog, S3TablesCatalog) and catalog.root == f"s3tables://{arn}"


@pytest.mark.anyio
async def test_standard_aws_configuration_alone_reaches_s3_tables(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = await _table_bucket(moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3TABLES", moto_endpoint)  # botocore's service-specific endpoint
    options = s3_storage_options(moto_endpoint)  # the files' endpoint
    async with aioiceberg.connect(f"s3tables://{arn}", storage_options=options) as catalog:
        await catalog.create_namespace("ns")
        table = await catalog.create_table("ns.t", schema=SCHEMA)
        await table.append(_rows([1]))
        assert isinstance(catalog, S3TablesCatalog)
        assert (await _pointer(catalog, "ns", "t"))["metadataLocation"] == table.metadata_location


@pytest.mark.anyio
async def test_blocking_catalog(moto_endpoint: str) -> None:
    arn = await _table_bucket(moto_endpoint)

    def script() -> tuple[list[str], list[int]]:
        with sync.connect(
            f"s3tables:{arn}?endpoint={moto_endpoint}&region=us-east-1",
            storage_options=s3_storage_options(moto_endpoint),
        ) as catalog:
            catalog.create_namespace("ns")
            table = catalog.create_table("ns.t", schema=SCHEMA)
            table.append(_rows([1, 2]))
            names = catalog.list_tables("ns")
            return names, _ids(catalog.load_table("ns.t").scan().to_arrow())

    assert await anyio.to_thread.run_sync(script) == (["ns.t"], [1, 2])
