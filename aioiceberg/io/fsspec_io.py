"""Adapter for any fsspec filesystem: reads and plain writes, no conditional writes.

fsspec has no portable compare-and-swap, and s3fs retries failed PUTs internally, so a
conditional PUT through it could be repeated blindly (a lost response then looks like a
lost race). Conditional operations therefore raise ConditionalWritesUnsupportedError;
commits go through the native ``s3://`` or local backends instead.

Async filesystems (s3fs, gcsfs, ...) are driven through their coroutine API on the
running loop, one instance per loop; others run in worker threads.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import anyio.to_thread

from aioiceberg.errors import MissingExtraError, ObjectNotFoundError, StoreError
from aioiceberg.io.base import Capabilities, FileIO, ObjectInfo, RangeResult, unsupported
from aioiceberg.io.etag import unquote_etag


def _strip(protocol: str, location: str) -> str:
    prefix = f"{protocol}://"
    return location[len(prefix) :] if location.startswith(prefix) else location


class FsspecFileIO(FileIO):
    capabilities = Capabilities(False, False, False)

    def __init__(self, protocol: str, storage_options: Mapping[str, Any] | None = None) -> None:
        import fsspec  # fsspec: optional (the s3 extra, or fsspec alone)

        self.protocol = protocol
        self.remote = protocol not in ("file", "local", "memory")
        self.storage_options = dict(storage_options or {})
        try:
            self._cls = fsspec.get_filesystem_class(protocol)
        except ImportError as exc:  # fsspec's own words name the library ("Install gcsfs to ...")
            raise MissingExtraError(
                f"{protocol}:// storage through fsspec: {exc}", name=exc.name or protocol, extra=None
            ) from None
        self._sync_fs: Any = None
        self._loop_fs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def store_key(self, location: str) -> str:
        return f"fsspec:{self.protocol}:{id(self)}"

    async def _call(self, location: str, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            if getattr(self._cls, "async_impl", False):
                fs = await self._async_fs()
                return await getattr(fs, f"_{name}")(*args, **kwargs)
            if self._sync_fs is None:
                self._sync_fs = self._cls(use_listings_cache=False, **self.storage_options)
            fs = self._sync_fs
            return await anyio.to_thread.run_sync(lambda: getattr(fs, name)(*args, **kwargs))
        except StoreError:
            raise
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(str(exc), location=location) from exc
        except (TimeoutError, OSError) as exc:
            raise StoreError(repr(exc), location=location, retryable=True) from exc

    async def _async_fs(self) -> Any:
        loop = asyncio.get_running_loop()
        fs = self._loop_fs.get(loop)
        if fs is None:
            # No listings cache: a stale listing would hide versions other writers added.
            fs = self._cls(
                asynchronous=True,
                loop=loop,
                skip_instance_cache=True,
                use_listings_cache=False,
                **self.storage_options,
            )
            if hasattr(fs, "set_session"):
                await fs.set_session()
            self._loop_fs[loop] = fs
        return fs

    def _path(self, location: str) -> str:
        if self.protocol in {"http", "https"}:
            return location  # HTTP filesystems take whole URLs
        return _strip(self.protocol, location)

    def _object_info(self, location: str, info: Mapping[str, Any]) -> ObjectInfo:
        etag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or ""
        modified: Any = info.get("LastModified") or info.get("mtime") or info.get("created")
        when: float | None = modified.timestamp() if hasattr(modified, "timestamp") else modified
        if not etag:
            etag = f"{info.get('size')}-{when}"
        return ObjectInfo(location, int(info.get("size") or 0), unquote_etag(str(etag)), when)

    async def read(self, location: str) -> bytes:
        data: bytes = await self._call(location, "cat_file", self._path(location))
        return data

    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        info = await self.head(location)
        first = max(0, info.size + start) if start < 0 else min(start, info.size)
        end = min(info.size, first + max(0, length))
        data = (
            b""
            if end <= first
            else await self._call(location, "cat_file", self._path(location), start=first, end=end)
        )
        return RangeResult(bytes(data), first, info.size, info.etag)

    async def head(self, location: str) -> ObjectInfo:
        info = await self._call(location, "info", self._path(location))
        if info.get("type") == "directory":
            raise ObjectNotFoundError("is a directory", location=location)
        return self._object_info(location, info)

    async def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        path = self._path(prefix)
        root = path if path.endswith("/") else path.rsplit("/", 1)[0] if "/" in path else path
        try:
            found: dict[str, Any] = await self._call(prefix, "find", root, detail=True)
        except ObjectNotFoundError:
            return
        names = sorted(n for n in found if n.startswith(path.lstrip("/")) or n.startswith(path))
        for i in range(0, len(names), page_size):
            for name in names[i : i + page_size]:
                yield self._object_info(f"{self.protocol}://{name.lstrip('/')}", found[name])
            await anyio.sleep(0)

    async def write(self, location: str, data: bytes) -> ObjectInfo:
        await self._call(location, "pipe_file", self._path(location), data)
        return await self.head(location)

    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        raise unsupported(location, "create-only writes", f"fsspec {self.protocol!r}")

    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        raise unsupported(location, "write-if-match", f"fsspec {self.protocol!r}")

    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        if if_match is not None:
            raise unsupported(location, "delete-if-match", f"fsspec {self.protocol!r}")
        try:
            await self._call(location, "rm_file", self._path(location))
        except ObjectNotFoundError:
            pass

    async def delete_many(self, locations: Iterable[str], *, concurrency: int = 16) -> None:
        paths = [self._path(location) for location in locations]
        if paths:
            try:
                await self._call(paths[0], "rm", paths)
            except ObjectNotFoundError:
                await super().delete_many([f"{self.protocol}://{p}" for p in paths], concurrency=concurrency)

    async def aclose(self) -> None:
        fs = self._loop_fs.pop(asyncio.get_running_loop(), None)
        creator = getattr(fs, "_s3creator", None)  # s3fs keeps its client's context manager here
        if creator is not None:
            await creator.__aexit__(None, None, None)
