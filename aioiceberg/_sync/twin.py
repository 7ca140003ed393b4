"""Typed factories that make a blocking twin's members out of the async class's own.

A twin class names each member once, pointing at the async method (``append =
blocking(Table.append)``): the factory takes that method's parameters through a
``ParamSpec`` and returns a plain function that Python and mypy both bind like a method,
so mypy sees the twin's exact signature and it cannot drift from the async one. Which
returned objects become twins is said per member (``into=``), not looked up at run time.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeAlias, TypeVar, overload

from aioiceberg._sync import default_loop

__all__ = [
    "PLAN_BATCHES_PREFETCH",
    "PLAN_PREFETCH",
    "Attribute",
    "Blocking",
    "BlockingContext",
    "Pending",
    "TwinMethod",
    "blocking",
    "forwarded",
    "function",
    "streaming",
    "streaming_batches",
]

A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
W = TypeVar("W")
S = TypeVar("S")
F = TypeVar("F", bound=Callable[..., Any])

# How far a plan may run ahead of its consumer. The consumer's thread can wait for the GIL
# a switch interval (5 ms) at a time while the loop and the decode threads hold it; a
# shallow queue then stalls the plan behind it (256 tasks: the pump waited ~500 times in a
# 100k-task plan, the blocking plan took 1.2-1.5x the async one). Tasks are small and a
# queued manifest's tasks are built only as they are taken, so thousands cost little.
PLAN_PREFETCH = 4096
# plan_batches: one Arrow batch per item, of a manifest's tasks (~100 KB at 500 tasks) or of
# several manifests' decoded while the caller was busy (up to ~4k tasks, their columns copied)
PLAN_BATCHES_PREFETCH = 64


class Blocking(Generic[A_co]):
    """The blocking face of one async object; ``aio`` is the object itself (for async code)."""

    def __init__(self, aio: A_co) -> None:
        self._aio = aio

    @property
    def aio(self) -> A_co:
        return self._aio

    def __repr__(self) -> str:
        return f"sync.{self._aio!r}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Blocking) and bool(self._aio == other._aio)

    def __hash__(self) -> int:
        return hash(self._aio)


C_co = TypeVar("C_co", bound=AbstractAsyncContextManager[Any], covariant=True)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class BlockingContext(Blocking[C_co]):
    """A twin of an async context manager: ``with`` runs ``__aenter__``/``__aexit__`` on the loop."""

    def __enter__(self) -> Self:
        default_loop.run(_awaited(self.aio.__aenter__()))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return default_loop.run(_awaited(self.aio.__aexit__(exc_type, exc, tb)))


# A twin method: a plain function taking the twin, so Python binds it natively (no
# per-call descriptor) and mypy binds it like a method, with the async method's parameters.
TwinMethod: TypeAlias = Callable[Concatenate[Blocking[A], P], R]


def _signed(twin: F, method: Callable[..., Any]) -> F:
    """``twin`` with ``method``'s name, docstring and (through ``__wrapped__``) signature, for
    ``inspect`` and ``help()``."""
    functools.update_wrapper(twin, method, assigned=("__name__", "__doc__"))
    return twin


@overload
def blocking(method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]]) -> TwinMethod[A, P, R]: ...
@overload
def blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]], into: Callable[[R], W]
) -> TwinMethod[A, P, W]: ...
def blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]], into: Callable[[R], Any] | None = None
) -> TwinMethod[A, P, Any]:
    """The twin of a coroutine method: runs it on the background loop and waits; ``into``
    turns the result into its twin (an async Table into a blocking one)."""

    name = method.__name__

    def call(twin: Blocking[A], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        # by name, so that a subclass's override runs (a Glue catalog behind sync.Catalog)
        result = default_loop.run(getattr(twin._aio, name)(*args, **kwargs))
        return result if into is None else into(result)

    return _signed(call, method)


def streaming(
    method: Callable[Concatenate[A, P], AsyncIterator[T]], prefetch: int = default_loop.DEFAULT_PREFETCH
) -> TwinMethod[A, P, Iterator[T]]:
    """The twin of an async-iterator method: a plain iterator that still streams (the async
    iterator is made and driven on the loop; closing the iterator early closes it there)."""

    name = method.__name__

    def call(twin: Blocking[A], /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        bound = getattr(twin._aio, name)
        return default_loop.iterate(lambda: bound(*args, **kwargs), prefetch)

    return _signed(call, method)


def streaming_batches(
    method: Callable[Concatenate[A, P], S],
    batches: Callable[[S], AsyncIterator[Sequence[T]]],
    prefetch: int = default_loop.DEFAULT_PREFETCH,
) -> TwinMethod[A, P, Iterator[T]]:
    """:func:`streaming` for a method whose result also streams its items in sequences
    (``batches``, e.g. ``PlanStream.batches``): a sequence crosses from the loop per handoff,
    and the caller's iterator yields its items (the thread hop is paid per sequence)."""

    name = method.__name__

    def call(twin: Blocking[A], /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        bound = getattr(twin._aio, name)
        return default_loop.iterate_batches(lambda: batches(bound(*args, **kwargs)), prefetch)

    return _signed(call, method)


@overload
def forwarded(method: Callable[Concatenate[A, P], R]) -> TwinMethod[A, P, R]: ...
@overload
def forwarded(method: Callable[Concatenate[A, P], R], into: Callable[[R], W]) -> TwinMethod[A, P, W]: ...
def forwarded(
    method: Callable[Concatenate[A, P], R], into: Callable[[R], Any] | None = None
) -> TwinMethod[A, P, Any]:
    """A plain (non-async) method, called in the caller's thread; ``into`` wraps its result."""

    name = method.__name__

    def call(twin: Blocking[A], /, *args: P.args, **kwargs: P.kwargs) -> Any:
        result = getattr(twin._aio, name)(*args, **kwargs)
        return result if into is None else into(result)

    return _signed(call, method)


@overload
def function(fn: Callable[P, Coroutine[Any, Any, R]], into: Callable[[R], W]) -> Callable[P, W]: ...
@overload
def function(fn: Callable[P, R], into: Callable[[R], W]) -> Callable[P, W]: ...
def function(fn: Callable[P, Any], into: Callable[[Any], W]) -> Callable[P, W]:
    """A module-level function with ``fn``'s parameters, awaited on the loop when it is a
    coroutine function, whose result ``into`` wraps (``sync.load_table``, ``sync.connect``)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> W:
        result = fn(*args, **kwargs)
        return into(default_loop.run(result) if inspect.iscoroutine(result) else result)

    return _signed(call, fn)


class Attribute(Generic[T]):
    """A data attribute or property of the async object, read through: ``location = Attribute[str]()``.

    Its type is stated here; the typing test checks it against the async class's.
    """

    def __init__(self) -> None:
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, obj: Blocking[Any], owner: type | None = None) -> T: ...
    def __get__(self, obj: Blocking[Any] | None, owner: type | None = None) -> Self | T:
        if obj is None:
            return self
        value: T = getattr(obj._aio, self._name)
        return value


class AsyncBuilder(Protocol):
    """What an evolution builder offers (``UpdateSchema``, ``ManageSnapshots``...)."""

    async def commit(self) -> None: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


B = TypeVar("B", bound=AsyncBuilder)


class Pending(Blocking[B]):
    """The blocking face of a builder: ``with table.update_schema() as u: u.add_column(...)``.

    The block hands out the builder itself (its operations are plain methods) and commits
    on a clean exit; ``commit()`` does it without the block (``pending.aio`` builds).
    """

    def __enter__(self) -> B:
        return self.aio

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        default_loop.run(self.aio.__aexit__(exc_type, exc, tb))

    def commit(self) -> None:
        default_loop.run(self.aio.commit())
