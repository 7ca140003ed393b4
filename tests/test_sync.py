"""The blocking API: twins of every async method, streaming iterators, threads, loops, fork, exit."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg import sync
from aioiceberg._sync import runner
from aioiceberg.catalog import Catalog as AsyncCatalog
from aioiceberg.table import Table as AsyncTable
from aioiceberg.table import Transaction as AsyncTransaction
from aioiceberg.table_scan import Scan as AsyncScan

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "region": [("eu", "us")[i % 2] for i in ids]}, schema=SCHEMA)


def make_table(root: Path, appends: int = 3) -> sync.Table:
    table = sync.connect(str(root)).create_table("db.t", schema=SCHEMA, partition_by=["region"])
    for k in range(appends):
        table.append(rows(k * 10, 10))
    return table


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize(
    ("async_cls", "twin"),
    [
        (AsyncCatalog, sync.Catalog),
        (AsyncTable, sync.Table),
        (AsyncTransaction, sync.Transaction),
        (AsyncScan, sync.Scan),
    ],
)
def test_every_async_method_has_a_blocking_twin_with_the_same_parameters(async_cls: type, twin: type) -> None:
    methods = sync.async_methods(async_cls)
    assert methods, f"no async methods found on {async_cls.__name__}"
    for name, fn in methods.items():
        assert hasattr(twin, name), f"sync.{twin.__name__} has no twin of {name}"
        assert _parameters(getattr(twin, name)) == _parameters(fn), f"{twin.__name__}.{name}"


def test_module_functions_have_twins_with_the_same_parameters() -> None:
    assert _parameters(sync.connect) == _parameters(aioiceberg.connect)
    assert _parameters(sync.load_table) == _parameters(aioiceberg.load_table)


def test_scan_to_arrow_plan_files_and_batches_agree_with_the_async_api(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    got = table.scan(row_filter="region = 'eu'").to_arrow()
    expected = asyncio.run(_async_read(table.location))
    assert sorted(got.column("id").to_pylist()) == sorted(expected)
    tasks = list(table.scan(row_filter="region = 'eu'").plan_files())
    assert len(tasks) == 3 and all(t.file.record_count == 5 for t in tasks)
    assert sum(b.num_rows for b in table.scan().to_batches()) == 30


async def _async_read(location: str) -> list[int]:
    table = await aioiceberg.load_table(location)
    return list((await table.scan(row_filter="region = 'eu'").to_arrow()).column("id").to_pylist())


def test_plan_files_stops_early_and_the_loop_keeps_serving(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    tasks = table.scan().plan_files()
    first = next(iter(tasks))
    assert first.file.record_count > 0
    tasks.close()  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 30


def test_transaction_commits_once_on_clean_exit_and_not_on_error(tmp_path: Path) -> None:
    table = make_table(tmp_path, appends=0)
    before = table.version
    with table.transaction() as tx:
        tx.append(rows(0, 5))
        tx.append(rows(5, 5))
    assert table.version == before + 1  # one commit
    assert table.scan().to_arrow().num_rows == 10
    with pytest.raises(RuntimeError), table.transaction() as tx:
        tx.append(rows(10, 5))
        raise RuntimeError("abandon")
    assert table.refresh().version == before + 1
    assert table.scan().to_arrow().num_rows == 10


def test_generic_fallback_wraps_methods_added_after_the_facade_was_written(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    if not hasattr(AsyncTable, "delete"):
        pytest.skip("Table.delete not available yet")
    table.delete("id < 5")  # a generated twin
    assert table.scan().to_arrow().num_rows == 25
    assert isinstance(table.refresh(), sync.Table)


def test_32_threads_plan_and_read_at_once_on_one_background_loop(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    errors: list[BaseException] = []
    counts: list[int] = []
    barrier = threading.Barrier(32)

    def work() -> None:
        try:
            barrier.wait()
            mine = sync.load_table(table.location)
            n = sum(t.file.record_count for t in mine.scan(row_filter="id >= 10").plan_files())
            counts.append(n + mine.scan().to_arrow().num_rows)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    assert counts == [20 + 30] * 32
    assert runner.loop_thread() is not None and runner.loop_thread().is_alive()  # type: ignore[union-attr]


def test_blocking_api_works_inside_a_thread_that_runs_an_event_loop(tmp_path: Path) -> None:
    table = make_table(tmp_path)

    async def notebook_cell() -> int:
        # a notebook runs cells inside a loop: the blocking API must not touch that loop
        again = sync.load_table(table.location)
        return again.scan().to_arrow().num_rows + sum(1 for _ in again.scan().plan_files())

    assert asyncio.run(notebook_cell()) == 30 + 6


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_uses_the_api_and_exits_zero(tmp_path: Path) -> None:
    table = make_table(tmp_path)
    assert table.scan().to_arrow().num_rows == 30  # the parent's loop is running
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            child = sync.load_table(table.location)
            child.append(rows(100, 5))
            code = 0 if child.scan().to_arrow().num_rows == 35 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert table.refresh().scan().to_arrow().num_rows == 35  # and the parent still works


SCRIPT = """
import pyarrow as pa
from aioiceberg import sync

catalog = sync.connect({root!r}, storage_options={options!r})
schema = pa.schema([pa.field("id", pa.int64())])
table = catalog.create_table("db.t", schema=schema)
table.append(pa.table({{"id": list(range(100))}}, schema=schema))
assert sum(1 for _ in table.scan(row_filter="id > 50").plan_files()) == 1
assert table.scan(row_filter="id > 50").to_arrow().num_rows == 49
print("ok")
"""


@pytest.mark.parametrize("store", ["local", "moto"])
def test_plain_script_runs_and_exits_with_clean_stderr(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    if store == "moto":
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = asyncio.run(create_bucket(endpoint))
        root, options = f"s3://{bucket}/wh", s3_storage_options(endpoint)
    else:
        root, options = str(tmp_path / "wh"), {}
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT.format(root=root, options=options)))
    env = {**os.environ, "PYTHONWARNINGS": "always"}  # shows ResourceWarning (unclosed sessions)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert done.stderr.strip() == "", done.stderr
