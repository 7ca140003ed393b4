"""Commits through an Iceberg REST catalog: the server holds the commit point.

A commit sends the requirements and updates as they are; the server validates and applies
them and answers with the new state. This client never writes metadata files. The catalog
hands its protocol a :class:`RestTables`: its public calls for one table's load and update,
so the protocol needs nothing of the catalog's HTTP plumbing.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Protocol

from aioiceberg.commit.protocols.base import CommitProtocol, TableState
from aioiceberg.commit.protocols.commit_point import CATALOG, CommitPoint
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.rest_json import requirement_to_json, update_to_json
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import CommitStateUnknownError, IcebergError, InvalidMetadataError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import table_metadata_from_dict

__all__ = ["RestProtocol", "RestTables", "rest_table_name", "state_from_reply", "version_from_location"]

_NUMBERED = re.compile(r"/(?:v(\d+)|(\d+)-[^/]*)(?:\.gz)?\.metadata\.json(?:\.gz)?$")


class RestTables(Protocol):
    """What a REST catalog offers its tables' commit protocol."""

    async def load_table_reply(self, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
        """The server's load reply for the table (``TableNotFoundError`` if it has none)."""
        ...

    async def update_table(self, namespace: tuple[str, ...], name: str, body: dict[str, Any]) -> Any:
        """Send one commit request, once, and return the server's reply: ``CommitFailedError``
        when it refused (a requirement failed), ``CommitStateUnknownError`` when it failed
        after it may have applied the change, ``WriteOutcomeUnknownError`` when the request
        was sent but no answer came."""
        ...


def rest_table_name(namespace: tuple[str, ...], name: str) -> str:
    """The table as messages name it ("REST table db.events")."""
    return f"REST table {'.'.join((*namespace, name))}"


def version_from_location(metadata_location: str, metadata: TableMetadata) -> int:
    """The version number in ``v{N}.metadata.json`` or ``{N:05d}-...``, else the log's length."""
    m = _NUMBERED.search(metadata_location)
    if m is not None:
        return int(m.group(1) or m.group(2))
    return len(metadata.metadata_log)


def state_from_reply(reply: Any, what: str, *, since: TableState | None = None) -> TableState:
    """The state a load, create or commit reply describes (``since`` when unchanged)."""
    if not isinstance(reply, dict):
        raise InvalidMetadataError(f"{what}: the reply is not an object")
    location = reply.get("metadata-location")
    if not isinstance(location, str) or not location:
        raise InvalidMetadataError(f"{what}: the reply has no 'metadata-location'")
    if since is not None and since.metadata_location == location:
        return since
    try:
        metadata = table_metadata_from_dict(reply.get("metadata"))
    except InvalidMetadataError as exc:
        raise InvalidMetadataError(f"{what}: bad 'metadata' in the reply: {exc}", location=location) from exc
    return TableState(metadata, location, version_from_location(location, metadata))


class RestProtocol(CommitProtocol):
    """The commit protocol of one table of a REST catalog: the server validates the
    requirements and applies the updates; this client never writes metadata files."""

    server_applies: ClassVar[bool] = True
    moves_with_files = False

    def __init__(self, tables: RestTables, namespace: tuple[str, ...], name: str, io: FileIO) -> None:
        self.tables = tables
        self.namespace = namespace
        self.name = name
        self.io = io

    @property
    def commit_point(self) -> CommitPoint:
        return CommitPoint(CATALOG, "rest")

    @property
    def what(self) -> str:
        return rest_table_name(self.namespace, self.name)

    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        reply = await self.tables.load_table_reply(self.namespace, self.name)
        return state_from_reply(reply, self.what, since=since)

    async def apply_remotely(
        self, base: TableState, requirements: list[TableRequirement], updates: list[TableUpdate]
    ) -> TableState:
        body = {
            "identifier": {"namespace": list(self.namespace), "name": self.name},
            "requirements": [requirement_to_json(r) for r in requirements],
            "updates": [update_to_json(u) for u in updates],
        }
        reply = await self.tables.update_table(self.namespace, self.name, body)
        try:
            return state_from_reply(reply, self.what)
        except IcebergError as exc:
            # the server said yes: the commit landed, whatever its reply looks like, so the
            # table as read now (ours or later) is the state to go on from
            try:
                return await self.load(base.metadata.location)
            except IcebergError as again:
                raise CommitStateUnknownError(
                    f"{self.what}: the commit was accepted but its reply is unreadable ({exc}), "
                    f"and reading the table back failed ({again}): nothing was deleted"
                ) from exc
