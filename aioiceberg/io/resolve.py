"""Pick a backend from a location URI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aioiceberg.extras import require
from aioiceberg.io.base import FileIO
from aioiceberg.io.fsspec_io import FsspecFileIO
from aioiceberg.io.local import LocalFileIO
from aioiceberg.io.memory import MemoryFileIO
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO, obstore_available
from aioiceberg.io.s3 import S3FileIO

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})

# storage option choosing a backend: "fsspec" (s3:// via s3fs), "aiobotocore" (S3 without obstore)
BACKEND_OPTION = "io.backend"


def scheme_of(location: str) -> str:
    """URI scheme, or ``file`` for plain paths (a one-letter scheme is a Windows drive)."""
    scheme = urlsplit(location).scheme.lower()
    return scheme if len(scheme) > 1 else "file"


def resolve_io(
    location: str, storage_options: Mapping[str, Any] | None = None, *, runtime: Runtime
) -> FileIO:
    """``s3://`` -> S3 (obstore; aiobotocore without it or with ``io.backend=aiobotocore``),
    ``file://`` / paths -> local, ``memory://`` -> the runtime's memory store (the process's),
    any other scheme -> the fsspec adapter (or ``io.backend=fsspec``); bound to ``runtime``."""
    backend = str((storage_options or {}).get(BACKEND_OPTION, "native")).lower()
    if scheme_of(location) == "memory" and backend != "fsspec":
        return MemoryFileIO(runtime.memory).bind_runtime(runtime)
    return _backend(location, storage_options).bind_runtime(runtime)


def _backend(location: str, storage_options: Mapping[str, Any] | None) -> FileIO:
    options = dict(storage_options or {})
    scheme = scheme_of(location)
    backend = str(options.pop(BACKEND_OPTION, "native")).lower()
    if backend == "fsspec" or scheme not in S3_SCHEMES | {"file", "memory"}:
        require("fsspec", "s3" if scheme in S3_SCHEMES else None, f"{scheme}:// storage through fsspec")
        if scheme in S3_SCHEMES:
            require("s3fs", "s3", f"{scheme}:// storage through fsspec")

        return FsspecFileIO(scheme, fsspec_options(scheme, options))
    if scheme in S3_SCHEMES:
        if backend != "aiobotocore" and obstore_available():
            return ObstoreS3FileIO(options)
        require("aiobotocore", "s3", f"{scheme}:// storage")
        return S3FileIO(options)
    return LocalFileIO(fsync=str(options.get("local.fsync", "true")).lower() != "false")


_S3FS_OPTIONS = {
    "s3.access-key-id": "key",
    "s3.secret-access-key": "secret",
    "s3.session-token": "token",
}


def fsspec_options(scheme: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for an fsspec filesystem.

    Dotted keys belong to aioiceberg's own layers (``s3.*``, ``dynamodb.*``, ``local.*``) and
    are never fsspec arguments; the common ``s3.*`` ones are translated for s3fs.
    """
    out = {k: v for k, v in options.items() if "." not in k}
    if scheme in S3_SCHEMES:
        for ours, theirs in _S3FS_OPTIONS.items():
            if ours in options:
                out.setdefault(theirs, options[ours])
        client_kwargs = dict(out.get("client_kwargs") or {})
        if "s3.endpoint" in options:
            client_kwargs.setdefault("endpoint_url", options["s3.endpoint"])
        if "s3.region" in options:
            client_kwargs.setdefault("region_name", options["s3.region"])
        if client_kwargs:
            out["client_kwargs"] = client_kwargs
    return out
