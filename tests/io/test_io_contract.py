"""One behavioural suite, run against every FileIO backend over real servers."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from servers.backends import BACKENDS, Store, make_store

from aioiceberg.errors import (
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)
from aioiceberg.io import InputFile, Outcome
from aioiceberg.io.local import TMP_PREFIX, local_path

pytestmark = pytest.mark.anyio

PARAMS = [pytest.param(b, marks=pytest.mark.localstack) if b == "localstack" else b for b in BACKENDS]


@pytest.fixture(params=PARAMS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    name: str = request.param
    endpoint = None
    if name in {"moto", "moto-aiobotocore", "fsspec-s3fs"}:
        endpoint = request.getfixturevalue("moto_endpoint")
    elif name == "localstack":
        endpoint = request.getfixturevalue("localstack_endpoint")
    s = await make_store(name, tmp_path, endpoint)
    try:
        yield s
    finally:
        await s.io.aclose()


def payload(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


async def test_written_object_reads_back_with_size_and_version(store: Store) -> None:
    loc = store.at("a/b.bin")
    info = await store.io.write(loc, payload(1000))
    assert info.size == 1000 and info.etag
    assert await store.io.read(loc) == payload(1000)
    head = await store.io.head(loc)
    assert (head.size, head.etag) == (1000, info.etag)
    assert head.last_modified is not None
    assert await store.io.exists(loc)


async def test_overwrite_changes_version(store: Store) -> None:
    loc = store.at("v")
    first = await store.io.write(loc, b"one")
    second = await store.io.write(loc, b"two!")
    assert first.etag != second.etag
    assert await store.io.read(loc) == b"two!"


async def test_missing_object_errors_are_typed(store: Store) -> None:
    loc = store.at("missing")
    with pytest.raises(ObjectNotFoundError):
        await store.io.read(loc)
    with pytest.raises(ObjectNotFoundError):
        await store.io.head(loc)
    with pytest.raises(ObjectNotFoundError):
        await store.io.read_range(loc, 0, 10)
    assert not await store.io.exists(loc)


async def test_range_reads_return_exact_slices_and_clamp_at_end(store: Store) -> None:
    loc = store.at("range.bin")
    data = payload(10_000, seed=7)
    await store.io.write(loc, data)
    assert await store.io.read_range(loc, 0, 1) == data[:1]
    assert await store.io.read_range(loc, 1234, 4321) == data[1234:5555]
    assert await store.io.read_range(loc, 9_990, 100) == data[9_990:]
    assert await store.io.read_range(loc, 10_000, 5) == b""
    empty = store.at("range-empty.bin")
    await store.io.write(empty, b"")
    assert await store.io.read_range(empty, 0, 5) == b""
    assert await store.io.read_tail(loc, 8) == data[-8:]
    assert await store.io.read_tail(loc, 50_000) == data
    block = await store.io.read_block(loc, 100, 50)
    assert (block.start, block.total_size, block.data) == (100, 10_000, data[100:150])
    tail = await store.io.read_block(loc, -16, 16)
    assert (tail.start, tail.total_size, tail.data) == (10_000 - 16, 10_000, data[-16:])


async def test_a_read_expecting_a_size_returns_the_whole_object_whatever_was_recorded(store: Store) -> None:
    loc = store.at("sized.bin")
    data = payload(5_000, seed=11)
    await store.io.write(loc, data)
    for recorded in (5_000, 4_999, 17, 0, 5_001, 90_000):
        assert await store.io.read_expecting(loc, recorded) == data, recorded
    with pytest.raises(ObjectNotFoundError):
        await store.io.read_expecting(store.at("missing-sized"), 10)


async def test_stream_yields_every_byte_in_order(store: Store) -> None:
    loc = store.at("stream.bin")
    data = payload(300_000, seed=3)
    await store.io.write(loc, data)
    chunks = [c async for c in store.io.stream(loc, chunk_size=64 * 1024)]
    assert b"".join(chunks) == data
    assert b"".join([c async for c in store.io.stream(loc, start=299_000)]) == data[299_000:]


async def test_small_object_is_read_once_through_input_file(store: Store) -> None:
    loc = store.at("small.avro")
    data = payload(5000)
    await store.io.write(loc, data)
    async with InputFile(store.io, loc, block_size=64 * 1024) as f:
        assert await f.read(4) == data[:4]
        f.seek(100)
        assert await f.read(100) == data[100:200]
        assert await f.read_at(4000, 2000) == data[4000:]
        assert await f.size() == 5000
        assert f.requests == 1


async def test_large_object_read_sequentially_with_bounded_read_ahead(store: Store) -> None:
    loc = store.at("large.parquet")
    data = payload(200_000, seed=9)
    await store.io.write(loc, data)
    async with InputFile(store.io, loc, block_size=32 * 1024) as f:
        assert await f.read_tail(8) == data[-8:]
        f.seek(0)
        out = [await f.read(10_000) for _ in range(20)]
        assert b"".join(out) == data
        # 7 blocks of 32 KiB cover the object; the tail read adds one
        assert f.requests <= 8


async def test_listing_pages_through_a_prefix_in_key_order(store: Store) -> None:
    names = [f"tbl/data/part-{i:03d}.parquet" for i in range(23)]
    async with anyio.create_task_group() as tg:
        for name in [*names, "tbl/metadata/v1.json", "tbl-other/x", "other/y"]:
            tg.start_soon(store.io.write, store.at(name), b"x")
    listed = [info async for info in store.io.list(store.at("tbl/data/"), page_size=5)]
    assert [i.location for i in listed] == [store.at(n) for n in names]
    assert all(i.size == 1 for i in listed)
    partial = [i.location async for i in store.io.list(store.at("tbl/data/part-01"), page_size=4)]
    assert partial == [store.at(f"tbl/data/part-{i:03d}.parquet") for i in range(10, 20)]
    both = [i.location async for i in store.io.list(store.at("tbl"))]
    assert len(both) == 25
    assert [i async for i in store.io.list(store.at("nothing/"))] == []


async def test_listing_with_incomplete_writes_yields_both_listings_once(store: Store) -> None:
    names = ["tbl/data/a.parquet", "tbl/data/b/c.parquet", "tbl/metadata/v1.json", "tbl-other/x"]
    for name in names:
        await store.io.write(store.at(name), b"x")
    if store.name == "local":  # the one store whose dead writers leave something behind
        dead = Path(local_path(store.at("tbl/data/b/"))) / f"{TMP_PREFIX}dead"
        dead.write_bytes(b"half")
    for prefix in ("tbl/", "tbl", "tbl/data/b/", "nothing/"):
        at = store.at(prefix)
        both = [i async for i in store.io.list_with_incomplete(at, page_size=2)]
        apart = [i async for i in store.io.list(at)] + [i async for i in store.io.list_incomplete(at)]
        assert sorted(i.location for i in both) == sorted(i.location for i in apart), prefix
        assert {(i.location, i.size, i.etag) for i in both} == {(i.location, i.size, i.etag) for i in apart}
    incomplete = [i.location async for i in store.io.list_incomplete(store.at("tbl/"))]
    assert len(incomplete) == (1 if store.name == "local" else 0)


async def test_delete_is_idempotent_and_delete_many_removes_all(store: Store) -> None:
    locs = [store.at(f"del/{i}") for i in range(12)]
    for loc in locs:
        await store.io.write(loc, b"d")
    await store.io.delete(locs[0])
    await store.io.delete(locs[0])
    assert not await store.io.exists(locs[0])
    await store.io.delete_many(locs[1:])
    assert [i async for i in store.io.list(store.at("del/"))] == []


async def test_create_only_write_refuses_an_existing_object(store: Store) -> None:
    loc = store.at("meta/v1.json")
    if not store.conditional:
        with pytest.raises(ConditionalWritesUnsupportedError):
            await store.io.write_if_absent(loc, b"first")
        return
    await store.io.write_if_absent(loc, b"first")
    with pytest.raises(PreconditionFailedError) as caught:
        await store.io.write_if_absent(loc, b"second")
    assert Outcome.of(caught.value) is Outcome.PRECONDITION_FAILED
    assert not caught.value.retryable
    assert await store.io.read(loc) == b"first"


async def test_write_if_match_replaces_only_the_expected_version(store: Store) -> None:
    loc = store.at("pointer")
    if not store.conditional:
        with pytest.raises(ConditionalWritesUnsupportedError):
            await store.io.write_if_match(loc, b"x", "etag")
        return
    v1 = await store.io.write(loc, b"v1")
    v2 = await store.io.write_if_match(loc, b"v2", v1.etag)
    assert v2.etag != v1.etag
    assert (await store.io.head(loc)).etag == v2.etag
    with pytest.raises(PreconditionFailedError):
        await store.io.write_if_match(loc, b"v3", v1.etag)
    assert await store.io.read(loc) == b"v2"
    with pytest.raises(StoreError) as caught:
        await store.io.write_if_match(store.at("absent"), b"x", v1.etag)
    assert Outcome.of(caught.value) is Outcome.PRECONDITION_FAILED
    assert not await store.io.exists(store.at("absent"))


async def test_delete_if_match_checks_the_version(store: Store) -> None:
    loc = store.at("guarded")
    v1 = await store.io.write(loc, b"v1")
    if not store.conditional:
        with pytest.raises(ConditionalWritesUnsupportedError):
            await store.io.delete(loc, if_match=v1.etag)
        return
    v2 = await store.io.write(loc, b"v2")
    if not store.io.capabilities.conditional_delete:  # obstore: no conditional DELETE
        with pytest.raises(ConditionalWritesUnsupportedError):
            await store.io.delete(loc, if_match=v2.etag)
        assert await store.io.exists(loc)
        return
    try:
        with pytest.raises(PreconditionFailedError):
            await store.io.delete(loc, if_match=v1.etag)
        await store.io.delete(loc, if_match=v2.etag)
    except ConditionalWritesUnsupportedError:
        assert store.name == "localstack"  # LocalStack answers DeleteObject(IfMatch) with 501
        return
    assert not await store.io.exists(loc)


async def test_fifty_concurrent_create_only_writers_have_exactly_one_winner(store: Store) -> None:
    if not store.conditional:
        pytest.skip("backend has no conditional writes (covered by the unsupported-error tests)")
    loc = store.at("race/v2.metadata.json")
    outcomes: dict[int, Outcome] = {}

    async def writer(i: int) -> None:
        try:
            await store.io.write_if_absent(loc, f"writer-{i}".encode())
            outcomes[i] = Outcome.WRITTEN
        except PreconditionFailedError as exc:
            outcomes[i] = Outcome.of(exc)

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(writer, i)
    winners = [i for i, o in outcomes.items() if o is Outcome.WRITTEN]
    assert len(outcomes) == 50 and len(winners) == 1
    assert await store.io.read(loc) == f"writer-{winners[0]}".encode()


async def test_concurrent_replacers_of_one_version_have_exactly_one_winner(store: Store) -> None:
    if not store.conditional:
        pytest.skip("backend has no conditional writes")
    loc = store.at("race/pointer")
    base = await store.io.write(loc, b"base")
    won: list[int] = []
    lost: list[int] = []

    async def replacer(i: int) -> None:
        try:
            await store.io.write_if_match(loc, f"r{i}".encode(), base.etag)
            won.append(i)
        except PreconditionFailedError:
            lost.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(replacer, i)
    assert len(won) == 1 and len(lost) == 19
    assert await store.io.read(loc) == f"r{won[0]}".encode()


async def test_empty_and_binary_objects_round_trip(store: Store) -> None:
    await store.io.write(store.at("empty"), b"")
    assert await store.io.read(store.at("empty")) == b""
    assert (await store.io.head(store.at("empty"))).size == 0
    blob = hashlib.sha256(b"x").digest() * 1000
    await store.io.write(store.at("blob"), blob)
    assert await store.io.read(store.at("blob")) == blob
