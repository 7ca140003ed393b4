"""``plan_files``: a scan's plan as a Spark DataFrame of tasks, built on executors.

For a table of millions of files, a plan as ``FileScanTask`` objects does not fit one
Python process. Here the driver reads only the manifest list and chooses the manifests
with the scan's own chooser (partition summaries, delete manifests older than every data
file dropped); executors each take a share of the data manifests (big ones spread
first), build the same :class:`~aioiceberg.scan.planner.Planner` from the same metadata
file and run the same stages over exactly that share with every chosen delete manifest
(each task reads the delete manifests itself: a table with many delete manifests costs
that many reads per task), and hand their tasks on as Arrow batches in the columns of
:data:`aioiceberg.scan.task_batches.TASK_SCHEMA` (``Table.scan().plan_batches()``'s). The
DataFrame holds exactly the tasks the single-process planner returns; nothing of it is
collected on the driver unless the caller collects it.

``read_table`` uses it above a size (``aioiceberg.spark.distributed_read``):
``prepare_plan`` reads the manifest list once on the driver, whose counts decide, and
``plan_frame`` builds the DataFrame.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from aioiceberg import sync
from aioiceberg._concurrency import task_group
from aioiceberg._sync import default_loop
from aioiceberg.errors import ValidationError
from aioiceberg.expressions import AlwaysTrue, and_, parse
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.expressions.tree import Expression
from aioiceberg.scan.options import PlanOptions
from aioiceberg.scan.pipeline import Batch, Failed, PlanContext, PlanParts, run_stages
from aioiceberg.scan.plan_metrics import PlanMetrics
from aioiceberg.scan.planner import Planner
from aioiceberg.scan.task_batches import TASK_SCHEMA, task_batch
from aioiceberg.spark.actions.reach import TableStore, partitions_for, run_job
from aioiceberg.spark.batch import SourceOptions
from aioiceberg.spec.manifest import ManifestFile
from aioiceberg.spec.metadata_json import parse_table_metadata

__all__ = [
    "BYTES_PER_ENTRY",
    "DistributedPlan",
    "PreparedPlan",
    "collect_tasks",
    "data_file_estimate",
    "plan_files",
    "plan_frame",
    "plan_share",
    "prepare_plan",
    "task_spark_schema",
]

# a manifest entry's bytes, roughly (Avro, deflate, a few columns' stats): the size of a
# manifest whose list gives no counts (v1) in files
BYTES_PER_ENTRY = 200


@dataclass(frozen=True)
class DistributedPlan:
    """What every executor task of one plan gets (broadcast): how to build the planner and
    the manifests; each task plans the data manifests of its shares."""

    store: TableStore
    metadata_location: str
    row_filter: str  # the unbound filter's JSON
    snapshot_id: int | None
    ref: str | None
    as_of: int | None
    case_sensitive: bool
    split_size: int | None
    deletes: list[ManifestFile]
    shares: list[list[ManifestFile]]


def task_spark_schema() -> Any:
    """The Spark schema of the task DataFrame (``TASK_SCHEMA``'s)."""
    return from_arrow_schema(TASK_SCHEMA)


async def _plan(plan: DistributedPlan, data: Sequence[ManifestFile]) -> list[pa.RecordBatch]:
    io = plan.store.open()
    location = plan.metadata_location
    # a metadata file of a long history runs to megabytes: parsed off the event loop
    metadata = await anyio.to_thread.run_sync(parse_table_metadata, await io.read(location), location)
    planner = Planner(
        io,
        metadata,
        expression_from_json(json.loads(plan.row_filter)),
        snapshot_id=plan.snapshot_id,
        ref=plan.ref,
        as_of=plan.as_of,
        case_sensitive=plan.case_sensitive,
        options=PlanOptions(split_size=plan.split_size),
    )
    parts = PlanParts(
        planner.chooser, planner.loader, planner.tasks, planner.options, None, planner.unpartitioned_spec_ids
    )
    ctx = PlanContext(parts, PlanMetrics())
    out, receive = anyio.create_memory_object_stream[Batch](1)
    batches: list[pa.RecordBatch] = []
    try:
        async with task_group() as tg:
            tg.start_soon(run_stages, ctx, tg, out, (list(data), list(plan.deletes)))
            with receive:
                async for batch in receive:
                    if isinstance(batch, Failed):
                        raise batch.error
                    if batch:
                        batches.append(await anyio.to_thread.run_sync(task_batch, planner, batch))
    finally:
        ctx.finish()
    return batches


def plan_share(plan: DistributedPlan, share: int) -> list[pa.RecordBatch]:
    """Executor side: the tasks of one share of the data manifests, as ``TASK_SCHEMA`` batches."""
    data = plan.shares[share]
    return default_loop.run(_plan(plan, data)) if data else []


def data_file_estimate(manifests: Sequence[ManifestFile]) -> int:
    """The data files ``manifests`` list, from the manifest list's counts alone (no manifest
    read): added plus existing; a manifest without counts (v1) counts one per
    ``BYTES_PER_ENTRY`` of its length."""
    total = 0
    for m in manifests:
        if m.added_files_count is None or m.existing_files_count is None:
            total += max(1, m.manifest_length // BYTES_PER_ENTRY)
        else:
            total += m.added_files_count + m.existing_files_count
    return total


@dataclass(frozen=True)
class PreparedPlan:
    """What the driver decided before any manifest is read: the plan to ship (None: nothing
    to plan, no snapshot or no data manifest left) and its size by the manifest list."""

    plan: DistributedPlan | None
    data_files: int
    data_manifests: int


def prepare_plan(
    spark: Any,
    table: sync.Table,
    scan: sync.TableScan,
    opts: SourceOptions,
    *,
    case_sensitive: bool = True,
    parallelism: int | None = None,
) -> PreparedPlan:
    """Driver side: read the manifest list of ``scan``'s snapshot, choose its manifests by
    their summaries and share the data manifests out (``scan`` is ``opts.scan(table, ...)``)."""
    planner: Planner = scan.aio.planner
    if planner.snapshot is None:
        return PreparedPlan(None, 0, 0)
    manifests = default_loop.run(planner.manifests())
    data, deletes = planner.select(planner.bulk_choice(manifests), PlanMetrics())
    if not data:
        return PreparedPlan(None, 0, 0)
    data.sort(key=lambda m: -m.manifest_length)  # big manifests first, spread round-robin
    n = partitions_for(spark, len(data), parallelism)
    plan = DistributedPlan(
        store=TableStore(table.location, opts.storage_options),
        metadata_location=table.metadata_location,
        row_filter=json.dumps(expression_to_json(planner.row_filter)),
        snapshot_id=opts.snapshot_id,
        ref=opts.ref,
        as_of=opts.as_of,
        case_sensitive=case_sensitive,
        split_size=planner.options.split_size,
        deletes=deletes,
        shares=[data[i::n] for i in range(n)],
    )
    return PreparedPlan(plan, data_file_estimate(data), len(data))


def plan_frame(spark: Any, prepared: PreparedPlan) -> Any:
    """The task DataFrame of a prepared plan: one Spark partition per share, planned when
    an action runs (and again at each action)."""
    plan = prepared.plan
    if plan is None:
        return spark.createDataFrame([], task_spark_schema())
    shared = spark.sparkContext.broadcast(plan)

    def tasks_of(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for ids in batches:
            for share in ids.column(0).to_pylist():
                yield from plan_share(shared.value, share)

    n = len(plan.shares)
    return spark.range(0, n, 1, n).mapInArrow(tasks_of, task_spark_schema())


def plan_files(
    spark: Any,
    table_location: str,
    options: Mapping[str, str] | None = None,
    *,
    filter: str | Expression | None = None,
    case_sensitive: bool = True,
    parallelism: int | None = None,
) -> Any:
    """The tasks of a scan of the table as a Spark DataFrame (one row per task, the columns
    of ``TASK_SCHEMA``), planned on executors.

    ``options``: the data source's read options (``filter``, ``snapshot-id``,
    ``as-of-timestamp``, ``branch`` / ``tag``, ``split-size``) and storage options;
    ``filter`` is and-ed with the ``filter`` option. The snapshot is fixed when this is
    called. ``parallelism``: planning tasks (default four per core, at most one per data
    manifest).
    """
    opts = SourceOptions.parse({**(options or {}), "path": table_location})
    table = opts.load()
    row_filter: Expression = AlwaysTrue()
    for given in (opts.row_filter, filter):
        if given is None or (isinstance(given, str) and not given.strip()):
            continue
        row_filter = and_(row_filter, parse(given) if isinstance(given, str) else given)
    scan = opts.scan(table, row_filter=row_filter, case_sensitive=case_sensitive, split_size=opts.split_size)
    prepared = prepare_plan(spark, table, scan, opts, case_sensitive=case_sensitive, parallelism=parallelism)
    return plan_frame(spark, prepared)


def collect_tasks(df: Any) -> pa.Table:
    """The task DataFrame collected as one Arrow table (for a plan small enough to hold)."""
    table = run_job("planning", df.toArrow)
    if not isinstance(table, pa.Table):
        raise ValidationError("toArrow() returned no Arrow table")
    return table
