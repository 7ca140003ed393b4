"""The row-filter expression tree: constants, boolean connectives and predicates.

Nodes are immutable and hashable so that evaluators built from them can be cached
and shared. A predicate holds either a ``Reference`` (a column name, unbound) or a
``BoundReference`` (field id, type and the position path into a row); binding is
the only way from the first to the second. Negated predicates (``!=``, ``NOT IN``,
``NOT LIKE``, ``IS NOT NAN``) are true for null values, as in Iceberg. Walks over
the tree go through ``visitor.visit``.
"""

from __future__ import annotations

import datetime as _dt
import re
import uuid
from collections.abc import Iterable
from decimal import Decimal
from enum import Enum
from typing import Any, ClassVar

from aioiceberg.spec.types import (
    DateType,
    PrimitiveType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

__all__ = [
    "LOWER_LIMIT_OPS",
    "UPPER_LIMIT_OPS",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BoundReference",
    "EqualTo",
    "Expression",
    "GreaterThan",
    "GreaterThanOrEqual",
    "In",
    "IsNaN",
    "IsNull",
    "LessThan",
    "LessThanOrEqual",
    "LiteralPredicate",
    "Not",
    "NotEqualTo",
    "NotIn",
    "NotNaN",
    "NotNull",
    "NotStartsWith",
    "Op",
    "Or",
    "Predicate",
    "Reference",
    "SetPredicate",
    "StartsWith",
    "Term",
    "UnaryPredicate",
    "and_",
    "format_literal",
    "in_",
    "not_",
    "not_in",
    "or_",
]


class _Frozen:
    """Immutable by assignment; subclasses compare and hash by ``_key()``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple[Any, ...]:
        return ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(k) for k in self._key())})"


class Expression(_Frozen):
    """Base of every boolean expression node. ``&``, ``|`` and ``~`` build simplified trees."""

    __slots__ = ()

    def negate(self) -> Expression:
        raise NotImplementedError

    def __and__(self, other: Expression) -> Expression:
        return and_(self, other)

    def __or__(self, other: Expression) -> Expression:
        return or_(self, other)

    def __invert__(self) -> Expression:
        return not_(self)


class AlwaysTrue(Expression):
    __slots__ = ()

    def negate(self) -> Expression:
        return AlwaysFalse()

    def __str__(self) -> str:
        return "true"


class AlwaysFalse(Expression):
    __slots__ = ()

    def negate(self) -> Expression:
        return AlwaysTrue()

    def __str__(self) -> str:
        return "false"


class And(Expression):
    __slots__ = ("left", "right")
    left: Expression
    right: Expression

    def __init__(self, left: Expression, right: Expression) -> None:
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)

    def _key(self) -> tuple[Any, ...]:
        return tuple(chain_of(self, And))

    def negate(self) -> Expression:
        return _chained(Or, [term.negate() for term in chain_of(self, And)])

    def __str__(self) -> str:
        return " AND ".join(_paren(term, Or) for term in chain_of(self, And))


class Or(Expression):
    __slots__ = ("left", "right")
    left: Expression
    right: Expression

    def __init__(self, left: Expression, right: Expression) -> None:
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)

    def _key(self) -> tuple[Any, ...]:
        return tuple(chain_of(self, Or))

    def negate(self) -> Expression:
        return _chained(And, [term.negate() for term in chain_of(self, Or)])

    def __str__(self) -> str:
        return " OR ".join(str(term) for term in chain_of(self, Or))


class Not(Expression):
    __slots__ = ("child",)
    child: Expression

    def __init__(self, child: Expression) -> None:
        object.__setattr__(self, "child", child)

    def _key(self) -> tuple[Any, ...]:
        return (self.child,)

    def negate(self) -> Expression:
        return self.child

    def __str__(self) -> str:
        if isinstance(self.child, Predicate):
            return f"NOT {self.child}"
        return f"NOT ({self.child})"


def _paren(expr: Expression, kind: Any) -> str:
    return f"({expr})" if isinstance(expr, kind) else str(expr)


def chain_of(expr: Expression, kind: type[And] | type[Or]) -> list[Expression]:
    """The terms of a chain of one connective, left to right, walked without recursion.

    An upsert's key filter ORs thousands of keys: comparing, hashing, printing or negating
    it one nested call per term would pass the recursion limit. A chain is compared by its
    terms, so how it was grouped does not matter (``a AND (b AND c)`` equals ``(a AND b) AND c``).
    """
    terms: list[Expression] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is kind:
            stack.append(node.right)  # type: ignore[attr-defined]
            stack.append(node.left)  # type: ignore[attr-defined]
        else:
            terms.append(node)
    return terms


def _chained(kind: type[And] | type[Or], terms: list[Expression]) -> Expression:
    result = terms[0]
    for term in terms[1:]:
        result = kind(result, term)
    return result


# ---------------------------------------------------------------------------------------------
# Terms

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "nan", "like", "true", "false", "between"})


def _quote_name(name: str) -> str:
    parts = name.split(".")
    if all(_PLAIN_NAME.fullmatch(p) and p.lower() not in _KEYWORDS for p in parts):
        return name
    return '"' + name.replace('"', '""') + '"'


class Reference(_Frozen):
    """An unbound column reference by (dotted) name."""

    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def _key(self) -> tuple[Any, ...]:
        return (self.name,)

    def __str__(self) -> str:
        return _quote_name(self.name)


class BoundReference(_Frozen):
    """A column resolved against a schema (or a partition struct).

    ``accessor`` is the path of positions from the row's top-level struct down to the
    field (one element for a top-level column), so evaluators read values without names.
    ``required`` means the value is never NULL in a row: the field and every struct
    around it are required.
    """

    __slots__ = ("accessor", "field_id", "name", "required", "type")
    field_id: int
    name: str
    type: PrimitiveType
    accessor: tuple[int, ...]
    required: bool

    def __init__(
        self,
        field_id: int,
        name: str,
        type: PrimitiveType,
        accessor: tuple[int, ...],
        required: bool = False,
    ) -> None:
        object.__setattr__(self, "field_id", field_id)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "accessor", tuple(accessor))
        object.__setattr__(self, "required", required)

    def _key(self) -> tuple[Any, ...]:
        return (self.field_id, self.name, self.type, self.accessor, self.required)

    @property
    def position(self) -> int:
        """Position of the (top-level) field in the row tuple."""
        return self.accessor[0]

    def get(self, row: Any) -> Any:
        """The value at this reference in a row of nested tuples (None through null structs)."""
        value = row
        for pos in self.accessor:
            if value is None:
                return None
            value = value[pos]
        return value

    def __str__(self) -> str:
        return _quote_name(self.name)


Term = Reference | BoundReference


def _to_term(term: str | Term) -> Term:
    if isinstance(term, str):
        return Reference(term)
    if isinstance(term, Reference | BoundReference):
        return term
    raise TypeError(f"expected a column name or reference, got {term!r}")


# ---------------------------------------------------------------------------------------------
# Predicates


class Op(Enum):
    """A predicate's test; the value is its name in Iceberg's JSON form (REST, Java)."""

    IS_NULL = "is-null"
    NOT_NULL = "not-null"
    IS_NAN = "is-nan"
    NOT_NAN = "not-nan"
    LT = "lt"
    LT_EQ = "lt-eq"
    GT = "gt"
    GT_EQ = "gt-eq"
    EQ = "eq"
    NOT_EQ = "not-eq"
    STARTS_WITH = "starts-with"
    NOT_STARTS_WITH = "not-starts-with"
    IN = "in"
    NOT_IN = "not-in"

    # members are singletons compared by identity; Enum's own hash (of the name, in Python)
    # costs more than the set and dict lookups that compile filters
    __hash__ = object.__hash__


# comparisons whose literal is an upper limit on the value (x < v, x <= v, x = v): a column's
# lower bound can refute them and its upper bound prove them; and the other way round
UPPER_LIMIT_OPS = frozenset({Op.LT, Op.LT_EQ, Op.EQ})
LOWER_LIMIT_OPS = frozenset({Op.GT, Op.GT_EQ, Op.EQ})


class Predicate(Expression):
    """A test on one column; ``op`` names the test, so that visitors need not ask the class."""

    __slots__ = ("term",)
    op: ClassVar[Op]
    term: Term

    def __init__(self, term: str | Term) -> None:
        object.__setattr__(self, "term", _to_term(term))

    def _key(self) -> tuple[Any, ...]:
        return (self.term,)

    @property
    def ref(self) -> BoundReference:
        """The bound reference; only valid on bound predicates."""
        term = self.term
        if not isinstance(term, BoundReference):
            raise TypeError(f"predicate is not bound: {self}")
        return term

    def with_term(self, term: Term) -> Predicate:
        """The same test on another column (used by binding and projection)."""
        return type(self)(term)

    def negate(self) -> Expression:
        return _NEGATION[type(self)](self.term, *self._key()[1:])  # type: ignore[call-arg]

    def _literal_type(self) -> PrimitiveType | None:
        return self.term.type if isinstance(self.term, BoundReference) else None


class UnaryPredicate(Predicate):
    __slots__ = ()
    _text: ClassVar[str] = ""

    def __str__(self) -> str:
        return f"{self.term} {self._text}"


class IsNull(UnaryPredicate):
    __slots__ = ()
    op = Op.IS_NULL
    _text = "IS NULL"


class NotNull(UnaryPredicate):
    __slots__ = ()
    op = Op.NOT_NULL
    _text = "IS NOT NULL"


class IsNaN(UnaryPredicate):
    __slots__ = ()
    op = Op.IS_NAN
    _text = "IS NAN"


class NotNaN(UnaryPredicate):
    __slots__ = ()
    op = Op.NOT_NAN
    _text = "IS NOT NAN"


class LiteralPredicate(Predicate):
    __slots__ = ("value",)
    _text: ClassVar[str] = ""
    value: Any

    def __init__(self, term: str | Term, value: Any) -> None:
        super().__init__(term)
        object.__setattr__(self, "value", value)

    def _key(self) -> tuple[Any, ...]:
        return (self.term, self.value)

    def with_term(self, term: Term) -> Predicate:
        return type(self)(term, self.value)

    def with_value(self, term: Term, value: Any) -> LiteralPredicate:
        return type(self)(term, value)

    def __str__(self) -> str:
        return f"{self.term} {self._text} {format_literal(self.value, self._literal_type())}"


class EqualTo(LiteralPredicate):
    __slots__ = ()
    op = Op.EQ
    _text = "="


class NotEqualTo(LiteralPredicate):
    __slots__ = ()
    op = Op.NOT_EQ
    _text = "!="


class LessThan(LiteralPredicate):
    __slots__ = ()
    op = Op.LT
    _text = "<"


class LessThanOrEqual(LiteralPredicate):
    __slots__ = ()
    op = Op.LT_EQ
    _text = "<="


class GreaterThan(LiteralPredicate):
    __slots__ = ()
    op = Op.GT
    _text = ">"


class GreaterThanOrEqual(LiteralPredicate):
    __slots__ = ()
    op = Op.GT_EQ
    _text = ">="


def _like_pattern(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return format_literal(escaped + "%", None)


class StartsWith(LiteralPredicate):
    __slots__ = ()
    op = Op.STARTS_WITH

    def __str__(self) -> str:
        return f"{self.term} LIKE {_like_pattern(str(self.value))}"


class NotStartsWith(LiteralPredicate):
    __slots__ = ()
    op = Op.NOT_STARTS_WITH

    def __str__(self) -> str:
        return f"{self.term} NOT LIKE {_like_pattern(str(self.value))}"


class SetPredicate(Predicate):
    __slots__ = ("values",)
    _text: ClassVar[str] = ""
    values: frozenset[Any]

    def __init__(self, term: str | Term, values: Iterable[Any]) -> None:
        super().__init__(term)
        object.__setattr__(self, "values", frozenset(values))

    def _key(self) -> tuple[Any, ...]:
        return (self.term, self.values)

    def with_term(self, term: Term) -> Predicate:
        return type(self)(term, self.values)

    def with_values(self, term: Term, values: Iterable[Any]) -> SetPredicate:
        return type(self)(term, values)

    def __str__(self) -> str:
        t = self._literal_type()
        items = sorted(format_literal(v, t) for v in self.values)
        return f"{self.term} {self._text} ({', '.join(items)})"


class In(SetPredicate):
    __slots__ = ()
    op = Op.IN
    _text = "IN"


class NotIn(SetPredicate):
    __slots__ = ()
    op = Op.NOT_IN
    _text = "NOT IN"


_NEGATION: dict[type[Predicate], type[Predicate]] = {
    IsNull: NotNull,
    NotNull: IsNull,
    IsNaN: NotNaN,
    NotNaN: IsNaN,
    EqualTo: NotEqualTo,
    NotEqualTo: EqualTo,
    LessThan: GreaterThanOrEqual,
    GreaterThanOrEqual: LessThan,
    LessThanOrEqual: GreaterThan,
    GreaterThan: LessThanOrEqual,
    StartsWith: NotStartsWith,
    NotStartsWith: StartsWith,
    In: NotIn,
    NotIn: In,
}


# ---------------------------------------------------------------------------------------------
# Simplifying constructors


def and_(*exprs: Expression) -> Expression:
    """Conjunction with constant folding: ``x AND true`` is ``x``, ``x AND false`` is ``false``."""
    result: Expression = AlwaysTrue()
    for e in exprs:
        if isinstance(e, AlwaysFalse):
            return AlwaysFalse()
        if isinstance(e, AlwaysTrue):
            continue
        result = e if isinstance(result, AlwaysTrue) else And(result, e)
    return result


def or_(*exprs: Expression) -> Expression:
    """Disjunction with constant folding: ``x OR false`` is ``x``, ``x OR true`` is ``true``."""
    result: Expression = AlwaysFalse()
    for e in exprs:
        if isinstance(e, AlwaysTrue):
            return AlwaysTrue()
        if isinstance(e, AlwaysFalse):
            continue
        result = e if isinstance(result, AlwaysFalse) else Or(result, e)
    return result


def not_(expr: Expression) -> Expression:
    """Negation that folds constants and double negation."""
    if isinstance(expr, AlwaysTrue | AlwaysFalse | Not):
        return expr.negate()
    return Not(expr)


def in_(term: str | Term, values: Iterable[Any]) -> Expression:
    """``IN`` that collapses to ``=`` for one value and to ``false`` for none."""
    vals = frozenset(values)
    if not vals:
        return AlwaysFalse()
    if len(vals) == 1:
        return EqualTo(term, next(iter(vals)))
    return In(term, vals)


def not_in(term: str | Term, values: Iterable[Any]) -> Expression:
    """``NOT IN`` that collapses to ``!=`` for one value and to ``true`` for none."""
    vals = frozenset(values)
    if not vals:
        return AlwaysTrue()
    if len(vals) == 1:
        return NotEqualTo(term, next(iter(vals)))
    return NotIn(term, vals)


# ---------------------------------------------------------------------------------------------
# Literal text

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _timestamp_text(value: int, per_second: int, tz: bool) -> str:
    seconds, frac = divmod(value, per_second)
    try:
        text = (_EPOCH + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    except OverflowError:
        return str(value)
    if frac:
        digits = 6 if per_second == 1_000_000 else 9
        text += "." + str(frac).rjust(digits, "0")
    return text + ("+00:00" if tz else "")


def format_literal(value: Any, type_: PrimitiveType | None) -> str:
    """A literal as the filter syntax writes it; bound date/time values print in ISO form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and type_ is not None:
        try:
            if isinstance(type_, DateType):
                return _quote((_EPOCH_DATE + _dt.timedelta(days=value)).isoformat())
            if isinstance(type_, TimeType):
                return _quote((_EPOCH + _dt.timedelta(microseconds=value)).time().isoformat())
        except OverflowError:
            return str(value)
        if isinstance(type_, TimestampType | TimestamptzType):
            return _quote(_timestamp_text(value, 1_000_000, isinstance(type_, TimestamptzType)))
        if isinstance(type_, TimestampNanoType | TimestamptzNanoType):
            return _quote(_timestamp_text(value, 1_000_000_000, isinstance(type_, TimestamptzNanoType)))
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    if isinstance(value, uuid.UUID | _dt.date | _dt.time):
        return _quote(value.isoformat() if not isinstance(value, uuid.UUID) else str(value))
    return repr(value)
