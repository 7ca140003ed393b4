"""A columnar manifest reader: Avro bytes -> polars -> Arrow columns, entries built on demand.

``polars.read_avro`` decodes a whole manifest into columns several times faster than
fastavro builds dicts, and releases the GIL while it does. Callers prune on the columns
(partition tuples, bound columns) and build :class:`ManifestEntry` objects only for the
rows they keep; the result is identical to :func:`read_manifest` for those rows.

The columnar path is a fast path, never the authority: :func:`open_columnar` returns
None when it cannot promise identical results (polars missing, v1 manifests, partition
types outside a checked list, any decoding error, values outside their enums), and the
caller then decodes with the fastavro reader, which also decides what is corrupt.
Header checks (magic, length against the manifest list, format version) are the
fastavro reader's and raise the same errors.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile
from aioiceberg.spec.manifest.metadata import ManifestMetadata
from aioiceberg.spec.manifest.reader import (
    _fields,
    _named_types,
    _non_null,
    _open_manifest,
)

__all__ = ["BoundColumn", "ColumnarManifest", "columnar_available", "open_columnar"]

_pl: Any
try:  # polars is the fast path; without it every manifest takes the fastavro path
    import polars as _pl
except ImportError:  # pragma: no cover - polars is a dependency
    _pl = None

_STATUS = {s.value: s for s in ManifestEntryStatus}
_CONTENT = {c.value: c for c in DataFileContent}
_FORMATS: dict[str, FileFormat] = {}
for _f in FileFormat:
    _FORMATS[_f.value] = _f
    _FORMATS[_f.value.lower()] = _f

# Partition field Avro types whose polars decoding is checked against fastavro's (after the
# conversion below); anything else (decimal, uuid, fixed, time, millis, nanos) falls back.
_PLAIN_TYPES = frozenset({"boolean", "int", "long", "float", "double", "string", "bytes"})
_LOGICAL_TYPES: dict[tuple[Any, Any], pa.DataType] = {
    ("int", "date"): pa.int32(),
    ("long", "timestamp-micros"): pa.int64(),
    ("long", "local-timestamp-micros"): pa.int64(),
}
_STAT_FIELDS = (
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)


def columnar_available() -> bool:
    """True when polars is importable (the columnar path can be tried at all)."""
    return _pl is not None


def _partition_casts(partition_schema: Any, named: dict[str, Any]) -> list[pa.DataType | None] | None:
    """Per partition field, the Arrow type to cast polars' column to; None: unsupported."""
    casts: list[pa.DataType | None] = []
    for f in _fields(partition_schema).values():
        t = _non_null(f.get("type"), named)
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


def _to_arrow(data: bytes) -> pa.Table:
    assert _pl is not None
    table: pa.Table = _pl.read_avro(io.BytesIO(data)).to_arrow()
    return table


