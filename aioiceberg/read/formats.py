"""Whole-file decoders for Avro and ORC data files, and for small delete files.

These formats are read in one request: Avro has no column chunks to skip, ORC stripes
are rarely worth ranged reads at Iceberg file sizes, and delete files are small. Each
decoder returns an Arrow table whose fields carry Iceberg field ids where the file has
them (``PARQUET:field_id`` metadata), so projection treats every format alike.
"""

from __future__ import annotations

import io as _io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg.errors import CorruptFileError, IcebergError, UnsupportedError
from aioiceberg.spec.arrow import FIELD_ID_KEY, ORC_FIELD_ID_KEY
from aioiceberg.spec.manifest.data_file import FileFormat

__all__ = ["decode_avro", "decode_file", "decode_orc", "decoding"]


@contextmanager
def decoding(location: str, what: str = "data file") -> Iterator[None]:
    """Turn pyarrow's exceptions raised while reading ``location`` into errors naming it.

    pyarrow reports a damaged page, a column whose type disagrees with the table's or an
    encoding it lacks as ArrowInvalid, ArrowTypeError, ArrowNotImplementedError or OSError,
    none of which names the file nor is an IcebergError a caller can catch.
    """
    try:
        yield
    except IcebergError:
        raise
    except pa.ArrowNotImplementedError as e:
        raise UnsupportedError(f"{location}: cannot read this {what}: {e}") from e
    except (pa.ArrowException, OSError) as e:
        raise CorruptFileError(f"cannot read this {what}: {e}", location=location) from e


def _meta(field_id: Any) -> dict[bytes, bytes] | None:
    return {FIELD_ID_KEY: str(field_id).encode()} if field_id is not None else None


def _non_null(t: Any) -> tuple[Any, bool]:
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        if len(rest) != 1:
            raise UnsupportedError(f"Avro union {t} has no Iceberg equivalent")
        return rest[0], len(rest) != len(t)
    return t, False


def _avro_type(t: Any, named: dict[str, Any]) -> pa.DataType:
    if isinstance(t, str):
        if t in named:
            return _avro_type(named[t], named)
        simple = {
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "string": pa.string(),
            "bytes": pa.binary(),
        }
        if t not in simple:
            raise UnsupportedError(f"Avro type {t!r} has no Iceberg equivalent")
        return simple[t]
    if isinstance(t, list):
        inner, _ = _non_null(t)
        return _avro_type(inner, named)
    kind = t.get("type")
    logical = t.get("logicalType")
    if "name" in t and kind in ("record", "fixed", "enum"):
        named[t["name"]] = t
    if logical == "date":
        return pa.date32()
    if logical == "time-micros":
        return pa.time64("us")
    if logical in ("timestamp-micros", "local-timestamp-micros"):
        return pa.timestamp("us", tz="UTC" if t.get("adjust-to-utc", logical == "timestamp-micros") else None)
    if logical in ("timestamp-nanos", "local-timestamp-nanos"):
        return pa.timestamp("ns", tz="UTC" if t.get("adjust-to-utc", logical == "timestamp-nanos") else None)
    if logical == "decimal":
        return pa.decimal128(t["precision"], t.get("scale", 0))
    if logical == "uuid":
        return pa.binary(16) if kind == "fixed" else pa.string()
    if kind == "record":
        return pa.struct([_avro_field(f, named) for f in t["fields"]])
    if kind == "array":
        items, items_optional = _non_null(t["items"])
        if logical == "map":  # Iceberg's map with non-string keys: an array of key/value records
            kv = items if isinstance(items, dict) else named[items]
            key_f, value_f = kv["fields"]
            key = pa.field("key", _avro_type(key_f["type"], named), False, _meta(key_f.get("field-id")))
            value_t, value_optional = _non_null(value_f["type"])
            value = pa.field(
                "value", _avro_type(value_t, named), value_optional, _meta(value_f.get("field-id"))
            )
            return pa.map_(key, value)
        element = pa.field("element", _avro_type(items, named), items_optional, _meta(t.get("element-id")))
        return pa.list_(element)
    if kind == "map":
        values, values_optional = _non_null(t["values"])
        key = pa.field("key", pa.string(), False, _meta(t.get("key-id")))
        value = pa.field("value", _avro_type(values, named), values_optional, _meta(t.get("value-id")))
        return pa.map_(key, value)
    if kind == "fixed":
        return pa.binary(t["size"])
    if kind == "enum":
        return pa.string()
    return _avro_type(kind, named)


