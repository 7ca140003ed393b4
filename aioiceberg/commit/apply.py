"""``apply_updates``: the one pure function that turns base metadata plus updates into new metadata.

Every protocol and every change goes through it, so the bookkeeping the spec asks for
(snapshot log, metadata log, sequence numbers, last-updated-ms) is done in one place, and
so are the checks (``commit/checks.py``): a commit through any face (the Python API, a REST
client of ``aioiceberg serve``) lands only what the Python API could have landed.
"""

from __future__ import annotations

import time
from dataclasses import replace

from aioiceberg.commit.checks import check_defaults_bind, check_update
from aioiceberg.commit.updates import (
    LAST_ADDED,
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
from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec.metadata import (
    MAIN_BRANCH,
    SUPPORTED_FORMAT_VERSIONS,
    MetadataLogEntry,
    SnapshotLogEntry,
    SnapshotRef,
    TableMetadata,
)
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema

__all__ = ["PREVIOUS_VERSIONS_MAX", "PREVIOUS_VERSIONS_MAX_DEFAULT", "apply_updates"]

PREVIOUS_VERSIONS_MAX = TableProperties.previous_versions_max.key
PREVIOUS_VERSIONS_MAX_DEFAULT = TableProperties.previous_versions_max.default


def apply_updates(
    base: TableMetadata,
    updates: list[TableUpdate],
    *,
    base_location: str | None = None,
    now_ms: int | None = None,
) -> TableMetadata:
    """New metadata: ``base`` with ``updates`` applied in order, validated.

    ``base_location`` is the metadata file ``base`` was read from; it joins the metadata
    log (trimmed to ``write.metadata.previous-versions-max``). Every refusal is a
    ``ValidationError`` naming the update and what is wrong with it.
    """
    md = base
    added_schema: int | None = None
    added_spec: int | None = None
    added_order: int | None = None
    changed = False
    for update in updates:
        changed = True
        check_update(md, update)
        if isinstance(update, AssignUUID):
            if md.table_uuid is not None and md.table_uuid != update.uuid:
                raise ValidationError(f"cannot reassign table uuid {md.table_uuid} to {update.uuid}")
            md = md.replace(table_uuid=update.uuid)
        elif isinstance(update, UpgradeFormatVersion):
            if update.format_version not in SUPPORTED_FORMAT_VERSIONS:
                raise ValidationError(f"unsupported format version {update.format_version}")
            if update.format_version < md.format_version:
                raise ValidationError(
                    f"cannot downgrade format version {md.format_version} to {update.format_version}"
                )
            md = md.replace(format_version=update.format_version)
            if update.format_version >= 3 and md.next_row_id is None:
                md = md.replace(next_row_id=0)  # v3 requires next-row-id; no row has one yet
        elif isinstance(update, AddSchema):
            md, added_schema = _add_schema(md, update)
        elif isinstance(update, SetCurrentSchema):
            schema_id = _resolve(update.schema_id, added_schema, "schema")
            if md.schema_by_id(schema_id) is None:
                raise ValidationError(f"schema {schema_id} does not exist")
            md = md.replace(current_schema_id=schema_id)
        elif isinstance(update, AddPartitionSpec):
            md, added_spec = _add_spec(md, update)
        elif isinstance(update, SetDefaultSpec):
            spec_id = _resolve(update.spec_id, added_spec, "partition spec")
            if md.spec_by_id(spec_id) is None:
                raise ValidationError(f"partition spec {spec_id} does not exist")
            md = md.replace(default_spec_id=spec_id)
        elif isinstance(update, AddSortOrder):
            md, added_order = _add_sort_order(md, update)
        elif isinstance(update, SetDefaultSortOrder):
            order_id = _resolve(update.sort_order_id, added_order, "sort order")
            if order_id != 0 and md.sort_order_by_id(order_id) is None:
                raise ValidationError(f"sort order {order_id} does not exist")
            md = md.replace(default_sort_order_id=order_id)
        elif isinstance(update, AddSnapshot):
            md = _add_snapshot(md, update)
        elif isinstance(update, SetSnapshotRef):
            md = _set_ref(md, update)
        elif isinstance(update, RemoveSnapshotRef):
            md = _remove_ref(md, update.ref_name)
        elif isinstance(update, RemoveSnapshots):
            md = _remove_snapshots(md, set(update.snapshot_ids))
        elif isinstance(update, SetStatistics):
            stats = update.statistics
            if md.snapshot_by_id(stats.snapshot_id) is None:
                raise ValidationError(f"statistics for unknown snapshot {stats.snapshot_id}")
            kept = tuple(s for s in md.statistics if s.snapshot_id != stats.snapshot_id)
            md = md.replace(statistics=(*kept, stats))
        elif isinstance(update, RemoveStatistics):
            md = md.replace(statistics=tuple(s for s in md.statistics if s.snapshot_id != update.snapshot_id))
        elif isinstance(update, SetProperties):
            md = md.replace(properties={**md.properties, **update.updates})
        elif isinstance(update, RemoveProperties):
            md = md.replace(properties={k: v for k, v in md.properties.items() if k not in update.removals})
        elif isinstance(update, SetLocation):
            md = md.replace(location=update.location.rstrip("/"))
        else:  # pragma: no cover - the union is closed
            raise ValidationError(f"unknown update {update!r}")
    if not changed and base_location is None:
        return base
    now = int(time.time() * 1000) if now_ms is None else now_ms
    md = md.replace(last_updated_ms=max(now, md.last_updated_ms))
    if base_location is not None:
        md = md.replace(metadata_log=_trimmed_log(md, base, base_location))
    if (md.current_schema_id, md.default_spec_id, md.default_sort_order_id) != (
        base.current_schema_id,
        base.default_spec_id,
        base.default_sort_order_id,
    ):
        check_defaults_bind(md)
    try:
        md.validate()
    except InvalidMetadataError as exc:
        raise ValidationError(f"the updates would make invalid metadata: {exc}") from None
    return md


def _resolve(value: int, last_added: int | None, what: str) -> int:
    if value != LAST_ADDED:
        return value
    if last_added is None:
        raise ValidationError(f"no {what} was added in this change, so -1 names nothing")
    return last_added


def _add_schema(md: TableMetadata, update: AddSchema) -> tuple[TableMetadata, int]:
    for existing in md.schemas:
        if existing.same_structure(update.schema):
            return md, existing.schema_id
    new_id = max((s.schema_id for s in md.schemas), default=-1) + 1
    schema = Schema(
        *update.schema.fields, schema_id=new_id, identifier_field_ids=update.schema.identifier_field_ids
    )
    last_column = max(md.last_column_id, update.last_column_id or 0, schema.highest_field_id)
    return md.replace(schemas=(*md.schemas, schema), last_column_id=last_column), new_id


def _add_spec(md: TableMetadata, update: AddPartitionSpec) -> tuple[TableMetadata, int]:
    for existing in md.partition_specs:
        if existing.compatible_with(update.spec) and all(
            a.field_id == b.field_id for a, b in zip(existing.fields, update.spec.fields, strict=True)
        ):
            return md, existing.spec_id
    new_id = max((s.spec_id for s in md.partition_specs), default=-1) + 1
    spec = replace(update.spec, spec_id=new_id)
    spec.check_against(md.schema())
    last_partition = max(md.last_partition_id, spec.last_assigned_field_id)
    return md.replace(partition_specs=(*md.partition_specs, spec), last_partition_id=last_partition), new_id


def _add_sort_order(md: TableMetadata, update: AddSortOrder) -> tuple[TableMetadata, int]:
    if update.sort_order.is_unsorted:
        return md, 0
    for existing in md.sort_orders:
        if existing.fields == update.sort_order.fields:
            return md, existing.order_id
    new_id = max((o.order_id for o in md.sort_orders), default=0) + 1
    order = replace(update.sort_order, order_id=new_id)
    return md.replace(sort_orders=(*md.sort_orders, order)), new_id


def _add_snapshot(md: TableMetadata, update: AddSnapshot) -> TableMetadata:
    snap = update.snapshot
    if md.snapshot_by_id(snap.snapshot_id) is not None:
        raise ValidationError(f"snapshot {snap.snapshot_id} already exists")
    if md.format_version >= 2 and snap.sequence_number <= md.last_sequence_number:
        raise ValidationError(
            f"snapshot {snap.snapshot_id} has sequence number {snap.sequence_number}, not above "
            f"last-sequence-number {md.last_sequence_number}"
        )
    changes: dict[str, object] = {
        "snapshots": (*md.snapshots, snap),
        "last_sequence_number": max(md.last_sequence_number, snap.sequence_number),
        "last_updated_ms": max(md.last_updated_ms, snap.timestamp_ms),
    }
    if md.format_version >= 3 and snap.first_row_id is not None and snap.added_rows is not None:
        changes["next_row_id"] = snap.first_row_id + snap.added_rows
    return md.replace(**changes)


def _set_ref(md: TableMetadata, update: SetSnapshotRef) -> TableMetadata:
    snap = md.snapshot_by_id(update.snapshot_id)
    if snap is None:
        raise ValidationError(f"ref {update.ref_name!r}: snapshot {update.snapshot_id} does not exist")
    ref = SnapshotRef(
        update.snapshot_id,
        update.type,
        update.min_snapshots_to_keep,
        update.max_snapshot_age_ms,
        update.max_ref_age_ms,
    )
    if md.refs.get(update.ref_name) == ref:
        return md
    changes: dict[str, object] = {"refs": {**md.refs, update.ref_name: ref}}
    if update.ref_name == MAIN_BRANCH:
        changes["current_snapshot_id"] = update.snapshot_id
        changes["snapshot_log"] = (*md.snapshot_log, SnapshotLogEntry(update.snapshot_id, snap.timestamp_ms))
        changes["last_updated_ms"] = max(md.last_updated_ms, snap.timestamp_ms)
    return md.replace(**changes)


def _remove_ref(md: TableMetadata, name: str) -> TableMetadata:
    refs = {k: v for k, v in md.refs.items() if k != name}
    if name == MAIN_BRANCH:
        return md.replace(refs=refs, current_snapshot_id=None)
    return md.replace(refs=refs)


def _remove_snapshots(md: TableMetadata, ids: set[int]) -> TableMetadata:
    if md.current_snapshot_id in ids:
        raise ValidationError(f"cannot remove the current snapshot {md.current_snapshot_id}")
    return md.replace(
        snapshots=tuple(s for s in md.snapshots if s.snapshot_id not in ids),
        refs={k: v for k, v in md.refs.items() if v.snapshot_id not in ids},
        snapshot_log=tuple(e for e in md.snapshot_log if e.snapshot_id not in ids),
        statistics=tuple(s for s in md.statistics if s.snapshot_id not in ids),
        partition_statistics=tuple(s for s in md.partition_statistics if s.snapshot_id not in ids),
    )


def _trimmed_log(md: TableMetadata, base: TableMetadata, base_location: str) -> tuple[MetadataLogEntry, ...]:
    keep = max(1, TableProperties(md.properties).previous_versions_max)
    log = (*md.metadata_log, MetadataLogEntry(base_location, base.last_updated_ms))
    return log[-keep:]
