"""Build each FileIO backend against a fresh namespace (bucket or directory) for one test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aioiceberg.io import FileIO, LocalFileIO, MemoryFileIO, S3FileIO
from aioiceberg.io.fsspec_io import FsspecFileIO
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO
from aioiceberg.runtime import default_runtime

from .plugin import s3_storage_options, unique_bucket_name

BACKENDS = ("memory", "local", "moto", "moto-aiobotocore", "localstack", "fsspec-s3fs")


@dataclass
class Store:
    name: str
    io: FileIO
    base: str  # ends with "/"
    conditional: bool = True

    def at(self, key: str) -> str:
        return self.base + key


async def create_bucket(endpoint: str) -> str:
    io = S3FileIO(s3_storage_options(endpoint)).bind_runtime(default_runtime())
    client = await io.runtime.clients.get(io.options)
    bucket = unique_bucket_name()
    try:
        await client.create_bucket(Bucket=bucket)
    finally:
        await io.aclose()
    return bucket


async def make_store(name: str, tmp_path: Path, endpoint: str | None = None) -> Store:
    if name == "memory":
        return Store(name, MemoryFileIO().bind_runtime(default_runtime()), "memory://test/")
    if name == "local":
        return Store(name, LocalFileIO().bind_runtime(default_runtime()), tmp_path.as_uri() + "/")
    assert endpoint is not None
    bucket = await create_bucket(endpoint)
    if name in {"moto", "localstack"}:  # the default S3 path: obstore
        return Store(
            name,
            ObstoreS3FileIO(s3_storage_options(endpoint)).bind_runtime(default_runtime()),
            f"s3://{bucket}/",
        )
    if name == "moto-aiobotocore":
        return Store(
            name, S3FileIO(s3_storage_options(endpoint)).bind_runtime(default_runtime()), f"s3://{bucket}/"
        )
    if name == "fsspec-s3fs":
        io = FsspecFileIO(
            "s3",
            {
                "key": "testing",
                "secret": "testing",
                "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
            },
        ).bind_runtime(default_runtime())
        return Store(name, io, f"s3://{bucket}/", conditional=False)
    raise ValueError(name)
