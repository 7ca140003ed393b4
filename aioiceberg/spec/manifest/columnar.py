"""A columnar manifest reader: Avro bytes -> Arrow columns, entries built on demand.

The columns come from the compiled decoder (:mod:`~aioiceberg.spec.manifest.native_decode`)
where it is installed and handles the writer schema, else from ``polars.read_avro``: both
give the same table, decode a whole manifest several times faster than fastavro builds
dicts, and release the GIL while they do. Callers prune on the columns
(partition tuples, bound columns) and build :class:`ManifestEntry` objects only for the
rows they keep; the result is identical to :func:`read_manifest` for those rows.

The columnar path is a fast path, never the authority: :func:`open_columnar` returns
None when it cannot promise identical results (polars missing, v1 manifests, partition
types outside a checked list, any decoding error, values outside their enums), and the
caller then decodes with the fastavro reader, which also decides what is corrupt.
Header checks (magic, length against the manifest list, format version) are the
fastavro reader's and raise the same errors; where the compiled decoder is installed it
reads the header instead (one metadata check, :func:`manifest_metadata`, for both), and
fastavro's reader is built only when the columns come from polars or fastavro decides.
"""

from __future__ import annotations

import functools
import importlib.util
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa  # pyarrow.compute is imported where used: metadata-only work never loads it
import pyarrow.compute as pc

from aioiceberg.errors import CorruptFileError
from aioiceberg.spec.arrow_numpy import arrow_of, null_mask, numpy_of, scalar_of, value_offsets
from aioiceberg.spec.manifest.avro_blocks import header_length, reblock
from aioiceberg.spec.manifest.avro_blocks import read_long as _read_long
from aioiceberg.spec.manifest.data_file import FileFormat
from aioiceberg.spec.manifest.decoded_manifest import ManifestMetadata
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus
from aioiceberg.spec.manifest.entry_rows import STAT_FIELDS, EntryRows, Row
from aioiceberg.spec.manifest.fastavro_reader import manifest_metadata, open_manifest, parsed_writer_schema
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile
from aioiceberg.spec.manifest.native_decode import (
    decode_native,
    decode_native_joined,
    native_available,
    read_header_native,
)
from aioiceberg.spec.manifest.writer_schema import partition_field_types

__all__ = [
    "ArrowRead",
    "AvroLayout",
    "BoundColumn",
    "ColumnarManifest",
    "ColumnarRows",
    "SharedRows",
    "avro_layout",
    "columnar_available",
    "fixed_width_items",
    "joined_partition_keys",
    "joined_rows",
    "open_columnar",
    "open_columnar_batch",
]


@functools.cache
def _polars() -> Any:
    """polars, imported on first use (~0.15 s): plans of small manifests never need it."""
    try:  # polars is the fast path; without it every manifest takes fastavro
        import polars  # polars: loaded only when used (~0.15 s to import, and not fork-safe)
    except ImportError:  # pragma: no cover - polars is a dependency
        return None
    return polars


# Partition field Avro types whose polars decoding is checked against fastavro's (after the
# conversion below); anything else (decimal, uuid, fixed, time, millis, nanos) falls back.
_PLAIN_TYPES = frozenset({"boolean", "int", "long", "float", "double", "string", "bytes"})
_LOGICAL_TYPES: dict[tuple[Any, Any], pa.DataType] = {
    ("int", "date"): pa.int32(),
    ("long", "timestamp-micros"): pa.int64(),
    ("long", "local-timestamp-micros"): pa.int64(),
}


@functools.cache
def columnar_available() -> bool:
    """True when the compiled decoder or polars is installed (the columnar path can be tried
    at all); does not import polars."""
    return native_available() or importlib.util.find_spec("polars") is not None


def _decoder_ready(native: bool) -> bool:
    """A columnar decoder exists for this call: the compiled one (unless ``native`` is False:
    the polars path forced, as the differential tests do) or polars."""
    return (native and native_available()) or _polars() is not None


@functools.lru_cache(maxsize=64)
def _casts_of_text(text: str) -> tuple[pa.DataType | None, ...] | None:
    """:func:`_casts_of` of a header's ``avro.schema`` text: one writer's manifests share it,
    so its partition types are walked once, not per manifest (~17 us each, with the GIL)."""
    found = _casts_of(parsed_writer_schema(text))
    return None if found is None else tuple(found)


def _casts_or_none(writer_schema: Any) -> list[pa.DataType | None] | None:
    """:func:`_casts_of`, None for a writer schema it cannot walk (the fastavro reader then
    decides what the manifest is: a v1 one is read there anyway)."""
    try:
        return _casts_of(writer_schema)
    except (KeyError, TypeError, ValueError):
        return None


def _casts_of(writer_schema: Any) -> list[pa.DataType | None] | None:
    """Per partition field, the Arrow type to cast polars' column to; None: unsupported."""
    casts: list[pa.DataType | None] = []
    for t in partition_field_types(writer_schema):
        if isinstance(t, str):
            if t not in _PLAIN_TYPES:
                return None
            casts.append(None)
            continue
        if not isinstance(t, dict):
            return None
        base, logical = t.get("type"), t.get("logicalType")
        if logical is None and base in _PLAIN_TYPES:
            casts.append(None)
            continue
        target = _LOGICAL_TYPES.get((base, logical))
        if target is None:
            return None
        casts.append(target)
    return casts


def _header(
    data: bytes, manifest: ManifestFile | None, location: str | None, native: bool
) -> tuple[Any, ManifestMetadata, list[pa.DataType | None] | None]:
    """(parsed writer schema, checked metadata, partition casts: see :func:`_casts_of`) of
    the manifest's header, raising what the fastavro reader's check raises. The compiled
    decoder reads it where installed (``native``): fastavro's reader costs ~0.06 ms a
    manifest to build, paid again by every small one."""
    location = location or (manifest.manifest_path if manifest is not None else None)
    properties = read_header_native(data, location) if native else None
    if properties is None:
        reader, meta = open_manifest(data, manifest, location)
        return reader.writer_schema, meta, _casts_or_none(reader.writer_schema)
    try:
        writer_schema = parsed_writer_schema(properties["avro.schema"])
    except Exception as e:  # as fastavro's reader reports a schema it cannot parse
        text = str(e)
        raise CorruptFileError(
            f"manifest has an unreadable Avro header: {type(e).__name__}{': ' + text if text else ''}",
            location=location,
        ) from e
    meta = manifest_metadata(properties, writer_schema, manifest, location)  # raises first
    try:
        casts = _casts_of_text(properties["avro.schema"])
    except (KeyError, TypeError, ValueError):
        casts = None
    return writer_schema, meta, None if casts is None else list(casts)


