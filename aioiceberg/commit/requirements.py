"""Requirements: what a change assumes about the table it was built on.

Checked against the table's latest metadata at commit time. A failed requirement is a
conflict (``CommitConflictError``): the change must be rebuilt on the new state, which
only the change's producer can do (an append can, a schema change cannot).
"""

from __future__ import annotations

from dataclasses import dataclass

from aioiceberg.errors import CommitConflictError
from aioiceberg.spec.metadata import TableMetadata

__all__ = [
    "AssertCreate",
    "AssertCurrentSchemaId",
    "AssertDefaultSortOrderId",
    "AssertDefaultSpecId",
    "AssertLastAssignedFieldId",
    "AssertLastAssignedPartitionId",
    "AssertRefSnapshotId",
    "AssertTableUUID",
    "TableRequirement",
    "validate_requirements",
]


def _fail(message: str) -> CommitConflictError:
    return CommitConflictError(f"requirement failed: {message}")


@dataclass(frozen=True, slots=True)
class AssertCreate:
    """The table must not exist yet."""

    def validate(self, base: TableMetadata | None) -> None:
        if base is not None:
            raise _fail("the table already exists")


def _existing(base: TableMetadata | None) -> TableMetadata:
    if base is None:
        raise _fail("the table does not exist")
    return base


@dataclass(frozen=True, slots=True)
class AssertTableUUID:
    """The table was not dropped and recreated under the same location."""

    uuid: str | None

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if self.uuid is not None and md.table_uuid != self.uuid:
            raise _fail(f"table uuid is {md.table_uuid}, expected {self.uuid}")


@dataclass(frozen=True, slots=True)
class AssertRefSnapshotId:
    """A branch or tag still points where it did (``None``: it must not exist)."""

    ref: str
    snapshot_id: int | None

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        ref = md.refs.get(self.ref)
        current = ref.snapshot_id if ref is not None else None
        if current != self.snapshot_id:
            raise _fail(f"ref {self.ref!r} is at {current}, expected {self.snapshot_id}")


@dataclass(frozen=True, slots=True)
class AssertLastAssignedFieldId:
    last_assigned_field_id: int

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if md.last_column_id != self.last_assigned_field_id:
            raise _fail(f"last column id is {md.last_column_id}, expected {self.last_assigned_field_id}")


@dataclass(frozen=True, slots=True)
class AssertCurrentSchemaId:
    current_schema_id: int

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if md.current_schema_id != self.current_schema_id:
            raise _fail(f"current schema is {md.current_schema_id}, expected {self.current_schema_id}")


@dataclass(frozen=True, slots=True)
class AssertLastAssignedPartitionId:
    last_assigned_partition_id: int

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if md.last_partition_id != self.last_assigned_partition_id:
            raise _fail(
                f"last partition id is {md.last_partition_id}, expected {self.last_assigned_partition_id}"
            )


@dataclass(frozen=True, slots=True)
class AssertDefaultSpecId:
    default_spec_id: int

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if md.default_spec_id != self.default_spec_id:
            raise _fail(f"default spec is {md.default_spec_id}, expected {self.default_spec_id}")


@dataclass(frozen=True, slots=True)
class AssertDefaultSortOrderId:
    default_sort_order_id: int

    def validate(self, base: TableMetadata | None) -> None:
        md = _existing(base)
        if md.default_sort_order_id != self.default_sort_order_id:
            raise _fail(
                f"default sort order is {md.default_sort_order_id}, expected {self.default_sort_order_id}"
            )


TableRequirement = (
    AssertCreate
    | AssertTableUUID
    | AssertRefSnapshotId
    | AssertLastAssignedFieldId
    | AssertCurrentSchemaId
    | AssertLastAssignedPartitionId
    | AssertDefaultSpecId
    | AssertDefaultSortOrderId
)


def validate_requirements(requirements: list[TableRequirement], base: TableMetadata | None) -> None:
    for requirement in requirements:
        requirement.validate(base)
