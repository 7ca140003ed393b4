"""The planning benchmark's manifests as other writers lay them out.

``benchmarks/plan.py --writer`` plans one synthetic table written three ways: as our writer
writes it (fastavro's ~16 KB blocks), as Java Iceberg 1.12 writes it (Avro's 64,000-byte sync
interval, deflate at zlib's default level, Java's header: its keys in Java's order, its compact
schema JSON with docs, ``referenced_data_file`` and ``iceberg.schema``, all taken from a manifest
Iceberg 1.12 wrote through Spark), and as PyIceberg 0.12 writes it (its own manifest writer,
``gzip`` as its tables default to: one deflated Avro block per entry). The entries, their stats
and the manifest list are the same; only the manifest bytes (and so their lengths in the list)
differ.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from aioiceberg.spec.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile, read_manifest
from aioiceberg.spec.manifest.columnar import avro_layout

WRITERS = ("ours", "java", "pyiceberg")
JAVA_SYNC_INTERVAL = 64_000  # Avro's DataFileWriter default, which Iceberg's Java writer keeps

Relayout = Callable[[bytes, ManifestFile], bytes]


def table_name(manifests: int, entries: int, writer: str) -> str:
    """The table's folder: ours keeps the name tables had before writers (``--scratch`` reuse)."""
    return f"t{manifests}x{entries}" if writer == "ours" else f"t{manifests}x{entries}-{writer}"


def relayout(writer: str) -> Relayout | None:
    """What turns our manifest's bytes into ``writer``'s (None: ours, as written)."""
    if writer not in WRITERS:
        raise ValueError(f"unknown manifest writer {writer!r}: one of {', '.join(WRITERS)}")
    return {"ours": None, "java": java_manifest, "pyiceberg": pyiceberg_manifest}[writer]


def layout(data: bytes) -> tuple[int, int]:
    """(entries, Avro blocks) of one manifest."""
    found = avro_layout(data)
    if found is None:
        raise ValueError("not an Avro file")
    return found.rows, len(found.blocks)


# ---------------------------------------------------------------------------------------------
# Java: a v2 data manifest as Iceberg 1.12's ManifestWriter writes it

# Iceberg types as (kind, ...) tuples: a primitive is its name; ("struct", avro record name,
# fields), ("map", key id, value id, key, value), ("list", element id, element). A field is
# (id, name, type, required, doc).
Field = tuple[int, str, Any, bool, str | None]

_MAP_DOCS = {
    "column_sizes": (108, 117, "long", "Map of column id to total size on disk"),
    "value_counts": (109, 119, "long", "Map of column id to total count, including null and NaN"),
    "null_value_counts": (110, 121, "long", "Map of column id to null value count"),
    "nan_value_counts": (137, 138, "long", "Map of column id to number of NaN values in the column"),
    "lower_bounds": (125, 126, "binary", "Map of column id to lower bound"),
    "upper_bounds": (128, 129, "binary", "Map of column id to upper bound"),
}


def _java_data_file(partition: list[Field]) -> list[Field]:
    """Iceberg 1.12's v2 ``data_file`` struct (``V2Metadata``), in its order."""
    fields: list[Field] = [
        (134, "content", "int", True, "Contents of the file: 0=data, 1=position deletes, 2=equality deletes"),
        (100, "file_path", "string", True, "Location URI with FS scheme"),
        (101, "file_format", "string", True, "File format name: avro, orc, or parquet"),
        (
            102,
            "partition",
            ("struct", "r102", partition),
            True,
            "Partition data tuple, schema based on the partition spec",
        ),
        (103, "record_count", "long", True, "Number of records in the file"),
        (104, "file_size_in_bytes", "long", True, "Total file size in bytes"),
    ]
    for name, (fid, kid, value, doc) in _MAP_DOCS.items():
        fields.append((fid, name, ("map", kid, kid + 1, "int", value), False, doc))
    fields += [
        (131, "key_metadata", "binary", False, "Encryption key metadata blob"),
        (132, "split_offsets", ("list", 133, "long"), False, "Splittable offsets"),
        (135, "equality_ids", ("list", 136, "int"), False, "Equality comparison field IDs"),
        (140, "sort_order_id", "int", False, "Sort order ID"),
        (
            143,
            "referenced_data_file",
            "string",
            False,
            "Fully qualified location (URI with FS scheme) of a data file that all deletes reference",
        ),
    ]
    return fields


def _java_entry(partition: list[Field]) -> list[Field]:
    return [
        (0, "status", "int", True, None),
        (1, "snapshot_id", "long", False, None),
        (3, "sequence_number", "long", False, None),
        (4, "file_sequence_number", "long", False, None),
        (2, "data_file", ("struct", "r2", _java_data_file(partition)), True, None),
    ]


