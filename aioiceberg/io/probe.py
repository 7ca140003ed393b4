"""Conditional-write capability probe, cached per store.

Some S3-compatible servers accept ``If-None-Match: *`` and ignore it. Commits through
such a store would silently overwrite each other, so before committing we prove the
store refuses a second create-only PUT and a stale write-if-match.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass

from aioiceberg.errors import (
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)
from aioiceberg.io.base import FileIO

PROBE_DIR = ".aioiceberg-probe"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    create_only: bool
    replace_if_match: bool
    delete_if_match: bool
    detail: str = ""

    @property
    def safe_for_commits(self) -> bool:
        return self.create_only and self.replace_if_match


_CACHE: dict[str, ProbeResult] = {}
_LOCKS: dict[tuple[int, str], asyncio.Lock] = {}


def _probe_location(base: str) -> str:
    return f"{base.rstrip('/')}/{PROBE_DIR}/{uuid.uuid4().hex}"


async def probe(io: FileIO, base_location: str, *, refresh: bool = False) -> ProbeResult:
    """Test conditional writes under ``base_location`` once per store; the result is cached."""
    key = io.store_key(base_location)
    if not refresh and key in _CACHE:
        return _CACHE[key]
    lock = _LOCKS.setdefault((id(asyncio.get_running_loop()), key), asyncio.Lock())
    async with lock:
        if not refresh and key in _CACHE:
            return _CACHE[key]
        result = await _run_probe(io, _probe_location(base_location))
        _CACHE[key] = result
        return result


async def _run_probe(io: FileIO, location: str) -> ProbeResult:
    if not (io.capabilities.conditional_create and io.capabilities.conditional_replace):
        return ProbeResult(False, False, False, f"{type(io).__name__} has no conditional writes")
    create_only = replace = delete = False
    notes: list[str] = []
    try:
        first = await io.write_if_absent(location, b"1")
        try:
            await io.write_if_absent(location, b"2")
            notes.append("a second If-None-Match PUT of the same key was accepted")
        except PreconditionFailedError:
            create_only = True
        try:
            await io.write_if_match(location, b"3", "0" * 32 if first.etag != "0" * 32 else "1" * 32)
            notes.append("a PUT with a stale If-Match was accepted")
        except (PreconditionFailedError, ObjectNotFoundError):
            current = await io.head(location)
            try:
                await io.write_if_match(location, b"4", current.etag)
                replace = True
            except PreconditionFailedError:
                notes.append("a PUT with the current If-Match was refused")
        current = await io.head(location)
        try:
            await io.delete(location, if_match=current.etag)
            delete = True
        except ConditionalWritesUnsupportedError:
            notes.append("conditional delete not implemented")
        except StoreError as exc:
            notes.append(f"conditional delete failed: {exc}")
    finally:
        with contextlib.suppress(StoreError):
            await io.delete(location)
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


def clear_probe_cache() -> None:
    _CACHE.clear()
    _LOCKS.clear()
