"""Concurrent appenders on one table, per commit protocol, against real servers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import ARROW_SCHEMA, FAST_RETRY, run_writer, s3_options
from servers.backends import create_bucket

import aioiceberg
from aioiceberg.commit.protocols.base import version_path
from aioiceberg.table import Table

pytestmark = pytest.mark.usefixtures("aws_clients_closed")

TESTS = Path(__file__).resolve().parents[1]


@dataclass
class Setup:
    name: str
    root: str
    lock: str | None
    options: dict[str, Any] | None

    def catalog(self) -> aioiceberg.Catalog:
        return aioiceberg.connect(self.root, lock=self.lock, storage_options=self.options)


@pytest.fixture(params=["local", "s3", "dynamodb"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    if request.param == "local":
        yield Setup("local", str(tmp_path / "warehouse"), None, None)
        return
    endpoint: str = request.getfixturevalue("moto_endpoint")
    bucket = await create_bucket(endpoint)
    lock = f"dynamodb://commits_{uuid.uuid4().hex[:8]}" if request.param == "dynamodb" else None
    yield Setup(request.param, f"s3://{bucket}/warehouse", lock, s3_options(endpoint))


async def new_table(setup: Setup, properties: dict[str, str] | None = None) -> Table:
    catalog = setup.catalog()
    return await catalog.create_table(
        "db.events", schema=ARROW_SCHEMA, properties={**FAST_RETRY, **(properties or {})}
    )


async def check_history(table: Table, acknowledged: list[int], appends: int) -> None:
    """Every acknowledged row exactly once (read by PyIceberg), one snapshot per append, linear,
    and version files 1..N without gaps."""
    from pyiceberg.table import StaticTable

    await table.refresh()
    md = table.metadata
    history = table.history()
    assert len(history) == appends == len(md.snapshots)
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]
    assert [s.sequence_number for s in history] == list(range(1, appends + 1))
    assert md.last_sequence_number == appends
    assert [e.snapshot_id for e in md.snapshot_log] == [s.snapshot_id for s in history]
    for version in range(1, table.version + 1):
        assert await table.io.exists(version_path(table.location, version)), version
    assert not await table.io.exists(version_path(table.location, table.version + 1))
    static = StaticTable.from_metadata(table.metadata_location, properties=_pyiceberg_props(table))
    ids = static.scan().to_arrow().column("id").to_pylist()
    assert sorted(ids) == sorted(acknowledged)
    assert len(set(ids)) == len(ids)


def _pyiceberg_props(table: Table) -> dict[str, str]:
    options = getattr(table.io, "options", None)
    if options is None or options.endpoint_url is None:
        return {}
    return {
        "s3.endpoint": options.endpoint_url,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }


@pytest.mark.anyio
async def test_sixteen_task_appenders_each_land_exactly_once(setup: Setup) -> None:
    table = await new_table(setup)
    # three appends each: every append still races fifteen others, on 48 commits instead of 160
    # (each one rebases over all that landed before it, so the cost grows with the square: the
    # ten-append run cost ~3x the CPU of four, four ~1.7x that of three)
    results = await asyncio.gather(
        *(run_writer(setup.root, setup.lock, setup.options, "db.events", f"w{i}", 3) for i in range(16))
    )
    acknowledged = [i for r in results for i in r]
    await check_history(table, acknowledged, 48)


@pytest.mark.anyio
async def test_four_process_appenders_each_land_exactly_once(setup: Setup) -> None:
    table = await new_table(setup)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-X",
            "faulthandler",  # a crash in native code prints where it happened
            str(TESTS / "commit_helpers.py"),
            setup.root,
            setup.lock or "",
            json.dumps(setup.options or {}),
            "db.events",
            f"p{i}",
            "10",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for i in range(4)
    ]
    outputs = [await p.communicate() for p in procs]
    failed = [
        f"exit {p.returncode}: stdout {out.decode()[-500:]!r} stderr {err.decode()[-3000:]!r}"
        for p, (out, err) in zip(procs, outputs, strict=True)
        if p.returncode != 0
    ]
    assert not failed, failed
    acknowledged = [i for out, _ in outputs for i in json.loads(out.decode().strip().splitlines()[-1])]
    assert len(acknowledged) == 4 * 10 * 3
    await check_history(table, acknowledged, 40)


@pytest.mark.anyio
async def test_racing_tasks_without_the_in_process_lock_still_land_once(setup: Setup) -> None:
    table = await new_table(setup, {"commit.in-process-lock": "false"})
    results = await asyncio.gather(
        *(run_writer(setup.root, setup.lock, setup.options, "db.events", f"w{i}", 3) for i in range(8))
    )
    await check_history(table, [i for r in results for i in r], 24)


@pytest.mark.anyio
async def test_missing_commit_table_is_created_on_first_use_unless_disabled(moto_endpoint: str) -> None:
    from aioiceberg.errors import StoreError

    bucket = await create_bucket(moto_endpoint)
    name = f"commits_{uuid.uuid4().hex[:8]}"
    options = s3_options(moto_endpoint)
    refusing = aioiceberg.connect(
        f"s3://{bucket}/wh", lock=f"dynamodb://{name}?create_table=false", storage_options=options
    )
    with pytest.raises(StoreError, match=name):
        await refusing.create_table("db.events", schema=ARROW_SCHEMA)
    assert [i async for i in refusing.io.list(refusing.table_location("db.events") + "/")] == []
    catalog = aioiceberg.connect(f"s3://{bucket}/wh", lock=f"dynamodb://{name}", storage_options=options)
    table = await catalog.create_table("db.events", schema=ARROW_SCHEMA)
    assert table.version == 1
    # the commit point is the DynamoDB item; v1.metadata.json is the copy for file readers
    assert await table.io.exists(version_path(table.location, 1))
