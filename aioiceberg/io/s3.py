"""S3 backend on aiobotocore: retried idempotent calls, never-retried-blindly conditional PUTs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aioiceberg.errors import (
    ConditionalWritesUnsupportedError,
    ListingStalledError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.base import DEFAULT_CHUNK_SIZE, FileIO, ObjectInfo, RangeResult
from aioiceberg.io.etag import quote_etag, unquote_etag
from aioiceberg.io.s3_client import S3Options
from aioiceberg.retrying import Retries, RetryCounts, retry

T = TypeVar("T")

_THROTTLE_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}


# ``s3://bucket/key`` with nothing ``urlsplit`` would treat specially (query, fragment, IPv6
# brackets, characters it strips, non-ASCII hosts): split without it, ~10x faster per request
_PLAIN_S3 = re.compile(r"s3[an]?://([^/?#\[\]\s]+)/*([^?#\[\]\s]*)")


def split_s3(location: str) -> tuple[str, str]:
    plain = _PLAIN_S3.fullmatch(location) if location.isascii() else None
    if plain is not None:
        return plain.group(1), plain.group(2)
    parts = urlsplit(location)
    if parts.scheme not in {"s3", "s3a", "s3n"} or not parts.netloc:
        raise ValueError(f"not an s3 location: {location!r}")
    return parts.netloc, parts.path.lstrip("/")


def s3_store_key(options: S3Options, location: str) -> str:
    """The identity of the bucket ``location`` is in, whichever client reaches it."""
    bucket, _ = split_s3(location)
    return f"s3:{options.endpoint_url or 'aws'}:{options.region}:{bucket}"


def _translate(exc: Exception, location: str, *, conditional: bool = False) -> StoreError:
    """Map an SDK/transport error to a typed error.

    For conditional writes only definite rejections are retryable (409 conflict, 503
    SlowDown, connection never made); anything that may have reached the server is unknown.
    """
    # botocore: optional (the s3 extra)
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
    )
    from botocore.parsers import ResponseParserError

    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        message = f"{status} {code}: {error.get('Message', '')}".strip()
        if status == 412 or code == "PreconditionFailed":
            return PreconditionFailedError(message, location=location)
        if status == 404 or code in {"NoSuchKey", "NotFound", "NoSuchBucket"}:
            return ObjectNotFoundError(message, location=location)
        if status == 501 and conditional:
            return ConditionalWritesUnsupportedError(message, location=location)
        if status == 501:  # the server does not implement the request: a retry cannot help
            return StoreError(message, location=location, retryable=False)
        if status == 409 and code in {"ConditionalRequestConflict", "OperationAborted"}:
            return StoreError(message, location=location, retryable=True)
        if code in _THROTTLE_CODES or status == 429:
            return StoreError(message, location=location, retryable=True, throttled=True)
        if status >= 500:
            if conditional:
                return WriteOutcomeUnknownError(message, location=location)
            return StoreError(message, location=location, retryable=True)
        return StoreError(message, location=location, retryable=False)
    if isinstance(exc, ResponseParserError):  # a body that does not read as the answer it should be
        return StoreError(f"unreadable response: {exc}", location=location, retryable=True)
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return StoreError(f"cannot connect: {exc}", location=location, retryable=True)
    if isinstance(exc, BotoCoreError | OSError | asyncio.TimeoutError) or _is_aiohttp_error(exc):
        if conditional:
            return WriteOutcomeUnknownError(f"no response: {exc!r}", location=location)
        return StoreError(f"transport error: {exc!r}", location=location, retryable=True)
    raise exc


def _is_aiohttp_error(exc: Exception) -> bool:
    import aiohttp  # aiohttp: optional (the rest and server extras)

    return isinstance(exc, aiohttp.ClientError)


class S3FileIO(FileIO):
    """``s3://bucket/key`` objects through one shared aiobotocore client per event loop."""

    remote = True

    def __init__(self, storage_options: Mapping[str, Any] | None = None, *, options: S3Options | None = None):
        self.options = options or S3Options.from_storage_options(storage_options)
        self.retries = RetryCounts()  # counted by every retry loop, for metrics and tests

    def store_key(self, location: str) -> str:
        return s3_store_key(self.options, location)

    async def _call(self, location: str, op: Callable[[Any], Awaitable[T]]) -> T:
        async def attempt() -> T:
            client = await self.runtime.clients.get(self.options, holder=self)
            try:
                return await op(client)
            except Exception as exc:
                raise _translate(exc, location) from exc

        return await retry(attempt, self.options.backoff, on_retry=self.retries.count)

    async def _conditional(self, location: str, op: Callable[[Any], Awaitable[T]]) -> T:
        async def attempt() -> T:
            client = await self.runtime.clients.get(self.options, holder=self)
            try:
                return await op(client)
            except Exception as exc:
                raise _translate(exc, location, conditional=True) from exc

        return await retry(attempt, self.options.backoff, on_retry=self.retries.count)

    # -- reads -------------------------------------------------------------
    async def read(self, location: str) -> bytes:
        bucket, key = split_s3(location)

        async def op(client: Any) -> bytes:
            response = await client.get_object(Bucket=bucket, Key=key)
            async with response["Body"] as body:
                data: bytes = await body.read()
            return data

        return await self._call(location, op)

    async def read_block(self, location: str, start: int, length: int) -> RangeResult:
        bucket, key = split_s3(location)
        if length <= 0:
            info = await self.head(location)
            return RangeResult(b"", max(0, start if start >= 0 else info.size + start), info.size, info.etag)
        spec = f"bytes={start}" if start < 0 else f"bytes={start}-{start + length - 1}"

        async def op(client: Any) -> RangeResult:
            try:
                response = await client.get_object(Bucket=bucket, Key=key, Range=spec)
            except Exception as exc:
                if _status(exc) == 416:  # range starts past the end
                    info = await self.head(location)
                    return RangeResult(b"", info.size, info.size, info.etag)
                raise
            async with response["Body"] as body:
                data: bytes = await body.read()
            first, total = _content_range(response, len(data))
            if start < 0:
                data = data[: min(len(data), length)]
            return RangeResult(data, first, total, unquote_etag(response.get("ETag")))

        return await self._call(location, op)

    async def stream(
        self, location: str, *, chunk_size: int = DEFAULT_CHUNK_SIZE, start: int = 0
    ) -> AsyncIterator[bytes]:
        """One GET streamed in chunks; a broken stream resumes at its offset, pinned to the same ETag."""
        bucket, key = split_s3(location)
        offset = start
        etag: str | None = None
        retries = Retries(self.options.backoff, on_retry=self.retries.count)
        while True:
            extra: dict[str, str] = {"Range": f"bytes={offset}-"} if offset else {}
            if etag:
                extra["IfMatch"] = quote_etag(etag)
            try:
                client = await self.runtime.clients.get(self.options, holder=self)
                response = await client.get_object(Bucket=bucket, Key=key, **extra)
                etag = unquote_etag(response.get("ETag"))
                async with response["Body"] as body:
                    async for chunk in body.iter_chunks(chunk_size):
                        offset += len(chunk)
                        yield chunk
                return
            except Exception as exc:
                if _status(exc) == 416:
                    return
                error = _translate(exc, location)
                if not await retries.wait_to_retry(error):
                    raise error from exc

    async def head(self, location: str) -> ObjectInfo:
        bucket, key = split_s3(location)

        async def op(client: Any) -> ObjectInfo:
            response = await client.head_object(Bucket=bucket, Key=key)
            modified = response.get("LastModified")
            return ObjectInfo(
                location,
                int(response["ContentLength"]),
                unquote_etag(response.get("ETag")),
                modified.timestamp() if modified is not None else None,
            )

        return await self._call(location, op)

    async def list(self, prefix: str, *, page_size: int = 1000) -> AsyncIterator[ObjectInfo]:
        """Pages until the store says the listing is complete. A store that hands back a token
        it gave before, or the same page again (s3proxy reads back its URL-encoded token
        undecoded and restarts at a key with ``=``), raises ListingStalledError instead of
        paging forever."""
        bucket, key_prefix = split_s3(prefix)
        token: str | None = None
        seen_tokens: set[str] = set()
        previous_keys: list[str] = []
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": key_prefix, "MaxKeys": page_size}
            if token:
                kwargs["ContinuationToken"] = token

            async def op(client: Any, kwargs: dict[str, Any] = kwargs) -> dict[str, Any]:
                page: dict[str, Any] = await client.list_objects_v2(**kwargs)
                return page

            page = await self._call(prefix, op)
            if token:
                seen_tokens.add(token)
            next_token = page.get("NextContinuationToken")
            if page.get("IsTruncated") and next_token in seen_tokens:
                raise ListingStalledError(
                    f"the store repeats its continuation token {next_token!r}: the listing would never end",
                    location=prefix,
                )
            contents = page.get("Contents", ())
            if any(not isinstance(item.get("Key"), str) or "Size" not in item for item in contents):
                raise StoreError(
                    "the store's listing page holds an object without a key or a size", location=prefix
                )
            keys = [item["Key"] for item in contents]
            if token and keys and keys == previous_keys:
                raise ListingStalledError(
                    f"the store answered continuation token {token!r} with the page it had already "
                    "sent: it repeats its listing and would never end",
                    location=prefix,
                )
            previous_keys = keys
            for item in contents:
                yield ObjectInfo(
                    f"s3://{bucket}/{item['Key']}",
                    int(item["Size"]),
                    unquote_etag(item.get("ETag")),
                    item["LastModified"].timestamp() if item.get("LastModified") else None,
                )
            if not page.get("IsTruncated") or not next_token:
                return
            token = next_token

    # -- writes ------------------------------------------------------------
    async def write(self, location: str, data: bytes) -> ObjectInfo:
        bucket, key = split_s3(location)

        async def op(client: Any) -> ObjectInfo:
            response = await client.put_object(Bucket=bucket, Key=key, Body=data)
            return ObjectInfo(location, len(data), unquote_etag(response.get("ETag")))

        return await self._call(location, op)

    async def write_if_absent(self, location: str, data: bytes) -> ObjectInfo:
        return await self._put_conditional(location, data, IfNoneMatch="*")

    async def write_if_match(self, location: str, data: bytes, etag: str) -> ObjectInfo:
        return await self._put_conditional(location, data, IfMatch=quote_etag(etag))

    async def _put_conditional(self, location: str, data: bytes, **condition: str) -> ObjectInfo:
        bucket, key = split_s3(location)

        async def op(client: Any) -> ObjectInfo:
            response = await client.put_object(Bucket=bucket, Key=key, Body=data, **condition)
            return ObjectInfo(location, len(data), unquote_etag(response.get("ETag")))

        return await self._conditional(location, op)

    async def delete(self, location: str, *, if_match: str | None = None) -> None:
        bucket, key = split_s3(location)
        if if_match is None:

            async def op(client: Any) -> None:
                await client.delete_object(Bucket=bucket, Key=key)

            await self._call(location, op)
            return

        async def op_conditional(client: Any) -> None:
            await client.delete_object(Bucket=bucket, Key=key, IfMatch=quote_etag(if_match))

        await self._conditional(location, op_conditional)

    async def delete_many(self, locations: Iterable[str], *, concurrency: int = 16) -> None:
        """DeleteObjects in batches of 1000 per bucket; raises naming the keys that failed."""
        by_bucket: dict[str, list[str]] = {}
        for location in locations:
            bucket, key = split_s3(location)
            by_bucket.setdefault(bucket, []).append(key)
        failures: list[str] = []
        for bucket, keys in by_bucket.items():
            for i in range(0, len(keys), 1000):
                batch = keys[i : i + 1000]

                async def op(client: Any, batch: list[str] = batch, bucket: str = bucket) -> dict[str, Any]:
                    result: dict[str, Any] = await client.delete_objects(
                        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                    )
                    return result

                result = await self._call(f"s3://{bucket}/", op)
                failures.extend(
                    f"s3://{bucket}/{e.get('Key')}: {e.get('Code')}" for e in result.get("Errors", ())
                )
        if failures:
            raise StoreError(f"{len(failures)} deletes failed: " + "; ".join(failures[:5]), retryable=True)

    async def aclose(self) -> None:
        await self.runtime.clients.release(self, self.options)


def _status(exc: Exception) -> int:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return 0


def _content_range(response: Mapping[str, Any], received: int) -> tuple[int, int]:
    """(first byte, total size) from ``Content-Range: bytes a-b/total``; whole object if absent."""
    value = response.get("ContentRange")
    if not value:
        return 0, received
    span, _, total = str(value).partition("/")
    first = int(span.split()[-1].split("-")[0])
    return first, int(total)
