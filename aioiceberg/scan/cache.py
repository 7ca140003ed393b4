"""Caches of decoded manifests and manifest lists, shared by the scans of one runtime.

Manifests are immutable once written, but a path can be reused after a failed commit is
cleaned up and rewritten, so the key is the path *and* the length the manifest list
gives (never the path alone). A manifest the columnar decoder read is kept whole, as its
columns with every stat (:class:`DecodedManifest`): any filter on any snapshot sharing it
is pruned from memory, without a fetch or a decode, and a merge of many of them
(:mod:`aioiceberg.scan.merged`) is kept for the next plan over the same ones. A manifest
only fastavro read (or one too big for a plan's half of the cache) is kept as *views*:
the entries that survived one filter, so only a repeat of that filter is spared. The byte
bound counts the Arrow buffers and an estimate of the Python objects held; least recently
used go first.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aioiceberg.spec.manifest import ManifestEntry, ManifestFile
from aioiceberg.spec.manifest.entry_rows import EntryRows, Row

if TYPE_CHECKING:  # both load pyarrow and numpy, which metadata-only commands never need
    import numpy as np

    from aioiceberg.spec.manifest.columnar import ColumnarManifest

__all__ = [
    "DECODED",
    "CachedManifest",
    "DecodedManifest",
    "DecodedPart",
    "ManifestCache",
    "ManifestListCache",
    "estimate_size",
    "min_size",
]

# the view key a whole decoded manifest is kept under (a filter's view key is a digest)
DECODED = "decoded"
MERGED = "merged"  # and a merge of several, keyed by what it merges
# Bytes per entry held beside a decoded manifest's Arrow buffers as filters read it: the
# partition group index (8) and decoded bound and count columns (9 each, up to ~10 fields).
_DECODED_ENTRY_EXTRA = 96

# Bytes held per cached entry, measured with tracemalloc on decoded bench manifests (Python
# 3.11): ManifestEntry (72) + DataFile (200) + partition tuple and the ints/str headers the
# decoders create (~150). Every metric map counts, empty or not: an empty dict is 64 bytes,
# and six of them per entry were once left out, so the bound held ~2.3x what it claimed.
_ENTRY_OVERHEAD = 420
# The same for a row of EntryRows (the columnar decoder's), measured alike: the 25-slot tuple
# (240) plus the partition tuple and ints (~70); an empty metric map is the shared ``()``.
_ROW_OVERHEAD = 310
_STR_HEADER = 49
_TUPLE_ITEM = 36  # one slot of a tuple plus an int object (split offsets)
_STAT_ITEM = 40  # one value of a metrics dict: an int object or a short bytes value


def _dict_bytes(n: int) -> int:
    """``sys.getsizeof`` of a dict of ``n`` int keys as the decoders build it (3.11 sizes)."""
    if n == 0:
        return 64
    if n <= 5:
        return 184
    if n <= 10:
        return 272
    if n <= 21:
        return 472
    return 40 * n + 64


# entries measured per estimate: a manifest's entries are alike, and the estimate runs on the
# event loop for every view a plan caches (all 50 of a small manifest were ~1.5 ms a plan of 20)
_SAMPLE = 16


def _entry_bytes(e: ManifestEntry) -> int:
    f = e.data_file
    total = _ENTRY_OVERHEAD + _STR_HEADER + len(f.file_path)
    for m in (
        f.column_sizes,
        f.value_counts,
        f.null_value_counts,
        f.nan_value_counts,
        f.lower_bounds,
        f.upper_bounds,
    ):
        if m is not None:
            n = len(m)
            total += _dict_bytes(n) + _STAT_ITEM * n
    if f.split_offsets:
        total += 40 + _TUPLE_ITEM * len(f.split_offsets)
    return total


def _row_bytes(row: Row) -> int:
    total = _ROW_OVERHEAD + _STR_HEADER + len(row[5])
    for flat in row[10:16]:  # metric maps as flat (key, value, ...) tuples
        if flat:
            total += 40 + 16 * len(flat)  # mostly small ints and short bytes
    if row[17]:
        total += 40 + _TUPLE_ITEM * len(row[17])
    return total


def min_size(n: int) -> int:
    """At most what :func:`estimate_size` says of ``n`` entries, without reading them."""
    return 64 + (8 + _ROW_OVERHEAD) * n


def estimate_size(entries: Sequence[ManifestEntry]) -> int:
    """Approximate bytes held by ``entries`` (cheap: no deep traversal of values).

    Up to ``_SAMPLE`` entries are measured one by one; longer lists are measured on that
    many evenly spaced entries and scaled.
    """
    n = len(entries)
    total = 64 + 8 * n
    positions = range(n) if n <= _SAMPLE else [int(i * n / _SAMPLE) for i in range(_SAMPLE)]
    if isinstance(entries, EntryRows):  # measured as rows, without building entries (or all rows)
        sampled = sum(_row_bytes(row) for row in entries.rows_at(positions))
    else:
        sampled = sum(_entry_bytes(entries[i]) for i in positions)
    return total + sampled * n // len(positions) if positions else total


@dataclass(slots=True)
class CachedManifest:
    """One filtered view of a manifest, plus the counts needed to replay the scan metrics.

    ``entries`` are :class:`EntryRows` from the columnar decoder. A view keeps no scan
    tasks: they are built as a plan takes them, so a streaming plan's tasks die young, and
    a cached view holds nothing the cycle collector walks (see
    :mod:`aioiceberg.spec.manifest.entry_rows`).
    """

    entries: Sequence[ManifestEntry]
    entries_read: int
    skipped_by_partition: int
    skipped_by_metrics: int
    size: int


# one columnar manifest (or a batch of several) and the rows of it that are this manifest's live entries
DecodedPart = tuple["ColumnarManifest", "np.ndarray[Any, Any]"]


@dataclass(frozen=True, slots=True)
class DecodedManifest:
    """A manifest's live entries as decoded columns, every stat kept: pruned per plan.

    Its parts are columnar manifests and the rows of each that belong to this manifest
    (one part, unless it was decoded in two halves or with small neighbours in a batch).
    """

    parts: tuple[DecodedPart, ...]
    entries_read: int
    size: int

    @staticmethod
    def of(parts: Sequence[DecodedPart]) -> DecodedManifest:
        size = 64
        for cm, rows in parts:
            share = len(rows) / max(1, len(cm.rows))  # a batch's buffers are shared by its manifests
            size += int(cm.nbytes * share) + _DECODED_ENTRY_EXTRA * len(rows)
        return DecodedManifest(tuple(parts), sum(len(rows) for _, rows in parts), size)


class Held(Protocol):
    """What the cache holds: anything that says how many bytes it keeps alive."""

    @property
    def size(self) -> int: ...


class ManifestCache:
    """LRU of decoded manifests and their views, bounded in (estimated) bytes; safe across threads."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, str], Held] = OrderedDict()
        self._loading: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, path: str, length: int, view: str) -> CachedManifest | None:
        found = self._get((path, length, view))
        assert found is None or isinstance(found, CachedManifest)
        return found

    def get_decoded(self, path: str, length: int) -> DecodedManifest | None:
        """The manifest decoded whole, if kept (any filter is pruned from it)."""
        found = self._get((path, length, DECODED))
        assert found is None or isinstance(found, DecodedManifest)
        return found

    def has_decoded(self, path: str, length: int) -> bool:
        with self._lock:
            return (path, length, DECODED) in self._items

    def loading(self, path: str, length: int) -> asyncio.Future[None] | None:
        """What to await while a plan on this event loop fetches and decodes the manifest
        (see :meth:`begin_load`); None when none does."""
        with self._lock:
            found = self._loading.get((path, length))
        if found is None or found.done() or found.get_loop() is not asyncio.get_running_loop():
            return None
        return asyncio.shield(found)

    def begin_load(self, path: str, length: int) -> None:
        """This plan fetches and decodes the manifest; plans of its loop that miss it wait."""
        with self._lock:
            self._loading.setdefault((path, length), asyncio.get_running_loop().create_future())

    def end_load(self, path: str, length: int) -> None:
        """Decoded (and kept if it fit), failed or cancelled: the waiting plans go on."""
        with self._lock:
            found = self._loading.pop((path, length), None)
        if found is None or found.done():
            return
        loop = found.get_loop()
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:  # the usual case: a plan's own loop, no wake-up through its self-pipe
            _finish(found)
        else:
            loop.call_soon_threadsafe(_finish, found)

    def get_merged(self, key: str) -> object | None:
        """A merge of decoded manifests (see :mod:`aioiceberg.scan.merged`), if kept."""
        return self._get((key, 0, MERGED))

    def put_merged(self, key: str, value: Held) -> None:
        self.put(key, 0, MERGED, value)

    def _get(self, key: tuple[str, int, str]) -> Held | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return found

    def put_decoded(self, path: str, length: int, value: DecodedManifest) -> None:
        self.put(path, length, DECODED, value)

    def put(self, path: str, length: int, view: str, value: Held) -> None:
        if value.size > self.max_bytes // 4:
            return  # one huge manifest would flush everything else for little gain
        key = (path, length, view)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._items[key] = value
            self._bytes += value.size
            while self._bytes > self.max_bytes and self._items:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.size

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ManifestListCache:
    """Decoded manifest lists by (path, snapshot id): scans of one snapshot share one fetch."""

    def __init__(self, max_items: int = 128) -> None:
        self.max_items = max_items
        self._items: OrderedDict[tuple[str, int], Sequence[ManifestFile]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, snapshot_id: int) -> Sequence[ManifestFile] | None:
        with self._lock:
            found = self._items.get((path, snapshot_id))
            if found is not None:
                self._items.move_to_end((path, snapshot_id))
            return found

    def put(self, path: str, snapshot_id: int, manifests: Sequence[ManifestFile]) -> None:
        with self._lock:
            self._items[(path, snapshot_id)] = manifests
            self._items.move_to_end((path, snapshot_id))
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
