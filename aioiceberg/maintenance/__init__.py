"""Table maintenance: snapshot expiry, orphan removal, manifest and data file rewrites, statistics.

Sits above ``scan``, ``read``, ``write`` and ``commit`` (it uses all four) and below the
faces. Expiry, the rewrites and statistics are planned here as changes a ``Transaction``
stages (``plan_*``: files are read and written now, the change commits with the rest);
orphan removal deletes objects and commits nothing.
"""

from aioiceberg.maintenance.compaction import (
    RewriteDataFilesChange,
    RewriteDataFilesResult,
    plan_rewrite_data_files,
)
from aioiceberg.maintenance.expire import (
    ExpireResult,
    ExpireSnapshotsChange,
    plan_expire_snapshots,
    plan_expiry,
    preview_expire_snapshots,
)
from aioiceberg.maintenance.manifests import (
    MergeAppend,
    RewriteManifestsChange,
    RewriteManifestsResult,
    plan_rewrite_manifests,
)
from aioiceberg.maintenance.orphans import referenced_files, remove_orphan_files
from aioiceberg.maintenance.reachable import MaintainedTable
from aioiceberg.maintenance.statistics import SetStatisticsChange, plan_compute_statistics

__all__ = [
    "ExpireResult",
    "ExpireSnapshotsChange",
    "MaintainedTable",
    "MergeAppend",
    "RewriteDataFilesChange",
    "RewriteDataFilesResult",
    "RewriteManifestsChange",
    "RewriteManifestsResult",
    "SetStatisticsChange",
    "plan_compute_statistics",
    "plan_expire_snapshots",
    "plan_expiry",
    "plan_rewrite_data_files",
    "plan_rewrite_manifests",
    "preview_expire_snapshots",
    "referenced_files",
    "remove_orphan_files",
]
