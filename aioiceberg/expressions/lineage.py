"""Row filters on the v3 row lineage columns (``_row_id``, ``_last_updated_sequence_number``).

Those columns are not in the table's schema: a filter that names them binds to the schema
with them appended (:func:`filter_schema`). Their values are not in the manifests' stats as
the rows hold them (a file stores them only for rows it moved, the rest are derived from its
``first_row_id`` and data sequence number), so the metrics evaluators must not prune on them
(:data:`~aioiceberg.spec.row_lineage.LINEAGE_IDS` are untrusted) and
:class:`LineageEvaluator` prunes a data file from what can be known of its values instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions.parser import parse
from aioiceberg.expressions.tree import (
    AlwaysTrue,
    BoundReference,
    Expression,
    LiteralPredicate,
    Op,
    Predicate,
    Reference,
    SetPredicate,
)
from aioiceberg.expressions.visitor import (
    BooleanExpressionVisitor,
    compile_filter,
    referenced_field_ids,
    rewrite_not,
    visit,
)
from aioiceberg.spec.row_lineage import LAST_UPDATED_SEQUENCE_NUMBER_ID, LINEAGE_IDS, ROW_ID_ID, lineage_field
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField
from aioiceberg.spec.values import from_bytes

__all__ = ["LineageEvaluator", "filter_schema", "lineage_fields_named"]


class _Names(BooleanExpressionVisitor[frozenset[str]]):
    def visit_true(self) -> frozenset[str]:
        return frozenset()

    def visit_false(self) -> frozenset[str]:
        return frozenset()

    def visit_not(self, child: frozenset[str]) -> frozenset[str]:
        return child

    def visit_and(self, left: frozenset[str], right: frozenset[str]) -> frozenset[str]:
        return left | right

    def visit_or(self, left: frozenset[str], right: frozenset[str]) -> frozenset[str]:
        return left | right

    def visit_predicate(self, pred: Predicate) -> frozenset[str]:
        term = pred.term
        return frozenset((term.name,)) if isinstance(term, Reference) else frozenset()


_NAMES = _Names()


def lineage_fields_named(
    schema: Schema, expr: Expression | str, case_sensitive: bool = True
) -> tuple[NestedField, ...]:
    """The lineage columns an unbound filter names that ``schema`` does not resolve (a table
    column of that name shadows the metadata column, as in Spark)."""
    if isinstance(expr, str):
        expr = parse(expr) if expr.strip() else AlwaysTrue()
    found: dict[int, NestedField] = {}
    names: frozenset[str] = visit(expr, _NAMES)
    for name in sorted(names):
        if schema.find_field_id(name, case_sensitive) is not None:
            continue
        f = lineage_field(name, case_sensitive)
        if f is not None:
            found[f.field_id] = f
    return tuple(found[i] for i in sorted(found, reverse=True))  # _row_id first


def filter_schema(
    schema: Schema,
    expr: Expression | str,
    case_sensitive: bool,
    format_version: int,
    table: str,
) -> Schema:
    """``schema`` with the lineage columns ``expr`` names appended: what a row filter is bound
    to. Before v3 a table has no row lineage, and naming those columns is an error."""
    fields = lineage_fields_named(schema, expr, case_sensitive)
    if not fields:
        return schema
    if format_version < 3:
        names = ", ".join(repr(f.name) for f in fields)
        raise ExpressionError(
            f"cannot filter on {names}: row lineage columns exist from format version 3 on, "
            f"and table {table} is version {format_version}"
        )
    have = {f.field_id for f in schema.fields}
    extra = [f for f in fields if f.field_id not in have]
    return Schema(
        *schema.fields, *extra, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids
    )


class LineageFile(Protocol):
    """What :class:`LineageEvaluator` reads of a data file."""

    @property
    def first_row_id(self) -> int | None: ...

    @property
    def record_count(self) -> int: ...

    @property
    def value_counts(self) -> dict[int, int] | None: ...

    @property
    def null_value_counts(self) -> dict[int, int] | None: ...

    @property
    def lower_bounds(self) -> dict[int, bytes] | None: ...

    @property
    def upper_bounds(self) -> dict[int, bytes] | None: ...


# (lowest value any row may hold or None: unknown, highest); None: nothing known at all
_Range = tuple[int | None, int] | None
_LONG = LongType()


def _stored(f: LineageFile, fid: int) -> tuple[int | None, int | None, int | None, int | None]:
    """(values, nulls, lower, upper) the manifest lists for the stored column ``fid``."""
    lo = (f.lower_bounds or {}).get(fid)
    hi = (f.upper_bounds or {}).get(fid)
    return (
        (f.value_counts or {}).get(fid),
        (f.null_value_counts or {}).get(fid),
        None if lo is None or len(lo) not in (4, 8) else int(from_bytes(lo, _LONG)),
        None if hi is None or len(hi) not in (4, 8) else int(from_bytes(hi, _LONG)),
    )


def _value_range(f: LineageFile, fid: int, derived_lo: int, derived_hi: int) -> _Range:
    """Where the values of lineage column ``fid`` lie in file ``f``: a row holds the value the
    file stores for it or, where that is null, the derived one (in ``derived_lo ..
    derived_hi``). A stored value was given to the row before this file was committed, so it
    is below the file's first row id (for ``_row_id``) and at most its data sequence number:
    the derived top is the file's top either way. The bottom is known only from the stats:
    every stored value null, or their lower bound."""
    values, nulls, lower, upper = _stored(f, fid)
    if values is not None and nulls is not None and values == nulls:
        return derived_lo, derived_hi  # nothing stored: all derived
    if lower is not None and upper is not None:
        if nulls == 0:
            return lower, upper
        return min(lower, derived_lo), max(upper, derived_hi)
    return None, derived_hi


def _leaf(pred: Predicate) -> Callable[[tuple[_Range, _Range]], bool]:
    """May a row of a file whose lineage ranges are given match ``pred``? (others: yes)"""
    ref = pred.term
    if not isinstance(ref, BoundReference) or ref.field_id not in LINEAGE_IDS:
        return _yes
    at = 0 if ref.field_id == ROW_ID_ID else 1
    op = pred.op
    if op is Op.IS_NULL:  # derived values are never null where the file has row lineage
        return lambda r: r[at] is None
    if op in (Op.NOT_NULL, Op.NOT_NAN):
        return _yes
    if op is Op.IS_NAN:
        return lambda r: r[at] is None
    if isinstance(pred, SetPredicate):
        values = tuple(int(v) for v in pred.values)
        if op is Op.IN:
            return lambda r: _any_in(r[at], values)
        return lambda r: not (_single(r[at]) is not None and _single(r[at]) in values)
    if not isinstance(pred, LiteralPredicate) or not isinstance(pred.value, int):
        return _yes
    v = int(pred.value)
    checks: dict[Op, Callable[[int | None, int], bool]] = {
        Op.EQ: lambda lo, hi: (lo is None or lo <= v) and v <= hi,
        Op.LT: lambda lo, hi: lo is None or lo < v,
        Op.LT_EQ: lambda lo, hi: lo is None or lo <= v,
        Op.GT: lambda lo, hi: hi > v,
        Op.GT_EQ: lambda lo, hi: hi >= v,
        Op.NOT_EQ: lambda lo, hi: not (lo == hi == v),
    }
    check = checks.get(op)
    if check is None:
        return _yes

    def leaf(r: tuple[_Range, _Range]) -> bool:
        found = r[at]
        return True if found is None else check(found[0], found[1])

    return leaf


def _yes(_: Any) -> bool:
    return True


def _single(r: _Range) -> int | None:
    return r[0] if r is not None and r[0] == r[1] else None


def _any_in(r: _Range, values: tuple[int, ...]) -> bool:
    if r is None:
        return True
    lo, hi = r
    return any((lo is None or lo <= v) and v <= hi for v in values)


class LineageEvaluator:
    """May a data file hold a row whose row lineage values match a bound filter? False only
    when the file's ``first_row_id``, record count, data sequence number and lineage stats
    prove no row does; a file without ``first_row_id`` (no lineage: its values are null
    unless stored) and predicates on other columns never exclude one."""

    def __init__(self, expr: Expression) -> None:
        self._fn = compile_filter(rewrite_not(expr), _leaf)

    @staticmethod
    def wanted(expr: Expression) -> bool:
        """``expr`` names a lineage column (else this evaluator would keep every file)."""
        return bool(referenced_field_ids(expr) & LINEAGE_IDS)

    def eval(self, f: LineageFile, data_sequence_number: int | None) -> bool:
        first, count = f.first_row_id, f.record_count
        if first is None or count is None or count <= 0:
            return True
        row_ids = _value_range(f, ROW_ID_ID, first, first + count - 1)
        seq: _Range = None
        if data_sequence_number is not None:
            seq = _value_range(f, LAST_UPDATED_SEQUENCE_NUMBER_ID, data_sequence_number, data_sequence_number)
        return self._fn((row_ids, seq))
