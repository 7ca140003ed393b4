"""Project row filters through partition transforms, and compute per-partition residuals.

An inclusive projection keeps every partition that may hold a matching row (used to
prune manifests and files); a strict projection keeps only partitions whose rows all
match (used for residuals and for deletes by partition). A predicate that a transform
cannot project becomes ``true`` inclusively and ``false`` strictly.

Year/month/day/hour projections include Java's fix-ups for files written by Iceberg
0.10 and earlier, which put pre-1970 values one period too high (day(1969-12-31T10:00)
as 0 instead of -1): inclusive projections also accept the wrong partition, strict
ones also exclude it.

Projected predicates are bound to the partition struct: their BoundReference holds
the partition field id and the field's position in the partition tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aioiceberg.expressions.binding import prepare_filter
from aioiceberg.expressions.rows import compile_row_filter
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    BoundReference,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    NotEqualTo,
    NotNaN,
    NotNull,
    NotStartsWith,
    Op,
    Predicate,
    SetPredicate,
    StartsWith,
    and_,
    in_,
    not_in,
    or_,
)
from aioiceberg.expressions.visitor import BooleanExpressionVisitor, ExpressionRewriter, chain_terms, visit
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import (
    BucketTransform,
    DayTransform,
    IdentityTransform,
    TimeTransform,
    Transform,
    TruncateTransform,
)
from aioiceberg.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
)
from aioiceberg.spec.values import decimal_to_unscaled, unscaled_to_decimal

__all__ = [
    "ResidualEvaluator",
    "inclusive_projection",
    "partition_references",
    "project",
    "strict_project",
    "strict_projection",
]


# ---------------------------------------------------------------------------------------------
# One predicate through one transform


def _step(value: Any, source: PrimitiveType, delta: int) -> Any:
    """The adjacent value (``delta`` = +1/-1) of an ordered, discrete source value."""
    if isinstance(source, DecimalType):
        return unscaled_to_decimal(decimal_to_unscaled(value, source.scale) + delta, source.scale)
    return value + delta


def _apply(transform: Transform, value: Any, source: PrimitiveType) -> Any:
    """``transform(value)``, or None when the value lies outside the source type's range or
    truncation wrapped around (Java's int arithmetic), where no safe bound exists."""
    if isinstance(source, IntegerType | LongType) and not source.min <= value <= source.max:
        return None
    if isinstance(source, DateType) and not IntegerType.min <= value <= IntegerType.max:
        return None
    if isinstance(transform, TimeTransform) and not isinstance(source, DateType):
        if not LongType.min <= value <= LongType.max:
            return None
    result = transform.apply(value, source)
    if (
        isinstance(transform, TruncateTransform)
        and isinstance(source, IntegerType | LongType)
        and result > value
    ):
        return None
    return result


def _wrapped_floor(transform: TruncateTransform, source: PrimitiveType) -> int | None:
    """The lowest partition value that may hold wrapped rows, or None when none can.

    ``truncate(W, v) = v - (v mod W)`` falls below the type's minimum for the lowest values
    (``v < min + W - 1``); Java's int arithmetic, which writers follow, wraps it around to
    the top of the range, so a partition at or above ``max - W + 2`` may hold values near
    the minimum, and projections compare partitions as numbers.
    """
    if not isinstance(source, IntegerType | LongType) or transform.width < 2:
        return None
    return int(source.max) - transform.width + 2


def _number_inclusive(transform: Transform, ref: BoundReference, pred: Predicate) -> Expression | None:
    assert isinstance(pred, LiteralPredicate)
    src, v = pred.ref.type, pred.value
    op = pred.op
    if op is Op.LT:
        p = _apply(transform, _step(v, src, -1), src)
        return None if p is None else LessThanOrEqual(ref, p)
    if op is Op.GT:
        p = _apply(transform, _step(v, src, +1), src)
        return None if p is None else GreaterThanOrEqual(ref, p)
    p = _apply(transform, v, src)
    if p is None:
        return None
    if op is Op.LT_EQ:
        return LessThanOrEqual(ref, p)
    if op is Op.GT_EQ:
        return GreaterThanOrEqual(ref, p)
    if op is Op.EQ:
        return EqualTo(ref, p)
    return None


def _number_strict(transform: Transform, ref: BoundReference, pred: Predicate) -> Expression | None:
    assert isinstance(pred, LiteralPredicate)
    src, v = pred.ref.type, pred.value
    op = pred.op
    if op is Op.LT_EQ:
        p = _apply(transform, _step(v, src, +1), src)
        return None if p is None else LessThan(ref, p)
    if op is Op.GT_EQ:
        p = _apply(transform, _step(v, src, -1), src)
        return None if p is None else GreaterThan(ref, p)
    p = _apply(transform, v, src)
    if p is None:
        return None
    if op is Op.LT:
        return LessThan(ref, p)
    if op is Op.GT:
        return GreaterThan(ref, p)
    if op is Op.NOT_EQ:
        return NotEqualTo(ref, p)
    # no strict projection of "=": neighbouring values share the partition
    return None


def _array_inclusive(transform: TruncateTransform, ref: BoundReference, pred: Predicate) -> Expression | None:
    assert isinstance(pred, LiteralPredicate)
    src, v, width = pred.ref.type, pred.value, transform.width
    op = pred.op
    if op is Op.STARTS_WITH:
        # rows starting with v have partitions starting with v[:width]
        return StartsWith(ref, v) if len(v) < width else EqualTo(ref, v[:width])
    if op is Op.NOT_STARTS_WITH:
        if len(v) < width:
            return NotStartsWith(ref, v)
        if len(v) == width:
            return NotEqualTo(ref, v)
        return None
    p = transform.apply(v, src)
    if op in (Op.LT, Op.LT_EQ):
        return LessThanOrEqual(ref, p)
    if op in (Op.GT, Op.GT_EQ):
        return GreaterThanOrEqual(ref, p)
    if op is Op.EQ:
        return EqualTo(ref, p)
    return None


def _array_strict(transform: TruncateTransform, ref: BoundReference, pred: Predicate) -> Expression | None:
    assert isinstance(pred, LiteralPredicate)
    src, v, width = pred.ref.type, pred.value, transform.width
    op = pred.op
    if op is Op.STARTS_WITH:
        if len(v) < width:
            return StartsWith(ref, v)
        if len(v) == width:
            return EqualTo(ref, v)
        return None
    if op is Op.NOT_STARTS_WITH:
        if len(v) < width:
            return NotStartsWith(ref, v)
        if len(v) == width:
            return NotEqualTo(ref, v)
        return NotStartsWith(ref, transform.apply(v, src))
    p = transform.apply(v, src)
    if op in (Op.LT, Op.LT_EQ):
        return LessThan(ref, p)
    if op in (Op.GT, Op.GT_EQ):
        return GreaterThan(ref, p)
    if op is Op.NOT_EQ:
        return NotEqualTo(ref, p)
    return None


def _transform_set(transform: Transform, ref: BoundReference, pred: SetPredicate) -> Expression | None:
    src = pred.ref.type
    out = set()
    for v in pred.values:
        p = _apply(transform, v, src)
        if p is None:
            return None
        out.add(p)
    return in_(ref, out) if pred.op is Op.IN else not_in(ref, out)


def _needs_time_fix(transform: Transform, source: PrimitiveType) -> bool:
    return isinstance(transform, TimeTransform) and not (
        isinstance(transform, DayTransform) and isinstance(source, DateType)
    )


def _fix_inclusive_time(projected: Expression | None) -> Expression | None:
    """Also accept partition ``p + 1`` for negative ``p`` (pre-0.11 writers, see module doc)."""
    if isinstance(projected, LessThanOrEqual | LessThan) and projected.value < 0:
        return projected.with_value(projected.ref, projected.value + 1)
    if isinstance(projected, EqualTo) and projected.value < 0:
        return in_(projected.ref, (projected.value, projected.value + 1))
    if isinstance(projected, SetPredicate) and projected.op is Op.IN:
        values = set(projected.values) | {v + 1 for v in projected.values if v < 0}
        return in_(projected.ref, values)
    return projected


def _fix_strict_time(projected: Expression | None) -> Expression | None:
    """Also exclude partition ``p + 1`` for negative ``p`` (pre-0.11 writers, see module doc)."""
    if isinstance(projected, GreaterThan | GreaterThanOrEqual) and projected.value <= 0:
        return projected.with_value(projected.ref, projected.value + 1)
    if isinstance(projected, NotEqualTo) and projected.value < 0:
        return not_in(projected.ref, (projected.value, projected.value + 1))
    if isinstance(projected, SetPredicate) and projected.op is Op.NOT_IN:
        values = set(projected.values) | {v + 1 for v in projected.values if v < 0}
        return not_in(projected.ref, values)
    return projected


def project(transform: Transform, ref: BoundReference, pred: Predicate) -> Expression | None:
    """Inclusive projection of a bound predicate on the transform's source column to a
    predicate on partition ``ref``; None when the transform cannot project it (= true)."""
    if transform.is_void or transform.is_unknown:
        return None
    src = pred.ref.type
    if isinstance(pred, IsNull | NotNull):
        return pred.with_term(ref)
    if isinstance(pred, IsNaN | NotNaN):
        return pred.with_term(ref) if isinstance(transform, IdentityTransform) else None
    if isinstance(transform, IdentityTransform):
        return pred.with_term(ref)
    if isinstance(pred, SetPredicate):
        if pred.op is not Op.IN:
            return None
        projected = _transform_set(transform, ref, pred)
        return _fix_inclusive_time(projected) if _needs_time_fix(transform, src) else projected
    if isinstance(transform, BucketTransform):
        if pred.op is Op.EQ:
            assert isinstance(pred, LiteralPredicate)
            return EqualTo(ref, transform.apply(pred.value, src))
        return None
    if isinstance(transform, TruncateTransform):
        if isinstance(src, StringType | BinaryType):
            return _array_inclusive(transform, ref, pred)
        projected = _number_inclusive(transform, ref, pred)
        floor = _wrapped_floor(transform, src)
        if projected is not None and floor is not None and pred.op in (Op.LT, Op.LT_EQ):
            # the lowest values' partitions wrapped to the top of the range: keep them
            return or_(projected, GreaterThanOrEqual(ref, floor))
        return projected
    if isinstance(transform, TimeTransform):
        projected = _number_inclusive(transform, ref, pred)
        return _fix_inclusive_time(projected) if _needs_time_fix(transform, src) else projected
    return None


def strict_project(transform: Transform, ref: BoundReference, pred: Predicate) -> Expression | None:
    """Strict projection: a partition predicate true only where every row matches ``pred``;
    None when there is none (= false)."""
    if transform.is_void or transform.is_unknown:
        return None
    src = pred.ref.type
    if isinstance(pred, IsNull | NotNull):
        return pred.with_term(ref)
    if isinstance(pred, IsNaN | NotNaN):
        return pred.with_term(ref) if isinstance(transform, IdentityTransform) else None
    if isinstance(transform, IdentityTransform):
        return pred.with_term(ref)
    if isinstance(pred, SetPredicate):
        if pred.op is not Op.NOT_IN:
            return None
        projected = _transform_set(transform, ref, pred)
        return _fix_strict_time(projected) if _needs_time_fix(transform, src) else projected
    if isinstance(transform, BucketTransform):
        if pred.op is Op.NOT_EQ:
            assert isinstance(pred, LiteralPredicate)
            return NotEqualTo(ref, transform.apply(pred.value, src))
        return None
    if isinstance(transform, TruncateTransform):
        if isinstance(src, StringType | BinaryType):
            return _array_strict(transform, ref, pred)
        projected = _number_strict(transform, ref, pred)
        floor = _wrapped_floor(transform, src)
        if projected is not None and floor is not None and pred.op in (Op.GT, Op.GT_EQ):
            # a partition at the top of the range may hold the lowest values (wrapped)
            return and_(projected, LessThan(ref, floor))
        return projected
    if isinstance(transform, TimeTransform):
        projected = _number_strict(transform, ref, pred)
        return _fix_strict_time(projected) if _needs_time_fix(transform, src) else projected
    return None


# ---------------------------------------------------------------------------------------------
# Whole expressions through a spec


def partition_references(schema: Schema, spec: PartitionSpec) -> list[BoundReference]:
    """One BoundReference per partition field, positioned in the partition tuple."""
    ptype = spec.partition_type(schema)
    refs = []
    for pos, f in enumerate(ptype.fields):
        t = f.field_type
        assert isinstance(t, PrimitiveType)
        refs.append(BoundReference(f.field_id, f.name, t, (pos,), False))
    return refs


def _parts_for(
    spec: PartitionSpec, refs: list[BoundReference], pred: Predicate
) -> list[tuple[PartitionField, BoundReference]]:
    fid = pred.ref.field_id
    return [(f, refs[i]) for i, f in enumerate(spec.fields) if f.source_ids == (fid,)]


class _ProjectPredicates(ExpressionRewriter):
    """Replaces each predicate of a NOT-free tree by its projection."""

    __slots__ = ("_on_predicate",)

    def __init__(self, on_predicate: Callable[[Predicate], Expression]) -> None:
        self._on_predicate = on_predicate

    def visit_not(self, child: Expression) -> Expression:
        raise AssertionError("NOT must be rewritten before projection")

    def visit_predicate(self, pred: Predicate) -> Expression:
        return self._on_predicate(pred)


def inclusive_projection(
    schema: Schema, spec: PartitionSpec, expr: Expression | str, case_sensitive: bool = True
) -> Expression:
    """A partition filter true for every partition that may hold rows matching ``expr``.

    Several partition fields on one column each constrain the partition, so their
    projections are ANDed (day(ts) and hour(ts): both must agree).
    """
    refs = partition_references(schema, spec)

    def on_predicate(pred: Predicate) -> Expression:
        return and_(*(p for f, ref in _parts_for(spec, refs, pred) if (p := project(f.transform, ref, pred))))

    return visit(prepare_filter(schema, expr, case_sensitive), _ProjectPredicates(on_predicate))


def strict_projection(
    schema: Schema, spec: PartitionSpec, expr: Expression | str, case_sensitive: bool = True
) -> Expression:
    """A partition filter true only for partitions whose rows all match ``expr``.

    Any one partition field proving the predicate is enough, so projections are ORed.
    """
    refs = partition_references(schema, spec)

    def on_predicate(pred: Predicate) -> Expression:
        return or_(
            *(p for f, ref in _parts_for(spec, refs, pred) if (p := strict_project(f.transform, ref, pred)))
        )

    return visit(prepare_filter(schema, expr, case_sensitive), _ProjectPredicates(on_predicate))


# ---------------------------------------------------------------------------------------------
# Residuals

_Residual = Callable[[Sequence[Any]], Expression]


class _CompileResidual(BooleanExpressionVisitor[_Residual]):
    """Builds ``partition -> residual`` closures once; ``residual_for`` only calls them."""

    __slots__ = ("_on_predicate",)

    def __init__(self, on_predicate: Callable[[Predicate], _Residual]) -> None:
        self._on_predicate = on_predicate

    def visit_true(self) -> _Residual:
        true = AlwaysTrue()
        return lambda part: true

    def visit_false(self) -> _Residual:
        false = AlwaysFalse()
        return lambda part: false

    def visit_not(self, child: _Residual) -> _Residual:
        raise AssertionError("NOT must be rewritten before computing residuals")

    def visit_and(self, left: _Residual, right: _Residual) -> _Residual:
        terms = chain_terms("and_terms", left, right)  # a long chain: one call, not nested ones
        fn: _Residual = (
            (lambda part: and_(left(part), right(part)))
            if len(terms) == 2
            else (lambda part: and_(*[t(part) for t in terms]))
        )
        setattr(fn, "and_terms", terms)  # noqa: B010
        return fn

    def visit_or(self, left: _Residual, right: _Residual) -> _Residual:
        terms = chain_terms("or_terms", left, right)
        fn: _Residual = (
            (lambda part: or_(left(part), right(part)))
            if len(terms) == 2
            else (lambda part: or_(*[t(part) for t in terms]))
        )
        setattr(fn, "or_terms", terms)  # noqa: B010
        return fn

    def visit_predicate(self, pred: Predicate) -> _Residual:
        return self._on_predicate(pred)


class ResidualEvaluator:
    """The part of a row filter still to apply to the rows of a file in a given partition.

    For each predicate, a true strict projection on the partition tuple means every row
    matches (the predicate becomes ``true``) and a false inclusive projection means none
    does (``false``); otherwise the predicate stays. Projections are computed once here,
    so ``residual_for`` only evaluates them; the object is immutable and shareable.
    """

    def __init__(
        self, schema: Schema, spec: PartitionSpec, expr: Expression | str, case_sensitive: bool = True
    ) -> None:
        self.schema = schema
        self.spec = spec
        self.expr = prepare_filter(schema, expr, case_sensitive)
        self._refs = partition_references(schema, spec)
        consulted: set[int] = set()
        self._consulted = consulted
        self._residual = visit(self.expr, _CompileResidual(self._compile_predicate))
        # the partition fields any predicate reads: tuples equal on these share a residual
        self.positions: tuple[int, ...] = tuple(sorted(consulted))

    def _compile_predicate(self, pred: Predicate) -> _Residual:
        checks: list[tuple[Callable[[Any], bool] | None, Callable[[Any], bool] | None]] = []
        for f, ref in _parts_for(self.spec, self._refs, pred):
            self._consulted.add(ref.position)
            strict = strict_project(f.transform, ref, pred)
            inclusive = project(f.transform, ref, pred)
            checks.append(
                (
                    compile_row_filter(strict) if strict is not None else None,
                    compile_row_filter(inclusive) if inclusive is not None else None,
                )
            )
        if not checks:
            return lambda part: pred

        def residual(part: Sequence[Any]) -> Expression:
            for strict_fn, inclusive_fn in checks:
                if strict_fn is not None and strict_fn(part):
                    return AlwaysTrue()
                if inclusive_fn is not None and not inclusive_fn(part):
                    return AlwaysFalse()
            return pred

        return residual

    def residual_for(self, partition: Sequence[Any]) -> Expression:
        """The residual filter for rows of a file whose partition tuple is ``partition``."""
        return self._residual(partition)