def _to_arrow(
    data: bytes, native: bool = True, location: str | None = None, skip_stats: bool = False
) -> pa.Table:
    """The manifest's entries as columns: the one way from Avro bytes to them. The compiled
    decoder where installed (``native``), which reads any block size itself; polars where it is
    not, or declines the writer schema. Damaged bytes raise (``CorruptFileError`` from the
    compiled decoder, polars' own error otherwise); callers let the fastavro reader decide.
    ``skip_stats``: the compiled decoder reads the metric maps' items past (each map empty or
    null as written; polars keeps them)."""
    if native:
        table = decode_native(data, location, STAT_FIELDS if skip_stats else ())
        if table is not None:
            return table
    pl = _polars()
    if pl is None:  # pragma: no cover - polars is a dependency
        raise ImportError("no columnar manifest decoder: polars is not installed")
    # one big block: polars pays a fixed cost per block, and PyIceberg writes one entry per
    # block (6x faster re-blocked; 1.1-1.2x on Java's 64 KB blocks: benchmarks/manifest_decode.py)
    polars_table: pa.Table = pl.read_avro(io.BytesIO(reblock(data) or data)).to_arrow()
    return polars_table


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its only chunk as is (``combine_chunks`` copies even one chunk
    of nested columns, ~1 ms per 1000-entry manifest), else the chunks joined."""
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks()


@dataclass(frozen=True, slots=True)
class BoundColumn:
    """One field's lower or upper bound (or one of its counts) per row, for vectorised pruning.

    ``values`` holds the decoded value (the little-endian integer, the count) where ``state`` is 1; ``state``
    is 0 where the row has none for the field and 2 where it has one that is not of the
    expected width (or is null, or repeated), which a pruner must treat as "cannot tell".
    """

    values: np.ndarray[Any, Any]
    state: np.ndarray[Any, np.dtype[np.int8]]


def _in_enum(values: np.ndarray[Any, Any]) -> bool:
    """Every value is 0, 1 or 2 (status, content): two reductions, a quarter of ``np.isin``'s cost."""
    return values.size == 0 or (int(values.min()) >= 0 and int(values.max()) <= 2)


_Items = tuple[Any, list[Any], list[Any]]  # a map column's items: row index (numpy), keys, values
# reads a map's values (an Arrow array) in bulk: (readable?, values) per item, or None
ArrowRead = Callable[[pa.Array], "tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None"]


