"""Schema evolution: add, rename, delete, reorder, promote, defaults, identifier fields.

Follows Java's ``SchemaUpdate`` and PyIceberg's ``UpdateSchema`` so the same operations
give the same field ids and shapes: new ids continue from the table's last-column-id,
a new column takes its id before the ids of its nested fields, adds are applied before
moves. Every rule the spec sets (only safe type promotions, required columns need a v3
initial default, no dropping what a partition spec, sort order or row identifier still
uses) is checked when the operation is asked for, so nothing invalid reaches a commit.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, Self

from aioiceberg.commit.evolution import ChangeSink, PendingUpdate
from aioiceberg.commit.requirements import (
    AssertCurrentSchemaId,
    AssertLastAssignedFieldId,
    TableRequirement,
)
from aioiceberg.commit.updates import LAST_ADDED, AddSchema, SetCurrentSchema, SetProperties, TableUpdate
from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec import values
from aioiceberg.spec.arrow import arrow_to_iceberg_type, arrow_to_schema_assign_ids
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.name_mapping import (
    DEFAULT_NAME_MAPPING_PROPERTY,
    name_mapping_to_json,
    update_name_mapping,
)
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema, assign_fresh_ids
from aioiceberg.spec.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    NestedType,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    parse_primitive,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TABLE_ROOT_ID", "UpdateSchema", "is_promotion_allowed"]

TABLE_ROOT_ID = -1
"""The parent id of top-level columns in the add/move bookkeeping."""

ColumnPath = str | tuple[str, ...]


def is_promotion_allowed(old: IcebergType, new: IcebergType) -> bool:
    """The spec's safe promotions: int->long, float->double, decimal(P,S)->decimal(P',S) with P' >= P.

    Each one reads every value old files hold exactly, so no data file is rewritten.
    """
    if old == new:
        return True
    if isinstance(old, IntegerType):
        return isinstance(new, LongType)
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return False


class _MoveOp(Enum):
    FIRST = "first"
    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True, slots=True)
class _Move:
    field_id: int
    full_name: str
    op: _MoveOp
    other_field_id: int | None = None


def _join(path: ColumnPath) -> str:
    return ".".join(path) if isinstance(path, tuple) else path


def _as_type(field_type: IcebergType | str | pa.DataType) -> IcebergType:
    if isinstance(field_type, IcebergType):
        return field_type
    if isinstance(field_type, str):
        return parse_primitive(field_type)

    return arrow_to_iceberg_type(field_type)


def _coerce_default(value: Any, field_type: IcebergType, column: str) -> Any:
    """A default in the project's value convention, checked against the column's type."""
    if not isinstance(field_type, PrimitiveType) or isinstance(field_type, UnknownType):
        raise ValidationError(
            f"column {column!r}: default values are only supported for primitive columns, not {field_type}"
        )
    nanos = isinstance(field_type, TimestampNanoType | TimestamptzNanoType)
    try:
        if isinstance(value, str) and not isinstance(field_type, StringType):
            return values.from_json(value, field_type)  # ISO dates, decimals, uuids, hex...
        if isinstance(value, dt.datetime) and isinstance(
            field_type, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType
        ):
            if isinstance(field_type, TimestamptzType | TimestamptzNanoType) and value.tzinfo is None:
                raise ValidationError("a timestamptz default needs a timezone-aware datetime")
            micros = values.timestamp_to_micros(value)
            value = micros * 1000 if nanos else micros
        elif (
            isinstance(value, dt.date)
            and not isinstance(value, dt.datetime)
            and isinstance(field_type, DateType)
        ):
            value = values.date_to_days(value)
        elif isinstance(value, dt.time) and isinstance(field_type, TimeType):
            value = values.time_to_micros(value)
        elif isinstance(field_type, DecimalType) and isinstance(value, int | float):
            value = Decimal(str(value))
        elif isinstance(value, str) and isinstance(field_type, StringType):
            return value
        if isinstance(value, uuid.UUID | bytes | bool | int | float | Decimal):
            return values.from_json(values.to_json(value, field_type), field_type)
        raise ValidationError(f"{type(value).__name__} is not a {field_type} value")
    except (ValidationError, InvalidMetadataError) as e:
        raise ValidationError(
            f"column {column!r}: invalid default value {value!r} for {field_type}: {e}"
        ) from e


class UpdateSchema(PendingUpdate):
    """Collects schema changes against one table version; ``async with`` commits them.

    Column paths are dotted names (``"location.lat"``, ``"points.element.x"``, or the
    short ``"points.x"``) or tuples; ``add_column`` takes a tuple for nested columns
    because a dot may be part of a name.
    """

    def __init__(
        self,
        base: TableMetadata,
        *,
        allow_incompatible_changes: bool = False,
        case_sensitive: bool = True,
        sink: ChangeSink | None = None,
    ) -> None:
        super().__init__(base, sink)
        self._schema = base.schema()
        self._format_version = base.format_version
        self._last_column_id = base.last_column_id
        self._allow_incompatible = allow_incompatible_changes
        self._case_sensitive = case_sensitive
        self._identifier_names: list[str] = list(self._schema.identifier_field_names)
        self._adds: dict[int, list[NestedField]] = {}
        self._updates: dict[int, NestedField] = {}
        self._deletes: set[int] = set()
        self._moves: dict[int, list[_Move]] = {}
        self._added_name_to_id: dict[str, int] = {}
        self._added_parent: dict[int, int] = {}

    # -- lookups -----------------------------------------------------------------------

    def _find(self, name: str) -> NestedField:
        fid = self._schema.find_field_id(name, self._case_sensitive)
        if fid is None:
            raise ValidationError(f"column {name!r} does not exist in schema {self._schema.schema_id}")
        return self._schema.find_field(fid)

    def _name(self, field_id: int) -> str:
        return self._schema.find_column_name(field_id) or str(field_id)

    def _parent_of(self, field_id: int) -> int:
        if field_id in self._added_parent:
            return self._added_parent[field_id]
        parent = self._schema.parent_id(field_id)
        return TABLE_ROOT_ID if parent is None else parent

    def _current(self, f: NestedField) -> NestedField:
        return self._updates.get(f.field_id, f)

    def _next_id(self) -> int:
        self._last_column_id += 1
        return self._last_column_id

    def _check_not_deleted(self, f: NestedField, name: str, action: str) -> None:
        if f.field_id in self._deletes:
            raise ValidationError(f"cannot {action} column {name!r}: it is deleted in this change")

    # -- operations --------------------------------------------------------------------

    def add_column(
        self,
        path: ColumnPath,
        field_type: IcebergType | str | pa.DataType,
        doc: str | None = None,
        required: bool = False,
        default_value: Any = None,
    ) -> Self:
        """Add a column (a tuple path adds inside a struct, a list's element or a map's value).

        Optional by default. A required column needs ``default_value`` (its v3
        initial-default, which old data files read as) unless incompatible changes are
        allowed, since rows written before it exist without a value.
        """
        if isinstance(path, str):
            if "." in path:
                raise ValidationError(
                    f"cannot add column {path!r}: the name is ambiguous, pass a tuple such as "
                    f"{tuple(path.split('.'))!r} to add a nested column"
                )
            path = (path,)
        if not path or not path[-1]:
            raise ValidationError("cannot add a column without a name")
        name = path[-1]
        parent_path = ".".join(path[:-1])
        full_name = ".".join(path)
        parent_id = TABLE_ROOT_ID
        if parent_path:
            parent = self._find(parent_path)
            self._check_not_deleted(parent, parent_path, "add a field to")
            ptype = parent.field_type
            if isinstance(ptype, MapType):
                parent = ptype.value_field
            elif isinstance(ptype, ListType):
                parent = ptype.element_field
            if not isinstance(parent.field_type, StructType):
                raise ValidationError(
                    f"cannot add column {full_name!r}: {parent_path!r} is {parent.field_type}, not a struct"
                )
            parent_id = parent.field_id
        existing = self._schema.find_field_id(full_name, self._case_sensitive)
        if existing is not None and existing not in self._deletes:
            raise ValidationError(f"cannot add column {full_name!r}: a column with that name already exists")
        if any(
            n == full_name or (not self._case_sensitive and n.lower() == full_name.lower())
            for n in self._added_name_to_id
        ):
            raise ValidationError(f"cannot add column {full_name!r}: it is already added in this change")

        iceberg_type = _as_type(field_type)
        self._check_type_version(iceberg_type, full_name)
        if isinstance(iceberg_type, UnknownType) and (required or default_value is not None):
            raise ValidationError(
                f"cannot add column {full_name!r}: unknown-typed columns must be optional without defaults"
            )
        initial_default = None
        if default_value is not None:
            if self._format_version < 3:
                raise ValidationError(
                    f"cannot add column {full_name!r} with a default value: defaults need format version 3, "
                    f"the table is v{self._format_version} (upgrade_table_version(3) first)"
                )
            initial_default = _coerce_default(default_value, iceberg_type, full_name)
        if required and initial_default is None and not self._allow_incompatible:
            raise ValidationError(
                f"cannot add required column {full_name!r}: existing rows have no value for it; "
                "give it a default_value (format v3) or add it as optional"
            )

        new_id = self._next_id()
        # Nested ids follow the column's own id, depth first, as Java and PyIceberg assign them.
        wrapper = assign_fresh_ids(Schema(NestedField(0, name, iceberg_type)), start=new_id)
        self._last_column_id = max(self._last_column_id, wrapper.highest_field_id)
        new_field = NestedField(
            new_id,
            name,
            wrapper.fields[0].field_type,
            required,
            doc,
            initial_default,
            initial_default,
        )
        self._adds.setdefault(parent_id, []).append(new_field)
        self._added_name_to_id[full_name] = new_id
        self._added_parent[new_id] = parent_id
        return self

    def delete_column(self, path: ColumnPath) -> Self:
        """Drop a column (and its nested fields) from the current schema; old data stays readable."""
        name = _join(path)
        f = self._find(name)
        if f.field_id in self._adds:
            raise ValidationError(f"cannot delete column {name!r}: fields are added to it in this change")
        if f.field_id in self._updates:
            raise ValidationError(f"cannot delete column {name!r}: it is updated in this change")
        parent = self._schema.parent_id(f.field_id)
        if parent is not None and not isinstance(self._schema.find_type(parent), StructType):
            raise ValidationError(
                f"cannot delete column {name!r}: list elements and map keys/values cannot be deleted"
            )
        self._deletes.add(f.field_id)
        return self

    def rename_column(self, path_from: ColumnPath, new_name: str) -> Self:
        """Rename a column in place (same field id, so data files need no change)."""
        name = _join(path_from)
        f = self._find(name)
        self._check_not_deleted(f, name, "rename")
        if not new_name:
            raise ValidationError(f"cannot rename column {name!r} to an empty name")
        parent = self._schema.parent_id(f.field_id)
        if parent is not None and not isinstance(self._schema.find_type(parent), StructType):
            raise ValidationError(
                f"cannot rename column {name!r}: list elements and map keys/values have fixed names"
            )
        self._updates[f.field_id] = replace(self._current(f), name=new_name)
        full = self._name(f.field_id)
        for i, ident in enumerate(self._identifier_names):
            if ident == full:
                self._identifier_names[i] = full[: len(full) - len(f.name)] + new_name
        return self

    def update_column(
        self,
        path: ColumnPath,
        field_type: IcebergType | str | pa.DataType | None = None,
        required: bool | None = None,
        doc: str | None = None,
    ) -> Self:
        """Promote a primitive column's type (int->long, float->double, wider decimal) and/or set its doc."""
        name = _join(path)
        if field_type is None and required is None and doc is None:
            return self
        f = self._find(name)
        self._check_not_deleted(f, name, "update")
        current = self._current(f)
        new_type = current.field_type
        if field_type is not None:
            new_type = _as_type(field_type)
            if not isinstance(f.field_type, PrimitiveType):
                raise ValidationError(
                    f"cannot change the type of column {name!r}: {f.field_type} is not a primitive"
                )
            self._check_type_version(new_type, name)
            if not is_promotion_allowed(f.field_type, new_type):
                raise ValidationError(
                    f"cannot change column {name!r} from {f.field_type} to {new_type}: only int->long, "
                    "float->double and widening a decimal's precision (same scale) are safe promotions"
                )
        self._updates[f.field_id] = replace(
            current, field_type=new_type, doc=doc if doc is not None else current.doc
        )
        if required is not None:
            self._set_required(name, required)
        return self

    def make_column_optional(self, path: ColumnPath) -> Self:
        """Allow nulls in a column (always safe)."""
        self._set_required(_join(path), False)
        return self

    def require_column(self, path: ColumnPath) -> Self:
        """Forbid nulls in a column; only with ``allow_incompatible_changes`` (old rows may hold nulls)."""
        self._set_required(_join(path), True)
        return self

    def _set_required(self, name: str, required: bool) -> None:
        f = self._find(name)
        current = self._current(f)
        if current.required == required:
            return
        if required and not self._allow_incompatible:
            raise ValidationError(
                f"cannot make column {name!r} required: existing rows may hold nulls "
                "(pass allow_incompatible_changes=True to force)"
            )
        self._check_not_deleted(f, name, "update")
        self._updates[f.field_id] = replace(current, required=required)

    def set_default_value(self, path: ColumnPath, default_value: Any) -> Self:
        """Set a column's v3 write-default (the initial-default is fixed when a column is added)."""
        name = _join(path)
        f = self._find(name)
        self._check_not_deleted(f, name, "update")
        if self._format_version < 3:
            raise ValidationError(
                f"cannot set a default value on column {name!r}: defaults need format version 3, "
                f"the table is v{self._format_version}"
            )
        current = self._current(f)
        value = None if default_value is None else _coerce_default(default_value, current.field_type, name)
        if current.required and value is None and not self._allow_incompatible:
            raise ValidationError(f"cannot clear the write default of required column {name!r}")
        self._updates[f.field_id] = replace(current, write_default=value)
        return self

    def set_identifier_fields(self, *names: str) -> Self:
        """Replace the row-identifier columns (checked against the resulting schema)."""
        self._identifier_names = list(names)
        return self

    def _find_for_move(self, name: str) -> int | None:
        fid = self._schema.find_field_id(name, self._case_sensitive)
        if fid is not None:
            return fid
        if self._case_sensitive:
            return self._added_name_to_id.get(name)
        low = name.lower()
        return next((i for n, i in self._added_name_to_id.items() if n.lower() == low), None)

    def _move(self, name: str, op: _MoveOp, other: str | None = None) -> Self:
        fid = self._find_for_move(name)
        if fid is None:
            raise ValidationError(f"cannot move column {name!r}: it does not exist")
        if fid in self._deletes:
            raise ValidationError(f"cannot move column {name!r}: it is deleted in this change")
        other_id = None
        if other is not None:
            other_id = self._find_for_move(other)
            if other_id is None:
                raise ValidationError(
                    f"cannot move column {name!r} {op.value} {other!r}: {other!r} does not exist"
                )
            if other_id == fid:
                raise ValidationError(f"cannot move column {name!r} {op.value} itself")
            if self._parent_of(other_id) != self._parent_of(fid):
                raise ValidationError(
                    f"cannot move column {name!r} {op.value} {other!r}: they are in different structs"
                )
        parent = self._parent_of(fid)
        if parent != TABLE_ROOT_ID and not isinstance(self._schema.find_type(parent), StructType):
            raise ValidationError(f"cannot move column {name!r}: only struct fields can be reordered")
        self._moves.setdefault(parent, []).append(_Move(fid, name, op, other_id))
        return self

    def move_first(self, path: ColumnPath) -> Self:
        return self._move(_join(path), _MoveOp.FIRST)

    def move_before(self, path: ColumnPath, before_path: ColumnPath) -> Self:
        return self._move(_join(path), _MoveOp.BEFORE, _join(before_path))

    def move_after(self, path: ColumnPath, after_path: ColumnPath) -> Self:
        return self._move(_join(path), _MoveOp.AFTER, _join(after_path))

    def union_by_name(self, new_schema: Schema | pa.Schema) -> Self:
        """Evolve towards ``new_schema`` matching columns by name: add what is missing, widen
        types, make columns optional, copy docs. Never deletes; a narrower type is kept."""
        if not isinstance(new_schema, Schema):
            new_schema = arrow_to_schema_assign_ids(new_schema)
        self._union_struct(new_schema.fields, self._schema.fields, None)
        return self

    def _union_struct(
        self, fields: tuple[NestedField, ...], partner: tuple[NestedField, ...], parent_name: str | None
    ) -> None:
        missing: list[NestedField] = []
        for f in fields:
            if self._case_sensitive:
                existing = next((p for p in partner if p.name == f.name), None)
            else:
                existing = next((p for p in partner if p.name.lower() == f.name.lower()), None)
            if existing is None:
                missing.append(f)
            else:
                self._union_field(f, existing)
        # Nested additions first, then this struct's: the id order PyIceberg's visitor gives.
        for f in missing:
            path = (f.name,) if parent_name is None else (parent_name, f.name)
            self.add_column(path, f.field_type, doc=f.doc, required=f.required)

    def _union_field(self, new: NestedField, existing: NestedField) -> None:
        full_name = self._name(existing.field_id)
        nt, et = new.field_type, existing.field_type
        if isinstance(nt, StructType) and isinstance(et, StructType):
            self._union_struct(nt.fields, et.fields, full_name)
        elif isinstance(nt, ListType) and isinstance(et, ListType):
            self._union_field(nt.element_field, et.element_field)
        elif isinstance(nt, MapType) and isinstance(et, MapType):
            self._union_field(nt.key_field, et.key_field)
            self._union_field(nt.value_field, et.value_field)
        elif isinstance(nt, NestedType) or isinstance(et, NestedType):
            raise ValidationError(
                f"cannot union column {full_name!r}: {et} and {nt} are different kinds of type"
            )
        if new.optional and existing.required:
            self.make_column_optional(full_name)
        if isinstance(nt, PrimitiveType) and nt != et and not is_promotion_allowed(nt, et):
            self.update_column(full_name, field_type=nt)
        if new.doc is not None and new.doc != existing.doc:
            self.update_column(full_name, doc=new.doc)

    # -- result ------------------------------------------------------------------------

    def _check_type_version(self, t: IcebergType, name: str) -> None:
        if isinstance(t, PrimitiveType) and t.min_format_version > self._format_version:
            raise ValidationError(
                f"column {name!r}: type {t} needs format version {t.min_format_version}, "
                f"the table is v{self._format_version}"
            )
        if isinstance(t, NestedType):
            for child in t.fields:
                self._check_type_version(child.field_type, f"{name}.{child.name}")

    def apply(self) -> Schema:
        """The evolved schema (its id is the table's next schema id), fully validated."""
        fields = self._apply_fields(self._schema.fields, TABLE_ROOT_ID)
        identifier_ids = self._resolve_identifiers(Schema(*fields))
        next_id = max(s.schema_id for s in self._base.schemas) + 1
        schema = Schema(*fields, schema_id=next_id, identifier_field_ids=identifier_ids)
        self._validate(schema)
        return schema

    def _apply_fields(self, fields: tuple[NestedField, ...], parent_id: int) -> tuple[NestedField, ...]:
        out: list[NestedField] = []
        for f in fields:
            if f.field_id in self._deletes:
                continue
            current = self._current(f)
            field_type = current.field_type if current.field_type != f.field_type else self._apply_type(f)
            out.append(replace(current, field_type=field_type))
        out.extend(self._adds.get(parent_id, ()))
        for move in self._moves.get(parent_id, ()):
            moving = next(x for x in out if x.field_id == move.field_id)
            out = [x for x in out if x.field_id != move.field_id]
            if move.op is _MoveOp.FIRST:
                out.insert(0, moving)
            else:
                pos = next(i for i, x in enumerate(out) if x.field_id == move.other_field_id)
                out.insert(pos if move.op is _MoveOp.BEFORE else pos + 1, moving)
        return tuple(out)

    def _apply_type(self, f: NestedField) -> IcebergType:
        t = f.field_type
        if isinstance(t, StructType):
            return StructType(*self._apply_fields(t.fields, f.field_id))
        if isinstance(t, ListType):
            element = self._current(t.element_field)
            element_type = (
                element.field_type
                if element.field_type != t.element_type
                else self._apply_type(t.element_field)
            )
            return ListType(t.element_id, element_type, element.required)
        if isinstance(t, MapType):
            if t.key_id in self._updates or t.key_id in self._adds or t.key_id in self._deletes:
                raise ValidationError(f"cannot change the keys of map column {self._name(f.field_id)!r}")
            value = self._current(t.value_field)
            value_type = (
                value.field_type if value.field_type != t.value_type else self._apply_type(t.value_field)
            )
            return MapType(t.key_id, t.key_type, t.value_id, value_type, value.required)
        return t

    def _resolve_identifiers(self, schema: Schema) -> list[int]:
        ids: list[int] = []
        for name in self._identifier_names:
            fid = schema.find_field_id(name, self._case_sensitive)
            if fid is None:
                old = self._schema.find_field_id(name, self._case_sensitive)
                if old is not None and self._deleted_or_under_deleted(old):
                    raise ValidationError(
                        f"cannot delete identifier column {name!r}: remove it from the identifier fields "
                        "first (set_identifier_fields)"
                    )
                raise ValidationError(f"identifier column {name!r} does not exist in the new schema")
            ids.append(fid)
        return ids

    def _deleted_or_under_deleted(self, field_id: int) -> bool:
        current: int | None = field_id
        while current is not None:
            if current in self._deletes:
                return True
            current = self._schema.parent_id(current)
        return False

    def _validate(self, schema: Schema) -> None:
        _check_unique_names(StructType(*schema.fields), "", self._case_sensitive)
        try:
            schema.validate_identifier_fields()
        except ValidationError as e:
            raise ValidationError(f"invalid identifier fields: {e}") from e
        ids = schema.field_ids()
        spec = self._base.spec()
        for pf in spec.fields:
            for sid in pf.source_ids:
                if sid not in ids:
                    raise ValidationError(
                        f"cannot delete column {self._name(sid)!r}: partition field {pf.name!r} of the "
                        "current partition spec uses it (remove the partition field first with update_spec)"
                    )
            if pf.transform.is_unknown or pf.transform.is_void:
                continue
            source = schema.find_type(pf.source_id)
            if not pf.transform.can_transform(source):
                raise ValidationError(
                    f"cannot change column {self._name(pf.source_id)!r} to {source}: partition field "
                    f"{pf.name!r} ({pf.transform}) cannot transform it"
                )
            clash = schema.find_field_id(pf.name)
            if clash is not None and not (
                (pf.transform.is_identity or pf.transform.is_void) and clash == pf.source_id
            ):
                raise ValidationError(
                    f"column {pf.name!r} clashes with partition field {pf.name!r} of the current spec"
                )
        for sf in self._base.sort_order().fields:
            for sid in sf.source_ids:
                if sid not in ids:
                    raise ValidationError(
                        f"cannot delete column {self._name(sid)!r}: the table's sort order uses it "
                        "(replace the sort order first)"
                    )

    def updates_and_requirements(self) -> tuple[list[TableUpdate], list[TableRequirement]]:
        schema = self.apply()
        if schema.same_structure(self._schema):
            return [], []
        updates: list[TableUpdate] = [
            AddSchema(schema, self._last_column_id),
            SetCurrentSchema(LAST_ADDED),
        ]
        mapping = TableProperties(self._base.properties).name_mapping
        if mapping is not None:  # keep it resolving every column, as Java does
            updated = name_mapping_to_json(update_name_mapping(mapping, schema))
            if updated != self._base.properties[DEFAULT_NAME_MAPPING_PROPERTY]:
                updates.append(SetProperties({DEFAULT_NAME_MAPPING_PROPERTY: updated}))
        requirements: list[TableRequirement] = [
            AssertCurrentSchemaId(self._base.current_schema_id),
            AssertLastAssignedFieldId(self._base.last_column_id),
        ]
        return updates, requirements


def _check_unique_names(t: IcebergType, where: str, case_sensitive: bool) -> None:
    if isinstance(t, StructType):
        seen: dict[str, str] = {}
        for f in t.fields:
            key = f.name if case_sensitive else f.name.lower()
            if key in seen:
                full = f"{where}.{f.name}" if where else f.name
                raise ValidationError(
                    f"duplicate column name {full!r}: another field of that struct has that name"
                )
            seen[key] = f.name
    if isinstance(t, NestedType):
        for f in t.fields:
            _check_unique_names(f.field_type, f"{where}.{f.name}" if where else f.name, case_sensitive)
