"""Partition transforms: spec examples, pre-1970 edge cases, and agreement with PyIceberg."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg import transforms as pt
from pyiceberg import types as pyt

from aioiceberg.errors import UnsupportedError, ValidationError
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
    bucket_hash,
    parse_transform,
)
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import parse_date, parse_time, parse_timestamp, unscaled_to_decimal

# --------------------------------------------------------------------------- Appendix B


@pytest.mark.parametrize(
    ("value", "type_", "expected"),
    [
        (34, IntegerType(), 2017239379),
        (34, LongType(), 2017239379),
        (Decimal("14.20"), DecimalType(9, 2), -500754589),
        (parse_date("2017-11-16"), DateType(), -653330422),
        (parse_time("22:31:08"), TimeType(), -662762989),
        (parse_timestamp("2017-11-16T22:31:08"), TimestampType(), -2047944441),
        (parse_timestamp("2017-11-16T14:31:08-08:00", utc=True), TimestamptzType(), -2047944441),
        # timestamp_ns hashes as micros, so it buckets like the microsecond column
        (parse_timestamp("2017-11-16T22:31:08", nanos=True), TimestampNanoType(), -2047944441),
        (
            parse_timestamp("2017-11-16T14:31:08-08:00", utc=True, nanos=True),
            TimestamptzNanoType(),
            -2047944441,
        ),
        ("iceberg", StringType(), 1210000089),
        (uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), UUIDType(), 1488055340),
        # The flattened spec text drops this sign; the published spec and Java's tests say -188683207.
        (b"\x00\x01\x02\x03", FixedType(4), -188683207),
        (b"\x00\x01\x02\x03", BinaryType(), -188683207),
        (True, BooleanType(), 1392991556),
        (1.0, FloatType(), -142385009),
        (1.0, DoubleType(), -142385009),
    ],
)
def test_appendix_b_hashes(value: Any, type_: IcebergType, expected: int) -> None:
    assert bucket_hash(value, type_) == expected
    if BucketTransform(16).can_transform(type_):
        assert BucketTransform(16).apply(value, type_) == (expected & 0x7FFFFFFF) % 16


def test_uuid_bytes_are_big_endian() -> None:
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    assert u.bytes == bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7")


def test_decimal_hash_ignores_representation_scale() -> None:
    # The type's scale defines the unscaled value, whatever exponent the Decimal carries.
    assert bucket_hash(Decimal("14.2"), DecimalType(9, 2)) == -500754589


def test_bucket_not_for_boolean_or_float() -> None:
    for t in (BooleanType(), FloatType(), DoubleType()):
        assert not BucketTransform(4).can_transform(t)
        with pytest.raises(ValidationError):
            BucketTransform(4).apply(1.0, t)


# --------------------------------------------------------------------------- truncate


@pytest.mark.parametrize(
    ("width", "value", "type_", "expected"),
    [
        (10, 1, IntegerType(), 0),
        (10, -1, IntegerType(), -10),
        (10, 10, IntegerType(), 10),
        (10, -10, IntegerType(), -10),
        (10, 1, LongType(), 0),
        (10, -1, LongType(), -10),
        (50, Decimal("10.65"), DecimalType(9, 2), Decimal("10.50")),
        (50, Decimal("-0.05"), DecimalType(9, 2), Decimal("-0.50")),
        (3, "iceberg", StringType(), "ice"),
        (3, "ic", StringType(), "ic"),
        (2, "a\U0001f600bc", StringType(), "a\U0001f600"),  # code points, not UTF-16 units
        (2, "éé1", StringType(), "éé"),  # code points, not bytes
        (3, b"\x00\x01\x02\x03", BinaryType(), b"\x00\x01\x02"),
    ],
)
def test_truncate_spec_examples(width: int, value: Any, type_: IcebergType, expected: Any) -> None:
    out = TruncateTransform(width).apply(value, type_)
    assert out == expected
    if isinstance(expected, Decimal):
        assert out.as_tuple().exponent == expected.as_tuple().exponent


def test_truncate_wraps_like_java_at_the_minimum() -> None:
    assert TruncateTransform(10).apply(-(2**31), IntegerType()) == 2**31 - 2
    assert TruncateTransform(10).apply(-(2**63), LongType()) == 2**63 - 2
    arr = pa.array([-(2**31)], pa.int32())
    assert TruncateTransform(10).apply_arrow(arr, IntegerType()).to_pylist() == [2**31 - 2]


def test_truncate_rejects_other_types() -> None:
    for t in (DateType(), FixedType(3), UUIDType(), DoubleType()):
        assert not TruncateTransform(3).can_transform(t)


# --------------------------------------------------------------------------- time transforms


def test_time_transforms_before_1970() -> None:
    ts = TimestampType()
    assert YearTransform().apply(-1, ts) == -1
    assert MonthTransform().apply(-1, ts) == -1
    assert DayTransform().apply(-1, ts) == -1
    assert HourTransform().apply(-1, ts) == -1
    d = DateType()
    assert YearTransform().apply(-1, d) == -1
    assert MonthTransform().apply(-1, d) == -1
    assert DayTransform().apply(-1, d) == -1
    ns = TimestampNanoType()
    assert [
        t.apply(-1, ns) for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    ] == [
        -1,
        -1,
        -1,
        -1,
    ]
    v = parse_timestamp("1969-01-01T00:00:00")
    assert (YearTransform().apply(v, ts), MonthTransform().apply(v, ts)) == (-1, -12)
    v = parse_timestamp("1968-12-31T23:59:59.999999")
    assert (YearTransform().apply(v, ts), MonthTransform().apply(v, ts)) == (-2, -13)
    assert DayTransform().apply(v, ts) == parse_date("1968-12-31")
    assert HourTransform().apply(parse_timestamp("1969-12-31T22:30:00"), ts) == -2


def test_time_transforms_known_values() -> None:
    v = parse_timestamp("2024-05-01T13:45:00")
    ts = TimestampType()
    assert YearTransform().apply(v, ts) == 54
    assert MonthTransform().apply(v, ts) == 54 * 12 + 4
    assert DayTransform().apply(v, ts) == parse_date("2024-05-01")
    assert HourTransform().apply(v, ts) == parse_date("2024-05-01") * 24 + 13
    assert DayTransform().result_type(ts) == DateType()
    assert YearTransform().result_type(ts) == IntegerType()
    assert not HourTransform().can_transform(DateType())


def test_time_transforms_outside_python_datetime_range() -> None:
    days = parse_date("+12000-03-01")
    assert YearTransform().apply(days, DateType()) == 12000 - 1970
    assert MonthTransform().apply(days, DateType()) == (12000 - 1970) * 12 + 2
    assert DayTransform().to_human_string(days, DateType()) == "+12000-03-01"


# --------------------------------------------------------------------------- strings, parse, equality


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("identity", IdentityTransform()),
        (" IDENTITY ", IdentityTransform()),
        ("bucket[16]", BucketTransform(16)),
        ("Bucket[ 16 ]", BucketTransform(16)),
        ("truncate[10]", TruncateTransform(10)),
        ("year", YearTransform()),
        ("Month", MonthTransform()),
        ("day", DayTransform()),
        ("hour", HourTransform()),
        ("void", VoidTransform()),
        ("zorder", UnknownTransform("zorder")),
        ("bucket[0]", UnknownTransform("bucket[0]")),
        ("bucket[x]", UnknownTransform("bucket[x]")),
        ("Geo_Hash[3] ", UnknownTransform("Geo_Hash[3] ")),
    ],
)
def test_parse_transform(text: str, expected: Transform) -> None:
    t = parse_transform(text)
    assert t == expected
    assert hash(t) == hash(expected)
    assert parse_transform(str(t)) == t


def test_str_forms() -> None:
    assert [str(t) for t in (IdentityTransform(), BucketTransform(16), TruncateTransform(10))] == [
        "identity",
        "bucket[16]",
        "truncate[10]",
    ]
    assert [str(t) for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform())] == [
        "year",
        "month",
        "day",
        "hour",
    ]
    assert str(VoidTransform()) == "void"
    assert str(UnknownTransform("Z-Order(a, b)")) == "Z-Order(a, b)"


def test_equality_and_hashing() -> None:
    assert BucketTransform(16) == BucketTransform(16)
    assert BucketTransform(16) != BucketTransform(8)
    assert BucketTransform(10) != TruncateTransform(10)  # type: ignore[comparison-overlap]
    assert IdentityTransform() != VoidTransform()  # type: ignore[comparison-overlap]
    assert (
        len({YearTransform(), YearTransform(), MonthTransform(), BucketTransform(2), BucketTransform(2)}) == 3
    )
    with pytest.raises(AttributeError):
        BucketTransform(16).num_buckets = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        BucketTransform(0)
    with pytest.raises(ValidationError):
        TruncateTransform(-1)


def test_flags() -> None:
    assert VoidTransform().is_void and not VoidTransform().is_unknown
    assert UnknownTransform("x").is_unknown and not UnknownTransform("x").is_void
    assert IdentityTransform().is_identity
    assert not BucketTransform(2).is_void


def test_unknown_transform_is_kept_but_never_applied() -> None:
    t = UnknownTransform("zorder")
    assert t.can_transform(LongType())
    assert t.result_type(LongType()) == StringType()
    with pytest.raises(UnsupportedError):
        t.apply(1, LongType())
    with pytest.raises(UnsupportedError):
        t.apply_arrow(pa.array([1]), LongType())


def test_void_and_identity() -> None:
    assert VoidTransform().apply(5, LongType()) is None
    assert VoidTransform().result_type(LongType()) == LongType()
    assert VoidTransform().apply_arrow(pa.array([1, 2]), LongType()).to_pylist() == [None, None]
    assert VoidTransform().to_human_string(5, LongType()) == "null"
    assert IdentityTransform().apply("x", StringType()) == "x"
    for t in (IdentityTransform(), BucketTransform(3), YearTransform()):
        assert t.apply(None, LongType() if not isinstance(t, YearTransform) else DateType()) is None


def test_apply_rejects_wrong_source() -> None:
    with pytest.raises(ValidationError):
        YearTransform().apply(1, StringType())
    with pytest.raises(ValidationError):
        BucketTransform(4).apply("x", LongType())


# --------------------------------------------------------------------------- order


def test_preserves_order() -> None:
    assert IdentityTransform().preserves_order
    assert TruncateTransform(3).preserves_order
    assert all(
        t.preserves_order for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    )
    assert not BucketTransform(4).preserves_order
    assert not VoidTransform().preserves_order
    assert not UnknownTransform("x").preserves_order


def test_satisfies_order_of() -> None:
    ident, year, month, day, hour = (
        IdentityTransform(),
        YearTransform(),
        MonthTransform(),
        DayTransform(),
        HourTransform(),
    )
    # identity satisfies anything order-preserving
    assert all(ident.satisfies_order_of(t) for t in (ident, year, day, TruncateTransform(4)))
    assert not ident.satisfies_order_of(BucketTransform(4))
    assert not ident.satisfies_order_of(VoidTransform())
    # finer time granularity satisfies coarser
    assert hour.satisfies_order_of(day) and hour.satisfies_order_of(month) and hour.satisfies_order_of(year)
    assert day.satisfies_order_of(month) and day.satisfies_order_of(year) and month.satisfies_order_of(year)
    assert day.satisfies_order_of(day)
    assert not year.satisfies_order_of(month) and not day.satisfies_order_of(hour)
    assert not day.satisfies_order_of(ident)
    # buckets only themselves
    assert BucketTransform(4).satisfies_order_of(BucketTransform(4))
    assert not BucketTransform(4).satisfies_order_of(BucketTransform(8))
    # truncate: longer string prefixes refine shorter ones; integer widths must nest
    assert TruncateTransform(5).satisfies_order_of(TruncateTransform(5))
    assert TruncateTransform(5).satisfies_order_of(TruncateTransform(3), StringType())
    assert not TruncateTransform(3).satisfies_order_of(TruncateTransform(5), StringType())
    assert TruncateTransform(5).satisfies_order_of(TruncateTransform(10), LongType())
    assert not TruncateTransform(3).satisfies_order_of(TruncateTransform(10), LongType())
    assert not TruncateTransform(10).satisfies_order_of(TruncateTransform(5), LongType())
    assert not TruncateTransform(5).satisfies_order_of(TruncateTransform(3))  # source unknown
    assert not TruncateTransform(5).satisfies_order_of(ident)
    assert UnknownTransform("x").satisfies_order_of(UnknownTransform("x"))
    assert not UnknownTransform("x").satisfies_order_of(UnknownTransform("y"))


# --------------------------------------------------------------------------- human strings


@pytest.mark.parametrize(
    ("transform", "value", "type_", "expected"),
    [
        (DayTransform(), parse_date("2024-05-01"), TimestampType(), "2024-05-01"),
        (HourTransform(), parse_date("2024-05-01") * 24 + 13, TimestampType(), "2024-05-01-13"),
        (MonthTransform(), 54 * 12 + 4, TimestampType(), "2024-05"),
        (MonthTransform(), -1, DateType(), "1969-12"),
        (YearTransform(), 54, TimestampType(), "2024"),
        (HourTransform(), -1, TimestampType(), "1969-12-31-23"),
        (YearTransform(), None, DateType(), "null"),
        (IdentityTransform(), None, StringType(), "null"),
        (IdentityTransform(), "a/b c", StringType(), "a/b c"),
        (IdentityTransform(), b"\x00\x01", BinaryType(), "AAE="),
        (IdentityTransform(), True, BooleanType(), "true"),
        (IdentityTransform(), parse_date("2024-05-01"), DateType(), "2024-05-01"),
        (IdentityTransform(), parse_timestamp("2024-05-01T10:00:00"), TimestampType(), "2024-05-01T10:00:00"),
        (
            IdentityTransform(),
            parse_timestamp("2024-05-01T10:00:00.5Z", utc=True),
            TimestamptzType(),
            "2024-05-01T10:00:00.500000+00:00",
        ),
        (
            IdentityTransform(),
            parse_timestamp("2024-05-01T10:00:00.000000001", nanos=True),
            TimestampNanoType(),
            "2024-05-01T10:00:00.000000001",
        ),
        (IdentityTransform(), Decimal("14.20"), DecimalType(9, 2), "14.20"),
        (BucketTransform(16), 3, LongType(), "3"),
        (TruncateTransform(2), b"\xff\xfe", BinaryType(), "//4="),
        (TruncateTransform(2), "ab", StringType(), "ab"),
        (VoidTransform(), None, LongType(), "null"),
    ],
)
def test_to_human_string(transform: Transform, value: Any, type_: IcebergType, expected: str) -> None:
    assert transform.to_human_string(value, type_) == expected


# --------------------------------------------------------------------------- agreement with PyIceberg

DATE_MIN, DATE_MAX = -719_162, 2_932_896  # years 1..9999, PyIceberg's datetime range
TS_MIN, TS_MAX = DATE_MIN * 86_400_000_000, (DATE_MAX + 1) * 86_400_000_000 - 1


def _pyi_type(t: PrimitiveType) -> Any:
    if isinstance(t, DecimalType):
        return pyt.DecimalType(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pyt.FixedType(t.length)
    return {
        IntegerType: pyt.IntegerType,
        LongType: pyt.LongType,
        DateType: pyt.DateType,
        TimeType: pyt.TimeType,
        TimestampType: pyt.TimestampType,
        TimestamptzType: pyt.TimestamptzType,
        TimestampNanoType: pyt.TimestampNanoType,
        TimestamptzNanoType: pyt.TimestamptzNanoType,
        StringType: pyt.StringType,
        UUIDType: pyt.UUIDType,
        BinaryType: pyt.BinaryType,
        BooleanType: pyt.BooleanType,
        FloatType: pyt.FloatType,
        DoubleType: pyt.DoubleType,
    }[type(t)]()


def _decimals(p: int, s: int) -> st.SearchStrategy[Decimal]:
    return st.integers(-(10**p) + 1, 10**p - 1).map(lambda u: unscaled_to_decimal(u, s))


# type, value strategy, Arrow type
CASES: list[tuple[PrimitiveType, st.SearchStrategy[Any], Any]] = [
    (IntegerType(), st.integers(-(2**31), 2**31 - 1), pa.int32()),
    (LongType(), st.integers(-(2**63), 2**63 - 1), pa.int64()),
    (DateType(), st.integers(DATE_MIN, DATE_MAX), pa.date32()),
    (TimeType(), st.integers(0, 86_400_000_000 - 1), pa.time64("us")),
    (TimestampType(), st.integers(TS_MIN, TS_MAX), pa.timestamp("us")),
    (TimestamptzType(), st.integers(TS_MIN, TS_MAX), pa.timestamp("us", tz="UTC")),
    (TimestampNanoType(), st.integers(-(2**63), 2**63 - 1), pa.timestamp("ns")),
    (TimestamptzNanoType(), st.integers(-(2**63), 2**63 - 1), pa.timestamp("ns", tz="UTC")),
    (DecimalType(9, 2), _decimals(9, 2), pa.decimal128(9, 2)),
    (DecimalType(38, 10), _decimals(38, 10), pa.decimal128(38, 10)),
    (StringType(), st.text(max_size=12), pa.string()),
    (UUIDType(), st.uuids(), pa.binary(16)),
    (FixedType(5), st.binary(min_size=5, max_size=5), pa.binary(5)),
    (BinaryType(), st.binary(max_size=12), pa.binary()),
]

TRANSFORMS: list[tuple[Transform, Any]] = [
    (BucketTransform(16), pt.BucketTransform(16)),
    (BucketTransform(1_000_003), pt.BucketTransform(1_000_003)),
    (TruncateTransform(1), pt.TruncateTransform(1)),
    (TruncateTransform(7), pt.TruncateTransform(7)),
    (YearTransform(), pt.YearTransform()),
    (MonthTransform(), pt.MonthTransform()),
    (DayTransform(), pt.DayTransform()),
    (HourTransform(), pt.HourTransform()),
    (IdentityTransform(), pt.IdentityTransform()),
]


def _arrow_array(values: list[Any], type_: PrimitiveType, arrow_type: Any) -> Any:
    if isinstance(type_, UUIDType):
        values = [None if v is None else v.bytes for v in values]
    if pa.types.is_date32(arrow_type):
        return pa.array(values, pa.int32()).view(pa.date32())
    if pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type):
        return pa.array(values, pa.int64()).view(arrow_type)
    return pa.array(values, arrow_type)


def _wrap(value: Any, type_: PrimitiveType) -> Any:
    bits = {IntegerType: 32, LongType: 64}.get(type(type_))
    if bits is None or value is None:
        return value
    return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


TimeTransformTypes = YearTransform | MonthTransform | DayTransform | HourTransform

PAIRS = [
    pytest.param(ours, theirs, t, strat, at, id=f"{ours}-{t}")
    for ours, theirs in TRANSFORMS
    for t, strat, at in CASES
    if ours.can_transform(t)
]


@pytest.mark.parametrize(("ours", "theirs", "type_", "values", "arrow_type"), PAIRS)
def test_matches_pyiceberg(
    ours: Transform, theirs: Any, type_: PrimitiveType, values: st.SearchStrategy[Any], arrow_type: Any
) -> None:
    pyi_type = _pyi_type(type_)
    assert theirs.can_transform(pyi_type)
    fn = theirs.transform(pyi_type)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.one_of(st.none(), values, values, values), max_size=60))
    def check(batch: list[Any]) -> None:
        expected = [_wrap(fn(v), type_) for v in batch]
        got = [ours.apply(v, type_) for v in batch]
        assert got == expected
        arr = _arrow_array(batch, type_, arrow_type)
        arrow_out = ours.apply_arrow(arr, type_)
        if isinstance(ours, IdentityTransform):
            assert arrow_out.equals(arr)
            return
        assert arrow_out.to_pylist() == got
        human = [ours.to_human_string(v, type_) for v in got]
        if isinstance(ours, TruncateTransform | BucketTransform | TimeTransformTypes):
            assert human == [theirs.to_human_string(pyi_type, v) for v in got]

    check()


@pytest.mark.parametrize(
    ("type_", "values"),
    [
        (t, s)
        for t, s, _ in CASES
        if not isinstance(t, TimestampNanoType | TimestamptzNanoType)  # PyIceberg renders those as raw ints
    ]
    + [(BooleanType(), st.booleans()), (DoubleType(), st.floats(allow_nan=False))],
)
def test_identity_human_string_matches_pyiceberg(
    type_: PrimitiveType, values: st.SearchStrategy[Any]
) -> None:
    pyi_type = _pyi_type(type_)

    @settings(max_examples=150, deadline=None)
    @given(values)
    def check(v: Any) -> None:
        assert IdentityTransform().to_human_string(v, type_) == pt.IdentityTransform().to_human_string(
            pyi_type, v
        )

    check()


def test_apply_arrow_chunked_and_units() -> None:
    arr = pa.chunked_array([pa.array([0, None], pa.int64()), pa.array([-1], pa.int64())])
    out = DayTransform().apply_arrow(arr.cast(pa.timestamp("us")), TimestampType())
    assert isinstance(out, pa.ChunkedArray)
    assert out.to_pylist() == [0, None, -1]
    # a millisecond Arrow column for a microsecond source
    ms = pa.array([-1, 3_600_000], pa.timestamp("ms"))
    assert HourTransform().apply_arrow(ms, TimestampType()).to_pylist() == [-1, 1]
    assert BucketTransform(16).apply_arrow(ms, TimestampType()).to_pylist() == [
        BucketTransform(16).apply(v, TimestampType()) for v in (-1000, 3_600_000_000)
    ]
    # a tz-aware column in another zone still transforms its UTC instant
    ny = pa.array([0], pa.timestamp("us", tz="America/New_York"))
    assert DayTransform().apply_arrow(ny, TimestamptzType()).to_pylist() == [0]
    # plain ints in the Iceberg unit are accepted too
    assert YearTransform().apply_arrow(pa.array([-1, None], pa.int32()), DateType()).to_pylist() == [-1, None]
    assert YearTransform().apply_arrow(pa.array([0]), DateType()).type == pa.int32()


def test_apply_arrow_matches_scalar_outside_datetime_range() -> None:
    days = [-(2**31), -1_000_000_000, DATE_MIN - 1, DATE_MAX + 1, 2**31 - 1]
    arr = pa.array(days, pa.int32()).view(pa.date32())
    date_transforms: list[Transform] = [YearTransform(), MonthTransform(), DayTransform(), BucketTransform(7)]
    for t in date_transforms:
        assert t.apply_arrow(arr, DateType()).to_pylist() == [t.apply(d, DateType()) for d in days]
    micros = [-(2**62), 2**62, TS_MIN - 1, TS_MAX + 1]
    tarr = pa.array(micros, pa.int64()).view(pa.timestamp("us"))
    ts_transforms: list[Transform] = [YearTransform(), MonthTransform(), DayTransform(), HourTransform()]
    for t in ts_transforms:
        assert t.apply_arrow(tarr, TimestampType()).to_pylist() == [
            t.apply(m, TimestampType()) for m in micros
        ]
