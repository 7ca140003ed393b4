"""Table metadata JSON (Appendix C) both ways, plus the builder for a new table's first metadata.

Reading accepts every version and fills the newer defaults (v1 gets schemas, specs, sort
orders, sequence number 0 and a ``main`` ref), so callers see one shape. Writing emits
exactly what the table's own format version asks for (Appendix E): v1 still carries
``schema`` / ``partition-spec`` for old readers, v2+ omit them and v1 never gets
sequence numbers. Every decoding failure is an aioiceberg error naming the file.
"""

from __future__ import annotations

import gzip
import json
import time
import uuid
import zlib
from collections.abc import Mapping
from typing import Any, NoReturn

from aioiceberg.errors import (
    CorruptFileError,
    InvalidMetadataError,
    UnsupportedFormatVersionError,
    ValidationError,
)
from aioiceberg.spec.metadata import (
    INITIAL_SEQUENCE_NUMBER,
    MAIN_BRANCH,
    SUPPORTED_FORMAT_VERSIONS,
    BlobMetadata,
    MetadataLogEntry,
    Operation,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    StatisticsFile,
    Summary,
    TableMetadata,
)
from aioiceberg.spec.partitioning import PARTITION_DATA_ID_START, PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema, assign_fresh_ids
from aioiceberg.spec.schema_json import (
    partition_fields_from_json,
    partition_fields_to_json,
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
    sort_order_from_json,
    sort_order_to_json,
)
from aioiceberg.spec.sorting import UNSORTED, SortField, SortOrder
from aioiceberg.spec.types import ListType, MapType, NestedField, PrimitiveType, StructType

__all__ = [
    "new_table_metadata",
    "parse_table_metadata",
    "serialize_table_metadata",
    "table_metadata_from_dict",
    "table_metadata_to_dict",
]

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
INITIAL_SORT_ORDER_ID = 1


# -- reading -----------------------------------------------------------------------------


def parse_table_metadata(data: bytes | str, location: str | None = None) -> TableMetadata:
    """Decode a metadata file (plain or gzip-compressed JSON) and validate it.

    ``location`` only labels errors. Raises CorruptFileError for bytes that are not
    (gzip) JSON, UnsupportedFormatVersionError for an unknown ``format-version`` and
    InvalidMetadataError for missing, wrong-typed or contradictory fields.
    """
    try:
        obj = _load_json(data)
        md = table_metadata_from_dict(obj)
        md.validate()
        return md
    except InvalidMetadataError as e:
        if e.location is None and location is not None:
            raise type(e)(str(e), location=location) from e
        raise
    except ValidationError as e:
        raise InvalidMetadataError(str(e), location=location) from e


def _load_json(data: bytes | str) -> Any:
    if isinstance(data, str):
        text = data
    else:
        raw = bytes(data)
        if raw[:2] == _GZIP_MAGIC:
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error) as e:
                raise CorruptFileError(f"damaged gzip stream: {e}") from e
        # "utf-8-sig" strips the BOM too, but importing that codec cost a fresh process
        # ~0.3 ms (half the parse) inside its first ``load_table``
        if raw[:3] == _UTF8_BOM:
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFileError(f"table metadata is not UTF-8: {e}") from e
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CorruptFileError(f"table metadata is not valid JSON: {e}") from e


def _bad(message: str) -> NoReturn:
    raise InvalidMetadataError(message)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int(obj: Mapping[str, Any], key: str, what: str, default: int | None = None) -> int:
    """An integer field; required unless ``default`` is given (used when absent or null)."""
    value = obj.get(key)
    if value is None:
        if default is not None:
            return default
        if key in obj:
            _bad(f"{what}: field {key!r} must not be null")
        _bad(f"{what} is missing required field {key!r}")
    if not isinstance(value, int) or isinstance(value, bool):
        _bad(f"{what}: field {key!r} must be an integer, got {_type_name(value)}")
    return value