class ColumnarManifest:
    """A decoded manifest as Arrow columns; ``rows`` are the live rows, in file order."""

    def __init__(
        self,
        meta: ManifestMetadata,
        table: pa.Table,
        manifest: ManifestFile | None,
        partition_casts: list[pa.DataType | None],
        columns_needed: frozenset[int] | None,
        discard_deleted: bool,
        batch: tuple[np.ndarray[Any, Any], Sequence[ManifestFile]] | None = None,
    ) -> None:
        """``batch``: the rows come from several manifests (see :func:`open_columnar_batch`):
        each row's manifest index, and those manifests, whose values rows inherit."""
        self.meta = meta
        self.owner: np.ndarray[Any, Any] | None = batch[0] if batch is not None else None
        self.manifests: Sequence[ManifestFile] = batch[1] if batch is not None else ()
        self.columns_needed = columns_needed
        self.entries_read = table.num_rows
        # ~50 us of Python a manifest to here and through the checks below (was ~80 us): each
        # verdict from as few Arrow and numpy calls as give it
        self._top: dict[str, pa.Array] = {
            name: _one_array(column) for name, column in zip(table.column_names, table.columns, strict=True)
        }
        data_file = self._top["data_file"]
        assert data_file is not None
        self._df: dict[str, pa.Array] = dict(zip(data_file.type.names, data_file.flatten(), strict=True))
        status = self._top["status"]
        assert status is not None
        status_np = numpy_of(status)
        if not _in_enum(status_np):
            raise ValueError("status outside its enum")
        content_arr = self._df.get("content")
        if content_arr is None:  # a v1 manifest: every entry is data
            content_np = np.zeros(len(status_np), dtype=np.int32)
        else:
            if content_arr.null_count:
                content_arr = content_arr.fill_null(scalar_of(0, content_arr.type))
            content_np = numpy_of(content_arr)
            if not _in_enum(content_np):
                raise ValueError("content outside its enum")
        formats = self._df["file_format"]
        for text in pc.unique(formats).to_pylist():
            if text is None:
                raise ValueError("file format is null")
            FileFormat.parse(text)  # ValueError when it names no format
        self._record_count = self._df["record_count"]
        if self._record_count.null_count or self._df["file_path"].null_count:
            raise ValueError("required field is null")
        self._first_row_ids = self._assign_row_ids(manifest, status_np, content_np)
        rows = np.arange(len(status_np), dtype=np.int64)
        if discard_deleted:
            rows = rows[status_np != ManifestEntryStatus.DELETED.value]
        self.rows = rows
        partition = self._df["partition"]
        children = partition.flatten() if partition.type.num_fields else []
        self._partition = [self._cast(c, cast) for c, cast in zip(children, partition_casts, strict=True)]
        self._manifest = manifest
        self._groups: tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]] | None = None
        self._record_counts: np.ndarray[Any, np.dtype[np.int64]] | None = None
        self._keyed_memo: dict[tuple[str, int, Any], BoundColumn] = {}
        self._nbytes: int | None = None

    @staticmethod
    def _cast(column: pa.Array, to: pa.DataType | None) -> pa.Array:
        """A partition column as the type its values are read as: a date or time the decoder
        gave for an integer field is viewed as that integer (the same buffers, as Arrow's
        cast of it gives, without the cast's ~6 us of call), anything else cast."""
        if to is None:
            return column
        t = column.type
        if pa.types.is_integer(to) and pa.types.is_temporal(t) and t.bit_width == to.bit_width:
            return column.view(to)
        return column.cast(to)

    # -- inheritance ---------------------------------------------------------------------

    def _assign_row_ids(
        self, manifest: ManifestFile | None, status: np.ndarray[Any, Any], content: np.ndarray[Any, Any]
    ) -> pa.Array | None:
        """v3 first row ids as the fastavro reader assigns them (over every live data row)."""
        given = self._df.get("first_row_id")
        if (
            manifest is None
            or manifest.first_row_id is None  # (also a pre-v3 manifest listed in a v3 list)
            or self.meta.content != ManifestContent.DATA
        ):
            return given
        counts = numpy_of(self._record_count).astype(np.int64)
        missing = np.ones(len(status), dtype=bool) if given is None else null_mask(given)
        eligible = missing & (status != ManifestEntryStatus.DELETED.value) & (content == 0)
        step = np.where(eligible, counts, 0)
        assigned = manifest.first_row_id + np.cumsum(step) - step
        # from buffers, not ``pa.array`` of a list (that imports pandas: see arrow_numpy)
        if given is None:
            values = np.zeros(len(status), dtype=np.int64)
            valid = np.zeros(len(status), dtype=bool)
        else:
            given = given.cast(pa.int64())
            values = numpy_of(pc.fill_null(given, scalar_of(0, pa.int64())))
            valid = ~null_mask(given)
        values = np.where(eligible, assigned, values)
        return arrow_of(values, pa.int64(), valid | eligible)

    # -- columns for pruning ---------------------------------------------------------------

    def record_counts(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
        every = self._record_counts
        if every is None:  # read once: each filter's passes ask again
            every = self._record_counts = numpy_of(self._record_count).astype(np.int64)
        counts: np.ndarray[Any, np.dtype[np.int64]] = every[rows]
        return counts

    def partitions(self, rows: np.ndarray[Any, Any]) -> list[tuple[Any, ...]]:
        """The partition tuples of ``rows`` in the project's value convention."""
        if not self._partition:
            return [()] * len(rows)
        idx = arrow_of(np.asarray(rows, dtype=np.int64))
        cols = [c.take(idx).to_pylist() for c in self._partition]
        return list(zip(*cols, strict=True))

    def _read(self, name: str, keys_wanted: frozenset[int] | None) -> _Items | None:
        """(row index per item as numpy, keys, values) of the whole map column ``name``."""
        return _read_map(self._df.get(name), keys_wanted)

    @property
    def nbytes(self) -> int:
        """Bytes of the decoded columns (the Arrow buffers this object keeps alive)."""
        found = self._nbytes
        if found is None:  # asked once per manifest a batch's columns hold: summed once
            # the buffers' sizes: ``Array.nbytes`` walks nested arrays (~75 us per manifest)
            found = self._nbytes = sum(arr.get_total_buffer_size() for arr in self._top.values())
        return found

    def partition_groups(self) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]]:
        """Each entry's partition tuple as an index into the manifest's distinct tuples (few:
        a manifest repeats its partitions), built once: a filter's partition verdicts are
        taken per distinct tuple and spread to the rows in bulk."""
        found = self._groups
        floats = any(pa.types.is_floating(c.type) for c in self._partition)
        if found is None and self._partition and not floats:
            # grouped on the columns (see partition_keys): equal values are equal tuples here,
            # as in a dict; not floats, where 0.0 == -0.0 and NaN != NaN
            found = self._groups = self.partition_keys(np.arange(self.entries_read, dtype=np.int64), True)
        if found is None:
            ids: dict[tuple[Any, ...], int] = {}
            every = self.partitions(np.arange(self.entries_read, dtype=np.int64))
            index = np.fromiter(
                (ids.setdefault(p, len(ids)) for p in every), dtype=np.int64, count=len(every)
            )
            found = self._groups = (index, list(ids))
        return found

    def bound_column(self, field_id: int, upper: bool, width: int, rows: np.ndarray[Any, Any]) -> BoundColumn:
        """``field_id``'s lower (or upper) bound of ``rows`` as integers of ``width`` bytes."""

        def read(raw: list[Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            ok = np.fromiter((b is not None and len(b) == width for b in raw), dtype=bool, count=len(raw))
            good = [b for b, k in zip(raw, ok.tolist(), strict=True) if k]
            return ok, np.frombuffer(b"".join(good), dtype="<i8" if width == 8 else "<i4").astype(np.int64)

        name = "upper_bounds" if upper else "lower_bounds"
        code = {width: "<i8" if width == 8 else "<i4"}
        bulk = functools.partial(fixed_width_items, widths=code, dtype=np.int64)
        return self.keyed_column(name, field_id, rows, read, ("int", width), np.int64, arrow_read=bulk)

    def count_column(self, name: str, field_id: int, rows: np.ndarray[Any, Any]) -> BoundColumn:
        """``field_id``'s count in the map column ``name`` (``value_counts``,
        ``null_value_counts``, ``nan_value_counts``) of ``rows``."""

        def read(raw: list[Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            ok = np.fromiter((isinstance(v, int) for v in raw), dtype=bool, count=len(raw))
            good = [v for v, k in zip(raw, ok.tolist(), strict=True) if k]
            return ok, np.fromiter(good, dtype=np.int64, count=len(good))

        return self.keyed_column(name, field_id, rows, read, "count", np.int64, arrow_read=_count_values)

    def keyed_column(
        self,
        name: str,
        field_id: int,
        rows: np.ndarray[Any, Any],
        read: Callable[[list[Any]], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]],
        kind: Any,
        dtype: Any,
        *,
        arrow_read: ArrowRead | None = None,
    ) -> BoundColumn:
        """``field_id``'s value in the map column ``name`` per row of ``rows``: ``read`` says
        which raw values are readable and their values (numpy, of ``dtype``); a row with none
        is state 0, one with an unreadable or repeated value state 2 (left to the exact path).
        ``arrow_read``: the same from the values as an Arrow array, without a Python object
        per value (None from it: ``read`` decides).

        Read once per (column, field, ``kind``) over every entry and kept: a cached manifest
        answers each new filter on a field it has read without reading its map again.
        """
        key = (name, field_id, kind)
        whole = self._keyed_memo.get(key)
        if whole is None:
            whole = self._keyed_memo[key] = self._keyed_whole(name, field_id, read, dtype, arrow_read)
        if len(rows) == self.entries_read and (
            len(rows) == 0 or (rows[0] == 0 and rows[-1] == len(rows) - 1)
        ):
            return whole
        return BoundColumn(whole.values[rows], whole.state[rows])

    def _keyed_whole(
        self,
        name: str,
        field_id: int,
        read: Callable[[list[Any]], tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]],
        dtype: Any,
        arrow_read: ArrowRead | None = None,
    ) -> BoundColumn:
        n = self.entries_read
        values = np.zeros(n, dtype=dtype)
        state = np.zeros(n, dtype=np.int8)
        found = _map_values(self._df.get(name), field_id) if n else None
        if found is None:
            return BoundColumn(values, state)
        at, items = found
        if len(at) == 0:
            return BoundColumn(values, state)
        state[at] = 2
        read_in_bulk = arrow_read(items) if arrow_read is not None else None
        ok, decoded = read_in_bulk if read_in_bulk is not None else read(items.to_pylist())
        if ok.any():
            values[at[ok]] = decoded
            state[at[ok]] = 1
        repeated = at[1:][at[1:] == at[:-1]]  # ``at`` never decreases: a row's items are together
        if len(repeated):
            state[repeated] = 2
        return BoundColumn(values, state)

    # -- entries -----------------------------------------------------------------------------

    def entries(self, rows: Sequence[int] | np.ndarray[Any, Any]) -> list[ManifestEntry]:
        """``ManifestEntry`` objects for ``rows``, exactly as the fastavro reader builds them."""
        return list(self.entry_rows(rows))

    def entry_rows(
        self,
        rows: Sequence[int] | np.ndarray[Any, Any],
        columns_needed: frozenset[int] | Literal["as opened"] | None = "as opened",
    ) -> EntryRows:
        """The entries of ``rows`` as :class:`EntryRows` (built into objects as they are read),
        with the metrics of ``columns_needed`` (None: all; by default what it was opened with:
        a manifest cached for every filter is opened with all and trimmed per plan). Their
        rows are built when first read (:class:`ColumnarRows`)."""
        wanted_stats: frozenset[int] | None = (
            self.columns_needed if columns_needed == "as opened" else columns_needed
        )
        rows_np = np.asarray(rows, dtype=np.int64)
        meta, manifest = self.meta, self._manifest
        if manifest is not None:
            spec_id = manifest.partition_spec_id
        else:
            spec_id = meta.partition_spec_id if meta.partition_spec_id is not None else 0
        if self.owner is not None and self.manifests:
            spec_id = self.manifests[0].partition_spec_id
        if len(rows_np) == 0:
            return EntryRows([], spec_id)
        return ColumnarRows(((self, rows_np, wanted_stats),), spec_id)

    def built_rows(self, rows_np: np.ndarray[Any, Any], wanted_stats: frozenset[int] | None) -> list[Row]:
        """The rows of ``rows_np`` built as :mod:`~aioiceberg.spec.manifest.entry_rows` tuples."""
        n = len(rows_np)
        if n == 0:
            return []
        # every row, in order (no filter, nothing deleted): the columns need no take
        whole = n == self.entries_read and bool((rows_np == np.arange(n)).all())
        idx = arrow_of(rows_np)
        meta, manifest = self.meta, self._manifest
        v1 = meta.format_version == 1
        if manifest is not None:
            inherit_snapshot: int | None = manifest.added_snapshot_id
            inherit_seq: int | None = manifest.sequence_number
        else:
            inherit_snapshot = None
            inherit_seq = 0 if v1 else None
        if v1 and inherit_seq is None:
            inherit_seq = 0
        inherit: Iterable[tuple[int | None, int | None, bool]]
        if self.owner is not None and self.manifests:
            per_manifest = [
                (mf.added_snapshot_id, 0 if v1 and mf.sequence_number is None else mf.sequence_number)
                for mf in self.manifests
            ]
            by_manifest = [(snap, seq, seq == 0) for snap, seq in per_manifest]
            inherit = [by_manifest[i] for i in self.owner[rows_np].tolist()]
        else:
            inherit = repeat((inherit_snapshot, inherit_seq, inherit_seq == 0), n)

        # rows in file order, none twice (a plan's kept rows): the maps' items are read from
        # the whole columns, not from a copy of them taken for these rows
        ordered = None if whole else rows_np if bool((rows_np[1:] > rows_np[:-1]).all()) else None
        # one range of rows (a manifest's own in a batch's columns): sliced, not taken
        # (~13 us a take: a cached 2000x50 plan took 30k of them, 0.4 s)
        start = int(rows_np[0])
        span = (start, n) if ordered is not None and int(rows_np[-1]) - start == n - 1 else None

        def rows_of(arr: pa.Array) -> pa.Array:
            return arr if whole else arr.slice(*span) if span is not None else arr.take(idx)

        def pick(arr: pa.Array | None) -> Iterable[Any]:
            if arr is None:
                return repeat(None, n)
            values: list[Any] = rows_of(arr).to_pylist()
            return values

        def top(name: str) -> Iterable[Any]:
            return pick(self._top.get(name))

        def df(name: str) -> Iterable[Any]:
            return pick(self._df.get(name))

        def listed(name: str) -> list[tuple[Any, ...] | None]:
            arr = self._df.get(name)
            return _list_tuples(None if arr is None else rows_of(arr), n)

        wanted = wanted_stats is None or bool(wanted_stats)  # else every map is empty or null
        taken = None if whole or span is not None else idx
        stats = [
            self._stats(name, n, taken, wanted_stats, wanted, None if span is not None else ordered, span)
            for name in STAT_FIELDS
        ]
        first_row_ids = pick(self._first_row_ids)
        columns = zip(
            top("status"),
            top("snapshot_id"),
            top("sequence_number"),
            top("file_sequence_number"),
            df("content"),
            df("file_path"),
            df("file_format"),
            self._partitions_of(rows_np),
            df("record_count"),
            df("file_size_in_bytes"),
            *stats,
            df("key_metadata"),
            listed("split_offsets"),
            listed("equality_ids"),
            df("sort_order_id"),
            first_row_ids,
            df("referenced_data_file"),
            df("content_offset"),
            df("content_size_in_bytes"),
            inherit,
            strict=True,
        )

        return list(columns)  # enums and formats were checked at open

    # -- columns for task batches --------------------------------------------------------------

    def data_file_column(self, name: str) -> pa.Array | None:
        """The ``data_file`` field ``name`` of every decoded row (None: not in the manifest)."""
        return self._df.get(name)

    @property
    def first_row_ids(self) -> pa.Array | None:
        """Each decoded row's first row id, inherited ones assigned (None: no such column)."""
        return self._first_row_ids

    def partition_keys(
        self, rows: np.ndarray[Any, Any], every: bool = False
    ) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]]:
        """Each of ``rows``' partition tuple as an index into the distinct tuples among them,
        and those tuples: grouped on the columns (integers packed, else dictionary codes), so
        only one tuple per distinct partition is built, not one per row. ``every``: ``rows``
        are all decoded rows in order (an unfiltered plan), so the columns are grouped as
        they are, no take. The tuples' order is the grouping's, not the rows'."""
        n = len(rows)
        if not self._partition or n == 0:
            return np.zeros(n, dtype=np.int64), [()] if n else []
        if self._groups is not None:  # a cached manifest's, built for pruning
            index, uniques = self._groups
            present, inverse = np.unique(index[rows], return_inverse=True)
            return inverse.reshape(-1).astype(np.int64), [uniques[i] for i in present.tolist()]
        found = _integer_groups(self._partition, None if every else np.asarray(rows, dtype=np.int64))
        if found is not None:
            return found
        return self._coded_keys(rows, every)

    def _coded_keys(
        self, rows: np.ndarray[Any, Any], every: bool
    ) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]]:
        """:meth:`partition_keys` grouped on each column's dictionary codes."""
        n = len(rows)
        try:
            if every:
                columns = self._partition
            else:
                idx = arrow_of(np.asarray(rows, dtype=np.int64))
                columns = [c.take(idx) for c in self._partition]
            encoded = [pc.dictionary_encode(c, null_encoding="encode") for c in columns]
            codes = [numpy_of(e.indices).astype(np.int64) for e in encoded]
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # a type Arrow cannot hash: per row
            ids: dict[tuple[Any, ...], int] = {}
            each = self.partitions(rows)
            index = np.fromiter((ids.setdefault(p, len(ids)) for p in each), dtype=np.int64, count=n)
            return index, list(ids)
        key = codes[0]
        for more in codes[1:]:  # one int64 key per row (mixed radix over the columns' codes)
            span = int(more.max()) + 1
            if int(key.max()) >= (1 << 62) // span:  # too many to pack: renumber what is packed
                key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
            key = key * span + more
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        # the distinct tuples from each column's dictionary (its values, nulls as None)
        values = [
            [d[i] for i in c[first].tolist()]
            for d, c in zip((e.dictionary.to_pylist() for e in encoded), codes, strict=True)
        ]
        return inverse.reshape(-1).astype(np.int64), list(zip(*values, strict=True))

    def _partitions_of(self, rows: np.ndarray[Any, Any]) -> list[tuple[Any, ...]]:
        """The partition tuples of ``rows``: shared from :meth:`partition_groups` once built
        (a cached manifest's), else read for these rows alone."""
        if self._groups is None:
            return self.partitions(rows)
        index, uniques = self._groups
        return [uniques[i] for i in index[rows].tolist()]

    def _stats(
        self,
        name: str,
        n: int,
        idx: pa.Array | None,
        columns: frozenset[int] | None,
        wanted: bool,
        ordered: np.ndarray[Any, Any] | None = None,
        span: tuple[int, int] | None = None,
    ) -> list[tuple[Any, ...] | None]:
        """Each row's map as a flat ``(key, value, ...)`` tuple, None where the map is null
        (a row holds no dict: see :mod:`aioiceberg.spec.manifest.entry_rows`). ``idx``: the
        rows taken (None: every row in order); only their items are read. ``ordered``: those
        rows as numpy, ascending and distinct, when they are: a map column without nulls is
        then read whole and its items picked by row, without taking (copying) the column
        for them (~0.1 ms a map for 1000 rows). ``span``: the rows are this (start, length)
        range, read from a slice of the column (no copy; ``idx`` and ``ordered`` are None)."""
        col = self._df.get(name)
        if col is None:
            return [None] * n
        if span is not None:
            col = col.slice(*span)
        found: tuple[np.ndarray[Any, Any], pa.Array, pa.Array] | None = None
        if ordered is not None and not col.null_count:
            found = self._items_of(col, columns, ordered) if wanted else None
            valid: list[bool] | None = None
        else:
            if idx is not None:
                col = col.take(idx)
            valid = (~null_mask(col)).tolist() if col.null_count else None
            found = _map_items(col, columns) if wanted else None
        if found is None or len(found[0]) == 0:
            return [()] * n if valid is None else [() if ok else None for ok in valid]
        at, key_array, value_array = found  # items in row order: ``at`` never decreases
        keys, values = key_array.to_pylist(), value_array.to_pylist()
        maps: list[tuple[Any, ...] | None]
        if len(at) == n and bool((at == np.arange(n)).all()):  # one item a row (a filter's column)
            maps = list(zip(keys, values, strict=True))
        else:
            flat = [x for kv in zip(keys, values, strict=True) for x in kv]
            maps = _cut(flat, 2 * np.bincount(at, minlength=n))
        if valid is None:
            return maps
        return [m if ok else None for m, ok in zip(maps, valid, strict=True)]

    @staticmethod
    def _items_of(
        col: pa.Array, columns: frozenset[int] | None, rows: np.ndarray[Any, Any]
    ) -> tuple[np.ndarray[Any, Any], pa.Array, pa.Array] | None:
        """The wanted items of the whole map column ``col`` (no nulls) that belong to
        ``rows`` (ascending, distinct), each with its row's position in ``rows``."""
        found = _map_items(col, columns)
        if found is None:
            return None
        parents, keys, values = found
        position = np.full(len(col), -1, dtype=np.int64)
        position[rows] = np.arange(len(rows), dtype=np.int64)
        at = position[parents]
        picked = np.flatnonzero(at >= 0)
        if len(picked) != len(at):
            chosen = arrow_of(picked)
            at, keys, values = at[picked], keys.take(chosen), values.take(chosen)
        return at, keys, values