_AVRO_PRIMITIVES: dict[str, Any] = {
    "int": "int",
    "long": "long",
    "string": "string",
    "binary": "bytes",
    "boolean": "boolean",
    "float": "float",
    "double": "double",
    "date": {"type": "int", "logicalType": "date"},
}


def _avro_type(t: Any) -> Any:
    if isinstance(t, str):
        return _AVRO_PRIMITIVES[t]
    if t[0] == "struct":
        return {"type": "record", "name": t[1], "fields": [_avro_field(f) for f in t[2]]}
    if t[0] == "map":
        _, kid, vid, key, value = t
        kv = [
            {"name": "key", "type": _avro_type(key), "field-id": kid},
            {"name": "value", "type": _avro_type(value), "field-id": vid},
        ]
        items = {"type": "record", "name": f"k{kid}_v{vid}", "fields": kv}
        return {"type": "array", "items": items, "logicalType": "map"}
    return {"type": "array", "items": _avro_type(t[2]), "element-id": t[1]}


def _avro_field(f: Field) -> dict[str, Any]:
    fid, name, t, required, doc = f
    out: dict[str, Any] = {"name": name, "type": _avro_type(t) if required else ["null", _avro_type(t)]}
    if doc is not None:
        out["doc"] = doc
    if not required:
        out["default"] = None
    out["field-id"] = fid
    return out


def _iceberg_type(t: Any) -> Any:
    if isinstance(t, str):
        return t
    if t[0] == "struct":
        return {"type": "struct", "fields": [_iceberg_field(f) for f in t[2]]}
    if t[0] == "map":
        _, kid, vid, key, value = t
        return {
            "type": "map",
            "key-id": kid,
            "key": key,
            "value-id": vid,
            "value": value,
            "value-required": True,
        }
    return {"type": "list", "element-id": t[1], "element": t[2], "element-required": True}


def _iceberg_field(f: Field) -> dict[str, Any]:
    fid, name, t, required, doc = f
    out: dict[str, Any] = {"id": fid, "name": name, "required": required, "type": _iceberg_type(t)}
    if doc is not None:
        out["doc"] = doc
    return out


def _partition_fields(avro_schema: dict[str, Any]) -> list[Field]:
    """The partition struct's fields, read back from our writer's Avro schema."""
    by_avro = {json.dumps(v, sort_keys=True): k for k, v in _AVRO_PRIMITIVES.items()}
    data_file = next(f for f in avro_schema["fields"] if f["name"] == "data_file")["type"]
    partition = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    out: list[Field] = []
    for f in partition["fields"]:
        kind = f["type"][1] if isinstance(f["type"], list) else f["type"]
        name = by_avro.get(json.dumps(kind, sort_keys=True))
        if name is None:
            raise ValueError(f"partition field {f['name']!r}: no Java layout here for Avro type {kind}")
        out.append((f["field-id"], f["name"], name, not isinstance(f["type"], list), None))
    return out


