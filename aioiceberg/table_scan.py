"""The scan users hold: planning (``aioiceberg.scan``) joined to reading (``aioiceberg.read``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Unpack

import pyarrow as pa

from aioiceberg.expressions.tree import Expression
from aioiceberg.io import FileIO
from aioiceberg.scan.metrics import PlanMetrics, ReadMetrics
from aioiceberg.scan.options import ScanArgs, ScanOptions, split_scan_options
from aioiceberg.scan.pipeline import PlanStream
from aioiceberg.scan.planner import Planner
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.name_mapping import NameMapping
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema

__all__ = ["Scan", "TableScan"]

# what a scan reads, as opposed to how (the options)
_WHAT = ScanArgs.__optional_keys__ - ScanOptions.__optional_keys__


class TableScan:
    """A configured scan: ``plan_files()`` streams tasks, ``to_batches()`` / ``to_arrow()`` rows.

    Options (typed by :class:`~aioiceberg.scan.options.ScanOptions`, checked here) go to the
    planner (``io_concurrency``, ``decode_workers``, ``split_size``, ...) or to the reader
    (``files_in_flight``, ``batch_rows``, ``include_file_column``, ``include_pos_column``).
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        row_filter: str | Expression = "",
        **kwargs: Unpack[ScanArgs],
    ) -> None:
        plan, self.read_options = split_scan_options({k: v for k, v in kwargs.items() if k not in _WHAT})
        self.planner = Planner(
            io,
            metadata,
            row_filter,
            selected_fields=kwargs.get("selected_fields", ("*",)),
            case_sensitive=kwargs.get("case_sensitive", True),
            snapshot_id=kwargs.get("snapshot_id"),
            ref=kwargs.get("ref"),
            as_of=kwargs.get("as_of"),
            limit=kwargs.get("limit"),
            options=plan,
        )
        self.io = io
        self.metadata = metadata
        self.read_stats = ReadMetrics()

    @property
    def metrics(self) -> PlanMetrics:
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
        return TableProperties(self.metadata.properties).name_mapping

    def plan_files(self, metrics: PlanMetrics | None = None) -> PlanStream:
        """Stream the tasks; ``metrics`` (optional) counts this call alone. ``async for``
        it, or ``async with scan.plan_files() as tasks:`` to own the plan's task group."""
        return self.planner.plan_files(metrics)

    async def to_batches(self) -> AsyncIterator[pa.RecordBatch]:
        """Stream the matching rows as Arrow batches; memory stays bounded by the files in flight."""
        from aioiceberg.read import read_tasks  # the read path: not imported by plans

        async with (
            self.plan_files() as tasks,
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
                    **self.read_options.as_kwargs(),
                )
            ) as batches,
        ):
            async for batch in batches:
                yield batch

    async def to_arrow(self) -> pa.Table:
        from aioiceberg.read import read_to_table

        async with self.plan_files() as tasks:
            return await read_to_table(
                self.io,
                tasks,
                self.projection(),
                table_schema=self.snapshot_schema,
                name_mapping=self._name_mapping(),
                case_sensitive=self.planner.case_sensitive,
                limit=self.planner.limit,
                stats=self.read_stats,
                **self.read_options.as_kwargs(),
            )

    def __repr__(self) -> str:
        return f"TableScan({self.planner!r})"


Scan = TableScan  # the name this class had before
