"""Binding: name resolution, literal conversion per type, and folding of impossible predicates."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    BoundReference,
    EqualTo,
    In,
    IsNaN,
    IsNull,
    LessThan,
    bind,
    parse,
)
from aioiceberg.expressions.arrow_filter import RowMask, filter_table, to_arrow_expression
from aioiceberg.expressions.binding import bind_reference, bind_row_filter
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
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema(
    NestedField(1, "i", IntegerType(), required=True),
    NestedField(2, "l", LongType()),
    NestedField(3, "f", FloatType()),
    NestedField(4, "d", DoubleType()),
    NestedField(5, "dec", DecimalType(9, 2)),
    NestedField(6, "date", DateType()),
    NestedField(7, "time", TimeType()),
    NestedField(8, "ts", TimestampType()),
    NestedField(9, "tstz", TimestamptzType()),
    NestedField(10, "ts_ns", TimestampNanoType()),
    NestedField(11, "tstz_ns", TimestamptzNanoType()),
    NestedField(12, "s", StringType()),
    NestedField(13, "u", UUIDType()),
    NestedField(14, "b", BooleanType()),
    NestedField(15, "fx", FixedType(3)),
    NestedField(16, "bin", BinaryType()),
    NestedField(
        17, "loc", StructType(NestedField(18, "city", StringType()), NestedField(19, "zip", IntegerType()))
    ),
    NestedField(20, "tags", ListType(21, StringType())),
    NestedField(22, "Mixed", IntegerType()),
)


def value_of(text: str) -> Any:
    bound = bind(SCHEMA, text)
    assert isinstance(bound, EqualTo), bound
    return bound.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("l = 5", 5),
        ("l = '5'", 5),
        ("d = 1.5", 1.5),
        ("d = 2", 2.0),
        ("f = 0.1", 0.10000000149011612),  # the float32 nearest 0.1, as a float column stores it
        ("dec = 1.5", Decimal("1.50")),
        ("dec = 3", Decimal("3.00")),
        ("dec = '-0.25'", Decimal("-0.25")),
        ("date = '2024-05-01'", 19844),
        ("date = '1969-12-31'", -1),
        ("time = '01:00:00.5'", 3_600_500_000),
        ("ts = '2024-05-01T00:00:00'", 19844 * 86_400_000_000),
        ("ts = '2024-05-01'", 19844 * 86_400_000_000),
        ("tstz = '2024-05-01T02:00:00+02:00'", 19844 * 86_400_000_000),
        ("tstz = '2024-05-01T00:00:00Z'", 19844 * 86_400_000_000),
        ("ts_ns = '1970-01-01T00:00:00.000000001'", 1),
        ("tstz_ns = '1969-12-31T23:59:59.999999999-00:00'", -1),
        ("s = 'x'", "x"),
        ("u = 'f79c3e09-677c-4bbd-a479-3f349cb785e7'", uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")),
        ("b = true", True),
        ("b = 'false'", False),
        ("fx = X'010203'", b"\x01\x02\x03"),
        ("bin = X''", b""),
        ("loc.city = 'Paris'", "Paris"),
    ],
)
def test_literals_convert_to_the_column_type(text: str, expected: Any) -> None:
    value = value_of(text)
    assert value == expected
    assert type(value) is type(expected)


def test_python_values_convert_too() -> None:
    assert bind(SCHEMA, EqualTo("date", dt.date(1970, 1, 2))) == EqualTo(
        BoundReference(6, "date", DateType(), (5,)), 1
    )
    aware = dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert bind(SCHEMA, EqualTo("tstz", aware)).value == 0  # type: ignore[attr-defined]
    assert bind(SCHEMA, EqualTo("ts_ns", dt.datetime(1970, 1, 1, 0, 0, 1))).value == 10**9  # type: ignore[attr-defined]


def test_bound_reference_carries_id_type_and_position_path() -> None:
    bound = bind(SCHEMA, "loc.zip = 7")
    assert isinstance(bound, EqualTo)
    assert bound.ref == BoundReference(19, "loc.zip", IntegerType(), (16, 1))
    assert bound.ref.get((None,) * 16 + (("x", 7),)) == 7


def test_case_insensitive_binding() -> None:
    with pytest.raises(ExpressionError, match="'mixed'"):
        bind(SCHEMA, "mixed = 1")
    assert bind(SCHEMA, "mixed = 1", case_sensitive=False).ref.name == "Mixed"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nope = 1", "no column named 'nope'"),
        ("i = 'abc'", "'i'"),
        ("i = 1.5", "integer"),
        ("dec = 1.555", "fractional digits"),
        ("date = '2024-13-01'", "date"),
        ("ts = '2024-05-01T00:00:00+01:00'", "zone"),
        ("tstz = '2024-05-01T00:00:00'", "offset"),
        ("u = 'not-a-uuid'", "uuid"),
        ("fx = X'01'", "3 bytes"),
        ("s = 5", "string"),
        ("b = 1", "boolean"),
        ("l LIKE 'a%'", "string column"),
        ("loc = 1", "struct"),
        ("tags.element = 'x'", "list"),
    ],
)
def test_impossible_bindings_raise_naming_the_column(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError, match=fragment):
        bind(SCHEMA, text)


def test_nan_literal_is_rejected() -> None:
    with pytest.raises(ExpressionError, match="IS NAN"):
        bind(SCHEMA, EqualTo("d", float("nan")))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("l < 9223372036854775808", AlwaysTrue()),
        ("l <= 9223372036854775808", AlwaysTrue()),
        ("l > 9223372036854775808", AlwaysFalse()),
        ("l = 9223372036854775808", AlwaysFalse()),
        ("l != 9223372036854775808", AlwaysTrue()),
        ("l > -9223372036854775809", AlwaysTrue()),
        ("l < -9223372036854775809", AlwaysFalse()),
        ("loc.zip >= 2147483648", AlwaysFalse()),
        ("loc.zip < 2147483648", AlwaysTrue()),
        ("dec < 10000000", AlwaysTrue()),
        ("f > 1e39", AlwaysFalse()),
        ("i IS NULL", AlwaysFalse()),
        ("i IS NOT NULL", AlwaysTrue()),
        ("s IS NAN", AlwaysFalse()),
        ("s IS NOT NAN", AlwaysTrue()),
        ("l IN (9223372036854775808)", AlwaysFalse()),
        ("l NOT IN (9223372036854775808)", AlwaysTrue()),
        ("NOT (i IS NULL) AND true", AlwaysTrue()),
    ],
)
def test_out_of_range_literals_and_required_columns_fold_to_constants(text: str, expected: Any) -> None:
    assert bind(SCHEMA, text) == expected


def test_in_drops_out_of_range_values_and_collapses() -> None:
    bound = bind(SCHEMA, "l IN (1, 9223372036854775808)")
    assert isinstance(bound, EqualTo) and bound.value == 1
    bound = bind(SCHEMA, "l IN (1, 2, 3)")
    assert isinstance(bound, In) and bound.values == {1, 2, 3}


def test_isnan_on_float_stays_and_bound_str_is_readable() -> None:
    assert isinstance(bind(SCHEMA, "d IS NAN"), IsNaN)
    bound = bind(SCHEMA, "tstz < '2024-05-01T00:00:00+00:00' AND date >= '1969-12-31'")
    assert str(bound) == "tstz < '2024-05-01T00:00:00+00:00' AND date >= '1969-12-31'"
    assert parse(str(bound)) == parse("tstz < '2024-05-01T00:00:00+00:00' AND date >= '1969-12-31'")


def test_binding_a_bound_expression_is_an_error() -> None:
    bound = bind(SCHEMA, "l < 3")
    assert isinstance(bound, LessThan)
    with pytest.raises(ExpressionError, match="already bound"):
        bind(SCHEMA, bound)


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        # a comparison true for every value of the type is still unknown for NULL
        ("l < 9223372036854775808", "l IS NOT NULL"),
        ("l != 9223372036854775808", "l IS NOT NULL"),
        ("NOT l = 9223372036854775808", "l IS NOT NULL"),
        ("NOT (l >= 9223372036854775808 OR l IS NULL)", "l IS NOT NULL AND l IS NOT NULL"),
        ("l NOT IN (9223372036854775808)", "l IS NOT NULL"),
        ("NOT l IN (9223372036854775808, -9223372036854775809)", "l IS NOT NULL"),
        ("loc.zip < 2147483648", "loc.zip IS NOT NULL"),
        ("s IS NOT NAN", "s IS NOT NULL"),
        ("NOT l < 9223372036854775808", "false"),
        ("i < 2147483648", "true"),  # required: never NULL
        # a float column holds the infinities, beyond any finite literal
        ("f < 1e39", "f < 'inf'"),
        ("f <= 1e39", "f < 'inf'"),
        ("f > 1e39", "f = 'inf'"),
        ("NOT f < 1e39", "f = 'inf'"),
        ("f >= -1e39", "f > '-inf'"),
        ("f < -1e39", "f = '-inf'"),
        ("f != 1e39", "f IS NOT NULL"),
        ("f = 1e39", "false"),
    ],
)
def test_row_filters_fold_literals_beyond_the_type_to_sqls_answer(text: str, same_as: str) -> None:
    """Folding a comparison with an out-of-range literal to ``true`` returned NULL rows
    (and +/-infinity in float columns) that SQL does not return."""
    assert bind_row_filter(SCHEMA, text) == bind_row_filter(SCHEMA, same_as)


def test_row_filters_beyond_the_type_keep_nulls_and_infinities_out() -> None:
    rows = pa.table(
        {
            "l": pa.array([1, None, 2], pa.int64()),
            "f": pa.array([float("inf"), 1.5, None], pa.float32()),
        }
    )
    schema = Schema(NestedField(1, "l", LongType()), NestedField(2, "f", FloatType()))

    def kept(text: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = rows.filter(
            to_arrow_expression(bind_row_filter(schema, text))
        ).to_pylist()
        return out

    assert kept("l < 9223372036854775808") == [{"l": 1, "f": float("inf")}, {"l": 2, "f": None}]
    assert kept("NOT l = 9223372036854775808") == kept("l < 9223372036854775808")
    assert kept("f < 1e39") == [{"l": None, "f": 1.5}]
    assert kept("f > 1e39") == [{"l": 1, "f": float("inf")}]


def test_a_required_field_inside_an_optional_struct_is_null_where_the_struct_is() -> None:
    """``IS NULL`` folded to false on any required field, so a filter (and a delete) read a
    NULL struct's required field as a value: ``DELETE WHERE s.r IS NOT NULL`` removed it."""
    schema = Schema(
        NestedField(1, "s", StructType(NestedField(2, "r", IntegerType(), required=True))),
        NestedField(3, "t", StructType(NestedField(4, "r", IntegerType(), required=True)), required=True),
    )
    assert bind(schema, "s.r IS NULL") == IsNull(bind_reference(schema, "s.r"))
    assert not bind_reference(schema, "s.r").required
    assert bind(schema, "t.r IS NULL") == AlwaysFalse()
    rows = pa.table(
        {
            "s": pa.array([{"r": 1}, None], pa.struct([pa.field("r", pa.int32(), nullable=False)])),
            "t": pa.array([{"r": 1}, {"r": 2}], pa.struct([pa.field("r", pa.int32(), nullable=False)])),
        }
    )
    kept = rows.filter(to_arrow_expression(bind_row_filter(schema, "s.r IS NOT NULL")))
    assert kept.column("t").to_pylist() == [{"r": 1}]
    masked = RowMask(bind_row_filter(schema, "s.r IS NOT NULL")).filter(rows.to_batches()[0])
    assert masked.column("t").to_pylist() == [{"r": 1}]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("u = 'f79c3e09-677c-4bbd-a479-3f349cb785e7'", [0]),
        ("u != 'f79c3e09-677c-4bbd-a479-3f349cb785e7'", [1]),  # SQL: NULL != x is not true
        ("u IN ('f79c3e09-677c-4bbd-a479-3f349cb785e7', '00000000-0000-0000-0000-000000000001')", [0, 1]),
        ("s.u IS NULL", [1]),
        ("s.u = '00000000-0000-0000-0000-000000000001'", [2]),
    ],
)
def test_masks_compare_uuid_columns_by_their_storage_at_any_depth(text: str, kept: list[int]) -> None:
    """pyarrow has no kernels for the uuid extension type: the mask compares its storage and
    the rows keep their type, as the expression filter does."""
    one, other = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), uuid.UUID(int=1)
    schema = Schema(
        NestedField(1, "row", LongType(), required=True),
        NestedField(2, "u", UUIDType()),
        NestedField(3, "s", StructType(NestedField(4, "u", UUIDType()))),
    )
    batch = pa.record_batch(
        {
            "row": pa.array([0, 1, 2], pa.int64()),
            "u": pa.array([one.bytes, other.bytes, None], pa.uuid()),
            "s": pa.StructArray.from_arrays(
                [pa.array([one.bytes, None, other.bytes], pa.uuid())], names=["u"]
            ),
        }
    )
    bound = bind_row_filter(schema, text)
    masked = RowMask(bound).filter(batch)
    assert masked.column("row").to_pylist() == kept
    assert masked.schema == batch.schema
    assert (
        filter_table(pa.Table.from_batches([batch]), to_arrow_expression(bound)).column("row").to_pylist()
        == kept
    )


def test_masks_take_constants_inside_and_or_and_alone() -> None:
    """Binding folds constants away, but an expression built directly may keep them: the mask
    then combines Arrow scalars, as the expression filter combines its own."""
    from aioiceberg.expressions.tree import AlwaysFalse, And, Or

    schema = Schema(NestedField(1, "l", LongType()))
    batch = pa.record_batch({"l": pa.array([1, None, 5], pa.int64())})
    small = bind_row_filter(schema, "l < 3")
    cases = {
        Or(small, AlwaysTrue()): [1, None, 5],
        And(small, AlwaysTrue()): [1],
        Or(small, AlwaysFalse()): [1],
        And(small, AlwaysFalse()): [],
        AlwaysTrue(): [1, None, 5],
        AlwaysFalse(): [],
    }
    for expr, kept in cases.items():
        assert RowMask(expr).filter(batch).column("l").to_pylist() == kept, expr
        assert batch.filter(to_arrow_expression(expr)).column("l").to_pylist() == kept, expr
