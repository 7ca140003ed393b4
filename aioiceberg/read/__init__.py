"""Planned file scan tasks to Arrow: Parquet/Avro/ORC readers, projection by id, deletes."""

from aioiceberg.read.deletes import DeleteCache, decode_deletion_vector
from aioiceberg.read.task_reader import (
    FILE_COLUMN_ID,
    POS_COLUMN_ID,
    ReadMetrics,
    output_arrow_schema,
    read_tasks,
    read_to_table,
)

__all__ = [
    "FILE_COLUMN_ID",
    "POS_COLUMN_ID",
    "DeleteCache",
    "ReadMetrics",
    "decode_deletion_vector",
    "output_arrow_schema",
    "read_tasks",
    "read_to_table",
]
