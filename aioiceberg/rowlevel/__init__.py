"""Row-level changes: deletes, overwrites, dynamic partition overwrites, upserts."""

from aioiceberg.rowlevel.changes import (
    DELETE_ISOLATION_LEVEL,
    DELETE_MODE,
    plan_delete,
    plan_dynamic_partition_overwrite,
    plan_replace_partitions,
    plan_upsert,
)
from aioiceberg.rowlevel.touched_files import (
    PartialFile,
    Selection,
    select_by_filter,
    select_by_partitions,
    sql_filter,
)

__all__ = [
    "DELETE_ISOLATION_LEVEL",
    "DELETE_MODE",
    "PartialFile",
    "Selection",
    "plan_delete",
    "plan_dynamic_partition_overwrite",
    "plan_replace_partitions",
    "plan_upsert",
    "select_by_filter",
    "select_by_partitions",
    "sql_filter",
]
