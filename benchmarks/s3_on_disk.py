"""A FileIO that keeps ``s3://bucket/key`` objects in ``<root>/bucket/key`` on local disk.

Benchmarks build tables through it with their final ``s3://`` locations, so every path in
metadata, manifest lists and manifests is the one the nginx store (``nginx_store.py``)
serves from ``root``; no path rewriting after the fact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from aioiceberg.io.base import FileIO, ObjectInfo, RangeResult
from aioiceberg.io.local import LocalFileIO
from aioiceberg.runtime import default_runtime


class S3OnDiskIO(FileIO):
    """Writes and reads ``s3://bucket/key`` as ``<root>/bucket/key`` on local disk.

    Table builders write through it with the table's final ``s3://`` locations, so every
    path inside metadata, manifest lists and manifests is the one the nginx store serves.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        self.local = LocalFileIO(fsync=False).bind_runtime(default_runtime())

    def _path(self, location: str) -> str:
        if not location.startswith("s3://"):
            raise ValueError(f"not an s3:// location: {location}")
        key = location.removeprefix("s3://")
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad s3 location: {location}")
        path = str(self.root / key)
        return path + "/" if key.endswith("/") else path  # a listing prefix keeps its slash

    def _back(self, info: ObjectInfo) -> ObjectInfo:
        key = Path(info.location.removeprefix("file://")).resolve().relative_to(self.root)
        return ObjectInfo(f"s3://{key.as_posix()}", info.size, info.etag, info.last_modified)

    async def read(self, location: str) -> bytes:
        return await self.local.read(self._path(location))

    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        return await self.local.read_block(self._path(location), start, length)

    async def head(self, location: str) -> ObjectInfo:
        return self._back(await self.local.head(self._path(location)))

    async def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        async for info in self.local.list(self._path(prefix), page_size=page_size):
            yield self._back(info)

    async def write(self, location: str, data: bytes) -> ObjectInfo:
        return self._back(await self.local.write(self._path(location), data))

    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        return self._back(await self.local.write_if_absent(self._path(location), data))

    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        return self._back(await self.local.write_if_match(self._path(location), data, etag))

    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        await self.local.delete(self._path(location), if_match=if_match)


def mirror_bucket(endpoint: str, bucket: str, root: Path | str) -> int:
    """Copy every object of ``bucket`` at ``endpoint`` (moto) to ``<root>/<bucket>/<key>``.

    For tables another engine writes (PyIceberg needs a writable store): build on moto with
    the final ``s3://bucket/...`` paths, then serve the copy with nginx. Returns the count.
    """
    import boto3  # type: ignore[import-untyped]

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    target = Path(root) / bucket
    copied = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            key: str = item["Key"]
            path = target / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
            copied += 1
    return copied
