"""Table maintenance: snapshot expiry, orphan removal, manifest and data file rewrites, statistics.

Sits above ``scan``, ``read``, ``write`` and ``commit`` (it uses all four) and below the
faces: ``Table`` methods delegate here.
"""

from aioiceberg.maintenance.compaction import RewriteDataFilesResult, rewrite_data_files
from aioiceberg.maintenance.expire import ExpireResult, expire_snapshots, plan_expiry
from aioiceberg.maintenance.files import MaintainedTable
from aioiceberg.maintenance.manifests import MergeAppend, RewriteManifestsResult, rewrite_manifests
from aioiceberg.maintenance.orphans import referenced_files, remove_orphan_files
from aioiceberg.maintenance.statistics import compute_statistics

__all__ = [
    "ExpireResult",
    "MaintainedTable",
    "MergeAppend",
    "RewriteDataFilesResult",
    "RewriteManifestsResult",
    "compute_statistics",
    "expire_snapshots",
    "plan_expiry",
    "referenced_files",
    "remove_orphan_files",
    "rewrite_data_files",
    "rewrite_manifests",
]
