"""Table metadata (format v1-v3): snapshots, refs, logs and statistics, as immutable values.

These types are version-neutral: reading v1 metadata fills the v2/v3 defaults (see
``metadata_json``), so the rest of the engine never branches on how a field was spelled
on disk. ``TableMetadata.validate`` holds the cross-field rules a reader must refuse to
build on, so a broken metadata file fails loudly at load time instead of mid-scan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from enum import StrEnum
from typing import Any, NoReturn

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.spec.partitioning import PARTITION_DATA_ID_START, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED, SortOrder

__all__ = [
    "INITIAL_SEQUENCE_NUMBER",
    "MAIN_BRANCH",
    "SUPPORTED_FORMAT_VERSIONS",
    "BlobMetadata",
    "MetadataLogEntry",
    "Operation",
    "PartitionStatisticsFile",
    "Snapshot",
    "SnapshotLogEntry",
    "SnapshotRef",
    "SnapshotRefType",
    "StatisticsFile",
    "Summary",
    "TableMetadata",
]

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
INITIAL_SEQUENCE_NUMBER = 0
MAIN_BRANCH = "main"


class Operation(StrEnum):
    """What a snapshot did; expiration and conflict checks skip snapshots by this."""

    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Summary:
    """A snapshot summary: the operation plus free-form string properties (counts, engine info)."""

    operation: Operation
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))

    def __hash__(self) -> int:
        return hash((self.operation, frozenset(self.properties.items())))

    def get(self, key: str, default: str | None = None) -> str | None:
        if key == "operation":
            return self.operation.value
        return self.properties.get(key, default)

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def to_dict(self) -> dict[str, str]:
        """The on-disk map: ``operation`` first, then the properties."""
        return {"operation": self.operation.value, **self.properties}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One table state.

    ``manifest_list`` is None only for old v1 snapshots that list ``manifests`` inline;
    ``summary`` is None only for v1 snapshots written without one. ``first_row_id`` and
    ``added_rows`` are v3 row-lineage fields, kept so rewriting metadata does not drop them.
    """

    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str | None
    summary: Summary | None = None
    schema_id: int | None = None
    manifests: tuple[str, ...] = ()
    first_row_id: int | None = None
    added_rows: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "manifests", tuple(self.manifests))

    @property
    def operation(self) -> Operation | None:
        return self.summary.operation if self.summary is not None else None


class SnapshotRefType(StrEnum):
    BRANCH = "branch"
    TAG = "tag"


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    """A named pointer to a snapshot; branches may carry retention settings, tags only an age limit."""

    snapshot_id: int
    type: SnapshotRefType = SnapshotRefType.BRANCH
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type is SnapshotRefType.TAG and (
            self.min_snapshots_to_keep is not None or self.max_snapshot_age_ms is not None
        ):
            raise ValidationError("tags do not support min-snapshots-to-keep or max-snapshot-age-ms")
        for name in ("min_snapshots_to_keep", "max_snapshot_age_ms", "max_ref_age_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValidationError(f"{name.replace('_', '-')} must be positive, got {value}")

    @property
    def is_branch(self) -> bool:
        return self.type is SnapshotRefType.BRANCH


@dataclass(frozen=True, slots=True)
class SnapshotLogEntry:
    """The current snapshot became ``snapshot_id`` at ``timestamp_ms`` (drives time travel)."""

    snapshot_id: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MetadataLogEntry:
    """A previous metadata file and when it was current."""

    metadata_file: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """One blob in a Puffin statistics file, as advertised in table metadata."""

    type: str
    snapshot_id: int
    sequence_number: int
    fields: tuple[int, ...]
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "properties", dict(self.properties))

    def __hash__(self) -> int:
        return hash(
            (
                self.type,
                self.snapshot_id,
                self.sequence_number,
                self.fields,
                frozenset(self.properties.items()),
            )
        )


@dataclass(frozen=True, slots=True)
class StatisticsFile:
    """A Puffin file of table statistics for one snapshot."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    file_footer_size_in_bytes: int
    blob_metadata: tuple[BlobMetadata, ...] = ()
    key_metadata: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "blob_metadata", tuple(self.blob_metadata))


@dataclass(frozen=True, slots=True)
class PartitionStatisticsFile:
    """A partition-statistics file for one snapshot."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int


