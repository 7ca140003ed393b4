"""Projections through every transform: soundness on generated values, parity with PyIceberg,
the pre-1970 fix-ups, and residuals checked against the full filter row by row."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyiceberg.expressions as pe
import pyiceberg.schema as ps
import pyiceberg.transforms as pt
import pyiceberg.types as pyt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioiceberg.expressions import (
    AlwaysTrue,
    BoundReference,
    EqualTo,
    Expression,
    In,
    LessThanOrEqual,
    NotIn,
    Predicate,
    ResidualEvaluator,
    bind,
    compile_row_filter,
    inclusive_projection,
    project,
    strict_project,
    strict_projection,
)
from aioiceberg.expressions import tree as t
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
    YearTransform,
)
from aioiceberg.spec.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
)

DAY_US = 86_400_000_000

# source type -> (our type, PyIceberg type, value strategy)
SOURCES: dict[str, tuple[PrimitiveType, Any, st.SearchStrategy[Any]]] = {
    "int": (IntegerType(), pyt.IntegerType(), st.integers(-1000, 1000)),
    "long": (LongType(), pyt.LongType(), st.integers(-(10**6), 10**6)),
    "decimal": (
        DecimalType(9, 2),
        pyt.DecimalType(9, 2),
        st.integers(-100_000, 100_000).map(lambda n: Decimal(n).scaleb(-2)),
    ),
    "string": (StringType(), pyt.StringType(), st.text(alphabet="abc", max_size=5)),
    "date": (DateType(), pyt.DateType(), st.integers(-800, 800)),
    "timestamp": (
        TimestampType(),
        pyt.TimestampType(),
        st.one_of(st.integers(-800 * DAY_US, 800 * DAY_US), st.integers(-3 * DAY_US, 3 * DAY_US)),
    ),
    "timestamptz": (TimestamptzType(), pyt.TimestamptzType(), st.integers(-800 * DAY_US, 800 * DAY_US)),
}

TRANSFORMS: dict[str, list[tuple[Transform, Any]]] = {
    "int": [
        (IdentityTransform(), pt.IdentityTransform()),
        (BucketTransform(7), pt.BucketTransform(7)),
        (TruncateTransform(10), pt.TruncateTransform(10)),
    ],
    "long": [
        (BucketTransform(16), pt.BucketTransform(16)),
        (TruncateTransform(100), pt.TruncateTransform(100)),
    ],
    "decimal": [
        (TruncateTransform(50), pt.TruncateTransform(50)),
        (BucketTransform(5), pt.BucketTransform(5)),
    ],
    "string": [
        (TruncateTransform(2), pt.TruncateTransform(2)),
        (BucketTransform(3), pt.BucketTransform(3)),
        (IdentityTransform(), pt.IdentityTransform()),
    ],
    "date": [
        (YearTransform(), pt.YearTransform()),
        (MonthTransform(), pt.MonthTransform()),
        (DayTransform(), pt.DayTransform()),
    ],
    "timestamp": [
        (YearTransform(), pt.YearTransform()),
        (MonthTransform(), pt.MonthTransform()),
        (DayTransform(), pt.DayTransform()),
        (HourTransform(), pt.HourTransform()),
    ],
    "timestamptz": [(DayTransform(), pt.DayTransform()), (HourTransform(), pt.HourTransform())],
}
CASES = [(src, i) for src, ts in TRANSFORMS.items() for i in range(len(ts))]

OPS = ["lt", "lt_eq", "gt", "gt_eq", "eq", "not_eq", "in", "not_in", "is_null", "not_null"]
STRING_OPS = [*OPS, "starts_with", "not_starts_with"]
OUR_CLASSES: dict[str, type[Predicate]] = {
    "lt": t.LessThan,
    "lt_eq": t.LessThanOrEqual,
    "gt": t.GreaterThan,
    "gt_eq": t.GreaterThanOrEqual,
    "eq": t.EqualTo,
    "not_eq": t.NotEqualTo,
    "in": t.In,
    "not_in": t.NotIn,
    "is_null": t.IsNull,
    "not_null": t.NotNull,
    "starts_with": t.StartsWith,
    "not_starts_with": t.NotStartsWith,
    "is_nan": t.IsNaN,
    "not_nan": t.NotNaN,
}
PY_CLASSES: dict[str, Any] = {
    "lt": pe.LessThan,
    "lt_eq": pe.LessThanOrEqual,
    "gt": pe.GreaterThan,
    "gt_eq": pe.GreaterThanOrEqual,
    "eq": pe.EqualTo,
    "not_eq": pe.NotEqualTo,
    "in": pe.In,
    "not_in": pe.NotIn,
    "is_null": pe.IsNull,
    "not_null": pe.NotNull,
    "starts_with": pe.StartsWith,
    "not_starts_with": pe.NotStartsWith,
    "is_nan": pe.IsNaN,
    "not_nan": pe.NotNaN,
}
PY_TO_OP = {cls: op for op, cls in PY_CLASSES.items()}


def our_predicate(op: str, ref: BoundReference, values: list[Any]) -> Predicate:
    cls = OUR_CLASSES[op]
    if issubclass(cls, t.UnaryPredicate):
        return cls(ref)
    if issubclass(cls, t.SetPredicate):
        return cls(ref, values)
    return cls(ref, values[0])  # type: ignore[call-arg]


def pyiceberg_predicate(op: str, values: list[Any]) -> Any:
    cls = PY_CLASSES[op]
    if op in ("is_null", "not_null", "is_nan", "not_nan"):
        return cls("c")
    if op in ("in", "not_in"):
        return cls("c", set(values))
    return cls("c", values[0])


def from_pyiceberg(projected: Any, ref: BoundReference) -> Expression | None:
    """PyIceberg's unbound partition predicate as ours, bound to the partition reference."""
    if projected is None:
        return None
    base = PY_TO_OP[type(projected)]
    if base in ("in", "not_in"):
        return our_predicate(base, ref, [lit.value for lit in projected.literals])
    if base in ("is_null", "not_null", "is_nan", "not_nan"):
        return our_predicate(base, ref, [])
    return our_predicate(base, ref, [projected.literal.value])


