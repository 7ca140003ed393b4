"""Decode manifests and manifest lists from bytes into domain objects.

fastavro turns the bytes into dicts; everything else here is the lean step from those
dicts to ``ManifestEntry`` / ``ManifestFile``, with the spec's inheritance rules applied.
Any damage (bad magic, truncation, flipped bits, values outside their enums) surfaces as
``CorruptFileError`` naming the file; unknown format versions as
``UnsupportedFormatVersionError``.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import fastavro

from aioiceberg.errors import (
    CorruptFileError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatVersionError,
)
from aioiceberg.spec.manifest.avro_schemas import SUPPORTED_FORMAT_VERSIONS
from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.manifest.decoded_manifest import Manifest, ManifestMetadata
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.manifest.writer_schema import partition_field_types, record_fields

__all__ = [
    "inline_manifest_file",
    "iter_manifest_entries",
    "manifest_metadata",
    "open_manifest",
    "parsed_writer_schema",
    "read_manifest",
    "read_manifest_list",
    "read_manifest_metadata",
]

AVRO_MAGIC = b"Obj\x01"

_STATUS = {s.value: s for s in ManifestEntryStatus}
_DATA_CONTENT = {c.value: c for c in DataFileContent}
_MANIFEST_CONTENT = {c.value: c for c in ManifestContent}
_SUPPORTED_TEXT = ", ".join(map(str, SUPPORTED_FORMAT_VERSIONS))
_CONTENT_NAMES = {"data": ManifestContent.DATA, "deletes": ManifestContent.DELETES}

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_ONE_MICRO = dt.timedelta(microseconds=1)


# ---------------------------------------------------------------------------------------------
# Opening and error mapping


def _open(data: bytes | bytearray | memoryview, location: str | None, what: str) -> Any:
    """A fastavro reader over ``data``; header damage becomes CorruptFileError."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    if bytes(data[:4]) != AVRO_MAGIC:
        raise CorruptFileError(
            f"{what} is not an Avro file (bad magic {bytes(data[:4])!r})", location=location
        )
    try:
        return fastavro.reader(io.BytesIO(data))
    except Exception as e:  # fastavro raises many unrelated types for a damaged header
        raise CorruptFileError(
            f"{what} has an unreadable Avro header: {_describe(e)}", location=location
        ) from e


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _records(reader: Any, location: str | None, what: str) -> Iterator[dict[str, Any]]:
    """Rows of ``reader``; a decode failure in any block becomes CorruptFileError."""
    it = iter(reader)
    while True:
        try:
            rec = next(it)
        except StopIteration:
            return
        except Exception as e:
            raise CorruptFileError(f"{what} is damaged: {_describe(e)}", location=location) from e
        yield rec


def _format_version(meta: dict[str, str], guess: int, location: str | None, what: str) -> int:
    text = meta.get("format-version")
    if text is None:
        return guess
    try:
        version = int(text)
    except ValueError:
        raise InvalidMetadataError(
            f"{what} has a non-integer format-version {text!r}", location=location
        ) from None
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{what} has format-version {version}; supported: {_SUPPORTED_TEXT}",
            location=location,
        )
    return version


def _int_or_none(meta: dict[str, str], key: str, location: str | None) -> int | None:
    text = meta.get(key)
    if text is None or text == "null":
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidMetadataError(
            f"manifest metadata {key!r} is not an integer: {text!r}", location=location
        ) from None


# ---------------------------------------------------------------------------------------------
# Partition values: Avro logical values -> the project's value convention


def _days(v: Any) -> Any:
    return v.toordinal() - _EPOCH_ORDINAL if isinstance(v, dt.date) else v