@dataclass(frozen=True)
class TableMetadata:
    """One version of a table's metadata.

    ``current_snapshot_id`` is None for a table without snapshots (JSON ``-1`` or absent).
    ``table_uuid`` is None only for old v1 tables that never had one. ``next_row_id`` is
    the v3 row-lineage counter, kept (not interpreted) when present.
    """

    format_version: int
    table_uuid: str | None
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    properties: Mapping[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[SnapshotLogEntry, ...] = ()
    metadata_log: tuple[MetadataLogEntry, ...] = ()
    sort_orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_sort_order_id: int = 0
    refs: Mapping[str, SnapshotRef] = field(default_factory=dict)
    statistics: tuple[StatisticsFile, ...] = ()
    partition_statistics: tuple[PartitionStatisticsFile, ...] = ()
    next_row_id: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "schemas",
            "partition_specs",
            "snapshots",
            "snapshot_log",
            "metadata_log",
            "sort_orders",
            "statistics",
            "partition_statistics",
        ):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "properties", dict(self.properties))
        object.__setattr__(self, "refs", dict(self.refs))

    # Mutable mappings inside make the generated hash unusable; metadata is compared, not hashed.
    __hash__ = None  # type: ignore[assignment]

    # -- lookups ----------------------------------------------------------------------

    def schema(self) -> Schema:
        """The current schema."""
        found = self.schema_by_id(self.current_schema_id)
        if found is None:
            raise ValidationError(f"current schema id {self.current_schema_id} is not in the table metadata")
        return found

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return next((s for s in self.schemas if s.schema_id == schema_id), None)

    def spec(self) -> PartitionSpec:
        """The default partition spec, the one writers use."""
        found = self.spec_by_id(self.default_spec_id)
        if found is None:
            raise ValidationError(f"default spec id {self.default_spec_id} is not in the table metadata")
        return found

    def spec_by_id(self, spec_id: int) -> PartitionSpec | None:
        return next((s for s in self.partition_specs if s.spec_id == spec_id), None)

    def specs_by_id(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.partition_specs}

    def sort_order(self) -> SortOrder:
        """The default sort order; unsorted when the id names no order (id 0 is always unsorted)."""
        return self.sort_order_by_id(self.default_sort_order_id) or UNSORTED

    def sort_order_by_id(self, order_id: int) -> SortOrder | None:
        return next((o for o in self.sort_orders if o.order_id == order_id), None)

    def current_snapshot(self) -> Snapshot | None:
        if self.current_snapshot_id is None:
            return None
        return self.snapshot_by_id(self.current_snapshot_id)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == snapshot_id), None)

    def snapshot_by_ref(self, name: str) -> Snapshot | None:
        """The snapshot a branch or tag points at; None when there is no such ref."""
        ref = self.refs.get(name)
        return self.snapshot_by_id(ref.snapshot_id) if ref is not None else None

    def snapshot_as_of(self, timestamp_ms: int) -> Snapshot | None:
        """The snapshot that was current at ``timestamp_ms``, from the snapshot log.

        None when the table had no snapshot then, or that snapshot has since expired.
        """
        found: SnapshotLogEntry | None = None
        for entry in self.snapshot_log:
            if entry.timestamp_ms <= timestamp_ms:
                found = entry
        return self.snapshot_by_id(found.snapshot_id) if found is not None else None

    def ancestors_of(self, snapshot_id: int) -> tuple[Snapshot, ...]:
        """The snapshot and its parents, newest first, stopping where history was expired."""
        by_id = {s.snapshot_id: s for s in self.snapshots}
        out: list[Snapshot] = []
        seen: set[int] = set()
        current = by_id.get(snapshot_id)
        while current is not None and current.snapshot_id not in seen:
            seen.add(current.snapshot_id)
            out.append(current)
            parent = current.parent_snapshot_id
            current = by_id.get(parent) if parent is not None else None
        return tuple(out)

    def next_sequence_number(self) -> int:
        """The sequence number the next snapshot gets; always 0 in v1, which has none."""
        if self.format_version == 1:
            return INITIAL_SEQUENCE_NUMBER
        return self.last_sequence_number + 1

    # -- validation -------------------------------------------------------------------

    def validate(self) -> None:
        """Refuse metadata whose parts contradict each other; raises InvalidMetadataError naming the rule."""
        _check(self)

    def replace(self, **changes: Any) -> TableMetadata:
        """A copy with some fields changed (not validated: call ``validate`` when done)."""
        return dc_replace(self, **changes)


