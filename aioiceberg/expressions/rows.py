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
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Expression,
    LiteralPredicate,
    Not,
    Or,
    Predicate,
    SetPredicate,
    rewrite_not,
)

__all__ = ["RowFilter", "compile_row_filter", "evaluate"]

RowFilter = Callable[[Any], bool]


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _compile_predicate(pred: Predicate) -> RowFilter:
    get = pred.ref.get
    op = pred.op
    if op == "is_null":
        return lambda row: get(row) is None
    if op == "not_null":
        return lambda row: get(row) is not None
    if op == "is_nan":
        return lambda row: _is_nan(get(row))
    if op == "not_nan":
        return lambda row: not _is_nan(get(row))
    if isinstance(pred, SetPredicate):
        values = pred.values
        if op == "in":
            return lambda row: (v := get(row)) is not None and v in values
        return lambda row: (v := get(row)) is None or v not in values
    assert isinstance(pred, LiteralPredicate)
    lit = pred.value
    if op == "eq":
        return lambda row: (v := get(row)) is not None and v == lit
    if op == "not_eq":
        return lambda row: (v := get(row)) is None or v != lit
    if op == "lt":
        return lambda row: (v := get(row)) is not None and v < lit
    if op == "lt_eq":
        return lambda row: (v := get(row)) is not None and v <= lit
    if op == "gt":
        return lambda row: (v := get(row)) is not None and v > lit
    if op == "gt_eq":
        return lambda row: (v := get(row)) is not None and v >= lit
    if op == "starts_with":
        return lambda row: (v := get(row)) is not None and v.startswith(lit)
    if op == "not_starts_with":
        return lambda row: (v := get(row)) is None or not v.startswith(lit)
    raise ExpressionError(f"unknown predicate {pred!r}")


def compile_row_filter(expr: Expression) -> RowFilter:
    """Compile a bound expression into ``row -> bool``.

    NOT is pushed into the predicates first, so ``NOT (x < 5)`` means ``x >= 5`` and is
    false for a null ``x``, the same answer the metrics evaluators and projections give.
    """
    return _compile(rewrite_not(expr))


def _compile(expr: Expression) -> RowFilter:
    if isinstance(expr, AlwaysTrue):
        return lambda row: True
    if isinstance(expr, AlwaysFalse):
        return lambda row: False
    if isinstance(expr, And):
        left, right = _compile(expr.left), _compile(expr.right)
        return lambda row: left(row) and right(row)
    if isinstance(expr, Or):
        left, right = _compile(expr.left), _compile(expr.right)
        return lambda row: left(row) or right(row)
    if isinstance(expr, Not):
        child = _compile(expr.child)
        return lambda row: not child(row)
    if isinstance(expr, Predicate):
        return _compile_predicate(expr)
    raise ExpressionError(f"cannot evaluate {expr!r}")


def evaluate(expr: Expression, row: Any) -> bool:
    """One-off evaluation; prefer ``compile_row_filter`` for many rows."""
    return compile_row_filter(expr)(row)
