"""Maintenance deletes (``delete_files``: orphan removal, expiry, their Spark executor tasks)
go through the store's bulk delete: the local disk's per-folder batches and S3's
DeleteObjects (obstore and aiobotocore paths, on moto). What cannot be deleted is named,
the rest is gone."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from servers.backends import Store, make_store

from aioiceberg.errors import StoreError
from aioiceberg.io.local import LOCK_NAME
from aioiceberg.maintenance.reachable import delete_files

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["local", "moto", "moto-aiobotocore"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    name: str = request.param
    endpoint = request.getfixturevalue("moto_endpoint") if name != "local" else None
    s = await make_store(name, tmp_path, endpoint)
    try:
        yield s
    finally:
        await s.io.aclose()


def names(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n != LOCK_NAME)


async def listed(store: Store, prefix: str) -> list[str]:
    return sorted([i.location async for i in store.io.list(store.at(prefix))])


async def test_delete_files_removes_many_objects_in_batches(store: Store) -> None:
    # several bulk requests' worth (small batches here), over several folders, with a
    # missing object
    paths = [store.at(f"data/f{i % 3}/{i:05d}.parquet") for i in range(40)]
    for path in paths:
        await store.io.write(path, b"x")
    keep = store.at("data/keep.parquet")
    await store.io.write(keep, b"k")
    missing = store.at("data/f9/never-written.parquet")
    assert await delete_files(store.io, [*paths, missing], batch_size=7) == []
    assert await listed(store, "data/") == [keep]


async def test_a_delete_that_fails_is_named_and_the_others_still_go(tmp_path: Path) -> None:
    store = await make_store("local", tmp_path)
    paths = [store.at(f"t/data/{i}.parquet") for i in range(20)]
    for path in paths:
        await store.io.write(path, b"x")
    folder = tmp_path / "t" / "data" / "nested"
    (folder / "inner").mkdir(parents=True)  # a folder where an object is named: cannot go
    bad = folder.as_uri()
    with pytest.raises(StoreError, match="nested"):
        await store.io.delete_many([*paths, bad])
    assert await delete_files(store.io, [*paths, bad]) == [bad]
    assert names(tmp_path / "t" / "data") == ["nested"]


async def test_local_bulk_delete_removes_the_folders_it_empties(tmp_path: Path) -> None:
    store = await make_store("local", tmp_path)
    paths = [store.at(f"t/data/p={p}/{i}.parquet") for p in range(4) for i in range(5)]
    for path in paths:
        await store.io.write(path, b"x")
    await store.io.write(store.at("t/data/p=0/late.parquet"), b"y")  # keeps its folder
    await store.io.delete_many(paths)
    assert names(tmp_path / "t" / "data") == ["p=0"]
    assert names(tmp_path / "t" / "data" / "p=0") == ["late.parquet"]