@dataclass(frozen=True, slots=True)
class BoundColumn:
    """One field's lower or upper bound per row, for vectorised pruning.

    ``values`` holds the little-endian integer where ``state`` is 1; ``state`` is 0 where
    the row has no bound for the field and 2 where it has one that is not of the expected
    width (or is repeated), which a pruner must treat as "cannot tell".
    """

    values: np.ndarray[Any, np.dtype[np.int64]]
    state: np.ndarray[Any, np.dtype[np.int8]]


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
    ) -> None:
        self.meta = meta
        self.columns_needed = columns_needed
        self.entries_read = table.num_rows
        self._top: dict[str, pa.Array] = {
            name: table.column(name).combine_chunks() for name in table.column_names
        }
        data_file = self._top["data_file"]
        assert data_file is not None
        self._df: dict[str, pa.Array] = {
            f.name: arr for f, arr in zip(data_file.type, data_file.flatten(), strict=True)
        }
        status = self._top["status"]
        assert status is not None
        status_np = status.to_numpy(zero_copy_only=False)
        if not np.isin(status_np, (0, 1, 2)).all():
            raise ValueError("status outside its enum")
        content_arr = self._df.get("content")
        content_np = (
            np.zeros(len(status_np), dtype=np.int32)
            if content_arr is None
            else content_arr.fill_null(0).to_numpy(zero_copy_only=False)
        )
        if not np.isin(content_np, (0, 1, 2)).all():
            raise ValueError("content outside its enum")
        formats = self._df["file_format"]
        for text in pc.unique(formats).to_pylist():
            if text is None or (text not in _FORMATS and text.upper() not in _FORMATS):
                raise ValueError(f"unknown file format {text!r}")
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
        self._partition = [
            c if cast is None else c.cast(cast) for c, cast in zip(children, partition_casts, strict=True)
        ]
        self._manifest = manifest

    # -- inheritance ---------------------------------------------------------------------

    def _assign_row_ids(
        self, manifest: ManifestFile | None, status: np.ndarray[Any, Any], content: np.ndarray[Any, Any]
    ) -> pa.Array | None:
        """v3 first row ids as the fastavro reader assigns them (over every live data row)."""
        given = self._df.get("first_row_id")
        if (
            manifest is None
            or manifest.first_row_id is None
            or self.meta.format_version < 3
            or self.meta.content != ManifestContent.DATA
        ):
            return given
        counts = self._record_count.to_numpy(zero_copy_only=False).astype(np.int64)
        missing = (
            np.ones(len(status), dtype=bool)
            if given is None
            else np.asarray(given.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        )
        eligible = missing & (status != ManifestEntryStatus.DELETED.value) & (content == 0)
        step = np.where(eligible, counts, 0)
        assigned = manifest.first_row_id + np.cumsum(step) - step
        out: list[int | None] = [None] * len(status) if given is None else given.to_pylist()
        for i in np.flatnonzero(eligible).tolist():
            out[i] = int(assigned[i])
        return pa.array(out, pa.int64())

    # -- columns for pruning ---------------------------------------------------------------

    def record_counts(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
        counts: np.ndarray[Any, np.dtype[np.int64]] = (
            self._record_count.take(pa.array(rows)).to_numpy(zero_copy_only=False).astype(np.int64)
        )
        return counts

    def partitions(self, rows: np.ndarray[Any, Any]) -> list[tuple[Any, ...]]:
        """The partition tuples of ``rows`` in the project's value convention."""
        if not self._partition:
            return [()] * len(rows)
        idx = pa.array(rows)
        cols = [c.take(idx).to_pylist() for c in self._partition]
        return list(zip(*cols, strict=True))

    def _items(
        self, name: str, keys_wanted: frozenset[int] | None
    ) -> tuple[Any, list[Any], list[Any]] | None:
        """(row index per item as numpy, keys, values) of a whole map column, for wanted keys."""
        col = self._df.get(name)
        if col is None or len(col) == 0:
            return None
        items = pc.list_flatten(col)
        if len(items) == 0:
            return None
        parents = pc.list_parent_indices(col)
        keys, values = items.flatten()
        if keys_wanted is not None:
            hit = pc.fill_null(pc.is_in(keys, pa.array(sorted(keys_wanted), keys.type)), False)
            parents, keys, values = parents.filter(hit), keys.filter(hit), values.filter(hit)
        return parents.to_numpy(zero_copy_only=False), keys.to_pylist(), values.to_pylist()

    def bound_column(self, field_id: int, upper: bool, width: int, rows: np.ndarray[Any, Any]) -> BoundColumn:
        """``field_id``'s lower (or upper) bound of ``rows`` as integers of ``width`` bytes."""
        n = len(rows)
        values = np.zeros(n, dtype=np.int64)
        state = np.zeros(n, dtype=np.int8)
        found = self._items("upper_bounds" if upper else "lower_bounds", frozenset({field_id}))
        if found is None or n == 0:
            return BoundColumn(values, state)
        pos = self._positions(rows)
        parents, _, raw = found
        at = pos[parents]
        keep = at >= 0
        at = at[keep]
        raw = [b for b, k in zip(raw, keep.tolist(), strict=True) if k]
        if len(at) == 0:
            return BoundColumn(values, state)
        state[at] = 2
        ok = np.fromiter((b is not None and len(b) == width for b in raw), dtype=bool, count=len(raw))
        if ok.any():
            good = [b for b, k in zip(raw, ok.tolist(), strict=True) if k]
            decoded = np.frombuffer(b"".join(good), dtype="<i8" if width == 8 else "<i4").astype(np.int64)
            values[at[ok]] = decoded
            state[at[ok]] = 1
        uniq, counts = np.unique(at, return_counts=True)
        if (counts > 1).any():  # a repeated key: leave it to the exact path
            state[uniq[counts > 1]] = 2
        return BoundColumn(values, state)

    def _positions(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
        pos = np.full(self.entries_read, -1, dtype=np.int64)
        pos[rows] = np.arange(len(rows), dtype=np.int64)
        return pos

    # -- entries -----------------------------------------------------------------------------

    def entries(self, rows: Sequence[int] | np.ndarray[Any, Any]) -> list[ManifestEntry]:
        """``ManifestEntry`` objects for ``rows``, exactly as the fastavro reader builds them."""
        n = len(rows)
        if n == 0:
            return []
        idx = pa.array(np.asarray(rows, dtype=np.int64))
        meta, manifest = self.meta, self._manifest
        v1 = meta.format_version == 1
        if manifest is not None:
            inherit_snapshot: int | None = manifest.added_snapshot_id
            inherit_seq: int | None = manifest.sequence_number
            spec_id = manifest.partition_spec_id
        else:
            inherit_snapshot = None
            inherit_seq = 0 if v1 else None
            spec_id = meta.partition_spec_id if meta.partition_spec_id is not None else 0
        if v1 and inherit_seq is None:
            inherit_seq = 0
        inherit_all = inherit_seq == 0

        def top(name: str) -> list[Any]:
            arr = self._top.get(name)
            return [None] * n if arr is None else arr.take(idx).to_pylist()

        def df(name: str) -> list[Any]:
            arr = self._df.get(name)
            return [None] * n if arr is None else arr.take(idx).to_pylist()

        statuses = top("status")
        snapshots = top("snapshot_id")
        seqs = top("sequence_number")
        file_seqs = top("file_sequence_number")
        contents = df("content")
        paths = df("file_path")
        formats = df("file_format")
        partitions = self.partitions(np.asarray(rows, dtype=np.int64))
        record_counts = df("record_count")
        sizes = df("file_size_in_bytes")
        rows_np = np.asarray(rows, dtype=np.int64)
        pos = self._positions(rows_np)
        stats = [self._stats(name, rows_np, pos) for name in _STAT_FIELDS]
        key_metadata = df("key_metadata")
        split_offsets = df("split_offsets")
        equality_ids = df("equality_ids")
        sort_order_ids = df("sort_order_id")
        first_row_ids = (
            [None] * n if self._first_row_ids is None else self._first_row_ids.take(idx).to_pylist()
        )
        referenced = df("referenced_data_file")
        content_offsets = df("content_offset")
        content_sizes = df("content_size_in_bytes")

        ADDED = ManifestEntryStatus.ADDED
        out: list[ManifestEntry] = []
        for i in range(n):
            status = _STATUS[statuses[i]]
            snapshot_id = snapshots[i]
            if snapshot_id is None:
                snapshot_id = inherit_snapshot
            seq = seqs[i]
            if seq is None and (status is ADDED or inherit_all):
                seq = inherit_seq
            file_seq = file_seqs[i]
            if file_seq is None and (status is ADDED or inherit_all):
                file_seq = inherit_seq
            fmt = formats[i]
            so = split_offsets[i]
            eq = equality_ids[i]
            c = contents[i]
            data_file = DataFile(
                _CONTENT[0 if c is None else c],
                paths[i],
                _FORMATS.get(fmt) or FileFormat.parse(fmt),
                partitions[i],
                record_counts[i],
                sizes[i],
                stats[0][i],
                stats[1][i],
                stats[2][i],
                stats[3][i],
                stats[4][i],
                stats[5][i],
                key_metadata[i],
                tuple(so) if so is not None else None,
                tuple(eq) if eq is not None else None,
                sort_order_ids[i],
                first_row_ids[i],
                referenced[i],
                content_offsets[i],
                content_sizes[i],
                spec_id,
            )
            out.append(ManifestEntry(status, snapshot_id, seq, file_seq, data_file))
        return out

    def _stats(
        self, name: str, rows: np.ndarray[Any, Any], pos: np.ndarray[Any, Any]
    ) -> list[dict[int, Any] | None]:
        n = len(rows)
        col = self._df.get(name)
        if col is None:
            return [None] * n
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)[rows]
        out: list[dict[int, Any] | None] = [{} if ok else None for ok in valid.tolist()]
        needed = self.columns_needed
        if needed is not None and not needed:
            return out
        found = self._items(name, needed)
        if found is None:
            return out
        parents, keys, values = found
        for p, k, v in zip(pos[parents].tolist(), keys, values, strict=True):
            if p >= 0:
                d = out[p]
                assert d is not None
                d[k] = v
        return out


def open_columnar(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
) -> ColumnarManifest | None:
    """Decode a manifest into columns, or None when the fastavro reader must decide.

    Header problems raise exactly as :func:`read_manifest` does (it is the same check).
    """
    location = location or (manifest.manifest_path if manifest is not None else None)
    reader, meta = _open_manifest(data, manifest, location)
    if _pl is None or meta.format_version == 1:
        return None
    schema = reader.writer_schema
    named = _named_types(schema, {})
    data_file_schema = _non_null(_fields(schema)["data_file"].get("type"), named)
    partition_schema = _non_null(_fields(data_file_schema).get("partition", {}).get("type"), named)
    casts = _partition_casts(partition_schema, named)
    if casts is None:
        return None
    try:
        table = _to_arrow(data)
        needed = frozenset(columns_needed) if columns_needed is not None else None
        return ColumnarManifest(meta, table, manifest, casts, needed, discard_deleted)
    except Exception:  # the fastavro reader decides what this file is
        return None


def read_manifest_entries_columnar(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
) -> list[ManifestEntry] | None:
    """All (live, with ``discard_deleted``) entries via the columnar path; None: use fastavro."""
    cm = open_columnar(
        data, manifest, location, columns_needed=columns_needed, discard_deleted=discard_deleted
    )
    if cm is None:
        return None
    try:
        return cm.entries(cm.rows)
    except Exception:
        return None
