"""Parquet through FileIO ranges: footer first, then only the column chunks a scan needs.

pyarrow decodes from a file-like object whose bytes were prefetched concurrently on the
event loop; a read it did not foresee is fetched on demand from the decoding thread
(``anyio.from_thread``), so correctness never depends on the range arithmetic being
complete, only speed does.
"""

from __future__ import annotations

import bisect
import datetime as dt
import io as _io
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg._concurrency import task_group
from aioiceberg.errors import CorruptFileError
from aioiceberg.expressions.evaluators import InclusiveMetricsEvaluator
from aioiceberg.io.base import FileIO
from aioiceberg.spec.arrow import field_id_of
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    BooleanType,
    DateType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)
from aioiceberg.spec.values import to_bytes

__all__ = ["ParquetSource", "RangeFile", "open_parquet"]

FOOTER_READ = 64 << 10  # parquet-cpp's speculative footer read: the smallest tail we read
TAIL_READ = 1 << 20  # tail read of larger files: footer plus, often, the last row group's chunks
WHOLE_FILE_MAX = 4 << 20  # files up to this size are fetched whole, in one GET
INLINE_FOOTER_MAX = 16 << 10  # a footer this small parses on the loop (~9 us a KiB, 0.15 ms)
READ_BUDGET = 8 << 20  # consecutive row groups are fetched together up to this many bytes
COALESCE_GAP = 1 << 20  # fetch holes smaller than this rather than make another request
MAX_REQUEST = 16 << 20  # split merged ranges above this so requests run in parallel
FETCH_CONCURRENCY = 8
# Writers' default dictionary page limit (parquet-mr, pyarrow): past it a chunk falls back
# to plain pages, which a dictionary read must hash into a dictionary (5x slower measured).
DICTIONARY_PAGE_LIMIT = 1 << 20


