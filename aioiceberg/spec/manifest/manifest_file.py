"""Manifest-list rows: what a snapshot knows about each manifest without opening it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["ManifestContent", "ManifestFile", "PartitionFieldSummary"]


class ManifestContent(IntEnum):
    """Whether a manifest tracks data files or delete files (field 517; never both)."""

    DATA = 0
    DELETES = 1


@dataclass(frozen=True, slots=True)
class PartitionFieldSummary:
    """Value range of one partition field over a manifest, used to skip manifests unopened.

    Bounds are Appendix D bytes of the partition field's type; ``None`` when every value is
    null or NaN. ``contains_nan`` is ``None`` when the writer did not record it.
    """

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """One manifest as listed in a manifest list.

    ``sequence_number`` / ``min_sequence_number`` are ``None`` for a manifest written by a
    commit that has not been assigned its sequence number yet; the manifest-list writer
    fills them. Counts may be ``None`` in v1 lists, meaning "unknown, assume some".
    """

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent
    sequence_number: int | None
    min_sequence_number: int | None
    added_snapshot_id: int
    added_files_count: int | None = None
    existing_files_count: int | None = None
    deleted_files_count: int | None = None
    added_rows_count: int | None = None
    existing_rows_count: int | None = None
    deleted_rows_count: int | None = None
    partitions: tuple[PartitionFieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None

    def has_added_files(self) -> bool:
        return self.added_files_count is None or self.added_files_count > 0

    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    def has_deleted_files(self) -> bool:
        return self.deleted_files_count is None or self.deleted_files_count > 0