def joined_partition_keys(
    parts: Sequence[tuple[ColumnarManifest, pa.Array | None, int]],
) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]] | None:
    """:meth:`ColumnarManifest.partition_keys` of several manifests' kept rows at once, as
    if their rows were one manifest's (``(manifest, kept rows' index or None for every
    row, how many rows)``, in order): their integer partition columns joined and grouped
    together, one grouping for all. None when a manifest's tuples are not integer columns
    or are grouped already (a cached manifest's), or the columns' types differ."""
    if not any(cm._partition for cm, _, _ in parts):  # unpartitioned: one empty tuple
        total = sum(n for _, _, n in parts)
        return np.zeros(total, dtype=np.int64), [()] if total else []
    width = None
    joined: list[list[pa.Array]] = []
    for cm, idx, _ in parts:
        columns = cm._partition
        if cm._groups is not None or not columns:
            return None
        if width is None:
            width = len(columns)
            joined = [[] for _ in columns]
        elif len(columns) != width:
            return None
        for into, col in zip(joined, columns, strict=True):
            into.append(col if idx is None else col.take(idx))
    if not joined:
        return None
    try:
        columns = [pa.concat_arrays(pieces) for pieces in joined]
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # (types differ between the manifests)
        return None
    return _integer_groups(columns, None)