def _fail(message: str) -> NoReturn:
    raise InvalidMetadataError(message)


def _unique(ids: list[int], what: str) -> None:
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            _fail(f"{what} id {i} appears more than once")
        seen.add(i)


def _check(md: TableMetadata) -> None:
    if md.format_version not in SUPPORTED_FORMAT_VERSIONS:
        _fail(f"unsupported format version {md.format_version}")
    if md.format_version >= 2 and md.table_uuid is None:
        _fail(f"format v{md.format_version} requires table-uuid")

    _unique([s.schema_id for s in md.schemas], "schema")
    if md.schema_by_id(md.current_schema_id) is None:
        _fail(f"current-schema-id {md.current_schema_id} is not among the schemas")
    highest_column = max((s.highest_field_id for s in md.schemas), default=0)
    if md.last_column_id < highest_column:
        _fail(f"last-column-id {md.last_column_id} is lower than the highest field id {highest_column}")

    _unique([s.spec_id for s in md.partition_specs], "partition spec")
    if md.spec_by_id(md.default_spec_id) is None:
        _fail(f"default-spec-id {md.default_spec_id} is not among the partition specs")
    highest_partition = max(
        (f.field_id for s in md.partition_specs for f in s.fields), default=PARTITION_DATA_ID_START - 1
    )
    if md.last_partition_id < highest_partition:
        _fail(
            f"last-partition-id {md.last_partition_id} is lower than the highest partition field id "
            f"{highest_partition}"
        )
    known_columns: set[int] = set()
    for s in md.schemas:
        known_columns |= s.field_ids()
    for spec in md.partition_specs:
        for pf in spec.fields:
            for source_id in pf.source_ids:
                if source_id not in known_columns:
                    _fail(
                        f"partition spec {spec.spec_id} field {pf.name!r} has source id {source_id} "
                        "that is in no schema"
                    )

    _unique([o.order_id for o in md.sort_orders], "sort order")
    if md.default_sort_order_id != 0 and md.sort_order_by_id(md.default_sort_order_id) is None:
        _fail(f"default-sort-order-id {md.default_sort_order_id} is not among the sort orders")

    _unique([s.snapshot_id for s in md.snapshots], "snapshot")
    by_id = {s.snapshot_id: s for s in md.snapshots}
    if md.current_snapshot_id is not None and md.current_snapshot_id not in by_id:
        _fail(f"current-snapshot-id {md.current_snapshot_id} is not among the snapshots")
    for name, ref in md.refs.items():
        if ref.snapshot_id not in by_id:
            _fail(f"ref {name!r} points at unknown snapshot {ref.snapshot_id}")
    main = md.refs.get(MAIN_BRANCH)
    if main is not None:
        if not main.is_branch:
            _fail("ref 'main' must be a branch")
        if main.snapshot_id != md.current_snapshot_id:
            _fail(
                f"ref 'main' points at snapshot {main.snapshot_id} but current-snapshot-id is "
                f"{md.current_snapshot_id}"
            )

    for snap in md.snapshots:
        if snap.sequence_number > md.last_sequence_number:
            _fail(
                f"snapshot {snap.snapshot_id} has sequence number {snap.sequence_number} above "
                f"last-sequence-number {md.last_sequence_number}"
            )
        if md.format_version >= 2 and snap.parent_snapshot_id is not None:
            parent = by_id.get(snap.parent_snapshot_id)
            # Snapshots carried over from v1 all have sequence number 0; only v2+ ones must increase.
            if parent is not None and (
                (snap.sequence_number != 0 and snap.sequence_number <= parent.sequence_number)
                or (snap.sequence_number == 0 and parent.sequence_number != 0)
            ):
                _fail(
                    f"snapshot {snap.snapshot_id} has sequence number {snap.sequence_number}, not above "
                    f"its parent {parent.snapshot_id}'s {parent.sequence_number}"
                )
