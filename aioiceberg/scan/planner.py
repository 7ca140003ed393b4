"""Planning one scan: manifest list -> manifests -> pruned entries -> tasks.

:class:`Planner` binds the scan's row filter once and builds what every plan of the scan
shares: the manifest chooser (:mod:`~aioiceberg.scan.manifest_choice`), the manifest
loader (:mod:`~aioiceberg.scan.manifest_loader`: fetches, decodes and caches) and the task
builder (:mod:`~aioiceberg.scan.task_builder`: residuals and tasks). The stages that run
one plan, joined by bounded streams, are in :mod:`aioiceberg.scan.pipeline`; they get
those parts at construction and never the Planner. At most ``channel_size`` decoded
manifests wait for the consumer, so memory is bounded by the manifests in flight, not by
the table, when the caller consumes tasks as they come.

Delete manifests are read first. A data file waits for the delete index only when a
delete manifest could still apply to it (its sequence number is not above every delete
manifest's); all others are yielded as soon as their manifest is pruned.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from aioiceberg.errors import ValidationError
from aioiceberg.expressions import parse
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.lineage import LineageEvaluator, filter_schema
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.expressions.visitor import referenced_field_ids
from aioiceberg.io.base import FileIO
from aioiceberg.scan.bound_filter import BoundFilter
from aioiceberg.scan.decode import PruneContext
from aioiceberg.scan.manifest_choice import BulkChoice, ManifestChooser
from aioiceberg.scan.manifest_loader import (
    AHEAD_MIN_ENTRIES,
    AHEAD_ROWS,
    Lanes,
    ManifestLoader,
    manifest_cache_key,
)
from aioiceberg.scan.options import PlanOptions
from aioiceberg.scan.pipeline import PlanContext, PlanParts, PlanStream
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.scan.snapshot_select import select_snapshot
from aioiceberg.scan.task_builder import TaskBuilder
from aioiceberg.spec.manifest import ManifestFile
from aioiceberg.spec.manifest.columnar import columnar_available
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import schema_as_read, unmapped_field_ids
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.row_lineage import LINEAGE_IDS, lineage_field
from aioiceberg.spec.schema import Schema

__all__ = ["AHEAD_MIN_ENTRIES", "AHEAD_ROWS", "Lanes", "Planner", "manifest_cache_key"]


class Planner:
    """Plans one snapshot of a table under one filter; ``plan_files()`` streams its tasks.

    What does not change between plans lives here and in the parts it builds (the
    snapshot, the filter bound once, the evaluators and residuals cached per spec id and
    partition tuple: stateless, so plans share them); what one plan counts and holds lives
    in its :class:`~aioiceberg.scan.pipeline.PlanContext`. ``limit`` stops planning once
    unfiltered, delete-free tasks hold that many rows; ``options`` are the knobs
    (:class:`PlanOptions`).
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        row_filter: str | Expression = "",
        selected_fields: Sequence[str] = ("*",),
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: int | dt.datetime | None = None,
        case_sensitive: bool = True,
        limit: int | None = None,
        options: PlanOptions | None = None,
    ) -> None:
        if limit is not None and limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
        self.options = options = options if options is not None else PlanOptions()
        self.io = io
        self.metadata = metadata
        self.snapshot: Snapshot | None = select_snapshot(metadata, snapshot_id, ref, as_of)
        # As Java and PyIceberg: time travel (a snapshot id, a time, a tag) binds and reads
        # with the snapshot's own schema; the current state and branches with the current one.
        tag = ref is not None and ref in metadata.refs and not metadata.refs[ref].is_branch
        time_travel = tag or snapshot_id is not None or as_of is not None
        self.schema: Schema = metadata.schema()
        if time_travel and self.snapshot is not None and self.snapshot.schema_id is not None:
            self.schema = metadata.schema_by_id(self.snapshot.schema_id) or self.schema
        # a required column the name mapping cannot resolve reads as NULL: bound, planned
        # and read as optional alike
        self.schema = schema_as_read(self.schema, metadata.properties)
        self.specs: dict[int, PartitionSpec] = metadata.specs_by_id()
        self.unpartitioned_spec_ids = frozenset(i for i, s in self.specs.items() if not s.fields)
        self.case_sensitive = case_sensitive
        self.selected_fields = tuple(selected_fields)
        self.limit = limit
        if isinstance(row_filter, str):
            row_filter = parse(row_filter) if row_filter.strip() else AlwaysTrue()
        self.row_filter: Expression = row_filter
        # v3 row lineage columns a filter names are bound as metadata columns after the table's
        filtering = filter_schema(
            self.schema, row_filter, case_sensitive, metadata.format_version, metadata.location
        )
        # SQL's rule for NULLs: a row for which the filter is NULL is not returned
        self.bound_filter: Expression = bind_row_filter(filtering, row_filter, case_sensitive)
        self.runtime = io.runtime
        self.columnar = options.columnar and columnar_available() and self.runtime.columnar_usable
        self.cache = options.cache if options.cache is not None else self.runtime.manifest_cache
        self.manifest_list_cache = (
            options.manifest_list_cache
            if options.manifest_list_cache is not None
            else self.runtime.manifest_list_cache
        )
        stats = None if options.include_column_stats else referenced_field_ids(self.bound_filter)
        # the stats of stored lineage columns leave out the rows that derive theirs: never pruned
        # on (LineageEvaluator prunes on what can be known of them)
        untrusted = unmapped_field_ids(self.schema, metadata.properties)
        lineage_filter = LineageEvaluator.wanted(self.bound_filter)
        if lineage_filter:
            untrusted |= LINEAGE_IDS
        self.prune_context = PruneContext.build(
            filtering,
            self.specs,
            self.bound_filter,
            case_sensitive,
            stats,
            untrusted,
            self.runtime.pause_gc,
            options.vectorized,
            options.native_decoder,
        )
        bound = BoundFilter(self.schema, self.specs, self.bound_filter, case_sensitive)
        self.chooser = ManifestChooser(bound)
        self.loader = ManifestLoader(
            io,
            self.snapshot,
            self.prune_context,
            options,
            self.columnar,
            self.cache,
            self.manifest_list_cache,
        )
        self.tasks = TaskBuilder(bound, options.split_size)
        self.tasks.lineage = lineage_filter or any(
            lineage_field(n, case_sensitive) is not None
            and self.schema.find_field_id(n, case_sensitive) is None
            for n in self.selected_fields
        )
        if lineage_filter:
            self.tasks.lineage_filter = LineageEvaluator(self.bound_filter)
        # the builder's, named here for those holding the planner (task batches, streaming)
        self.residual = self.tasks.residual
        self.residual_of = self.tasks.residual_of
        self.spec = self.tasks.spec
        self._parts = PlanParts(
            self.chooser,
            self.loader,
            self.tasks,
            options,
            limit,
            self.unpartitioned_spec_ids,
            metadata.default_spec_id,
        )
        self.metrics = PlanMetrics()  # the last plan started (each call also has its own)

    async def manifests(self, metrics: PlanMetrics | None = None) -> Sequence[ManifestFile]:
        """The snapshot's manifests (from the shared cache when this snapshot was planned)."""
        return await self.loader.manifests(metrics)

    def bulk_choice(self, manifests: Iterable[ManifestFile]) -> BulkChoice:
        """What the summaries leave of the listing (see :meth:`ManifestChooser.bulk_choice`)."""
        return self.chooser.bulk_choice(manifests)

    def select(
        self, manifests: Iterable[ManifestFile] | BulkChoice, m: PlanMetrics
    ) -> tuple[list[ManifestFile], list[ManifestFile]]:
        """The data and delete manifests a plan reads (see :meth:`ManifestChooser.select`)."""
        return self.chooser.select(manifests, m)

    def plan_files(self, metrics: PlanMetrics | None = None) -> PlanStream:
        """Stream the tasks as they are decided (see :mod:`aioiceberg.scan.pipeline`).

        Each call counts into ``metrics`` (a fresh ``PlanMetrics`` if not given), so plans
        running at once keep theirs apart; ``self.metrics`` is the last started.
        ``async for task in planner.plan_files()`` needs nothing else: ``break``, or close
        or drop the iterator from any task, and the stages end; ``async with
        planner.plan_files() as tasks:`` runs the stages in the caller's task group instead.
        """
        m = self.metrics = metrics if metrics is not None else PlanMetrics()
        return PlanStream(PlanContext(self._parts, m))

    def __repr__(self) -> str:
        snap = self.snapshot.snapshot_id if self.snapshot is not None else None
        return f"Planner(snapshot={snap}, filter={self.bound_filter})"
