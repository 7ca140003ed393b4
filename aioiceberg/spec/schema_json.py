"""JSON forms (Appendix C) of types, schemas, partition specs and sort orders.

Kept apart from the domain types so the model stays free of on-disk shapes. Decoders
raise InvalidMetadataError naming the offending element.
"""

from __future__ import annotations

from typing import Any

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec import values
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import NullOrder, SortDirection, SortField, SortOrder
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    parse_primitive,
)

__all__ = [
    "partition_spec_from_json",
    "partition_spec_to_json",
    "schema_from_json",
    "schema_to_json",
    "sort_order_from_json",
    "sort_order_to_json",
    "type_from_json",
    "type_to_json",
]


def _values() -> Any:
    return values


def type_to_json(t: IcebergType) -> Any:
    if isinstance(t, PrimitiveType):
        return str(t)
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {
            "type": "list",
            "element-id": t.element_id,
            "element": type_to_json(t.element_type),
            "element-required": t.element_required,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "key-id": t.key_id,
            "key": type_to_json(t.key_type),
            "value-id": t.value_id,
            "value": type_to_json(t.value_type),
            "value-required": t.value_required,
        }
    raise ValidationError(f"cannot serialize type {t!r}")


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f.field_id,
        "name": f.name,
        "required": f.required,
        "type": type_to_json(f.field_type),
    }
    if f.doc is not None:
        out["doc"] = f.doc
    if f.initial_default is not None:
        out["initial-default"] = _values().to_json(f.initial_default, f.field_type)
    if f.write_default is not None:
        out["write-default"] = _values().to_json(f.write_default, f.field_type)
    return out


