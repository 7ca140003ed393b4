"""Iceberg row filters -> Spark Column expressions, true on exactly the rows aioiceberg keeps.

When Spark reads a table's Parquet files itself (``aioiceberg.spark.read_table``), the
row filter that planning pruned files with must still drop rows, and the rows kept must
be the ones the Arrow reader keeps. The filter is bound as every read binds it
(``bind_row_filter``: SQL's three-valued logic), and each predicate is written the way
``expressions/arrow_filter.py`` writes it for Arrow, with Spark's differences spelt out: Spark
orders NaN above every number (so ``>`` and ``>=`` exclude NaN explicitly), and literals
are typed as the column is, timestamps from text so that no session time zone touches
them. A filter on a type Spark cannot compare exactly (uuid, fixed, time, nanoseconds)
is not translated: ``None``, and the caller reads through aioiceberg instead.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from aioiceberg.expressions.arrow_filter import field_paths, literal_scalar
from aioiceberg.expressions.tree import (
    BoundReference,
    Expression,
    LiteralPredicate,
    Op,
    Predicate,
    SetPredicate,
)
from aioiceberg.expressions.visitor import BooleanExpressionVisitor, rewrite_not, visit
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
)

__all__ = ["UntranslatableFilter", "spark_column_filter", "spark_type_name"]

_SIMPLE: dict[type[PrimitiveType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "bigint",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    TimestampType: "timestamp_ntz",
    TimestamptzType: "timestamp",
    StringType: "string",
    BinaryType: "binary",
}


class UntranslatableFilter(Exception):
    """The filter names a type or form Spark cannot evaluate exactly as aioiceberg does."""


def spark_type_name(t: PrimitiveType) -> str | None:
    """Spark SQL's name for a primitive Iceberg type it holds exactly, or None."""
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return _SIMPLE.get(type(t))


def _literal(value: Any, t: PrimitiveType) -> Any:
    from pyspark.sql import functions as F  # pyspark: optional (the spark extra)

    name = spark_type_name(t)
    if name is None:
        raise UntranslatableFilter(f"no exact Spark literal for type {t}")
    py = literal_scalar(value, t).as_py()
    if isinstance(t, TimestampType):
        assert isinstance(py, dt.datetime)
        return F.lit(py.isoformat(sep=" ")).cast(name)
    if isinstance(t, TimestamptzType):
        assert isinstance(py, dt.datetime)
        return F.lit(py.astimezone(dt.UTC).isoformat(sep=" ")).cast(name)
    if isinstance(t, DateType):
        return F.lit(py.isoformat()).cast(name)
    if isinstance(t, BinaryType):
        return F.lit(bytearray(py)).cast(name)
    return F.lit(py).cast(name)


class _ToColumn(BooleanExpressionVisitor[Any]):
    __slots__ = ("_paths",)

    def __init__(self, paths: dict[int, tuple[str, ...]]) -> None:
        self._paths = paths

    def visit_true(self) -> Any:
        from pyspark.sql import functions as F  # pyspark: optional (the spark extra)

        return F.lit(True)

    def visit_false(self) -> Any:
        from pyspark.sql import functions as F  # pyspark: optional (the spark extra)

        return F.lit(False)

    def visit_not(self, child: Any) -> Any:
        raise UntranslatableFilter("NOT must be pushed into the predicates first")

    def visit_and(self, left: Any, right: Any) -> Any:
        return left & right

    def visit_or(self, left: Any, right: Any) -> Any:
        return left | right

    def _column(self, ref: BoundReference) -> Any:
        from pyspark.sql import functions as F  # pyspark: optional (the spark extra)

        path = self._paths.get(ref.field_id) or tuple(ref.name.split("."))
        column = F.col("`" + path[0].replace("`", "``") + "`")
        for name in path[1:]:
            column = column.getField(name)
        return column

    def visit_predicate(self, pred: Predicate) -> Any:
        from pyspark.sql import functions as F  # pyspark: optional (the spark extra)

        ref = pred.ref
        if spark_type_name(ref.type) is None:
            raise UntranslatableFilter(f"no exact Spark comparison for {ref.name} ({ref.type})")
        col = self._column(ref)
        floating = isinstance(ref.type, FloatType | DoubleType)
        op = pred.op
        if op is Op.IS_NULL:
            return col.isNull()
        if op is Op.NOT_NULL:
            return col.isNotNull()
        if op is Op.IS_NAN:
            return F.isnan(col)
        if op is Op.NOT_NAN:
            return ~F.isnan(col) | col.isNull()
        if isinstance(pred, SetPredicate):
            found = col.isin([_literal(v, ref.type) for v in pred.values])
            # a null is in no set: Arrow's is_in says false, so NOT IN keeps it (as here)
            return found if op is Op.IN else (~found | col.isNull())
        assert isinstance(pred, LiteralPredicate)
        if op is Op.STARTS_WITH:
            return col.startswith(pred.value)
        if op is Op.NOT_STARTS_WITH:
            return ~col.startswith(pred.value) | col.isNull()
        lit = _literal(pred.value, ref.type)
        if op is Op.EQ:
            return col == lit
        if op is Op.NOT_EQ:
            return (col != lit) | col.isNull()
        if op is Op.LT:
            return col < lit
        if op is Op.LT_EQ:
            return col <= lit
        above = col > lit if op is Op.GT else col >= lit if op is Op.GT_EQ else None
        if above is None:
            raise UntranslatableFilter(f"no Spark form for {pred}")
        return above & ~F.isnan(col) if floating else above  # Spark orders NaN above every number


def spark_column_filter(schema: Schema, bound: Expression) -> Any:
    """A Spark Column true where ``bound`` (from ``bind_row_filter`` on ``schema``) keeps a row.

    Raises ``UntranslatableFilter`` when Spark cannot evaluate it exactly.
    """
    return visit(rewrite_not(bound), _ToColumn(field_paths(schema)))
