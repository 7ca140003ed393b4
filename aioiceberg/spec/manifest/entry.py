"""Manifest entries: a content file plus the snapshot and sequence numbers that track it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from aioiceberg.spec.manifest.data_file import DataFile

__all__ = ["ManifestEntry", "ManifestEntryStatus"]


class ManifestEntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One row of a manifest.

    After reading, inherited values are filled in: a null snapshot id takes the manifest's
    ``added_snapshot_id``, and null sequence numbers take the manifest's sequence number when
    the entry was ADDED (or the manifest predates sequence numbers). ``None`` remains only
    where nothing could be inherited. When writing, leave sequence numbers of ADDED entries
    ``None`` so they inherit the sequence number the commit assigns.
    """

    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile

    @property
    def is_live(self) -> bool:
        """Part of the snapshot's data (ADDED or EXISTING); DELETED entries are history only."""
        return self.status != ManifestEntryStatus.DELETED
