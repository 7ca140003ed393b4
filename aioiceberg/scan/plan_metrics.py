"""What one plan did: how much it skipped, read and fetched, and how soon it answered."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["PlanMetrics", "ReadMetrics"]


@dataclass(repr=False)
class PlanMetrics:
    """Counters filled while ``plan_files`` runs; final once the iterator is exhausted.

    What the plan decided is counted whether it decoded a manifest or found its view in the
    shared cache (a view keeps the counts it was decoded with), so a repeated plan reports the
    same manifests and entries skipped as the first. What it cost this time is apart:
    ``manifests_read`` counts manifests fetched and decoded by this plan,
    ``manifests_from_cache`` those found decoded in the cache, ``bytes_fetched`` the bytes
    read, and ``from_cache`` says the whole plan came from the caches (nothing fetched or
    decoded). Entry counters cover live entries of data and delete manifests: each entry is
    one file. ``entries_ahead``: entries of a plan's first manifest decoded from its first
    blocks and sent on before the whole manifest was (see ``ManifestLoader.load``).

    ``str()`` is a short summary; ``as_dict()`` every counter.
    """

    manifests_total: int = 0
    manifests_skipped_by_summaries: int = 0
    delete_manifests_skipped_by_sequence: int = 0
    manifests_read: int = 0
    manifests_from_cache: int = 0
    manifest_list_from_cache: bool = False
    from_cache: bool = False
    entries_read: int = 0
    entries_skipped_by_partition: int = 0
    entries_skipped_by_metrics: int = 0
    bytes_fetched: int = 0
    tasks: int = 0
    delete_files: int = 0
    decoded_in_processes: int = 0
    decoded_columnar: int = 0
    # decoded without their metric maps: a plan reading none, the cache keeping no more
    decoded_without_stats: int = 0
    entries_ahead: int = 0
    time_to_first_task_s: float | None = None
    planning_time_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add_entries(self, read: int, skipped_by_partition: int, skipped_by_metrics: int) -> None:
        """Count one manifest's entries, decoded now or kept with its cached view."""
        self.entries_read += read
        self.entries_skipped_by_partition += skipped_by_partition
        self.entries_skipped_by_metrics += skipped_by_metrics

    @property
    def files_kept(self) -> int:
        """Files of the manifests read that neither partition nor column stats ruled out."""
        return self.entries_read - self.entries_skipped_by_partition - self.entries_skipped_by_metrics

    def __str__(self) -> str:
        if self.planning_time_s is None and not self.manifests_total:
            return "no plan run yet"
        skipped = self.entries_read - self.files_kept
        files = f"{self.files_kept} of {self.entries_read} files kept"
        if skipped:
            files += (
                f" ({skipped} skipped: {self.entries_skipped_by_partition} by partition, "
                f"{self.entries_skipped_by_metrics} by column stats)"
            )
        files += f"; {self.tasks} tasks"
        if self.delete_files:
            files += f", {self.delete_files} delete files applied"
        used = self.manifests_read + self.manifests_from_cache
        manifests = f"{used} of {self.manifests_total} manifests read"
        passed = []
        if self.manifests_skipped_by_summaries:
            passed.append(f"{self.manifests_skipped_by_summaries} skipped by partition summaries")
        if self.delete_manifests_skipped_by_sequence:
            passed.append(f"{self.delete_manifests_skipped_by_sequence} delete manifests older than the data")
        if passed:
            manifests += f" ({', '.join(passed)})"
        manifests += f"; {self.manifests_read} decoded, {self.manifests_from_cache} from cache"
        if self.from_cache:
            cost = "plan from cache: nothing fetched or decoded"
        else:
            cost = f"{_size(self.bytes_fetched)} fetched"
            if self.manifest_list_from_cache:
                cost += " (manifest list from cache)"
        if self.time_to_first_task_s is not None:
            cost += f"; first task after {_duration(self.time_to_first_task_s)}"
        if self.planning_time_s is not None:
            cost += f", planned in {_duration(self.planning_time_s)}"
        return "\n".join((files, manifests, cost))

    def __repr__(self) -> str:
        """The counters that are not at their defaults, one a line (every one: ``as_dict()``)."""
        shown = [
            f"    {f.name}={getattr(self, f.name)!r},"
            for f in fields(self)
            if getattr(self, f.name) != f.default
        ]
        if not shown:
            return "PlanMetrics()"
        return "\n".join(("PlanMetrics(", *shown, ")"))


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} B"
    size = n / 1000
    for unit in ("kB", "MB", "GB"):
        if size < 1000:
            return f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def _duration(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    ms = s * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


@dataclass
class ReadMetrics:
    """Counters of one read, for tests and metrics (here, not beside the reader, so that a
    plan imports nothing of the read path)."""

    files: int = 0
    row_groups_total: int = 0
    row_groups_read: int = 0
    bytes_fetched: int = 0
    delete_files_read: int = 0
