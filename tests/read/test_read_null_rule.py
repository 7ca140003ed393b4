"""The row filter is bound once: a planned task says its residual follows SQL's rule for
NULLs, and the reader applies it as it is; a task without that word still gets the rule."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import aioiceberg
from aioiceberg.expressions import bind
from aioiceberg.io import MemoryFileIO
from aioiceberg.read import read_to_table
from aioiceberg.runtime import default_runtime
from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "k", LongType()))


def _rows() -> pa.Table:
    ids = list(range(40))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 4 == 0 else i % 7 for i in ids], pa.int64()),
        }
    )


@pytest.mark.anyio
async def test_planned_tasks_carry_the_rule_and_read_sqls_rows(tmp_path: Path) -> None:
    """Over ``bucket(4, k)`` the residual of ``k != 5`` drops its guard where the partition
    decides it: the planner's flag stands for the rule, and no null row comes back."""
    rows = _rows()
    async with aioiceberg.connect(str(tmp_path)) as catalog:
        table = await catalog.create_table("db.t", schema=rows.schema, partition_by=["bucket(4, k)"])
        await table.append(rows)
        ks = rows.column("k").to_pylist()
        for text, keep in (
            ("k != 5", lambda k: k != 5),
            ("k not in (1, 2)", lambda k: k not in (1, 2)),
            ("not (k = 3 or k = 4)", lambda k: not (k == 3 or k == 4)),
        ):
            scan = table.scan(text)
            tasks = [t async for t in scan.plan_files()]
            assert tasks and all(t.residual_null_safe for t in tasks)
            got = await scan.to_arrow()
            # SQL: a row whose k is NULL makes each filter NULL, so it is not returned
            expected = [i for i, k in enumerate(ks) if k is not None and keep(k)]
            assert sorted(got.column("id").to_pylist()) == expected, text
            assert None not in got.column("k").to_pylist()


async def _one_file(store: MemoryFileIO) -> DataFile:
    buf = io.BytesIO()
    pq.write_table(_rows().cast(schema_to_arrow(SCHEMA)), buf)
    path = "memory://t/rows.parquet"
    await store.write(path, buf.getvalue())
    return DataFile(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=40,
        file_size_in_bytes=len(buf.getvalue()),
    )


@pytest.mark.anyio
async def test_the_reader_applies_the_rule_only_to_tasks_not_carrying_it() -> None:
    """A residual bound with Iceberg's rule (``!=`` true on a null): a task built by hand gets
    SQL's rule from the reader; one that says it carries the rule is read as it is."""
    store = MemoryFileIO().bind_runtime(default_runtime())
    f = await _one_file(store)
    residual = bind(SCHEMA, "k != 5")
    spec = PartitionSpec(0, ())
    by_hand = FileScanTask(f, (), residual, spec, SCHEMA)
    assert not by_hand.residual_null_safe
    got = await read_to_table(store, [by_hand], SCHEMA)
    assert None not in got.column("k").to_pylist()
    assert got.num_rows == len([i for i in range(40) if i % 4 and i % 7 != 5])
    as_is = FileScanTask(f, (), residual, spec, SCHEMA, residual_null_safe=True)
    assert as_is == by_hand  # the flag says how to read the residual, not what the task is
    got = await read_to_table(store, [as_is], SCHEMA)
    assert got.column("k").null_count == 10
    assert got.num_rows == len([i for i in range(40) if i % 4 == 0 or i % 7 != 5])