# packed partition keys up to this many (or 4 a row) are grouped through a table, not a sort
_GROUP_SLOTS = 1024


def _integer_groups(
    columns: Sequence[pa.Array], rows: np.ndarray[Any, Any] | None
) -> tuple[np.ndarray[Any, Any], list[tuple[Any, ...]]] | None:
    """:meth:`ColumnarManifest.partition_keys` of signed integer columns (days, hours,
    buckets, identity ints), read from their buffers: each row's values packed into one
    integer (each column's value less its least, plus one where the column holds nulls: 0
    is null; a column of one value is left out), grouped through a table of slots when the
    ranges are small (a manifest's buckets), else sorted, and the distinct tuples unpacked
    from the keys. Dictionary encoding each column and sorting its codes cost ~2.5x as
    much a manifest. ``rows``: None for every row. None: another type, or too wide to pack."""
    key: np.ndarray[Any, Any] | None = None
    # per column: its least value, its span in the key (1: one value, left out), nulls held
    spans: list[tuple[int, int, bool]] = []
    slots = 1
    for col in columns:
        t = col.type
        if not isinstance(col, pa.Array) or not pa.types.is_signed_integer(t):
            return None
        width = t.bit_width // 8
        values = np.frombuffer(col.buffers()[1], dtype=f"i{width}", count=len(col), offset=col.offset * width)
        nulls = null_mask(col) if col.null_count else None
        if rows is not None:
            values = values[rows]
            nulls = None if nulls is None else nulls[rows]
        if nulls is not None and not nulls.any():
            nulls = None
        present = values if nulls is None else values[~nulls]
        if len(present) == 0:
            least, span = 0, 2  # nulls only
        else:
            least = int(np.minimum.reduce(present))
            span = int(np.maximum.reduce(present)) - least + 1 + (nulls is not None)
        spans.append((least, span, nulls is not None))
        if span == 1:  # one value (a manifest's day): nothing to pack
            continue
        slots *= span
        if slots >= 1 << 62:
            return None
        code = np.subtract(values, least, dtype=np.int64)
        if nulls is not None:
            code += 1
            code[nulls] = 0
        key = code if key is None else key * span + code
    n = len(rows) if rows is not None else len(columns[0])
    if key is None:  # one tuple
        keys: np.ndarray[Any, Any] = np.zeros(1, dtype=np.int64)
        index = np.zeros(n, dtype=np.int64)
    elif slots <= max(_GROUP_SLOTS, 4 * n):
        seen = np.zeros(slots, dtype=bool)
        seen[key] = True
        if seen.all():  # every slot taken (a manifest's buckets): the key is the index
            keys, index = np.arange(slots, dtype=np.int64), key
        else:
            keys = np.flatnonzero(seen)
            index = np.cumsum(seen, dtype=np.int64)[key] - 1
    else:
        keys, inverse = np.unique(key, return_inverse=True)
        index = inverse.reshape(-1).astype(np.int64)
    packed = [i for i, (_, span, _) in enumerate(spans) if span > 1]
    values_of: list[list[Any]] = [[]] * len(spans)
    rest = keys
    for i, (least, span, nullable) in reversed(list(enumerate(spans))):
        if span == 1:  # (not nullable: a column of nulls spans 2)
            values_of[i] = [least] * len(keys)
            continue
        code = rest
        if i != packed[0]:  # the first packed column is what is left
            code, rest = rest % span, rest // span
        if nullable:
            values_of[i] = [None if c == 0 else c - 1 + least for c in code.tolist()]
        else:
            values_of[i] = (code + least).tolist()
    return index, list(zip(*values_of, strict=True))


