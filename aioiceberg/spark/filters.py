"""Spark data source filters -> Iceberg expressions.

Only filters whose Iceberg meaning equals Spark's are claimed as handled; the reader
applies them exactly (residuals), so Spark drops them from its own plan. A negation is
written with SQL's rule for NULLs (``NOT (a = 1)`` drops a null ``a``: ``a != 1 AND a IS
NOT NULL``). Filters Iceberg could answer differently (``>`` and negations on floats,
where Spark orders NaN above every number; a NaN literal; ``NOT (a <=> v)``) or cannot
express (suffix / substring matches) stay in Spark untouched.
Dispatch is by class name so this module imports without pyspark.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aioiceberg.errors import IcebergError
from aioiceberg.expressions import (
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    IsNull,
    LessThan,
    LessThanOrEqual,
    NotNull,
    StartsWith,
    and_,
    bind,
    in_,
    not_,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    DoubleType,
    FloatType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
)

__all__ = ["Translation", "translate_filter"]

_COMPARISONS: dict[str, type[Any]] = {
    "EqualTo": EqualTo,
    "GreaterThan": GreaterThan,
    "GreaterThanOrEqual": GreaterThanOrEqual,
    "LessThan": LessThan,
    "LessThanOrEqual": LessThanOrEqual,
}
# Spark sorts NaN above every number, so these keep NaN rows in Spark and drop them in Iceberg.
_NAN_SENSITIVE = frozenset({"GreaterThan", "GreaterThanOrEqual"})


@dataclass(frozen=True)
class Translation:
    """``expression`` to plan with; ``exact`` when Spark need not evaluate the filter again."""

    expression: Expression
    exact: bool


def _column(attribute: Sequence[str]) -> str:
    return ".".join(attribute)


def _literal_ok(value: Any, column_type: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False  # Spark's NaN equals NaN; Iceberg wants is_nan for it
    if isinstance(value, dt.datetime):
        aware = value.utcoffset() is not None
        if isinstance(column_type, TimestamptzType | TimestamptzNanoType):
            return aware
        if isinstance(column_type, TimestampType | TimestampNanoType):
            return not aware
    return True


def _translate(f: Any, schema: Schema, case_sensitive: bool) -> tuple[Expression, bool] | None:
    kind = type(f).__name__
    if kind == "Not":
        return _negate(f.child, schema, case_sensitive)
    attribute = getattr(f, "attribute", None)
    if attribute is None:
        return None
    name = _column(attribute)
    try:
        field = schema.find_field(name, case_sensitive=case_sensitive)
    except (IcebergError, KeyError, ValueError):
        return None
    column_type = field.field_type
    is_float = isinstance(column_type, FloatType | DoubleType)
    if kind == "IsNull":
        return IsNull(name), True
    if kind == "IsNotNull":
        return NotNull(name), True
    value = getattr(f, "value", None)
    if kind == "In":
        values = tuple(value or ())
        if not values or not all(_literal_ok(v, column_type) for v in values):
            return None
        return in_(name, values), True
    if kind == "StringStartsWith":
        return (StartsWith(name, value), True) if isinstance(value, str) else None
    if kind == "EqualNullSafe":  # ``a <=> v`` is ``a = v`` for a non-null v (null rows: false)
        kind = "EqualTo"
    cls = _COMPARISONS.get(kind)
    if cls is None or not _literal_ok(value, column_type):
        return None
    if is_float and kind in _NAN_SENSITIVE:
        return None
    return cls(name, value), True


def _negate(child: Any, schema: Schema, case_sensitive: bool) -> tuple[Expression, bool] | None:
    """``NOT child`` as Spark means it: false, not true, where ``child`` is NULL.

    Nothing inexact is pushed: the reader applies every pushed filter to rows, so a form
    that kept fewer rows than Spark's (NaN on floats, nulls in ``NOT (a <=> v)``) would lose
    them, and Spark would never see them to check again.
    """
    kind = type(child).__name__
    if kind == "Not":  # three-valued logic: NOT NOT x is x
        return _translate(child.child, schema, case_sensitive)
    if kind == "EqualNullSafe":
        return None  # true on a null ``a``; SQL's ``a != v`` is not
    found = _translate(child, schema, case_sensitive)
    if found is None or not found[1]:
        return None
    expression = found[0]
    if kind in ("IsNull", "IsNotNull"):
        return not_(expression), True  # never NULL itself
    name = _column(child.attribute)
    if isinstance(schema.find_field(name, case_sensitive=case_sensitive).field_type, FloatType | DoubleType):
        return None  # Spark orders NaN above every number: ``NOT (v < 1)`` keeps NaN rows
    # the other filters are NULL exactly where the column is
    return and_(not_(expression), NotNull(name)), True


def translate_filter(f: Any, schema: Schema, case_sensitive: bool = False) -> Translation | None:
    """The Iceberg form of one Spark filter, or None when it must stay in Spark.

    The result is checked by binding it to ``schema`` (unknown column, literal of the
    wrong type): anything that does not bind is not pushed.
    """
    try:
        found = _translate(f, schema, case_sensitive)
        if found is None:
            return None
        expression, exact = found
        bind(schema, expression, case_sensitive)
    except (IcebergError, ValueError, TypeError, OverflowError):
        return None
    return Translation(expression, exact)
