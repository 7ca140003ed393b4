"""Scan planning: snapshot -> manifest list -> manifests -> pruned entries -> file scan tasks."""

from aioiceberg.scan.cache import ManifestCache, ManifestListCache
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.scan.metrics import ScanMetrics
from aioiceberg.scan.planner import TableScan
from aioiceberg.scan.snapshot_select import select_snapshot

__all__ = [
    "DeleteIndex",
    "ManifestCache",
    "ManifestListCache",
    "ScanMetrics",
    "TableScan",
    "select_snapshot",
]
