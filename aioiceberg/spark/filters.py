"""Spark data source filters -> Iceberg expressions.

Only filters whose Iceberg meaning equals Spark's are claimed as handled; the reader
applies them exactly (residuals), so Spark drops them from its own plan. A filter whose
Iceberg form keeps a superset of Spark's rows (a negation: Iceberg keeps nulls in
``a != 1``) is used for pruning and handed back to Spark as well. Filters Iceberg could
answer differently (``>`` on floats, where Spark orders NaN above everything) or cannot
express (suffix / substring matches, null-safe equality) stay in Spark untouched.
Dispatch is by class name so this module imports without pyspark.
"""

from __future__ import annotations

import datetime as dt
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
    if value is None:
        return False
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
        inner = _translate(f.child, schema, case_sensitive)
        if inner is None:
            return None
        # Iceberg's negations keep rows Spark drops (nulls): prune with it, let Spark re-check
        return not_(inner[0]), False
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
    cls = _COMPARISONS.get(kind)
    if cls is None or not _literal_ok(value, column_type):
        return None
    if is_float and kind in _NAN_SENSITIVE:
        return None
    return cls(name, value), True


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
