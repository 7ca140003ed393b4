"""A columnar manifest-list reader: the fast path for long lists, never the authority.

A manifest list of thousands of rows costs fastavro ~7 us a row to decode into dicts and
about as much again to turn into :class:`ManifestFile` rows; it sits in front of every
plan of the snapshot. The columnar decoder (``columnar._to_arrow``: the compiled one where
installed, else ``polars.read_avro``) decodes the same bytes into columns several times faster
(and releases the GIL), and rows are then built from whole columns.

:func:`read_manifest_list_columnar` returns None whenever it cannot promise the rows
:func:`~aioiceberg.spec.manifest.fastavro_reader.read_manifest_list` would build: a field or type
outside the spec's manifest-list schema, a damaged file, a value outside its enum. The
caller then reads the list with fastavro, which also says what is wrong.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import fastavro
import numpy as np
import pyarrow as pa

from aioiceberg.spec.arrow_numpy import arrow_of, null_mask, numpy_of, value_offsets
from aioiceberg.spec.manifest.avro_schemas import SUPPORTED_FORMAT_VERSIONS
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.columnar import _decoder_ready, _one_array, _to_arrow, avro_layout
from aioiceberg.spec.manifest.fastavro_reader import read_manifest_list
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.manifest.native_decode import native_available
from aioiceberg.spec.manifest.writer_schema import record_fields

__all__ = [
    "COLUMNAR_LIST_MIN_ROWS",
    "NATIVE_LIST_MIN_ROWS",
    "ManifestRows",
    "decode_manifest_list",
    "decode_manifest_rows",
    "read_manifest_list_columnar",
]

# Below this many rows fastavro is as quick, and a short list never imports polars (~0.15 s).
COLUMNAR_LIST_MIN_ROWS = 256
# ... with the compiled decoder, which imports nothing: a list with every row built, fastavro
# against it, 32 rows 0.38 / 0.43 ms, 64 rows 1.37 / 0.38 ms, 500 rows 5.6 / 1.9 ms.
NATIVE_LIST_MIN_ROWS = 48

# The manifest list's fields (v1-v3) and the Avro types the columnar path reads as fastavro
# does; a union with null is accepted for any of them.
_TOP: dict[str, str] = {
    "manifest_path": "string",
    "manifest_length": "long",
    "partition_spec_id": "int",
    "content": "int",
    "sequence_number": "long",
    "min_sequence_number": "long",
    "added_snapshot_id": "long",
    "added_files_count": "int",
    "existing_files_count": "int",
    "deleted_files_count": "int",
    "added_rows_count": "long",
    "existing_rows_count": "long",
    "deleted_rows_count": "long",
    "key_metadata": "bytes",
    "first_row_id": "long",
}
_SUMMARY: dict[str, str] = {
    "contains_null": "boolean",
    "contains_nan": "boolean",
    "lower_bound": "bytes",
    "upper_bound": "bytes",
}
_CONTENT = {c.value: c for c in ManifestContent}
_MAX_CONTENT = max(_CONTENT)  # the values are 0 to this
_new_manifest_file: Callable[..., ManifestFile] = frozen_builder(ManifestFile)
_new_summary: Callable[..., PartitionFieldSummary] = frozen_builder(PartitionFieldSummary)


def _base(t: Any) -> Any:
    """The type of a field, seen through a union with null."""
    if isinstance(t, list) and len(t) == 2 and "null" in t:
        return t[1] if t[0] == "null" else t[0]
    return t


def _plain(t: Any, expected: str) -> bool:
    t = _base(t)
    return t == expected or (isinstance(t, dict) and t.get("type") == expected and "logicalType" not in t)


def _schema_known(fields: dict[str, Any]) -> bool:
    for name, field in fields.items():
        t = field.get("type")
        if name == "partitions":
            arr = _base(t)
            if not isinstance(arr, dict) or arr.get("type") != "array":
                return False
            summary = record_fields(arr.get("items"))
            if "contains_null" not in summary:
                return False
            for sname, sfield in summary.items():
                if sname not in _SUMMARY or not _plain(sfield.get("type"), _SUMMARY[sname]):
                    return False
        elif name not in _TOP or not _plain(t, _TOP[name]):
            return False
    return True


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A binary array's value offsets (int64, its slice's own) and data bytes, as numpy views."""
    found = value_offsets(arr)
    assert found is not None  # (only binary columns are kept for this)
    offsets, data = found
    return offsets, (np.empty(0, dtype=np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8))


