"""Encode manifests and manifest lists to Avro bytes.

Writers leave sequence numbers of new entries and manifests null, so a manifest is written
once and reused across commit retries: only the manifest list (which assigns the sequence
number) is rewritten per attempt.
"""

from __future__ import annotations

import io
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal

import fastavro

from aioiceberg.errors import UnsupportedFormatVersionError, ValidationError
from aioiceberg.spec.manifest.avro_schemas import (
    DEFAULT_BLOCK_SIZE,
    SUPPORTED_FORMAT_VERSIONS,
    manifest_entry_schema,
    manifest_list_schema,
)
from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import partition_fields_to_json, schema_to_json
from aioiceberg.spec.types import DoubleType, FloatType, IcebergType, PrimitiveType, UUIDType
from aioiceberg.spec.values import to_bytes

__all__ = ["Codec", "assign_first_row_ids", "partition_summaries", "write_manifest", "write_manifest_list"]

Codec = Literal["deflate", "null"]


def _check(format_version: int, codec: str) -> None:
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(f"cannot write format version {format_version}")
    if codec not in ("deflate", "null"):
        raise ValidationError(f"unsupported Avro codec {codec!r}; use 'deflate' or 'null'")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _encode(
    schema: dict[str, Any], records: list[dict[str, Any]], metadata: dict[str, str], codec: str
) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        fastavro.parse_schema(schema),
        records,
        codec=codec,
        metadata=metadata,
        validator=False,
    )
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Partition summaries


class _FieldStats:
    __slots__ = ("contains_nan", "contains_null", "field_type", "float_like", "lower", "upper")

    def __init__(self, field_type: IcebergType) -> None:
        self.field_type = field_type
        self.float_like = isinstance(field_type, FloatType | DoubleType)
        self.contains_null = False
        self.contains_nan = False
        self.lower: Any = None
        self.upper: Any = None

    def update(self, value: Any) -> None:
        if value is None:
            self.contains_null = True
            return
        if self.float_like:
            if math.isnan(value):
                self.contains_nan = True
                return
            # -0.0 sorts before +0.0 (IEEE 754 totalOrder), which plain < does not see.
            key = (value, math.copysign(1.0, value))
            if self.lower is None or key < (self.lower, math.copysign(1.0, self.lower)):
                self.lower = value
            if self.upper is None or key > (self.upper, math.copysign(1.0, self.upper)):
                self.upper = value
            return
        if self.lower is None or value < self.lower:
            self.lower = value
        if self.upper is None or value > self.upper:
            self.upper = value

    def summary(self) -> PartitionFieldSummary:
        t = self.field_type
        if not isinstance(t, PrimitiveType):
            raise ValidationError(f"partition field type must be primitive, got {t}")
        return PartitionFieldSummary(
            contains_null=self.contains_null,
            contains_nan=self.contains_nan,
            lower_bound=None if self.lower is None else to_bytes(self.lower, t),
            upper_bound=None if self.upper is None else to_bytes(self.upper, t),
        )


def partition_summaries(
    partitions: Iterable[Sequence[Any]], spec: PartitionSpec, schema: Schema
) -> tuple[PartitionFieldSummary, ...]:
    """Per partition field: null/NaN presence and the Appendix D bounds of the other values."""
    types = [f.field_type for f in spec.partition_type(schema).fields]
    stats = [_FieldStats(t) for t in types]
    for values in partitions:
        if len(values) != len(stats):
            raise ValidationError(
                f"partition tuple {values!r} has {len(values)} values, spec has {len(stats)}"
            )
        for s, v in zip(stats, values, strict=True):
            s.update(v)
    return tuple(s.summary() for s in stats)


# ---------------------------------------------------------------------------------------------
# Manifests


def _int_map(m: dict[int, Any] | None) -> list[dict[str, Any]] | None:
    return None if m is None else [{"key": k, "value": v} for k, v in m.items()]


