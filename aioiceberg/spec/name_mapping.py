"""Name mapping: field ids for data files written without them.

Files imported from elsewhere (plain Parquet, Hive tables) have no field ids, and
Iceberg projects columns by id. The table property ``schema.name-mapping.default``
holds a name mapping (JSON, spec Appendix C) that gives each column name path an id;
readers apply it to such files and treat columns it does not map as absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec.arrow_fields import (
    FIELD_ID_KEY,
    LIST_ELEMENT_NAME,
    MAP_KEY_NAME,
    MAP_VALUE_NAME,
    field_id_of,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import IcebergType, ListType, MapType, NestedField, StructType

__all__ = [
    "DEFAULT_NAME_MAPPING_PROPERTY",
    "MappedField",
    "NameMapping",
    "apply_name_mapping",
    "create_mapping_from_schema",
    "name_mapping_from_json",
    "name_mapping_to_json",
    "schema_as_read",
    "unmapped_field_ids",
    "update_name_mapping",
]

DEFAULT_NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


@dataclass(frozen=True, slots=True)
class MappedField:
    """One field's id (None: known names, no id), its names (aliases), and its children."""

    field_id: int | None
    names: tuple[str, ...]
    fields: tuple[MappedField, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "fields", tuple(self.fields))
        if not self.names:
            raise ValidationError(f"mapped field {self.field_id} has no names")
        _check_level(self.fields, f"field {self.names[0]!r}")

    def child(self, name: str) -> MappedField | None:
        """The child mapped under ``name`` (any of its aliases), or None."""
        return _child(self.fields, name)


def _child(fields: tuple[MappedField, ...], name: str) -> MappedField | None:
    return next((f for f in fields if name in f.names), None)


def _check_level(fields: tuple[MappedField, ...], where: str) -> None:
    """Names and ids must be unique among siblings, or a lookup would be ambiguous (Java rejects it too)."""
    names: set[str] = set()
    ids: set[int] = set()
    for f in fields:
        for name in f.names:
            if name in names:
                raise ValidationError(f"name {name!r} is mapped twice in {where}")
            names.add(name)
        if f.field_id is not None:
            if f.field_id in ids:
                raise ValidationError(f"field id {f.field_id} is mapped twice in {where}")
            ids.add(f.field_id)


