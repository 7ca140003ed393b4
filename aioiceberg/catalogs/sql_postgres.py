"""The SQL catalog's database on PostgreSQL, through asyncpg.

PyIceberg's ``SqlCatalog`` (SQLAlchemy) and Java's ``JdbcCatalog`` share the same two tables in
the same database: the tables are created with PyIceberg's DDL when missing, and a commit is the
same guarded ``UPDATE ... WHERE metadata_location = <the one read>`` they run. Under PostgreSQL's
default isolation (read committed) a second writer's UPDATE waits for the first's row lock, then
finds the row moved on and changes nothing, so the row count says who won.

The catalog's statements are plain functions (shared with SQLite, whose driver blocks): they run
on a worker thread, and each statement is handed back to the event loop, where the connection
lives, through ``anyio.from_thread``. A pool of connections is kept per event loop (asyncpg's
connections belong to the loop that opened them).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio.from_thread
import anyio.to_thread
import asyncpg

from aioiceberg.catalogs.sql_database import DDL, DuplicateRowError, SqlStoreError, Statements
from aioiceberg.errors import ValidationError

__all__ = ["SCHEMES", "PostgresDatabase", "PostgresUri", "is_postgres_uri"]

T = TypeVar("T")

SCHEMES = ("postgresql", "postgres")
"""The URI schemes that choose PostgreSQL (as SQLAlchemy and libpq spell them)."""

_MAX_CONNECTIONS = 8
_MARK = re.compile(r"\?")
# could not take the transaction now, nothing applied: serialization failure, deadlock, lock
# timeout, too many connections, server starting up (class 08, the connection, is added below)
_BUSY_STATES = {"40001", "40P01", "55P03", "53300", "57P03"}
_TRANSPORT = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError)
_FAILURES = (asyncpg.PostgresError, *_TRANSPORT)


def is_postgres_uri(uri: str) -> bool:
    scheme, sep, _ = uri.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


@dataclass(frozen=True, slots=True)
class PostgresUri:
    """``postgresql://USER:PASSWORD@HOST:PORT/DATABASE?catalog=NAME``: ``catalog`` is the
    catalog's name (PyIceberg's catalog_name column); every other part and option (``host=``
    for a unix socket directory, ``sslmode=``, ...) is handed to asyncpg as it is."""

    dsn: str
    label: str
    catalog: str | None = None

    @classmethod
    def parse(cls, uri: str) -> PostgresUri:
        if not is_postgres_uri(uri):
            raise ValidationError(f"{uri!r} is not a PostgreSQL catalog URI: expected 'postgresql://...'")
        parts = urlsplit(uri)
        query = parse_qsl(parts.query, keep_blank_values=True)
        catalogs = [value for key, value in query if key == "catalog"]
        rest = [(key, value) for key, value in query if key != "catalog"]
        label_netloc = parts.netloc
        if parts.password is not None:
            label_netloc = label_netloc.replace(f":{parts.password}@", ":***@", 1)
        label = urlunsplit(("postgresql", label_netloc, parts.path, "", ""))
        if len(catalogs) > 1 or (catalogs and not catalogs[0]):
            raise ValidationError(f"{label!r}: the option 'catalog' must be given once and not be empty")
        dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(rest), ""))
        return cls(dsn, label, catalogs[0] if catalogs else None)


def _numbered(sql: str) -> str:
    """The catalog's ``?`` markers as PostgreSQL's ``$1, $2, ...``."""
    counter = itertools.count(1)
    return _MARK.sub(lambda _: f"${next(counter)}", sql)


def _changed(status: str) -> int:
    """The row count of a command status (``UPDATE 1``, ``INSERT 0 1``, ``DELETE 3``)."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class _PostgresStatements:
    """The catalog's statements on one connection, called from the worker thread that runs
    them: each goes back to the event loop that owns the connection."""

    binary_order = ' COLLATE "C"'  # the database's collation may follow a locale

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def _call(self, method: Callable[..., Any], sql: str, *args: Any) -> Any:
        try:
            return anyio.from_thread.run(method, _numbered(sql), *args)
        except asyncpg.UniqueViolationError as exc:
            raise DuplicateRowError(str(exc)) from exc

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._call(self.conn.fetch, sql, *args)]

    def first(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self._call(self.conn.fetchrow, sql, *args)
        return None if row is None else tuple(row)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        return _changed(str(self._call(self.conn.execute, sql, *args)))

    def execute_many(self, sql: str, args: Sequence[Sequence[Any]]) -> None:
        if args:
            self._call(self.conn.executemany, sql, [tuple(row) for row in args])


def _busy(exc: BaseException) -> bool:
    if isinstance(exc, asyncpg.PostgresError):
        state = str(getattr(exc, "sqlstate", "") or "")
        return state in _BUSY_STATES or state.startswith("08")
    return isinstance(exc, _TRANSPORT)


def _reached_server(exc: BaseException) -> bool:
    """The server answered with an error (so a failed COMMIT did not apply), rather than the
    connection failing under it."""
    if not isinstance(exc, asyncpg.PostgresError):
        return False
    state = str(getattr(exc, "sqlstate", "") or "")
    return not state.startswith(("08", "57"))


class PostgresDatabase:
    """One PostgreSQL database holding the catalog's two tables."""

    def __init__(self, uri: PostgresUri, *, lock_timeout_s: float) -> None:
        self.uri = uri
        self.label = uri.label
        self.lock_timeout_s = lock_timeout_s
        self.typed = True
        self._ready = False
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._pid = os.getpid()

    async def _open(self) -> Any:
        return await asyncpg.create_pool(
            self.uri.dsn,
            min_size=0,
            max_size=_MAX_CONNECTIONS,
            timeout=self.lock_timeout_s,
            # a row lock held longer fails the statement (retryable) instead of waiting forever
            server_settings={"lock_timeout": str(int(self.lock_timeout_s * 1000))},
        )

    async def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._pid != os.getpid():  # forked: the parent's connections are not ours to use
            self._pools, self._pid = weakref.WeakKeyDictionary(), os.getpid()
        opening = self._pools.get(loop)
        if opening is None:
            opening = self._pools[loop] = loop.create_task(self._open())
        try:
            return await asyncio.shield(opening)
        except BaseException:
            if opening.done() and (opening.cancelled() or opening.exception() is not None):
                self._pools.pop(loop, None)  # the next operation tries again
            raise

    async def _prepare(self, conn: Any) -> None:
        """Create PyIceberg's tables if missing (as PyIceberg and Java do), once per object."""
        if self._ready:
            return
        query = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name = ANY($1::text[])"
        )
        found = {str(row[0]) for row in await conn.fetch(query, list(DDL))}
        for name, ddl in DDL.items():
            if name not in found:
                try:
                    await conn.execute(ddl)
                except (asyncpg.UniqueViolationError, asyncpg.DuplicateTableError):
                    pass  # made by another connection at the same moment
        columns = await conn.fetch(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = 'iceberg_tables'"
        )
        self.typed = "iceberg_type" in {str(row[0]) for row in columns}
        self._ready = True

    def error(self, what: str, exc: BaseException, *, definite: bool = True) -> SqlStoreError:
        busy = definite and _busy(exc)
        message = f"{what}: {type(exc).__name__}: {exc}"
        if busy:
            message += " (the database could not take it now; nothing was changed)"
        elif not definite:
            message += " (the connection failed while committing: it may have been applied)"
        return SqlStoreError(message, location=self.label, busy=busy, definite=definite)

    async def run(self, what: str, fn: Callable[[Statements], T], *, write: bool = False) -> T:
        """``fn`` in one transaction (read committed, as PyIceberg and Java run theirs)."""
        committing = False
        try:
            pool = await self._pool()
            async with pool.acquire() as conn:
                await self._prepare(conn)
                async with conn.transaction(readonly=not write):
                    result = await anyio.to_thread.run_sync(fn, _PostgresStatements(conn))
                    committing = True
                return result
        except _FAILURES as exc:
            definite = not (committing and write) or _reached_server(exc)
            raise self.error(what, exc, definite=definite) from exc
        except DuplicateRowError as exc:  # a key no statement expected to collide
            raise SqlStoreError(f"{what}: {exc}", location=self.label, busy=False, definite=True) from exc

    async def aclose(self) -> None:
        """Close this loop's pool; pools of loops already gone are dropped with them."""
        pools, self._pools = self._pools, weakref.WeakKeyDictionary()
        loop = asyncio.get_running_loop()
        for owner, opening in list(pools.items()):
            if not opening.done() or opening.cancelled() or opening.exception() is not None:
                continue
            pool = opening.result()
            if owner is loop:
                await pool.close()
            else:
                pool.terminate()
