"""The runtime: the one owner of what a process shares between tables and scans.

Store clients (aiobotocore clients per event loop, obstore stores), conditional-write probe
results, the decoded-manifest caches, the manifest decoder pools and the DynamoDB table
checks all belong to a :class:`Runtime`. Every FileIO is bound to one (``io.runtime``), so
everything reached through a FileIO (a Catalog, its tables and scans, their commit
protocols) shares its runtime's state and nothing else.

``Runtime()`` is closed by ``await runtime.aclose()`` or ``async with``; a Catalog created
without one uses the process's default runtime (:func:`default_runtime`), which is the only
mutable state kept at module level. Its clients close when their event loop shuts down
(``asyncio.run`` and ``anyio.run`` end that way), its worker processes and stores at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self

import anyio

from aioiceberg._sync.runner import BlockingLoop
from aioiceberg.errors import ValidationError
from aioiceberg.gc_pause import collector_paused
from aioiceberg.io.data_cache import DEFAULT_DATA_CACHE_BYTES, DataFileCache
from aioiceberg.io.memory_objects import MemoryObjects
from aioiceberg.io.parsed import ParsedFiles
from aioiceberg.io.probe_results import ProbeCache
from aioiceberg.io.s3_client import ClientRegistry
from aioiceberg.scan.cache import ManifestCache, ManifestListCache
from aioiceberg.scan.decode import Decoder, warm_columnar_decoder

if TYPE_CHECKING:
    from aioiceberg.spec.metadata import TableMetadata

__all__ = [
    "DEFAULT_MANIFEST_CACHE_BYTES",
    "Runtime",
    "clear_probe_cache",
    "close_all_clients",
    "collector_paused",
    "default_runtime",
]

DEFAULT_MANIFEST_CACHE_BYTES = 256 * 1024 * 1024
DEFAULT_MANIFEST_LISTS = 128


class Runtime:
    """Shared clients, caches and worker pools, with one lifecycle.

    ``manifest_cache_bytes`` bounds the decoded-manifest cache (0 disables it);
    ``manifest_lists`` the number of decoded manifest lists kept; ``data_cache_bytes`` the
    bytes of small data files read from remote stores kept for the next read (0 disables it;
    see ``aioiceberg/io/data_cache.py``). ``write_io_concurrency``
    (uploads at once) and ``write_cpu_workers`` (threads encoding Parquet) are the writers'
    knobs: the process's, so no table property sets them. ``pause_gc`` lets planning
    hold off Python's cyclic garbage collector, process-wide, while it builds batches of
    manifest entries: off by default because the switch is the whole process's; see
    docs/architecture.md for what it saves.
    """

    def __init__(
        self,
        *,
        manifest_cache_bytes: int = DEFAULT_MANIFEST_CACHE_BYTES,
        manifest_lists: int = DEFAULT_MANIFEST_LISTS,
        data_cache_bytes: int = DEFAULT_DATA_CACHE_BYTES,
        pause_gc: bool = False,
        write_io_concurrency: int = 16,
        write_cpu_workers: int = 2,
        read_threads: int | None = None,
    ) -> None:
        for name, value in (
            ("write_io_concurrency", write_io_concurrency),
            ("write_cpu_workers", write_cpu_workers),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValidationError(f"Runtime({name}={value!r}): must be an int of at least 1")
        if read_threads is None:
            read_threads = max(1, (os.cpu_count() or 2) - 1)
        if not isinstance(read_threads, int) or isinstance(read_threads, bool) or read_threads < 0:
            raise ValidationError(f"Runtime(read_threads={read_threads!r}): must be an int of at least 0")
        self.read_threads = read_threads
        self._read_helpers: ThreadPoolExecutor | None = None
        cache = data_cache_bytes
        if not isinstance(cache, int) or isinstance(cache, bool) or cache < 0:
            raise ValidationError(f"Runtime(data_cache_bytes={cache!r}): must be an int of at least 0")
        self.write_io_concurrency = write_io_concurrency
        self.write_cpu_workers = write_cpu_workers
        self.clients = ClientRegistry()
        self._memory = MemoryObjects()  # the default runtime's is what memory:// holds
        self.probes = ProbeCache()
        self.manifest_cache = ManifestCache(max_bytes=manifest_cache_bytes)
        self.manifest_list_cache = ManifestListCache(max_items=manifest_lists)
        self.data_file_cache = DataFileCache(data_cache_bytes)
        # metadata files parsed, by location: a reload of the same bytes reuses the parse
        self.metadata_files: ParsedFiles[TableMetadata] = ParsedFiles(max_bytes=16 << 20, max_items=64)
        self.pause_gc = pause_gc
        self._lock = threading.Lock()
        self._decoders: dict[int, Decoder] = {}
        self._stores: dict[tuple[object, ...], Any] = {}  # obstore stores by settings and bucket
        # DynamoDB commit tables known to exist, and one check at a time per loop (concurrent
        # first uses would all describe and create it; moto then loses early items)
        self.dynamodb_ready: set[tuple[object, ...]] = set()
        self._dynamodb_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        # tasks of this runtime take turns committing to a table (per loop: asyncio locks are)
        self._commit_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
            weakref.WeakKeyDictionary()
        )
        # plans pruning manifests held in memory take turns in one worker thread per loop
        self._prune_lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
            weakref.WeakKeyDictionary()
        )
        self.columnar_warmed = threading.Event()  # the default runtime's only: polars warms once per process
        self.columnar_done = threading.Event()  # ... and has finished warming
        self._blocking: BlockingLoop | None = None
        self.columnar_forbidden = False  # set in a forked child of a process that loaded polars
        ref = weakref.ref(self)
        # drop stores and stop worker processes while the interpreter is whole, even if the
        # runtime was never closed (obstore's threads tending a pool during finalisation abort)
        atexit.register(_close_at_exit, ref)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: _forked(ref))

    # -- lifecycle -------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the running loop's clients, drop stores, stop worker processes, empty caches."""
        await self.clients.close_loop()
        self.close_sync()

    def close_sync(self) -> None:
        """What can be closed without an event loop (the rest closes with its loop)."""
        with self._lock:
            decoders, self._decoders = list(self._decoders.values()), {}
            helpers, self._read_helpers = self._read_helpers, None
            self._stores.clear()
        for d in decoders:
            d.shutdown()
        if helpers is not None:
            helpers.shutdown(wait=False)
        self.manifest_cache.clear()
        self.manifest_list_cache.clear()
        self.data_file_cache.clear()
        self.metadata_files.clear()
        self.probes.clear()
        self.dynamodb_ready.clear()

    # -- shared parts ----------------------------------------------------------------------
    @property
    def blocking(self) -> BlockingLoop:
        """The background event loop that runs this runtime's work for blocking callers."""
        with self._lock:
            if self._blocking is None:
                self._blocking = BlockingLoop()
            return self._blocking

    @property
    def read_helpers(self) -> Executor | None:
        """Threads that decode a filtered read's other columns while its filter columns are
        decoded and evaluated (``aioiceberg/read/late.py``); None with ``read_threads=0``."""
        if self.read_threads == 0:
            return None
        with self._lock:
            if self._read_helpers is None:
                self._read_helpers = ThreadPoolExecutor(
                    self.read_threads, thread_name_prefix="aioiceberg-read"
                )
            return self._read_helpers

    def decoder(self, workers: int) -> Decoder:
        """The decoder with ``workers`` processes (its pool is reused by every scan)."""
        with self._lock:
            found = self._decoders.get(workers)
            if found is None:
                found = self._decoders[workers] = Decoder(workers)
            return found

    def store(self, key: tuple[object, ...], made: Any = None) -> Any:
        """The obstore store under ``key`` (settings and bucket): None if there is none yet,
        unless ``made`` is given, which is kept unless another was kept first."""
        found = self._stores.get(key)
        if found is None and made is not None:
            with self._lock:
                found = self._stores.setdefault(key, made)
        return found

    @property
    def memory(self) -> MemoryObjects:
        """What ``memory://`` locations hold: the process's memory, one store whichever
        runtime asks (the default runtime keeps it)."""
        return default_runtime()._memory

    @property
    def columnar_usable(self) -> bool:
        """Whether the columnar decoder (polars) may run in this process."""
        return not default_runtime().columnar_forbidden

    def warm_columnar(self) -> None:
        """Warm the columnar decoder (polars) in a thread, once per process.

        Asked on an event loop, the thread starts once the caller's task yields, so a plan's
        manifest-list request goes out first: started at once, the new thread took the GIL
        while the loop was about to send that request (a fresh process's went out 2.0 ms
        after ``load_table`` returned, up to 3.6 ms; now 1.1 ms, medians of 8)."""
        if default_runtime().columnar_warmed.is_set():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._start_warming()
            return
        loop.call_soon(self._start_warming)

    def _start_warming(self) -> None:
        warmed = default_runtime().columnar_warmed
        with self._lock:
            if warmed.is_set():
                return
            warmed.set()
        # not a daemon: the interpreter waits for it at exit instead of tearing polars down
        # mid-call, which aborted processes that ended right after a small plan (SIGABRT)
        threading.Thread(
            target=_warm_quietly,
            args=(warm_columnar_decoder, default_runtime().columnar_done),
            name="aioiceberg-columnar-warm",
            daemon=False,  # else inherited: a plan of the blocking API starts it from the daemon loop thread
        ).start()

    @property
    def columnar_ready(self) -> bool:
        """Whether the warm-up has finished: a lone small manifest then decodes columnar
        (releasing the GIL) without waiting for polars' import."""
        return default_runtime().columnar_done.is_set()

    def prune_lane(self) -> anyio.CapacityLimiter:
        """The one worker thread this loop's plans prune held manifests in, in turns.

        Pruning is short bursts of Python between numpy calls that release the GIL; many
        threads doing it at once wait on each other for the GIL at every call (64 service
        queries at once: 2-3 queries/s, against 18/s for one client), where one thread
        doing them in turn keeps every query's pruning as fast as alone.
        """
        loop = asyncio.get_running_loop()
        lane = self._prune_lanes.get(loop)
        if lane is None:
            lane = self._prune_lanes[loop] = anyio.CapacityLimiter(1)
        return lane

    def dynamodb_lock(self) -> asyncio.Lock:
        return self._dynamodb_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())

    def commit_turn(self, table_location: str) -> asyncio.Lock:
        """The lock this loop's tasks take turns committing to ``table_location`` with."""
        locks = self._commit_turns.setdefault(asyncio.get_running_loop(), {})
        return locks.setdefault(table_location, asyncio.Lock())


