"""The SQL catalog on SQLite, sharing one database file and warehouse with PyIceberg's SqlCatalog."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pyarrow as pa
import pytest
from commit_helpers import FAST_RETRY
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog

import aioiceberg
from aioiceberg import sync
from aioiceberg.catalogs.sql import SqlCatalog, SqlStoreError
from aioiceberg.errors import (
    CommitConflictError,
    InvalidPropertyError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    ReadOnlyTableError,
    TableAlreadyExistsError,
    ValidationError,
)

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("writer", pa.string())])


def rows(writer: str, ids: range | list[int]) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "writer": [writer] * len(ids)}, schema=SCHEMA)


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def sorted_rows(table: pa.Table, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "catalog.db", tmp_path / "wh"


@pytest.fixture
def pyiceberg(paths: tuple[Path, Path]) -> Iterator[PySqlCatalog]:
    db, wh = paths
    catalog = PySqlCatalog("default", uri=f"sqlite:///{db}", warehouse=str(wh))
    yield catalog
    catalog.close()


def connect(paths: tuple[Path, Path], *, warehouse: bool = True, query: str = "") -> aioiceberg.Catalog:
    db, wh = paths
    return aioiceberg.connect(f"sqlite:///{db}{query}", warehouse=str(wh) if warehouse else None)


def metadata_files(location: str) -> list[str]:
    return sorted(p.name for p in Path(location, "metadata").glob("*.metadata.json"))


def table_files(location: str) -> list[str]:
    """The table's files, without the local store's own hidden lock files."""
    return sorted(str(p) for p in Path(location).rglob("*") if p.is_file() and not p.name.startswith("."))


def assert_linear(table: aioiceberg.Table, count: int) -> None:
    """Every snapshot is on one chain of parents (no commit forked the history)."""
    history = table.history()
    assert len(table.snapshots()) == len(history) == count
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]


# -- both libraries on one database ---------------------------------------------------------------
@pytest.mark.anyio
async def test_pyiceberg_table_evolves_here_and_reads_back_in_pyiceberg(
    paths: tuple[Path, Path], pyiceberg: PySqlCatalog
) -> None:
    pyiceberg.create_namespace("db")
    created = pyiceberg.create_table("db.t", SCHEMA)
    created.append(rows("py", range(0, 5)))

    async with connect(paths) as catalog:
        table = await catalog.load_table("db.t")
        assert table.location == created.location() == f"{paths[1]}/db/t"  # PyIceberg's default place
        await table.append(rows("aio", range(5, 8)))
        await table.delete("id = 3")
        async with table.update_schema() as update:
            update.add_column("note", "string")
        with_note = pa.table(
            {"id": pa.array([8, 9], pa.int64()), "writer": ["aio", "aio"], "note": ["x", "y"]}
        )
        await table.append(with_note)
        ours = await (await catalog.load_table("db.t")).scan().to_arrow()

    expected: list[tuple[int, str, str | None]] = [
        (i, "py" if i < 5 else "aio", None) for i in (0, 1, 2, 4, 5, 6, 7)
    ]
    expected += [(8, "aio", "x"), (9, "aio", "y")]
    theirs = pyiceberg.load_table("db.t")
    assert [f.name for f in theirs.schema().fields] == ["id", "writer", "note"]
    assert sorted_rows(theirs.scan().to_arrow(), ("id", "writer", "note")) == expected
    assert sorted_rows(ours, ("id", "writer", "note")) == expected
    # the row keeps PyIceberg's bookkeeping: the previous location is the version before
    with closing(sqlite3.connect(paths[0])) as con:
        current, previous = con.execute(
            "SELECT metadata_location, previous_metadata_location FROM iceberg_tables"
        ).fetchone()
    assert current == theirs.metadata_location
    assert previous == theirs.metadata.metadata_log[-1].metadata_file


@pytest.mark.anyio
async def test_table_created_here_is_listed_loaded_and_appended_by_pyiceberg(
    paths: tuple[Path, Path], pyiceberg: PySqlCatalog
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    async with connect(paths) as catalog:
        await catalog.create_namespace("sales", {"owner": "ana"})
        await catalog.create_namespace("empty")
        table = await catalog.create_table("sales.orders", schema, partition_by=["region"])
        await table.append(pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}, schema=schema))

        assert sorted(pyiceberg.list_namespaces()) == [("empty",), ("sales",)]
        assert pyiceberg.load_namespace_properties("sales") == {"owner": "ana"}
        assert pyiceberg.load_namespace_properties("empty") == {"exists": "true"}  # PyIceberg's marker
        assert pyiceberg.list_tables("sales") == [("sales", "orders")]
        theirs = pyiceberg.load_table("sales.orders")
        assert [f.name for f in theirs.spec().fields] == ["region"]
        theirs.append(pa.table({"id": [4, 5], "region": ["us", "ap"]}, schema=schema))

        await table.refresh()
        got = await table.scan().to_arrow()
        assert sorted_rows(got, ("id", "region")) == [(1, "eu"), (2, "us"), (3, "eu"), (4, "us"), (5, "ap")]
        assert_linear(table, 2)
        # and a namespace PyIceberg made, nested: its parent exists by PyIceberg's rule
        pyiceberg.create_namespace("a.b")
        assert await catalog.list_namespaces() == ["a", "empty", "sales"]
        assert await catalog.list_namespaces("a") == ["a.b"]
        assert await catalog.namespace_exists("a")
        with pytest.raises(NamespaceAlreadyExistsError):
            await catalog.create_namespace("a")


@pytest.mark.anyio
async def test_namespaces_rename_and_drop_as_pyiceberg_sees_them(
    paths: tuple[Path, Path], pyiceberg: PySqlCatalog
) -> None:
    async with connect(paths) as catalog:
        await catalog.create_namespace("db")
        await catalog.create_namespace("db.inner", {"k": "v"})
        assert await catalog.list_namespaces() == ["db"]
        assert await catalog.list_namespaces("db") == ["db.inner"]
        props = await catalog.update_namespace_properties("db.inner", removals=["k"], updates={"a": "1"})
        assert props == {"a": "1"} == pyiceberg.load_namespace_properties("db.inner")
        # removing every property keeps the namespace (PyIceberg's marker stays)
        assert await catalog.update_namespace_properties("db.inner", removals=["a"]) == {"exists": "true"}
        assert pyiceberg.namespace_exists("db.inner")

        table = await catalog.create_table("db.t", SCHEMA)
        await table.append(rows("aio", range(3)))
        with pytest.raises(NamespaceNotEmptyError, match=r"table db\.t"):
            await catalog.drop_namespace("db")
        renamed = await catalog.rename_table("db.t", "db.inner.t2")
        assert renamed.location == table.location  # the files stay where they are
        assert await catalog.list_tables("db") == []
        assert await catalog.list_tables("db.inner") == ["db.inner.t2"]
        assert ids_of(pyiceberg.load_table("db.inner.t2").scan().to_arrow()) == [0, 1, 2]
        with pytest.raises(NamespaceNotEmptyError, match=r"namespace db\.inner"):
            await catalog.drop_namespace("db")

        kept = await catalog.drop_table("db.inner.t2")
        assert kept == renamed.metadata_location
        assert not pyiceberg.table_exists("db.inner.t2")
        # the kept metadata file brings it back, under any name
        back = await catalog.register_table("db.inner.back", kept or "")
        assert ids_of(pyiceberg.load_table("db.inner.back").scan().to_arrow()) == [0, 1, 2]
        await back.append(rows("aio", [3]))
        with pytest.raises(NamespaceNotFoundError):
            await catalog.register_table("gone.t", kept or "")
        await catalog.drop_table("db.inner.back")
        await catalog.drop_namespace("db.inner")
        await catalog.drop_namespace("db")
        assert await catalog.list_namespaces() == [] == pyiceberg.list_namespaces()

        await catalog.create_namespace("p")
        purged = await catalog.create_table("p.t", SCHEMA)
        await purged.append(rows("aio", range(2)))
        await catalog.purge_table("p.t")
        assert table_files(purged.location) == []

    # another catalog name in the same file sees none of it
    async with connect(paths, query="?catalog=other") as other:
        await other.create_namespace("db")
        assert await other.list_namespaces() == ["db"]
    assert pyiceberg.list_namespaces() == [("p",)]


# -- concurrency ---------------------------------------------------------------------------------
WORKER = """
import asyncio, json, sys
import pyarrow as pa
import aioiceberg

