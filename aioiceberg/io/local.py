"""Local file-system backend with the same commit guarantees as S3, across processes.

* create-only: write a temp file, fsync, then ``os.link`` it to the target (fails if the
  target exists, atomically), fsync the directory;
* write-if-match: under an ``fcntl`` lock on a per-directory sidecar file, compare the
  version token and ``os.replace`` a fsynced temp file over the target;
* version token: inode, mtime_ns and size. Replacements under the lock get a strictly
  larger mtime than the version they replace, so a chain of replacements never repeats
  a token even when inode numbers are reused within one clock tick;
* folders are only where files are, as on S3: deleting a folder's last file removes its
  lock file and the folder, and :meth:`LocalFileIO.remove_empty_folders` clears a tree a
  purge emptied. A lock is held only once its file is still the folder's (checked after
  ``flock``), so a lock file may be removed under its own lock.

Blocking calls run in worker threads (``anyio.to_thread``) so the event loop never waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

import anyio.to_thread

from aioiceberg._concurrency import task_group
from aioiceberg.errors import ObjectNotFoundError, PreconditionFailedError, StoreError
from aioiceberg.io.base import FileIO, ObjectInfo, RangeResult

T = TypeVar("T")

LOCK_NAME = ".aioiceberg.lock"
TMP_PREFIX = ".aioiceberg-tmp-"


def local_path(location: str) -> str:
    """``file:///abs/path`` or a plain path to an absolute file-system path."""
    if location.startswith("file:"):
        parts = urlsplit(location)
        if parts.netloc not in {"", "localhost"}:
            raise ValueError(f"remote file URI not supported: {location!r}")
        return unquote(parts.path)
    return os.path.abspath(location)


def existing_path(location: str) -> str:
    """The path of a file to read or delete: :func:`local_path`, or the path as written when
    that does not exist and the ``file:`` URI holds escapes. Java's Hadoop file system writes
    URIs without decoding them (``file:/t/p=a%2Fb/f`` is the folder ``p=a%2Fb``); our writes
    always go to the decoded path, which wins when both exist. Blocking: for a worker thread."""
    path = local_path(location)
    if "%" not in location or not location.startswith("file:") or os.path.lexists(path):
        return path
    written = urlsplit(location).path
    return written if os.path.lexists(written) else path


def _token(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _info(location: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(location, st.st_size, _token(st), st.st_mtime_ns / 1e9)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_folder(directory: str) -> None:
    """``os.makedirs``, which fails when a delete of a folder's last file removes the folder
    while it looks: then again."""
    while True:
        try:
            os.makedirs(directory, exist_ok=True)
            return
        except FileExistsError:
            try:
                if stat.S_ISDIR(os.stat(directory).st_mode):
                    return  # made again meanwhile
            except FileNotFoundError:
                continue
            raise  # a file where the folder should be


def _create_in(directory: str, name: str) -> int:
    """Open a new file in ``directory``, making the folder; again if a delete of the folder's
    last file removed it between the two."""
    while True:
        _make_folder(directory)
        try:
            return os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:
            continue


def _write_temp(directory: str, data: bytes) -> str:
    tmp = os.path.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}")
    fd = _create_in(directory, os.path.basename(tmp))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


@contextlib.contextmanager
def _dir_lock(directory: str, *, create: bool = True) -> Iterator[None]:
    """Exclusive cross-process lock serialising check-then-replace/delete in one directory.
    Without ``create``, a missing directory raises ``FileNotFoundError``."""
    path = os.path.join(directory, LOCK_NAME)
    while True:
        if create:
            _make_folder(directory)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            if not create:
                raise
            continue  # the folder was removed between the two
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                held = os.stat(path)
            except FileNotFoundError:
                held = None
            mine = os.fstat(fd)
            if held is not None and (held.st_ino, held.st_dev) == (mine.st_ino, mine.st_dev):
                yield
                return
            # the holder before us removed the lock file (and perhaps the folder): start over
        finally:
            os.close(fd)  # closing releases the flock


def _remove_if_empty(directory: str) -> None:
    """Remove ``directory`` if nothing but its lock file is left (the caller holds the lock).
    A file written meanwhile (writes take no lock) keeps the folder."""
    with os.scandir(directory) as entries:
        if any(entry.name != LOCK_NAME for entry in entries):
            return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, LOCK_NAME))
    with contextlib.suppress(OSError):
        os.rmdir(directory)


def _stat(path: str, location: str) -> os.stat_result:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ObjectNotFoundError(location=location) from None
    if not os.path.isfile(path):
        raise ObjectNotFoundError("not a file", location=location)
    return st