_BUILD_CHUNK = 64  # rows built between two releases of the GIL (~5 us a row)
# A row's fields in ManifestFile's order: the list's column, or None for content and
# partitions (built from their own columns)
_ROW_COLUMNS: tuple[str | None, ...] = (
    "manifest_path",
    "manifest_length",
    "partition_spec_id",
    None,
    "sequence_number",
    "min_sequence_number",
    "added_snapshot_id",
    "added_files_count",
    "existing_files_count",
    "deleted_files_count",
    "added_rows_count",
    "existing_rows_count",
    "deleted_rows_count",
    None,
    "key_metadata",
    "first_row_id",
)
_SEQUENCE_COLUMNS = frozenset({"sequence_number", "min_sequence_number"})
_REQUIRED = ("manifest_path", "manifest_length", "partition_spec_id", "added_snapshot_id")
# Rows built on their own (``build``) when fewer than 1 / _TAKEN_BELOW of the list: their
# values are taken from the columns, not every column converted (2000 rows: ~0.6-1.1 ms)
_TAKEN_BELOW = 8


class ManifestRows(Sequence[ManifestFile]):
    """A long manifest list's rows, each built when first read.

    A plan reads the list's columns to choose its manifests (see
    :mod:`aioiceberg.scan.manifest_select`) and builds the few rows it keeps: building all
    2000 rows of a list and their 4000 partition summaries was ~6 ms of the ~12 ms its
    decode took, before the plan's first request. The columns stay Arrow arrays until rows
    are built: a few rows built together (``build``) take their own values, more convert
    the columns once. Values are checked at decode time as the eager reader checks them, so
    reading a row cannot fail.
    """

    __slots__ = (
        "_arrays",
        "_bound_arrays",
        "_built",
        "_children",
        "_columns",
        "_kinds",
        "_n",
        "_offsets",
        "_summary",
        "_v1",
        "_valid",
    )

    def __init__(self, table: pa.Table, version: int) -> None:
        n: int = table.num_rows
        self._n = n
        self._v1 = version == 1  # v1 rows read sequence numbers 0 where the list has none
        names, columns = table.column_names, table.columns
        arrays = {name: _one_array(column) for name, column in zip(names, columns, strict=True)}
        self._arrays: dict[str, pa.Array] = arrays
        for name in _REQUIRED:
            if arrays[name].null_count:
                raise ValueError("a required manifest-list field is null")
        content = arrays.get("content")
        self._kinds: np.ndarray[Any, Any] | None = None
        if content is not None:
            kinds = numpy_of(content) if not content.null_count else None
            # the eager reader's check (every value one of ManifestContent's), in two reductions
            if kinds is None or (len(kinds) and (int(kinds.min()) < 0 or int(kinds.max()) > _MAX_CONTENT)):
                raise ValueError("content outside its enum")
            self._kinds = kinds
        self._columns: list[list[Any]] | None = None  # every column as values, once converted
        self._children: dict[str, pa.Array] | None = None
        self._summary: dict[str, list[Any]] | None = None
        self._bound_arrays: dict[str, pa.Array] = {}  # the bounds' own column, read in bulk
        self._offsets: np.ndarray[Any, Any] | None = None
        self._valid: np.ndarray[Any, Any] | None = None
        if "partitions" in arrays:
            lists = arrays["partitions"]
            if not isinstance(lists, pa.ListArray | pa.LargeListArray):
                raise TypeError(f"partitions decoded as {lists.type}")
            flat = lists.values
            if flat.null_count:
                raise ValueError("a partition summary is null")
            children = dict(zip(flat.type.names, flat.flatten(), strict=True))
            if children["contains_null"].null_count:
                raise ValueError("a summary lacks contains_null")  # fastavro's reader would refuse it
            # the list's own offsets (a slice's too) into the whole child array
            self._offsets = numpy_of(lists.offsets).astype(np.int64)
            self._valid = ~null_mask(lists)
            self._children = children
            self._bound_arrays = {
                name: children[name]
                for name in ("lower_bound", "upper_bound")
                if name in children
                and (pa.types.is_binary(children[name].type) or pa.types.is_large_binary(children[name].type))
            }
        self._built: list[ManifestFile | None] = [None] * n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> ManifestFile: ...

    @overload
    def __getitem__(self, index: slice) -> list[ManifestFile]: ...

    def __getitem__(self, index: int | slice) -> ManifestFile | list[ManifestFile]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(self._n))]
        i: int = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError("manifest list index out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[ManifestFile]:
        for i in range(self._n):
            yield self._row(i)

    def unbuilt(self, rows: Sequence[int]) -> list[int]:
        """Those of ``rows`` not built yet."""
        built = self._built
        return [i for i in rows if built[i] is None]

    def build(self, rows: Sequence[int]) -> None:
        """Build ``rows`` now (from a worker thread, when a plan is about to read many).

        A few rows of a long list (a selective plan's) are built from their values alone,
        taken from the columns. Otherwise the GIL is let go every ``_BUILD_CHUNK`` rows: a
        waiting event loop (a plan's first request is under way meanwhile) runs within
        ~0.3 ms, not at the interpreter's 5 ms switch interval."""
        if self._columns is None and len(rows) * _TAKEN_BELOW < self._n:
            todo = sorted(set(self.unbuilt(rows)))
            if todo:
                self._build_taken(todo)
            return
        for start in range(0, len(rows), _BUILD_CHUNK):
            for i in rows[start : start + _BUILD_CHUNK]:
                self._row(i)
            time.sleep(0)

    def has_deletes(self) -> bool:
        """Whether any row lists a delete manifest, read from the content column."""
        return self._kinds is not None and bool((self._kinds == ManifestContent.DELETES.value).any())

    def total_length(self, rows: Sequence[int]) -> int:
        """The listed lengths of ``rows``' manifests, from the column."""
        lengths = numpy_of(self._arrays["manifest_length"]).astype(np.int64)
        return int(lengths[np.asarray(rows, dtype=np.int64)].sum()) if len(rows) else 0

    def spec_ids(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        ids: np.ndarray[Any, np.dtype[np.int64]] = numpy_of(self._arrays["partition_spec_id"])
        return ids.astype(np.int64)

    def partition_bounds(
        self, rows: np.ndarray[Any, Any], position: int, upper: bool, fields: int
    ) -> tuple[list[bool], list[Any]]:
        """For ``rows``: whether each has ``fields`` partition summaries, and the raw lower (or
        ``upper``) bound of summary ``position`` (None where absent or not so shaped), read
        from the columns without building rows."""
        n = len(rows)
        summary = self._summary_values()
        if summary is None or self._offsets is None or self._valid is None:
            return [False] * n, [None] * n
        starts = self._offsets[rows]
        counts = self._offsets[rows + 1] - starts
        shaped = self._valid[rows] & (counts == fields)
        child = summary.get("upper_bound" if upper else "lower_bound")
        at = (starts + position).tolist()
        ok = shaped.tolist()
        raw = [child[a] if k and child is not None else None for a, k in zip(at, ok, strict=True)]
        return ok, raw

    def partition_bound_bytes(
        self, rows: np.ndarray[Any, Any], position: int, upper: bool, fields: int, width: int
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], bytes] | None:
        """:meth:`partition_bounds` in bulk from the Arrow column's buffers (a 2000-row list:
        ~0.1 ms, not ~5 ms of Python per bound before a plan's first manifest request; nor
        pyarrow compute kernels, whose first calls a fresh process paid there): whether each
        row is so shaped, each bound's byte length (-1: absent or not so shaped), and the
        bounds of ``width`` bytes joined in row order. None when the column is not plain binary."""
        arr = self._bound_arrays.get("upper_bound" if upper else "lower_bound")
        if arr is None or self._offsets is None or self._valid is None:
            return None
        starts = self._offsets[rows]
        shaped = self._valid[rows] & (self._offsets[rows + 1] - starts == fields)
        at = starts[shaped] + position  # each shaped row's bound in the column
        offsets, data = _binary_buffers(arr)
        begins = offsets[at]
        sizes = offsets[at + 1] - begins
        if arr.null_count:
            sizes[null_mask(arr)[at]] = -1
        lengths = np.full(len(rows), -1, dtype=np.int64)
        lengths[shaped] = sizes
        wide = begins[sizes == width]
        joined = data[wide[:, None] + np.arange(width, dtype=np.int64)].tobytes()
        return shaped, lengths, joined

    def _summary_values(self) -> dict[str, list[Any]] | None:
        """The summaries' fields as values, converted once."""
        if self._summary is None and self._children is not None:
            self._summary = {name: child.to_pylist() for name, child in self._children.items()}
        return self._summary

    def _values(self, name: str | None, idx: pa.Array | None, count: int) -> list[Any]:
        """Column ``name``'s values (of the rows at ``idx``; None: every row), as the eager
        reader reads them: None where the list has no such column, and a v1 list's sequence
        numbers 0 where it has none."""
        arr = self._arrays.get(name) if name is not None else None
        v1_sequence = self._v1 and name in _SEQUENCE_COLUMNS
        if arr is None:
            return [0 if v1_sequence else None] * count
        values: list[Any] = (arr if idx is None else arr.take(idx)).to_pylist()
        return [0 if v is None else v for v in values] if v1_sequence else values

    def _build_taken(self, rows: list[int]) -> None:
        """Build ``rows`` (ascending, none built) from their values alone."""
        idx = arrow_of(np.asarray(rows, dtype=np.int64))
        count = len(rows)
        c = [self._values(name, idx, count) for name in _ROW_COLUMNS]
        kinds = [0] * count if self._kinds is None else self._kinds[np.asarray(rows)].tolist()
        partitions = self._taken_partitions(rows)
        built = self._built
        for j, i in enumerate(rows):
            built[i] = _new_manifest_file(
                c[0][j], c[1][j], c[2][j], _CONTENT[kinds[j]], c[4][j], c[5][j], c[6][j], c[7][j], c[8][j],
                c[9][j], c[10][j], c[11][j], c[12][j], partitions[j], c[14][j], c[15][j],
            )  # fmt: skip

    def _taken_partitions(self, rows: list[int]) -> list[tuple[PartitionFieldSummary, ...] | None]:
        """The partition summaries of ``rows``, from their own items of the summary columns."""
        children, offsets, valid = self._children, self._offsets, self._valid
        if children is None or offsets is None or valid is None:
            return [None] * len(rows)
        at = np.asarray(rows, dtype=np.int64)
        starts, ends, ok = offsets[at].tolist(), offsets[at + 1].tolist(), valid[at].tolist()
        items = [np.arange(a, b, dtype=np.int64) for a, b, k in zip(starts, ends, ok, strict=True) if k]
        idx = arrow_of(np.concatenate(items) if items else np.zeros(0, dtype=np.int64))
        taken = {name: child.take(idx).to_pylist() for name, child in children.items()}
        cn, cnan = taken["contains_null"], taken.get("contains_nan")
        lo, hi = taken.get("lower_bound"), taken.get("upper_bound")
        out: list[tuple[PartitionFieldSummary, ...] | None] = []
        j = 0
        for a, b, k in zip(starts, ends, ok, strict=True):
            if not k:
                out.append(None)
                continue
            out.append(
                tuple(
                    _new_summary(
                        cn[x],
                        None if cnan is None else cnan[x],
                        None if lo is None else lo[x],
                        None if hi is None else hi[x],
                    )
                    for x in range(j, j + b - a)
                )
            )
            j += b - a
        return out

    def _row(self, i: int) -> ManifestFile:
        found = self._built[i]
        if found is not None:
            return found
        c = self._columns
        if c is None:  # every column converted once: rows built one by one read them all
            c = self._columns = [self._values(name, None, self._n) for name in _ROW_COLUMNS]
        kind = ManifestContent.DATA if self._kinds is None else _CONTENT[int(self._kinds[i])]
        built = self._built[i] = _new_manifest_file(
            c[0][i], c[1][i], c[2][i], kind, c[4][i], c[5][i], c[6][i], c[7][i], c[8][i], c[9][i],
            c[10][i], c[11][i], c[12][i], self._partitions(i), c[14][i], c[15][i],
        )  # fmt: skip
        return built

    def _partitions(self, i: int) -> tuple[PartitionFieldSummary, ...] | None:
        summary, offsets, valid = self._summary_values(), self._offsets, self._valid
        if summary is None or offsets is None or valid is None or not valid[i]:
            return None
        a, b = int(offsets[i]), int(offsets[i + 1])
        cn, cnan = summary["contains_null"], summary.get("contains_nan")
        lo, hi = summary.get("lower_bound"), summary.get("upper_bound")
        return tuple(
            _new_summary(
                cn[j],
                None if cnan is None else cnan[j],
                None if lo is None else lo[j],
                None if hi is None else hi[j],
            )
            for j in range(a, b)
        )


def decode_manifest_list(data: bytes, location: str | None = None) -> list[ManifestFile]:
    """A manifest list's rows: columnar when it is long and plain, else fastavro's reader."""
    rows = read_manifest_list_columnar(data)
    return rows if rows is not None else read_manifest_list(data, location)


def decode_manifest_rows(
    data: bytes, location: str | None = None, *, min_rows: int | None = None
) -> Sequence[ManifestFile]:
    """:func:`decode_manifest_list`, its columnar rows built as they are read."""
    rows = _columnar_rows(data, min_rows)
    return rows if rows is not None else read_manifest_list(data, location)


def read_manifest_list_columnar(data: bytes, *, min_rows: int | None = None) -> list[ManifestFile] | None:
    """The list's rows as :func:`read_manifest_list` builds them (v1 lists get content DATA
    and sequence numbers 0), or None: use that reader instead. ``min_rows``: shorter lists
    are left to fastavro (None: the decoder's own threshold, see ``NATIVE_LIST_MIN_ROWS``)."""
    rows = _columnar_rows(data, min_rows)
    return None if rows is None else list(rows)


def _columnar_rows(data: bytes, min_rows: int | None) -> ManifestRows | None:
    if min_rows is None:
        min_rows = NATIVE_LIST_MIN_ROWS if native_available() else COLUMNAR_LIST_MIN_ROWS
    layout = avro_layout(data)
    if layout is None or layout.rows < min_rows or not _decoder_ready(True):
        return None
    try:
        reader = fastavro.reader(io.BytesIO(data))
        fields = record_fields(reader.writer_schema)
        if "manifest_path" not in fields or "added_snapshot_id" not in fields or not _schema_known(fields):
            return None
        text = reader.metadata.get("format-version")
        guess = 3 if "first_row_id" in fields else 2 if "sequence_number" in fields else 1
        version = int(text) if text is not None else guess
        if version not in SUPPORTED_FORMAT_VERSIONS:
            return None
        table = _to_arrow(data)  # the compiled decoder where installed, else polars
        if table.num_rows != layout.rows:
            return None
        return ManifestRows(table, version)
    except Exception:  # the fastavro reader decides what this file is
        return None