def _data_file_record(
    f: DataFile, format_version: int, names: list[str], uuid_positions: tuple[int, ...]
) -> dict[str, Any]:
    if len(f.partition) != len(names):
        raise ValidationError(
            f"{f.file_path}: partition tuple has {len(f.partition)} values, spec has {len(names)} fields"
        )
    values = list(f.partition)
    for i in uuid_positions:
        if isinstance(values[i], uuid.UUID):
            values[i] = values[i].bytes
    rec: dict[str, Any] = {
        "file_path": f.file_path,
        "file_format": f.file_format.value,
        "partition": dict(zip(names, values, strict=True)),
        "record_count": f.record_count,
        "file_size_in_bytes": f.file_size_in_bytes,
        "column_sizes": _int_map(f.column_sizes),
        "value_counts": _int_map(f.value_counts),
        "null_value_counts": _int_map(f.null_value_counts),
        "nan_value_counts": _int_map(f.nan_value_counts),
        "lower_bounds": _int_map(f.lower_bounds),
        "upper_bounds": _int_map(f.upper_bounds),
        "key_metadata": f.key_metadata,
        "split_offsets": list(f.split_offsets) if f.split_offsets is not None else None,
        "sort_order_id": f.sort_order_id,
    }
    if format_version == 1:
        if f.content != DataFileContent.DATA:
            raise ValidationError(f"{f.file_path}: v1 manifests hold data files only, got {f.content.name}")
        rec["block_size_in_bytes"] = DEFAULT_BLOCK_SIZE
        return rec
    rec["content"] = int(f.content)
    rec["equality_ids"] = list(f.equality_ids) if f.equality_ids is not None else None
    if format_version >= 3:
        rec["first_row_id"] = f.first_row_id
        rec["referenced_data_file"] = f.referenced_data_file
        rec["content_offset"] = f.content_offset
        rec["content_size_in_bytes"] = f.content_size_in_bytes
    return rec


def write_manifest(
    entries: Iterable[ManifestEntry],
    spec: PartitionSpec,
    schema: Schema,
    format_version: int,
    snapshot_id: int,
    content: ManifestContent = ManifestContent.DATA,
    codec: Codec = "deflate",
    *,
    manifest_path: str,
) -> tuple[bytes, ManifestFile]:
    """Encode ``entries`` as one manifest and describe it as a manifest-list row.

    As Java's writer does: ADDED and DELETED entries are stamped with ``snapshot_id``;
    ADDED entries keep a null file sequence number (and a null data sequence number unless
    one was given) so they inherit the commit's; EXISTING entries keep theirs and, from v2
    on, must have them. The returned ``ManifestFile`` has ``sequence_number`` ``None`` (the
    manifest-list writer assigns it) and ``manifest_length`` equal to ``len(bytes)``.
    """
    _check(format_version, codec)
    if format_version == 1 and content != ManifestContent.DATA:
        raise ValidationError("v1 tables have no delete manifests")
    partition_type = spec.partition_type(schema)
    names = [f.name for f in partition_type.fields]
    uuid_positions = tuple(
        i for i, f in enumerate(partition_type.fields) if isinstance(f.field_type, UUIDType)
    )
    expect_deletes = content == ManifestContent.DELETES

    counts = {s: [0, 0] for s in ManifestEntryStatus}  # files, rows
    min_seq: int | None = None
    partitions: list[tuple[Any, ...]] = []
    records: list[dict[str, Any]] = []
    for e in entries:
        f = e.data_file
        if (f.content != DataFileContent.DATA) != expect_deletes:
            raise ValidationError(f"{f.file_path}: {f.content.name} file in a {content.name} manifest")
        status = ManifestEntryStatus(e.status)
        if status is ManifestEntryStatus.ADDED:
            entry_snapshot: int | None = snapshot_id
            seq, file_seq = e.sequence_number, None
        elif status is ManifestEntryStatus.DELETED:
            entry_snapshot, seq, file_seq = snapshot_id, e.sequence_number, e.file_sequence_number
        else:
            entry_snapshot, seq, file_seq = e.snapshot_id, e.sequence_number, e.file_sequence_number
            if entry_snapshot is None:
                raise ValidationError(f"{f.file_path}: EXISTING entry needs its snapshot id")
            if format_version >= 2 and (seq is None or file_seq is None):
                raise ValidationError(f"{f.file_path}: EXISTING entry needs its sequence numbers")
        if status is not ManifestEntryStatus.DELETED and seq is not None:
            min_seq = seq if min_seq is None else min(min_seq, seq)
        counts[status][0] += 1
        counts[status][1] += f.record_count
        partitions.append(f.partition)
        rec: dict[str, Any] = {
            "status": int(status),
            "snapshot_id": entry_snapshot,
            "data_file": _data_file_record(f, format_version, names, uuid_positions),
        }
        if format_version >= 2:
            rec["sequence_number"] = seq
            rec["file_sequence_number"] = file_seq
        records.append(rec)

    metadata = {
        "schema": _dumps(schema_to_json(schema)),
        "schema-id": str(schema.schema_id),
        "partition-spec": _dumps(partition_fields_to_json(spec, format_version)),
        "partition-spec-id": str(spec.spec_id),
        "format-version": str(format_version),
    }
    if format_version >= 2:
        metadata["content"] = "data" if content == ManifestContent.DATA else "deletes"
    data = _encode(manifest_entry_schema(format_version, partition_type), records, metadata, codec)

    added, existing, deleted = (
        counts[ManifestEntryStatus.ADDED],
        counts[ManifestEntryStatus.EXISTING],
        counts[ManifestEntryStatus.DELETED],
    )
    manifest = ManifestFile(
        manifest_path=manifest_path,
        manifest_length=len(data),
        partition_spec_id=spec.spec_id,
        content=content,
        sequence_number=None,
        min_sequence_number=min_seq,
        added_snapshot_id=snapshot_id,
        added_files_count=added[0],
        existing_files_count=existing[0],
        deleted_files_count=deleted[0],
        added_rows_count=added[1],
        existing_rows_count=existing[1],
        deleted_rows_count=deleted[1],
        partitions=partition_summaries(partitions, spec, schema),
    )
    return data, manifest