def _is_internal(name: str) -> bool:
    return name == LOCK_NAME or name.startswith(TMP_PREFIX)


def _spelled(path: str, as_uri: bool) -> str:
    """A listed file's location: a ``file:`` URI when the listing's prefix was one."""
    return Path(path).as_uri() if as_uri else path


def folder_entries(folder: str) -> list[str]:
    """What lies right in ``folder`` (a location ending in ``/``), sorted: files (temp files
    included, lock files not) and folders (ending in ``/``; a link to a folder is a file, as
    listings never follow one), spelled as :meth:`LocalFileIO.list` spells locations, so
    that a listing of an entry names its objects as a listing of ``folder`` would. Nothing
    when the folder is gone. Blocking: for a worker thread."""
    as_uri = folder.startswith("file:")
    path = local_path(folder)
    try:
        with os.scandir(path) as found:
            return sorted(
                _spelled(os.path.join(path, e.name), as_uri)
                + ("/" if e.is_dir(follow_symlinks=False) else "")
                for e in found
                if e.name != LOCK_NAME
            )
    except (FileNotFoundError, NotADirectoryError):
        return []


class LocalFileIO(FileIO):
    """Objects are files; ``file:///abs/path`` and plain paths both work."""

    def __init__(self, *, fsync: bool = True) -> None:
        self.fsync = fsync

    def store_key(self, location: str) -> str:
        return "file:"

    async def _run(self, location: str, fn: Callable[[], T]) -> T:
        try:
            return await anyio.to_thread.run_sync(fn)
        except StoreError:
            raise
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(str(exc), location=location) from exc
        except OSError as exc:
            raise StoreError(str(exc), location=location, retryable=False) from exc

    # -- reads -------------------------------------------------------------
    async def read(self, location: str) -> bytes:
        def run() -> bytes:
            path = existing_path(location)
            _stat(path, location)
            with open(path, "rb") as f:
                return f.read()

        return await self._run(location, run)

    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        def run() -> RangeResult:
            path = existing_path(location)
            _stat(path, location)
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                first = max(0, st.st_size + start) if start < 0 else min(start, st.st_size)
                f.seek(first)
                return RangeResult(f.read(max(0, length)), first, st.st_size, _token(st))

        return await self._run(location, run)

    async def head(self, location: str) -> ObjectInfo:
        return await self._run(location, lambda: _info(location, _stat(existing_path(location), location)))

    async def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        """String-prefix semantics like S3: ``dir/ab`` matches ``dir/abc`` and ``dir/ab/x``."""
        async for info in self._walk(prefix, page_size, lambda name: not _is_internal(name)):
            yield info

    async def list_incomplete(self, prefix: str) -> AsyncIterator[ObjectInfo]:
        """Temp files of writes that never finished (the writer was killed before its rename)."""
        async for info in self._walk(prefix, 1000, lambda name: name.startswith(TMP_PREFIX)):
            yield info

    async def list_with_incomplete(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        """Objects and temp files from one walk of the tree (two listings walk it twice)."""
        async for info in self._walk(prefix, page_size, lambda name: name != LOCK_NAME):
            yield info

    async def _walk(
        self, prefix: str, page_size: int, wanted: Callable[[str], bool]
    ) -> AsyncIterator[ObjectInfo]:
        as_uri = prefix.startswith("file:")
        path_prefix = local_path(prefix)
        if prefix.endswith("/") and not path_prefix.endswith("/"):
            path_prefix += "/"
        root = path_prefix if path_prefix.endswith("/") else os.path.dirname(path_prefix)

        def scan() -> list[tuple[str, os.stat_result]]:
            found: list[tuple[str, os.stat_result]] = []
            for directory, dirs, files in os.walk(root):
                dirs[:] = [
                    d
                    for d in dirs
                    if (os.path.join(directory, d) + "/").startswith(path_prefix)
                    or path_prefix.startswith(os.path.join(directory, d) + "/")
                ]
                for name in files:
                    full = os.path.join(directory, name)
                    if not wanted(name) or not full.startswith(path_prefix):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        found.append((full, os.stat(full)))
            found.sort(key=lambda item: item[0])
            return found

        entries = await self._run(prefix, scan)
        for i in range(0, len(entries), page_size):
            for full, st in entries[i : i + page_size]:
                yield _info(_spelled(full, as_uri), st)
            await anyio.sleep(0)

    # -- writes ------------------------------------------------------------
    def _temp(self, directory: str, data: bytes) -> str:
        if self.fsync:
            return _write_temp(directory, data)
        tmp = os.path.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        with open(_create_in(directory, os.path.basename(tmp)), "wb") as f:
            f.write(data)
        return tmp

    def _sync_dir(self, directory: str) -> None:
        if self.fsync:
            _fsync_dir(directory)

    async def write(self, location: str, data: bytes) -> ObjectInfo:
        path = local_path(location)
        directory = os.path.dirname(path)

        def run() -> ObjectInfo:
            tmp = self._temp(directory, data)
            os.replace(tmp, path)
            self._sync_dir(directory)
            return _info(location, os.stat(path))

        return await self._run(location, run)

    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        path = local_path(location)
        directory = os.path.dirname(path)

        def run() -> ObjectInfo:
            tmp = self._temp(directory, data)
            try:
                os.link(tmp, path)
                st = os.stat(tmp)
            except FileExistsError:
                raise PreconditionFailedError(location=location) from None
            finally:
                os.unlink(tmp)
            self._sync_dir(directory)
            return _info(location, st)

        return await self._run(location, run)

    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        path = local_path(location)
        directory = os.path.dirname(path)

        def run() -> ObjectInfo:
            tmp = self._temp(directory, data)
            try:
                with _dir_lock(directory):
                    try:
                        current = _stat(path, location)
                    except ObjectNotFoundError:  # leave no folder a write of ours made
                        os.unlink(tmp)
                        _remove_if_empty(directory)
                        raise
                    if _token(current) != etag:
                        raise PreconditionFailedError(location=location)
                    mtime = max(time.time_ns(), current.st_mtime_ns + 1)
                    os.utime(tmp, ns=(mtime, mtime))
                    os.replace(tmp, path)
                    self._sync_dir(directory)
                    return _info(location, os.stat(path))
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

        return await self._run(location, run)

    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        def unlink(path: str) -> None:
            if if_match is not None and _token(_stat(path, location)) != if_match:
                raise PreconditionFailedError(location=location)
            try:
                os.unlink(path)
            except FileNotFoundError:
                if if_match is not None:
                    raise ObjectNotFoundError(location=location) from None
                return
            self._sync_dir(os.path.dirname(path))

        def run() -> None:
            path = existing_path(location)
            directory = os.path.dirname(path)
            try:
                with _dir_lock(directory, create=False):
                    try:
                        unlink(path)
                    finally:
                        _remove_if_empty(directory)
            except FileNotFoundError:  # no folder: no file
                if if_match is not None:
                    raise ObjectNotFoundError(location=location) from None

        await self._run(location, run)

    async def delete_many(self, locations: Iterable[str], *, concurrency: int = 16) -> None:
        """Deletes grouped by folder: one lock, one folder fsync and one emptiness check per
        folder rather than per file (what made bulk deletes slow); folders in parallel."""
        wanted = list(locations)
        paths = await anyio.to_thread.run_sync(lambda: [existing_path(location) for location in wanted])
        by_folder: dict[str, list[tuple[str, str]]] = {}
        for location, path in zip(wanted, paths, strict=True):
            by_folder.setdefault(os.path.dirname(path), []).append((location, path))
        failures: list[str] = []
        limiter = anyio.Semaphore(concurrency)

        def run(directory: str, files: list[tuple[str, str]]) -> None:
            try:
                with _dir_lock(directory, create=False):
                    try:
                        for location, path in files:
                            try:
                                os.unlink(path)
                            except FileNotFoundError:
                                continue
                            except OSError as exc:
                                failures.append(f"{location}: {exc}")
                        self._sync_dir(directory)
                    finally:
                        _remove_if_empty(directory)
            except FileNotFoundError:  # no folder: no files
                return
            except OSError as exc:
                failures.extend(f"{location}: {exc}" for location, _ in files)

        async def one(directory: str, files: list[tuple[str, str]]) -> None:
            async with limiter:
                await anyio.to_thread.run_sync(run, directory, files)

        async with task_group() as tg:
            for directory, files in by_folder.items():
                tg.start_soon(one, directory, files)
        if failures:
            raise StoreError(f"{len(failures)} deletes failed: " + "; ".join(failures[:5]), retryable=False)

    async def remove_empty_folders(self, prefix: str) -> None:
        """Remove the folder ``prefix`` names and every folder below it left without files
        (lock files aside), deepest first: what a purge leaves of a table's tree."""
        top = local_path(prefix).rstrip("/")

        def run() -> None:
            for directory, _, files in os.walk(top, topdown=False):
                if not files:
                    with contextlib.suppress(OSError):
                        os.rmdir(directory)  # fails while a folder or a file is in it
                elif files == [LOCK_NAME]:
                    with contextlib.suppress(FileNotFoundError), _dir_lock(directory, create=False):
                        _remove_if_empty(directory)

        await self._run(prefix, run)
