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

from aioiceberg.spec.arrow_numpy import null_mask, numpy_of, value_offsets
from aioiceberg.spec.manifest.avro_schemas import SUPPORTED_FORMAT_VERSIONS
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.columnar import _decoder_ready, _one_array, _to_arrow, avro_layout
from aioiceberg.spec.manifest.fastavro_reader import read_manifest_list
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.manifest.writer_schema import record_fields

__all__ = [
    "COLUMNAR_LIST_MIN_ROWS",
    "ManifestRows",
    "decode_manifest_list",
    "decode_manifest_rows",
    "read_manifest_list_columnar",
]

# Below this many rows fastavro is as quick, and a short list never imports polars (~0.15 s).
COLUMNAR_LIST_MIN_ROWS = 256

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


def _column(table: pa.Table, name: str) -> list[Any] | None:
    if name not in table.column_names:
        return None
    values: list[Any] = table.column(name).to_pylist()
    return values


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A binary array's value offsets (int64, its slice's own) and data bytes, as numpy views."""
    found = value_offsets(arr)
    assert found is not None  # (only binary columns are kept for this)
    offsets, data = found
    return offsets, (np.empty(0, dtype=np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8))


_BUILD_CHUNK = 64  # rows built between two releases of the GIL (~5 us a row)


class ManifestRows(Sequence[ManifestFile]):
    """A long manifest list's rows, each built when first read.

    A plan reads the list's columns to choose its manifests (see
    :mod:`aioiceberg.scan.manifest_select`) and builds the few rows it keeps: building all
    2000 rows of a list and their 4000 partition summaries was ~6 ms of the ~12 ms its
    decode took, before the plan's first request. Values are checked at decode time as
    the eager reader checks them, so reading a row cannot fail.
    """

    __slots__ = ("_bound_arrays", "_built", "_columns", "_kinds", "_n", "_offsets", "_summary", "_valid")

    def __init__(self, table: pa.Table, version: int) -> None:
        n: int = table.num_rows
        self._n = n
        none: list[Any] = [None] * n
        default_seq = 0 if version == 1 else None

        def col(name: str) -> list[Any]:
            values = _column(table, name)
            return none if values is None else values

        def seqs(name: str) -> list[Any]:
            values = _column(table, name)
            if default_seq is None:
                return none if values is None else values
            return [0] * n if values is None else [0 if v is None else v for v in values]

        for name in ("manifest_path", "manifest_length", "partition_spec_id", "added_snapshot_id"):
            if _one_array(table.column(name)).null_count:
                raise ValueError("a required manifest-list field is null")
        contents = _column(table, "content")
        if contents is not None and not set(contents) <= _CONTENT.keys():
            raise ValueError("content outside its enum")
        self._kinds = contents
        self._columns: list[list[Any]] = [
            col("manifest_path"),
            col("manifest_length"),
            col("partition_spec_id"),
            [],  # content: from ``_kinds``
            seqs("sequence_number"),
            seqs("min_sequence_number"),
            col("added_snapshot_id"),
            col("added_files_count"),
            col("existing_files_count"),
            col("deleted_files_count"),
            col("added_rows_count"),
            col("existing_rows_count"),
            col("deleted_rows_count"),
            [],  # partitions: from the summary columns
            col("key_metadata"),
            col("first_row_id"),
        ]
        self._summary: dict[str, list[Any]] | None = None
        self._bound_arrays: dict[str, pa.Array] = {}  # the bounds' own column, read in bulk
        self._offsets: np.ndarray[Any, Any] | None = None
        self._valid: np.ndarray[Any, Any] | None = None
        if "partitions" in table.column_names:
            lists = _one_array(table.column("partitions"))
            if not isinstance(lists, pa.ListArray | pa.LargeListArray):
                raise TypeError(f"partitions decoded as {lists.type}")
            flat = lists.values
            if flat.null_count:
                raise ValueError("a partition summary is null")
            names = [flat.type.field(i).name for i in range(flat.type.num_fields)]
            children = {name: flat.field(i) for i, name in enumerate(names)}
            if children["contains_null"].null_count:
                raise ValueError("a summary lacks contains_null")  # fastavro's reader would refuse it
            # the list's own offsets (a slice's too) into the whole child array
            self._offsets = numpy_of(lists.offsets).astype(np.int64)
            self._valid = ~null_mask(lists)
            self._summary = {name: child.to_pylist() for name, child in children.items()}
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

        The GIL is let go every ``_BUILD_CHUNK`` rows: a waiting event loop (a plan's first
        request is under way meanwhile) runs within ~0.3 ms, not at the interpreter's 5 ms
        switch interval."""
        for start in range(0, len(rows), _BUILD_CHUNK):
            for i in rows[start : start + _BUILD_CHUNK]:
                self._row(i)
            time.sleep(0)

    def has_deletes(self) -> bool:
        """Whether any row lists a delete manifest, read from the content column."""
        return self._kinds is not None and any(k == ManifestContent.DELETES.value for k in self._kinds)

    def total_length(self, rows: Sequence[int]) -> int:
        """The listed lengths of ``rows``' manifests, from the column."""
        lengths = self._columns[1]
        return sum(lengths[i] for i in rows)

    def spec_ids(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        return np.asarray(self._columns[2], dtype=np.int64)

    def partition_bounds(
        self, rows: np.ndarray[Any, Any], position: int, upper: bool, fields: int
    ) -> tuple[list[bool], list[Any]]:
        """For ``rows``: whether each has ``fields`` partition summaries, and the raw lower (or
        ``upper``) bound of summary ``position`` (None where absent or not so shaped), read
        from the columns without building rows."""
        n = len(rows)
        if self._summary is None or self._offsets is None or self._valid is None:
            return [False] * n, [None] * n
        starts = self._offsets[rows]
        counts = self._offsets[rows + 1] - starts
        shaped = self._valid[rows] & (counts == fields)
        child = self._summary.get("upper_bound" if upper else "lower_bound")
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

    def _row(self, i: int) -> ManifestFile:
        found = self._built[i]
        if found is not None:
            return found
        c = self._columns
        kind = ManifestContent.DATA if self._kinds is None else _CONTENT[self._kinds[i]]
        built = self._built[i] = _new_manifest_file(
            c[0][i], c[1][i], c[2][i], kind, c[4][i], c[5][i], c[6][i], c[7][i], c[8][i], c[9][i],
            c[10][i], c[11][i], c[12][i], self._partitions(i), c[14][i], c[15][i],
        )  # fmt: skip
        return built

    def _partitions(self, i: int) -> tuple[PartitionFieldSummary, ...] | None:
        summary, offsets, valid = self._summary, self._offsets, self._valid
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
    data: bytes, location: str | None = None, *, min_rows: int = COLUMNAR_LIST_MIN_ROWS
) -> Sequence[ManifestFile]:
    """:func:`decode_manifest_list`, its columnar rows built as they are read."""
    rows = _columnar_rows(data, min_rows)
    return rows if rows is not None else read_manifest_list(data, location)


def read_manifest_list_columnar(
    data: bytes, *, min_rows: int = COLUMNAR_LIST_MIN_ROWS
) -> list[ManifestFile] | None:
    """The list's rows as :func:`read_manifest_list` builds them (v1 lists get content DATA
    and sequence numbers 0), or None: use that reader instead."""
    rows = _columnar_rows(data, min_rows)
    return None if rows is None else list(rows)


def _columnar_rows(data: bytes, min_rows: int) -> ManifestRows | None:
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
