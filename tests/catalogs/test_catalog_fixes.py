"""Definite failures leave nothing behind: a catalog that refuses a commit or a create
(Glue's AccessDenied, a SQLite database locked past its busy timeout) is a failure, not an
unknown outcome, and the files written for it are deleted; a purge leaves no folders.

Glue's refusals come from a moto server of this module's own that enforces IAM (moto's
``/moto-api/reset-auth``): its user may call Glue but is denied CreateTable or UpdateTable,
so the refusal is a real 403 over HTTP, parsed by botocore as Glue's would be.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import botocore.session
import pyarrow as pa
import pytest
from servers.moto import MotoServer

import aioiceberg
from aioiceberg.catalogs.glue import GlueCatalog
from aioiceberg.catalogs.sql import SqlCatalog, SqlStoreError
from aioiceberg.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)
from aioiceberg.io.local import LOCK_NAME, LocalFileIO
from aioiceberg.runtime import default_runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("aws_clients_closed")]

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])
REGION = "us-east-1"


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())}, schema=SCHEMA)


def _files(root: Path, *, locks: bool = True) -> list[str]:
    """Every file under ``root`` (relative, sorted), lock files too unless ``locks`` is False."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and (locks or p.name != LOCK_NAME)
    )


# -- Glue: a refusal is a failure ----------------------------------------------------------------
def _user(iam: Any, name: str, denied: str) -> dict[str, str]:
    """An IAM user allowed every Glue call but ``denied``; its access key."""
    iam.create_user(UserName=name)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "glue:*", "Resource": "*"},
            {"Effect": "Deny", "Action": denied, "Resource": "*"},
        ],
    }
    iam.put_user_policy(UserName=name, PolicyName="glue", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}


