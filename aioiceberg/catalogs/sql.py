"""PyIceberg's SQL catalog (Java's JDBC catalog schema), on SQLite or PostgreSQL.

Tables and namespaces live in PyIceberg 0.12's two tables, ``iceberg_tables`` and
``iceberg_namespace_properties``, created with its DDL when missing, so PyIceberg's
``SqlCatalog`` and this one share one database file: same rows, same namespace rules
(a namespace exists while it has a property row, PyIceberg's ``exists`` marker included,
or holds tables, directly or below), same default table location
(``{warehouse}/{namespace}/{table}``, or ``{namespace property location}/{table}``).

A commit is one guarded ``UPDATE ... WHERE metadata_location = <the one read>``: no row
changed means another writer moved the table. SQLite runs on worker threads (never on the
event loop), one short transaction per operation (``BEGIN IMMEDIATE`` for writes, so two
writers wait on the busy timeout instead of deadlocking), from any number of processes.
SQLite transactions are atomic and local: a failed statement is rolled back, so every
failure is definite except a ``COMMIT`` that fails for another reason than a lock, which
the commit protocol settles by reading the pointer back. On PostgreSQL (``postgresql://``
URIs, ``sql_postgres.py``) the same statements run through an async driver.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import anyio.to_thread

from aioiceberg.catalogs.base import dotted_namespace, identifier_parts
from aioiceberg.catalogs.pointer_catalog import PointerViewCatalog, TablePlaces, split_identifier
from aioiceberg.catalogs.sql_database import DDL, DuplicateRowError, SqlDatabase, SqlStoreError, Statements
from aioiceberg.commit.protocols.commit_point import uri_options
from aioiceberg.commit.protocols.pointer_swap import MetadataPointer, Pointer
from aioiceberg.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    IcebergError,
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
)
from aioiceberg.io.resolve import scheme_of
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import UNSORTED, SortOrder
from aioiceberg.spec.view_metadata import (
    ViewMetadata,
)
from aioiceberg.table import Table
from aioiceberg.view import View

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.runtime import Runtime
    from aioiceberg.spec.partitioning import PartitionSpec

__all__ = ["BUSY_TIMEOUT_S", "URI_OPTIONS", "SqlCatalog", "SqlPointer", "SqlStoreError", "SqliteUri"]

T = TypeVar("T")

BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for other connections' locks before giving up."""

URI_OPTIONS = {"catalog": "the catalog's name (PyIceberg's catalog_name column), default 'default'"}
"""The options a ``sqlite:///PATH?...`` URI may carry."""

_TABLE_TYPE = "TABLE"
_VIEW_TYPE = "VIEW"
_VIEW_WHERE = f"catalog_name = ? AND table_namespace = ? AND table_name = ? AND iceberg_type = '{_VIEW_TYPE}'"
# PyIceberg's (and Java's) property for a namespace created without properties
_EXISTS_MARKER = ("exists", "true")
_LOCATION = "location"
_MAX_IDLE = 4
_URI = re.compile(
    r"^sqlite://(?P<host>[^/?]*)(?:/(?P<database>[^?]*))?(?:\?(?P<query>.*))?$", re.IGNORECASE | re.DOTALL
)
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (extended codes keep them in the low byte)