def holds(expr: Expression | None, value: Any, default: bool) -> bool:
    if expr is None:
        return default
    return compile_row_filter(expr)((value,))


@st.composite
def projection_case(draw: st.DrawFn) -> tuple[str, int, str, list[Any], list[Any]]:
    src, index = draw(st.sampled_from(CASES))
    values = SOURCES[src][2]
    op = draw(st.sampled_from(STRING_OPS if src == "string" else OPS))
    literals = draw(
        st.lists(values, min_size=1 if op not in ("in", "not_in") else 2, max_size=4, unique=True)
    )
    near = [lit for lit in literals]
    if src not in ("string", "decimal"):
        near += [lit + d for lit in literals for d in (-1, 1)]
    samples = draw(st.lists(st.one_of(values, st.sampled_from(near), st.none()), min_size=1, max_size=12))
    return src, index, op, literals, samples


PRE_EPOCH_FIX = (YearTransform, MonthTransform, DayTransform, HourTransform)


@settings(max_examples=600, deadline=None)
@given(projection_case())
def test_projections_are_sound_and_agree_with_pyiceberg(
    case: tuple[str, int, str, list[Any], list[Any]],
) -> None:
    src, index, op, literals, samples = case
    our_type, py_type, _ = SOURCES[src]
    transform, py_transform = TRANSFORMS[src][index]
    source_ref = BoundReference(1, "c", our_type, (0,))
    part_ref = BoundReference(1000, "p", transform.result_type(our_type), (0,))  # type: ignore[arg-type]
    pred = our_predicate(op, source_ref, literals)
    row_filter = compile_row_filter(pred)
    inclusive = project(transform, part_ref, pred)
    strict = strict_project(transform, part_ref, pred)

    py_schema = ps.Schema(pyt.NestedField(1, "c", py_type, required=False))
    py_bound = pyiceberg_predicate(op, literals).bind(py_schema)
    py_inclusive = (
        from_pyiceberg(py_transform.project("p", py_bound), part_ref)
        if isinstance(py_bound, pe.BoundPredicate)
        else None
    )
    py_strict = (
        from_pyiceberg(py_transform.strict_project("p", py_bound), part_ref)
        if isinstance(py_bound, pe.BoundPredicate)
        else None
    )

    fixups_apply = isinstance(transform, PRE_EPOCH_FIX) and not (
        isinstance(transform, DayTransform) and isinstance(our_type, DateType)
    )
    # ours also keeps (inclusive) / drops (strict) the top partitions, where the lowest
    # values' truncations wrap around; PyIceberg's Python ints never wrap
    fixups_apply = fixups_apply or (
        isinstance(transform, TruncateTransform) and isinstance(our_type, IntegerType | LongType)
    )
    for x in samples:
        p = transform.apply(x, our_type)
        if x is not None:
            assert p == py_transform.transform(py_type)(x)
        matches = row_filter((x,))
        ours_in, ours_strict = holds(inclusive, p, True), holds(strict, p, False)
        if matches:
            assert ours_in, (pred, inclusive, x, p)
        if ours_strict:
            assert matches, (pred, strict, x, p)
        theirs_in, theirs_strict = holds(py_inclusive, p, True), holds(py_strict, p, False)
        if fixups_apply:
            # ours also keeps (inclusive) / drops (strict) the partition an old writer used
            assert ours_in or not theirs_in
            assert theirs_strict or not ours_strict
        else:
            assert ours_in == theirs_in, (pred, inclusive, py_inclusive, x, p)
            assert ours_strict == theirs_strict, (pred, strict, py_strict, x, p)