def _micros_of_day(v: Any) -> Any:
    if isinstance(v, dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return v


def _micros(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return (v - (_EPOCH_NAIVE if v.tzinfo is None else _EPOCH_UTC)) // _ONE_MICRO
    return v


def _uuid(v: Any) -> Any:
    return uuid.UUID(bytes=bytes(v)) if isinstance(v, bytes | bytearray) else v


def _millis_to_micros(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def f(v: Any) -> Any:
        out = convert(v)
        # fastavro already widened datetime/time values; only raw ints are still in millis.
        return out * 1000 if out is v and isinstance(v, int) else out

    return f


def _partition_converters(field_types: list[Any]) -> list[Callable[[Any], Any] | None] | None:
    """Per partition field, the conversion to apply to fastavro's value (None: keep as is)."""
    converters: list[Callable[[Any], Any] | None] = []
    for t in field_types:
        logical = t.get("logicalType") if isinstance(t, dict) else None
        conv: Callable[[Any], Any] | None = None
        if logical == "date":
            conv = _days
        elif logical == "time-micros":
            conv = _micros_of_day
        elif logical == "time-millis":
            conv = _millis_to_micros(_micros_of_day)
        elif logical in ("timestamp-micros", "local-timestamp-micros"):
            conv = _micros
        elif logical in ("timestamp-millis", "local-timestamp-millis"):
            conv = _millis_to_micros(_micros)
        elif logical == "uuid":
            conv = _uuid
        converters.append(conv)
    return converters if any(c is not None for c in converters) else None


# ---------------------------------------------------------------------------------------------
# Manifests


def _metadata_from(reader: Any, manifest: ManifestFile | None, location: str | None) -> ManifestMetadata:
    return manifest_metadata(reader.metadata, reader.writer_schema, manifest, location)


@functools.lru_cache(maxsize=64)
def parsed_writer_schema(text: str) -> Any:
    """The header's ``avro.schema`` as fastavro's reader parses it; one writer's manifests
    share it, so it is parsed once, not per manifest. Raises on a schema that is not one."""
    return fastavro.parse_schema(json.loads(text), _write_hint=False, _force=True)


def manifest_metadata(
    properties: Mapping[str, str], writer_schema: Any, manifest: ManifestFile | None, location: str | None
) -> ManifestMetadata:
    """The checked manifest metadata of a header's key-value ``properties`` and parsed writer
    schema, from fastavro's reader or the compiled decoder's header: one check for both."""
    meta: dict[str, str] = {k: v for k, v in properties.items() if not k.startswith("avro.")}
    entry_fields = record_fields(writer_schema)
    if "status" not in entry_fields or "data_file" not in entry_fields:
        raise InvalidMetadataError(
            "not a manifest: rows lack 'status' / 'data_file' fields", location=location
        )
    data_fields = record_fields(entry_fields["data_file"].get("type"))
    if "first_row_id" in data_fields:
        guess = 3
    elif "sequence_number" in entry_fields:
        guess = 2
    else:
        guess = 1
    version = _format_version(meta, guess, location, "manifest")
    content_text = meta.get("content")
    if content_text is None:
        content = manifest.content if manifest is not None else ManifestContent.DATA
    else:
        content_or_none = _CONTENT_NAMES.get(content_text)
        if content_or_none is None:
            raise InvalidMetadataError(f"manifest has unknown content {content_text!r}", location=location)
        content = content_or_none
    return ManifestMetadata(
        format_version=version,
        content=content,
        schema_id=_int_or_none(meta, "schema-id", location),
        partition_spec_id=_int_or_none(meta, "partition-spec-id", location),
        schema_json=meta.get("schema"),
        partition_spec_json=meta.get("partition-spec"),
        properties=meta,
        location=location,
    )


def read_manifest_metadata(data: bytes, location: str | None = None) -> ManifestMetadata:
    """Only the manifest's key-value metadata (reads the header, not the entries)."""
    return _metadata_from(_open(data, location, "manifest"), None, location)


def iter_manifest_entries(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
) -> Iterator[ManifestEntry]:
    """Stream a manifest's entries (see ``read_manifest``); the header is checked before the first."""
    reader, meta = open_manifest(data, manifest, location)
    expected = disputed_entry_count(data, manifest)
    return _entries(reader, meta, manifest, location, columns_needed, discard_deleted, expected)


def read_manifest(
    data: bytes,
    manifest: ManifestFile | None = None,
    location: str | None = None,
    *,
    columns_needed: Iterable[int] | None = None,
    discard_deleted: bool = False,
) -> Manifest:
    """Decode a whole manifest.

    ``manifest`` is the manifest-list row that points at this file: it supplies the values
    entries inherit (snapshot id, sequence numbers, v3 first row ids) and the spec id. Its
    ``manifest_length`` is a hint (other writers get it wrong and PyIceberg, DuckDB and Java
    read on): when it disagrees with ``data``, the entry counts the list gives must match,
    so a file cut at a block boundary is still caught. ``columns_needed`` keeps
    only those field ids in the six metric maps, which saves memory and time when planning
    filters on a few columns. ``discard_deleted`` drops DELETED entries before building them.
    """
    location = location or (manifest.manifest_path if manifest is not None else None)
    reader, meta = open_manifest(data, manifest, location)
    expected = disputed_entry_count(data, manifest)
    entries = list(_entries(reader, meta, manifest, location, columns_needed, discard_deleted, expected))
    return Manifest(meta, entries)


def disputed_entry_count(data: bytes, manifest: ManifestFile | None) -> int | None:
    """The entry count to verify ``data`` against: only when the list's ``manifest_length``
    disagrees with the bytes (then the counts decide whether the file is the one listed, or
    truncated) and the list gives all three counts; None: nothing to verify."""
    if manifest is None or manifest.manifest_length == len(data):
        return None
    counts = (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count)
    if any(c is None for c in counts):
        return None
    return sum(c or 0 for c in counts)


def open_manifest(
    data: bytes, manifest: ManifestFile | None, location: str | None
) -> tuple[Any, ManifestMetadata]:
    """A fastavro reader over a manifest and its checked header: the one header check both
    decoders make, so both reject a damaged file with the same error."""
    location = location or (manifest.manifest_path if manifest is not None else None)
    reader = _open(data, location, "manifest")
    return reader, _metadata_from(reader, manifest, location)


def _entries(
    reader: Any,
    meta: ManifestMetadata,
    manifest: ManifestFile | None,
    location: str | None,
    columns_needed: Iterable[int] | None,
    discard_deleted: bool,
    expected: int | None = None,
) -> Iterator[ManifestEntry]:
    location = location or (manifest.manifest_path if manifest is not None else None)
    convert = _entry_converter(reader, meta, manifest, columns_needed, discard_deleted)
    seen = 0
    for rec in _records(reader, location, "manifest"):
        seen += 1
        try:
            entry = convert(rec)
        except IcebergError:
            raise
        except Exception as e:
            raise CorruptFileError(f"manifest has an invalid entry: {_describe(e)}", location=location) from e
        if entry is not None:
            yield entry
    if expected is not None and seen != expected:
        assert manifest is not None
        raise CorruptFileError(
            f"manifest holds {seen} entries but the manifest list counts {expected} "
            f"(and says {manifest.manifest_length} bytes): truncated or not the file listed",
            location=location,
        )


def _entry_converter(
    reader: Any,
    meta: ManifestMetadata,
    manifest: ManifestFile | None,
    columns_needed: Iterable[int] | None,
    discard_deleted: bool,
) -> Callable[[dict[str, Any]], ManifestEntry | None]:
    """Build the per-row conversion once per manifest, with every decision taken up front."""
    converters = _partition_converters(partition_field_types(reader.writer_schema))
    needed = frozenset(columns_needed) if columns_needed is not None else None

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
    # v1 tables and manifests from before sequence numbers: every entry inherits.
    inherit_all = inherit_seq == 0
    next_row_id: int | None = None
    if (
        manifest is not None and manifest.first_row_id is not None and meta.content == ManifestContent.DATA
    ):  # a manifest written before a v3 upgrade gets its range in the v3 list (as Java reads it)
        next_row_id = manifest.first_row_id

    STATUS, DATA_CONTENT, parse_format = _STATUS, _DATA_CONTENT, FileFormat.parse
    ADDED, DELETED, DATA = ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED, DataFileContent.DATA

    def stats(lst: list[dict[str, Any]] | None) -> dict[int, Any] | None:
        if lst is None:
            return None
        if needed is None:
            return {kv["key"]: kv["value"] for kv in lst}
        return {kv["key"]: kv["value"] for kv in lst if kv["key"] in needed}

    def convert(rec: dict[str, Any]) -> ManifestEntry | None:
        nonlocal next_row_id
        status = STATUS[rec["status"]]
        if discard_deleted and status is DELETED:
            return None
        df = rec["data_file"]
        snapshot_id = rec.get("snapshot_id")
        if snapshot_id is None:
            snapshot_id = inherit_snapshot
        seq = rec.get("sequence_number")
        if seq is None and (status is ADDED or inherit_all):
            seq = inherit_seq
        file_seq = rec.get("file_sequence_number")
        if file_seq is None and (status is ADDED or inherit_all):
            file_seq = inherit_seq

        p = df["partition"]
        if converters is None:
            partition = tuple(p.values())
        else:
            partition = tuple(
                v if c is None or v is None else c(v) for c, v in zip(converters, p.values(), strict=True)
            )
        content = DATA_CONTENT[df.get("content", 0)]
        file_format = parse_format(df["file_format"])
        split_offsets = df.get("split_offsets")
        equality_ids = df.get("equality_ids")
        first_row_id = df.get("first_row_id")
        record_count = df["record_count"]
        if next_row_id is not None and first_row_id is None and status is not DELETED and content is DATA:
            first_row_id = next_row_id
            next_row_id += record_count
        data_file = DataFile(
            content,
            df["file_path"],
            file_format,
            partition,
            record_count,
            df["file_size_in_bytes"],
            stats(df.get("column_sizes")),
            stats(df.get("value_counts")),
            stats(df.get("null_value_counts")),
            stats(df.get("nan_value_counts")),
            stats(df.get("lower_bounds")),
            stats(df.get("upper_bounds")),
            df.get("key_metadata"),
            tuple(split_offsets) if split_offsets is not None else None,
            tuple(equality_ids) if equality_ids is not None else None,
            df.get("sort_order_id"),
            first_row_id,
            df.get("referenced_data_file"),
            df.get("content_offset"),
            df.get("content_size_in_bytes"),
            spec_id,
        )
        return ManifestEntry(status, snapshot_id, seq, file_seq, data_file)

    return convert


def inline_manifest_file(data: bytes, location: str, snapshot_id: int) -> ManifestFile:
    """The manifest-list row for a manifest a v1 snapshot names inline (``manifests``, no list).

    Built from the manifest itself, as Java's BaseSnapshot does for such snapshots: its
    length is the object's, its spec id the header's (0 when the header has none, Java's
    default), content DATA and sequence numbers 0 (v1), added by the snapshot that lists
    it. The entries are counted too, so a later manifest list written from this row holds
    true counts rather than unknowns.
    """
    reader, meta = open_manifest(data, None, location)
    files = [0, 0, 0]  # indexed by status: existing, added, deleted
    rows = [0, 0, 0]
    for entry in _entries(reader, meta, None, location, (), False):
        files[entry.status] += 1
        rows[entry.status] += entry.data_file.record_count
    existing, added, deleted = (ManifestEntryStatus(i) for i in range(3))
    return ManifestFile(
        manifest_path=location,
        manifest_length=len(data),
        partition_spec_id=meta.partition_spec_id if meta.partition_spec_id is not None else 0,
        content=meta.content,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=snapshot_id,
        added_files_count=files[added],
        existing_files_count=files[existing],
        deleted_files_count=files[deleted],
        added_rows_count=rows[added],
        existing_rows_count=rows[existing],
        deleted_rows_count=rows[deleted],
    )


# ---------------------------------------------------------------------------------------------
# Manifest lists


def read_manifest_list(data: bytes, location: str | None = None) -> list[ManifestFile]:
    """Decode a manifest list; v1 lists get content DATA and sequence numbers 0, as the spec says."""
    reader = _open(data, location, "manifest list")
    fields = record_fields(reader.writer_schema)
    if "manifest_path" not in fields or "added_snapshot_id" not in fields:
        raise InvalidMetadataError("not a manifest list: rows lack 'manifest_path'", location=location)
    guess = 3 if "first_row_id" in fields else 2 if "sequence_number" in fields else 1
    version = _format_version(reader.metadata, guess, location, "manifest list")
    default_seq = 0 if version == 1 else None
    out: list[ManifestFile] = []
    for rec in _records(reader, location, "manifest list"):
        try:
            out.append(_manifest_file(rec, default_seq))
        except IcebergError:
            raise
        except Exception as e:
            raise CorruptFileError(
                f"manifest list has an invalid row: {_describe(e)}", location=location
            ) from e
    return out


def _manifest_file(rec: dict[str, Any], default_seq: int | None) -> ManifestFile:
    summaries = rec.get("partitions")
    seq = rec.get("sequence_number", default_seq)
    min_seq = rec.get("min_sequence_number", default_seq)
    return ManifestFile(
        manifest_path=rec["manifest_path"],
        manifest_length=rec["manifest_length"],
        partition_spec_id=rec["partition_spec_id"],
        content=_MANIFEST_CONTENT[rec.get("content", 0)],
        sequence_number=0 if seq is None and default_seq == 0 else seq,
        min_sequence_number=0 if min_seq is None and default_seq == 0 else min_seq,
        added_snapshot_id=rec["added_snapshot_id"],
        added_files_count=rec.get("added_files_count"),
        existing_files_count=rec.get("existing_files_count"),
        deleted_files_count=rec.get("deleted_files_count"),
        added_rows_count=rec.get("added_rows_count"),
        existing_rows_count=rec.get("existing_rows_count"),
        deleted_rows_count=rec.get("deleted_rows_count"),
        partitions=None
        if summaries is None
        else tuple(
            PartitionFieldSummary(
                s["contains_null"], s.get("contains_nan"), s.get("lower_bound"), s.get("upper_bound")
            )
            for s in summaries
        ),
        key_metadata=rec.get("key_metadata"),
        first_row_id=rec.get("first_row_id"),
    )