@dataclass(frozen=True, slots=True)
class SqliteUri:
    """``sqlite:///PATH?catalog=NAME``, read as SQLAlchemy (and so PyIceberg) reads it: three
    slashes and a relative path (against the working directory), four for an absolute one,
    ``sqlite://`` or ``sqlite:///:memory:`` for a database in memory (``database`` None)."""

    database: str | None
    catalog: str = "default"

    @classmethod
    def parse(cls, uri: str) -> SqliteUri:
        m = _URI.match(uri)
        if m is None or m.group("host"):
            raise ValidationError(
                f"{uri!r} is not a SQLite catalog URI: expected 'sqlite:///relative/path.db' or "
                "'sqlite:////absolute/path.db' (no host)"
            )
        options = uri_options(m.group("query") or "", URI_OPTIONS, uri)
        catalog = options.get("catalog", "default")
        database = unquote(m.group("database") or "")
        if database in ("", ":memory:"):
            return cls(None, catalog)
        return cls(os.path.abspath(database), catalog)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _BUSY_CODES
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _rollback(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")


class _SqliteStatements:
    """The catalog's statements on one SQLite connection (a worker thread's)."""

    binary_order = ""  # SQLite compares text by code point

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.conn.execute(sql, args)]

    def first(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else tuple(row)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        try:
            return self.conn.execute(sql, args).rowcount
        except sqlite3.IntegrityError as exc:
            raise DuplicateRowError(str(exc)) from exc

    def execute_many(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        try:
            self.conn.executemany(sql, args)
        except sqlite3.IntegrityError as exc:
            raise DuplicateRowError(str(exc)) from exc


class _Database:
    """One SQLite database reached from worker threads: a few idle connections kept for
    reuse (a connection is used by one thread at a time), or the single connection of an
    in-memory database, which only that connection sees."""

    def __init__(self, path: str | None, busy_timeout_s: float) -> None:
        self.path = path
        self.label = path or ":memory:"
        self.busy_timeout_s = busy_timeout_s
        #: iceberg_tables has PyIceberg's iceberg_type column (its v1 schema; v0 lacks it)
        self.typed = True
        self._lock = threading.Lock()
        self._init_lock = threading.Lock()
        self._memory_lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._memory: sqlite3.Connection | None = None
        self._ready = False
        self._closed = False
        self._pid = os.getpid()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self.path or ":memory:",
            timeout=self.busy_timeout_s,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # pooled: used by one worker thread at a time
        )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self.path is None:
            with self._memory_lock:
                if self._memory is None:
                    self._memory = self._connect()
                try:
                    yield self._memory
                finally:
                    _rollback(self._memory)
            return
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's connections are not ours to use
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            _rollback(conn)
            with self._lock:
                keep = not self._closed and len(self._idle) < _MAX_IDLE and self._pid == os.getpid()
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Create PyIceberg's tables if missing (as PyIceberg does), once per database object."""
        if self._ready:
            return
        with self._init_lock:
            if self._ready:
                return
            found = {
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", tuple(DDL)
                )
            }
            missing = [ddl for name, ddl in DDL.items() if name not in found]
            if missing:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for ddl in missing:
                        conn.execute(ddl)
                    conn.execute("COMMIT")
                finally:
                    _rollback(conn)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(iceberg_tables)")}
            self.typed = "iceberg_type" in columns
            self._ready = True

    def error(self, what: str, exc: sqlite3.Error, *, definite: bool = True) -> SqlStoreError:
        busy = _is_busy(exc)
        message = f"{what}: {exc}"
        if busy:
            message += (
                f" (other connections kept the database locked for {self.busy_timeout_s:g} s; "
                "nothing was changed)"
            )
        return SqlStoreError(message, location=self.label, busy=busy, definite=definite)

    def _run(self, what: str, fn: Callable[[Statements], T], write: bool) -> T:
        try:
            with self._connection() as conn:
                self._prepare(conn)
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                result = fn(_SqliteStatements(conn))  # an error here: rolled back on release, nothing applied
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    # a lock leaves the transaction open and unapplied (rolled back on release);
                    # anything else may have reached the file: the caller reads back
                    raise self.error(what, exc, definite=_is_busy(exc) or not write) from exc
                return result
        except sqlite3.Error as exc:
            raise self.error(what, exc) from exc
        except DuplicateRowError as exc:  # a key no statement expected to collide
            raise SqlStoreError(f"{what}: {exc}", location=self.label, busy=False, definite=True) from exc

    async def run(self, what: str, fn: Callable[[Statements], T], *, write: bool = False) -> T:
        """``fn(connection)`` in one transaction on a worker thread; ``what`` names the
        operation in errors. Typed errors ``fn`` raises pass through (the transaction rolled back)."""
        return await anyio.to_thread.run_sync(self._run, what, fn, write)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        with self._memory_lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._close)


# -- statements, run on a worker thread ------------------------------------------------------------
def _below(conn: Statements, column: str) -> str:
    """``column`` names a namespace strictly below ``?`` (bounds ``ns + '.'`` and ``ns + '/'``:
    exact and case-sensitive, where PyIceberg's LIKE is case-blind on SQLite)."""
    return f"({column}{conn.binary_order} > ? AND {column}{conn.binary_order} < ?)"


def _bounds(namespace: str) -> tuple[str, str]:
    return namespace + ".", namespace + "/"


def _tables_only(typed: bool) -> str:
    """A condition leaving out rows of other types (Java's views), where the column exists."""
    return f" AND (iceberg_type = '{_TABLE_TYPE}' OR iceberg_type IS NULL)" if typed else ""


def _namespaces_below(conn: Statements) -> str:
    """Namespaces strictly below one, from both tables (bound with catalog, low, high,
    catalog, low, high)."""
    return (
        "SELECT table_namespace FROM iceberg_tables "
        f"WHERE catalog_name = ? AND {_below(conn, 'table_namespace')} "
        "UNION SELECT namespace FROM iceberg_namespace_properties "
        f"WHERE catalog_name = ? AND {_below(conn, 'namespace')}"
    )


