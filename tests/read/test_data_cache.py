"""Small data files read from a remote store are kept for the next read (bounded, LRU,
keyed by store, path and the manifest's size), and nothing else is."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from random_parquet import PAIR, random_parquet
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg.errors import ValidationError
from aioiceberg.io.data_cache import DataFileCache
from aioiceberg.io.memory import MemoryFileIO
from aioiceberg.read import ReadMetrics, read_to_table
from aioiceberg.runtime import Runtime


class _RemoteCountingIO(MemoryFileIO):
    """An in-memory store that says its reads cross a network, counting GETs (whole or ranged)."""

    remote = True

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []

    async def read(self, location: str) -> bytes:
        self.gets.append(location)
        return await super().read(location)

    async def read_range(self, location: str, start: int, length: int) -> bytes:
        self.gets.append(location)
        return await super().read_range(location, start, length)


def test_the_bound_evicts_least_recently_used_and_refuses_big_files() -> None:
    cache = DataFileCache(800)
    for i in range(8):
        cache.put(("s", f"f{i}", 100), bytes(100))
    assert len(cache) == 8 and cache.size == 800
    assert cache.get(("s", "f0", 100)) is not None  # f0 is now the most recent
    cache.put(("s", "f8", 100), bytes(100))
    assert cache.get(("s", "f1", 100)) is None  # the least recent went
    assert cache.get(("s", "f0", 100)) is not None and cache.size == 800
    cache.put(("s", "big", 101), bytes(101))  # over an eighth of the bound: not kept
    assert cache.get(("s", "big", 101)) is None
    cache.put(("s", "short", 100), bytes(99))  # not the size the manifest records
    assert cache.get(("s", "short", 100)) is None
    off = DataFileCache(0)
    off.put(("s", "f", 0), b"")
    assert len(off) == 0


def test_runtime_checks_the_bound() -> None:
    with pytest.raises(ValidationError, match="data_cache_bytes"):
        Runtime(data_cache_bytes=-1)
    with pytest.raises(ValidationError, match="data_cache_bytes"):
        Runtime(data_cache_bytes=True)


@pytest.mark.anyio
async def test_a_second_read_of_a_remote_file_sends_no_get() -> None:
    runtime = Runtime()
    try:
        store = _RemoteCountingIO().bind_runtime(runtime)
        task = await random_parquet(store, "memory://t/hot.parquet", 20_000, 2_000)
        first = await read_to_table(store, [task], PAIR, row_filter="id < 500")
        stats = ReadMetrics()
        again = await read_to_table(store, [task], PAIR, row_filter="id < 500", stats=stats)
        assert again.equals(first) and first.num_rows == 500
        assert store.gets == ["memory://t/hot.parquet"]  # the second read came from the cache
        assert runtime.data_file_cache.hits == 1
        # a path listed with another size is another file: fetched, not served stale
        other = type(task)(
            type(task.file)(**{**_fields(task.file), "file_size_in_bytes": task.file.file_size_in_bytes + 1}),
            task.delete_files,
            task.residual,
            task.spec,
            task.schema,
        )
        for _ in range(2):  # and bytes that are not the recorded size are never kept
            assert (await read_to_table(store, [other], PAIR)).num_rows == 20_000
        assert store.gets == ["memory://t/hot.parquet"] * 3
    finally:
        await runtime.aclose()
    assert len(runtime.data_file_cache) == 0  # closing the runtime empties it


@pytest.mark.anyio
async def test_local_stores_and_a_zero_bound_keep_nothing() -> None:
    for remote, bound in ((False, 1 << 20), (True, 0)):
        runtime = Runtime(data_cache_bytes=bound)
        try:
            store = _RemoteCountingIO().bind_runtime(runtime)
            store.remote = remote
            task = await random_parquet(store, "memory://t/f.parquet", 5_000, 1_000)
            for _ in range(2):
                table = await read_to_table(store, [task], PAIR)
                assert table.num_rows == 5_000
            assert len(store.gets) == 2 and len(runtime.data_file_cache) == 0
        finally:
            await runtime.aclose()


@pytest.mark.anyio
async def test_s3_table_reads_repeat_from_the_cache(moto_endpoint: str) -> None:
    """A table on S3 (moto over HTTP), read twice by the public API: the same rows, the
    second time from the runtime's cache."""
    bucket = await create_bucket(moto_endpoint)
    data = pa.table({"id": pa.array(range(1000), pa.int64()), "v": pa.array([f"v{i}" for i in range(1000)])})
    async with (
        Runtime() as runtime,
        aioiceberg.connect(
            f"s3://{bucket}/wh", storage_options=s3_storage_options(moto_endpoint), runtime=runtime
        ) as catalog,
    ):
        table = await catalog.create_table("db.t", data.schema)
        await table.append(data)
        await table.append(data)
        cache = runtime.data_file_cache
        cache.clear()
        first = await table.scan(row_filter="id < 10").to_arrow()
        held = len(cache)
        again = await table.scan(row_filter="id < 10").to_arrow()
        assert first.num_rows == again.num_rows == 20
        assert held == 2 and cache.hits >= 2
        assert sorted(again.column("id").to_pylist()) == sorted(first.column("id").to_pylist())


def _fields(obj: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