async def main(uri, warehouse, writer):
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("writer", pa.string())])
    done = []
    async with aioiceberg.connect(uri, warehouse=warehouse) as catalog:
        table = await catalog.load_table("db.t")
        for k in range(3):
            i = 1000 * writer + k
            await table.append(pa.table({"id": [i], "writer": [f"p{writer}"]}, schema=schema))
            done.append(i)
    print(json.dumps(done))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.anyio
async def test_concurrent_processes_lose_nothing_and_keep_history_linear(paths: tuple[Path, Path]) -> None:
    db, wh = paths
    async with connect(paths) as catalog:
        await catalog.create_namespace("db")
        table = await catalog.create_table("db.t", SCHEMA, properties=FAST_RETRY)
        await table.append(rows("init", [0]))

        acknowledged: list[int] = []

        async def process(w: int) -> None:
            result = await anyio.run_process(
                [sys.executable, "-c", WORKER, f"sqlite:///{db}", str(wh), str(w + 1)], check=False
            )
            assert result.returncode == 0, result.stderr.decode()
            acknowledged.extend(json.loads(result.stdout))

        async with anyio.create_task_group() as tg:
            for w in range(4):
                tg.start_soon(process, w)

        final = await catalog.load_table("db.t")
        assert len(acknowledged) == 12
        assert ids_of(await final.scan().to_arrow()) == sorted([0, *acknowledged])
        assert_linear(final, 13)