def _opt_int(obj: Mapping[str, Any], key: str, what: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        _bad(f"{what}: field {key!r} must be an integer, got {_type_name(value)}")
    return value


def _str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if value is None:
        if key in obj:
            _bad(f"{what}: field {key!r} must not be null")
        _bad(f"{what} is missing required field {key!r}")
    if not isinstance(value, str):
        _bad(f"{what}: field {key!r} must be a string, got {_type_name(value)}")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, what: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        _bad(f"{what}: field {key!r} must be a string, got {_type_name(value)}")
    return value


def _list(obj: Mapping[str, Any], key: str, what: str, required: bool = False) -> list[Any]:
    value = obj.get(key)
    if value is None:
        if required:
            _bad(f"{what} is missing required field {key!r}")
        return []
    if not isinstance(value, list):
        _bad(f"{what}: field {key!r} must be a list, got {_type_name(value)}")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _bad(f"{what} must be a JSON object, got {_type_name(value)}")
    return value


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    obj = _object(value, what)
    for k, v in obj.items():
        if not isinstance(v, str):
            _bad(f"{what}: value of {k!r} must be a string, got {_type_name(v)}")
    return dict(obj)


def table_metadata_from_dict(obj: Any) -> TableMetadata:
    """Build (without validating) metadata from decoded JSON, filling the defaults older versions lack."""
    what = "table metadata"
    top = _object(obj, what)
    if "format-version" not in top:
        _bad(f"{what} is missing required field 'format-version'")
    version = top["format-version"]
    if not isinstance(version, int) or isinstance(version, bool) or version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"unsupported format-version {version!r}; this build reads "
            f"{', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))}"
        )
    v2 = version >= 2

    table_uuid = _opt_str(top, "table-uuid", what)
    if table_uuid is None and v2:
        _bad(f"{what} is missing required field 'table-uuid'")
    if table_uuid is not None:
        try:
            table_uuid = str(uuid.UUID(table_uuid))
        except ValueError:
            _bad(f"{what}: 'table-uuid' is not a UUID: {table_uuid!r}")

    schemas, current_schema_id = _read_schemas(top, version, what)
    specs, default_spec_id = _read_specs(top, version, what)
    if v2:
        last_partition_id = _int(top, "last-partition-id", what)
    else:
        highest = max((f.field_id for s in specs for f in s.fields), default=PARTITION_DATA_ID_START - 1)
        last_partition_id = _int(top, "last-partition-id", what, default=highest)
    sort_orders, default_sort_order_id = _read_sort_orders(top, version, what)

    current_snapshot_id = _opt_int(top, "current-snapshot-id", what)
    if current_snapshot_id == -1:
        current_snapshot_id = None
    snapshots = tuple(snapshot_from_json(item, version) for item in _list(top, "snapshots", what))

    refs: dict[str, SnapshotRef] = {}
    if top.get("refs") is not None:
        for name, item in _object(top["refs"], "'refs'").items():
            refs[name] = ref_from_json(item, name)
    if current_snapshot_id is not None and MAIN_BRANCH not in refs:
        refs[MAIN_BRANCH] = SnapshotRef(current_snapshot_id, SnapshotRefType.BRANCH)

    snapshot_log = tuple(
        SnapshotLogEntry(
            _int(e, "snapshot-id", "snapshot-log entry"), _int(e, "timestamp-ms", "snapshot-log entry")
        )
        for e in (_object(i, "snapshot-log entry") for i in _list(top, "snapshot-log", what))
    )
    metadata_log = tuple(
        MetadataLogEntry(
            _str(e, "metadata-file", "metadata-log entry"), _int(e, "timestamp-ms", "metadata-log entry")
        )
        for e in (_object(i, "metadata-log entry") for i in _list(top, "metadata-log", what))
    )

    return TableMetadata(
        format_version=version,
        table_uuid=table_uuid,
        location=_str(top, "location", what),
        last_sequence_number=_int(top, "last-sequence-number", what) if v2 else INITIAL_SEQUENCE_NUMBER,
        last_updated_ms=_int(top, "last-updated-ms", what),
        last_column_id=_int(top, "last-column-id", what),
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        properties=_string_map(top.get("properties"), "'properties'"),
        current_snapshot_id=current_snapshot_id,
        snapshots=snapshots,
        snapshot_log=snapshot_log,
        metadata_log=metadata_log,
        sort_orders=sort_orders,
        default_sort_order_id=default_sort_order_id,
        refs=refs,
        statistics=tuple(statistics_from_json(i) for i in _list(top, "statistics", what)),
        partition_statistics=tuple(
            _partition_statistics_from_json(i) for i in _list(top, "partition-statistics", what)
        ),
        next_row_id=_next_row_id(top, version, snapshots, what),
    )