# a columnar manifest, the rows of it taken (in file order) and the stats their entries keep
RowsPart = tuple[ColumnarManifest, "np.ndarray[Any, Any]", frozenset[int] | None]


class SharedRows:
    """The kept rows of several manifests decoded in one call (one columnar manifest), built
    once for all of them: each manifest's view is a range of them (:attr:`ColumnarRows.shared`).

    Built per manifest, every column was taken (``take``) and converted once per manifest:
    ~25 Arrow calls for 50 rows, ~0.8 ms, against ~0.3 ms a manifest for the whole call's
    rows at once. ``memo`` holds what else a consumer builds once for the call (a task
    batch, see :mod:`aioiceberg.scan.task_batches`). It lives as long as the views do, not
    in the manifest cache.
    """

    __slots__ = ("_built", "memo", "part")

    def __init__(self, part: RowsPart) -> None:
        self.part = part
        self._built: list[Row] | None = None
        self.memo: dict[Any, Any] = {}

    def rows(self) -> list[Row]:
        built = self._built
        if built is None:
            cm, at, wanted = self.part
            built = self._built = cm.built_rows(at, wanted)
        return built


class ColumnarRows(EntryRows):
    """Entries of decoded columns whose row tuples are built when first read as rows.

    A consumer that takes a manifest's entries as columns (a plan's task batches, see
    :mod:`aioiceberg.scan.task_batches`) reads :attr:`parts` and never builds a tuple per
    entry; any other read builds them all once, as :meth:`ColumnarManifest.entry_rows` did.
    Slicing and joining keep them unbuilt. ``shared``: these entries are rows ``start`` to
    ``stop`` of a :class:`SharedRows` (its part holds exactly :attr:`parts`' rows there),
    built with their neighbours'.
    """

    __slots__ = ("_built", "parts", "shared")

    def __init__(
        self, parts: Iterable[RowsPart], spec_id: int, shared: tuple[SharedRows, int, int] | None = None
    ) -> None:
        self.parts: tuple[RowsPart, ...] = tuple(parts)
        self.spec_id = spec_id
        self._built: list[Row] | None = None
        self.shared = shared

    @property  # type: ignore[override]
    def rows(self) -> list[Row]:
        built = self._built
        if built is None:
            if self.shared is not None:
                group, start, stop = self.shared
                built = group.rows()[start:stop]
            else:
                built = [r for cm, at, wanted in self.parts for r in cm.built_rows(at, wanted)]
            self._built = built
        return built

    @rows.setter
    def rows(self, value: list[Row]) -> None:
        self._built = value

    @property
    def built(self) -> bool:
        return self._built is not None

    def __len__(self) -> int:
        if self._built is not None:
            return len(self._built)
        return sum(len(at) for _, at, _ in self.parts)

    def rows_at(self, positions: Sequence[int]) -> list[Row]:
        if self._built is not None:
            return super().rows_at(positions)
        wanted_at = np.asarray(positions, dtype=np.int64)
        if len(wanted_at) == 0:
            return []
        order = np.argsort(wanted_at, kind="stable")
        built: list[Row | None] = [None] * len(wanted_at)
        offset = 0
        for cm, at, wanted in self.parts:  # one build per part, of the positions in it
            here = order[(wanted_at[order] >= offset) & (wanted_at[order] < offset + len(at))]
            if len(here):
                for i, row in zip(
                    here.tolist(), cm.built_rows(at[wanted_at[here] - offset], wanted), strict=True
                ):
                    built[i] = row
            offset += len(at)
        if any(row is None for row in built):
            raise IndexError("entry index out of range")
        return [row for row in built if row is not None]

    def _one_row(self, i: int) -> Row:
        return self.rows_at([i])[0]

    @overload
    def __getitem__(self, index: int) -> ManifestEntry: ...

    @overload
    def __getitem__(self, index: slice) -> EntryRows: ...

    def __getitem__(self, index: int | slice) -> ManifestEntry | EntryRows:
        if self._built is not None:
            return super().__getitem__(index)
        n = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step != 1:
                return super().__getitem__(index)
            return self.between(start, max(start, stop))
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("entry index out of range")
        return EntryRows([self._one_row(index)], self.spec_id)[0]

    def between(self, start: int, stop: int) -> ColumnarRows:
        """Entries ``start`` to ``stop`` (unbuilt)."""
        parts: list[RowsPart] = []
        offset = 0
        for cm, at, wanted in self.parts:
            a, b = max(start - offset, 0), min(stop - offset, len(at))
            if a < b:
                parts.append((cm, at[a:b], wanted))
            offset += len(at)
        return ColumnarRows(parts, self.spec_id)

    def where(self, keep: np.ndarray[Any, Any]) -> ColumnarRows:
        """The entries where the boolean array ``keep`` is true (unbuilt)."""
        parts: list[RowsPart] = []
        offset = 0
        for cm, at, wanted in self.parts:
            mask = keep[offset : offset + len(at)]
            parts.append((cm, at[mask], wanted))
            offset += len(at)
        return ColumnarRows(parts, self.spec_id)

    def __repr__(self) -> str:
        return f"ColumnarRows({len(self)} entries, spec_id={self.spec_id}, built={self.built})"


def joined_rows(pieces: Sequence[EntryRows], spec_id: int) -> EntryRows:
    """Several manifests' (or parts') entries as one, in order: unbuilt when every piece is."""
    pieces = [p for p in pieces if len(p)]
    if not pieces:
        return EntryRows([], spec_id)
    if len(pieces) == 1:
        return pieces[0]
    unbuilt = [p for p in pieces if isinstance(p, ColumnarRows) and not p.built]
    if len(unbuilt) == len(pieces):
        return ColumnarRows([part for p in unbuilt for part in p.parts], spec_id)
    return EntryRows([r for p in pieces for r in p.rows], spec_id)


