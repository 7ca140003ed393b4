"""The scan users hold: planning (``aioiceberg.scan``) joined to reading (``aioiceberg.read``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, cast

import pyarrow as pa

from aioiceberg.io import FileIO
from aioiceberg.scan import TableScan
from aioiceberg.scan.metrics import ScanMetrics, ScanStats
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.name_mapping import (
    DEFAULT_NAME_MAPPING_PROPERTY,
    NameMapping,
    name_mapping_from_json,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.tasks import FileScanTask

__all__ = ["Scan"]

_READ_OPTIONS = ("files_in_flight", "batch_rows", "include_file_column", "include_pos_column")


class Scan:
    """A configured scan: ``plan_files()`` streams tasks, ``to_batches()`` / ``to_arrow()`` rows.

    Planning options (``io_concurrency``, ``decode_workers``, ``split_size``, ...) go to the
    planner; ``files_in_flight``, ``batch_rows``, ``include_file_column`` and
    ``include_pos_column`` go to the reader.
    """

    def __init__(self, io: FileIO, metadata: TableMetadata, **kwargs: Any) -> None:
        self._read_options = {k: kwargs.pop(k) for k in _READ_OPTIONS if k in kwargs}
        self.planner = TableScan(io, metadata, **kwargs)
        self.io = io
        self.metadata = metadata
        self.read_stats = ScanStats()

    @property
    def metrics(self) -> Any:
        """Planning metrics of the last ``plan_files()`` (manifests and entries read and skipped)."""
        return self.planner.metrics

    @property
    def snapshot_schema(self) -> Schema:
        """The schema rows are bound and read with: the snapshot's own (time travel), else the
        current one (the planner decides, so plan and read agree)."""
        return self.planner.schema

    def projection(self) -> Schema:
        return self.snapshot_schema.select(
            *self.planner.selected_fields, case_sensitive=self.planner.case_sensitive
        )

    def _name_mapping(self) -> NameMapping | None:
        text = self.metadata.properties.get(DEFAULT_NAME_MAPPING_PROPERTY)
        return name_mapping_from_json(text) if text else None

    def plan_files(self, metrics: ScanMetrics | None = None) -> AsyncIterator[FileScanTask]:
        """Stream the tasks; ``metrics`` (optional) counts this call alone."""
        return self.planner.plan_files(metrics)

    def _tasks(self) -> AsyncGenerator[FileScanTask, None]:
        return cast(AsyncGenerator[FileScanTask, None], self.planner.plan_files())

    async def to_batches(self) -> AsyncIterator[pa.RecordBatch]:
        """Stream the matching rows as Arrow batches; memory stays bounded by the files in flight."""
        from aioiceberg.read import read_tasks  # the read path: not imported by plans

        async with (
            aclosing(self._tasks()) as tasks,
            aclosing(
                read_tasks(
                    self.io,
                    tasks,
                    self.projection(),
                    table_schema=self.snapshot_schema,
                    name_mapping=self._name_mapping(),
                    case_sensitive=self.planner.case_sensitive,
                    limit=self.planner.limit,
                    stats=self.read_stats,
                    **self._read_options,
                )
            ) as batches,
        ):
            async for batch in batches:
                yield batch

    async def to_arrow(self) -> pa.Table:
        from aioiceberg.read import read_to_table

        async with aclosing(self._tasks()) as tasks:
            return await read_to_table(
                self.io,
                tasks,
                self.projection(),
                table_schema=self.snapshot_schema,
                name_mapping=self._name_mapping(),
                case_sensitive=self.planner.case_sensitive,
                limit=self.planner.limit,
                stats=self.read_stats,
                **self._read_options,
            )

    def __repr__(self) -> str:
        return f"Scan({self.planner!r})"
