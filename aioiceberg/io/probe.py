"""Conditional-write capability probe, cached per store.

Some S3-compatible servers accept ``If-None-Match: *`` and ignore it. Commits through
such a store would silently overwrite each other, so before committing we prove the
store refuses a second create-only PUT and a stale write-if-match.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable

from aioiceberg.errors import (
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.base import FileIO
from aioiceberg.io.probe_results import ProbeCache, ProbeResult
from aioiceberg.retrying import Backoff, retry

PROBE_DIR = ".aioiceberg-probe"

__all__ = ["PROBE_DIR", "ProbeCache", "ProbeResult", "probe", "require_conditional_writes"]


def _probe_location(base: str) -> str:
    return f"{base.rstrip('/')}/{PROBE_DIR}/{uuid.uuid4().hex}"


async def probe(io: FileIO, base_location: str, *, refresh: bool = False) -> ProbeResult:
    """Test conditional writes under ``base_location`` once per store; the result is cached."""
    cache = io.runtime.probes
    key = io.store_key(base_location)
    if not refresh and key in cache.results:
        return cache.results[key]
    async with cache.lock(key):
        if not refresh and key in cache.results:
            return cache.results[key]
        result = await _run_probe(io, base_location)
        cache.results[key] = result
        return result


_PROBE_RUNS = Backoff("conditional-write probe", base_delay_s=0.05, max_delay_s=0.5, max_attempts=3)


class _Undecided(Exception):
    """A probe write whose outcome could not be read back."""


async def _holds(io: FileIO, location: str, token: bytes) -> bool:
    """Whether the object holds ``token`` (False when absent); the read retries itself."""
    try:
        return await io.read(location) == token
    except ObjectNotFoundError:
        return False
    except StoreError as exc:
        if not exc.retryable:
            raise  # denied, say: a run on a fresh key would fail the same way
        raise _Undecided(f"cannot read {location} back: {exc}") from exc


async def _took_effect(io: FileIO, location: str, token: bytes, write: Awaitable[object]) -> bool:
    """Send one probe write; True if the store applied it, False if it refused it.

    Every probe write carries a token of its own, so a lost response is settled by reading
    the object back instead of failing the commit that asked for the probe.
    """
    try:
        await write
        return True
    except (PreconditionFailedError, ObjectNotFoundError):
        return False
    except WriteOutcomeUnknownError:
        return await _holds(io, location, token)


def _token(step: str) -> bytes:
    return f"{step}-{uuid.uuid4().hex}".encode()


async def _run_probe(io: FileIO, base_location: str) -> ProbeResult:
    if not (io.capabilities.conditional_create and io.capabilities.conditional_replace):
        return ProbeResult(False, False, False, f"{type(io).__name__} has no conditional writes")

    async def attempt() -> ProbeResult:
        location = _probe_location(base_location)  # a fresh key each time: nothing to settle
        try:
            return await _probe_once(io, location)
        except (_Undecided, WriteOutcomeUnknownError) as exc:
            # this key's outcome stays unknown; a run on a fresh key may still decide
            raise StoreError(str(exc), location=location, retryable=True) from exc
        finally:
            with contextlib.suppress(StoreError):
                await io.delete(location)

    try:
        return await retry(attempt, _PROBE_RUNS)
    except StoreError as exc:
        if not exc.retryable:
            raise
        raise StoreError(
            f"the conditional-write capability probe under {base_location} could not tell whether the "
            f"store honours conditional writes ({exc}); no commit was attempted",
            location=base_location,
            retryable=True,
        ) from exc


async def _probe_once(io: FileIO, location: str) -> ProbeResult:
    notes: list[str] = []
    first = _token("create")
    if not await _took_effect(io, location, first, io.write_if_absent(location, first)):
        raise _Undecided(f"the first create-only PUT of the fresh key {location} did not land")
    second = _token("create-again")
    create_only = not await _took_effect(io, location, second, io.write_if_absent(location, second))
    if not create_only:
        notes.append("a second If-None-Match PUT of the same key was accepted")
    current = await io.head(location)
    stale_etag = "0" * 32 if current.etag != "0" * 32 else "1" * 32
    stale = _token("stale")
    replace = False
    if await _took_effect(io, location, stale, io.write_if_match(location, stale, stale_etag)):
        notes.append("a PUT with a stale If-Match was accepted")
    else:
        current = await io.head(location)
        fresh = _token("replace")
        replace = await _took_effect(io, location, fresh, io.write_if_match(location, fresh, current.etag))
        if not replace:
            notes.append("a PUT with the current If-Match was refused")
    delete = False
    current = await io.head(location)
    try:
        await io.delete(location, if_match=current.etag)
        delete = True
    except ConditionalWritesUnsupportedError:
        notes.append("conditional delete not implemented")
    except StoreError as exc:
        notes.append(f"conditional delete failed: {exc}")
    return ProbeResult(create_only, replace, delete, "; ".join(notes))


async def require_conditional_writes(io: FileIO, base_location: str) -> ProbeResult:
    """Raise ConditionalWritesUnsupportedError unless the store honours conditional PUTs."""
    result = await probe(io, base_location)
    if not result.safe_for_commits:
        raise ConditionalWritesUnsupportedError(
            f"store does not honour conditional writes ({result.detail}); refusing to commit through it",
            location=base_location,
        )
    return result
