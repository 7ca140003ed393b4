"""Table maintenance actions whose work runs on Spark executors."""

from __future__ import annotations

from aioiceberg.spark.actions.delete_orphan_files import delete_orphan_files as delete_orphan_files
from aioiceberg.spark.actions.distributed_plan import plan_files as plan_files
from aioiceberg.spark.actions.expire_snapshots import expire_snapshots as expire_snapshots
from aioiceberg.spark.actions.rewrite_data_files import rewrite_data_files as rewrite_data_files
from aioiceberg.spark.actions.rewrite_manifests import rewrite_manifests as rewrite_manifests
from aioiceberg.spark.actions.rewrite_position_deletes import (
    rewrite_position_delete_files as rewrite_position_delete_files,
)
