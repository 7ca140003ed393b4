"""Local backend: commit guarantees across processes, and file-system details."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from loop_helpers import loop_ticks

from aioiceberg.errors import ObjectNotFoundError, PreconditionFailedError
from aioiceberg.io import LocalFileIO, resolve_io
from aioiceberg.io.local import LOCK_NAME, TMP_PREFIX, folder_entries
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.anyio

WRITERS = 50


def _create_only_writer(location: str, i: int, barrier: Any, results: Any) -> None:
    async def run() -> str:
        try:
            await (
                LocalFileIO()
                .bind_runtime(default_runtime())
                .write_if_absent(location, f"writer-{i}".encode())
            )
            return "won"
        except PreconditionFailedError:
            return "lost"

    barrier.wait()
    results.put((i, anyio.run(run)))


def _replace_writer(location: str, etag: str, i: int, barrier: Any, results: Any) -> None:
    async def run() -> str:
        try:
            await (
                LocalFileIO().bind_runtime(default_runtime()).write_if_match(location, f"r{i}".encode(), etag)
            )
            return "won"
        except PreconditionFailedError:
            return "lost"

    barrier.wait()
    results.put((i, anyio.run(run)))


def _race(target: Any, args: tuple[Any, ...], n: int) -> dict[int, str]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, i, barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return outcomes


def test_fifty_processes_creating_one_file_have_exactly_one_winner(tmp_path: Path) -> None:
    location = (tmp_path / "metadata" / "v1.metadata.json").as_uri()
    outcomes = _race(_create_only_writer, (location,), WRITERS)
    winners = [i for i, o in outcomes.items() if o == "won"]
    assert len(outcomes) == WRITERS and len(winners) == 1
    assert (tmp_path / "metadata" / "v1.metadata.json").read_bytes() == f"writer-{winners[0]}".encode()
    assert os.listdir(tmp_path / "metadata") == ["v1.metadata.json"]  # no temp files left


async def test_processes_replacing_one_version_have_exactly_one_winner(tmp_path: Path) -> None:
    location = str(tmp_path / "pointer")
    base = await LocalFileIO().bind_runtime(default_runtime()).write(location, b"base")
    outcomes = _race(_replace_writer, (location, base.etag), 20)
    winners = [i for i, o in outcomes.items() if o == "won"]
    assert len(winners) == 1
    assert (tmp_path / "pointer").read_bytes() == f"r{winners[0]}".encode()


async def test_plain_paths_and_file_uris_name_the_same_file(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    await io.write(str(tmp_path / "a" / "b.txt"), b"hello")
    assert await io.read((tmp_path / "a" / "b.txt").as_uri()) == b"hello"
    listed = [o.location async for o in io.list(str(tmp_path) + "/")]
    assert listed == [str(tmp_path / "a" / "b.txt")]


async def test_escaped_file_uris_find_files_at_the_path_as_written(tmp_path: Path) -> None:
    """Java's Hadoop file system keeps ``file:/t/p=a%2Fb/f`` at the folder ``p=a%2Fb``: reads,
    heads and deletes find it there; our writes go to the decoded path, which wins."""
    io = LocalFileIO().bind_runtime(default_runtime())
    java = tmp_path / "t" / "p=a%2Fb"
    java.mkdir(parents=True)
    for name in ("f", "g", "h"):
        (java / name).write_bytes(b"java")
    location = f"file:{java}/f"
    assert await io.read(location) == b"java"
    assert (await io.head(location)).size == 4
    assert (await io.read_block(location, 1, 2)).data == b"av"
    await io.delete(location)
    await io.delete_many([f"file:{java}/g", f"file://{java}/h"])
    assert not java.exists()  # its last file gone, the folder went too

    both = tmp_path / "u" / "p=a%2Fb"
    both.mkdir(parents=True)
    (both / "f").write_bytes(b"java")
    location = f"file:{both}/f"
    await io.write(location, b"ours")
    assert (tmp_path / "u" / "p=a" / "b" / "f").read_bytes() == b"ours"
    assert await io.read(location) == b"ours"
    await io.delete(location)
    assert not (tmp_path / "u" / "p=a" / "b" / "f").exists() and (both / "f").read_bytes() == b"java"

    spaced = (tmp_path / "My Data" / "x").as_uri()  # a warehouse of ours: written decoded
    await io.write(spaced, b"x")
    assert await io.read(spaced) == b"x" and not (tmp_path / "My%20Data").exists()
    await io.delete_many([spaced])
    assert not (tmp_path / "My Data").exists()
    missing = f"file:{tmp_path}/v/p=a%2Fb/f"
    with pytest.raises(ObjectNotFoundError):
        await io.read(missing)
    await io.delete(missing)  # nothing there: nothing to do


async def test_listing_hides_lock_and_temp_files(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    v1 = await io.write(str(tmp_path / "p"), b"1")
    await io.write_if_match(str(tmp_path / "p"), b"2", v1.etag)
    assert (tmp_path / LOCK_NAME).exists()
    assert [o.location async for o in io.list(str(tmp_path) + "/")] == [str(tmp_path / "p")]


async def test_one_walk_lists_objects_and_a_dead_writers_temp_files_never_the_lock(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    v1 = await io.write(str(tmp_path / "d" / "p"), b"1")
    await io.write_if_match(str(tmp_path / "d" / "p"), b"2", v1.etag)
    await io.write(str(tmp_path / "d" / "q" / "r"), b"3")
    (tmp_path / "d" / "q" / f"{TMP_PREFIX}dead").write_bytes(b"half")  # its writer was killed
    assert (tmp_path / "d" / LOCK_NAME).exists()
    listed = [o.location async for o in io.list_with_incomplete((tmp_path / "d").as_uri() + "/")]
    assert listed == [
        (tmp_path / "d" / "p").as_uri(),
        (tmp_path / "d" / "q" / f"{TMP_PREFIX}dead").as_uri(),
        (tmp_path / "d" / "q" / "r").as_uri(),
    ]


async def test_folder_entries_are_spelled_as_listings_spell_locations(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    await io.write(str(tmp_path / "s=a b" / "f 1"), b"1")
    await io.write(str(tmp_path / "s=a b" / "x%41"), b"2")
    v1 = await io.write(str(tmp_path / "top"), b"3")
    await io.write_if_match(str(tmp_path / "top"), b"4", v1.etag)  # leaves a lock file
    (tmp_path / "link").symlink_to(tmp_path / "s=a b")  # an object entry: listings never follow it
    for spell in (lambda p: p.as_uri(), str):
        folder = spell(tmp_path) + "/"
        inner = spell(tmp_path / "s=a b") + "/"
        assert folder_entries(folder) == sorted([inner, spell(tmp_path / "link"), spell(tmp_path / "top")])
        listed = [o.location async for o in io.list(folder)]
        assert sorted(folder_entries(inner)) == [loc for loc in listed if loc.startswith(inner)]
        assert len(listed) == 3
    assert folder_entries(tmp_path.as_uri() + "/gone/") == []


async def test_replacements_never_repeat_a_version_token(tmp_path: Path) -> None:
    io = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    loc = str(tmp_path / "pointer")
    info = await io.write(loc, b"same")
    seen = {info.etag}
    for _ in range(50):
        info = await io.write_if_match(loc, b"same", info.etag)
        assert info.etag not in seen
        seen.add(info.etag)


async def test_blocking_file_io_leaves_the_event_loop_free(tmp_path: Path) -> None:
    io = LocalFileIO().bind_runtime(default_runtime())
    async with loop_ticks() as ticks:
        await io.write(str(tmp_path / "big"), os.urandom(8 << 20))
        await io.read(str(tmp_path / "big"))
    assert ticks.count > 2


def test_resolve_io_picks_the_backend_from_the_scheme(tmp_path: Path) -> None:
    from aioiceberg.io import MemoryFileIO, S3FileIO
    from aioiceberg.io.fsspec_io import FsspecFileIO
    from aioiceberg.io.obstore_s3 import ObstoreS3FileIO

    assert isinstance(
        resolve_io("s3://bucket/key", {"s3.endpoint": "http://x"}, runtime=default_runtime()), ObstoreS3FileIO
    )
    assert isinstance(resolve_io("s3a://bucket/key", runtime=default_runtime()), ObstoreS3FileIO)
    assert isinstance(
        resolve_io("s3://bucket/key", {"io.backend": "aiobotocore"}, runtime=default_runtime()), S3FileIO
    )
    assert isinstance(resolve_io(str(tmp_path), runtime=default_runtime()), LocalFileIO)
    assert isinstance(resolve_io(tmp_path.as_uri(), runtime=default_runtime()), LocalFileIO)
    assert isinstance(resolve_io("memory://t/x", runtime=default_runtime()), MemoryFileIO)
    a, b = (
        resolve_io("memory://a", runtime=default_runtime()),
        resolve_io("memory://b", runtime=default_runtime()),
    )
    assert a.store_key("memory://a") == b.store_key("memory://b")  # one store per runtime
    assert isinstance(
        resolve_io("s3://b/k", {"io.backend": "fsspec"}, runtime=default_runtime()), FsspecFileIO
    )
    assert isinstance(resolve_io("https://example.com/t/x", runtime=default_runtime()), FsspecFileIO)


def test_fsspec_gets_only_fsspec_arguments_with_s3_options_translated() -> None:
    from aioiceberg.io.resolve import fsspec_options

    opts = fsspec_options(
        "s3",
        {
            "s3.endpoint": "http://127.0.0.1:9",
            "s3.access-key-id": "k",
            "s3.secret-access-key": "s",
            "dynamodb.endpoint": "http://127.0.0.1:9",
            "anon": False,
        },
    )
    assert opts == {
        "anon": False,
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
    }
    assert fsspec_options("gcs", {"local.fsync": "false", "project": "p"}) == {"project": "p"}