def _req(obj: Any, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"{what} must be a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidMetadataError(f"{what} is missing required field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidMetadataError(f"{what}: field {key!r} has the wrong type ({type(value).__name__})")
    return value


def type_from_json(obj: Any, what: str = "type") -> IcebergType:
    try:
        if isinstance(obj, str):
            return parse_primitive(obj)
        kind = _req(obj, "type", str, what)
        if kind == "struct":
            fields = _req(obj, "fields", list, what)
            return StructType(*(field_from_json(f) for f in fields))
        if kind == "list":
            return ListType(
                _req(obj, "element-id", int, what),
                type_from_json(_req(obj, "element", (str, dict), what), f"{what}.element"),
                bool(_req(obj, "element-required", bool, what)),
            )
        if kind == "map":
            return MapType(
                _req(obj, "key-id", int, what),
                type_from_json(_req(obj, "key", (str, dict), what), f"{what}.key"),
                _req(obj, "value-id", int, what),
                type_from_json(_req(obj, "value", (str, dict), what), f"{what}.value"),
                bool(_req(obj, "value-required", bool, what)),
            )
        raise InvalidMetadataError(f"{what}: unknown type {kind!r}")
    except ValidationError as e:
        raise InvalidMetadataError(f"{what}: {e}") from e


def field_from_json(obj: Any) -> NestedField:
    fid = _req(obj, "id", int, "schema field")
    what = f"schema field {fid}"
    name = _req(obj, "name", str, what)
    ftype = type_from_json(_req(obj, "type", (str, dict), what), f"field {name!r}")
    required = _req(obj, "required", bool, what)
    doc = obj.get("doc")
    values = _values()
    try:
        initial = (
            values.from_json(obj["initial-default"], ftype)
            if obj.get("initial-default") is not None
            else None
        )
        write = (
            values.from_json(obj["write-default"], ftype) if obj.get("write-default") is not None else None
        )
    except (ValidationError, ValueError, TypeError, KeyError) as e:
        raise InvalidMetadataError(f"field {name!r}: bad default value: {e}") from e
    return NestedField(fid, name, ftype, required, doc if isinstance(doc, str) else None, initial, write)


def schema_to_json(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "struct",
        "schema-id": schema.schema_id,
        "fields": [field_to_json(f) for f in schema.fields],
    }
    if schema.identifier_field_ids:
        out["identifier-field-ids"] = list(schema.identifier_field_ids)
    return out


def schema_from_json(obj: Any) -> Schema:
    """A schema object; like Java's SchemaParser, it must say ``"type": "struct"`` (a document
    without it is not one Iceberg wrote, and accepting it would hide the damage)."""
    sid = obj.get("schema-id", 0) if isinstance(obj, dict) else 0
    if not isinstance(sid, int) or isinstance(sid, bool):
        raise InvalidMetadataError("schema: 'schema-id' must be an integer")
    kind = _req(obj, "type", str, f"schema {sid}")
    if kind != "struct":
        raise InvalidMetadataError(f"schema {sid}: 'type' must be 'struct', got {kind!r}")
    fields = _req(obj, "fields", list, f"schema {sid}")
    ident = obj.get("identifier-field-ids") or []
    if not isinstance(ident, list) or not all(isinstance(i, int) for i in ident):
        raise InvalidMetadataError(f"schema {sid}: 'identifier-field-ids' must be a list of integers")
    return Schema(*(field_from_json(f) for f in fields), schema_id=sid, identifier_field_ids=ident)


def partition_spec_to_json(spec: PartitionSpec, format_version: int = 2) -> dict[str, Any]:
    return {"spec-id": spec.spec_id, "fields": partition_fields_to_json(spec, format_version)}


def partition_fields_to_json(spec: PartitionSpec, format_version: int = 2) -> list[dict[str, Any]]:
    out = []
    for f in spec.fields:
        item: dict[str, Any] = {"name": f.name, "transform": str(f.transform)}
        if len(f.source_ids) > 1:
            item["source-ids"] = list(f.source_ids)
        else:
            item["source-id"] = f.source_id
        item["field-id"] = f.field_id
        out.append(item)
    return out


def partition_fields_from_json(items: Any, what: str = "partition spec") -> tuple[PartitionField, ...]:
    if not isinstance(items, list):
        raise InvalidMetadataError(f"{what}: 'fields' must be a list")
    out: list[PartitionField] = []
    next_id = 1000
    for item in items:
        name = _req(item, "name", str, f"{what} field")
        transform = parse_transform(_req(item, "transform", str, f"{what} field {name!r}"))
        if "source-ids" in item:
            ids = _req(item, "source-ids", list, f"{what} field {name!r}")
            if not ids or not all(isinstance(i, int) for i in ids):
                raise InvalidMetadataError(f"{what} field {name!r}: 'source-ids' must be non-empty integers")
            source_ids = tuple(ids)
        else:
            source_ids = (_req(item, "source-id", int, f"{what} field {name!r}"),)
        # v1 specs may omit field ids: they are assigned from 1000 in order.
        fid = item.get("field-id", next_id)
        if not isinstance(fid, int):
            raise InvalidMetadataError(f"{what} field {name!r}: 'field-id' must be an integer")
        next_id = fid + 1
        out.append(PartitionField(source_ids, fid, transform, name))
    return tuple(out)


def partition_spec_from_json(obj: Any) -> PartitionSpec:
    sid = _req(obj, "spec-id", int, "partition spec")
    return PartitionSpec(sid, partition_fields_from_json(obj.get("fields", []), f"partition spec {sid}"))


def sort_order_to_json(order: SortOrder) -> dict[str, Any]:
    fields = []
    for f in order.fields:
        item: dict[str, Any] = {"transform": str(f.transform)}
        if len(f.source_ids) > 1:
            item["source-ids"] = list(f.source_ids)
        else:
            item["source-id"] = f.source_id
        item["direction"] = f.direction.value
        item["null-order"] = f.null_order.value
        fields.append(item)
    return {"order-id": order.order_id, "fields": fields}


def sort_order_from_json(obj: Any) -> SortOrder:
    oid = _req(obj, "order-id", int, "sort order")
    what = f"sort order {oid}"
    items = obj.get("fields", [])
    if not isinstance(items, list):
        raise InvalidMetadataError(f"{what}: 'fields' must be a list")
    fields = []
    for item in items:
        transform = parse_transform(_req(item, "transform", str, what))
        if "source-ids" in item:
            source_ids = tuple(_req(item, "source-ids", list, what))
        else:
            source_ids = (_req(item, "source-id", int, what),)
        try:
            direction = SortDirection(_req(item, "direction", str, what))
            null_order = NullOrder(_req(item, "null-order", str, what))
        except ValueError as e:
            raise InvalidMetadataError(f"{what}: {e}") from e
        fields.append(SortField(source_ids, transform, direction, null_order))
    return SortOrder(oid, tuple(fields))