def _namespace_exists(conn: Statements, catalog: str, namespace: str) -> bool:
    """PyIceberg's rule: a property row or a table row, for the namespace or one below it."""
    for table, column in (
        ("iceberg_namespace_properties", "namespace"),
        ("iceberg_tables", "table_namespace"),
    ):
        row = conn.first(
            f"SELECT 1 FROM {table} "
            f"WHERE catalog_name = ? AND ({column} = ? OR {_below(conn, column)}) LIMIT 1",
            (catalog, namespace, *_bounds(namespace)),
        )
        if row is not None:
            return True
    return False


def _namespace_properties(conn: Statements, catalog: str, namespace: str) -> dict[str, str]:
    rows = conn.rows(
        "SELECT property_key, property_value FROM iceberg_namespace_properties "
        "WHERE catalog_name = ? AND namespace = ?",
        (catalog, namespace),
    )
    return {str(key): str(value) for key, value in rows}


class SqlPointer(MetadataPointer):
    """One table's row in ``iceberg_tables``: the location read is the guard of the swap."""

    def __init__(self, catalog: SqlCatalog, namespace: str, table: str) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.table = table
        self.name = f"sql table {namespace}.{table} (catalog {catalog.catalog_name!r})"

    def _key(self) -> tuple[str, str, str]:
        return (self.catalog.catalog_name, self.namespace, self.table)

    def _where(self) -> str:
        key = "catalog_name = ? AND table_namespace = ? AND table_name = ?"
        return key + _tables_only(self.catalog.db.typed)

    def _select(self, conn: Statements) -> str | None:
        row = conn.first(f"SELECT metadata_location FROM iceberg_tables WHERE {self._where()}", self._key())
        return None if row is None or not row[0] else str(row[0])

    async def read(self) -> Pointer | None:
        found = await self.catalog.db.run(f"read {self.name}", self._select)
        return Pointer(found) if found is not None else None

    async def create(self, metadata_location: str, metadata: TableMetadata) -> Pointer:
        db = self.catalog.db

        def insert(conn: Statements) -> None:
            if not _namespace_exists(conn, self.catalog.catalog_name, self.namespace):
                raise NamespaceNotFoundError(self.catalog.no_namespace(self.namespace))
            columns = (
                "catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location"
            )
            values: tuple[str | None, ...] = (*self._key(), metadata_location, None)
            if db.typed:
                columns += ", iceberg_type"
                values += (_TABLE_TYPE,)
            marks = ", ".join("?" * len(values))
            try:
                conn.execute(f"INSERT INTO iceberg_tables ({columns}) VALUES ({marks})", values)
            except DuplicateRowError as exc:
                raise TableAlreadyExistsError(f"{self.name} already exists") from exc

        try:
            await db.run(f"create {self.name}", insert, write=True)
        except SqlStoreError as exc:
            if exc.definite:
                raise
            landed = await self._settle(metadata_location, exc)
            if not landed:
                raise
        return Pointer(metadata_location)

    async def _settle(self, metadata_location: str, exc: SqlStoreError) -> bool:
        """Whether a transaction whose COMMIT failed left the row at ``metadata_location``.
        Reading after the failure settles it (SQLite rolls back what did not commit first);
        a failed read leaves it unknown."""
        try:
            return await self.read() == Pointer(metadata_location)
        except StoreError as again:
            raise CommitStateUnknownError(
                f"{self.name}: the database failed while committing ({exc}), and reading the "
                f"table's row back failed too ({again}): it may point at {metadata_location}"
            ) from exc

    async def swap(self, expected: Pointer, metadata_location: str, metadata: TableMetadata) -> Pointer:
        def update(conn: Statements) -> str | None:
            moved = conn.execute(
                "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
                f"WHERE {self._where()} AND metadata_location = ?",
                (metadata_location, expected.metadata_location, *self._key(), expected.metadata_location),
            )
            if moved == 1:
                return None
            current = self._select(conn)
            return "was dropped or renamed" if current is None else f"moved on to {current}"

        try:
            refused = await self.catalog.db.run(f"commit {self.name}", update, write=True)
        except SqlStoreError as exc:
            if not exc.definite and await self._settle(metadata_location, exc):
                return Pointer(metadata_location)
            if exc.busy:  # nothing applied: rebase and retry like a lost race
                raise CommitFailedError(f"{self.name}: {exc}") from exc
            with contextlib.suppress(StoreError):
                await self.catalog.io_for(metadata_location).delete(metadata_location)
            raise CommitConflictError(
                f"{self.name}: the database refused the commit, and the table is unchanged: {exc}"
            ) from exc
        if refused is not None:
            raise CommitFailedError(
                f"{self.name} {refused} (this commit was based on {expected.metadata_location})"
            )
        return Pointer(metadata_location)

    async def delete(self) -> None:
        def remove(conn: Statements) -> int:
            return conn.execute(f"DELETE FROM iceberg_tables WHERE {self._where()}", self._key())

        if await self.catalog.db.run(f"drop {self.name}", remove, write=True) == 0:
            raise TableNotFoundError(f"{self.name} does not exist")


