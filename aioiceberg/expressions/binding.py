"""Bind an expression to a schema: resolve names to field ids and type the literals.

Binding also folds what the schema already decides: ``IS NULL`` on a required column
is false, ``IS NAN`` on a non-floating column is false (as PyIceberg does), and a
comparison with an integer outside the column's range is a constant (Java's and
PyIceberg's AboveMax/BelowMin rules), so later stages never see impossible literals.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
import uuid
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from aioiceberg.errors import ExpressionError, ValidationError
from aioiceberg.expressions.parser import parse
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    NotEqualTo,
    NotNull,
    NotStartsWith,
    Op,
    Predicate,
    Reference,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
    and_,
    in_,
    not_in,
)
from aioiceberg.expressions.visitor import ExpressionRewriter, is_bound, rewrite_not, visit
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import (
    date_to_days,
    decimal_to_unscaled,
    iso_to_value,
    time_to_micros,
    timestamp_to_micros,
    unscaled_to_decimal,
)

__all__ = [
    "bind",
    "bind_reference",
    "bind_row_filter",
    "convert_literal",
    "prepare_filter",
    "reject_null_rows",
    "struct_accessors",
]

_LONG_MIN, _LONG_MAX = LongType.min, LongType.max
_F32 = struct.Struct("<f")
_F32_MAX = 3.4028234663852886e38
_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*")


class _AboveMax:
    """A literal greater than every value of the column type."""


class _BelowMin:
    """A literal smaller than every value of the column type."""


ABOVE_MAX = _AboveMax()
BELOW_MIN = _BelowMin()


# ---------------------------------------------------------------------------------------------
# Name resolution


@lru_cache(maxsize=128)
def struct_accessors(struct: StructType) -> dict[int, tuple[tuple[int, ...], NestedField] | str]:
    """Field id to (position path, field) for fields reachable through structs only.

    Fields inside lists or maps map to the reason they cannot be bound: one row holds
    many of their values, so a row filter cannot test them.
    """
    out: dict[int, tuple[tuple[int, ...], NestedField] | str] = {}

    def unreachable(t: Any, why: str) -> None:
        if isinstance(t, StructType | ListType | MapType):
            for f in t.fields:
                out[f.field_id] = why
                unreachable(f.field_type, why)

    def visit(s: StructType, path: tuple[int, ...]) -> None:
        for pos, f in enumerate(s.fields):
            out[f.field_id] = ((*path, pos), f)
            if isinstance(f.field_type, StructType):
                visit(f.field_type, (*path, pos))
            elif isinstance(f.field_type, ListType | MapType):
                unreachable(f.field_type, f"it is inside the {f.field_type} column {f.name!r}")

    visit(struct, ())
    return out


def bind_reference(schema: Schema, name: str, case_sensitive: bool = True) -> BoundReference:
    """Resolve a (dotted) column name to a BoundReference; ExpressionError names what is wrong."""
    fid = schema.find_field_id(name, case_sensitive)
    if fid is None:
        hint = schema.did_you_mean(name, case_sensitive)
        raise ExpressionError(f"cannot bind filter: no column named {name!r} in the table schema{hint}")
    entry = struct_accessors(schema.as_struct).get(fid)
    if entry is None:
        raise ExpressionError(f"cannot bind filter: column {name!r} is not reachable")
    if isinstance(entry, str):
        raise ExpressionError(f"cannot filter on column {name!r}: {entry}")
    accessor, field = entry
    if not isinstance(field.field_type, PrimitiveType):
        raise ExpressionError(
            f"cannot filter on column {name!r}: it is a {field.field_type}, not a primitive value"
        )
    full_name = schema.find_column_name(fid) or name
    return BoundReference(fid, full_name, field.field_type, accessor, _never_null(schema.as_struct, accessor))


def _never_null(struct: StructType, accessor: tuple[int, ...]) -> bool:
    """The field at ``accessor`` and every struct around it are required: a required field
    inside an optional struct is NULL in the rows where the struct is."""
    fields = struct.fields
    for pos in accessor:
        field = fields[pos]
        if not field.required:
            return False
        if isinstance(field.field_type, StructType):
            fields = field.field_type.fields
    return True


# ---------------------------------------------------------------------------------------------
# Literal conversion


def _bad(value: Any, type_: PrimitiveType, why: str = "") -> ExpressionError:
    return ExpressionError(f"cannot use {value!r} as a {type_} value{': ' + why if why else ''}")


def _int_in_range(value: int, lo: int, hi: int) -> int | _AboveMax | _BelowMin:
    if value > hi:
        return ABOVE_MAX
    if value < lo:
        return BELOW_MIN
    return value


def convert_literal(value: Any, type_: PrimitiveType) -> Any:
    """Convert a filter literal to the project's value convention for ``type_``.

    Returns ABOVE_MAX / BELOW_MIN for numbers outside the type's range; raises
    ExpressionError for conversions that are impossible or would lose information.
    """
    if value is None:
        raise ExpressionError("null is not a comparable value; use IS NULL or IS NOT NULL")
    try:
        return _convert(value, type_)
    except ExpressionError:
        raise
    except ValidationError as e:
        raise _bad(value, type_, str(e)) from e
    except (ValueError, InvalidOperation, OverflowError) as e:
        raise _bad(value, type_) from e


def _convert(value: Any, t: PrimitiveType) -> Any:
    if isinstance(t, BooleanType):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise _bad(value, t)
    if isinstance(t, IntegerType | LongType):
        if isinstance(value, str) and _INT_TEXT.fullmatch(value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(value, t, "expected an integer")
        return _int_in_range(value, t.min, t.max)
    if isinstance(t, FloatType | DoubleType):
        if isinstance(value, bool):
            raise _bad(value, t)
        if isinstance(value, int | float | Decimal | str):
            f = float(value)
        else:
            raise _bad(value, t)
        if math.isnan(f):
            raise ExpressionError("NaN is not a comparable value; use IS NAN or IS NOT NAN")
        if isinstance(t, FloatType):
            if f > _F32_MAX and not math.isinf(f):
                return ABOVE_MAX
            if f < -_F32_MAX and not math.isinf(f):
                return BELOW_MIN
            # the column holds float32 values: compare with the float32 nearest the literal, as Java does
            f = _F32.unpack(_F32.pack(f))[0]
        return f
    if isinstance(t, DecimalType):
        if isinstance(value, bool):
            raise _bad(value, t)
        if isinstance(value, float):
            value = Decimal(repr(value))
        elif isinstance(value, int | str):
            value = Decimal(value.strip() if isinstance(value, str) else value)
        if not isinstance(value, Decimal) or not value.is_finite():
            raise _bad(value, t)
        try:
            unscaled = decimal_to_unscaled(value, t.scale)
        except ValidationError as e:
            raise _bad(value, t, f"it has more than {t.scale} fractional digits") from e
        limit = 10**t.precision
        if unscaled >= limit:
            return ABOVE_MAX
        if unscaled <= -limit:
            return BELOW_MIN
        return unscaled_to_decimal(unscaled, t.scale)
    if isinstance(t, DateType):
        if isinstance(value, str):
            return iso_to_value(value, t)
        if isinstance(value, _dt.datetime):
            raise _bad(value, t, "a datetime is not a date")
        if isinstance(value, _dt.date):
            return date_to_days(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return _int_in_range(value, IntegerType.min, IntegerType.max)
        raise _bad(value, t)
    if isinstance(t, TimeType):
        if isinstance(value, str):
            return iso_to_value(value, t)
        if isinstance(value, _dt.time):
            return time_to_micros(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _bad(value, t)
    if isinstance(t, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
        nanos = isinstance(t, TimestampNanoType | TimestamptzNanoType)
        utc = isinstance(t, TimestamptzType | TimestamptzNanoType)
        if isinstance(value, str):
            return iso_to_value(value, t)
        if isinstance(value, _dt.datetime):
            if utc and value.utcoffset() is None:
                raise _bad(value, t, "a naive datetime has no zone; use an aware one")
            if not utc and value.utcoffset() is not None:
                raise _bad(value, t, "the column has no time zone; use a naive datetime")
            micros = timestamp_to_micros(value)
            return _int_in_range(micros * 1000 if nanos else micros, _LONG_MIN, _LONG_MAX)
        if isinstance(value, _dt.date):
            micros = date_to_days(value) * 86_400_000_000
            return micros * 1000 if nanos else micros
        if isinstance(value, int) and not isinstance(value, bool):
            return _int_in_range(value, _LONG_MIN, _LONG_MAX)
        raise _bad(value, t)
    if isinstance(t, StringType):
        if isinstance(value, str):
            return value
        raise _bad(value, t, "expected a quoted string")
    if isinstance(t, UUIDType):
        if isinstance(value, uuid.UUID):
            return value
        if isinstance(value, str):
            return uuid.UUID(value.strip())
        if isinstance(value, bytes) and len(value) == 16:
            return uuid.UUID(bytes=value)
        raise _bad(value, t)
    if isinstance(t, FixedType):
        if isinstance(value, bytes | bytearray):
            if len(value) != t.length:
                raise _bad(value, t, f"expected {t.length} bytes, got {len(value)}")
            return bytes(value)
        raise _bad(value, t)
    if isinstance(t, BinaryType):
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        raise _bad(value, t)
    raise _bad(value, t, "the type has no comparable values")


# ---------------------------------------------------------------------------------------------
# Binding

# which constant a comparison with an out-of-range literal folds to
_ABOVE: dict[type[LiteralPredicate], Expression] = {
    LessThan: AlwaysTrue(),
    LessThanOrEqual: AlwaysTrue(),
    NotEqualTo: AlwaysTrue(),
    GreaterThan: AlwaysFalse(),
    GreaterThanOrEqual: AlwaysFalse(),
    EqualTo: AlwaysFalse(),
}
_BELOW: dict[type[LiteralPredicate], Expression] = {
    GreaterThan: AlwaysTrue(),
    GreaterThanOrEqual: AlwaysTrue(),
    NotEqualTo: AlwaysTrue(),
    LessThan: AlwaysFalse(),
    LessThanOrEqual: AlwaysFalse(),
    EqualTo: AlwaysFalse(),
}


def _bind_predicate(schema: Schema, pred: Predicate, case_sensitive: bool, sql: bool = False) -> Expression:
    term = pred.term
    if isinstance(term, BoundReference):
        raise ExpressionError(f"predicate is already bound: {pred}")
    assert isinstance(term, Reference)
    ref = bind_reference(schema, term.name, case_sensitive)
    t = ref.type

    if isinstance(pred, UnaryPredicate):
        if isinstance(pred, IsNull | NotNull):
            if ref.required:
                return AlwaysFalse() if isinstance(pred, IsNull) else AlwaysTrue()
            return pred.with_term(ref)
        if not isinstance(t, FloatType | DoubleType):
            return AlwaysFalse() if isinstance(pred, IsNaN) else _true_for_values(ref, sql)
        return pred.with_term(ref)

    if isinstance(pred, SetPredicate):
        values = []
        for v in pred.values:
            converted = _convert_for(pred, v, ref)
            if not isinstance(converted, _AboveMax | _BelowMin):
                values.append(converted)
        if isinstance(pred, In):
            return in_(ref, values)
        return not_in(ref, values) if values else _true_for_values(ref, sql)

    assert isinstance(pred, LiteralPredicate)
    if isinstance(pred, StartsWith | NotStartsWith):
        if not isinstance(t, StringType):
            raise ExpressionError(f"LIKE needs a string column; {ref.name!r} is {t}")
        if not isinstance(pred.value, str):
            raise ExpressionError(f"LIKE needs a string pattern, got {pred.value!r}")
        return pred.with_term(ref)
    converted = _convert_for(pred, pred.value, ref)
    if isinstance(converted, _AboveMax | _BelowMin):
        above = isinstance(converted, _AboveMax)
        folded = (_ABOVE if above else _BELOW)[type(pred)]
        return _beyond_range_sql(ref, type(pred), folded, above) if sql else folded
    return pred.with_value(ref, converted)


def _true_for_values(ref: BoundReference, sql: bool) -> Expression:
    """A predicate true for every value of ``ref``: SQL still calls it unknown for NULL."""
    return NotNull(ref) if sql and _nullable(ref) else AlwaysTrue()


def _beyond_range_sql(
    ref: BoundReference, pred: type[LiteralPredicate], folded: Expression, above: bool
) -> Expression:
    """SQL's answer for a comparison with a literal beyond every finite value of the type.

    "True for every value" is still unknown for NULL, and a float column holds the
    infinities, which lie beyond any finite literal: ``f < 1e39`` is ``f < +inf`` and
    ``f > 1e39`` is ``f = +inf`` (NaN fails both, as IEEE says).
    """
    if isinstance(ref.type, FloatType) and pred not in (EqualTo, NotEqualTo):
        inf = math.inf if above else -math.inf
        if isinstance(folded, AlwaysTrue):
            return LessThan(ref, inf) if above else GreaterThan(ref, inf)
        return EqualTo(ref, inf)
    return _true_for_values(ref, sql=True) if isinstance(folded, AlwaysTrue) else folded


def _convert_for(pred: Predicate, value: Any, ref: BoundReference) -> Any:
    try:
        return convert_literal(value, ref.type)
    except ExpressionError as e:
        raise ExpressionError(f"cannot bind {pred}: column {ref.name!r} is {ref.type}; {e}") from e


def bind(schema: Schema, expr: Expression | str, case_sensitive: bool = True) -> Expression:
    """Bind an expression (or a filter string) to ``schema``.

    Every predicate of the result holds a BoundReference and literals in the column's
    value convention; constants are folded. Raises ExpressionError naming the column
    when a name is missing or a literal cannot be converted.
    """
    if isinstance(expr, str):
        expr = parse(expr)
    return _bind(schema, expr, case_sensitive)


class _Bind(ExpressionRewriter):
    __slots__ = ("_case_sensitive", "_schema", "_sql")

    def __init__(self, schema: Schema, case_sensitive: bool, sql: bool) -> None:
        self._schema, self._case_sensitive, self._sql = schema, case_sensitive, sql

    def visit_predicate(self, pred: Predicate) -> Expression:
        return _bind_predicate(self._schema, pred, self._case_sensitive, self._sql)


def _bind(schema: Schema, expr: Expression, case_sensitive: bool, sql: bool = False) -> Expression:
    return visit(expr, _Bind(schema, case_sensitive, sql))


def prepare_filter(schema: Schema, expr: Expression | str, case_sensitive: bool = True) -> Expression:
    """``expr`` bound (unless it is already) with NOT pushed to the predicates: the form
    projections and evaluators start from."""
    if isinstance(expr, str) or not is_bound(expr):
        expr = bind(schema, expr, case_sensitive)
    return rewrite_not(expr)


# ---------------------------------------------------------------------------------------------
# SQL's rule for NULLs in row filters

# Iceberg's evaluators call these true for a null value; SQL calls them unknown.
_TRUE_ON_NULL = frozenset({Op.NOT_EQ, Op.NOT_IN, Op.NOT_STARTS_WITH, Op.NOT_NAN})


def bind_row_filter(schema: Schema, expr: Expression | str, case_sensitive: bool = True) -> Expression:
    """Bind a user's row filter so it is true exactly where SQL says it is true.

    Users write SQL-like filters and expect three-valued logic (as DuckDB, Spark SQL and
    Polars apply it): a row for which the filter is NULL is not returned, nor deleted.
    Iceberg's evaluators instead call ``!=``, ``NOT IN``, ``NOT LIKE`` and ``IS NOT NAN``
    true on a null value. ``reject_null_rows`` reconciles the two, so scans, residuals,
    metrics evaluators and row-level deletes all apply one rule.

    NOT is pushed to the predicates before binding, so that what binding folds (literals
    beyond the column type's range) is never negated afterwards: ``NOT (i = 2^40)`` on an
    int column is ``i IS NOT NULL``, not ``true``.
    """
    if isinstance(expr, str):
        expr = parse(expr)
    return reject_null_rows(_bind(schema, rewrite_not(expr), case_sensitive, sql=True))


def reject_null_rows(expr: Expression) -> Expression:
    """A bound expression rewritten to SQL's answer for NULLs (idempotent).

    NOT is pushed to the predicates (De Morgan holds in three-valued logic, and a NOT-free
    tree of AND / OR is true exactly when it is true with every unknown read as false);
    then each predicate true on null gets ``IS NOT NULL`` beside it. Pruning stays
    inclusive: the result matches a subset of the rows the Iceberg reading matches.
    """
    return visit(rewrite_not(expr), _NULL_SAFE)


def _nullable(ref: BoundReference) -> bool:
    return not ref.required  # bind_reference: False inside an optional struct


class _NullSafe(ExpressionRewriter):
    """Guards each predicate that is true on null with ``IS NOT NULL`` (on a NOT-free tree)."""

    def visit_and(self, left: Expression, right: Expression) -> Expression:
        if (
            isinstance(left, NotNull)
            and isinstance(right, And)
            and right.left == left
            and isinstance(right.right, Predicate)
            and right.right.op in _TRUE_ON_NULL
        ):
            return right  # the input held this guard already (x AND (x AND p) is x AND p)
        return and_(left, right)

    def visit_predicate(self, pred: Predicate) -> Expression:
        if pred.op in _TRUE_ON_NULL and _nullable(pred.ref):
            return And(NotNull(pred.ref), pred)
        return pred


_NULL_SAFE = _NullSafe()
