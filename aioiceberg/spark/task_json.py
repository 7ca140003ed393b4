"""Planned tasks as JSON, grouped for executors; and reading one task back on an executor.

For drivers that plan with aioiceberg and hand work to their own Spark (or any other
distributed) code: ``plan_partitions`` on the driver, ``read_task_json`` on the worker.
Tasks travel in the spec's file-scan-task JSON, which carries the schema and spec they
were planned with, so a worker reads them without loading table metadata.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from aioiceberg._sync import default_loop
from aioiceberg.io.resolve import resolve_io
from aioiceberg.read import read_tasks
from aioiceberg.runtime import default_runtime
from aioiceberg.spec.name_mapping import NameMapping, name_mapping_from_json
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.scan_tasks import FileScanTask, file_scan_task_from_json, file_scan_task_to_json
from aioiceberg.spec.schema import Schema

__all__ = [
    "DEFAULT_OPEN_FILE_COST",
    "DEFAULT_SPLIT_SIZE",
    "group_tasks",
    "plan_partitions",
    "read_task_json",
    "read_tasks_json",
    "task_weight",
]

DEFAULT_SPLIT_SIZE = TableProperties.split_target_size.default
DEFAULT_OPEN_FILE_COST = TableProperties.split_open_file_cost.default  # a tiny file still costs an open


def task_weight(task: FileScanTask, open_file_cost: int = DEFAULT_OPEN_FILE_COST) -> int:
    """Bytes a task counts for when packing: its range (plus its delete files), at least the open cost."""
    length = task.length if task.length is not None else task.file.file_size_in_bytes - task.start
    deletes = sum(d.file_size_in_bytes for d in task.delete_files)
    return max(length + deletes, open_file_cost)


def group_tasks(
    tasks: Sequence[FileScanTask],
    split_size: int = DEFAULT_SPLIT_SIZE,
    open_file_cost: int = DEFAULT_OPEN_FILE_COST,
) -> list[list[FileScanTask]]:
    """Pack tasks into groups of about ``split_size`` bytes.

    Largest first, each into the group with the most room left (a new group when it fits
    nowhere): groups come out even, so no executor is left holding the tail, in
    O(n log groups).
    """
    if split_size <= 0:
        raise ValueError(f"split_size must be positive, got {split_size}")
    weighted = sorted(
        ((task_weight(t, open_file_cost), i, t) for i, t in enumerate(tasks)), key=lambda w: (-w[0], w[1])
    )
    groups: list[list[FileScanTask]] = []
    roomiest: list[tuple[int, int]] = []  # (-free bytes, group index)
    for weight, _, task in weighted:
        if roomiest and -roomiest[0][0] >= weight:
            free, g = heapq.heappop(roomiest)
            groups[g].append(task)
            heapq.heappush(roomiest, (free + weight, g))
        else:
            groups.append([task])
            heapq.heappush(roomiest, (weight - split_size, len(groups) - 1))
    return groups


def plan_partitions(
    table: Any,
    row_filter: Any = None,
    split_size: int = DEFAULT_SPLIT_SIZE,
    open_file_cost: int = DEFAULT_OPEN_FILE_COST,
    **scan_options: Any,
) -> list[list[str]]:
    """Plan a scan of ``table`` (a blocking ``aioiceberg.sync.Table``) into groups of task JSON.

    Files larger than ``split_size`` are split along their split offsets; ``scan_options``
    go to ``table.scan`` (``snapshot_id``, ``ref``, ``as_of``, ``case_sensitive``...).
    """
    scan = table.scan(row_filter=row_filter, split_size=split_size, **scan_options)
    tasks = list(scan.plan_files())
    return [
        [json.dumps(file_scan_task_to_json(t), separators=(",", ":")) for t in group]
        for group in group_tasks(tasks, split_size, open_file_cost)
    ]


def _task(task_json: str | bytes | Mapping[str, Any]) -> FileScanTask:
    obj = json.loads(task_json) if isinstance(task_json, str | bytes) else task_json
    return file_scan_task_from_json(obj)


def read_tasks_json(
    tasks_json: Sequence[str | bytes | Mapping[str, Any]],
    selected_fields: Sequence[str] = ("*",),
    storage_options: Mapping[str, Any] | None = None,
    *,
    projected_schema: Schema | None = None,
    table_schema: Schema | None = None,
    name_mapping: NameMapping | str | None = None,
    case_sensitive: bool = True,
    batch_rows: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream the rows of serialized tasks as Arrow batches (deletes and residuals applied).

    Blocking, for executors: it runs on aioiceberg's background loop, and the storage is
    resolved from the first task's file location with ``storage_options``.
    """
    tasks = [_task(t) for t in tasks_json]
    if not tasks:
        return iter(())
    schema = table_schema if table_schema is not None else tasks[0].schema
    projected = projected_schema if projected_schema is not None else schema.select(*selected_fields)
    mapping = name_mapping_from_json(name_mapping) if isinstance(name_mapping, str) else name_mapping
    io = resolve_io(tasks[0].file.file_path, storage_options, runtime=default_runtime())
    options: dict[str, Any] = {} if batch_rows is None else {"batch_rows": batch_rows}

    def batches() -> Any:
        return read_tasks(
            io,
            tasks,
            projected,
            table_schema=schema,
            name_mapping=mapping,
            case_sensitive=case_sensitive,
            **options,
        )

    return default_loop.iterate(batches)


def read_task_json(
    task_json: str | bytes | Mapping[str, Any],
    selected_fields: Sequence[str] = ("*",),
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Iterator[pa.RecordBatch]:
    """The rows of one serialized file scan task, as Arrow batches."""
    return read_tasks_json([task_json], selected_fields, storage_options, **kwargs)