def _read_map(col: pa.Array | None, keys_wanted: frozenset[int] | None) -> _Items | None:
    """(row index per item as numpy, keys, values) of a map column, for the wanted keys."""
    found = _map_items(col, keys_wanted)
    if found is None:
        return None
    parents, keys, values = found
    return parents, keys.to_pylist(), values.to_pylist()


def _map_items(
    col: pa.Array | None, keys_wanted: frozenset[int] | None
) -> tuple[np.ndarray[Any, Any], pa.Array, pa.Array] | None:
    """(row index per item as numpy, keys, values as Arrow arrays) of a map column, for the
    wanted keys (picked with numpy: a null key is never wanted)."""
    found = _map_picked(col, keys_wanted)
    if found is None:
        return None
    parents, keys, values, picked = found
    return parents, keys if picked is None else keys.take(picked), values


def _map_values(col: pa.Array | None, key: int) -> tuple[np.ndarray[Any, Any], pa.Array] | None:
    """(row index per item, values) of one key's items in a map column, for a bound column's
    read: their keys are not taken, as each of them is ``key``."""
    found = _map_picked(col, frozenset({key}))
    return None if found is None else (found[0], found[2])


def _map_picked(
    col: pa.Array | None, keys_wanted: frozenset[int] | None
) -> tuple[np.ndarray[Any, Any], pa.Array, pa.Array, pa.Array | None] | None:
    """(parents, every key, values, where the values were picked: None for all) of the
    wanted keys' items."""
    if col is None or len(col) == 0:
        return None
    items = pc.list_flatten(col)
    if len(items) == 0:
        return None
    if col.null_count:
        # Arrow lets a null slot span values; ``list_flatten`` skips them, while
        # ``list_parent_indices`` counts them: parents from the lengths flatten keeps
        counted = pc.list_value_length(col)
        lengths = numpy_of(pc.fill_null(counted, scalar_of(0, counted.type)))
        parents = np.repeat(np.arange(len(col), dtype=np.int64), lengths)
    else:
        parents = numpy_of(pc.list_parent_indices(col))
    keys, values = items.flatten()
    if keys_wanted is not None:
        codes = numpy_of(keys)  # a null key is NaN here: equal to no key
        hit = codes == next(iter(keys_wanted)) if len(keys_wanted) == 1 else np.isin(codes, list(keys_wanted))
        at = np.flatnonzero(hit)
        if len(at) != len(codes):
            picked = arrow_of(at)
            return parents[at], keys, values.take(picked), picked
    return parents, keys, values, None


def fixed_width_items(
    values: pa.Array, widths: Mapping[int, str], dtype: Any
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """A map's binary values (bounds) read in bulk from their buffers: readable where the
    value's length is one of ``widths`` (length -> numpy code of its little-endian value),
    and those values as ``dtype``; None when ``values`` is not a binary array. The same as
    joining the values as ``bytes`` and reading them with ``np.frombuffer``, without a
    Python object per value."""
    t = values.type
    found = value_offsets(values) if pa.types.is_binary(t) or pa.types.is_large_binary(t) else None
    if found is None:
        return None
    if len(values) == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=dtype)
    offsets, data_buf = found
    lengths = np.diff(offsets)
    if values.null_count:
        lengths[null_mask(values)] = -1
    else:
        # the usual case: every value of one width, so they lie end to end and are read as one
        # array (a gather by byte was ~45 us for 1000 values)
        code = widths.get(int(lengths[0]))
        if code is not None and data_buf is not None and bool((lengths == lengths[0]).all()):
            view = np.frombuffer(data_buf, dtype=np.dtype(code), count=len(values), offset=int(offsets[0]))
            return np.ones(len(values), dtype=bool), view.astype(dtype)
    ok = np.isin(lengths, list(widths))
    out = np.zeros(int(ok.sum()), dtype=dtype)
    if not len(out):
        return ok, out
    assert data_buf is not None  # (values of a readable width hold bytes)
    data = np.frombuffer(data_buf, dtype=np.uint8)
    at, starts = lengths[ok], offsets[:-1][ok]
    for width, code in widths.items():
        mine = at == width
        if mine.any():
            picked = data[starts[mine][:, None] + np.arange(width)]  # one row of bytes per value
            out[mine] = np.ascontiguousarray(picked).view(np.dtype(code)).reshape(-1).astype(dtype)
    return ok, out