@pytest.fixture(scope="module")
def iam_glue() -> Iterator[tuple[str, dict[str, dict[str, str]]]]:
    """A moto server enforcing IAM from the moment its users exist: (endpoint, keys by user)."""
    with MotoServer() as moto:
        iam = botocore.session.get_session().create_client(
            "iam",
            endpoint_url=moto.url,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        keys = {
            "no-update": _user(iam, "no-update", "glue:UpdateTable"),
            "no-create": _user(iam, "no-create", "glue:CreateTable"),
        }
        request = urllib.request.Request(
            f"{moto.url}/moto-api/reset-auth",
            data=b"0",
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass  # from here on every request must be signed by a user and allowed
        yield moto.url, keys


def _glue(endpoint: str, key: dict[str, str], warehouse: Path) -> GlueCatalog:
    options = {
        "glue.endpoint": endpoint,
        "glue.region": REGION,
        "glue.access-key-id": key["id"],
        "glue.secret-access-key": key["secret"],
    }
    catalog = aioiceberg.connect("glue://", warehouse=str(warehouse), storage_options=options)
    assert isinstance(catalog, GlueCatalog)
    return catalog


async def test_glue_access_denied_on_update_table_is_a_definite_failure(
    iam_glue: tuple[str, dict[str, dict[str, str]]], tmp_path: Path
) -> None:
    endpoint, keys = iam_glue
    async with _glue(endpoint, keys["no-update"], tmp_path) as catalog:
        await catalog.create_namespace("denied_update")
        table = await catalog.create_table("denied_update.t", SCHEMA)
        before = _files(tmp_path / "denied_update.db" / "t", locks=False)
        with pytest.raises(CommitConflictError) as raised:
            await table.append(_rows(range(3)))
        assert not isinstance(raised.value, CommitStateUnknownError)
        assert raised.value.retryable is False
        assert "glue table denied_update.t" in str(raised.value)
        assert "unchanged" in str(raised.value)
        # nothing landed and nothing is left: no new metadata file, no manifests, no data
        assert _files(tmp_path / "denied_update.db" / "t", locks=False) == before
        again = await catalog.load_table("denied_update.t")
        assert again.metadata_location == table.metadata_location
        assert again.current_snapshot() is None


async def test_glue_access_denied_on_create_table_leaves_no_metadata_file(
    iam_glue: tuple[str, dict[str, dict[str, str]]], tmp_path: Path
) -> None:
    endpoint, keys = iam_glue
    async with _glue(endpoint, keys["no-create"], tmp_path) as catalog:
        await catalog.create_namespace("denied_create")
        with pytest.raises(StoreError, match="create_table refused") as raised:
            await catalog.create_table("denied_create.t", SCHEMA)
        assert not isinstance(raised.value, CommitStateUnknownError)
        assert raised.value.retryable is False
        assert not await catalog.table_exists("denied_create.t")
    assert _files(tmp_path) == []


# -- SQL: a locked database ----------------------------------------------------------------------
async def test_sql_create_table_on_a_locked_database_leaves_no_metadata_file(tmp_path: Path) -> None:
    database, warehouse = tmp_path / "catalog.db", tmp_path / "wh"
    async with SqlCatalog(str(database), warehouse=str(warehouse), busy_timeout_s=0.2) as catalog:
        await catalog.create_namespace("ns")
        with closing(sqlite3.connect(database, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # a writer holding the database
            with pytest.raises(SqlStoreError, match="locked") as raised:
                await catalog.create_table("ns.t", SCHEMA)
            other.execute("ROLLBACK")
        assert raised.value.busy and raised.value.retryable
        assert not await catalog.table_exists("ns.t")
        assert _files(warehouse) == []
        # the name is free: once the lock is gone, the same create works
        table = await catalog.create_table("ns.t", SCHEMA)
        await table.append(_rows(range(2)))
        assert (await table.scan().to_arrow()).num_rows == 2


# -- purges leave no folders and no lock files ---------------------------------------------------
async def test_warehouse_purge_leaves_nothing_of_the_table(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    async with aioiceberg.connect(str(root)) as catalog:
        table = await catalog.create_table("db.t", pa.schema([*SCHEMA, pa.field("p", pa.string())]), ["p"])
        for p in ("a", "b", "c"):
            await table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "p": [p, p]}))
        kept = await catalog.create_table("db.keep", SCHEMA)
        await kept.append(_rows(range(2)))
        assert any(LOCK_NAME in f for f in _files(root / "db" / "t"))  # commits and deletes made some
        await catalog.drop_table("db.t", purge=True)
        assert not (root / "db" / "t").exists()
        assert [p.name for p in (root / "db").iterdir()] == ["keep"]
        assert (await (await catalog.load_table("db.keep")).scan().to_arrow()).num_rows == 2
        # the name is free again
        again = await catalog.create_table("db.t", SCHEMA)
        await again.append(_rows(range(1)))
        assert (await again.scan().to_arrow()).num_rows == 1


async def test_sql_purge_leaves_nothing_of_the_table(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    async with SqlCatalog(str(tmp_path / "catalog.db"), warehouse=str(warehouse)) as catalog:
        await catalog.create_namespace("ns")
        table = await catalog.create_table("ns.t", SCHEMA)
        for i in range(3):
            await table.append(_rows(range(i, i + 1)))
        await catalog.purge_table("ns.t")
        assert not (warehouse / "ns" / "t").exists()


async def test_deleting_a_folders_last_file_removes_its_lock_and_the_folder(tmp_path: Path) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    folder = tmp_path / "a" / "b"
    first = await io.write(str(folder / "x"), b"1")
    await io.write_if_match(str(folder / "x"), b"2", first.etag)  # takes the folder's lock
    await io.write(str(folder / "y"), b"3")
    await io.delete(str(folder / "x"))
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME, "y"]  # a file is left: kept
    await io.delete(str(folder / "y"))
    assert not folder.exists()
    assert (tmp_path / "a").is_dir()  # only the folder that held the file: a purge prunes the rest
    # and the folder comes back with the next write, lock and all
    again = await io.write(str(folder / "z"), b"4")
    await io.write_if_match(str(folder / "z"), b"5", again.etag)
    assert await io.read(str(folder / "z")) == b"5"
    await io.remove_empty_folders(str(tmp_path / "a"))
    assert (folder / "z").exists()  # a folder with a file stays
    await io.delete(str(folder / "z"))
    await io.remove_empty_folders(str(tmp_path / "a"))
    assert list(tmp_path.iterdir()) == []


async def test_replacing_and_deleting_a_folders_only_file_race_with_one_winner(tmp_path: Path) -> None:
    """A delete that empties the folder removes the lock file its rivals wait on: each of them
    must start over on a live lock, so exactly one conditional change wins every round."""
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    folder = tmp_path / "f"
    for round_ in range(8):
        base = await io.write(str(folder / "p"), b"base")
        outcomes: dict[int, str] = {}
        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(_contend, io, folder / "p", base.etag, i, outcomes)
        winners = [i for i, o in outcomes.items() if o == "won"]
        assert len(winners) == 1, (round_, outcomes)
        if winners[0] % 2:
            assert (folder / "p").read_bytes() == f"w{winners[0]}".encode()
        else:
            assert not folder.exists()


async def _contend(io: LocalFileIO, path: Path, etag: str, i: int, outcomes: dict[int, str]) -> None:
    """Odd contenders replace the file, even ones delete it, all from the same version."""
    try:
        if i % 2:
            await io.write_if_match(str(path), f"w{i}".encode(), etag)
        else:
            await io.delete(str(path), if_match=etag)
        outcomes[i] = "won"
    except (PreconditionFailedError, ObjectNotFoundError):
        outcomes[i] = "lost"
