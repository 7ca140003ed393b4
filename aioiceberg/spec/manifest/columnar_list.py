"""A columnar manifest-list reader: the fast path for long lists, never the authority.

A manifest list of thousands of rows costs fastavro ~7 us a row to decode into dicts and
about as much again to turn into :class:`ManifestFile` rows; it sits in front of every
plan of the snapshot. ``polars.read_avro`` decodes the same bytes into columns several
times faster (and releases the GIL), and rows are then built from whole columns.

:func:`read_manifest_list_columnar` returns None whenever it cannot promise the rows
:func:`~aioiceberg.spec.manifest.reader.read_manifest_list` would build: a field or type
outside the spec's manifest-list schema, a damaged file, a value outside its enum. The
caller then reads the list with fastavro, which also says what is wrong.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa

from aioiceberg.spec.manifest.avro_schemas import SUPPORTED_FORMAT_VERSIONS
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.columnar import _one_array, _polars, avro_layout
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.manifest.reader import read_manifest_list
from aioiceberg.spec.manifest.writer_schema import record_fields

__all__ = ["COLUMNAR_LIST_MIN_ROWS", "decode_manifest_list", "read_manifest_list_columnar"]

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


def _summaries(table: pa.Table) -> list[tuple[PartitionFieldSummary, ...] | None] | None:
    """Each row's partition summaries, built from the list column's flat children."""
    if "partitions" not in table.column_names:
        return None
    lists = _one_array(table.column("partitions"))
    if not isinstance(lists, pa.ListArray | pa.LargeListArray):
        raise TypeError(f"partitions decoded as {lists.type}")
    flat = lists.values
    n = len(flat)
    children = {flat.type.field(i).name: flat.field(i).to_pylist() for i in range(flat.type.num_fields)}
    if flat.null_count:
        raise ValueError("a partition summary is null")
    none = [None] * n
    built = [
        _new_summary(cn, cnan, lo, hi)
        for cn, cnan, lo, hi in zip(
            children["contains_null"],
            children.get("contains_nan", none),
            children.get("lower_bound", none),
            children.get("upper_bound", none),
            strict=True,
        )
    ]
    if any(v is None for v in children["contains_null"]):
        raise ValueError("a summary lacks contains_null")  # fastavro's reader would refuse it
    offsets = lists.offsets.to_pylist()
    valid = lists.is_valid().to_pylist()
    return [tuple(built[offsets[i] : offsets[i + 1]]) if valid[i] else None for i in range(len(lists))]


def decode_manifest_list(data: bytes, location: str | None = None) -> list[ManifestFile]:
    """A manifest list's rows: columnar when it is long and plain, else fastavro's reader."""
    rows = read_manifest_list_columnar(data)
    return rows if rows is not None else read_manifest_list(data, location)


def read_manifest_list_columnar(
    data: bytes, *, min_rows: int = COLUMNAR_LIST_MIN_ROWS
) -> list[ManifestFile] | None:
    """The list's rows as :func:`read_manifest_list` builds them (v1 lists get content DATA
    and sequence numbers 0), or None: use that reader instead."""
    layout = avro_layout(data)
    if layout is None or layout.rows < min_rows or _polars() is None:
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
        table: pa.Table = _polars().read_avro(io.BytesIO(data)).to_arrow()
        if table.num_rows != layout.rows:
            return None
        return _rows(table, version)
    except Exception:  # the fastavro reader decides what this file is
        return None


def _rows(table: pa.Table, version: int) -> list[ManifestFile]:
    n = table.num_rows
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

    paths, lengths, specs = col("manifest_path"), col("manifest_length"), col("partition_spec_id")
    snapshot_ids = col("added_snapshot_id")
    for required in (paths, lengths, specs, snapshot_ids):
        if any(v is None for v in required):
            raise ValueError("a required manifest-list field is null")
    contents = _column(table, "content")
    kinds = [ManifestContent.DATA] * n if contents is None else [_CONTENT[c] for c in contents]
    summaries = _summaries(table) or none
    return [
        _new_manifest_file(*row)
        for row in zip(
            paths,
            lengths,
            specs,
            kinds,
            seqs("sequence_number"),
            seqs("min_sequence_number"),
            snapshot_ids,
            col("added_files_count"),
            col("existing_files_count"),
            col("deleted_files_count"),
            col("added_rows_count"),
            col("existing_rows_count"),
            col("deleted_rows_count"),
            summaries,
            col("key_metadata"),
            col("first_row_id"),
            strict=True,
        )
    ]
