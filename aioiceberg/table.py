"""Table and Transaction: the async face users hold.

Thin by design: data files come from ``aioiceberg.write``, snapshots and the retry
loop from ``aioiceberg.commit``, planning from ``aioiceberg.scan``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aioiceberg.commit.protocols.base import CommitProtocol, TableState
from aioiceberg.commit.retry import CommitStats, RetryConfig, commit_changes
from aioiceberg.commit.snapshot_producer import Change, FastAppend, MetadataChange
from aioiceberg.commit.updates import RemoveProperties, SetProperties
from aioiceberg.errors import UnsupportedError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.table_scan import Scan

__all__ = ["Table", "Transaction"]

IO_CONCURRENCY = "write.io-concurrency"
CPU_WORKERS = "write.cpu-workers"


class Table:
    """One table as of its last load or commit; ``refresh`` moves it to the latest version."""

    def __init__(
        self,
        identifier: str | None,
        location: str,
        state: TableState,
        io: FileIO,
        protocol: CommitProtocol | None,
    ) -> None:
        self.identifier = identifier
        self.location = location.rstrip("/")
        self._state = state
        self.io = io
        self.protocol = protocol
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
        row_filter: Any = None,
        selected_fields: Sequence[str] = ("*",),
        case_sensitive: bool = True,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: Any = None,
        limit: int | None = None,
        **options: Any,
    ) -> Scan:
        """A scan of this table: ``plan_files()``, ``to_batches()``, ``to_arrow()``."""
        from aioiceberg.table_scan import Scan

        kwargs: dict[str, Any] = {
            "selected_fields": tuple(selected_fields),
            "case_sensitive": case_sensitive,
            "snapshot_id": snapshot_id,
            "ref": ref,
            "as_of": as_of,
            "limit": limit,
            **options,
        }
        if row_filter is not None:
            kwargs["row_filter"] = row_filter
        return Scan(self.io, self.metadata, **kwargs)

    # -- writes ------------------------------------------------------------
    def _writer(self) -> CommitProtocol:
        if self.protocol is None:
            raise UnsupportedError(
                f"{self.metadata_location} was opened by its metadata file and is read-only; "
                "load the table by its location to write"
            )
        return self.protocol

    def transaction(self) -> Transaction:
        """Several changes, one commit: ``async with table.transaction() as tx: ...``."""
        self._writer()
        return Transaction(self)

    async def append(
        self, data: pa.Table | Iterable[pa.RecordBatch], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        """Write ``data`` as new data files and commit them as one append snapshot."""
        async with self.transaction() as tx:
            await tx.append(data, snapshot_properties)

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

    async def _commit(self, changes: Sequence[Change]) -> None:
        protocol = self._writer()
        stats = CommitStats()
        self.last_commit = stats
        self._state = await commit_changes(
            protocol,
            self.location,
            self._state,
            changes,
            RetryConfig.from_properties(self.metadata.properties),
            stats,
        )


class Transaction:
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
        return self.table.metadata

    async def append(
        self, data: pa.Table | Iterable[pa.RecordBatch], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        from aioiceberg.write.locations import LocationProvider
        from aioiceberg.write.parquet import write_data_files

        md = self._metadata()
        props = md.properties
        data_files = await write_data_files(
            self.table.io,
            md.schema(),
            md.spec(),
            data,
            LocationProvider(md.location, props),
            props,
            io_concurrency=int(props.get(IO_CONCURRENCY, 16)),
            cpu_workers=int(props.get(CPU_WORKERS, 2)),
        )
        self.append_data_files(data_files, snapshot_properties, owns_files=True)

    async def add_files(
        self, file_paths: Iterable[str], snapshot_properties: Mapping[str, str] | None = None
    ) -> None:
        from aioiceberg.write.add_files import data_files_from_parquet

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
    ) -> None:
        files = list(data_files)
        if files:
            self.changes.append(
                FastAppend(files, owns_files=owns_files, snapshot_properties=snapshot_properties)
            )

    def set_properties(self, properties: Mapping[str, str] | None = None, **kwargs: str) -> None:
        updates = {**(properties or {}), **kwargs}
        self.changes.append(MetadataChange([SetProperties({k: str(v) for k, v in updates.items()})]))

    def remove_properties(self, *keys: str) -> None:
        self.changes.append(MetadataChange([RemoveProperties(tuple(keys))]))