class RangeFile(_io.RawIOBase):
    """A read-only, seekable file over prefetched byte ranges of one object.

    Reads inside a prefetched range are served from memory; others are fetched through
    the event loop it was made on, from any thread but that loop's.
    """

    def __init__(self, fio: FileIO, location: str, size: int) -> None:
        super().__init__()
        self._io = fio
        self.location = location
        self.size = size
        self._starts: list[int] = []
        self._chunks: list[bytes] = []
        self._pos = 0
        self.misses = 0
        try:  # the loop to fetch misses through (made on one; without, worker threads' own)
            self._loop: anyio.lowlevel.EventLoopToken | None = anyio.lowlevel.current_token()
        except RuntimeError:
            self._loop = None

    def view(self) -> RangeFile:
        """Another file over the same fetched ranges with its own position, for another thread."""
        other = RangeFile(self._io, self.location, self.size)
        other._starts, other._chunks, other._loop = list(self._starts), list(self._chunks), self._loop
        return other

    def add(self, start: int, data: bytes) -> None:
        i = bisect.bisect_left(self._starts, start)
        self._starts.insert(i, start)
        self._chunks.insert(i, data)

    def drop_after(self, keep_from: int) -> None:
        """Forget ranges that start before ``keep_from`` except the footer (bounds memory)."""
        kept = [(s, c) for s, c in zip(self._starts, self._chunks, strict=True) if s >= keep_from]
        self._starts = [s for s, _ in kept]
        self._chunks = [c for _, c in kept]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1:
            offset += self._pos
        elif whence == 2:
            offset += self.size
        self._pos = max(0, offset)
        return self._pos

    def _lookup(self, start: int, n: int) -> bytes | None:
        i = self._holding(start, n)
        if i < 0:
            return None
        s = self._starts[i]
        return self._chunks[i][start - s : start - s + n]

    def _holding(self, start: int, n: int) -> int:
        """Index of the chunk holding ``[start, start + n)``, or -1 (nothing is copied)."""
        i = bisect.bisect_right(self._starts, start) - 1
        if i >= 0 and start + n <= self._starts[i] + len(self._chunks[i]):
            return i
        return -1

    def holds(self, start: int, n: int) -> bool:
        return self._holding(start, n) >= 0

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self._pos
        n = max(0, min(n, self.size - self._pos))
        if n == 0:
            return b""
        data = self._lookup(self._pos, n)
        if data is None:
            self.misses += 1
            data = anyio.from_thread.run(self._io.read_range, self.location, self._pos, n, token=self._loop)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _coalesce(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start - merged[-1][1] <= COALESCE_GAP and end - merged[-1][0] <= MAX_REQUEST:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


@dataclass(frozen=True, slots=True)
class _Leaf:
    top: int  # index of the top-level field holding this leaf
    field_id: int | None  # set only for primitives reachable through structs (stats usable)
    arrow_type: pa.DataType


def _leaves(schema: pa.Schema) -> list[_Leaf]:
    out: list[_Leaf] = []

    def visit(f: pa.Field, top: int, through_structs: bool) -> None:
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                visit(t.field(i), top, through_structs)
        elif _leaf_count(t) != 1 or pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
            out.extend(_Leaf(top, None, t) for _ in range(_leaf_count(t)))
        else:
            out.append(_Leaf(top, field_id_of(f) if through_structs else None, t))

    for i, f in enumerate(schema):
        visit(f, i, True)
    return out


@dataclass(frozen=True, slots=True)
class _RowGroupStats:
    """One row group's statistics in the shape the metrics evaluator reads."""

    record_count: int
    value_counts: Mapping[int, int] | None
    null_value_counts: Mapping[int, int] | None
    nan_value_counts: Mapping[int, int] | None
    lower_bounds: Mapping[int, bytes] | None
    upper_bounds: Mapping[int, bytes] | None


_PRUNABLE = (BooleanType, IntegerType, LongType, DateType, StringType, TimestampType, TimestamptzType)


def _stat_value(value: Any, raw: Any, t: IcebergType, arrow_type: pa.DataType) -> Any:
    """The Iceberg value of a Parquet min/max, or None when it cannot be trusted.

    Floating point stays out: Parquet bounds ignore NaN, which the evaluator would
    need counts of.
    """
    if isinstance(t, BooleanType):
        return bool(value)
    if isinstance(t, IntegerType | LongType):
        return int(value) if isinstance(value, int) else None
    if isinstance(t, DateType):
        return (value - dt.date(1970, 1, 1)).days if isinstance(value, dt.date) else None
    if isinstance(t, TimestampType | TimestamptzType):
        if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "us" and isinstance(raw, int):
            return raw
        return None
    if isinstance(t, StringType):
        return value if isinstance(value, str) else None
    return None


def row_group_stats(
    md: pq.FileMetaData,
    rg: int,
    leaves: Sequence[_Leaf],
    table_schema: Schema,
    fields: frozenset[int] | None = None,
) -> _RowGroupStats:
    """``fields``: only these field ids' statistics (those the evaluator reads), else all."""
    group = md.row_group(rg)
    nulls: dict[int, int] = {}
    values: dict[int, int] = {}
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    known = table_schema.field_ids()
    for j, leaf in enumerate(leaves):
        fid = leaf.field_id
        if fid is None or fid not in known or (fields is not None and fid not in fields):
            continue
        t = table_schema.find_type(fid)
        if not isinstance(t, _PRUNABLE):
            continue
        column = group.column(j)
        stats = column.statistics
        if stats is None:
            continue
        values[fid] = group.num_rows
        if stats.has_null_count:
            nulls[fid] = stats.null_count
        if stats.has_min_max:
            try:
                lo = _stat_value(stats.min, stats.min_raw, t, leaf.arrow_type)
                hi = _stat_value(stats.max, stats.max_raw, t, leaf.arrow_type)
                if lo is not None and hi is not None:
                    lower[fid] = to_bytes(lo, t)  # type: ignore[arg-type]
                    upper[fid] = to_bytes(hi, t)  # type: ignore[arg-type]
            except Exception:  # unusual statistics: never prune on them
                lower.pop(fid, None)
                upper.pop(fid, None)
    return _RowGroupStats(group.num_rows, values, nulls, None, lower, upper)


class ParquetSource:
    """An opened Parquet data file: metadata parsed, column chunks fetched per row group."""

    def __init__(
        self, fio: FileIO, location: str, file: RangeFile, pf: pq.ParquetFile, whole: bytes | None = None
    ) -> None:
        self.io = fio
        self.location = location
        self.file = file
        # what pyarrow reads from: the bytes themselves for a file held whole
        self._whole = whole
        self._source: Any = file if whole is None else pa.BufferReader(whole)
        self.pf = pf
        self.metadata: pq.FileMetaData = pf.metadata
        self.arrow_schema: pa.Schema = pf.schema_arrow
        self.leaves = _leaves(self.arrow_schema)
        starts = [0]
        for i in range(self.metadata.num_row_groups):
            starts.append(starts[-1] + self.metadata.row_group(i).num_rows)
        self.row_group_first_row = starts
        # the tail (or whole-file) chunk, kept until the source is dropped
        self.footer_start = file._starts[0] if file._starts else file.size
        self._dictionary_readers: dict[tuple[str, ...], pq.ParquetFile] = {}

    def row_group_offset(self, rg: int) -> int:
        group = self.metadata.row_group(rg)
        if group.num_columns == 0:
            return 0
        return self._chunk_range(group.column(0))[0]

    @staticmethod
    def _chunk_range(column: Any) -> tuple[int, int]:
        start = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            start = min(start, column.dictionary_page_offset)
        return start, start + column.total_compressed_size

    def select_row_groups(
        self,
        start: int,
        length: int | None,
        evaluator: InclusiveMetricsEvaluator | None,
        table_schema: Schema,
        fields: frozenset[int] | None = None,
    ) -> list[int]:
        """Row groups in the task's byte range whose statistics may match the residual;
        ``fields``: the field ids the evaluator reads (only their statistics are decoded)."""
        chosen: list[int] = []
        whole = start == 0 and length is None
        for rg in range(self.metadata.num_row_groups):
            if not whole:
                offset = self.row_group_offset(rg)
                if offset < start or (length is not None and offset >= start + length):
                    continue
            if evaluator is not None:
                stats = row_group_stats(self.metadata, rg, self.leaves, table_schema, fields)
                if not evaluator.eval(stats):
                    continue
            chosen.append(rg)
        return chosen

    def needed_ranges(self, rg: int, top_fields: Sequence[int]) -> list[tuple[int, int]]:
        """Byte ranges of the column chunks of ``top_fields`` in ``rg`` not already held."""
        wanted = set(top_fields)
        group = self.metadata.row_group(rg)
        ranges = [
            self._chunk_range(group.column(j)) for j, leaf in enumerate(self.leaves) if leaf.top in wanted
        ]
        return [(s, e) for s, e in ranges if not self.file.holds(s, e - s)]

    def group_row_groups(self, row_groups: Sequence[int], top_fields: Sequence[int]) -> list[list[int]]:
        """Split ``row_groups`` into runs fetched together, each up to ``READ_BUDGET`` bytes.

        Small row groups then cost one request per run rather than one each, while a run's
        chunks (what is held in memory at once) stay bounded.
        """
        runs: list[list[int]] = []
        size = 0
        for rg in row_groups:
            n = sum(e - s for s, e in self.needed_ranges(rg, top_fields))
            if runs and size + n <= READ_BUDGET:
                runs[-1].append(rg)
                size += n
            else:
                runs.append([rg])
                size = n
        return runs

    async def prefetch(self, rg: int | Sequence[int], top_fields: Sequence[int]) -> None:
        """Fetch the column chunks of ``top_fields`` in row group(s) ``rg`` concurrently,
        coalescing adjacent and nearby chunks into one request."""
        groups = [rg] if isinstance(rg, int) else list(rg)
        ranges = [r for g in groups for r in self.needed_ranges(g, top_fields)]
        if not ranges:
            return
        limiter = anyio.CapacityLimiter(FETCH_CONCURRENCY)

        async def fetch(s: int, e: int) -> None:
            async with limiter:
                self.file.add(s, await self.io.read_range(self.location, s, e - s))

        async with task_group() as tg:
            for s, e in _coalesce(ranges):
                tg.start_soon(fetch, s, e)

    def release(self) -> None:
        """Forget fetched column chunks, keeping the footer."""
        self.file.drop_after(self.footer_start)

    def read_row_group(
        self, rg: int, top_fields: Sequence[int], as_dictionary: Sequence[int] = (), use_threads: bool = True
    ) -> pa.Table:
        """Decode (call from a worker thread); ``use_threads``: decode the columns in pyarrow's pool.

        ``as_dictionary``: top-level string or binary fields to keep as dictionary arrays
        where their chunk in ``rg`` is dictionary encoded. Decoding the indices costs a
        fraction of building every string, which pays when a filter drops most rows before
        the strings are built (the caller decodes what survives).
        """
        names = [self.arrow_schema.field(i).name for i in top_fields]
        return self._reader(rg, as_dictionary).read_row_group(rg, columns=names, use_threads=use_threads)

    def read_row_group_prefix(
        self, rg: int, top_fields: Sequence[int], rows: int, as_dictionary: Sequence[int] = ()
    ) -> pa.Table:
        """The first ``rows`` (>= 1) rows of ``rg`` (call from a worker thread), as ``read_row_group``.

        pyarrow has no row-range read: one batch of ``rows`` rows is decoded and the rest of
        the row group is left alone. Pages past the batch are never decompressed, but those
        it touches (and every dictionary page) are in full.
        """
        names = [self.arrow_schema.field(i).name for i in top_fields]
        reader = self._reader(rg, as_dictionary)
        batches: list[pa.RecordBatch] = []
        got = 0
        for batch in reader.iter_batches(batch_size=rows, row_groups=[rg], columns=names):
            batches.append(batch)
            got += batch.num_rows
            if got >= rows:
                break
        return pa.Table.from_batches(batches).slice(0, rows)

    def row_group_batches(
        self, rg: int, top_fields: Sequence[int], as_dictionary: Sequence[int], chunk_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """``rg`` decoded batch by batch on one core, as far as they are taken. Made here and
        safe to take in another thread beside this source's other reads: it reads through a
        reader and a file position of its own. Nothing is decoded until the first is taken."""
        names = [self.arrow_schema.field(i).name for i in top_fields]
        source = self.file.view() if self._whole is None else pa.BufferReader(self._whole)
        encoded = self._encoded(rg, as_dictionary)
        reader = pq.ParquetFile(
            source, metadata=self.metadata, read_dictionary=encoded or None, pre_buffer=False
        )
        batches: Iterator[pa.RecordBatch] = reader.iter_batches(
            batch_size=chunk_rows, row_groups=[rg], columns=names, use_threads=False
        )
        return batches

    def _encoded(self, rg: int, as_dictionary: Sequence[int]) -> tuple[str, ...]:
        return tuple(
            self.arrow_schema.field(i).name for i in as_dictionary if self._dictionary_encoded(rg, i)
        )

    def _reader(self, rg: int, as_dictionary: Sequence[int]) -> pq.ParquetFile:
        encoded = self._encoded(rg, as_dictionary)
        if not encoded:
            return self.pf
        reader = self._dictionary_readers.get(encoded)
        if reader is None:
            reader = pq.ParquetFile(
                self._source, metadata=self.metadata, read_dictionary=encoded, pre_buffer=False
            )
            self._dictionary_readers[encoded] = reader
        return reader

    def _dictionary_encoded(self, rg: int, top: int) -> bool:
        """Whether top-level field ``top`` is a string or binary chunk in ``rg`` holding (nearly)
        only dictionary indices: no larger than a full dictionary plus 4 bytes a value, which
        a chunk that fell back to plain pages after filling its dictionary exceeds."""
        leaves = [j for j, leaf in enumerate(self.leaves) if leaf.top == top]
        t = self.arrow_schema.field(top).type
        strings = pa.types.is_string(t) or pa.types.is_large_string(t)
        if len(leaves) != 1 or not (strings or pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            return False
        chunk = self.metadata.row_group(rg).column(leaves[0])
        return (
            chunk.has_dictionary_page
            and any(e.endswith("_DICTIONARY") for e in chunk.encodings)
            and chunk.total_uncompressed_size <= DICTIONARY_PAGE_LIMIT + 4 * chunk.num_values
        )


async def _whole_file(fio: FileIO, location: str, size: int) -> bytes:
    """A small file in one GET, or from the runtime's cache of files read from remote stores."""
    if not fio.remote:
        return await fio.read(location)
    cache = fio.runtime.data_file_cache
    key = (fio.store_key(location), location, size)
    found = cache.get(key)
    if found is not None:
        return found
    data = await fio.read_expecting(location, size)
    cache.put(key, data)
    return data


async def open_parquet(fio: FileIO, location: str, size_hint: int | None = None) -> ParquetSource:
    """Fetch the footer and parse it.

    ``size_hint`` is the size the manifest records. A file up to ``WHOLE_FILE_MAX`` is
    fetched whole in one GET (every later read is then served from memory); otherwise one
    suffix request of ``TAIL_READ`` bytes covers the footer and usually the last row
    group's chunks (a second request only for footers larger than that). Without a hint,
    a ``FOOTER_READ`` suffix read.
    """
    if size_hint is not None and 0 < size_hint <= WHOLE_FILE_MAX:
        tail = await _whole_file(fio, location, size_hint)
        size = len(tail)
    else:
        want = FOOTER_READ if size_hint is None else TAIL_READ
        block = await fio.read_block(location, -want, want)
        size, tail = block.total_size, block.data
    if size < 12 or tail[-4:] != b"PAR1":
        raise CorruptFileError("not a Parquet file (no PAR1 footer magic)", location=location)
    (footer_len,) = struct.unpack("<I", tail[-8:-4])
    if footer_len + 8 > size:
        raise CorruptFileError(f"Parquet footer length {footer_len} exceeds the file size", location=location)
    if footer_len + 8 > len(tail):
        more = footer_len + 8 - len(tail)
        tail = await fio.read_range(location, size - len(tail) - more, more) + tail
    file = RangeFile(fio, location, size)
    file.add(size - len(tail), tail)

    # A file held whole is read by pyarrow from the buffer itself, not through Python calls
    whole = tail if len(tail) == size else None
    source: Any = file if whole is None else pa.BufferReader(whole)

    def parse() -> pq.ParquetFile:
        return pq.ParquetFile(source, pre_buffer=False)

    try:
        # a small footer of a file in memory parses in tens of microseconds: less than the
        # hand-over to a thread and back costs
        inline = len(tail) == size and footer_len <= INLINE_FOOTER_MAX
        pf = parse() if inline else await anyio.to_thread.run_sync(parse)
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(f"cannot read the Parquet footer: {e}", location=location) from e
    return ParquetSource(fio, location, file, pf, whole)