def _count_values(values: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """A count map's values read in bulk as :meth:`ColumnarManifest.count_column`'s ``read``
    reads them one by one: an integer where not null (None: not an integer column)."""
    if not pa.types.is_integer(values.type):
        return None
    if not values.null_count:
        return np.ones(len(values), dtype=bool), numpy_of(values).astype(np.int64)
    return ~null_mask(values), numpy_of(values.drop_null()).astype(np.int64)


def _cut(flat: list[Any], lengths: np.ndarray[Any, Any]) -> list[tuple[Any, ...] | None]:
    """``flat`` cut into consecutive tuples of ``lengths[i]`` values.

    Rows are cut from one flat list, not gathered in a list per row: thousands of such lists
    alive during a decode were promoted by the collector's young collections and brought on
    full collections, ~20-30 ms each in a service process, every few manifests.
    """
    if len(lengths) and bool((lengths == lengths[0]).all()):  # as many in every row
        k = int(lengths[0])
        return list(zip(*[iter(flat)] * k, strict=True)) if k else [()] * len(lengths)
    ends = np.cumsum(lengths).tolist()
    return [tuple(flat[a:b]) for a, b in zip([0, *ends[:-1]], ends, strict=True)]


def _list_tuples(arr: pa.Array | None, n: int) -> list[tuple[Any, ...] | None]:
    """A list column as tuples (a row must hold no list: the collector never untracks one),
    cut from its flat values (see :func:`_cut`)."""
    if arr is None or arr.null_count == len(arr):
        return [None] * n
    counted = pc.list_value_length(arr)
    lengths = numpy_of(pc.fill_null(counted, scalar_of(0, counted.type)))
    flat: list[Any] = arr.flatten().to_pylist()
    tuples = _cut(flat, lengths)
    if not arr.null_count:
        return tuples
    valid = (~null_mask(arr)).tolist()
    return [t if ok else None for t, ok in zip(tuples, valid, strict=True)]


def open_columnar(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
    part: bool = False,
    native: bool = True,
    skip_stats: bool = False,
) -> ColumnarManifest | None:
    """Decode a manifest into columns, or None when the fastavro reader must decide.

    Header problems raise exactly as :func:`read_manifest` does (it is the same check).
    ``part``: ``data`` is the header and some blocks of ``manifest``, whose whole length the
    caller has checked against the list's. ``native``: False decodes with polars even where
    the compiled decoder is installed (see :func:`_to_arrow`). ``skip_stats``: the metric maps'
    items are read past (each map empty, or null where it was: entries trimmed to no stats are
    as a whole decode gives them): for a plan that reads none, never for a cache that serves
    any filter.
    """
    location = location or (manifest.manifest_path if manifest is not None else None)
    _, meta, casts = _header(data, manifest, location, native)
    if meta.format_version == 1 or not _decoder_ready(native):
        return None
    if manifest is not None and manifest.manifest_length != len(data) and not part:
        return None  # a disputed length: the fastavro reader checks the entry counts
    if casts is None:
        return None
    try:
        table = _to_arrow(data, native, location, skip_stats)
        needed = frozenset(columns_needed) if columns_needed is not None else None
        return ColumnarManifest(meta, table, manifest, casts, needed, discard_deleted)
    except Exception:  # the fastavro reader decides what this file is
        return None


@dataclass(frozen=True, slots=True)
class AvroLayout:
    """Where an Avro container's parts are: its header (magic and metadata, without the sync
    marker), the marker, and each data block (count, size and bytes; marker excluded)."""

    header: bytes
    sync: bytes
    blocks: tuple[tuple[int, int], ...]
    rows: int


def avro_layout(data: bytes) -> AvroLayout | None:
    """The container's layout, or None when it is not well formed (the fastavro reader then
    says what is wrong)."""
    pos = header_length(data)  # the magic and metadata, walked as every other reader here does
    if pos is None:
        return None
    try:
        header, sync = data[:pos], data[pos : pos + 16]
        pos += 16
        if len(sync) != 16 or pos > len(data):
            return None
        blocks: list[tuple[int, int]] = []
        rows = 0
        while pos < len(data):
            start = pos
            count, pos = _read_long(data, pos)
            size, pos = _read_long(data, pos)
            if count < 0 or size < 0:
                return None
            pos += size
            if data[pos : pos + 16] != sync:
                return None
            blocks.append((start, pos))
            rows += count
            pos += 16
    except (IndexError, ValueError):
        return None
    return AvroLayout(header, sync, tuple(blocks), rows)


def split_blocks(data: bytes, rows: int) -> tuple[bytes, bytes] | None:
    """``data`` as two containers under its header: its first blocks holding at least ``rows``
    rows, and the rest; None when the first would be the whole file (or it is not well
    formed)."""
    layout = avro_layout(data)
    if layout is None:
        return None
    taken = 0
    for i, (start, _) in enumerate(layout.blocks[:-1]):
        taken += _read_long(data, start)[0]
        if taken >= rows:
            head, tail = layout.blocks[: i + 1], layout.blocks[i + 1 :]
            return _container(layout, [(data, head)]), _container(layout, [(data, tail)])
    return None


def _container(layout: AvroLayout, pieces: Iterable[tuple[bytes, Sequence[tuple[int, int]]]]) -> bytes:
    """One container under ``layout``'s header and marker, of the given blocks of each data."""
    parts = [layout.header, layout.sync]
    for data, blocks in pieces:
        for start, end in blocks:
            parts += (data[start:end], layout.sync)
    return b"".join(parts)


def open_columnar_batch(
    items: Sequence[tuple[bytes, ManifestFile]],
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
    layouts: Sequence[AvroLayout | None] | None = None,
    native: bool = True,
    skip_stats: bool = False,
) -> ColumnarManifest | None:
    """Decode several manifests in one call, or None when they cannot share one.

    ``layouts``: the items' :func:`avro_layout`, when the caller has them already (only the
    polars path uses them); ``native`` and ``skip_stats``: as for :func:`open_columnar`.

    Small manifests cost the columnar decoder more per file than per entry. Manifests whose
    headers are byte for byte the same (one schema, spec, codec and format version: what one
    writer produces; sync markers aside) have data blocks any of their readers decodes alike,
    so they are decoded at once: the compiled decoder reads each manifest's blocks where they
    lie, for polars they are joined under the first header. Rows remember their manifest
    (``owner``) and inherit its snapshot id and sequence number. Anything unusual (a header
    that differs, a length the manifest list disputes, v1, v3 row ids to assign) is None: the
    caller decodes those manifests one by one, which also says what is wrong.
    """
    if len(items) < 2 or not _decoder_ready(native):
        return None
    first_data, first_mf = items[0]
    for data, mf in items:
        if (
            mf.manifest_length != len(data)
            or mf.content != first_mf.content
            or mf.partition_spec_id != first_mf.partition_spec_id
            or mf.first_row_id is not None
        ):
            return None
    try:
        _, meta, casts = _header(first_data, first_mf, None, native)
    except Exception:
        return None
    if meta.format_version == 1 or casts is None:
        return None
    try:
        found = _joined_table(items, layouts, native, skip_stats)
        if found is None:
            return None
        table, counts = found
        if table.num_rows != sum(counts):
            return None
        owner = np.repeat(np.arange(len(items), dtype=np.int64), counts)
        needed = frozenset(columns_needed) if columns_needed is not None else None
        return ColumnarManifest(
            meta, table, None, casts, needed, discard_deleted, batch=(owner, [mf for _, mf in items])
        )
    except Exception:  # the fastavro reader decides what these files are
        return None


def _joined_table(
    items: Sequence[tuple[bytes, ManifestFile]],
    layouts: Sequence[AvroLayout | None] | None,
    native: bool,
    skip_stats: bool = False,
) -> tuple[pa.Table, Sequence[int]] | None:
    """The items' entries as one table and how many rows each gave, or None when their
    headers differ (or are not well formed). The compiled decoder takes the manifests as they
    are (each block checked against its own manifest's sync marker); polars gets their blocks
    joined under the first header, located by :func:`avro_layout`. Damaged bytes raise."""
    first_data = items[0][0]
    end = header_length(first_data)
    if end is None:
        return None
    prefix = first_data[:end]
    if not all(data.startswith(prefix) for data, _ in items):
        return None  # another writer's header (a byte for byte test: cheaper than parsing it)
    if native:
        joined = decode_native_joined(
            [data for data, _ in items],
            [mf.manifest_path for _, mf in items],
            STAT_FIELDS if skip_stats else (),
        )
        if joined is not None:
            return joined  # else a type it does not decode: polars may
    if layouts is None:
        layouts = [avro_layout(data) for data, _ in items]
    first = layouts[0]
    if first is None or any(layout is None or layout.header != first.header for layout in layouts):
        return None
    pieces = [
        (data, layout.blocks) for (data, _), layout in zip(items, layouts, strict=True) if layout is not None
    ]
    counts = [layout.rows for layout in layouts if layout is not None]
    return _to_arrow(_container(first, pieces), native), counts


def read_manifest_entries_columnar(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
    native: bool = True,
) -> list[ManifestEntry] | None:
    """All (live, with ``discard_deleted``) entries via the columnar path; None: use fastavro."""
    cm = open_columnar(
        data,
        manifest,
        location,
        columns_needed=columns_needed,
        discard_deleted=discard_deleted,
        native=native,
    )
    if cm is None:
        return None
    try:
        return cm.entries(cm.rows)
    except Exception:
        return None
