"""From a ``lock=`` option or a table's recorded commit point to the protocol that commits it.

Every load path (a catalog by identifier, ``load_table`` by location, the blocking API,
the command line, Spark) goes through :func:`open_table_state`, so a table is written only
through the commit point it records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aioiceberg.commit.protocols.base import CommitProtocol, TableState
from aioiceberg.commit.protocols.commit_point import CATALOG, CONDITIONAL, CommitPoint, commit_point_of
from aioiceberg.commit.protocols.conditional import ConditionalWriteProtocol
from aioiceberg.commit.protocols.dynamodb import DynamoDbOptions, DynamoDbProtocol
from aioiceberg.errors import IcebergError, ValidationError
from aioiceberg.io.base import FileIO

__all__ = ["OpenedTable", "open_table_state", "protocol_for_lock"]


def protocol_for_lock(
    io: FileIO, lock: str | None, storage_options: Mapping[str, Any] | None, *, probe_base: str | None = None
) -> CommitProtocol:
    """``None`` commits by conditional writes on the store; ``dynamodb://TABLE`` through DynamoDB."""
    if lock is None or lock == CONDITIONAL:
        return ConditionalWriteProtocol(io, probe_base=probe_base)
    if lock.startswith("dynamodb://"):
        return DynamoDbProtocol(io, DynamoDbOptions.from_uri(lock, storage_options))
    raise ValidationError(f"unknown lock {lock!r}: use None or 'dynamodb://TABLE'")


def _protocol_for_point(
    io: FileIO, point: CommitPoint, storage_options: Mapping[str, Any] | None, probe_base: str | None
) -> CommitProtocol:
    if point.kind == CONDITIONAL:
        return ConditionalWriteProtocol(io, probe_base=probe_base)

    # Never create a commit table for a table found by location: an empty one in the wrong
    # place (endpoint, region) would look like a table with no commits yet.
    no_create = {**(storage_options or {}), "dynamodb.create-table": "false"}
    return DynamoDbProtocol(io, DynamoDbOptions.from_uri(str(point), no_create))


@dataclass(frozen=True, slots=True)
class OpenedTable:
    """A table's latest state and the protocol that commits it (None: read-only, and why)."""

    state: TableState
    protocol: CommitProtocol | None
    read_only_reason: str | None = None


async def open_table_state(
    io: FileIO,
    table_location: str,
    opener: CommitProtocol,
    storage_options: Mapping[str, Any] | None = None,
    *,
    probe_base: str | None = None,
) -> OpenedTable:
    """Load through ``opener``; if the table records another commit point, load and commit
    through that one instead, or open read-only when it cannot be reached or is not known."""
    state = await opener.load(table_location)
    if opener.accepts(state.metadata):
        return OpenedTable(state, opener)
    return await reopen(io, table_location, state, storage_options, probe_base=probe_base)


async def reopen(
    io: FileIO,
    table_location: str,
    state: TableState,
    storage_options: Mapping[str, Any] | None,
    *,
    probe_base: str | None = None,
) -> OpenedTable:
    """The table as its recorded commit point sees it; ``state`` is what was found on the way."""
    point = commit_point_of(state.metadata)
    if point is None:
        point = CommitPoint(CONDITIONAL)
    if point.kind == CATALOG:
        return OpenedTable(
            state,
            None,
            f"{table_location} commits through a catalog ({point}), which holds its current "
            f"version: opened read-only at {state.metadata_location}; to write, {point.how_to_write()}",
        )
    if point.kind == "dynamodb" and point.table is None:
        return OpenedTable(
            state,
            None,
            f"{table_location} was committed through a DynamoDB table it does not name; "
            f"to write, {point.how_to_write()}",
        )
    protocol = _protocol_for_point(io, point, storage_options, probe_base)
    try:
        return OpenedTable(await protocol.load(table_location), protocol)
    except IcebergError as exc:
        return OpenedTable(
            state,
            None,
            f"{table_location} commits through {point}, which could not be read ({exc}); "
            f"it was opened read-only at {state.metadata_location}; to write, {point.how_to_write()}",
        )
