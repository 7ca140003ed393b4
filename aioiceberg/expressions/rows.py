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


def _compile_predicate(pred: Predicate) -> RowFilter:
    get = pred.ref.get
    match pred.op:
        case Op.IS_NULL:
            return lambda row: get(row) is None
        case Op.NOT_NULL:
            return lambda row: get(row) is not None
        case Op.IS_NAN:
            return lambda row: _is_nan(get(row))
        case Op.NOT_NAN:
            return lambda row: not _is_nan(get(row))
    if isinstance(pred, SetPredicate):
        values = pred.values
        if pred.op is Op.IN:
            return lambda row: (v := get(row)) is not None and v in values
        return lambda row: (v := get(row)) is None or v not in values
    assert isinstance(pred, LiteralPredicate)
    lit = pred.value
    match pred.op:
        case Op.EQ:
            return lambda row: (v := get(row)) is not None and v == lit
        case Op.NOT_EQ:
            return lambda row: (v := get(row)) is None or v != lit
        case Op.LT:
            return lambda row: (v := get(row)) is not None and v < lit
        case Op.LT_EQ:
            return lambda row: (v := get(row)) is not None and v <= lit
        case Op.GT:
            return lambda row: (v := get(row)) is not None and v > lit
        case Op.GT_EQ:
            return lambda row: (v := get(row)) is not None and v >= lit
        case Op.STARTS_WITH:
            return lambda row: (v := get(row)) is not None and v.startswith(lit)
        case Op.NOT_STARTS_WITH:
            return lambda row: (v := get(row)) is None or not v.startswith(lit)
    raise ExpressionError(f"unknown predicate {pred!r}")


def compile_row_filter(expr: Expression) -> RowFilter:
    """Compile a bound expression into ``row -> bool``.

    NOT is pushed into the predicates first, so ``NOT (x < 5)`` means ``x >= 5`` and is
    false for a null ``x``, the same answer the metrics evaluators and projections give.
    """
    return compile_filter(rewrite_not(expr), _compile_predicate)


def evaluate(expr: Expression, row: Any) -> bool:
    """One-off evaluation; prefer ``compile_row_filter`` for many rows."""
    return compile_row_filter(expr)(row)
