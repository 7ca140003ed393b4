"""Blocking twins of the async API, for scripts, notebooks, threads and PySpark drivers.

Every async method has a twin with the same name and arguments that runs it on one
background event loop (``aioiceberg._sync.runner``) and waits: async iterators become
plain generators that still stream, async context managers plain ones. The core
methods are written out below so they are typed; every other public coroutine or
async-iterator method of the async classes (including ones added later) gets its twin
generated at import, with the async method's signature, and anything else (plain
methods, properties, objects returned by new APIs) is forwarded by ``__getattr__``
and wrapped when it is async.

    from aioiceberg import sync
    table = sync.load_table("s3://bucket/warehouse/db/events")
    for task in table.scan(row_filter="id = 5").plan_files(): ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

import aioiceberg.catalog as _catalog
import aioiceberg.table as _table
import aioiceberg.table_scan as _scan
from aioiceberg._sync import runner
from aioiceberg.io.s3_client import close_all_clients

if TYPE_CHECKING:
    import pyarrow as pa

    from aioiceberg.runtime import Runtime
    from aioiceberg.scan.metrics import ScanMetrics
    from aioiceberg.spec.metadata import Snapshot, TableMetadata
    from aioiceberg.spec.partitioning import PartitionSpec
    from aioiceberg.spec.schema import Schema
    from aioiceberg.spec.tasks import FileScanTask

__all__ = ["Blocking", "Catalog", "Scan", "Table", "Transaction", "connect", "load_table", "wrap"]

runner.add_closer(close_all_clients)

_ASYNC_ITER_NAMES = ("AsyncIterator", "AsyncGenerator", "AsyncIterable")


def is_async_method(fn: Any) -> bool:
    """A coroutine function, an async generator function, or a function typed to return one."""
    fn = inspect.unwrap(fn)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    ret = getattr(fn, "__annotations__", {}).get("return")
    text = ret if isinstance(ret, str) else getattr(ret, "__name__", repr(ret))
    return isinstance(text, str) and any(text.startswith(n) for n in _ASYNC_ITER_NAMES)


def async_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public async methods of ``cls`` (what must have a blocking twin)."""
    found: dict[str, Callable[..., Any]] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, staticmethod | classmethod):
            attr = attr.__func__
        if inspect.isfunction(attr) and is_async_method(attr):
            found[name] = attr
    return found


def _is_asyncish(value: Any) -> bool:
    if hasattr(value, "__aenter__") or hasattr(value, "__anext__"):
        return True
    return not isinstance(value, type) and bool(async_methods(type(value)))


def wrap(value: Any) -> Any:
    """The blocking face of a value returned by the async API (other values unchanged)."""
    if isinstance(value, Blocking) or value is None:
        return value
    if inspect.iscoroutine(value):
        return wrap(runner.run(value))
    if hasattr(value, "__anext__"):
        return runner.iterate(lambda: value)
    twin = _TWINS.get(type(value))
    if twin is not None:
        return twin(value)
    if isinstance(value, str | bytes | int | float | bool | list | tuple | dict | set | frozenset):
        return value
    if _is_asyncish(value):
        return Blocking(value)
    return value


