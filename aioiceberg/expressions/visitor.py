"""One walk over a filter's boolean structure, and the small walks every module shares.

A ``BooleanExpressionVisitor[T]`` says what each node becomes given what its children
became; ``visit`` drives it, children before parents, left before right. Evaluators use
it to build their closures once (``compile_filter``), so evaluation never walks the tree.

``visit`` keeps its own stack instead of recursing, so a filter of thousands of ORed keys
(an upsert's match filter) is walked without reaching Python's recursion limit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    Expression,
    Not,
    Or,
    Predicate,
    and_,
    not_,
    or_,
)

__all__ = [
    "BooleanExpressionVisitor",
    "ExpressionRewriter",
    "compile_filter",
    "is_bound",
    "referenced_field_ids",
    "rewrite_not",
    "visit",
]

T = TypeVar("T")
X = TypeVar("X")


class BooleanExpressionVisitor(ABC, Generic[T]):
    """What each node of a filter becomes, given the results of its children."""

    __slots__ = ()

    @abstractmethod
    def visit_true(self) -> T: ...

    @abstractmethod
    def visit_false(self) -> T: ...

    @abstractmethod
    def visit_not(self, child: T) -> T: ...

    @abstractmethod
    def visit_and(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_or(self, left: T, right: T) -> T: ...

    @abstractmethod
    def visit_predicate(self, pred: Predicate) -> T:
        """A bound or unbound predicate (``pred.term`` says which); ``pred.op`` names the test."""


# on visit's stack, below a connective's children: the connective itself, to combine them
_COMBINE = object()


def visit(expr: Expression, visitor: BooleanExpressionVisitor[T]) -> T:
    """Apply ``visitor`` to ``expr``, post-order; ExpressionError for a node it does not know."""
    if isinstance(expr, Predicate):
        return visitor.visit_predicate(expr)
    results: list[T] = []
    stack: list[Any] = [expr]
    push, pop, put = stack.append, stack.pop, results.append
    while stack:
        node = pop()
        if node is _COMBINE:
            node = pop()
            if isinstance(node, Not):
                put(visitor.visit_not(results.pop()))
                continue
            right = results.pop()
            left = results.pop()
            put(visitor.visit_and(left, right) if isinstance(node, And) else visitor.visit_or(left, right))
        elif isinstance(node, Predicate):
            put(visitor.visit_predicate(node))
        elif isinstance(node, And | Or):
            push(node)
            push(_COMBINE)
            push(node.right)
            push(node.left)
        elif isinstance(node, Not):
            push(node)
            push(_COMBINE)
            push(node.child)
        elif isinstance(node, AlwaysTrue):
            put(visitor.visit_true())
        elif isinstance(node, AlwaysFalse):
            put(visitor.visit_false())
        else:
            raise ExpressionError(f"not a filter expression: {node!r}")
    return results[0]


class ExpressionRewriter(BooleanExpressionVisitor[Expression]):
    """Rebuild the tree, folding constants as ``and_`` / ``or_`` / ``not_`` do.

    Subclasses replace what they rewrite (usually predicates); the rest is kept.
    """

    __slots__ = ()

    def visit_true(self) -> Expression:
        return AlwaysTrue()

    def visit_false(self) -> Expression:
        return AlwaysFalse()

    def visit_not(self, child: Expression) -> Expression:
        return not_(child)

    def visit_and(self, left: Expression, right: Expression) -> Expression:
        return and_(left, right)

    def visit_or(self, left: Expression, right: Expression) -> Expression:
        return or_(left, right)

    def visit_predicate(self, pred: Predicate) -> Expression:
        return pred


class _Negate(BooleanExpressionVisitor[Expression]):
    """NOT of a NOT-free tree by De Morgan (``Expression.negate`` without its recursion)."""

    __slots__ = ()

    def visit_true(self) -> Expression:
        return AlwaysFalse()

    def visit_false(self) -> Expression:
        return AlwaysTrue()

    def visit_not(self, child: Expression) -> Expression:
        raise AssertionError("_Negate walks NOT-free trees only")

    def visit_and(self, left: Expression, right: Expression) -> Expression:
        return Or(left, right)

    def visit_or(self, left: Expression, right: Expression) -> Expression:
        return And(left, right)

    def visit_predicate(self, pred: Predicate) -> Expression:
        return pred.negate()


_NEGATE = _Negate()


class _RewriteNot(ExpressionRewriter):
    __slots__ = ()

    def visit_not(self, child: Expression) -> Expression:
        # post-order: the child is NOT-free already
        return visit(child, _NEGATE)


_REWRITE_NOT = _RewriteNot()


def rewrite_not(expr: Expression) -> Expression:
    """Push every ``Not`` down to the predicates (which negate exactly), folding constants.

    Projections and metrics evaluators need NOT-free trees: "cannot decide" must mean
    the same thing (may match) at every level.
    """
    return visit(expr, _REWRITE_NOT)


class _IsBound(BooleanExpressionVisitor[bool]):
    def visit_true(self) -> bool:
        return True

    def visit_false(self) -> bool:
        return True

    def visit_not(self, child: bool) -> bool:
        return child

    def visit_and(self, left: bool, right: bool) -> bool:
        return left and right

    def visit_or(self, left: bool, right: bool) -> bool:
        return left and right

    def visit_predicate(self, pred: Predicate) -> bool:
        return isinstance(pred.term, BoundReference)


_IS_BOUND = _IsBound()


def is_bound(expr: Expression) -> bool:
    """True when every predicate in ``expr`` refers to a ``BoundReference``."""
    return visit(expr, _IS_BOUND)


class _FieldIds(BooleanExpressionVisitor[frozenset[int]]):
    def visit_true(self) -> frozenset[int]:
        return frozenset()

    def visit_false(self) -> frozenset[int]:
        return frozenset()

    def visit_not(self, child: frozenset[int]) -> frozenset[int]:
        return child

    def visit_and(self, left: frozenset[int], right: frozenset[int]) -> frozenset[int]:
        return left | right

    def visit_or(self, left: frozenset[int], right: frozenset[int]) -> frozenset[int]:
        return left | right

    def visit_predicate(self, pred: Predicate) -> frozenset[int]:
        term = pred.term
        return frozenset((term.field_id,)) if isinstance(term, BoundReference) else frozenset()


_FIELD_IDS = _FieldIds()


def referenced_field_ids(expr: Expression) -> frozenset[int]:
    """The field ids the bound predicates of ``expr`` test (unbound ones name no id)."""
    return visit(expr, _FIELD_IDS)


_Fn = Callable[..., Any]


def chain_terms(
    kind: str, left: Callable[..., Any], right: Callable[..., Any]
) -> tuple[Callable[..., Any], ...]:
    """The operands of a run of one connective, flattened: a compiled AND (OR) remembers its
    operands under ``kind``, so a chain of thousands (an upsert's ORed keys) compiles to one
    loop instead of closures nested as deep as the chain (which overflow the stack)."""
    return (*getattr(left, kind, (left,)), *getattr(right, kind, (right,)))


def _all_of(terms: tuple[Callable[[X], bool], ...]) -> Callable[[X], bool]:
    if len(terms) == 2:
        left, right = terms
        fn: Callable[[X], bool] = lambda x: left(x) and right(x)  # noqa: E731
    else:

        def fn(x: X) -> bool:
            for t in terms:
                if not t(x):
                    return False
            return True

    setattr(fn, "all_of", terms)  # noqa: B010
    return fn


def _any_of(terms: tuple[Callable[[X], bool], ...]) -> Callable[[X], bool]:
    if len(terms) == 2:
        left, right = terms
        fn: Callable[[X], bool] = lambda x: left(x) or right(x)  # noqa: E731
    else:

        def fn(x: X) -> bool:
            for t in terms:
                if t(x):
                    return True
            return False

    setattr(fn, "any_of", terms)  # noqa: B010
    return fn


class _Compile(BooleanExpressionVisitor[Callable[[X], bool]]):
    __slots__ = ("_leaf",)

    def __init__(self, leaf: Callable[[Predicate], Callable[[X], bool]]) -> None:
        self._leaf = leaf

    def visit_true(self) -> Callable[[X], bool]:
        return _always_true

    def visit_false(self) -> Callable[[X], bool]:
        return _always_false

    def visit_not(self, child: Callable[[X], bool]) -> Callable[[X], bool]:
        raise ExpressionError("NOT must be pushed into the predicates (rewrite_not) before compiling")

    def visit_and(self, left: Callable[[X], bool], right: Callable[[X], bool]) -> Callable[[X], bool]:
        return _all_of(chain_terms("all_of", left, right))

    def visit_or(self, left: Callable[[X], bool], right: Callable[[X], bool]) -> Callable[[X], bool]:
        return _any_of(chain_terms("any_of", left, right))

    def visit_predicate(self, pred: Predicate) -> Callable[[X], bool]:
        return self._leaf(pred)


def _always_true(_: Any) -> bool:
    return True


def _always_false(_: Any) -> bool:
    return False


def compile_filter(expr: Expression, leaf: Callable[[Predicate], Callable[[X], bool]]) -> Callable[[X], bool]:
    """``expr`` (NOT-free) as one closure over ``X``, with ``leaf`` compiling each predicate.

    The tree is walked here, once; calling the result only calls closures.
    """
    return visit(expr, _Compile(leaf))
