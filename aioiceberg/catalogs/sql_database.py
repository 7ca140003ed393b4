"""What the SQL catalog asks of a database, whichever one holds its two tables.

The catalog's statements are written once, as plain functions over a :class:`Statements`
handle inside one transaction, in SQL both SQLite and PostgreSQL take (``?`` markers); each
database runs them its own way (``sql.py`` on SQLite, ``sql_postgres.py`` on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from aioiceberg.errors import StoreError

__all__ = ["DDL", "DuplicateRowError", "SqlDatabase", "SqlStoreError", "Statements"]

T = TypeVar("T")

# PyIceberg 0.12's DDL (its "v1" schema, with iceberg_type), which Java's JdbcCatalog shares.
DDL = {
    "iceberg_tables": """CREATE TABLE IF NOT EXISTS iceberg_tables (
	catalog_name VARCHAR(255) NOT NULL,
	table_namespace VARCHAR(255) NOT NULL,
	table_name VARCHAR(255) NOT NULL,
	metadata_location VARCHAR(1000),
	previous_metadata_location VARCHAR(1000),
	iceberg_type VARCHAR(5),
	PRIMARY KEY (catalog_name, table_namespace, table_name)
)""",
    "iceberg_namespace_properties": """CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
	catalog_name VARCHAR(255) NOT NULL,
	namespace VARCHAR(255) NOT NULL,
	property_key VARCHAR(255) NOT NULL,
	property_value VARCHAR(1000) NOT NULL,
	PRIMARY KEY (catalog_name, namespace, property_key)
)""",
}


class SqlStoreError(StoreError):
    """The database failed an operation. ``busy``: it could not take the operation now (locks
    held past the timeout, a serialization failure, no connection): nothing was applied and it
    may be retried. ``definite``: the transaction did not apply; False only when its
    ``COMMIT`` failed in a way that leaves that open."""

    def __init__(self, message: str, *, location: str, busy: bool, definite: bool) -> None:
        super().__init__(message, location=location, retryable=busy)
        self.busy = busy
        self.definite = definite


class DuplicateRowError(Exception):
    """A row with the same key exists (a constraint refused the statement)."""


class Statements(Protocol):
    """One open transaction: rows as tuples, changed-row counts, constraint refusals as
    :class:`DuplicateRowError`."""

    #: appended to a column in a range comparison to make it compare code points, as
    #: SQLite always does ("" there; PostgreSQL's default collation may follow a locale)
    binary_order: str

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def first(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    def execute_many(self, sql: str, args: Sequence[Sequence[Any]]) -> None: ...


class SqlDatabase(Protocol):
    """A database holding PyIceberg's two tables, created on first use when missing."""

    #: names the database in errors (never a password)
    label: str
    #: iceberg_tables has PyIceberg's iceberg_type column (its v1 schema; v0 lacks it)
    typed: bool

    async def run(self, what: str, fn: Callable[[Statements], T], *, write: bool = False) -> T:
        """``fn`` in one transaction, on a worker thread; ``what`` names the operation in
        errors. Typed errors ``fn`` raises pass through (the transaction rolled back)."""
        ...

    async def aclose(self) -> None: ...
