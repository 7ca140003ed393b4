"""Table schemas: field lookup by id and by dotted name, projection, identifier fields.

Names follow Iceberg's conventions: nested struct fields are ``a.b``; list elements
are ``l.element``; map keys and values are ``m.key`` / ``m.value``. Lookups also
accept the short form that skips ``element`` / ``value`` (as PyIceberg and Java do).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from aioiceberg.errors import ValidationError
from aioiceberg.spec.types import (
    IcebergType,
    ListType,
    MapType,
    NestedField,
    NestedType,
    PrimitiveType,
    StructType,
)

__all__ = ["Schema", "assign_fresh_ids", "index_by_id", "prune_columns"]


@dataclass(frozen=True, eq=False)
class Schema:
    """A struct of fields plus a schema id and the identifier (row key) field ids."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = field(default=())

    def __init__(
        self,
        *fields: NestedField,
        schema_id: int = 0,
        identifier_field_ids: Iterable[int] = (),
    ) -> None:
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "schema_id", schema_id)
        object.__setattr__(self, "identifier_field_ids", tuple(identifier_field_ids))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Schema)
            and self.fields == other.fields
            and self.schema_id == other.schema_id
            and set(self.identifier_field_ids) == set(other.identifier_field_ids)
        )

    def __hash__(self) -> int:
        return hash((self.fields, self.schema_id))

    def same_structure(self, other: Schema) -> bool:
        """Equal fields and identifier fields, ignoring the schema id."""
        return self.fields == other.fields and set(self.identifier_field_ids) == set(
            other.identifier_field_ids
        )

    def __str__(self) -> str:
        inner = "\n".join(f"  {f}" for f in self.fields)
        return f"table {{\n{inner}\n}}"

    @property
    def as_struct(self) -> StructType:
        return StructType(*self.fields)

    @cached_property
    def _by_id(self) -> dict[int, NestedField]:
        return index_by_id(self.as_struct)

    @cached_property
    def _by_name(self) -> dict[str, int]:
        return _index_by_name(self.as_struct)

    @cached_property
    def _by_lower_name(self) -> dict[str, int]:
        return {name.lower(): fid for name, fid in self._by_name.items()}

    @cached_property
    def _name_by_id(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for name, fid in _index_by_name(self.as_struct, short_names=False).items():
            out[fid] = name
        return out

    @cached_property
    def _parents(self) -> dict[int, int]:
        parents: dict[int, int] = {}
        for f in self._by_id.values():
            if isinstance(f.field_type, NestedType):
                for child in f.field_type.fields:
                    parents[child.field_id] = f.field_id
        return parents

    @cached_property
    def highest_field_id(self) -> int:
        return max(self._by_id, default=0)

    def find_field(self, name_or_id: str | int, case_sensitive: bool = True) -> NestedField:
        """The field with this id or dotted name; ValidationError if there is none."""
        if isinstance(name_or_id, int):
            found = self._by_id.get(name_or_id)
            if found is None:
                raise ValidationError(f"no field with id {name_or_id} in schema {self.schema_id}")
            return found
        fid = self.find_field_id(name_or_id, case_sensitive)
        if fid is None:
            raise ValidationError(
                f"no column named {name_or_id!r} in the schema (id {self.schema_id})"
                + self.did_you_mean(name_or_id, case_sensitive)
            )
        return self._by_id[fid]

    def close_names(self, name: str, case_sensitive: bool = True) -> list[str]:
        """Up to three full column names spelled like ``name`` (in any case), closest first:
        the "did you mean" of every unknown column, in filters and in projections alike."""
        known = [n for n in (self._name_by_id.get(f.field_id) for f in self.all_fields()) if n]
        same_letters = [k for k in known if k.lower() == name.lower()]  # REGION for region
        by_lower: dict[str, list[str]] = {}
        for k in known:
            by_lower.setdefault(k.lower(), []).append(k)
        close = [
            k for low in difflib.get_close_matches(name.lower(), list(by_lower), n=3) for k in by_lower[low]
        ]
        return list(dict.fromkeys(same_letters + close))[:3]

    def did_you_mean(self, name: str, case_sensitive: bool = True) -> str:
        """``"; did you mean 'id'?"``, or nothing when no column is spelled alike."""
        close = self.close_names(name, case_sensitive)
        return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""

    def find_field_id(self, name: str, case_sensitive: bool = True) -> int | None:
        if case_sensitive:
            return self._by_name.get(name)
        return self._by_lower_name.get(name.lower())

    def find_type(self, name_or_id: str | int, case_sensitive: bool = True) -> IcebergType:
        return self.find_field(name_or_id, case_sensitive).field_type

    def find_column_name(self, field_id: int) -> str | None:
        """The full dotted name of a field id, or None."""
        return self._name_by_id.get(field_id)

    def field_ids(self) -> frozenset[int]:
        return frozenset(self._by_id)

    def all_fields(self) -> Iterator[NestedField]:
        """Every field, nested ones included (list elements and map keys/values too)."""
        return iter(self._by_id.values())

    def parent_id(self, field_id: int) -> int | None:
        return self._parents.get(field_id)

    def column_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def identifier_field_names(self) -> list[str]:
        return [self._name_by_id[i] for i in self.identifier_field_ids if i in self._name_by_id]

    def select(self, *names: str, case_sensitive: bool = True) -> Schema:
        """Project to the named columns (dotted names allowed), keeping the schema id."""
        ids: set[int] = set()
        for name in names:
            if name == "*":
                return self
            ids.add(self.find_field(name, case_sensitive).field_id)
        return prune_columns(self, ids)

    def validate_identifier_fields(self) -> None:
        """Identifier fields must be required primitives (not float/double), not inside lists or maps."""
        for fid in self.identifier_field_ids:
            f = self._by_id.get(fid)
            if f is None:
                raise ValidationError(f"identifier field id {fid} is not in schema {self.schema_id}")
            if not isinstance(f.field_type, PrimitiveType):
                raise ValidationError(f"identifier field {f.name!r} must be a primitive type")
            if str(f.field_type) in ("float", "double"):
                raise ValidationError(f"identifier field {f.name!r} must not be float or double")
            if not f.required:
                raise ValidationError(f"identifier field {f.name!r} must be required")
            parent = self._parents.get(fid)
            while parent is not None:
                ptype = self._by_id[parent].field_type
                if isinstance(ptype, ListType | MapType):
                    raise ValidationError(f"identifier field {f.name!r} must not be nested in a list or map")
                parent = self._parents.get(parent)

    def validate_unique_ids(self) -> None:
        seen: set[int] = set()
        for f in _walk(self.as_struct):
            if f.field_id in seen:
                raise ValidationError(f"field id {f.field_id} appears twice in schema {self.schema_id}")
            seen.add(f.field_id)


def _walk(t: IcebergType) -> Iterator[NestedField]:
    if isinstance(t, NestedType):
        for f in t.fields:
            yield f
            yield from _walk(f.field_type)


def index_by_id(struct: StructType) -> dict[int, NestedField]:
    return {f.field_id: f for f in _walk(struct)}


def _index_by_name(struct: StructType, short_names: bool = True) -> dict[str, int]:
    index: dict[str, int] = {}
    short: dict[str, int] = {}

    def visit(t: IcebergType, full: str, brief: str) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                fname = f"{full}.{f.name}" if full else f.name
                sname = f"{brief}.{f.name}" if brief else f.name
                index[fname] = f.field_id
                if sname != fname:
                    short[sname] = f.field_id
                visit(f.field_type, fname, sname)
        elif isinstance(t, ListType):
            fname = f"{full}.element"
            index[fname] = t.element_id
            visit(t.element_type, fname, brief)
        elif isinstance(t, MapType):
            index[f"{full}.key"] = t.key_id
            visit(t.key_type, f"{full}.key", f"{brief}.key")
            fname = f"{full}.value"
            index[fname] = t.value_id
            visit(t.value_type, fname, brief)

    visit(struct, "", "")
    if short_names:
        for name, fid in short.items():
            index.setdefault(name, fid)
    return index


def prune_columns(schema: Schema, selected: set[int], select_full_types: bool = True) -> Schema:
    """Keep only the selected field ids and the structs that lead to them.

    A selected struct/list/map keeps its full type when ``select_full_types``.
    """

    def prune(t: IcebergType) -> IcebergType | None:
        if isinstance(t, StructType):
            kept: list[NestedField] = []
            for f in t.fields:
                if f.field_id in selected:
                    if select_full_types or not isinstance(f.field_type, NestedType):
                        kept.append(f)
                        continue
                    sub = prune(f.field_type)
                    kept.append(_with_type(f, sub if sub is not None else f.field_type))
                else:
                    sub = prune(f.field_type)
                    if sub is not None:
                        kept.append(_with_type(f, sub))
            return StructType(*kept) if kept else None
        if isinstance(t, ListType):
            if t.element_id in selected:
                return t
            sub = prune(t.element_type)
            return ListType(t.element_id, sub, t.element_required) if sub is not None else None
        if isinstance(t, MapType):
            if t.value_id in selected or t.key_id in selected:
                return t
            sub = prune(t.value_type)
            return (
                MapType(t.key_id, t.key_type, t.value_id, sub, t.value_required) if sub is not None else None
            )
        return None

    result = prune(schema.as_struct)
    fields = result.fields if isinstance(result, StructType) else ()
    ids = index_by_id(StructType(*fields))
    return Schema(
        *fields,
        schema_id=schema.schema_id,
        identifier_field_ids=[i for i in schema.identifier_field_ids if i in ids],
    )


def _with_type(f: NestedField, t: IcebergType) -> NestedField:
    return NestedField(f.field_id, f.name, t, f.required, f.doc, f.initial_default, f.write_default)


def assign_fresh_ids(schema: Schema, start: int = 1) -> Schema:
    """Renumber every field id depth-first from ``start`` (used when creating a table)."""
    counter = [start - 1]
    old_to_new: dict[int, int] = {}

    def next_id(old: int) -> int:
        counter[0] += 1
        old_to_new[old] = counter[0]
        return counter[0]

    def renumber_struct(t: StructType) -> StructType:
        new_ids = [next_id(f.field_id) for f in t.fields]
        return StructType(
            *(
                NestedField(
                    nid, f.name, renumber(f.field_type), f.required, f.doc, f.initial_default, f.write_default
                )
                for nid, f in zip(new_ids, t.fields, strict=True)
            )
        )

    def renumber(t: IcebergType) -> IcebergType:
        if isinstance(t, StructType):
            return renumber_struct(t)
        if isinstance(t, ListType):
            eid = next_id(t.element_id)
            return ListType(eid, renumber(t.element_type), t.element_required)
        if isinstance(t, MapType):
            kid = next_id(t.key_id)
            vid = next_id(t.value_id)
            return MapType(kid, renumber(t.key_type), vid, renumber(t.value_type), t.value_required)
        return t

    struct = renumber_struct(schema.as_struct)
    return Schema(
        *struct.fields,
        schema_id=schema.schema_id,
        identifier_field_ids=[old_to_new[i] for i in schema.identifier_field_ids if i in old_to_new],
    )