def _is_postgres(uri: str) -> bool:
    """``postgresql://`` or ``postgres://`` (checked here: the PostgreSQL module needs asyncpg)."""
    return uri.lower().startswith(("postgresql://", "postgres://"))


def _warehouse(warehouse: str) -> str:
    if scheme_of(warehouse) == "file" and not warehouse.startswith("file:"):
        return os.path.abspath(warehouse).rstrip("/")
    return warehouse.rstrip("/")


class SqlCatalog(PointerViewCatalog):
    """PyIceberg's SQL catalog on a SQLite file: ``aioiceberg.connect("sqlite:///PATH.db",
    warehouse=...)``, or on PostgreSQL: ``"postgresql://USER@HOST:PORT/DB"`` (``database`` is
    then that URI). ``warehouse`` is where new tables go, and the one place this catalog
    creates, moves and purges table files (a namespace ``location`` must lie inside it);
    without it, tables can still be loaded, listed and committed, but none created or purged.
    ``busy_timeout_s`` bounds waits for other connections' locks."""

    kind = "sql"

    def __init__(
        self,
        database: str | None,
        *,
        catalog_name: str = "default",
        warehouse: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        runtime: Runtime | None = None,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> None:
        if not catalog_name:
            raise ValidationError("the SQL catalog's name must not be empty")
        self.db: SqlDatabase
        if database is not None and _is_postgres(database):
            # asyncpg: optional (the postgres extra)
            from aioiceberg.catalogs.sql_postgres import PostgresDatabase, PostgresUri

            parsed = PostgresUri.parse(database)
            if parsed.catalog is not None and parsed.catalog != catalog_name:
                raise ValidationError(
                    f"{parsed.label!r} names catalog {parsed.catalog!r}, but {catalog_name!r} was given"
                )
            self.database: str | None = parsed.label
            self.uri = parsed.label
            self.db = PostgresDatabase(parsed, lock_timeout_s=busy_timeout_s)
            folder = os.getcwd()
        else:
            self.database = os.path.abspath(database) if database is not None else None
            self.uri = f"sqlite:///{self.database or ':memory:'}"
            self.db = _Database(self.database, busy_timeout_s)
            folder = os.path.dirname(self.database or os.path.join(os.getcwd(), "_"))
        self.catalog_name = catalog_name
        self.warehouse = _warehouse(warehouse) if warehouse else None
        # without a warehouse the root is the catalog itself; its io reaches the database's folder
        home = self.warehouse or folder
        super().__init__(home, storage_options=storage_options, runtime=runtime)
        if self.warehouse is None:
            self.root = self.uri

    @classmethod
    def from_uri(
        cls,
        uri: str,
        *,
        warehouse: str | None,
        storage_options: Mapping[str, Any] | None,
        runtime: Runtime | None,
    ) -> SqlCatalog:
        if _is_postgres(uri):
            # asyncpg: optional (the postgres extra)
            from aioiceberg.catalogs.sql_postgres import PostgresUri

            catalog = PostgresUri.parse(uri).catalog or "default"
            return cls(
                uri,
                catalog_name=catalog,
                warehouse=warehouse,
                storage_options=storage_options,
                runtime=runtime,
            )
        parsed = SqliteUri.parse(uri)
        return cls(
            parsed.database,
            catalog_name=parsed.catalog,
            warehouse=warehouse,
            storage_options=storage_options,
            runtime=runtime,
        )

    def __repr__(self) -> str:
        return f"SqlCatalog({self.uri!r}, catalog={self.catalog_name!r})"

    async def _close_clients(self) -> None:
        await self.db.aclose()

    def root_locations(self) -> tuple[str, ...]:
        return (self.warehouse,) if self.warehouse else ()

    def no_namespace(self, namespace: str) -> str:
        return f"namespace {namespace!r} does not exist in sql catalog {self.catalog_name!r}"

    def _namespace(self, namespace: str | Sequence[str]) -> str:
        return dotted_namespace(namespace)

    # -- tables --------------------------------------------------------------------------------
    def pointer(self, namespace: tuple[str, ...], name: str) -> SqlPointer:
        return SqlPointer(self, self._namespace(namespace), name)

    async def new_table_location(self, namespace: tuple[str, ...], name: str) -> str:
        """PyIceberg's default: under the namespace's ``location`` property, else
        ``{warehouse}/{namespace}/{name}``."""
        ns = self._namespace(namespace)

        def lookup(conn: Statements) -> tuple[bool, str | None]:
            exists = _namespace_exists(conn, self.catalog_name, ns)
            return exists, _namespace_properties(conn, self.catalog_name, ns).get(_LOCATION)

        exists, base = await self.db.run(f"read namespace {ns}", lookup)
        if not exists:
            raise NamespaceNotFoundError(self.no_namespace(ns))
        if self.warehouse is None:
            raise self._no_roots(f"cannot create {ns}.{name}")
        if base:
            try:
                self.check_namespace_location(ns, base)
            except LocationNotAllowedError as exc:  # set by another engine: no table goes there
                raise LocationNotAllowedError(f"cannot create {ns}.{name}: {exc}", location=base) from None
            return f"{base.rstrip('/')}/{name}"
        return f"{self.warehouse}/{ns}/{name}"

    async def table_places(self) -> list[TablePlaces]:
        """Every row of the database (other catalog names and views too: their files may lie
        under the same warehouse), placed from its metadata file."""

        def query(conn: Statements) -> list[tuple[str, str, str, str, str | None]]:
            kind = ", iceberg_type" if self.db.typed else ", NULL"
            rows = conn.rows(
                "SELECT catalog_name, table_namespace, table_name, metadata_location"
                f"{kind} FROM iceberg_tables WHERE metadata_location IS NOT NULL"
            )
            return [
                (str(c), str(ns), str(t), str(m), None if k is None else str(k)) for c, ns, t, m, k in rows
            ]

        out: list[TablePlaces] = []
        for catalog, ns, table, metadata_location, kind in await self.db.run("list every table", query):
            ours = catalog == self.catalog_name and kind in (None, _TABLE_TYPE)
            name = f"table {ns}.{table}" + (
                "" if catalog == self.catalog_name else f" of catalog {catalog!r}"
            )
            out.append(
                TablePlaces(
                    name if kind in (None, _TABLE_TYPE) else f"view {ns}.{table}",
                    (*ns.split("."), table) if ours else None,
                    await self.places_of(metadata_location),
                )
            )
        return out

    async def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        ns = self._namespace(namespace)

        def query(conn: Statements) -> list[str] | None:
            if not _namespace_exists(conn, self.catalog_name, ns):
                return None
            rows = conn.rows(
                "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?"
                + _tables_only(self.db.typed),
                (self.catalog_name, ns),
            )
            return [str(row[0]) for row in rows]

        names = await self.db.run(f"list tables in {ns}", query)
        if names is None:
            raise NamespaceNotFoundError(self.no_namespace(ns))
        return sorted(f"{ns}.{name}" for name in names)

    async def rename_table(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> Table:
        """Give the table another name; its files stay where they are (as in PyIceberg)."""
        source = self.pointer(*split_identifier(from_identifier))
        target = self.pointer(*split_identifier(to_identifier))

        def rename(conn: Statements) -> None:
            if not _namespace_exists(conn, self.catalog_name, target.namespace):
                raise NamespaceNotFoundError(self.no_namespace(target.namespace))
            try:
                moved = conn.execute(
                    f"UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE {source._where()}",
                    (target.namespace, target.table, *source._key()),
                )
            except DuplicateRowError as exc:
                raise TableAlreadyExistsError(f"{target.name} already exists") from exc
            if moved == 0:
                raise TableNotFoundError(f"{source.name} does not exist")

        await self.db.run(f"rename {source.name} to {target.namespace}.{target.table}", rename, write=True)
        return await self.load_table(to_identifier)

    # -- namespaces ----------------------------------------------------------------------------
    async def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        """Refused when the namespace exists, also only through a namespace or table below it
        (PyIceberg's rule); without properties it records PyIceberg's ``exists`` marker."""
        ns = self._namespace(namespace)
        props = {str(k): str(v) for k, v in (properties or {}).items()} or dict([_EXISTS_MARKER])
        if _LOCATION in props:
            self.check_namespace_location(ns, props[_LOCATION])

        def create(conn: Statements) -> None:
            exists = NamespaceAlreadyExistsError(
                f"namespace {ns!r} already exists in sql catalog {self.catalog_name!r}"
            )
            if _namespace_exists(conn, self.catalog_name, ns):
                raise exists
            try:
                conn.execute_many(
                    "INSERT INTO iceberg_namespace_properties "
                    "(catalog_name, namespace, property_key, property_value) VALUES (?, ?, ?, ?)",
                    [(self.catalog_name, ns, key, value) for key, value in props.items()],
                )
            except DuplicateRowError as exc:  # created by another writer since the check
                raise exists from exc

        await self.db.run(f"create namespace {ns}", create, write=True)

    async def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        ns = self._namespace(namespace)
        return await self.db.run(
            f"read namespace {ns}", lambda conn: _namespace_exists(conn, self.catalog_name, ns)
        )

    async def list_namespaces(self, parent: str | Sequence[str] = ()) -> list[str]:
        """Namespaces directly below ``parent``, including those that exist only through
        deeper namespaces or tables (as PyIceberg lists them)."""
        parts = identifier_parts(parent, "namespace") if parent else []
        ns = self._namespace(parts) if parts else ""

        def query(conn: Statements) -> list[str] | None:
            if not parts:
                sql = (
                    "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ? UNION "
                    "SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?"
                )
                return [str(r[0]) for r in conn.rows(sql, (self.catalog_name, self.catalog_name))]
            if not _namespace_exists(conn, self.catalog_name, ns):
                return None
            args = (self.catalog_name, *_bounds(ns), self.catalog_name, *_bounds(ns))
            return [str(r[0]) for r in conn.rows(_namespaces_below(conn), args)]

        found = await self.db.run(f"list namespaces in {ns or 'the catalog'}", query)
        if found is None:
            raise NamespaceNotFoundError(self.no_namespace(ns))
        level = len(parts) + 1
        return sorted({".".join(n.split(".")[:level]) for n in found if n and len(n.split(".")) >= level})

    async def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        """The stored properties, as PyIceberg returns them (its ``exists`` marker included)."""
        ns = self._namespace(namespace)

        def query(conn: Statements) -> dict[str, str] | None:
            if not _namespace_exists(conn, self.catalog_name, ns):
                return None
            return _namespace_properties(conn, self.catalog_name, ns)

        props = await self.db.run(f"read namespace {ns}", query)
        if props is None:
            raise NamespaceNotFoundError(self.no_namespace(ns))
        return props

    async def update_namespace_properties(
        self,
        namespace: str | Sequence[str],
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Remove then set, in one transaction; removing every property leaves the ``exists``
        marker, so the namespace is not dropped by the way."""
        ns = self._namespace(namespace)
        changes = [(self.catalog_name, ns, str(k), str(v)) for k, v in (updates or {}).items()]
        if updates and _LOCATION in updates:
            self.check_namespace_location(ns, str(updates[_LOCATION]))

        def update(conn: Statements) -> dict[str, str]:
            if not _namespace_exists(conn, self.catalog_name, ns):
                raise NamespaceNotFoundError(self.no_namespace(ns))
            conn.execute_many(
                "DELETE FROM iceberg_namespace_properties "
                "WHERE catalog_name = ? AND namespace = ? AND property_key = ?",
                [(self.catalog_name, ns, str(key)) for key in removals],
            )
            conn.execute_many(
                "INSERT INTO iceberg_namespace_properties "
                "(catalog_name, namespace, property_key, property_value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (catalog_name, namespace, property_key) "
                "DO UPDATE SET property_value = excluded.property_value",
                changes,
            )
            props = _namespace_properties(conn, self.catalog_name, ns)
            if not props:
                conn.execute(
                    "INSERT INTO iceberg_namespace_properties "
                    "(catalog_name, namespace, property_key, property_value) VALUES (?, ?, ?, ?)",
                    (self.catalog_name, ns, *_EXISTS_MARKER),
                )
                props = dict([_EXISTS_MARKER])
            return props

        return await self.db.run(f"update namespace {ns}", update, write=True)

    async def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """Drop an empty namespace: refused while it holds tables or namespaces below it."""
        ns = self._namespace(namespace)

        def drop(conn: Statements) -> None:
            if not _namespace_exists(conn, self.catalog_name, ns):
                raise NamespaceNotFoundError(self.no_namespace(ns))
            tables = [
                f"table {ns}.{row[0]}"
                for row in conn.rows(
                    "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
                    "ORDER BY table_name LIMIT 5",
                    (self.catalog_name, ns),
                )
            ]
            below = conn.rows(
                _namespaces_below(conn) + " LIMIT 5",
                (self.catalog_name, *_bounds(ns), self.catalog_name, *_bounds(ns)),
            )
            if tables or below:
                held = tables + [f"namespace {row[0]}" for row in below]
                raise NamespaceNotEmptyError(
                    f"namespace {ns!r} in sql catalog {self.catalog_name!r} is not empty: "
                    + ", ".join(held[:5])
                )
            conn.execute(
                "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?",
                (self.catalog_name, ns),
            )

        await self.db.run(f"drop namespace {ns}", drop, write=True)

    # -- views -------------------------------------------------------------------------------
    # Java's and PyIceberg's rows with iceberg_type = 'VIEW': one name space with the tables
    # (the row key has no type), each pointing at a view metadata file under the view's
    # location, committed by the same guarded UPDATE as a table.
    def _view_name(self, namespace: str, name: str) -> str:
        return f"sql view {namespace}.{name} (catalog {self.catalog_name!r})"

    def _view_key(self, identifier: str | Sequence[str]) -> tuple[str, str]:
        namespace, name = split_identifier(identifier)
        if not self.db.typed:
            raise UnsupportedError(
                f"sql catalog {self.catalog_name!r}: its iceberg_tables has no iceberg_type column "
                "(PyIceberg's old schema), so it cannot hold views"
            )
        return self._namespace(namespace), name

    async def _read_view_row(self, namespace: str, name: str) -> str | None:
        def query(conn: Statements) -> str | None:
            row = conn.first(
                f"SELECT metadata_location FROM iceberg_tables WHERE {_VIEW_WHERE}",
                (self.catalog_name, namespace, name),
            )
            return None if row is None or not row[0] else str(row[0])

        return await self.db.run(f"read {self._view_name(namespace, name)}", query)

    async def _view_taken_by(self, namespace: str, name: str) -> str | None:
        """'table' or 'view' when the name is taken (the two share one name space), else None."""

        def query(conn: Statements) -> str | None:
            kind = "iceberg_type" if self.db.typed else "NULL"
            row = conn.first(
                f"SELECT {kind} FROM iceberg_tables "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                (self.catalog_name, namespace, name),
            )
            return None if row is None else "view" if row[0] == _VIEW_TYPE else "table"

        return await self.db.run(f"read {namespace}.{name}", query)

    async def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema | Schema,
        partition_by: Sequence[str] | PartitionSpec | None = None,
        properties: Mapping[str, str] | None = None,
        format_version: int = 2,
        sort_order: SortOrder = UNSORTED,
    ) -> Table:
        """Refused when a view has the name (tables and views share one name space)."""
        namespace, name = split_identifier(identifier)
        ns = self._namespace(namespace)
        if await self._view_taken_by(ns, name) == "view":
            raise TableAlreadyExistsError(f"cannot create table {ns}.{name}: a view of that name exists")
        return await super().create_table(
            identifier, schema, partition_by, properties, format_version, sort_order
        )

    def _view_place_name(self, namespace: str, name: str) -> str:
        return f"view {namespace}.{name}"

    async def _add_view_entry(
        self, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        shown = f"{namespace}.{name}"

        def insert(conn: Statements) -> None:
            if not _namespace_exists(conn, self.catalog_name, namespace):
                raise NamespaceNotFoundError(self.no_namespace(namespace))
            key = (self.catalog_name, namespace, name)
            taken = conn.first(
                "SELECT iceberg_type FROM iceberg_tables "
                "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                key,
            )
            if taken is not None:
                kind = "view" if taken[0] == _VIEW_TYPE else "table"
                raise ViewAlreadyExistsError(f"cannot create view {shown}: a {kind} of that name exists")
            try:
                conn.execute(
                    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                    "metadata_location, previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, ?, ?)",
                    (*key, metadata_location, None, _VIEW_TYPE),
                )
            except DuplicateRowError as exc:
                raise ViewAlreadyExistsError(f"cannot create view {shown}: the name was just taken") from exc

        try:
            await self.db.run(f"create {self._view_name(namespace, name)}", insert, write=True)
        except (IcebergError, OSError):
            with contextlib.suppress(StoreError):
                if await self._read_view_row(namespace, name) != metadata_location:
                    await self._forget_file(metadata_location)
            raise

    async def _view_pointer(self, namespace: str, name: str) -> str:
        found = await self._read_view_row(namespace, name)
        if found is None:
            raise ViewNotFoundError(f"{self._view_name(namespace, name)} does not exist")
        return found

    async def view_exists(self, identifier: str | Sequence[str]) -> bool:
        if not self.db.typed:  # PyIceberg's old schema holds no views
            return False
        return await self._read_view_row(*self._view_key(identifier)) is not None

    async def list_views(self, namespace: str | Sequence[str]) -> list[str]:
        ns = self._namespace(namespace)
        if not self.db.typed:
            return []

        def query(conn: Statements) -> list[str] | None:
            if not _namespace_exists(conn, self.catalog_name, ns):
                return None
            rows = conn.rows(
                "SELECT table_name FROM iceberg_tables "
                f"WHERE catalog_name = ? AND table_namespace = ? AND iceberg_type = '{_VIEW_TYPE}'",
                (self.catalog_name, ns),
            )
            return [str(row[0]) for row in rows]

        names = await self.db.run(f"list views in {ns}", query)
        if names is None:
            raise NamespaceNotFoundError(self.no_namespace(ns))
        return sorted(f"{ns}.{name}" for name in names)

    async def drop_view(self, identifier: str | Sequence[str]) -> None:
        """Forget the view; its metadata files stay (as Java's JDBC catalog leaves them)."""
        namespace, name = self._view_key(identifier)

        def remove(conn: Statements) -> int:
            return conn.execute(
                f"DELETE FROM iceberg_tables WHERE {_VIEW_WHERE}", (self.catalog_name, namespace, name)
            )

        if await self.db.run(f"drop {self._view_name(namespace, name)}", remove, write=True) == 0:
            raise ViewNotFoundError(f"{self._view_name(namespace, name)} does not exist")

    async def rename_view(
        self, from_identifier: str | Sequence[str], to_identifier: str | Sequence[str]
    ) -> View:
        """Another name for the view; refused when a table or view has it. Files stay put."""
        src_ns, src = self._view_key(from_identifier)
        dst_ns, dst = self._view_key(to_identifier)

        def rename(conn: Statements) -> None:
            if not _namespace_exists(conn, self.catalog_name, dst_ns):
                raise NamespaceNotFoundError(self.no_namespace(dst_ns))
            try:
                moved = conn.execute(
                    f"UPDATE iceberg_tables SET table_namespace = ?, table_name = ? WHERE {_VIEW_WHERE}",
                    (dst_ns, dst, self.catalog_name, src_ns, src),
                )
            except DuplicateRowError as exc:
                raise ViewAlreadyExistsError(
                    f"cannot rename view {src_ns}.{src} to {dst_ns}.{dst}: "
                    "a table or view of that name exists"
                ) from exc
            if moved == 0:
                raise ViewNotFoundError(f"{self._view_name(src_ns, src)} does not exist")

        await self.db.run(f"rename {self._view_name(src_ns, src)} to {dst_ns}.{dst}", rename, write=True)
        return await self.load_view(to_identifier)

    async def _point_view(
        self, view: View, namespace: str, name: str, metadata_location: str, metadata: ViewMetadata
    ) -> None:
        """The same guarded UPDATE as a table's commit."""
        label = self._view_name(namespace, name)

        def update(conn: Statements) -> str | None:
            moved = conn.execute(
                "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? "
                f"WHERE {_VIEW_WHERE} AND metadata_location = ?",
                (
                    metadata_location,
                    view.metadata_location,
                    self.catalog_name,
                    namespace,
                    name,
                    view.metadata_location,
                ),
            )
            if moved == 1:
                return None
            row = conn.first(
                f"SELECT metadata_location FROM iceberg_tables WHERE {_VIEW_WHERE}",
                (self.catalog_name, namespace, name),
            )
            return "was dropped or renamed" if row is None else f"moved on to {row[0]}"

        try:
            refused = await self.db.run(f"commit {label}", update, write=True)
        except SqlStoreError as exc:
            if not exc.definite and await self._view_landed(namespace, name, metadata_location, exc):
                return
            if exc.busy:
                raise CommitFailedError(f"{label}: {exc}") from exc
            raise CommitConflictError(
                f"{label}: the database refused the commit; the view is unchanged: {exc}"
            ) from exc
        if refused is not None:
            raise CommitFailedError(f"{label} {refused} (this commit was based on {view.metadata_location})")

    async def _view_landed(
        self, namespace: str, name: str, metadata_location: str, exc: SqlStoreError
    ) -> bool:
        """Whether a failed COMMIT left the view's row at ``metadata_location``; a failed read
        leaves it unknown (``CommitStateUnknownError``, the file kept)."""
        try:
            return await self._read_view_row(namespace, name) == metadata_location
        except StoreError as again:
            raise CommitStateUnknownError(
                f"{self._view_name(namespace, name)}: the database failed while committing ({exc}), "
                f"and reading the view's row back failed too ({again}): it may point at {metadata_location}"
            ) from exc