def _ref(type_: PrimitiveType) -> BoundReference:
    return BoundReference(1, "c", type_, (0,))


PART_DAY = BoundReference(1000, "p", DateType(), (0,))


def test_inclusive_day_projection_before_1970_also_accepts_the_old_writers_partition() -> None:
    ts = _ref(TimestampType())
    # 1969-12-31T10:00:00 is day -1; writers up to 0.10 filed it under day 0
    assert project(DayTransform(), PART_DAY, t.EqualTo(ts, -14 * 3_600_000_000)) == In(PART_DAY, {-1, 0})
    assert project(DayTransform(), PART_DAY, t.LessThan(ts, -14 * 3_600_000_000)) == LessThanOrEqual(
        PART_DAY, 0
    )
    assert project(DayTransform(), PART_DAY, t.In(ts, {-DAY_US * 3, DAY_US})) == In(PART_DAY, {-3, -2, 1})
    # after the epoch nothing changes
    assert project(DayTransform(), PART_DAY, t.EqualTo(ts, DAY_US)) == EqualTo(PART_DAY, 1)
    # day of a date is the date itself: no fix
    assert project(DayTransform(), PART_DAY, t.EqualTo(_ref(DateType()), -1)) == EqualTo(PART_DAY, -1)


def test_strict_time_projection_before_1970_excludes_the_old_writers_partition() -> None:
    ts = _ref(TimestampType())
    part = BoundReference(1000, "p", IntegerType(), (0,))
    # ts > 1969-11-15: month(...) = -2 and strictly > -2 would be -1, but old month -2 held -3 values
    assert strict_project(MonthTransform(), part, t.GreaterThan(ts, -47 * DAY_US)) == t.GreaterThan(part, -1)
    assert strict_project(MonthTransform(), part, t.NotEqualTo(ts, -47 * DAY_US)) == NotIn(part, {-2, -1})
    assert strict_project(MonthTransform(), part, t.EqualTo(ts, -47 * DAY_US)) is None


def test_truncate_string_prefix_projections() -> None:
    s = _ref(StringType())
    part = BoundReference(1000, "p", StringType(), (0,))
    tr = TruncateTransform(3)
    assert project(tr, part, t.StartsWith(s, "ab")) == t.StartsWith(part, "ab")
    assert project(tr, part, t.StartsWith(s, "abc")) == EqualTo(part, "abc")
    assert project(tr, part, t.StartsWith(s, "abcd")) == EqualTo(part, "abc")
    assert project(tr, part, t.NotStartsWith(s, "abcd")) is None
    assert strict_project(tr, part, t.StartsWith(s, "abcd")) is None
    assert strict_project(tr, part, t.NotStartsWith(s, "abcd")) == t.NotStartsWith(part, "abc")
    assert strict_project(tr, part, t.NotStartsWith(s, "abc")) == t.NotEqualTo(part, "abc")


