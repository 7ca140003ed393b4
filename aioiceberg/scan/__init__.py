"""Scan planning: snapshot -> manifest list -> manifests -> pruned entries -> file scan tasks."""

from aioiceberg.scan.cache import ManifestCache, ManifestListCache, default_manifest_cache
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
    "default_manifest_cache",
    "select_snapshot",
]
