"""The checks every commit passes, whatever face it came through.

Our builders (``Table.set_properties``, ``UpdateSchema``, the snapshot producer) only ever
produce updates that pass these, and say so early, where the change is asked for. A
client of the REST server sends raw updates, so ``apply_updates`` runs the same checks on
every update it applies: a commit through any face lands only what the Python API could
have landed. Each check looks at what the commit adds or changes, never at the rest of
what the table holds, so a table another engine left in an odd state still takes other changes.

``check_update_alone`` is the part that needs no table: a server runs it while parsing a
request, so a malformed update is refused before any commit is attempted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from aioiceberg.commit.updates import (
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    SetProperties,
    SetStatistics,
    TableUpdate,
)
from aioiceberg.errors import InvalidPropertyError, LocationNotAllowedError, ValidationError
from aioiceberg.io.locations import is_within, normalized_location
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties, check_property_values
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import SortOrder
from aioiceberg.spec.types import IcebergType, NestedField, NestedType, PrimitiveType, StructType, UnknownType

__all__ = [
    "RESERVED_PROPERTIES",
    "check_defaults_bind",
    "check_settable_properties",
    "check_table_file",
    "check_update",
    "check_update_alone",
]

RESERVED_PROPERTIES = frozenset(
    {
        "format-version",
        "uuid",
        "snapshot-count",
        "current-snapshot-id",
        "current-snapshot-summary",
        "current-snapshot-timestamp-ms",
        "current-schema",
        "default-partition-spec",
        "default-sort-order",
    }
)
"""Keys Java refuses as table properties: they describe metadata fields, not settings."""

_LOCATION_PROPERTIES = (TableProperties.data_path.key, TableProperties.metadata_path.key)
_CONTROL = {chr(c) for c in range(32)} | {"\x7f"}
_ONE_SPELLING = "an absolute location without '.', '..' or empty path segments"


def check_settable_properties(properties: Mapping[str, str]) -> None:
    """Refuse reserved keys (the format version has its own operation) and values this
    library could not use, so that a bad value never lands in metadata."""
    for key, value in properties.items():
        if not isinstance(value, str):
            raise ValidationError(f"table property {key!r}: values are strings, not {type(value).__name__}")
        if key == "format-version":
            raise ValidationError(
                "'format-version' is not a table property: use table.upgrade_table_version(n) to upgrade"
            )
        if key in RESERVED_PROPERTIES:
            raise ValidationError(f"{key!r} is a reserved table property and cannot be set")
    check_property_values(properties)
    for key in _LOCATION_PROPERTIES:
        if key in properties:
            try:
                normalized_location(properties[key])
            except LocationNotAllowedError:
                raise InvalidPropertyError(key, properties[key], _ONE_SPELLING) from None


def check_update_alone(update: TableUpdate) -> None:
    """What can be refused in ``update`` without knowing the table it is for."""
    if isinstance(update, SetProperties):
        _wrap("set-properties", check_settable_properties, update.updates)
    elif isinstance(update, AddSchema):
        _wrap("add-schema", _check_schema_alone, update.schema)
    elif isinstance(update, AddPartitionSpec):
        _wrap("add-spec", _check_spec_alone, update.spec)
    elif isinstance(update, AddSortOrder):
        _wrap("add-sort-order", _check_order_alone, update.sort_order)


def check_update(md: TableMetadata, update: TableUpdate) -> None:
    """Refuse ``update`` applied to ``md`` (the metadata as the earlier updates left it)."""
    check_update_alone(update)
    if isinstance(update, AddSchema):
        _wrap("add-schema", _check_schema_for, md, update.schema)
    elif isinstance(update, AddPartitionSpec):
        _wrap("add-spec", _check_spec_for, md, update.spec)
    elif isinstance(update, AddSortOrder):
        _wrap("add-sort-order", _check_order_for, md, update.sort_order)
    elif isinstance(update, AddSnapshot):
        _wrap("add-snapshot", _check_snapshot_for, md, update)
    elif isinstance(update, SetStatistics):
        stats = update.statistics
        _wrap(
            "set-statistics",
            check_table_file,
            md,
            stats.statistics_path,
            f"statistics file of snapshot {stats.snapshot_id}",
        )


def _wrap(action: str, check: Callable[..., None], *args: Any) -> None:
    """Run ``check``; its error (type and fields kept) names the update it refused."""
    try:
        check(*args)
    except ValidationError as exc:
        exc.args = (f"{action}: {exc}",)
        raise


# -- schemas -----------------------------------------------------------------------------------


def _fields(t: IcebergType, path: str) -> Iterator[tuple[str, NestedField]]:
    """Every field below ``t`` with its dotted name (list elements and map keys/values too)."""
    if isinstance(t, NestedType):
        for f in t.fields:
            name = f"{path}.{f.name}" if path else f.name
            yield name, f
            yield from _fields(f.field_type, name)


def _check_schema_alone(schema: Schema) -> None:
    seen: dict[int, str] = {}
    for name, f in _fields(schema.as_struct, ""):
        if f.field_id < 0:
            raise ValidationError(f"field {name!r} has a negative id {f.field_id}")
        if f.field_id in seen:
            raise ValidationError(f"field id {f.field_id} is used by both {seen[f.field_id]!r} and {name!r}")
        seen[f.field_id] = name
        if isinstance(f.field_type, UnknownType) and (
            f.required or f.initial_default is not None or f.write_default is not None
        ):
            raise ValidationError(f"field {name!r}: unknown-typed fields must be optional without defaults")
    _check_struct_names(schema.as_struct, "")
    if len(set(schema.identifier_field_ids)) != len(schema.identifier_field_ids):
        raise ValidationError(f"identifier field ids {list(schema.identifier_field_ids)} repeat an id")
    try:
        schema.validate_identifier_fields()
    except ValidationError as exc:
        raise ValidationError(f"invalid identifier fields: {exc}") from None


def _check_struct_names(t: IcebergType, path: str) -> None:
    if isinstance(t, StructType):
        names: set[str] = set()
        for f in t.fields:
            full = f"{path}.{f.name}" if path else f.name
            if not f.name:
                raise ValidationError(
                    f"a field of {path or 'the schema'!r} has an empty name (id {f.field_id})"
                )
            if f.name in names:
                raise ValidationError(f"duplicate field name {full!r}")
            names.add(f.name)
    if isinstance(t, NestedType):
        for f in t.fields:
            _check_struct_names(f.field_type, f"{path}.{f.name}" if path else f.name)


def _check_schema_for(md: TableMetadata, schema: Schema) -> None:
    """Types the table's format version allows, and ids that are either the table's own or
    new ones above ``last-column-id`` (a reused id would make old data files read as another
    column)."""
    known: set[int] = set()
    for existing in md.schemas:
        known |= existing.field_ids()
    for name, f in _fields(schema.as_struct, ""):
        t = f.field_type
        if isinstance(t, PrimitiveType) and t.min_format_version > md.format_version:
            raise ValidationError(
                f"field {name!r}: type {t} needs format version {t.min_format_version}, "
                f"the table is v{md.format_version}"
            )
        if md.format_version < 3 and (f.initial_default is not None or f.write_default is not None):
            raise ValidationError(
                f"field {name!r}: default values need format version 3, the table is v{md.format_version}"
            )
        if f.field_id not in known and f.field_id <= md.last_column_id:
            raise ValidationError(
                f"field {name!r} has id {f.field_id}, which the table assigned before "
                f"(last-column-id {md.last_column_id}) to a column no schema holds now: new fields "
                "take ids above last-column-id"
            )


# -- partition specs and sort orders ------------------------------------------------------------


def _check_spec_alone(spec: PartitionSpec) -> None:
    names: set[str] = set()
    ids: set[int] = set()
    for f in spec.fields:
        if not f.name:
            raise ValidationError(f"partition field {f.field_id} has an empty name")
        if f.name in names:
            raise ValidationError(f"partition field name {f.name!r} is used twice")
        if f.field_id in ids:
            raise ValidationError(f"partition field id {f.field_id} is used twice")
        if f.transform.is_unknown:
            raise ValidationError(f"partition field {f.name!r}: unknown transform {f.transform}")
        names.add(f.name)
        ids.add(f.field_id)


def _current_schema(md: TableMetadata, what: str) -> Schema:
    schema = md.schema_by_id(md.current_schema_id)
    if schema is None:
        raise ValidationError(f"the table has no current schema to bind the {what} to")
    return schema


def _check_spec_for(md: TableMetadata, spec: PartitionSpec) -> None:
    _check_spec_bound(spec, _current_schema(md, "partition spec"))


def _check_spec_bound(spec: PartitionSpec, schema: Schema) -> None:
    """Sources in ``schema``, transforms that accept them, and names that do not pose as
    another column (a partition field may share only its own source's name, as identity)."""
    spec.check_against(schema)
    for f in spec.fields:
        clash = schema.find_field_id(f.name)
        if clash is not None and not (
            (f.transform.is_identity or f.transform.is_void) and clash == f.source_id
        ):
            raise ValidationError(
                f"partition field {f.name!r} is named like a column but is not an identity of it"
            )


def _check_order_alone(order: SortOrder) -> None:
    for f in order.fields:
        if f.transform.is_unknown:
            raise ValidationError(f"sort field on {list(f.source_ids)}: unknown transform {f.transform}")


def _check_order_for(md: TableMetadata, order: SortOrder) -> None:
    _check_order_bound(order, _current_schema(md, "sort order"))


def _check_order_bound(order: SortOrder, schema: Schema) -> None:
    ids = schema.field_ids()
    for f in order.fields:
        for sid in f.source_ids:
            if sid not in ids:
                raise ValidationError(
                    f"sort field {f.transform}({sid}): no field {sid} in the current schema"
                )
        if f.transform.is_unknown or f.transform.is_void:
            continue
        source = schema.find_type(f.source_id)
        if not f.transform.can_transform(source):
            raise ValidationError(
                f"sort field {f.transform}({f.source_id}): {f.transform} cannot transform {source}"
            )


def check_defaults_bind(md: TableMetadata) -> None:
    """The default spec and sort order bind to the current schema, as writers need them to
    (checked when a commit changes any of the three: a removed partition source is refused)."""
    schema = _current_schema(md, "partition spec")
    spec = md.spec_by_id(md.default_spec_id)
    if spec is not None:
        ids = schema.field_ids()
        for f in spec.fields:
            if f.transform.is_void:  # writes null whatever its source: Java keeps it when the source is gone
                continue
            for sid in f.source_ids:
                if sid not in ids:
                    raise ValidationError(
                        f"partition field {f.name!r} of the default spec {spec.spec_id} needs field {sid}, "
                        f"which the current schema {schema.schema_id} does not have"
                    )
            if f.transform.is_unknown:
                continue
            source = schema.find_type(f.source_id)
            if not f.transform.can_transform(source):
                raise ValidationError(
                    f"partition field {f.name!r} of the default spec {spec.spec_id}: {f.transform} cannot "
                    f"transform {source}, the type of field {f.source_id} in the current schema"
                )
    try:
        _check_order_bound(md.sort_order(), schema)
    except ValidationError as exc:
        raise ValidationError(f"default sort order {md.default_sort_order_id}: {exc}") from None


# -- snapshots and files ------------------------------------------------------------------------


def _table_file_roots(md: TableMetadata) -> list[str]:
    """Where the table's own metadata objects may lie: under its location, and under
    ``write.metadata.path`` when that is set (and usable)."""
    roots = [md.location] if md.location else []
    try:
        metadata_path = TableProperties(md.properties).metadata_path
    except ValidationError:
        metadata_path = None
    if metadata_path:
        roots.append(metadata_path)
    return roots


def _inside(location: str, root: str) -> bool:
    try:
        normal_root = normalized_location(root)
    except LocationNotAllowedError:
        return _inside_as_written(location, root)
    try:
        normal = normalized_location(location)
    except LocationNotAllowedError:
        return False
    return normal != normal_root and is_within(normal, normal_root)


def _inside_as_written(location: str, root: str) -> bool:
    """For a root normalization refuses (some engines write ``//`` into locations): below it
    as written, by a rest with no way out of it."""
    prefix = root.rstrip("/") + "/"
    if not location.startswith(prefix) or any(ch in _CONTROL for ch in location):
        return False
    rest = location[len(prefix) :]
    return bool(rest.strip("/")) and all(segment not in (".", "..") for segment in rest.split("/"))


def check_table_file(md: TableMetadata, location: str, what: str) -> None:
    """Refuse a metadata object (manifest list, statistics file) outside the table's files:
    readers and the purge would follow it anywhere. A bad update (400 from a server), not a
    location outside a catalog's roots: the table's own location is what it is checked against."""
    roots = _table_file_roots(md)
    if not roots:
        raise ValidationError(f"{what} {location!r}: the table has no location yet")
    if not any(_inside(location, root) for root in roots):
        shown = " or ".join(repr(r) for r in roots)
        raise ValidationError(f"{what} {location!r} is not among the table's files (under {shown})")


def _check_snapshot_for(md: TableMetadata, update: AddSnapshot) -> None:
    snap = update.snapshot
    what = f"snapshot {snap.snapshot_id}"
    if snap.parent_snapshot_id is not None and md.snapshot_by_id(snap.parent_snapshot_id) is None:
        raise ValidationError(f"{what}: parent snapshot {snap.parent_snapshot_id} does not exist")
    if snap.schema_id is not None and md.schema_by_id(snap.schema_id) is None:
        raise ValidationError(f"{what}: schema {snap.schema_id} does not exist")
    if snap.added_rows is not None and snap.added_rows < 0:
        raise ValidationError(f"{what}: added-rows {snap.added_rows} is negative")
    if (
        md.format_version >= 3
        and snap.first_row_id is not None
        and md.next_row_id is not None
        and snap.first_row_id < md.next_row_id
    ):
        raise ValidationError(
            f"{what}: first-row-id {snap.first_row_id} is behind the table's next-row-id {md.next_row_id}"
        )
    if snap.manifest_list is None:
        if md.format_version >= 2:
            raise ValidationError(f"{what}: format v{md.format_version} snapshots need a manifest list")
        _check_files(md, snap.manifests, f"{what}: manifest")
    else:
        check_table_file(md, snap.manifest_list, f"{what}: manifest list")


def _check_files(md: TableMetadata, locations: Iterable[str], what: str) -> None:
    for location in locations:
        check_table_file(md, location, what)
