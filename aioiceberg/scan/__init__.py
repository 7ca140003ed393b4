"""Scan planning: snapshot -> manifest list -> manifests -> pruned entries -> file scan tasks."""

from aioiceberg.scan.cache import ManifestCache, ManifestListCache
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.scan.options import PlanOptions, ReadOptions, ScanOptions
from aioiceberg.scan.pipeline import PlanStream
from aioiceberg.scan.plan_metrics import PlanMetrics, ReadMetrics
from aioiceberg.scan.planner import Planner
from aioiceberg.scan.snapshot_select import select_snapshot

__all__ = [
    "DeleteIndex",
    "ManifestCache",
    "ManifestListCache",
    "PlanMetrics",
    "PlanOptions",
    "PlanStream",
    "Planner",
    "ReadMetrics",
    "ReadOptions",
    "ScanOptions",
    "select_snapshot",
]
