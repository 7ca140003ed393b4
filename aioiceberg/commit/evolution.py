"""Metadata evolution plumbing: pending updates, staging inside a transaction, format upgrades.

Schema, partition-spec and sort-order updates are builders: they collect operations
against one base, validate them eagerly (so a forbidden change fails where it is asked
for, not at commit), and turn into a ``MetadataChange`` whose requirements pin the
state they were computed on. A concurrent change to the same part of the table then
fails the commit as a conflict instead of silently mixing two evolutions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Self

from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.checks import RESERVED_PROPERTIES, check_settable_properties
from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import Change, MetadataChange
from aioiceberg.commit.updates import TableUpdate, UpgradeFormatVersion
from aioiceberg.errors import ValidationError
from aioiceberg.spec.metadata import SUPPORTED_FORMAT_VERSIONS, TableMetadata

__all__ = [
    "RESERVED_PROPERTIES",
    "ChangeSink",
    "PendingUpdate",
    "check_settable_properties",
    "staged_metadata",
    "upgrade_format_version",
]

ChangeSink = Callable[[MetadataChange], Awaitable[None]]
"""Where a finished builder sends its change: a table commits it, a transaction stages it."""


def staged_metadata(base: TableMetadata, changes: Iterable[Change]) -> TableMetadata:
    """``base`` with the metadata-only changes of a transaction applied.

    Later builders in the same transaction see earlier evolutions (a spec on a column
    added just before). Snapshot-producing changes are skipped: they never alter schema,
    specs, sort orders or properties, and building them needs I/O.
    """
    updates: list[TableUpdate] = []
    for change in changes:
        if isinstance(change, MetadataChange):
            updates.extend(change.updates)
    return apply_updates(base, updates) if updates else base


class PendingUpdate(ABC):
    """A builder of one metadata change; ``async with`` commits (or stages) it on a clean exit."""

    def __init__(self, base: TableMetadata, sink: ChangeSink | None) -> None:
        self._base = base
        self._sink = sink
        self._done = False

    @abstractmethod
    def updates_and_requirements(self) -> tuple[list[TableUpdate], list[TableRequirement]]:
        """The updates for the collected operations (empty when nothing changes)."""

    def change(self) -> MetadataChange | None:
        """The change to commit, or None when the operations change nothing."""
        updates, requirements = self.updates_and_requirements()
        if not updates:
            return None
        return MetadataChange(updates, requirements)

    async def commit(self) -> None:
        """Commit (or stage in the owning transaction); a no-op change writes nothing."""
        if self._done:
            raise ValidationError(f"this {type(self).__name__} was already committed")
        change = self.change()
        self._done = True
        if change is None:
            return
        if self._sink is None:
            raise ValidationError(f"this {type(self).__name__} is not attached to a table")
        await self._sink(change)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and not self._done:
            await self.commit()


def upgrade_format_version(base: TableMetadata, format_version: int) -> MetadataChange | None:
    """The change that moves ``base`` to ``format_version``; None when it is already there.

    Versions only go up (old readers would misread newer metadata and files written
    under the newer rules, so a downgrade cannot be made safe).
    """
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(
            f"cannot upgrade to format version {format_version}: supported versions are "
            f"{', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))}"
        )
    if format_version < base.format_version:
        raise ValidationError(
            f"cannot downgrade format version {base.format_version} to {format_version}: "
            "format versions only go up"
        )
    if format_version == base.format_version:
        return None
    return MetadataChange([UpgradeFormatVersion(format_version)])