@pytest.mark.anyio
async def test_pyiceberg_and_aioiceberg_appending_together_lose_nothing(
    paths: tuple[Path, Path], pyiceberg: PySqlCatalog
) -> None:
    pyiceberg.create_namespace("db")
    pyiceberg.create_table("db.t", SCHEMA, properties=FAST_RETRY)

    def pyiceberg_appends() -> list[int]:
        done = []
        for k in range(4):
            pyiceberg.load_table("db.t").append(rows("py", [100 + k]))
            done.append(100 + k)
        return done

    async with connect(paths) as catalog:
        ours: list[int] = []

        async def writer(w: int) -> None:
            table = await catalog.load_table("db.t")
            for k in range(2):
                await table.append(rows(f"aio{w}", [200 + 10 * w + k]))
                ours.append(200 + 10 * w + k)

        theirs: list[int] = []

        async def in_thread() -> None:
            theirs.extend(await anyio.to_thread.run_sync(pyiceberg_appends))

        async with anyio.create_task_group() as tg:
            tg.start_soon(in_thread)
            for w in range(3):
                tg.start_soon(writer, w)

        final = await catalog.load_table("db.t")
        assert ids_of(await final.scan().to_arrow()) == sorted(ours + theirs)
        assert len(ours) + len(theirs) == 10
        assert_linear(final, 10)
    assert ids_of(pyiceberg.load_table("db.t").scan().to_arrow()) == sorted(ours + theirs)


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_errors_are_typed_and_name_the_object(
    paths: tuple[Path, Path], pyiceberg: PySqlCatalog
) -> None:
    """The SQL catalog's own errors (the generic ones are the catalog contract's)."""
    async with connect(paths) as catalog:
        await catalog.create_namespace("db")
        pyiceberg.create_table("db.theirs", SCHEMA)
        with pytest.raises(TableAlreadyExistsError, match=r"db\.theirs"):
            await catalog.create_table("db.theirs", SCHEMA)
        table = await catalog.create_table("db.ours", SCHEMA)
        with pytest.raises(TableAlreadyExistsError):
            await catalog.rename_table("db.ours", "db.theirs")
        # a refused create leaves no metadata file behind
        before = metadata_files(table.location)
        with pytest.raises(TableAlreadyExistsError):
            await catalog.create_table("db.ours", SCHEMA)
        assert metadata_files(table.location) == before

        # by location the table opens read-only and says which catalog holds it
        await table.append(rows("aio", range(2)))
        by_location = await aioiceberg.load_table(table.location)
        assert by_location.read_only
        assert "catalog:sql" in (by_location.read_only_reason or "")
        with pytest.raises(ReadOnlyTableError, match="catalog:sql"):
            await by_location.append(rows("x", [9]))

    with pytest.raises(InvalidPropertyError, match="timeout"):
        aioiceberg.connect(f"sqlite:///{paths[0]}?timeout=5", warehouse=str(paths[1]))
    with pytest.raises(ValidationError, match="no host"):
        aioiceberg.connect("sqlite://host/x.db")


@pytest.mark.anyio
async def test_without_warehouse_tables_load_list_and_commit_but_not_create(
    paths: tuple[Path, Path], tmp_path: Path
) -> None:
    async with connect(paths) as catalog:
        await catalog.create_namespace("db")
        await (await catalog.create_table("db.t", SCHEMA)).append(rows("a", [1]))
    async with connect(paths, warehouse=False) as bare:
        with pytest.raises(ValidationError, match="warehouse="):
            await bare.create_table("db.u", SCHEMA)
        assert await bare.list_tables("db") == ["db.t"]
        table = await bare.load_table("db.t")
        await table.append(rows("b", [2]))
        assert ids_of(await table.scan().to_arrow()) == [1, 2]
        # without a warehouse the catalog has no roots: no namespace location places tables either
        with pytest.raises(LocationNotAllowedError, match="warehouse="):
            await bare.create_namespace("placed", {"location": str(tmp_path / "elsewhere")})
        assert not await bare.namespace_exists("placed")