def _avro_field(f: dict[str, Any], named: dict[str, Any]) -> pa.Field:
    inner, optional = _non_null(f["type"])
    return pa.field(f["name"], _avro_type(inner, named), optional, _meta(f.get("field-id")))


def _avro_value(value: Any, t: pa.DataType) -> Any:
    """fastavro values into what ``pa.array`` takes for ``t`` (maps and uuids differ)."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {
            t.field(i).name: _avro_value(value.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_map(t):
        pairs = value.items() if isinstance(value, dict) else ((kv["key"], kv["value"]) for kv in value)
        return [(_avro_value(k, t.key_type), _avro_value(v, t.item_type)) for k, v in pairs]
    if pa.types.is_list(t):
        return [_avro_value(v, t.value_type) for v in value]
    if pa.types.is_fixed_size_binary(t) and not isinstance(value, bytes | bytearray):
        return getattr(value, "bytes", value)
    if pa.types.is_string(t) and not isinstance(value, str):
        return str(value)
    return value


def decode_avro(data: bytes, location: str = "") -> pa.Table:
    """An Avro data file as Arrow, field ids from the Avro schema's ``field-id`` attributes."""
    try:
        reader = fastavro.reader(_io.BytesIO(data))
        schema: Any = reader.writer_schema
        arrow_schema = pa.schema([_avro_field(f, {}) for f in schema["fields"]])
        columns: dict[str, list[Any]] = {f.name: [] for f in arrow_schema}
        record: Any
        for record in reader:
            for f in arrow_schema:
                columns[f.name].append(_avro_value(record.get(f.name), f.type))
    except (ValueError, EOFError, KeyError, TypeError) as e:
        raise CorruptFileError(f"cannot decode Avro data file: {e}", location=location or None) from e
    arrays = [pa.array(columns[f.name], type=f.type) for f in arrow_schema]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def _orc_ids(field: pa.Field) -> pa.Field:
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_orc_ids(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        t = pa.list_(_orc_ids(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(_orc_ids(t.key_field), _orc_ids(t.item_field))
    metadata = dict(field.metadata or {})
    if ORC_FIELD_ID_KEY in metadata and FIELD_ID_KEY not in metadata:
        metadata[FIELD_ID_KEY] = metadata[ORC_FIELD_ID_KEY]
    return pa.field(field.name, t, field.nullable, metadata or None)


def decode_orc(data: bytes, location: str = "") -> pa.Table:
    """An ORC data file as Arrow; ORC's ``iceberg.id`` attributes become field-id metadata."""
    from pyarrow import orc  # pyarrow.orc: not in every pyarrow build, so only an ORC read needs it

    try:
        table = orc.ORCFile(pa.BufferReader(data)).read()
    except (OSError, pa.ArrowException) as e:
        raise CorruptFileError(f"cannot decode ORC data file: {e}", location=location or None) from e
    schema = pa.schema([_orc_ids(f) for f in table.schema])
    return pa.Table.from_arrays(table.columns, schema=schema)


def decode_file(data: bytes, file_format: FileFormat, location: str = "") -> pa.Table:
    """Decode a whole file held in memory (delete files, Avro and ORC data files)."""
    if file_format == FileFormat.PARQUET:
        try:
            return pq.read_table(pa.BufferReader(data))
        except (OSError, pa.ArrowException) as e:
            raise CorruptFileError(f"cannot decode Parquet file: {e}", location=location or None) from e
    if file_format == FileFormat.AVRO:
        return decode_avro(data, location)
    if file_format == FileFormat.ORC:
        return decode_orc(data, location)
    raise UnsupportedError(f"cannot read {file_format} as rows: {location}")
