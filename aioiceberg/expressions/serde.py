"""JSON form of row-filter expressions, as the REST catalog and Java's ExpressionParser use it.

A residual filter travels from the planner to the executor inside a serialized file scan
task, so the shape is the interoperable one: ``{"type": "eq", "term": "id", "value": 1}``,
``{"type": "and", "left": .., "right": ..}``, ``{"type": "not", "child": ..}``,
``{"type": "in", "term": "c", "values": [..]}``. Bound predicates write their column name
and their literals in the JSON single-value form of the column type, so decoding against
the same schema and binding again gives back the same bound tree.
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from aioiceberg.errors import ExpressionError, InvalidMetadataError, ValidationError
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
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
)
from aioiceberg.expressions.visitor import BooleanExpressionVisitor, visit
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import PrimitiveType
from aioiceberg.spec.values import from_json, to_json

__all__ = ["expression_from_json", "expression_to_json", "literal_to_json"]

# predicate classes by their JSON "type" (``Op`` values are Iceberg's JSON names)
_UNARY: dict[str, type[UnaryPredicate]] = {c.op.value: c for c in (IsNull, NotNull, IsNaN, NotNaN)}
_LITERAL: dict[str, type[LiteralPredicate]] = {
    c.op.value: c
    for c in (
        LessThan,
        LessThanOrEqual,
        GreaterThan,
        GreaterThanOrEqual,
        EqualTo,
        NotEqualTo,
        StartsWith,
        NotStartsWith,
    )
}
_SET: dict[str, type[SetPredicate]] = {c.op.value: c for c in (In, NotIn)}

# Jackson's spelling of non-finite doubles; values.from_json reads them back.
_NON_FINITE_TEXT = {math.inf: "Infinity", -math.inf: "-Infinity"}


# ---------------------------------------------------------------------------------------------
# Writing


class _ToJson(BooleanExpressionVisitor[dict[str, Any]]):
    __slots__ = ()

    def visit_true(self) -> dict[str, Any]:
        return {"type": "true"}

    def visit_false(self) -> dict[str, Any]:
        return {"type": "false"}

    def visit_not(self, child: dict[str, Any]) -> dict[str, Any]:
        return {"type": "not", "child": child}

    def visit_and(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        return {"type": "and", "left": left, "right": right}

    def visit_or(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        return {"type": "or", "left": left, "right": right}

    def visit_predicate(self, pred: Predicate) -> dict[str, Any]:
        return _predicate_to_json(pred)


_TO_JSON = _ToJson()


def expression_to_json(expr: Expression) -> dict[str, Any]:
    """The JSON object for ``expr`` (bound or unbound; the tree is written as is, not simplified).

    Constants are written as ``{"type": "true"}`` / ``{"type": "false"}`` (the REST spec's
    objects); readers here also accept the bare booleans Java and PyIceberg write.
    Raises ValidationError for a literal that has no JSON form, or a node that is no expression.
    """
    try:
        return visit(expr, _TO_JSON)
    except ExpressionError as e:
        raise ValidationError(f"cannot serialize expression {expr!r}") from e


def _predicate_to_json(pred: Predicate) -> dict[str, Any]:
    term = pred.term
    bound_type = term.type if isinstance(term, BoundReference) else None
    out: dict[str, Any] = {"type": pred.op.value, "term": term.name}
    if isinstance(pred, LiteralPredicate):
        out["value"] = literal_to_json(pred.value, bound_type)
    elif isinstance(pred, SetPredicate):
        out["values"] = [literal_to_json(v, bound_type) for v in _stable_order(pred.values)]
    elif not isinstance(pred, UnaryPredicate):
        raise ValidationError(f"cannot serialize predicate {pred!r}")
    return out


def _stable_order(values: Iterable[Any]) -> list[Any]:
    """Set literals in a deterministic order, so equal tasks serialize to equal text."""
    items = list(values)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, repr(v)))


def _finite_or_text(value: Any) -> Any:
    # Strict JSON has no NaN/Infinity tokens; write them as Jackson does.
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else _NON_FINITE_TEXT[value]
    return value


def literal_to_json(value: Any, type_: PrimitiveType | None = None) -> Any:
    """One literal: the JSON single-value form of ``type_`` when bound, else by Python type.

    Unbound literals follow Java's ``unboundLiteral``: numbers, strings and booleans as
    themselves, decimals as strings, uuids as text, bytes as hex; dates and times (which
    Java cannot hold unbound) as the ISO strings binding accepts.
    """
    if type_ is not None:
        return _finite_or_text(to_json(value, type_))
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return _finite_or_text(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValidationError(f"decimal literal {value} is not finite")
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, _dt.datetime):
        if value.utcoffset() is not None:
            value = value.astimezone(_dt.UTC)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, _dt.time):
        if value.utcoffset() is not None:
            raise ValidationError(f"time literal {value} has a zone; Iceberg times have none")
        return value.isoformat(timespec="microseconds")
    raise ValidationError(f"literal {value!r} of type {type(value).__name__} has no JSON form")


# ---------------------------------------------------------------------------------------------
# Reading


def expression_from_json(obj: Any, schema: Schema | None = None, *, what: str = "expression") -> Expression:
    """Decode an expression; the result is always unbound (bind it with ``bind``).

    Without ``schema`` literals stay as their JSON values (binding converts ISO strings,
    numbers and decimal strings, but not hex for binary columns). With ``schema`` each
    literal is decoded in the JSON single-value form of its column's type, as Java does, so
    a bound tree written by ``expression_to_json`` binds back to an equal tree; literals
    that do not fit that form (an unbound ``5`` for a date column) are kept raw for binding
    to judge. ``what`` names the object in errors. Malformed input raises
    InvalidMetadataError naming the path to the bad node.
    """
    return _expr(obj, schema, what)


def _expr(obj: Any, schema: Schema | None, where: str) -> Expression:
    if isinstance(obj, bool):  # Java and PyIceberg write constants as bare booleans
        return AlwaysTrue() if obj else AlwaysFalse()
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"{where}: expected a JSON object or boolean, got {_kind(obj)}")
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise InvalidMetadataError(f"{where}: missing or non-string 'type'")
    op = kind.lower().replace("_", "-")
    if op == "true":
        return AlwaysTrue()
    if op == "false":
        return AlwaysFalse()
    if op == "literal":  # Java also reads {"type": "literal", "value": true}
        value = obj.get("value")
        if not isinstance(value, bool):
            raise InvalidMetadataError(f"{where}: a literal expression needs a boolean 'value'")
        return AlwaysTrue() if value else AlwaysFalse()
    if op in ("and", "or"):
        left = _expr(_field(obj, "left", where), schema, f"{where}.left")
        right = _expr(_field(obj, "right", where), schema, f"{where}.right")
        return And(left, right) if op == "and" else Or(left, right)
    if op == "not":
        return Not(_expr(_field(obj, "child", where), schema, f"{where}.child"))
    if op in _UNARY or op in _LITERAL or op in _SET:
        return _predicate(op, obj, schema, where)
    raise InvalidMetadataError(f"{where}: unknown expression type {kind!r}")


def _predicate(op: str, obj: dict[str, Any], schema: Schema | None, where: str) -> Predicate:
    name = _term(_field(obj, "term", where), f"{where}.term")
    column_type = _column_type(schema, name)
    has_value, has_values = "value" in obj, "values" in obj
    if op in _UNARY:
        if has_value or has_values:
            raise InvalidMetadataError(f"{where}: {op} predicate must not have 'value' or 'values'")
        return _UNARY[op](name)
    if op in _LITERAL:
        if not has_value or has_values:
            raise InvalidMetadataError(f"{where}: {op} predicate needs 'value' and no 'values'")
        value = _literal(obj["value"], column_type, f"{where}.value")
        return _LITERAL[op](name, value)
    if not has_values or has_value:
        raise InvalidMetadataError(f"{where}: {op} predicate needs 'values' and no 'value'")
    items = obj["values"]
    if not isinstance(items, list):
        raise InvalidMetadataError(f"{where}.values: expected a JSON array, got {_kind(items)}")
    values = [_literal(v, column_type, f"{where}.values[{i}]") for i, v in enumerate(items)]
    return _SET[op](name, values)


def _term(obj: Any, where: str) -> str:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict) and obj.get("type") == "reference" and isinstance(obj.get("term"), str):
        return str(obj["term"])
    if isinstance(obj, dict) and obj.get("type") == "transform":
        raise InvalidMetadataError(f"{where}: transform terms are not supported in row filters")
    raise InvalidMetadataError(f"{where}: expected a column name, got {_kind(obj)}")


def _column_type(schema: Schema | None, name: str) -> PrimitiveType | None:
    """The column's type for decoding literals; None leaves them raw (binding reports the column)."""
    if schema is None:
        return None
    fid = schema.find_field_id(name)
    if fid is None:
        fid = schema.find_field_id(name, case_sensitive=False)
    if fid is None:
        return None
    t = schema.find_type(fid)
    return t if isinstance(t, PrimitiveType) else None


def _literal(obj: Any, column_type: PrimitiveType | None, where: str) -> Any:
    if isinstance(obj, dict) and "type" in obj:  # Java also reads {"type": "literal", "value": x}
        if str(obj["type"]).lower() != "literal" or "value" not in obj:
            raise InvalidMetadataError(f"{where}: expected a literal value, got {obj!r}")
        obj = obj["value"]
    if obj is None or not isinstance(obj, bool | int | float | str):
        raise InvalidMetadataError(f"{where}: expected a JSON string, number or boolean, got {_kind(obj)}")
    if column_type is not None:
        try:
            return from_json(obj, column_type)
        except InvalidMetadataError:
            pass  # an unbound literal in another form; binding converts or rejects it
    return obj


def _field(obj: dict[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise InvalidMetadataError(f"{where}: missing '{key}'")
    return obj[key]


def _kind(obj: Any) -> str:
    return "null" if obj is None else type(obj).__name__
