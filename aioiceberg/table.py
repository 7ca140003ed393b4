"""Table and Transaction: the async face users hold.

Thin by design: data files come from ``aioiceberg.write``, snapshots and the retry
loop from ``aioiceberg.commit``, planning from ``aioiceberg.scan``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Unpack

from aioiceberg.commit.appends import append_for
from aioiceberg.commit.evolution import check_settable_properties, staged_metadata, upgrade_format_version
from aioiceberg.commit.overwrite import RowLevelChange
from aioiceberg.commit.protocols.base import CommitProtocol, TableState
from aioiceberg.commit.refs import ManageSnapshots
from aioiceberg.commit.retry import CommitStats, commit_changes
from aioiceberg.commit.schema_update import UpdateSchema
from aioiceberg.commit.snapshot_producer import Change, MetadataChange
from aioiceberg.commit.sort_update import UpdateSortOrder
from aioiceberg.commit.spec_update import UpdateSpec
from aioiceberg.commit.updates import RemoveProperties, SetProperties
from aioiceberg.errors import ReadOnlyTableError, UnsupportedError
from aioiceberg.expressions import AlwaysTrue
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.compaction import (
    CompactionArgs,
    RewriteDataFilesChange,
    RewriteDataFilesResult,
    compact_data_files,
)
from aioiceberg.maintenance.expire import plan_expire_snapshots, preview_expire_snapshots
from aioiceberg.maintenance.manifests import plan_rewrite_manifests
from aioiceberg.maintenance.orphans import remove_orphan_files
from aioiceberg.maintenance.position_deletes import RewritePositionDeletesResult, rewrite_position_deletes
from aioiceberg.maintenance.statistics import plan_compute_statistics
from aioiceberg.rowlevel import (
    plan_delete,
    plan_dynamic_partition_overwrite,
    plan_replace_partitions,
    plan_upsert,
)
from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.metadata import (
    MAIN_BRANCH,
    Operation,
    Snapshot,
    SnapshotRef,
    StatisticsFile,
    TableMetadata,
)
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema
from aioiceberg.table_scan import TableScan
from aioiceberg.write.add_files import data_files_from_parquet
from aioiceberg.write.location_provider import LocationProvider
from aioiceberg.write.parquet_writer import write_data_files

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.expressions.tree import Expression
    from aioiceberg.maintenance import (
        ExpireResult,
        RewriteManifestsResult,
    )
    from aioiceberg.scan.options import ScanOptions

__all__ = ["Table", "Transaction"]


class _Evolution:
    """The evolution builders of a table (each commits on exit) and a transaction (each joins its commit)."""

    def _evolution_target(self) -> tuple[TableMetadata, Callable[[MetadataChange], Awaitable[None]]]:
        """The metadata a builder starts from and where it sends its change."""
        raise NotImplementedError

    def update_schema(
        self, allow_incompatible_changes: bool = False, case_sensitive: bool = True
    ) -> UpdateSchema:
        """Schema evolution: ``async with table.update_schema() as u: u.add_column(...)`` commits on exit."""
        metadata, sink = self._evolution_target()
        return UpdateSchema(
            metadata,
            allow_incompatible_changes=allow_incompatible_changes,
            case_sensitive=case_sensitive,
            sink=sink,
        )

    def update_spec(self, case_sensitive: bool = True) -> UpdateSpec:
        """Partition evolution: ``async with table.update_spec() as u: u.add_field("ts", "day")``."""
        metadata, sink = self._evolution_target()
        return UpdateSpec(metadata, case_sensitive=case_sensitive, sink=sink)

    def replace_sort_order(self, case_sensitive: bool = True) -> UpdateSortOrder:
        """A new default sort order: ``async with table.replace_sort_order() as o: o.asc("id")``."""
        metadata, sink = self._evolution_target()
        return UpdateSortOrder(metadata, case_sensitive=case_sensitive, sink=sink)

    update_sort_order = replace_sort_order


class Table(_Evolution):
    """One table as of its last load or commit; ``refresh`` moves it to the latest version."""

    def __init__(
        self,
        identifier: str | None,
        location: str,
        state: TableState,
        io: FileIO,
        protocol: CommitProtocol | None,
        *,
        read_only_reason: str | None = None,
    ) -> None:
        self.identifier = identifier
        self.location = location.rstrip("/")
        self._state = state
        self.io = io
        self.protocol = protocol
        self.read_only_reason = read_only_reason
        self.last_commit = CommitStats()

    # -- state -------------------------------------------------------------
    @property
    def metadata(self) -> TableMetadata:
        return self._state.metadata

    @property
    def metadata_location(self) -> str:
        return self._state.metadata_location

    @property
    def version(self) -> int:
        return self._state.version

    @property
    def properties(self) -> Mapping[str, str]:
        return self.metadata.properties

    @property
    def read_only(self) -> bool:
        return self.protocol is None

    def schema(self) -> Schema:
        return self.metadata.schema()

    def spec(self) -> PartitionSpec:
        return self.metadata.spec()

    def current_snapshot(self) -> Snapshot | None:
        return self.metadata.current_snapshot()

    def snapshots(self) -> list[Snapshot]:
        return list(self.metadata.snapshots)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self.metadata.snapshot_by_id(snapshot_id)

    def history(self) -> list[Snapshot]:
        """The current snapshot and its ancestors, oldest first."""
        current = self.current_snapshot()
        if current is None:
            return []
        return list(reversed(self.metadata.ancestors_of(current.snapshot_id)))

    def __repr__(self) -> str:
        return f"Table({self.identifier or self.location!r}, version={self.version})"

    async def refresh(self) -> Table:
        """Load the latest committed version in place."""
        self._state = await self._writer().load(self.location, since=self._state)
        return self

    # -- reads -------------------------------------------------------------
    def scan(
        self,
        row_filter: str | Expression | None = None,
        selected_fields: Sequence[str] = ("*",),
        case_sensitive: bool = True,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: int | dt.datetime | None = None,
        limit: int | None = None,
        **options: Unpack[ScanOptions],
    ) -> TableScan:
        """A scan of this table: ``plan_files()``, ``to_batches()``, ``to_arrow()``; ``options``
        are the planner's and reader's knobs (:class:`~aioiceberg.scan.options.ScanOptions`)."""
        return TableScan(
            self.io,
            self.metadata,
            "" if row_filter is None else row_filter,
            selected_fields=tuple(selected_fields),
            case_sensitive=case_sensitive,
            snapshot_id=snapshot_id,
            ref=ref,
            as_of=as_of,
            limit=limit,
            **options,
        )

    # -- writes ------------------------------------------------------------
    def _writer(self) -> CommitProtocol:
        if self.protocol is None:
            raise ReadOnlyTableError(self.read_only_reason or f"{self.metadata_location} is open read-only")
        return self.protocol

    def transaction(self) -> Transaction:
        """Several changes, one commit: ``async with table.transaction() as tx: ...``."""
        self._writer()
        return Transaction(self)

    async def append(
        self,
        data: pa.Table | Iterable[pa.RecordBatch],
        snapshot_properties: Mapping[str, str] | None = None,
        *,
        branch: str = MAIN_BRANCH,
    ) -> None:
        """Write ``data`` as new data files and commit them as one append snapshot on ``branch``."""
        async with self.transaction() as tx:
            await tx.append(data, snapshot_properties, branch=branch)

    async def add_files(
        self, file_paths: Iterable[str], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        """Commit existing Parquet files as an append (the files are referenced, not copied)."""
        async with self.transaction() as tx:
            await tx.add_files(file_paths, snapshot_properties)

    async def append_data_files(
        self, data_files: Iterable[DataFile], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        """Commit already written data files (e.g. from a distributed writer) as one append."""
        async with self.transaction() as tx:
            tx.append_data_files(data_files, snapshot_properties, owns_files=False)

    async def set_properties(self, properties: Mapping[str, str] | None = None, **kwargs: str) -> None:
        async with self.transaction() as tx:
            tx.set_properties(properties, **kwargs)

    async def remove_properties(self, *keys: str) -> None:
        async with self.transaction() as tx:
            tx.remove_properties(*keys)

    # -- row-level changes (logic in aioiceberg.rowlevel) ---------------------
    async def delete(
        self,
        delete_filter: str | Expression,
        snapshot_properties: Mapping[str, str] | None = None,
        case_sensitive: bool = True,
    ) -> None:
        """Delete the rows where ``delete_filter`` is true (SQL semantics: null keeps the row)."""
        async with self.transaction() as tx:
            await tx.delete(delete_filter, snapshot_properties, case_sensitive)

    async def overwrite(
        self,
        df: pa.Table,
        overwrite_filter: str | Expression | None = None,
        snapshot_properties: Mapping[str, str] | None = None,
        case_sensitive: bool = True,
    ) -> None:
        """Delete the rows matching ``overwrite_filter`` (default: all) and add ``df``, in one snapshot."""
        async with self.transaction() as tx:
            await tx.overwrite(df, overwrite_filter, snapshot_properties, case_sensitive)

    async def dynamic_partition_overwrite(
        self, df: pa.Table, snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        """Replace exactly the partitions ``df`` has rows in with ``df``'s rows."""
        async with self.transaction() as tx:
            await tx.dynamic_partition_overwrite(df, snapshot_properties)

    async def upsert(
        self,
        df: pa.Table,
        join_cols: Sequence[str] | None = None,
        *,
        mode: str | None = None,
        case_sensitive: bool = True,
        snapshot_properties: Mapping[str, str] | None = None,
    ) -> None:
        """Replace rows whose key (default: identifier fields) is in ``df``, insert the rest."""
        async with self.transaction() as tx:
            await tx.upsert(
                df,
                join_cols,
                mode=mode,
                case_sensitive=case_sensitive,
                snapshot_properties=snapshot_properties,
            )

    # -- evolution (logic in aioiceberg.commit.schema_update / spec_update / sort_update) --
    async def _commit_one(self, change: MetadataChange) -> None:
        await self._commit([change])

    def _evolution_target(self) -> tuple[TableMetadata, Callable[[MetadataChange], Awaitable[None]]]:
        self._writer()
        return self.metadata, self._commit_one

    async def upgrade_table_version(self, format_version: int) -> None:
        """Raise the format version (1 -> 2 -> 3); never downgrades."""
        async with self.transaction() as tx:
            tx.upgrade_table_version(format_version)

    # -- refs and maintenance (logic in aioiceberg.commit.refs, aioiceberg.maintenance) --
    def refs(self) -> dict[str, SnapshotRef]:
        """Branches and tags by name."""
        return dict(self.metadata.refs)

    def manage_snapshots(self) -> ManageSnapshots:
        """Branches, tags, rollback, cherry-pick; ``async with table.manage_snapshots() as ms:`` commits."""
        tx = self.transaction()
        return ManageSnapshots(tx, tx.commit_transaction)

    async def expire_snapshots(
        self,
        older_than: dt.datetime | int | None = None,
        retain_last: int | None = None,
        *,
        snapshot_ids: Iterable[int] = (),
        clean_files: bool = True,
        dry_run: bool = False,
    ) -> ExpireResult:
        """Expire snapshots past retention (``older_than``: datetime or epoch ms), then delete their files.

        ``dry_run`` commits and deletes nothing: the result lists what would go, as of the
        version this table holds."""
        if dry_run:
            return await preview_expire_snapshots(
                self.io,
                self.metadata,
                older_than,
                retain_last,
                snapshot_ids=snapshot_ids,
                clean_files=clean_files,
            )
        async with self.transaction() as tx:
            result = await tx.expire_snapshots(
                older_than, retain_last, snapshot_ids=snapshot_ids, clean_files=clean_files
            )
        return result

    async def remove_orphan_files(
        self, older_than: dt.datetime | dt.timedelta | int | None = None, *, dry_run: bool = False
    ) -> list[str]:
        """Delete unreferenced objects under the table location older than ``older_than`` (default 3 days).

        Works from the latest version (a stale one would take newer commits' files for
        orphans), so the table must be writable.
        """
        kept = await self.publish_latest()
        return await remove_orphan_files(self, older_than, dry_run=dry_run, kept=kept)

    async def publish_latest(self) -> list[str]:
        """Refresh to the latest version and publish it for readers that bypass the commit
        protocol (a version hint...); returns the objects that protocol keeps for them, which
        are never orphans. Orphan removal starts here, in one process or on Spark."""
        protocol = self._writer()
        await self.refresh()
        await protocol.publish_for_readers(self._state)
        return protocol.reader_files(self._state)

    async def rewrite_manifests(self, target_size_bytes: int | None = None) -> RewriteManifestsResult:
        """Merge small data manifests into ``commit.manifest.target-size-bytes`` ones (a replace snapshot)."""
        async with self.transaction() as tx:
            result = await tx.rewrite_manifests(target_size_bytes)
        return result

    async def rewrite_data_files(
        self,
        target_file_size: int | None = None,
        filter: str | Expression | None = None,
        **args: Unpack[CompactionArgs],
    ) -> RewriteDataFilesResult:
        """Compact data files per partition (rows unchanged): ``strategy`` bin-pack (default),
        sort (by ``sort_order`` or the table's) or z-order (``zorder_by``); ``options`` take
        Java's ``rewrite_data_files`` names (``partial-progress.enabled``...). One replace
        snapshot, or with partial progress one per batch of groups."""
        self._writer()
        return await compact_data_files(
            self.io, self.metadata, self.commit_change, target_file_size, filter, **args
        )

    async def rewrite_position_delete_files(
        self, options: Mapping[str, str] | None = None
    ) -> RewritePositionDeletesResult:
        """Combine small position delete files per partition and drop their rows whose data
        file is gone, as Java's ``rewrite_position_delete_files`` (``options`` by its names:
        ``rewrite-all``, ``min-input-files``, ``target-file-size-bytes``...). One replace
        snapshot, or one per batch with ``partial-progress.enabled``. On v3 tables the v2
        position delete files left from before an upgrade become deletion vectors, as Java
        does (one per data file, merged with the one it had)."""
        self._writer()
        return await rewrite_position_deletes(self.io, self.metadata, self.commit_change, options)

    async def commit_change(self, change: Change) -> None:
        """Commit one change planned outside a transaction (a batch of rewritten groups, a
        change a Spark action planned) on its own, through the table's commit path."""
        async with self.transaction() as tx:
            tx._stage_planned(change)

    async def compute_statistics(
        self, columns: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> StatisticsFile | None:
        """NDV theta sketches of columns in a Puffin file, registered in the table metadata."""
        async with self.transaction() as tx:
            result = await tx.compute_statistics(columns, snapshot_id)
        return result

    async def _commit(self, changes: Sequence[Change]) -> None:
        protocol = self._writer()
        stats = CommitStats()
        self.last_commit = stats
        self._state = await commit_changes(protocol, self.location, self._state, changes, stats=stats)


class Transaction(_Evolution):
    """Changes gathered for one commit; committed when the ``async with`` block exits cleanly."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.changes: list[Change] = []
        self._done = False

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            if not self._done:
                await self.commit_transaction()
        elif not self._done:
            self._done = True
            for change in self.changes:
                await change.aborted(self.table.io)

    async def commit_transaction(self) -> Table:
        if self._done:
            raise UnsupportedError("this transaction was already committed or aborted")
        self._done = True
        if self.changes:
            await self.table._commit(self.changes)
        return self.table

    def _metadata(self) -> TableMetadata:
        return staged_metadata(self.table.metadata, self.changes)

    async def append(
        self,
        data: pa.Table | Iterable[pa.RecordBatch],
        snapshot_properties: Mapping[str, str] | None = None,
        *,
        branch: str = MAIN_BRANCH,
    ) -> None:

        md = self._metadata()
        props = TableProperties(md.properties)
        data_files = await write_data_files(
            self.table.io,
            md.schema(),
            md.spec(),
            data,
            LocationProvider(md.location, props),
            props,
        )
        self.append_data_files(data_files, snapshot_properties, owns_files=True, branch=branch)

    async def add_files(
        self, file_paths: Iterable[str], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        md = self._metadata()
        data_files = await data_files_from_parquet(
            self.table.io, list(file_paths), md.schema(), md.spec(), md.properties
        )
        self.append_data_files(data_files, snapshot_properties, owns_files=False)

    def append_data_files(
        self,
        data_files: Iterable[DataFile],
        snapshot_properties: Mapping[str, str] | None = None,
        *,
        owns_files: bool = False,
        branch: str = MAIN_BRANCH,
    ) -> None:
        files = list(data_files)
        if files:
            self.changes.append(
                append_for(
                    files,
                    self._metadata().properties,
                    branch=branch,
                    owns_files=owns_files,
                    snapshot_properties=snapshot_properties,
                )
            )

    def set_properties(self, properties: Mapping[str, str] | None = None, **kwargs: str) -> None:
        updates = {**(properties or {}), **kwargs}

        check_settable_properties(updates)
        self.changes.append(MetadataChange([SetProperties({k: str(v) for k, v in updates.items()})]))

    def remove_properties(self, *keys: str) -> None:
        self.changes.append(MetadataChange([RemoveProperties(tuple(keys))]))

    def manage_snapshots(self) -> ManageSnapshots:
        """Ref operations that join this transaction's commit (``async with`` or ``await ms.commit()``)."""
        return ManageSnapshots(self)

    # -- row-level changes: planned now, on the staged metadata (aioiceberg.rowlevel) --
    def _open_metadata(self) -> TableMetadata:
        if self._done:
            raise UnsupportedError("this transaction was already committed or aborted")
        return self._metadata()

    def _planned_base(self, what: str = "a delete, overwrite or upsert") -> TableMetadata:
        """The staged metadata, for a change whose files are chosen now: the snapshots of data
        changes staged before it do not exist yet, so it would miss (or clash with) them."""
        md = self._open_metadata()
        if any(c.snapshot_id is not None for c in self.changes):
            raise UnsupportedError(
                f"{what} must come before other data changes in a transaction: "
                "it is planned on the table as committed"
            )
        return md

    def _stage_planned(self, change: Change | None) -> None:
        if change is not None:
            self.changes.append(change)

    async def delete(
        self,
        delete_filter: str | Expression,
        snapshot_properties: Mapping[str, str] | None = None,
        case_sensitive: bool = True,
    ) -> None:
        md = self._planned_base()
        self._stage_planned(
            await plan_delete(
                self.table.io,
                md,
                delete_filter,
                case_sensitive=case_sensitive,
                snapshot_properties=snapshot_properties,
            )
        )

    async def overwrite(
        self,
        df: pa.Table,
        overwrite_filter: str | Expression | None = None,
        snapshot_properties: Mapping[str, str] | None = None,
        case_sensitive: bool = True,
    ) -> None:

        md = self._planned_base()
        change = await plan_delete(
            self.table.io,
            md,
            AlwaysTrue() if overwrite_filter is None else overwrite_filter,
            new_rows=df,
            case_sensitive=case_sensitive,
            snapshot_properties=snapshot_properties,
            operation=Operation.OVERWRITE,
            isolation="serializable",
        )
        if isinstance(change, RowLevelChange) and not change.removed and not change.added_delete_files:
            change.operation = Operation.APPEND  # nothing replaced: as PyIceberg, an append
        self._stage_planned(change)

    async def overwrite_data_files(
        self,
        data_files: Iterable[DataFile],
        overwrite_filter: str | Expression | None = None,
        snapshot_properties: Mapping[str, str] | None = None,
        case_sensitive: bool = True,
    ) -> None:
        """:meth:`overwrite` with data files already written (by Spark executors, say): the
        rows matching ``overwrite_filter`` (default: all) are replaced by ``data_files``,
        which the transaction then owns (deleted if it fails)."""

        md = self._planned_base()
        change = await plan_delete(
            self.table.io,
            md,
            AlwaysTrue() if overwrite_filter is None else overwrite_filter,
            new_files=list(data_files),
            case_sensitive=case_sensitive,
            snapshot_properties=snapshot_properties,
            operation=Operation.OVERWRITE,
            isolation="serializable",
        )
        if isinstance(change, RowLevelChange) and not change.removed and not change.added_delete_files:
            change.operation = Operation.APPEND
        self._stage_planned(change)

    async def replace_partitions(
        self, data_files: Iterable[DataFile], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        """:meth:`dynamic_partition_overwrite` with data files already written: the partitions
        they fall in are replaced by them (the transaction owns them)."""
        md = self._planned_base()
        self._stage_planned(
            await plan_replace_partitions(
                self.table.io, md, list(data_files), snapshot_properties=snapshot_properties
            )
        )

    async def dynamic_partition_overwrite(
        self, df: pa.Table, snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        md = self._planned_base()
        self._stage_planned(
            await plan_dynamic_partition_overwrite(
                self.table.io, md, df, snapshot_properties=snapshot_properties
            )
        )

    async def upsert(
        self,
        df: pa.Table,
        join_cols: Sequence[str] | None = None,
        *,
        mode: str | None = None,
        case_sensitive: bool = True,
        snapshot_properties: Mapping[str, str] | None = None,
    ) -> None:
        md = self._planned_base()
        self._stage_planned(
            await plan_upsert(
                self.table.io,
                md,
                df,
                join_cols,
                mode=mode,
                case_sensitive=case_sensitive,
                snapshot_properties=snapshot_properties,
            )
        )

    # -- maintenance: planned now, committed with the rest (aioiceberg.maintenance) --
    # Each returns its result object, complete once the transaction has committed.
    async def expire_snapshots(
        self,
        older_than: dt.datetime | int | None = None,
        retain_last: int | None = None,
        *,
        snapshot_ids: Iterable[int] = (),
        clean_files: bool = True,
    ) -> ExpireResult:
        """Expire snapshots past retention, decided on the table as this commit finds it
        (snapshots staged before count); their files are deleted once the commit has landed."""
        change, result = await plan_expire_snapshots(
            self.table.io,
            self._open_metadata(),
            older_than,
            retain_last,
            snapshot_ids=snapshot_ids,
            clean_files=clean_files,
            after_changes=bool(self.changes),
        )
        self._stage_planned(change)
        return result

    async def rewrite_manifests(self, target_size_bytes: int | None = None) -> RewriteManifestsResult:
        """Merge small data manifests of main, those of snapshots staged before included."""
        change, result = await plan_rewrite_manifests(
            self.table.io,
            self._open_metadata(),
            target_size_bytes,
            after_changes=any(c.snapshot_id is not None for c in self.changes),
        )
        self._stage_planned(change)
        return result

    async def rewrite_data_files(
        self,
        target_file_size: int | None = None,
        filter: str | Expression | None = None,
        **args: Unpack[CompactionArgs],
    ) -> RewriteDataFilesResult:
        """Compact data files per partition (options as ``Table.rewrite_data_files``, partial
        progress excepted); the new files are written now (and deleted if the transaction fails)."""

        async def stage(change: RewriteDataFilesChange) -> None:
            self._stage_planned(change)

        md = self._planned_base("rewrite_data_files")
        return await compact_data_files(
            self.table.io, md, stage, target_file_size, filter, one_commit=True, **args
        )

    async def compute_statistics(
        self, columns: Sequence[str] | None = None, snapshot_id: int | None = None
    ) -> StatisticsFile | None:
        """NDV sketches of a committed snapshot (default: the current one), registered by this commit."""
        md = self._open_metadata()
        if snapshot_id is None and any(c.snapshot_id is not None for c in self.changes):
            raise UnsupportedError(
                "compute_statistics after data changes in a transaction would describe the snapshot "
                "they replace: pass snapshot_id, or compute statistics once the transaction committed"
            )
        change = await plan_compute_statistics(self.table.io, md, columns, snapshot_id)
        self._stage_planned(change)
        return change.statistics if change is not None else None

    # -- evolution: builders stage their change here when their ``async with`` exits --
    async def _stage(self, change: MetadataChange) -> None:
        if self._done:
            raise UnsupportedError("this transaction was already committed or aborted")
        self.changes.append(change)

    def _evolution_target(self) -> tuple[TableMetadata, Callable[[MetadataChange], Awaitable[None]]]:
        return self._metadata(), self._stage

    def upgrade_table_version(self, format_version: int) -> None:
        change = upgrade_format_version(self._metadata(), format_version)
        if change is not None:
            self.changes.append(change)
