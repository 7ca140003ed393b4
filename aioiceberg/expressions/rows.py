"""Evaluate a bound expression on one row (a tuple, nested tuples for structs).

Used for partition tuples (pruning and residuals) and as the reference semantics in
tests. The expression is compiled once into closures, so the result is stateless
and can be shared. Semantics follow Iceberg: comparisons with null (and with NaN)
are false; ``!=``, ``NOT IN``, ``NOT LIKE`` and ``IS NOT NAN`` are true for null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions.tree import Expression, LiteralPredicate, Op, Predicate, SetPredicate
from aioiceberg.expressions.visitor import compile_filter, rewrite_not

__all__ = ["RowFilter", "compile_row_filter", "evaluate"]

RowFilter = Callable[[Any], bool]


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


Getter = Callable[[Any], Any]

# each test as a closure over the column's getter (and the literal): one lookup by Op picks it
_UNARY: dict[Op, Callable[[Getter], RowFilter]] = {
    Op.IS_NULL: lambda get: lambda row: get(row) is None,
    Op.NOT_NULL: lambda get: lambda row: get(row) is not None,
    Op.IS_NAN: lambda get: lambda row: _is_nan(get(row)),
    Op.NOT_NAN: lambda get: lambda row: not _is_nan(get(row)),
}
_WITH_LITERAL: dict[Op, Callable[[Getter, Any], RowFilter]] = {
    Op.EQ: lambda get, lit: lambda row: (v := get(row)) is not None and v == lit,
    Op.NOT_EQ: lambda get, lit: lambda row: (v := get(row)) is None or v != lit,
    Op.LT: lambda get, lit: lambda row: (v := get(row)) is not None and v < lit,
    Op.LT_EQ: lambda get, lit: lambda row: (v := get(row)) is not None and v <= lit,
    Op.GT: lambda get, lit: lambda row: (v := get(row)) is not None and v > lit,
    Op.GT_EQ: lambda get, lit: lambda row: (v := get(row)) is not None and v >= lit,
    Op.STARTS_WITH: lambda get, lit: lambda row: (v := get(row)) is not None and v.startswith(lit),
    Op.NOT_STARTS_WITH: lambda get, lit: lambda row: (v := get(row)) is None or not v.startswith(lit),
    Op.IN: lambda get, values: lambda row: (v := get(row)) is not None and v in values,
    Op.NOT_IN: lambda get, values: lambda row: (v := get(row)) is None or v not in values,
}


def _compile_predicate(pred: Predicate) -> RowFilter:
    get = pred.ref.get
    if isinstance(pred, LiteralPredicate):
        return _WITH_LITERAL[pred.op](get, pred.value)
    if isinstance(pred, SetPredicate):
        return _WITH_LITERAL[pred.op](get, pred.values)
    unary = _UNARY.get(pred.op)
    if unary is None:
        raise ExpressionError(f"unknown predicate {pred!r}")
    return unary(get)


def compile_row_filter(expr: Expression) -> RowFilter:
    """Compile a bound expression into ``row -> bool``.

    NOT is pushed into the predicates first, so ``NOT (x < 5)`` means ``x >= 5`` and is
    false for a null ``x``, the same answer the metrics evaluators and projections give.
    """
    return compile_filter(rewrite_not(expr), _compile_predicate)


def evaluate(expr: Expression, row: Any) -> bool:
    """One-off evaluation; prefer ``compile_row_filter`` for many rows."""
    return compile_row_filter(expr)(row)