def _next_row_id(top: dict[str, Any], version: int, snapshots: tuple[Snapshot, ...], what: str) -> int | None:
    """v3's ``next-row-id``. The spec requires it; a file without it gets the lowest value its
    snapshots leave free (past every row id they assigned), not 0: the next commit's new rows
    must not take ids that rows already hold, and what is read must write back the same."""
    if version < 3:
        return None
    found = _opt_int(top, "next-row-id", what)
    if found is not None:
        return found
    return max(
        (s.first_row_id + (s.added_rows or 0) for s in snapshots if s.first_row_id is not None), default=0
    )


def _read_schemas(top: dict[str, Any], version: int, what: str) -> tuple[tuple[Schema, ...], int]:
    if top.get("schemas") is not None or version >= 2:
        schemas = tuple(schema_from_json(s) for s in _list(top, "schemas", what, required=True))
        if version == 1 and "current-schema-id" not in top and isinstance(top.get("schema"), dict):
            # A v1 writer that added `schemas` but not `current-schema-id`: `schema` is current.
            current = schema_from_json(top["schema"]).schema_id
        else:
            current = _int(top, "current-schema-id", what)
        return schemas, current
    if "schema" not in top:
        _bad(f"{what} is missing required field 'schemas' (or v1 'schema')")
    schema = schema_from_json(top["schema"])
    return (schema,), _int(top, "current-schema-id", what, default=schema.schema_id)


def _read_specs(top: dict[str, Any], version: int, what: str) -> tuple[tuple[PartitionSpec, ...], int]:
    if top.get("partition-specs") is not None or version >= 2:
        specs = tuple(partition_spec_from_json(s) for s in _list(top, "partition-specs", what, required=True))
        return specs, _int(top, "default-spec-id", what)
    if "partition-spec" not in top:
        _bad(f"{what} is missing required field 'partition-specs' (or v1 'partition-spec')")
    fields = partition_fields_from_json(top["partition-spec"], "'partition-spec'")
    return (PartitionSpec(0, fields),), 0


def _read_sort_orders(top: dict[str, Any], version: int, what: str) -> tuple[tuple[SortOrder, ...], int]:
    if top.get("sort-orders") is not None or version >= 2:
        orders = tuple(sort_order_from_json(o) for o in _list(top, "sort-orders", what, required=True))
        return orders, _int(top, "default-sort-order-id", what)
    return (UNSORTED,), _int(top, "default-sort-order-id", what, default=UNSORTED.order_id)


def snapshot_from_json(item: Any, version: int) -> Snapshot:
    obj = _object(item, "snapshot")
    snapshot_id = _int(obj, "snapshot-id", "snapshot")
    what = f"snapshot {snapshot_id}"
    manifest_list = _opt_str(obj, "manifest-list", what)
    manifests: tuple[str, ...] = ()
    if manifest_list is None:
        # Only v1 wrote manifests inline; upgraded tables may still carry such snapshots.
        if obj.get("manifests") is None:
            _bad(f"{what} is missing required field 'manifest-list'")
        items = _list(obj, "manifests", what)
        if not all(isinstance(m, str) for m in items):
            _bad(f"{what}: 'manifests' must be a list of strings")
        manifests = tuple(items)
    summary: Summary | None = None
    if obj.get("summary") is not None:
        props = _string_map(obj["summary"], f"{what} summary")
        op = props.pop("operation", None)
        if op is None:
            _bad(f"{what} summary is missing required field 'operation'")
        try:
            operation = Operation(op)
        except ValueError:
            _bad(f"{what} summary: unknown operation {op!r}")
        summary = Summary(operation, props)
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=_opt_int(obj, "parent-snapshot-id", what),
        sequence_number=_int(obj, "sequence-number", what) if version >= 2 else INITIAL_SEQUENCE_NUMBER,
        timestamp_ms=_int(obj, "timestamp-ms", what),
        manifest_list=manifest_list,
        summary=summary,
        schema_id=_opt_int(obj, "schema-id", what),
        manifests=manifests,
        first_row_id=_opt_int(obj, "first-row-id", what) if version >= 3 else None,
        added_rows=_opt_int(obj, "added-rows", what) if version >= 3 else None,
    )