@dataclass(frozen=True, slots=True, init=False)
class NameMapping:
    """The top-level mapped fields of a table."""

    fields: tuple[MappedField, ...]

    def __init__(self, fields: Iterable[MappedField] = ()) -> None:
        object.__setattr__(self, "fields", tuple(fields))
        _check_level(self.fields, "the top level")

    def __iter__(self) -> Iterator[MappedField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def find(self, *path: str) -> MappedField | None:
        """The mapped field at a name path (``find("location", "lat")``), or None.

        Each step matches any alias; list elements are ``element``, map keys and values
        ``key`` / ``value``.
        """
        if not path:
            return None
        found = _child(self.fields, path[0])
        for name in path[1:]:
            if found is None:
                return None
            found = found.child(name)
        return found


def _mapped_ids(fields: tuple[MappedField, ...]) -> Iterator[int]:
    for f in fields:
        if f.field_id is not None:
            yield f.field_id
        yield from _mapped_ids(f.fields)


def unmapped_field_ids(schema: Schema, properties: Mapping[str, str]) -> frozenset[int]:
    """Ids of ``schema``'s fields that the table's name mapping cannot resolve.

    In a file without field ids such a column reads as NULL (or its initial default),
    whatever the file holds, so the stats a manifest lists for it describe values no
    reader returns: pruning must not trust them. Empty when the table has no mapping.
    """
    text = properties.get(DEFAULT_NAME_MAPPING_PROPERTY)
    if not text:
        return frozenset()
    mapped = set(_mapped_ids(name_mapping_from_json(text).fields))
    return schema.field_ids() - mapped


def schema_as_read(schema: Schema, properties: Mapping[str, str]) -> Schema:
    """``schema`` as a scan binds, plans and reads it: a required field the name mapping
    cannot resolve, and with no ``initial-default``, is optional.

    In a file without field ids such a field has no column, and the spec reads a column a
    file lacks as NULL (DuckDB does too; Java fails the read instead). Binding a filter to
    the field as required would fold ``a IS NULL`` to false while the rows hold NULL, so
    the one rule lives in the schema: the binder keeps the predicate, the evaluators see
    an optional column, and the reader fills NULLs. ``schema`` itself when nothing changes.
    """
    unresolved = unmapped_field_ids(schema, properties)
    if not unresolved:
        return schema
    fields = tuple(_optional_if_unresolved(f, unresolved) for f in schema.fields)
    if fields == schema.fields:
        return schema
    return Schema(*fields, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids)


def _optional_if_unresolved(f: NestedField, unresolved: frozenset[int]) -> NestedField:
    t = _type_with_optional(f.field_type, unresolved)
    required = f.required and not (f.field_id in unresolved and f.initial_default is None)
    if t is f.field_type and required == f.required:
        return f
    return replace(f, field_type=t, required=required)


def _type_with_optional(t: IcebergType, unresolved: frozenset[int]) -> IcebergType:
    """``t`` with unresolved required struct fields inside made optional (list elements and
    map values are found through their parent, which resolves or not as a whole)."""
    if isinstance(t, StructType):
        fields = tuple(_optional_if_unresolved(f, unresolved) for f in t.fields)
        return t if fields == t.fields else StructType(*fields)
    if isinstance(t, ListType):
        element = _type_with_optional(t.element_type, unresolved)
        return t if element is t.element_type else replace(t, element_type=element)
    if isinstance(t, MapType):
        key = _type_with_optional(t.key_type, unresolved)
        value = _type_with_optional(t.value_type, unresolved)
        if key is t.key_type and value is t.value_type:
            return t
        return replace(t, key_type=key, value_type=value)
    return t


# ---------------------------------------------------------------------------
# JSON (spec Appendix C)
# ---------------------------------------------------------------------------


def name_mapping_to_json(mapping: NameMapping) -> str:
    """Compact JSON, byte-identical to PyIceberg's ``model_dump_json()``."""
    return json.dumps([_field_to_obj(f) for f in mapping.fields], separators=(",", ":"), ensure_ascii=False)


def _field_to_obj(f: MappedField) -> dict[str, Any]:
    obj: dict[str, Any] = {"names": list(f.names)}
    if f.field_id is not None:
        obj["field-id"] = f.field_id
    if f.fields:
        obj["fields"] = [_field_to_obj(c) for c in f.fields]
    return obj


def name_mapping_from_json(data: str | bytes | list[Any]) -> NameMapping:
    """Parse a name mapping from JSON text or its already-decoded list.

    ``field-id`` may be absent or null; ``fields`` may be absent or null. Anything
    else malformed raises InvalidMetadataError naming where.
    """
    where = DEFAULT_NAME_MAPPING_PROPERTY
    obj: Any = data
    if isinstance(data, str | bytes):
        try:
            obj = json.loads(data)
        except ValueError as e:
            raise InvalidMetadataError(f"not valid JSON: {e}", location=where) from None
    try:
        return NameMapping(_fields_from_obj(obj, "mapping"))
    except ValidationError as e:
        raise InvalidMetadataError(str(e), location=where) from None


def _fields_from_obj(obj: Any, where: str) -> list[MappedField]:
    if not isinstance(obj, list):
        raise ValidationError(f"{where}: expected a JSON list of field mappings, got {type(obj).__name__}")
    return [_field_from_obj(item, f"{where}[{i}]") for i, item in enumerate(obj)]


def _field_from_obj(obj: Any, where: str) -> MappedField:
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    names = obj.get("names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValidationError(f"{where}: 'names' must be a non-empty list of strings")
    field_id = obj.get("field-id")
    if field_id is not None and (isinstance(field_id, bool) or not isinstance(field_id, int)):
        raise ValidationError(f"{where}: 'field-id' must be an integer, got {field_id!r}")
    children = obj.get("fields")
    fields = _fields_from_obj(children, f"{where}.fields") if children is not None else []
    return MappedField(field_id, tuple(names), tuple(fields))


# ---------------------------------------------------------------------------
# From a schema, and onto an Arrow schema
# ---------------------------------------------------------------------------


def create_mapping_from_schema(schema: Schema) -> NameMapping:
    """A mapping of every field's current name to its id (what a new table stores)."""
    return NameMapping(_mapped_children(StructType(*schema.fields)))


def _mapped_children(t: IcebergType) -> tuple[MappedField, ...]:
    if isinstance(t, StructType):
        return tuple(MappedField(f.field_id, (f.name,), _mapped_children(f.field_type)) for f in t.fields)
    if isinstance(t, ListType):
        return (MappedField(t.element_id, (LIST_ELEMENT_NAME,), _mapped_children(t.element_type)),)
    if isinstance(t, MapType):
        return (
            MappedField(t.key_id, (MAP_KEY_NAME,), _mapped_children(t.key_type)),
            MappedField(t.value_id, (MAP_VALUE_NAME,), _mapped_children(t.value_type)),
        )
    return ()


def update_name_mapping(mapping: NameMapping, schema: Schema) -> NameMapping:
    """``mapping`` after a schema change to ``schema``, as Java's ``MappingUtil.update``.

    A renamed field gains its new name and keeps the old ones (files written before the
    rename still use them); an added field is mapped under its name; a deleted field's
    entry stays. A name a current field uses is taken from any other entry of its level,
    so a column added under a dropped or renamed column's name does not resolve to it.
    """
    return NameMapping(_updated_level(mapping.fields, _children_of(StructType(*schema.fields))))


def _children_of(t: IcebergType) -> tuple[tuple[int, str, IcebergType], ...]:
    if isinstance(t, StructType):
        return tuple((f.field_id, f.name, f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return ((t.element_id, LIST_ELEMENT_NAME, t.element_type),)
    if isinstance(t, MapType):
        return ((t.key_id, MAP_KEY_NAME, t.key_type), (t.value_id, MAP_VALUE_NAME, t.value_type))
    return ()


def _updated_level(
    old: tuple[MappedField, ...], current: tuple[tuple[int, str, IcebergType], ...]
) -> tuple[MappedField, ...]:
    by_id = {f.field_id: f for f in old if f.field_id is not None}
    taken = {name: fid for fid, name, _ in current}
    out: list[MappedField] = []
    for f in old:
        live = next((c for c in current if c[0] == f.field_id), None)
        names = tuple(n for n in f.names if taken.get(n, f.field_id) == f.field_id)
        if live is not None:
            names = names if live[1] in names else (*names, live[1])
            out.append(MappedField(f.field_id, names, _updated_level(f.fields, _children_of(live[2]))))
        elif names:
            out.append(MappedField(f.field_id, names, f.fields))
    for fid, name, t in current:
        if fid not in by_id:
            out.append(MappedField(fid, (name,), _mapped_children(t)))
    return tuple(out)


def apply_name_mapping(arrow_schema: pa.Schema, mapping: NameMapping) -> pa.Schema:
    """Put ``PARQUET:field_id`` on every field (nested too) the mapping maps.

    A field that already has an id keeps it; a field the mapping does not map stays
    without one, so a reader projecting by id treats it as absent. Arrow list
    elements match ``element`` whatever Arrow named them (often ``item``).
    """
    fields = [_apply_field(f, _child(mapping.fields, f.name)) for f in arrow_schema]
    return pa.schema(fields, metadata=arrow_schema.metadata)


def _apply_field(f: pa.Field, mapped: MappedField | None) -> pa.Field:
    new_type = _apply_type(f.type, mapped)
    if new_type is not f.type:
        f = f.with_type(new_type)
    if mapped is not None and mapped.field_id is not None and field_id_of(f) is None:
        metadata = dict(f.metadata or {})
        metadata[FIELD_ID_KEY] = str(mapped.field_id).encode()
        f = f.with_metadata(metadata)
    return f


def _apply_type(t: pa.DataType, mapped: MappedField | None) -> pa.DataType:
    """``t`` with ids applied inside; ``t`` itself when it has no children."""
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return t  # value types of encoded columns are primitive here
    children = mapped.fields if mapped is not None else ()
    if pa.types.is_struct(t):
        return pa.struct(
            [_apply_field(t.field(i), _child(children, t.field(i).name)) for i in range(t.num_fields)]
        )
    if pa.types.is_map(t):
        return pa.map_(
            _apply_field(t.key_field, _child(children, MAP_KEY_NAME)),
            _apply_field(t.item_field, _child(children, MAP_VALUE_NAME)),
            keys_sorted=t.keys_sorted,
        )
    element_mapped = _child(children, LIST_ELEMENT_NAME)
    if pa.types.is_list(t):
        return pa.list_(_apply_field(t.value_field, element_mapped))
    if pa.types.is_large_list(t):
        return pa.large_list(_apply_field(t.value_field, element_mapped))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_apply_field(t.value_field, element_mapped), t.list_size)
    if pa.types.is_list_view(t):
        return pa.list_view(_apply_field(t.value_field, element_mapped))
    if pa.types.is_large_list_view(t):
        return pa.large_list_view(_apply_field(t.value_field, element_mapped))
    return t
