"""What one plan did: how much it skipped, read and fetched, and how soon it answered."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PlanMetrics", "ReadMetrics"]


@dataclass
class PlanMetrics:
    """Counters filled while ``plan_files`` runs; final once the iterator is exhausted.

    ``manifests_read`` counts manifests decoded by this plan; ``manifests_from_cache`` those
    served decoded by the shared cache (neither fetched nor decoded). Entry counters cover
    live entries of data and delete manifests that were decoded (cache hits add nothing).
    ``entries_ahead``: entries of a plan's first manifest decoded from its first blocks and
    sent on before the whole manifest was (see ``Planner.load``).
    """

    manifests_total: int = 0
    manifests_skipped_by_summaries: int = 0
    delete_manifests_skipped_by_sequence: int = 0
    manifests_read: int = 0
    manifests_from_cache: int = 0
    manifest_list_from_cache: bool = False
    entries_read: int = 0
    entries_skipped_by_partition: int = 0
    entries_skipped_by_metrics: int = 0
    bytes_fetched: int = 0
    tasks: int = 0
    delete_files: int = 0
    decoded_in_processes: int = 0
    decoded_columnar: int = 0
    entries_ahead: int = 0
    time_to_first_task_s: float | None = None
    planning_time_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ReadMetrics:
    """Counters of one read, for tests and metrics (here, not beside the reader, so that a
    plan imports nothing of the read path)."""

    files: int = 0
    row_groups_total: int = 0
    row_groups_read: int = 0
    bytes_fetched: int = 0
    delete_files_read: int = 0