def ref_from_json(item: Any, name: str) -> SnapshotRef:
    what = f"ref {name!r}"
    obj = _object(item, what)
    kind = _str(obj, "type", what)
    try:
        ref_type = SnapshotRefType(kind.lower())
    except ValueError:
        _bad(f"{what}: unknown ref type {kind!r}")
    try:
        return SnapshotRef(
            snapshot_id=_int(obj, "snapshot-id", what),
            type=ref_type,
            min_snapshots_to_keep=_opt_int(obj, "min-snapshots-to-keep", what),
            max_snapshot_age_ms=_opt_int(obj, "max-snapshot-age-ms", what),
            max_ref_age_ms=_opt_int(obj, "max-ref-age-ms", what),
        )
    except ValidationError as e:
        _bad(f"{what}: {e}")


def statistics_from_json(item: Any) -> StatisticsFile:
    obj = _object(item, "statistics file")
    what = "statistics file"
    path = _str(obj, "statistics-path", what)
    what = f"statistics file {path!r}"
    blobs = []
    for b in _list(obj, "blob-metadata", what, required=True):
        blob = _object(b, f"{what} blob")
        fields = _list(blob, "fields", f"{what} blob", required=True)
        if not all(isinstance(f, int) and not isinstance(f, bool) for f in fields):
            _bad(f"{what} blob: 'fields' must be a list of integers")
        blobs.append(
            BlobMetadata(
                type=_str(blob, "type", f"{what} blob"),
                snapshot_id=_int(blob, "snapshot-id", f"{what} blob"),
                sequence_number=_int(blob, "sequence-number", f"{what} blob"),
                fields=tuple(fields),
                properties=_string_map(blob.get("properties"), f"{what} blob properties"),
            )
        )
    return StatisticsFile(
        snapshot_id=_int(obj, "snapshot-id", what),
        statistics_path=path,
        file_size_in_bytes=_int(obj, "file-size-in-bytes", what),
        file_footer_size_in_bytes=_int(obj, "file-footer-size-in-bytes", what),
        blob_metadata=tuple(blobs),
        key_metadata=_opt_str(obj, "key-metadata", what),
    )


def _partition_statistics_from_json(item: Any) -> PartitionStatisticsFile:
    obj = _object(item, "partition statistics file")
    path = _str(obj, "statistics-path", "partition statistics file")
    what = f"partition statistics file {path!r}"
    return PartitionStatisticsFile(
        snapshot_id=_int(obj, "snapshot-id", what),
        statistics_path=path,
        file_size_in_bytes=_int(obj, "file-size-in-bytes", what),
    )


# -- writing -----------------------------------------------------------------------------