class Blocking:
    """A blocking proxy for an async object: coroutine methods run on the background loop."""

    _async_cls: ClassVar[type | None] = None

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)

    @property
    def aio(self) -> Any:
        """The async object behind this twin (for code that is itself async)."""
        return self._target

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        result = getattr(self._target, name)(*args, **kwargs)
        if inspect.iscoroutine(result):
            result = runner.run(result)
        return self if result is self._target else wrap(result)

    def __getattr__(self, name: str) -> Any:
        if name == "_target":
            raise AttributeError(name)
        value = getattr(self._target, name)
        if not callable(value) or isinstance(value, type):
            return value if value is not self._target else self

        @functools.wraps(value)
        def forward(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if inspect.iscoroutine(result):
                result = runner.run(result)
            return self if result is self._target else wrap(result)

        return forward

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __enter__(self) -> Any:
        enter = getattr(self._target, "__aenter__", None)
        if enter is None:
            raise TypeError(f"{type(self._target).__name__} is not a context manager")
        entered = runner.run(enter())
        return self if entered is self._target else wrap(entered)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        result: bool | None = runner.run(self._target.__aexit__(exc_type, exc, tb))
        return result

    def __iter__(self) -> Iterator[Any]:
        target = self._target
        if hasattr(target, "__aiter__"):
            return runner.iterate(lambda: target.__aiter__())
        raise TypeError(f"{type(target).__name__} is not iterable")

    def __repr__(self) -> str:
        return f"sync.{self._target!r}"

    def __eq__(self, other: object) -> bool:
        return bool(self._target == (other._target if isinstance(other, Blocking) else other))

    def __hash__(self) -> int:
        return hash(self._target)

    def __init_subclass__(cls, twin_of: type | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if twin_of is None:
            return
        cls._async_cls = twin_of
        _TWINS[twin_of] = cls
        for name, fn in async_methods(twin_of).items():
            if name not in cls.__dict__:
                setattr(cls, name, _generated_twin(name, fn))


def _generated_twin(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def twin(self: Blocking, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    twin.__name__ = twin.__qualname__ = name
    twin.__doc__ = fn.__doc__
    twin.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return twin


_TWINS: dict[type, type[Blocking]] = {}


class Scan(Blocking, twin_of=_scan.Scan):
    """Blocking twin of :class:`aioiceberg.table_scan.Scan`."""

    _target: _scan.Scan

    @property
    def metrics(self) -> Any:
        return self._target.metrics

    def projection(self) -> Schema:
        return self._target.projection()

    def plan_files(self, metrics: ScanMetrics | None = None) -> Iterator[FileScanTask]:
        """Tasks as the planner decides them: the first arrives before all manifests are read."""
        target = self._target
        return runner.iterate(lambda: target.plan_files(metrics), prefetch=256)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return runner.iterate(self._target.to_batches)

    def to_arrow(self) -> pa.Table:
        return runner.run(self._target.to_arrow())


class Transaction(Blocking, twin_of=_table.Transaction):
    """Blocking twin of :class:`aioiceberg.table.Transaction`: ``with table.transaction() as tx``."""

    _target: _table.Transaction

    def __enter__(self) -> Transaction:
        runner.run(self._target.__aenter__())
        return self

    @property
    def table(self) -> Table:
        return Table(self._target.table)


class Table(Blocking, twin_of=_table.Table):
    """Blocking twin of :class:`aioiceberg.table.Table`."""

    _target: _table.Table

    @property
    def identifier(self) -> str | None:
        return self._target.identifier

    @property
    def location(self) -> str:
        return self._target.location

    @property
    def metadata(self) -> TableMetadata:
        return self._target.metadata

    @property
    def metadata_location(self) -> str:
        return self._target.metadata_location

    @property
    def properties(self) -> Mapping[str, str]:
        return self._target.properties

    @property
    def read_only(self) -> bool:
        return self._target.read_only

    def schema(self) -> Schema:
        return self._target.schema()

    def spec(self) -> PartitionSpec:
        return self._target.spec()

    def current_snapshot(self) -> Snapshot | None:
        return self._target.current_snapshot()

    def snapshots(self) -> list[Snapshot]:
        return self._target.snapshots()

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
        return Scan(
            self._target.scan(
                row_filter, selected_fields, case_sensitive, snapshot_id, ref, as_of, limit, **options
            )
        )

    def transaction(self) -> Transaction:
        return Transaction(self._target.transaction())


class Catalog(Blocking, twin_of=_catalog.Catalog):
    """Blocking twin of :class:`aioiceberg.catalog.Catalog`; ``with sync.connect(...) as catalog``."""

    _target: _catalog.Catalog

    @property
    def root(self) -> str:
        return self._target.root

    def __enter__(self) -> Catalog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.aclose()

    def aclose(self) -> None:
        runner.run(self._target.aclose())

    close = aclose

    def table_location(self, identifier: str | Sequence[str]) -> str:
        return self._target.table_location(identifier)

    def load_table(self, identifier: str | Sequence[str]) -> Table:
        return Table(runner.run(self._target.load_table(identifier)))

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        return runner.run(self._target.table_exists(identifier))

    def list_tables(self, namespace: str | Sequence[str]) -> list[str]:
        return runner.run(self._target.list_tables(namespace))


def connect(
    root: str,
    lock: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    runtime: Runtime | None = None,
) -> Catalog:
    """A blocking catalog over ``root`` (a directory or ``s3://bucket/prefix``)."""
    return Catalog(_catalog.connect(root, lock, storage_options, runtime))


def load_table(
    location_or_metadata_file: str,
    storage_options: Mapping[str, Any] | None = None,
    lock: str | None = None,
    runtime: Runtime | None = None,
) -> Table:
    """The latest version of the table at a location, or one metadata file (read-only)."""
    return Table(runner.run(_catalog.load_table(location_or_metadata_file, storage_options, lock, runtime)))


def shutdown() -> None:
    """Close the clients the blocking API opened and stop its loop (also done at exit)."""
    runner.shutdown()
