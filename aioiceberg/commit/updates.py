"""Metadata updates: the vocabulary every change is spelled in (the REST catalog's).

A change is a list of these plus the requirements it assumes. Keeping them as plain
values means one ``apply_updates`` serves every commit protocol and a transaction is
just the concatenation of its changes' updates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aioiceberg.spec.metadata import MAIN_BRANCH, Snapshot, SnapshotRefType, StatisticsFile
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import SortOrder

__all__ = [
    "LAST_ADDED",
    "AddPartitionSpec",
    "AddSchema",
    "AddSnapshot",
    "AddSortOrder",
    "AssignUUID",
    "RemoveProperties",
    "RemoveSnapshotRef",
    "RemoveSnapshots",
    "RemoveStatistics",
    "SetCurrentSchema",
    "SetDefaultSortOrder",
    "SetDefaultSpec",
    "SetLocation",
    "SetProperties",
    "SetSnapshotRef",
    "SetStatistics",
    "TableUpdate",
    "UpgradeFormatVersion",
]

LAST_ADDED = -1
"""As in the REST protocol: an id of -1 means "the one added earlier in this change"."""


@dataclass(frozen=True, slots=True)
class AssignUUID:
    uuid: str


@dataclass(frozen=True, slots=True)
class UpgradeFormatVersion:
    format_version: int


@dataclass(frozen=True, slots=True)
class AddSchema:
    schema: Schema
    last_column_id: int | None = None


@dataclass(frozen=True, slots=True)
class SetCurrentSchema:
    schema_id: int = LAST_ADDED


@dataclass(frozen=True, slots=True)
class AddPartitionSpec:
    spec: PartitionSpec


@dataclass(frozen=True, slots=True)
class SetDefaultSpec:
    spec_id: int = LAST_ADDED


@dataclass(frozen=True, slots=True)
class AddSortOrder:
    sort_order: SortOrder


@dataclass(frozen=True, slots=True)
class SetDefaultSortOrder:
    sort_order_id: int = LAST_ADDED


@dataclass(frozen=True, slots=True)
class AddSnapshot:
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class SetSnapshotRef:
    snapshot_id: int
    ref_name: str = MAIN_BRANCH
    type: SnapshotRefType = SnapshotRefType.BRANCH
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RemoveSnapshotRef:
    ref_name: str


@dataclass(frozen=True, slots=True)
class RemoveSnapshots:
    snapshot_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SetStatistics:
    """Register (or replace) the Puffin statistics file of one snapshot."""

    statistics: StatisticsFile


@dataclass(frozen=True, slots=True)
class RemoveStatistics:
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class SetProperties:
    updates: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "updates", dict(self.updates))

    def __hash__(self) -> int:
        return hash(frozenset(self.updates.items()))


@dataclass(frozen=True, slots=True)
class RemoveProperties:
    removals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetLocation:
    location: str


TableUpdate = (
    AssignUUID
    | UpgradeFormatVersion
    | AddSchema
    | SetCurrentSchema
    | AddPartitionSpec
    | SetDefaultSpec
    | AddSortOrder
    | SetDefaultSortOrder
    | AddSnapshot
    | SetSnapshotRef
    | RemoveSnapshotRef
    | RemoveSnapshots
    | SetStatistics
    | RemoveStatistics
    | SetProperties
    | RemoveProperties
    | SetLocation
)
