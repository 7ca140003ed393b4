"""Typed descriptors that make a blocking twin's members out of the async class's own.

A twin class names each member once, pointing at the async method (``append =
blocking(Table.append)``): the descriptor takes that method's parameters through a
``ParamSpec``, so mypy sees the twin's exact signature and it cannot drift from the
async one. Which returned objects become twins is said per member (``into=``), not
looked up at run time.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager
from types import MethodType, TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, cast, overload

from aioiceberg._sync import runner

__all__ = [
    "Attribute",
    "Blocking",
    "BlockingContext",
    "Method",
    "Pending",
    "blocking",
    "forwarded",
    "function",
    "streaming",
]

A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
W = TypeVar("W")

# How many tasks plan_files may run ahead of its consumer: tasks are small, and a deep
# queue hides the thread hop between the loop and the caller.
PLAN_PREFETCH = 256


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
        runner.run(_awaited(self.aio.__aenter__()))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return runner.run(_awaited(self.aio.__aexit__(exc_type, exc, tb)))


class Method(Generic[A, P, R]):
    """A twin method: calls the async class's method on the twin's object and finishes the
    result (await it on the loop, stream it, or hand it over) on the caller's behalf."""

    def __init__(
        self, method: Callable[Concatenate[A, P], Any], finish: Callable[[Callable[[], Any]], R]
    ) -> None:
        self._method = method
        self._finish = finish
        self.__name__ = getattr(method, "__name__", "method")
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name

    @property
    def __signature__(self) -> inspect.Signature:
        """The async method's signature: ``inspect`` and ``help()`` show the twin's real parameters."""
        return inspect.signature(self._method)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, obj: Blocking[A], owner: type | None = None) -> Callable[P, R]: ...
    def __get__(self, obj: Blocking[A] | None, owner: type | None = None) -> Self | Callable[P, R]:
        if obj is None:
            return self
        return cast(Callable[P, R], MethodType(self, obj))

    def __call__(self, twin: Blocking[A], /, *args: P.args, **kwargs: P.kwargs) -> R:
        aio = twin.aio
        return self._finish(lambda: self._method(aio, *args, **kwargs))


def _run(call: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return runner.run(call())


def _direct(call: Callable[[], T]) -> T:
    return call()


@overload
def blocking(method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]]) -> Method[A, P, R]: ...
@overload
def blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]], into: Callable[[R], W]
) -> Method[A, P, W]: ...
def blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]], into: Callable[[R], Any] | None = None
) -> Method[A, P, Any]:
    """The twin of a coroutine method: runs it on the background loop and waits; ``into``
    turns the result into its twin (an async Table into a blocking one)."""
    if into is None:
        return Method(method, _run)
    wrap = into
    return Method(method, lambda call: wrap(_run(call)))


def streaming(
    method: Callable[Concatenate[A, P], AsyncIterator[T]], prefetch: int = runner.DEFAULT_PREFETCH
) -> Method[A, P, Iterator[T]]:
    """The twin of an async-iterator method: a plain iterator that still streams (the async
    iterator is made and driven on the loop; closing the iterator early closes it there)."""
    return Method(method, lambda call: runner.iterate(call, prefetch))


@overload
def forwarded(method: Callable[Concatenate[A, P], R]) -> Method[A, P, R]: ...
@overload
def forwarded(method: Callable[Concatenate[A, P], R], into: Callable[[R], W]) -> Method[A, P, W]: ...
def forwarded(
    method: Callable[Concatenate[A, P], R], into: Callable[[R], Any] | None = None
) -> Method[A, P, Any]:
    """A plain (non-async) method, called in the caller's thread; ``into`` wraps its result."""
    if into is None:
        return Method(method, _direct)
    wrap = into
    return Method(method, lambda call: wrap(call()))


@overload
def function(fn: Callable[P, Coroutine[Any, Any, R]], into: Callable[[R], W]) -> Callable[P, W]: ...
@overload
def function(fn: Callable[P, R], into: Callable[[R], W]) -> Callable[P, W]: ...
def function(fn: Callable[P, Any], into: Callable[[Any], W]) -> Callable[P, W]:
    """A module-level function with ``fn``'s parameters, awaited on the loop when it is a
    coroutine function, whose result ``into`` wraps (``sync.load_table``, ``sync.connect``)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> W:
        result = fn(*args, **kwargs)
        return into(runner.run(result) if inspect.iscoroutine(result) else result)

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "function")
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


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
        value: T = getattr(obj.aio, self._name)
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
        runner.run(self.aio.__aexit__(exc_type, exc, tb))

    def commit(self) -> None:
        runner.run(self.aio.commit())
