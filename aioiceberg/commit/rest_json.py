"""Table updates and requirements as the Iceberg REST protocol spells them in JSON.

Our change vocabulary already is the REST one (``commit/updates.py``), so a REST client
sends exactly what every other commit point applies, and a REST server applies what any
client (PyIceberg, Java, DuckDB) sends through the same ``commit_table`` seam. An update is
checked as it is read (``check_update_alone``: what needs no table), so a malformed one is
refused before a commit is tried; the rest is checked where every commit passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aioiceberg.commit.checks import check_update_alone
from aioiceberg.commit.requirements import (
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    TableRequirement,
)
from aioiceberg.commit.updates import (
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    AssignUUID,
    RemoveProperties,
    RemoveSnapshotRef,
    RemoveSnapshots,
    RemoveStatistics,
    SetCurrentSchema,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetLocation,
    SetProperties,
    SetSnapshotRef,
    SetStatistics,
    TableUpdate,
    UpgradeFormatVersion,
)
from aioiceberg.errors import InvalidMetadataError, UnsupportedError, ValidationError
from aioiceberg.spec.metadata import SnapshotRefType
from aioiceberg.spec.metadata_json import (
    snapshot_from_json,
    snapshot_to_json,
    statistics_from_json,
    statistics_to_json,
)
from aioiceberg.spec.schema_json import (
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
    sort_order_from_json,
    sort_order_to_json,
)

__all__ = [
    "requirement_from_json",
    "requirement_to_json",
    "update_from_json",
    "update_to_json",
]

# Snapshots carry a sequence number from v2 on; a REST body does not say the table's
# format version, so write it always and read it whenever present (v1 tables ignore it).
_SNAPSHOT_VERSION = 2


def update_to_json(update: TableUpdate) -> dict[str, Any]:
    match update:
        case AssignUUID(uuid):
            return {"action": "assign-uuid", "uuid": uuid}
        case UpgradeFormatVersion(version):
            return {"action": "upgrade-format-version", "format-version": version}
        case AddSchema(schema, last_column_id):
            out: dict[str, Any] = {"action": "add-schema", "schema": schema_to_json(schema)}
            if last_column_id is not None:
                out["last-column-id"] = last_column_id
            return out
        case SetCurrentSchema(schema_id):
            return {"action": "set-current-schema", "schema-id": schema_id}
        case AddPartitionSpec(spec):
            return {"action": "add-spec", "spec": partition_spec_to_json(spec, 2)}
        case SetDefaultSpec(spec_id):
            return {"action": "set-default-spec", "spec-id": spec_id}
        case AddSortOrder(order):
            return {"action": "add-sort-order", "sort-order": sort_order_to_json(order)}
        case SetDefaultSortOrder(order_id):
            return {"action": "set-default-sort-order", "sort-order-id": order_id}
        case AddSnapshot(snapshot):
            return {"action": "add-snapshot", "snapshot": snapshot_to_json(snapshot, _SNAPSHOT_VERSION)}
        case SetSnapshotRef(snapshot_id, ref_name, ref_type, min_keep, max_snapshot_age, max_ref_age):
            out = {
                "action": "set-snapshot-ref",
                "ref-name": ref_name,
                "snapshot-id": snapshot_id,
                "type": ref_type.value,
            }
            for key, value in (
                ("min-snapshots-to-keep", min_keep),
                ("max-snapshot-age-ms", max_snapshot_age),
                ("max-ref-age-ms", max_ref_age),
            ):
                if value is not None:
                    out[key] = value
            return out
        case RemoveSnapshotRef(ref_name):
            return {"action": "remove-snapshot-ref", "ref-name": ref_name}
        case RemoveSnapshots(ids):
            return {"action": "remove-snapshots", "snapshot-ids": list(ids)}
        case SetStatistics(statistics):
            return {
                "action": "set-statistics",
                "snapshot-id": statistics.snapshot_id,
                "statistics": statistics_to_json(statistics),
            }
        case RemoveStatistics(snapshot_id):
            return {"action": "remove-statistics", "snapshot-id": snapshot_id}
        case SetProperties(updates):
            return {"action": "set-properties", "updates": dict(updates)}
        case RemoveProperties(removals):
            return {"action": "remove-properties", "removals": list(removals)}
        case SetLocation(location):
            return {"action": "set-location", "location": location}
    raise UnsupportedError(f"no REST form for the update {update!r}")


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise ValidationError(f"{what}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValidationError(f"{what}: field {key!r} has the wrong type ({type(value).__name__})")
    return value


def _optional_int(obj: Mapping[str, Any], key: str, what: str) -> int | None:
    return None if obj.get(key) is None else int(_field(obj, key, int, what))


def _string_map(obj: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    """Strings only, as the protocol says: ``str()`` of a JSON null would store ``"None"``."""
    value = _field(obj, key, dict, what)
    for k, v in value.items():
        if not isinstance(v, str):
            raise ValidationError(f"{what}: {key}[{k!r}] must be a string, not {_json_kind(v)}")
    return dict(value)


def _string_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    value = _field(obj, key, list, what)
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise ValidationError(f"{what}: {key}[{i}] must be a string, not {_json_kind(v)}")
    return tuple(value)


def _int_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[int, ...]:
    value = _field(obj, key, list, what)
    for i, v in enumerate(value):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValidationError(f"{what}: {key}[{i}] must be an integer, not {_json_kind(v)}")
    return tuple(value)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__
    )


def _ref(obj: Mapping[str, Any], what: str) -> SetSnapshotRef:
    kind = str(_field(obj, "type", str, what)).lower()
    try:
        ref_type = SnapshotRefType(kind)
    except ValueError:
        raise ValidationError(f"{what}: unknown ref type {kind!r}") from None
    return SetSnapshotRef(
        snapshot_id=_field(obj, "snapshot-id", int, what),
        ref_name=_field(obj, "ref-name", str, what),
        type=ref_type,
        min_snapshots_to_keep=_optional_int(obj, "min-snapshots-to-keep", what),
        max_snapshot_age_ms=_optional_int(obj, "max-snapshot-age-ms", what),
        max_ref_age_ms=_optional_int(obj, "max-ref-age-ms", what),
    )


_UPDATES: dict[str, Callable[[Mapping[str, Any], str], TableUpdate]] = {
    "assign-uuid": lambda o, w: AssignUUID(_field(o, "uuid", str, w)),
    "upgrade-format-version": lambda o, w: UpgradeFormatVersion(_field(o, "format-version", int, w)),
    "add-schema": lambda o, w: AddSchema(
        schema_from_json(_field(o, "schema", dict, w)), _optional_int(o, "last-column-id", w)
    ),
    "set-current-schema": lambda o, w: SetCurrentSchema(_field(o, "schema-id", int, w)),
    "add-spec": lambda o, w: AddPartitionSpec(
        # the spec id is read-only in the protocol (the table assigns it): a client may leave it out
        partition_spec_from_json({"spec-id": 0, **_field(o, "spec", dict, w)})
    ),
    "set-default-spec": lambda o, w: SetDefaultSpec(_field(o, "spec-id", int, w)),
    "add-sort-order": lambda o, w: AddSortOrder(sort_order_from_json(_field(o, "sort-order", dict, w))),
    "set-default-sort-order": lambda o, w: SetDefaultSortOrder(_field(o, "sort-order-id", int, w)),
    "add-snapshot": lambda o, w: AddSnapshot(
        snapshot_from_json(_field(o, "snapshot", dict, w), _SNAPSHOT_VERSION)
    ),
    "set-snapshot-ref": _ref,
    "remove-snapshot-ref": lambda o, w: RemoveSnapshotRef(_field(o, "ref-name", str, w)),
    "remove-snapshots": lambda o, w: RemoveSnapshots(_int_list(o, "snapshot-ids", w)),
    "set-statistics": lambda o, w: SetStatistics(statistics_from_json(_field(o, "statistics", dict, w))),
    "remove-statistics": lambda o, w: RemoveStatistics(_field(o, "snapshot-id", int, w)),
    "set-properties": lambda o, w: SetProperties(_string_map(o, "updates", w)),
    "remove-properties": lambda o, w: RemoveProperties(_string_list(o, "removals", w)),
    "set-location": lambda o, w: SetLocation(_field(o, "location", str, w)),
}


def update_from_json(obj: Any) -> TableUpdate:
    """One update of a commit request; ``UnsupportedError`` for an action we cannot apply."""
    if not isinstance(obj, dict):
        raise ValidationError(f"a table update must be an object, got {type(obj).__name__}")
    action = obj.get("action")
    parse = _UPDATES.get(str(action))
    if parse is None:
        raise UnsupportedError(f"table update action {action!r} is not supported")
    try:
        update = parse(obj, f"update {action!r}")
    except InvalidMetadataError as exc:
        raise ValidationError(f"update {action!r}: {exc}") from exc
    check_update_alone(update)
    return update


def requirement_to_json(requirement: TableRequirement) -> dict[str, Any]:
    match requirement:
        case AssertCreate():
            return {"type": "assert-create"}
        case AssertTableUUID(uuid):
            return {"type": "assert-table-uuid", "uuid": uuid}
        case AssertRefSnapshotId(ref, snapshot_id):
            return {"type": "assert-ref-snapshot-id", "ref": ref, "snapshot-id": snapshot_id}
        case AssertLastAssignedFieldId(field_id):
            return {"type": "assert-last-assigned-field-id", "last-assigned-field-id": field_id}
        case AssertCurrentSchemaId(schema_id):
            return {"type": "assert-current-schema-id", "current-schema-id": schema_id}
        case AssertLastAssignedPartitionId(partition_id):
            return {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": partition_id}
        case AssertDefaultSpecId(spec_id):
            return {"type": "assert-default-spec-id", "default-spec-id": spec_id}
        case AssertDefaultSortOrderId(order_id):
            return {"type": "assert-default-sort-order-id", "default-sort-order-id": order_id}
    raise UnsupportedError(f"no REST form for the requirement {requirement!r}")


_REQUIREMENTS: dict[str, Callable[[Mapping[str, Any], str], TableRequirement]] = {
    "assert-create": lambda o, w: AssertCreate(),
    "assert-table-uuid": lambda o, w: AssertTableUUID(_field(o, "uuid", str, w)),
    "assert-ref-snapshot-id": lambda o, w: AssertRefSnapshotId(
        _field(o, "ref", str, w), _optional_int(o, "snapshot-id", w)
    ),
    "assert-last-assigned-field-id": lambda o, w: AssertLastAssignedFieldId(
        _field(o, "last-assigned-field-id", int, w)
    ),
    "assert-current-schema-id": lambda o, w: AssertCurrentSchemaId(_field(o, "current-schema-id", int, w)),
    "assert-last-assigned-partition-id": lambda o, w: AssertLastAssignedPartitionId(
        _field(o, "last-assigned-partition-id", int, w)
    ),
    "assert-default-spec-id": lambda o, w: AssertDefaultSpecId(_field(o, "default-spec-id", int, w)),
    "assert-default-sort-order-id": lambda o, w: AssertDefaultSortOrderId(
        _field(o, "default-sort-order-id", int, w)
    ),
}


def requirement_from_json(obj: Any) -> TableRequirement:
    if not isinstance(obj, dict):
        raise ValidationError(f"a table requirement must be an object, got {type(obj).__name__}")
    kind = obj.get("type")
    parse = _REQUIREMENTS.get(str(kind))
    if parse is None:
        raise UnsupportedError(f"table requirement {kind!r} is not supported")
    return parse(obj, f"requirement {kind!r}")