def serialize_table_metadata(md: TableMetadata) -> bytes:
    """Compact UTF-8 JSON with a fixed key order, so equal metadata gives equal bytes.

    Validates first: a broken metadata file, once committed, breaks every reader.
    """
    md.validate()
    return json.dumps(table_metadata_to_dict(md), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def table_metadata_to_dict(md: TableMetadata) -> dict[str, Any]:
    """The JSON object for ``md``'s format version: required fields only, never forbidden ones."""
    version = md.format_version
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(f"cannot write format version {version}")
    out: dict[str, Any] = {"format-version": version}
    if md.table_uuid is not None:
        out["table-uuid"] = md.table_uuid
    elif version >= 2:
        raise ValidationError(f"format v{version} metadata requires a table uuid")
    out["location"] = md.location
    if version >= 2:
        out["last-sequence-number"] = md.last_sequence_number
    out["last-updated-ms"] = md.last_updated_ms
    out["last-column-id"] = md.last_column_id
    if version == 1:
        out["schema"] = schema_to_json(md.schema())
    out["schemas"] = [schema_to_json(s) for s in md.schemas]
    out["current-schema-id"] = md.current_schema_id
    if version == 1:
        out["partition-spec"] = _source_ids_for(partition_fields_to_json(md.spec(), version), version)
    out["partition-specs"] = []
    for spec in md.partition_specs:
        spec_json = partition_spec_to_json(spec, version)
        spec_json["fields"] = _source_ids_for(spec_json["fields"], version)
        out["partition-specs"].append(spec_json)
    out["default-spec-id"] = md.default_spec_id
    out["last-partition-id"] = md.last_partition_id
    out["properties"] = dict(sorted(md.properties.items()))
    # -1 rather than null/absent: every reader of every version understands it.
    out["current-snapshot-id"] = md.current_snapshot_id if md.current_snapshot_id is not None else -1
    out["refs"] = {name: ref_to_json(md.refs[name]) for name in sorted(md.refs)}
    out["snapshots"] = [snapshot_to_json(s, version) for s in md.snapshots]
    out["statistics"] = [statistics_to_json(s) for s in md.statistics]
    out["partition-statistics"] = [
        {
            "snapshot-id": p.snapshot_id,
            "statistics-path": p.statistics_path,
            "file-size-in-bytes": p.file_size_in_bytes,
        }
        for p in md.partition_statistics
    ]
    out["snapshot-log"] = [
        {"timestamp-ms": e.timestamp_ms, "snapshot-id": e.snapshot_id} for e in md.snapshot_log
    ]
    out["metadata-log"] = [
        {"timestamp-ms": e.timestamp_ms, "metadata-file": e.metadata_file} for e in md.metadata_log
    ]
    out["sort-orders"] = []
    for order in md.sort_orders:
        order_json = sort_order_to_json(order)
        order_json["fields"] = _source_ids_for(order_json["fields"], version)
        out["sort-orders"].append(order_json)
    out["default-sort-order-id"] = md.default_sort_order_id
    if version >= 3:  # required in v3 (Java refuses a v3 table without it): 0 before any row
        out["next-row-id"] = md.next_row_id if md.next_row_id is not None else 0
    return out


def _source_ids_for(fields: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """Partition/sort field sources, written so that every reader finds what it looks for.

    v1/v2 always write ``source-id`` (the first id) and add ``source-ids`` only for
    multi-argument transforms, as Appendix E asks. v3 writes ``source-ids`` as Appendix E asks
    and, for a single-argument transform, ``source-id`` beside it as Java writes it: Java 1.12
    and DuckDB 1.5 refuse a v3 partition field without ``source-id``.
    """
    out = []
    for f in fields:
        ids = f["source-ids"] if "source-ids" in f else [f["source-id"]]
        fixed: dict[str, Any] = {}
        for key, value in f.items():
            if key in ("source-id", "source-ids"):
                if version >= 3:
                    if len(ids) == 1:
                        fixed["source-id"] = ids[0]
                    fixed["source-ids"] = list(ids)
                else:
                    fixed["source-id"] = ids[0]
                    if len(ids) > 1:
                        fixed["source-ids"] = list(ids)
            else:
                fixed[key] = value
        out.append(fixed)
    return out


def snapshot_to_json(s: Snapshot, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {"snapshot-id": s.snapshot_id}
    if s.parent_snapshot_id is not None:
        out["parent-snapshot-id"] = s.parent_snapshot_id
    if version >= 2:
        out["sequence-number"] = s.sequence_number
    out["timestamp-ms"] = s.timestamp_ms
    if s.summary is not None:
        summary = {"operation": s.summary.operation.value}
        summary.update(sorted(s.summary.properties.items()))
        out["summary"] = summary
    if s.manifest_list is not None:
        out["manifest-list"] = s.manifest_list
    else:
        # Written only for v1-era snapshots that never had a manifest list.
        out["manifests"] = list(s.manifests)
    if s.schema_id is not None:
        out["schema-id"] = s.schema_id
    if version >= 3:
        if s.first_row_id is not None:
            out["first-row-id"] = s.first_row_id
        if s.added_rows is not None:
            out["added-rows"] = s.added_rows
    return out


def ref_to_json(ref: SnapshotRef) -> dict[str, Any]:
    out: dict[str, Any] = {"snapshot-id": ref.snapshot_id, "type": ref.type.value}
    if ref.min_snapshots_to_keep is not None:
        out["min-snapshots-to-keep"] = ref.min_snapshots_to_keep
    if ref.max_snapshot_age_ms is not None:
        out["max-snapshot-age-ms"] = ref.max_snapshot_age_ms
    if ref.max_ref_age_ms is not None:
        out["max-ref-age-ms"] = ref.max_ref_age_ms
    return out


def statistics_to_json(s: StatisticsFile) -> dict[str, Any]:
    out: dict[str, Any] = {
        "snapshot-id": s.snapshot_id,
        "statistics-path": s.statistics_path,
        "file-size-in-bytes": s.file_size_in_bytes,
        "file-footer-size-in-bytes": s.file_footer_size_in_bytes,
    }
    if s.key_metadata is not None:
        out["key-metadata"] = s.key_metadata
    blobs = []
    for b in s.blob_metadata:
        blob: dict[str, Any] = {
            "type": b.type,
            "snapshot-id": b.snapshot_id,
            "sequence-number": b.sequence_number,
            "fields": list(b.fields),
        }
        if b.properties:
            blob["properties"] = dict(sorted(b.properties.items()))
        blobs.append(blob)
    out["blob-metadata"] = blobs
    return out


# -- new tables --------------------------------------------------------------------------


def new_table_metadata(
    schema: Schema,
    spec: PartitionSpec,
    sort_order: SortOrder,
    location: str,
    properties: Mapping[str, str] | None = None,
    format_version: int = 2,
    *,
    table_uuid: str | None = None,
    last_updated_ms: int | None = None,
) -> TableMetadata:
    """The first metadata of a new table: fresh column ids from 1, partition field ids from 1000.

    Spec and sort-order source ids refer to ``schema``'s ids and are remapped by column
    name to the fresh ones, so callers may build them against any numbering.
    """
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(f"cannot create a table with format version {format_version}")
    _check_types_for_version(schema, format_version)
    fresh = assign_fresh_ids(schema, start=1)
    fresh = Schema(*fresh.fields, schema_id=0, identifier_field_ids=fresh.identifier_field_ids)

    def remap(source_id: int) -> int:
        name = schema.find_column_name(source_id)
        new_id = fresh.find_field_id(name) if name is not None else None
        if new_id is None:
            raise ValidationError(f"source field id {source_id} is not in the schema")
        return new_id

    fresh_spec = PartitionSpec(
        0,
        tuple(
            PartitionField(
                tuple(remap(s) for s in f.source_ids), PARTITION_DATA_ID_START + i, f.transform, f.name
            )
            for i, f in enumerate(spec.fields)
        ),
    )
    fresh_spec.check_against(fresh)
    if sort_order.is_unsorted:
        fresh_order = UNSORTED
    else:
        fresh_order = SortOrder(
            INITIAL_SORT_ORDER_ID,
            tuple(
                SortField(tuple(remap(s) for s in f.source_ids), f.transform, f.direction, f.null_order)
                for f in sort_order.fields
            ),
        )
    md = TableMetadata(
        format_version=format_version,
        table_uuid=table_uuid if table_uuid is not None else str(uuid.uuid4()),
        location=location.rstrip("/"),
        last_sequence_number=INITIAL_SEQUENCE_NUMBER,
        last_updated_ms=last_updated_ms if last_updated_ms is not None else int(time.time() * 1000),
        last_column_id=fresh.highest_field_id,
        schemas=(fresh,),
        current_schema_id=fresh.schema_id,
        partition_specs=(fresh_spec,),
        default_spec_id=fresh_spec.spec_id,
        last_partition_id=fresh_spec.last_assigned_field_id,
        properties=dict(properties or {}),
        sort_orders=(fresh_order,),
        default_sort_order_id=fresh_order.order_id,
        next_row_id=0 if format_version >= 3 else None,  # v3 row lineage starts at 0
    )
    md.validate()
    return md


def _check_types_for_version(schema: Schema, format_version: int) -> None:
    """Types and column defaults newer than the table's format version cannot be written."""

    def visit(f: NestedField) -> None:
        t = f.field_type
        if isinstance(t, PrimitiveType) and t.min_format_version > format_version:
            raise ValidationError(f"column {f.name!r}: type {t} needs format version {t.min_format_version}")
        if format_version < 3 and (f.initial_default is not None or f.write_default is not None):
            raise ValidationError(f"column {f.name!r}: default values need format version 3")
        if isinstance(t, StructType | ListType | MapType):
            for child in t.fields:
                visit(child)

    for f in schema.fields:
        visit(f)
