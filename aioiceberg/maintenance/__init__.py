"""Table maintenance: snapshot expiry, orphan removal, manifest and data file rewrites, statistics.

Sits above ``scan``, ``read``, ``write`` and ``commit`` (it uses all four) and below the
faces. Expiry, the manifest rewrite and statistics are planned here as changes a
``Transaction`` stages (``plan_*``: files are read and written now, the change commits with
the rest); compaction (``compact_data_files``) hands its changes to a commit it is given (a
table's ``commit_change``, or a transaction's staging); orphan removal deletes objects and
commits nothing.
"""

from aioiceberg.maintenance.compaction import (
    RewriteDataFilesChange,
    RewriteDataFilesResult,
    compact_data_files,
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
    "compact_data_files",
    "plan_compute_statistics",
    "plan_expire_snapshots",
    "plan_expiry",
    "plan_rewrite_manifests",
    "preview_expire_snapshots",
    "referenced_files",
    "remove_orphan_files",
]
