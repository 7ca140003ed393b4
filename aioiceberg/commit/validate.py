"""Conflict checks for row-level changes: what concurrent snapshots did to what we touched.

A delete or overwrite is computed on the snapshot it started from. When the commit has to
rebase onto a newer parent, rebasing is only safe if nothing committed in between touches
the same rows; otherwise the change must fail rather than silently lose an append or
resurrect a deleted row. Only the snapshots added since the starting one are read, and in
them only the manifests those snapshots wrote (``added_snapshot_id``), as PyIceberg's
``validate.py`` and Java's ``MergingSnapshotProducer`` do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aioiceberg.errors import CommitConflictError
from aioiceberg.expressions.evaluators import InclusiveMetricsEvaluator, PartitionEvaluator
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestEntryStatus,
    iter_manifest_entries,
    snapshot_manifests,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import unmapped_field_ids
from aioiceberg.spec.row_lineage import LINEAGE_IDS

__all__ = ["ConflictDetection", "snapshots_since", "validate_concurrent_changes"]

PartitionKey = tuple[int, tuple[Any, ...]]
_FILE_PATH_FIELD_ID = 2147483546  # file_path of position delete files


@dataclass
class ConflictDetection:
    """What a row-level change touched, to compare against concurrent commits.

    ``row_filter`` (bound) or ``partitions`` describe the rows the change reads or replaces:
    a concurrent data file that may hold such rows is a conflict when ``check_added_data``
    (serializable isolation). ``removed`` are the data files the change deletes or rewrites:
    a concurrent removal of one, or a concurrent delete file that may apply to one, is a
    conflict (rewriting it would resurrect those rows). ``referenced`` are data files the
    change's position deletes point at: they must still exist. ``dv_referenced`` are data
    files the change writes a deletion vector for: a concurrent DV for one of them is a
    conflict (a data file has at most one DV; Java's ``validateAddedDVs``).
    """

    row_filter: Expression | None = None
    partitions: frozenset[PartitionKey] | None = None
    check_added_data: bool = True
    removed: frozenset[str] = frozenset()
    removed_partitions: frozenset[PartitionKey] = frozenset()
    referenced: frozenset[str] = frozenset()
    dv_referenced: frozenset[str] = frozenset()
    case_sensitive: bool = True
    _partition_evaluators: dict[int, PartitionEvaluator] = field(default_factory=dict, compare=False)
    _metrics_evaluator: list[InclusiveMetricsEvaluator] = field(default_factory=list, compare=False)

    def may_hold_touched_rows(self, f: DataFile, metadata: TableMetadata) -> bool:
        if self.partitions is not None:
            return (f.spec_id, f.partition) in self.partitions
        if self.row_filter is None:
            return False
        if isinstance(self.row_filter, AlwaysTrue):
            return True
        schema = metadata.schema()
        ev = self._partition_evaluators.get(f.spec_id)
        if ev is None:
            spec = metadata.spec_by_id(f.spec_id)
            if spec is None:
                return True
            ev = self._partition_evaluators[f.spec_id] = PartitionEvaluator(
                schema, spec, self.row_filter, self.case_sensitive
            )
        if not ev.eval(f.partition):
            return False
        if not self._metrics_evaluator:
            self._metrics_evaluator.append(
                InclusiveMetricsEvaluator(
                    schema,
                    self.row_filter,
                    self.case_sensitive,
                    # stored row lineage stats leave out the rows that derive their values
                    untrusted=unmapped_field_ids(schema, metadata.properties) | LINEAGE_IDS,
                )
            )
        return self._metrics_evaluator[0].eval(f)

    def delete_may_apply(self, f: DataFile, unpartitioned_specs: set[int]) -> bool:
        """May this delete file remove rows of a data file we delete or rewrite?"""
        if not self.removed:
            return False
        if f.content == DataFileContent.POSITION_DELETES:
            target = f.referenced_data_file
            lower = (f.lower_bounds or {}).get(_FILE_PATH_FIELD_ID)
            upper = (f.upper_bounds or {}).get(_FILE_PATH_FIELD_ID)
            if target is None and lower is not None and lower == upper:
                target = lower.decode("utf-8", "replace")
            if target is not None:
                return target in self.removed
        elif not f.partition or f.spec_id in unpartitioned_specs:
            return True  # a global equality delete applies to every partition
        return (f.spec_id, f.partition) in self.removed_partitions


def snapshots_since(metadata: TableMetadata, parent: Snapshot | None, start_id: int | None) -> list[Snapshot]:
    """The snapshots from ``parent`` back to (not including) ``start_id``, newest first.

    Raises a conflict when ``start_id`` is no longer an ancestor (the branch was reset or
    rolled back under us): there is no sound way to rebase then.
    """
    out: list[Snapshot] = []
    current = parent
    while current is not None and current.snapshot_id != start_id:
        out.append(current)
        pid = current.parent_snapshot_id
        current = metadata.snapshot_by_id(pid) if pid is not None else None
    if start_id is not None and current is None:
        raise CommitConflictError(
            f"snapshot {start_id} this change was computed on is no longer an ancestor of the branch"
        )
    return out


async def validate_concurrent_changes(
    io: FileIO,
    metadata: TableMetadata,
    snapshots: Iterable[Snapshot],
    detection: ConflictDetection,
) -> None:
    """Raise ``CommitConflictError`` when any of ``snapshots`` conflicts with ``detection``."""
    watched = detection.removed | detection.referenced
    unpartitioned = {i for i, s in metadata.specs_by_id().items() if not s.fields}
    for snap in snapshots:
        manifests = await snapshot_manifests(io, snap)
        # A removal of one of our files is the clearer report: look for it before raising.
        pending: CommitConflictError | None = None
        for mf in manifests:
            if mf.added_snapshot_id != snap.snapshot_id:
                continue
            data = await io.read(mf.manifest_path)
            for entry in iter_manifest_entries(data, mf):
                if entry.snapshot_id != snap.snapshot_id:
                    continue
                f = entry.data_file
                if entry.status == ManifestEntryStatus.DELETED:
                    if f.content == DataFileContent.DATA and f.file_path in watched:
                        raise CommitConflictError(
                            f"concurrent snapshot {snap.snapshot_id} removed {f.file_path}, "
                            "which this change deletes or references"
                        )
                    continue
                if entry.status != ManifestEntryStatus.ADDED:
                    continue
                if pending is not None:
                    continue
                if f.content == DataFileContent.DATA:
                    if detection.check_added_data and detection.may_hold_touched_rows(f, metadata):
                        pending = CommitConflictError(
                            f"concurrent snapshot {snap.snapshot_id} added {f.file_path}, "
                            "which may hold rows this change deletes or replaces"
                        )
                elif f.is_deletion_vector and f.referenced_data_file in detection.dv_referenced:
                    pending = CommitConflictError(
                        f"concurrent snapshot {snap.snapshot_id} added a deletion vector for "
                        f"{f.referenced_data_file}, which this change writes one for"
                    )
                elif detection.delete_may_apply(f, unpartitioned):
                    pending = CommitConflictError(
                        f"concurrent snapshot {snap.snapshot_id} added delete file {f.file_path}, "
                        "which may delete rows of a file this change rewrites"
                    )
        if pending is not None:
            raise pending