def test_bucket_projects_only_equality_and_in() -> None:
    i = _ref(IntegerType())
    part = BoundReference(1000, "p", IntegerType(), (0,))
    b = BucketTransform(16)
    assert project(b, part, t.EqualTo(i, 34)) == EqualTo(part, b.apply(34, IntegerType()))
    assert project(b, part, t.LessThan(i, 34)) is None
    assert strict_project(b, part, t.EqualTo(i, 34)) is None
    assert strict_project(b, part, t.NotEqualTo(i, 34)) == t.NotEqualTo(part, b.apply(34, IntegerType()))


@pytest.mark.parametrize("transform", [VoidTransform(), UnknownTransform("zorder")])
def test_void_and_unknown_transforms_project_nothing(transform: Transform) -> None:
    schema = Schema(NestedField(1, "x", LongType()))
    spec = PartitionSpec.of(PartitionField((1,), 1000, transform, "x_p"))
    assert inclusive_projection(schema, spec, "x = 5") == AlwaysTrue()
    assert strict_projection(schema, spec, "x = 5 OR x IS NULL") == t.AlwaysFalse()


SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "name", StringType()),
)
SPEC = PartitionSpec.of(
    PartitionField((2,), 1000, DayTransform(), "ts_day"),
    PartitionField((2,), 1001, HourTransform(), "ts_hour"),
    PartitionField((1,), 1002, BucketTransform(4), "id_bucket"),
    PartitionField((3,), 1003, TruncateTransform(2), "name_trunc"),
)


def test_whole_expression_projection_ands_fields_on_one_column_inclusively() -> None:
    projected = inclusive_projection(SCHEMA, SPEC, "ts = '1970-01-02T01:00:00' AND id = 3")
    parts = compile_row_filter(projected)
    bucket3 = BucketTransform(4).apply(3, LongType())
    assert parts((1, 25, bucket3, None))
    assert not parts((1, 26, bucket3, None))
    assert not parts((2, 25, bucket3, None))


rows_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-20, 20)),
        st.one_of(
            st.none(), st.integers(-3 * DAY_US, 3 * DAY_US), st.integers(-3, 3).map(lambda d: d * DAY_US)
        ),
        st.one_of(st.none(), st.text(alphabet="abc", max_size=4)),
    ),
    min_size=1,
    max_size=30,
)


@st.composite
def filters(draw: st.DrawFn) -> Expression:
    def leaf() -> st.SearchStrategy[Expression]:
        ts_lit = st.integers(-3 * DAY_US, 3 * DAY_US)
        return st.one_of(
            st.builds(
                lambda c, v: c("id", v), st.sampled_from(list(OUR_CLASSES.values())[:6]), st.integers(-20, 20)
            ),
            st.builds(lambda c, v: c("ts", v), st.sampled_from(list(OUR_CLASSES.values())[:6]), ts_lit),
            st.builds(
                lambda c, v: c("name", v),
                st.sampled_from([t.StartsWith, t.NotStartsWith, t.EqualTo]),
                st.text(alphabet="abc", max_size=3),
            ),
            st.builds(lambda v: t.In("id", v), st.sets(st.integers(-20, 20), min_size=2, max_size=4)),
            st.builds(lambda v: t.NotIn("ts", v), st.sets(ts_lit, min_size=2, max_size=3)),
            st.builds(lambda c: c("name"), st.sampled_from([t.IsNull, t.NotNull])),
        )

    expr = draw(
        st.recursive(
            leaf(),
            lambda c: st.one_of(st.builds(t.And, c, c), st.builds(t.Or, c, c), st.builds(t.Not, c)),
            max_leaves=5,
        )
    )
    return expr


