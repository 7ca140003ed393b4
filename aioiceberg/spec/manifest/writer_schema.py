"""Reading a manifest's Avro writer schema: what the fastavro and the columnar decoders share.

Both decoders need the partition tuple's field types as the writer wrote them (logical
types, nullability dropped, named types resolved) to convert values the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["named_types", "non_null", "partition_field_types", "record_fields"]


def record_fields(schema: Any) -> dict[str, Any]:
    """A record schema's fields by name; empty for anything that is not a record."""
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "record"
        or not isinstance(schema.get("fields"), list)
    ):
        return {}
    return {f["name"]: f for f in schema["fields"] if isinstance(f, dict) and "name" in f}


def named_types(schema: Any, out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every named type defined in ``schema``, so a later reference by name can be resolved."""
    out = {} if out is None else out
    if isinstance(schema, list):
        for s in schema:
            named_types(s, out)
    elif isinstance(schema, dict):
        name = schema.get("name")
        if schema.get("type") in ("record", "fixed", "enum") and isinstance(name, str):
            out[name] = schema
            out[name.rsplit(".", 1)[-1]] = schema
        for f in schema.get("fields", ()) or ():
            if isinstance(f, dict):
                named_types(f.get("type"), out)
        for key in ("items", "values"):
            if key in schema:
                named_types(schema[key], out)
    return out


def non_null(avro_type: Any, named: dict[str, Any]) -> Any:
    """The type an optional union wraps, a named reference resolved; None for a wider union."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        avro_type = rest[0] if len(rest) == 1 else None
    if isinstance(avro_type, str) and avro_type in named:
        avro_type = named[avro_type]
    return avro_type


def partition_field_types(entry_schema: Any) -> list[Any]:
    """The types of a manifest entry schema's partition fields, in order."""
    named = named_types(entry_schema)
    data_file_schema = non_null(record_fields(entry_schema)["data_file"].get("type"), named)
    partition_schema = non_null(record_fields(data_file_schema).get("partition", {}).get("type"), named)
    return [non_null(f.get("type"), named) for f in record_fields(partition_schema).values()]
