"""A view as a catalog hands it out, and what a catalog that keeps views offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from aioiceberg.spec.schema import Schema
from aioiceberg.spec.view_metadata import SqlRepresentation, ViewMetadata, ViewVersion

__all__ = ["View", "ViewCatalog"]


@dataclass(frozen=True, slots=True)
class View:
    """One version of a view's metadata and the file it was read from (the commit guard)."""

    identifier: str
    metadata_location: str
    metadata: ViewMetadata

    @property
    def sql(self) -> str | None:
        """The current version's first SQL text (the one Spark or Trino wrote)."""
        for r in self.metadata.current_version.representations:
            if isinstance(r, SqlRepresentation):
                return r.sql
        return None


@runtime_checkable
class ViewCatalog(Protocol):
    """A catalog that keeps views beside its tables, in one name space with them."""

    async def create_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
    ) -> View: ...

    async def load_view(self, identifier: str | Sequence[str]) -> View: ...

    async def view_exists(self, identifier: str | Sequence[str]) -> bool: ...

    async def list_views(self, namespace: str | Sequence[str]) -> list[str]: ...

    async def drop_view(self, identifier: str | Sequence[str]) -> None: ...

    async def rename_view(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> View: ...

    async def replace_view(
        self,
        identifier: str | Sequence[str],
        schema: Schema,
        version: ViewVersion,
        properties: Mapping[str, str] | None = None,
    ) -> View: ...

    async def commit_view(self, view: View, metadata: ViewMetadata) -> View: ...

    async def check_view_location(self, identifier: str | Sequence[str], location: str) -> None: ...