# ---------------------------------------------------------------------------------------------
# Manifest lists


def assign_first_row_ids(
    manifests: Sequence[ManifestFile], first_row_id: int
) -> tuple[list[ManifestFile], int]:
    """v3 row lineage: give each data manifest without one a ``first_row_id`` range.

    A manifest's range covers its ADDED and EXISTING rows. Returns the manifests and the next
    unassigned row id (the table's new ``next-row-id``).
    """
    out: list[ManifestFile] = []
    next_id = first_row_id
    for m in manifests:
        if m.content == ManifestContent.DATA and m.first_row_id is None:
            if m.added_rows_count is None or m.existing_rows_count is None:
                raise ValidationError(f"{m.manifest_path}: row counts are needed to assign row ids")
            out.append(replace(m, first_row_id=next_id))
            next_id += m.added_rows_count + m.existing_rows_count
        else:
            out.append(m)
    return out, next_id


def _assign_sequence_numbers(m: ManifestFile, snapshot_id: int, sequence_number: int) -> ManifestFile:
    seq, min_seq = m.sequence_number, m.min_sequence_number
    if seq is not None and min_seq is not None:
        return m
    if m.added_snapshot_id != snapshot_id:
        raise ValidationError(
            f"{m.manifest_path}: unassigned sequence number on a manifest from snapshot "
            f"{m.added_snapshot_id}, not the committing snapshot {snapshot_id}"
        )
    return replace(
        m,
        sequence_number=sequence_number if seq is None else seq,
        # No live entry had a sequence number: they all inherit this commit's.
        min_sequence_number=sequence_number if min_seq is None else min_seq,
    )


def _manifest_file_record(m: ManifestFile, format_version: int) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None
        if m.partitions is None
        else [
            {
                "contains_null": s.contains_null,
                "contains_nan": s.contains_nan,
                "lower_bound": s.lower_bound,
                "upper_bound": s.upper_bound,
            }
            for s in m.partitions
        ],
        "key_metadata": m.key_metadata,
    }
    if format_version >= 2:
        for name in (
            "added_files_count",
            "existing_files_count",
            "deleted_files_count",
            "added_rows_count",
            "existing_rows_count",
            "deleted_rows_count",
        ):
            if rec[name] is None:
                raise ValidationError(f"{m.manifest_path}: {name} is required from format version 2 on")
        rec["content"] = int(m.content)
        rec["sequence_number"] = m.sequence_number
        rec["min_sequence_number"] = m.min_sequence_number
    if format_version >= 3:
        rec["first_row_id"] = m.first_row_id
    return rec


def write_manifest_list(
    manifests: Iterable[ManifestFile],
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int | None,
    first_row_id: int | None = None,
    codec: Codec = "deflate",
) -> bytes:
    """Encode a snapshot's manifest list.

    Manifests written by this commit (null sequence numbers, ``added_snapshot_id ==
    snapshot_id``) get ``sequence_number``; in v3, data manifests without a first row id get
    one from ``first_row_id`` on (see ``assign_first_row_ids`` for the next row id).
    """
    _check(format_version, codec)
    items = list(manifests)
    metadata = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id),
        "format-version": str(format_version),
    }
    if format_version == 1:
        for m in items:
            if m.content != ManifestContent.DATA:
                raise ValidationError(f"{m.manifest_path}: v1 manifest lists hold data manifests only")
    else:
        if sequence_number is None:
            raise ValidationError(f"a v{format_version} manifest list needs the snapshot's sequence number")
        metadata["sequence-number"] = str(sequence_number)
        items = [_assign_sequence_numbers(m, snapshot_id, sequence_number) for m in items]
    if format_version >= 3:
        if first_row_id is None:
            raise ValidationError("a v3 manifest list needs the table's next row id as first_row_id")
        metadata["first-row-id"] = str(first_row_id)
        items, _ = assign_first_row_ids(items, first_row_id)
    records = [_manifest_file_record(m, format_version) for m in items]
    return _encode(manifest_list_schema(format_version), records, metadata, codec)