def _long(value: int) -> bytes:
    """Avro's zig-zag varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _deflate(raw: bytes) -> bytes:
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
    return c.compress(raw) + c.flush()


def java_manifest(data: bytes, manifest: ManifestFile | None = None) -> bytes:
    """Our v2 data manifest re-written as Iceberg 1.12's Java writer writes it: the same
    records, Java's header (keys in the order its HashMap writes them) and Java's blocks (one
    flushed once its buffer holds 64,000 bytes, deflated)."""
    reader = fastavro.reader(io.BytesIO(data))
    meta = reader.metadata
    if meta.get("format-version") != "2" or meta.get("content", "data") != "data":
        raise ValueError("the Java layout is written for v2 data manifests only")
    partition = _partition_fields(json.loads(meta["avro.schema"]))
    entry = _java_entry(partition)
    avro_schema = {"type": "record", "name": "manifest_entry", "fields": [_avro_field(f) for f in entry]}
    iceberg_schema = {"type": "struct", "schema-id": 0, "fields": [_iceberg_field(f) for f in entry]}
    header = {
        "schema": meta["schema"],
        "avro.schema": json.dumps(avro_schema, separators=(",", ":")),
        "avro.codec": "deflate",
        "format-version": "2",
        "partition-spec-id": meta["partition-spec-id"],
        "iceberg.schema": json.dumps(iceberg_schema, separators=(",", ":")),
        "partition-spec": meta["partition-spec"],
        "content": "data",
    }
    sync = os.urandom(16)
    out = io.BytesIO()
    out.write(b"Obj\x01" + _long(len(header)))
    for key, value in header.items():
        k, v = key.encode(), value.encode()
        out.write(_long(len(k)) + k + _long(len(v)) + v)
    out.write(_long(0) + sync)
    parsed = fastavro.parse_schema(avro_schema)
    block, count = io.BytesIO(), 0

    def flush() -> None:
        packed = _deflate(block.getvalue())
        out.write(_long(count) + _long(len(packed)) + packed + sync)

    for record in reader:
        entry_record: dict[str, Any] = record  # type: ignore[assignment]
        entry_record["data_file"].setdefault("referenced_data_file", None)
        fastavro.schemaless_writer(block, parsed, entry_record)
        count += 1
        if block.tell() >= JAVA_SYNC_INTERVAL:
            flush()
            block, count = io.BytesIO(), 0
    if count:
        flush()
    return out.getvalue()


# ---------------------------------------------------------------------------------------------
# PyIceberg: the same entries through PyIceberg's own manifest writer


def pyiceberg_manifest(data: bytes, manifest: ManifestFile | None = None) -> bytes:
    """Our manifest's entries written again by PyIceberg 0.12's ``write_manifest`` (its schema
    and spec parsed from the manifest's header), as PyIceberg writes a table's manifests."""
    # pyiceberg: the benchmark's comparison client (a dev dependency), loaded only for this writer
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import write_manifest as py_write_manifest
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema

    meta = fastavro.reader(io.BytesIO(data)).metadata
    version = int(meta["format-version"])
    if version not in (1, 2) or meta.get("content", "data") != "data":
        raise ValueError("PyIceberg 0.12 writes v1 and v2 data manifests only")
    schema = PySchema.model_validate_json(meta["schema"])
    spec_json = f'{{"spec-id": {meta["partition-spec-id"]}, "fields": {meta["partition-spec"]}}}'
    spec = PySpec.model_validate_json(spec_json)
    decoded = read_manifest(data)  # the values as written: ADDED entries inherit theirs
    snapshot_id = manifest.added_snapshot_id if manifest is not None else None
    if snapshot_id is None:
        snapshot_id = next((e.snapshot_id for e in decoded.entries if e.snapshot_id is not None), 0)
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        path = str(Path(tmp) / "m.avro")
        output = PyArrowFileIO().new_output(path)
        with py_write_manifest(version, spec, schema, output, snapshot_id, "gzip") as writer:  # type: ignore[arg-type]
            for e in decoded.entries:
                py_entry = pyiceberg_entry(e, version)
                if e.status == ManifestEntryStatus.ADDED:
                    writer.add(py_entry)
                elif e.status == ManifestEntryStatus.EXISTING:
                    writer.existing(py_entry)
                else:
                    writer.delete(py_entry)
        return Path(path).read_bytes()


def pyiceberg_entry(entry: ManifestEntry, version: int) -> Any:
    """Our manifest entry as PyIceberg 0.12's ``ManifestEntry`` (its data file and every
    value as we hold them), for PyIceberg's manifest writer in format ``version``."""
    # pyiceberg: the benchmark's comparison client (a dev dependency), loaded only for this writer
    from pyiceberg.manifest import DataFile as PyDataFile
    from pyiceberg.manifest import DataFileContent as PyContent
    from pyiceberg.manifest import FileFormat as PyFormat
    from pyiceberg.manifest import ManifestEntry as PyEntry
    from pyiceberg.manifest import ManifestEntryStatus as PyStatus
    from pyiceberg.typedef import Record

    d = entry.data_file
    data_file = PyDataFile.from_args(
        content=PyContent(int(d.content)),
        file_path=d.file_path,
        file_format=PyFormat(d.file_format.value),
        partition=Record(*d.partition),
        record_count=d.record_count,
        file_size_in_bytes=d.file_size_in_bytes,
        column_sizes=dict(d.column_sizes or {}),
        value_counts=dict(d.value_counts or {}),
        null_value_counts=dict(d.null_value_counts or {}),
        nan_value_counts=dict(d.nan_value_counts or {}),
        lower_bounds=dict(d.lower_bounds or {}),
        upper_bounds=dict(d.upper_bounds or {}),
        key_metadata=d.key_metadata,
        split_offsets=list(d.split_offsets) if d.split_offsets is not None else None,
        equality_ids=list(d.equality_ids) if d.equality_ids is not None else None,
        sort_order_id=d.sort_order_id,
        _table_format_version=version,  # type: ignore[arg-type]
    )
    return PyEntry.from_args(
        status=PyStatus(int(entry.status)),
        snapshot_id=entry.snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=data_file,
    )
