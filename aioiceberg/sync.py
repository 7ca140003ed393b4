"""Blocking twins of the async API, for scripts, notebooks, threads and PySpark drivers.

Every async method has a twin with the same name and arguments that runs it on one
background event loop (the default runtime's, ``aioiceberg._sync.default_loop``) and waits;
async iterators become plain iterators that still stream, async context managers plain
ones. Each twin member points at the async method it stands for, so mypy sees the same
signature (``aioiceberg._sync.twin``); ``tests/sync/test_sync_typing.py`` holds the two
classes to each other.

    from aioiceberg import sync
    table = sync.load_table("s3://bucket/warehouse/db/events")
    for task in table.scan(row_filter="id = 5").plan_files(): ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import aioiceberg.catalog as _catalog
import aioiceberg.table as _table
import aioiceberg.table_scan as _scan
from aioiceberg._sync import default_loop
from aioiceberg._sync.twin import (
    PLAN_BATCHES_PREFETCH,
    PLAN_PREFETCH,
    Attribute,
    Blocking,
    BlockingContext,
    Pending,
    blocking,
    forwarded,
    function,
    streaming,
    streaming_batches,
)
from aioiceberg.scan.pipeline import PlanStream

if TYPE_CHECKING:
    from aioiceberg.commit.protocols.base import CommitProtocol
    from aioiceberg.commit.retry import CommitStats
    from aioiceberg.commit.snapshot_producer import Change
    from aioiceberg.io.base import FileIO
    from aioiceberg.io.locations import Roots
    from aioiceberg.runtime import Runtime
    from aioiceberg.scan import Planner
    from aioiceberg.scan.options import ReadOptions
    from aioiceberg.scan.plan_metrics import PlanMetrics, ReadMetrics
    from aioiceberg.spec.metadata import TableMetadata
    from aioiceberg.spec.schema import Schema

__all__ = [
    "Blocking",
    "Catalog",
    "Table",
    "TableScan",
    "Transaction",
    "connect",
    "load_table",
    "shutdown",
]


class TableScan(Blocking[_scan.TableScan]):
    """Blocking twin of :class:`aioiceberg.table_scan.TableScan`."""

    # a manifest's tasks cross from the loop in one handoff, not one by one
    plan_files = streaming_batches(_scan.TableScan.plan_files, PlanStream.batches, prefetch=PLAN_PREFETCH)
    plan_batches = streaming(_scan.TableScan.plan_batches, prefetch=PLAN_BATCHES_PREFETCH)
    to_batches = streaming(_scan.TableScan.to_batches)
    to_arrow = blocking(_scan.TableScan.to_arrow)
    projection = forwarded(_scan.TableScan.projection)
    # conversions: eager ones wait here; streaming ones pull from the loop as they are read
    to_pandas = blocking(_scan.TableScan.to_pandas)
    to_polars = blocking(_scan.TableScan.to_polars)
    to_polars_lazy = forwarded(_scan.TableScan.to_polars_lazy)
    to_arrow_batch_reader = forwarded(_scan.TableScan.to_arrow_batch_reader)
    to_duckdb = forwarded(_scan.TableScan.to_duckdb)

    metrics: Attribute[PlanMetrics] = Attribute()
    snapshot_schema: Attribute[Schema] = Attribute()
    planner: Attribute[Planner] = Attribute()
    io: Attribute[FileIO] = Attribute()
    metadata: Attribute[TableMetadata] = Attribute()
    read_stats: Attribute[ReadMetrics] = Attribute()
    read_options: Attribute[ReadOptions] = Attribute()


E_co = TypeVar("E_co", bound=_table._Evolution, covariant=True)


class _Evolution(Blocking[E_co]):
    """The evolution builders tables and transactions share: ``with ... as u`` commits (or stages)."""

    update_schema = forwarded(_table._Evolution.update_schema, into=Pending)
    update_spec = forwarded(_table._Evolution.update_spec, into=Pending)
    replace_sort_order = forwarded(_table._Evolution.replace_sort_order, into=Pending)
    update_sort_order = replace_sort_order


class Transaction(BlockingContext[_table.Transaction], _Evolution[_table.Transaction]):
    """Blocking twin of :class:`aioiceberg.table.Transaction`: ``with table.transaction() as tx``."""

    # committed by the block; staged on the loop
    commit_transaction = blocking(_table.Transaction.commit_transaction, into=lambda t: Table(t))
    add_files = blocking(_table.Transaction.add_files)
    append = blocking(_table.Transaction.append)
    delete = blocking(_table.Transaction.delete)
    overwrite = blocking(_table.Transaction.overwrite)
    dynamic_partition_overwrite = blocking(_table.Transaction.dynamic_partition_overwrite)
    upsert = blocking(_table.Transaction.upsert)
    overwrite_data_files = blocking(_table.Transaction.overwrite_data_files)
    replace_partitions = blocking(_table.Transaction.replace_partitions)
    expire_snapshots = blocking(_table.Transaction.expire_snapshots)
    rewrite_manifests = blocking(_table.Transaction.rewrite_manifests)
    rewrite_data_files = blocking(_table.Transaction.rewrite_data_files)
    compute_statistics = blocking(_table.Transaction.compute_statistics)
    # staged in the caller's thread
    append_data_files = forwarded(_table.Transaction.append_data_files)
    # (1) with **kwargs, a ``self`` that is not positional-only could clash with a keyword, so mypy
    # will not match it to Concatenate; the revealed type is still exact. ``self, /`` in
    # aioiceberg/table.py's set_properties would make these two ignores unnecessary.
    set_properties = forwarded(_table.Transaction.set_properties)  # type: ignore[arg-type]  # (1)
    remove_properties = forwarded(_table.Transaction.remove_properties)
    upgrade_table_version = forwarded(_table.Transaction.upgrade_table_version)
    manage_snapshots = forwarded(_table.Transaction.manage_snapshots, into=Pending)

    changes: Attribute[list[Change]] = Attribute()

    @property
    def table(self) -> Table:
        return Table(self.aio.table)


class Table(_Evolution[_table.Table]):
    """Blocking twin of :class:`aioiceberg.table.Table`."""

    # state, read in the caller's thread
    identifier: Attribute[str | None] = Attribute()
    location: Attribute[str] = Attribute()
    metadata: Attribute[TableMetadata] = Attribute()
    metadata_location: Attribute[str] = Attribute()
    version: Attribute[int] = Attribute()
    properties: Attribute[Mapping[str, str]] = Attribute()
    read_only: Attribute[bool] = Attribute()
    read_only_reason: Attribute[str | None] = Attribute()
    io: Attribute[FileIO] = Attribute()
    protocol: Attribute[CommitProtocol | None] = Attribute()
    last_commit: Attribute[CommitStats] = Attribute()
    schema = forwarded(_table.Table.schema)
    spec = forwarded(_table.Table.spec)
    current_snapshot = forwarded(_table.Table.current_snapshot)
    snapshots = forwarded(_table.Table.snapshots)
    snapshot_by_id = forwarded(_table.Table.snapshot_by_id)
    history = forwarded(_table.Table.history)
    refs = forwarded(_table.Table.refs)
    refresh = blocking(_table.Table.refresh, into=lambda t: Table(t))

    # reads and writes
    scan = forwarded(_table.Table.scan, into=TableScan)
    transaction = forwarded(_table.Table.transaction, into=Transaction)
    manage_snapshots = forwarded(_table.Table.manage_snapshots, into=Pending)
    append = blocking(_table.Table.append)
    add_files = blocking(_table.Table.add_files)
    append_data_files = blocking(_table.Table.append_data_files)
    delete = blocking(_table.Table.delete)
    overwrite = blocking(_table.Table.overwrite)
    dynamic_partition_overwrite = blocking(_table.Table.dynamic_partition_overwrite)
    upsert = blocking(_table.Table.upsert)
    set_properties = blocking(_table.Table.set_properties)  # type: ignore[arg-type]  # see (1)
    remove_properties = blocking(_table.Table.remove_properties)
    upgrade_table_version = blocking(_table.Table.upgrade_table_version)

    # maintenance
    expire_snapshots = blocking(_table.Table.expire_snapshots)
    remove_orphan_files = blocking(_table.Table.remove_orphan_files)
    rewrite_manifests = blocking(_table.Table.rewrite_manifests)
    rewrite_data_files = blocking(_table.Table.rewrite_data_files)
    rewrite_position_delete_files = blocking(_table.Table.rewrite_position_delete_files)
    compute_statistics = blocking(_table.Table.compute_statistics)
    commit_change = blocking(_table.Table.commit_change)
    publish_latest = blocking(_table.Table.publish_latest)


class Catalog(BlockingContext[_catalog.Catalog]):
    """Blocking twin of any :class:`aioiceberg.catalog.Catalog` (a warehouse, Glue, S3 Tables,
    SQL, REST); ``with sync.connect(...) as catalog``."""

    root: Attribute[str] = Attribute()
    storage_options: Attribute[dict[str, Any]] = Attribute()
    runtime: Attribute[Runtime] = Attribute()
    io: Attribute[FileIO] = Attribute()
    protocol: Attribute[CommitProtocol | None] = Attribute()
    aclose = blocking(_catalog.Catalog.aclose)
    close = aclose
    io_for = forwarded(_catalog.Catalog.io_for)
    # confinement: where the catalog may write and delete (docs/catalog.md, Security)
    roots: Attribute[Roots] = Attribute()
    root_locations = forwarded(_catalog.Catalog.root_locations)
    check_new_table = blocking(_catalog.Catalog.check_new_table)
    check_location_change = blocking(_catalog.Catalog.check_location_change)
    confine = forwarded(_catalog.Catalog.confine)
    purge_location = blocking(_catalog.Catalog.purge_location)
    register_source = forwarded(_catalog.Catalog.register_source)
    read_for_register = blocking(_catalog.Catalog.read_for_register)

    table_location = forwarded(_catalog.Catalog.table_location)
    namespace_location = forwarded(_catalog.Catalog.namespace_location)
    create_table = blocking(_catalog.Catalog.create_table, into=Table)
    load_table = blocking(_catalog.Catalog.load_table, into=Table)
    register_table = blocking(_catalog.Catalog.register_table, into=Table)
    rename_table = blocking(_catalog.Catalog.rename_table, into=Table)
    table_exists = blocking(_catalog.Catalog.table_exists)
    list_tables = blocking(_catalog.Catalog.list_tables)
    drop_table = blocking(_catalog.Catalog.drop_table)
    purge_table = blocking(_catalog.Catalog.purge_table)
    create_namespace = blocking(_catalog.Catalog.create_namespace)
    namespace_exists = blocking(_catalog.Catalog.namespace_exists)
    list_namespaces = blocking(_catalog.Catalog.list_namespaces)
    list_namespace_levels = blocking(_catalog.Catalog.list_namespace_levels)
    load_namespace_properties = blocking(_catalog.Catalog.load_namespace_properties)
    update_namespace_properties = blocking(_catalog.Catalog.update_namespace_properties)
    drop_namespace = blocking(_catalog.Catalog.drop_namespace)


connect = function(_catalog.connect, into=Catalog)
load_table = function(_catalog.load_table, into=Table)


def shutdown() -> None:
    """Close the clients the blocking API opened and stop its loop (also done at exit)."""
    default_loop.shutdown()