def partition_of(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(f.transform.apply(row[f.source_id - 1], SCHEMA.find_type(f.source_id)) for f in SPEC.fields)


@settings(max_examples=300, deadline=None)
@given(filters(), rows_strategy)
def test_residual_applied_to_rows_equals_the_filter_and_projections_are_sound(
    expr: Expression, rows: list[tuple[Any, ...]]
) -> None:
    bound = bind(SCHEMA, expr)
    full = compile_row_filter(bound)
    residuals = ResidualEvaluator(SCHEMA, SPEC, expr)
    inclusive = compile_row_filter(inclusive_projection(SCHEMA, SPEC, expr))
    strict = compile_row_filter(strict_projection(SCHEMA, SPEC, expr))
    for row in rows:
        part = partition_of(row)
        residual = residuals.residual_for(part)
        assert compile_row_filter(residual)(row) == full(row), (residual, row, part)
        if full(row):
            assert inclusive(part)
        else:
            assert not strict(part)


def test_residual_drops_predicates_decided_by_the_partition() -> None:
    residuals = ResidualEvaluator(SCHEMA, SPEC, "ts >= '1970-01-02T00:00:00' AND id > 5")
    inside = residuals.residual_for((2, 49, 0, "ab"))
    assert str(inside) == "id > 5"
    boundary = residuals.residual_for((1, 24, 0, "ab"))
    assert str(boundary) == "id > 5"
    assert residuals.residual_for((0, 1, 0, "ab")) == t.AlwaysFalse()


def test_residual_is_the_filter_when_unpartitioned() -> None:
    residuals = ResidualEvaluator(SCHEMA, PartitionSpec(), "id = 1 OR name IS NULL")
    assert residuals.residual_for(()) == bind(SCHEMA, "id = 1 OR name IS NULL")


def test_nanosecond_timestamps_project_soundly() -> None:
    ns = _ref(TimestampNanoType())
    part = BoundReference(1000, "p", IntegerType(), (0,))
    for v in (-1, 0, 1, 3_600_000_000_000, -3_600_000_000_001):
        for cls in (t.LessThan, t.GreaterThan, t.EqualTo, t.NotEqualTo, t.GreaterThanOrEqual):
            pred = cls(ns, v)
            inc, strict = project(HourTransform(), part, pred), strict_project(HourTransform(), part, pred)
            for x in (v - 3_600_000_000_000, v - 1, v, v + 1, v + 3_600_000_000_000):
                p = HourTransform().apply(x, TimestampNanoType())
                if compile_row_filter(pred)((x,)):
                    assert holds(inc, p, True)
                elif strict is not None:
                    assert not holds(strict, p, False)


@pytest.mark.anyio
@pytest.mark.parametrize(("arrow_type", "lo"), [(pa.int64(), -(2**63)), (pa.int32(), -(2**31))])
async def test_truncate_partitions_of_the_lowest_values_wrap_and_are_still_planned(
    tmp_path: Any, arrow_type: pa.DataType, lo: int
) -> None:
    """truncate(3, v) of the type's lowest values wraps to the top of the range (Java's
    arithmetic): filters below must still plan those files, and a delete above must not
    take them whole."""
    import aioiceberg

    schema = pa.schema([pa.field("v", arrow_type)])
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=schema, partition_by=["truncate(3, v)"])
    values = [lo, lo + 1, lo + 2, -7, 0, 5, -lo - 1]
    for v in values:  # one file (and partition) per value
        await table.append(pa.table({"v": [v]}, schema=schema))

    async def rows(f: str) -> list[int]:
        return sorted((await table.scan(row_filter=f).to_arrow()).column("v").to_pylist())

    assert await rows(f"v < {lo // 2}") == [lo, lo + 1, lo + 2]
    assert await rows(f"v <= {lo + 1}") == [lo, lo + 1]
    assert await rows("v < 0") == [lo, lo + 1, lo + 2, -7]
    assert await rows(f"v > {lo + 1}") == [lo + 2, -7, 0, 5, -lo - 1]
    await table.delete("v > 3")
    assert await rows("") == [lo, lo + 1, lo + 2, -7, 0]