def _forked(ref: weakref.ReferenceType[Runtime]) -> None:
    """polars is not fork-safe: its thread pool (or a thread importing it) did not survive
    the fork, and the child's first columnar decode would wait for it forever. A child of a
    process that loaded polars plans with fastavro. The read helpers' threads did not
    survive either: the child makes its own."""
    runtime = ref()
    if runtime is None:
        return
    runtime._read_helpers = None
    if "polars" in sys.modules:
        runtime.columnar_forbidden = True


def _close_at_exit(ref: weakref.ReferenceType[Runtime]) -> None:
    runtime = ref()
    if runtime is not None:
        with runtime._lock:
            decoders = list(runtime._decoders.values())
            runtime._stores.clear()
        for d in decoders:
            d.shutdown()


_DEFAULT: list[Runtime] = []
_DEFAULT_LOCK = threading.Lock()


def default_runtime() -> Runtime:
    """The process's runtime for catalogs and tables opened without one."""
    if not _DEFAULT:
        with _DEFAULT_LOCK:
            if not _DEFAULT:
                _DEFAULT.append(Runtime())
    return _DEFAULT[0]


def clear_probe_cache() -> None:
    """Forget the default runtime's probe results (tests that change a store's behaviour)."""
    default_runtime().probes.clear()


async def close_all_clients() -> None:
    """Close every client the default runtime opened on the running loop (tests that must
    not leave a loop's connections behind for the next one)."""
    await default_runtime().clients.close_loop()


def _warm_quietly(warm: Callable[[], None], ready: threading.Event) -> None:
    try:
        warm()
    except Exception:  # only a warm-up: the real decode reports its own failures
        return
    ready.set()