@pytest.mark.anyio
async def test_a_locked_database_is_a_retryable_error_and_a_commit_leaves_nothing(
    paths: tuple[Path, Path],
) -> None:
    db, wh = paths
    catalog = SqlCatalog(str(db), warehouse=str(wh), busy_timeout_s=0.05)
    async with catalog:
        await catalog.create_namespace("db")
        props = {**FAST_RETRY, "commit.retry.num-retries": "2"}
        table = await catalog.create_table("db.t", SCHEMA, properties=props)
        before = table_files(table.location)

        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        try:
            with pytest.raises(SqlStoreError, match="locked") as caught:
                await catalog.create_namespace("other")
            assert caught.value.retryable
            with pytest.raises(CommitConflictError, match="locked"):
                await table.append(rows("a", [1]))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        # every attempt was refused before it applied: its files are gone (data, manifests, metadata)
        assert table_files(table.location) == before
        await table.append(rows("a", [1]))
        assert ids_of(await (await catalog.load_table("db.t")).scan().to_arrow()) == [1]


@pytest.mark.anyio
async def test_in_memory_and_relative_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with aioiceberg.connect("sqlite://", warehouse=str(tmp_path / "mem")) as memory:
        await memory.create_namespace("db")
        await (await memory.create_table("db.t", SCHEMA)).append(rows("m", [1]))
        assert ids_of(await (await memory.load_table("db.t")).scan().to_arrow()) == [1]
    monkeypatch.chdir(tmp_path)
    async with aioiceberg.connect("sqlite:///rel.db?catalog=c1", warehouse="wh") as relative:
        await relative.create_namespace("db")
        table = await relative.create_table("db.t", SCHEMA)
    assert (tmp_path / "rel.db").exists()
    assert table.location == f"{tmp_path}/wh/db/t"
    theirs = PySqlCatalog("c1", uri="sqlite:///rel.db", warehouse="wh")
    try:
        assert theirs.list_tables("db") == [("db", "t")]
    finally:
        theirs.close()


@pytest.mark.anyio
async def test_pyiceberg_v0_schema_and_view_rows(paths: tuple[Path, Path]) -> None:
    """A database PyIceberg made before its iceberg_type column works as is; rows of other
    types (Java's views) in a newer one are not tables."""
    db, wh = paths
    with closing(sqlite3.connect(db)) as con, con:
        con.execute(
            "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace "
            "VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), "
            "previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        )
    async with connect(paths) as catalog:
        await catalog.create_namespace("db")
        await (await catalog.create_table("db.t", SCHEMA)).append(rows("aio", [1]))
    theirs = PySqlCatalog("default", uri=f"sqlite:///{db}", warehouse=str(wh))
    try:
        assert ids_of(theirs.load_table("db.t").scan().to_arrow()) == [1]
    finally:
        theirs.close()

    other = paths[0].with_name("typed.db"), paths[1]
    async with connect(other) as catalog:
        await catalog.create_namespace("db")
        with closing(sqlite3.connect(other[0])) as con, con:
            con.execute(
                "INSERT INTO iceberg_tables VALUES "
                "('default', 'db', 'v', 's3://b/v/metadata/v.json', NULL, 'VIEW')"
            )
        assert await catalog.list_tables("db") == []
        assert not await catalog.table_exists("db.v")
        with pytest.raises(TableAlreadyExistsError):
            await catalog.create_table("db.v", SCHEMA)


def test_blocking_twin(paths: tuple[Path, Path]) -> None:
    db, wh = paths
    with sync.connect(f"sqlite:///{db}", warehouse=str(wh)) as catalog:
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", SCHEMA)
        table.append(rows("s", [1, 2]))
        assert catalog.list_tables("db") == ["db.t"]
        assert ids_of(catalog.load_table("db.t").scan().to_arrow()) == [1, 2]


@pytest.mark.anyio
@pytest.mark.usefixtures("aws_clients_closed")
async def test_warehouse_on_s3_is_shared_with_pyiceberg(tmp_path: Path, moto_endpoint: str) -> None:
    from servers.backends import create_bucket
    from servers.plugin import s3_storage_options

    bucket = await create_bucket(moto_endpoint)
    options = s3_storage_options(moto_endpoint)
    db = tmp_path / "catalog.db"
    async with aioiceberg.connect(
        f"sqlite:///{db}", warehouse=f"s3://{bucket}/wh", storage_options=options
    ) as catalog:
        await catalog.create_namespace("db")
        table = await catalog.create_table("db.t", SCHEMA)
        await table.append(rows("aio", range(3)))
        assert table.location == f"s3://{bucket}/wh/db/t"
        theirs = PySqlCatalog("default", uri=f"sqlite:///{db}", warehouse=f"s3://{bucket}/wh", **options)
        try:
            py_table = theirs.load_table("db.t")
            assert ids_of(py_table.scan().to_arrow()) == [0, 1, 2]
            py_table.append(rows("py", [3]))
        finally:
            theirs.close()
        assert ids_of(await (await catalog.load_table("db.t")).scan().to_arrow()) == [0, 1, 2, 3]
