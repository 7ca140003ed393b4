"""Column metrics from Parquet footers, checked against PyIceberg and against the data itself."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.schema import Schema as PySchema

from aioiceberg.errors import ValidationError
from aioiceberg.spec import values
from aioiceberg.spec.arrow import schema_to_arrow
from aioiceberg.spec.name_mapping import create_mapping_from_schema
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import schema_to_json
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
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.write.column_stats import (
    count_nans,
    metrics_from_parquet,
    metrics_modes,
    parse_metrics_mode,
    truncate_upper_bound,
)
from aioiceberg.write.conform import conform_to_schema

UTC = dt.UTC

PRIMITIVES = Schema(
    NestedField(1, "b", BooleanType()),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "l", LongType(), required=True),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "dec9", DecimalType(9, 2)),
    NestedField(7, "dec18", DecimalType(18, 4)),
    NestedField(8, "dec38", DecimalType(38, 10)),
    NestedField(9, "date", DateType()),
    NestedField(10, "time", TimeType()),
    NestedField(11, "ts", TimestampType()),
    NestedField(12, "tstz", TimestamptzType()),
    NestedField(13, "s", StringType()),
    NestedField(14, "u", UUIDType()),
    NestedField(15, "fx", FixedType(3)),
    NestedField(16, "bin", BinaryType()),
)

U1, U2 = uuid.UUID(int=5), uuid.UUID(int=2**127 + 9)
ROWS = {
    "b": [True, None, False, True],
    "i": [5, -3, None, 2**31 - 1],
    "l": [10, -(2**62), 7, 0],
    "f": [1.5, float("nan"), None, -2.25],
    "d": [float("nan"), 3.0, -0.0, 1e300],
    "dec9": [decimal.Decimal("1.25"), None, decimal.Decimal("-9999999.99"), decimal.Decimal("0.01")],
    "dec18": [decimal.Decimal("12345678901234.5678"), decimal.Decimal("-1.0000"), None, None],
    "dec38": [decimal.Decimal("1234567890123456789012345678.0123456789"), decimal.Decimal("-1"), None, None],
    "date": [dt.date(2024, 2, 29), dt.date(1969, 12, 31), None, dt.date(1, 1, 1)],
    "time": [dt.time(0, 0), dt.time(23, 59, 59, 999999), None, dt.time(12, 30)],
    "ts": [dt.datetime(2024, 1, 1, 12), dt.datetime(1960, 5, 5, 1, 2, 3, 4), None, dt.datetime(2030, 1, 1)],
    "tstz": [dt.datetime(2024, 1, 1, tzinfo=UTC), None, dt.datetime(1999, 12, 31, 23, tzinfo=UTC), None],
    "s": ["a" * 40, "zebra", None, "b\u00e9t\u00e9 \U0001f600 longer than sixteen characters"],
    "u": [U1.bytes, U2.bytes, None, None],
    "fx": [b"abc", b"\x00\x01\x02", None, b"\xff\xff\xff"],
    "bin": [b"\x00" * 20, b"\xff" * 20 + b"\x01", b"", None],
}


def _table(schema: Schema, rows: dict[str, list[Any]]) -> pa.Table:
    arrow = schema_to_arrow(schema)
    return conform_to_schema(
        pa.table({f.name: pa.array(rows[f.name], arrow.field(f.name).type) for f in arrow}), schema
    )


def _footer(table: pa.Table, row_group_size: int | None = None) -> pq.FileMetaData:
    buf = io.BytesIO()
    pq.write_table(table, buf, store_decimal_as_integer=True, row_group_size=row_group_size)
    return pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata


def _pyiceberg(md: pq.FileMetaData, schema: Schema, props: dict[str, str]) -> dict[str, Any]:
    py_schema = PySchema.model_validate(schema_to_json(schema))
    stats = data_file_statistics_from_parquet_metadata(
        md, compute_statistics_plan(py_schema, props), parquet_path_to_id_mapping(py_schema)
    )
    return stats.to_serialized_dict()


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"write.metadata.metrics.default": "full"},
        {"write.metadata.metrics.default": "counts"},
        {"write.metadata.metrics.default": "truncate(4)"},
        {"write.metadata.metrics.default": "none", "write.metadata.metrics.column.s": "truncate(2)"},
        {"write.metadata.metrics.column.bin": "none", "write.metadata.metrics.column.u": "counts"},
    ],
    ids=["default", "full", "counts", "truncate4", "none-but-s", "per-column"],
)
@pytest.mark.parametrize("row_group_size", [None, 1], ids=["one-row-group", "row-per-group"])
def test_primitive_metrics_equal_pyiceberg(props: dict[str, str], row_group_size: int | None) -> None:
    table = _table(PRIMITIVES, ROWS)
    md = _footer(table, row_group_size)
    ours = metrics_from_parquet(md, PRIMITIVES, props, count_nans(table, PRIMITIVES))
    theirs = _pyiceberg(md, PRIMITIVES, props)
    assert ours.record_count == theirs["record_count"] == 4
    assert ours.column_sizes == theirs["column_sizes"]
    assert ours.value_counts == theirs["value_counts"]
    assert ours.null_value_counts == theirs["null_value_counts"]
    assert ours.lower_bounds == theirs["lower_bounds"]
    assert ours.upper_bounds == theirs["upper_bounds"]
    assert ours.split_offsets == theirs["split_offsets"]
    # PyIceberg never records NaN counts; Java does for float/double unless mode is none.
    assert theirs["nan_value_counts"] == {}
    counted = parse_metrics_mode(props.get("write.metadata.metrics.default", "truncate(16)")).counts
    assert ours.nan_value_counts == ({4: 1, 5: 1} if counted else {})


def test_bounds_are_the_true_extremes_without_nan_or_null() -> None:
    table = _table(PRIMITIVES, ROWS)
    ours = metrics_from_parquet(_footer(table, 2), PRIMITIVES, {"write.metadata.metrics.default": "full"})
    for f in PRIMITIVES.fields:
        present = [v for v in table.column(f.name).to_pylist() if v is not None]
        present = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
        lo = values.from_bytes(ours.lower_bounds[f.field_id], f.field_type)
        hi = values.from_bytes(ours.upper_bounds[f.field_id], f.field_type)
        expected = [_convention(v, f.field_type) for v in present]
        assert (lo, hi) == (min(expected), max(expected)), f.name


def _convention(v: Any, t: Any) -> Any:
    if isinstance(v, dt.datetime):
        return values.timestamp_to_micros(v)
    if isinstance(v, dt.date):
        return values.date_to_days(v)
    if isinstance(v, dt.time):
        return values.time_to_micros(v)
    if isinstance(t, UUIDType):
        return uuid.UUID(bytes=v) if isinstance(v, bytes) else v
    return v


def test_truncated_string_and_binary_bounds_bracket_the_values() -> None:
    table = _table(PRIMITIVES, ROWS)
    ours = metrics_from_parquet(_footer(table), PRIMITIVES, {})
    assert ours.lower_bounds[13] == b"aaaaaaaaaaaaaaaa"
    assert ours.upper_bounds[13] == b"zebra"
    assert ours.lower_bounds[16] == b""
    # The 21-byte maximum starts with 20 x 0xff: no 16-byte value is >= it, so no upper bound.
    assert 16 not in ours.upper_bounds


def test_string_upper_bound_skips_code_points_that_cannot_grow() -> None:
    s = StringType()
    assert truncate_upper_bound("abcz", s, 3) == "abd"
    assert truncate_upper_bound("ab\U0010ffffz", s, 3) == "ac"  # max code point: bump the one before
    assert truncate_upper_bound("a\ud7ffz", s, 2) == "a\ue000"  # skips the surrogate block
    assert truncate_upper_bound("\U0010ffff\U0010ffffx", s, 2) is None
    b = BinaryType()
    assert truncate_upper_bound(b"\x01\xff\xff\x00", b, 3) == b"\x02"
    assert truncate_upper_bound(b"\xff\xff\x00", b, 2) is None
    assert truncate_upper_bound(b"\x01\x02", b, 2) == b"\x01\x02"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=20), st.integers(1, 8))
def test_truncated_string_bounds_hold_for_any_text(texts: list[str], width: int) -> None:
    texts = [t.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for t in texts]
    schema = Schema(NestedField(1, "s", StringType()))
    table = _table(schema, {"s": texts})
    m = metrics_from_parquet(_footer(table), schema, {"write.metadata.metrics.default": f"truncate({width})"})
    lo = values.from_bytes(m.lower_bounds[1], StringType())
    assert len(lo) <= width and all(lo <= t for t in texts)
    if 1 in m.upper_bounds:
        hi = values.from_bytes(m.upper_bounds[1], StringType())
        assert len(hi) <= width and all(hi >= t for t in texts)
    else:
        assert all(t[:width] == "\U0010ffff" * width for t in texts if len(t) > width)


NESTED = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(
        2,
        "point",
        StructType(NestedField(3, "x", DoubleType()), NestedField(4, "name", StringType(), required=True)),
    ),
    NestedField(5, "tags", ListType(6, StringType())),
    NestedField(7, "props", MapType(8, StringType(), 9, DoubleType())),
)
NESTED_ROWS = {
    "id": [1, 2, 3],
    "point": [{"x": 1.5, "name": "p"}, None, {"x": float("nan"), "name": "q"}],
    "tags": [["a", "b"], None, ["zz"]],
    "props": [[("k", 1.0), ("j", float("nan"))], None, [("k", 2.0)]],
}


def test_nested_counts_equal_pyiceberg_and_struct_fields_keep_bounds_like_java() -> None:
    table = _table(NESTED, NESTED_ROWS)
    md = _footer(table)
    ours = metrics_from_parquet(md, NESTED, {}, count_nans(table, NESTED))
    theirs = _pyiceberg(md, NESTED, {})
    assert ours.column_sizes == theirs["column_sizes"]
    assert ours.value_counts == theirs["value_counts"]
    assert ours.null_value_counts == theirs["null_value_counts"]
    assert ours.nan_value_counts == {3: 1, 9: 1}
    # PyIceberg keeps bounds for top-level columns only; Java (and we) also for struct fields,
    # never for list elements or map entries.
    assert theirs["lower_bounds"] == {1: ours.lower_bounds[1]}
    assert set(ours.lower_bounds) == set(ours.upper_bounds) == {1, 3, 4}
    assert values.from_bytes(ours.lower_bounds[3], DoubleType()) == 1.5
    assert (ours.lower_bounds[4], ours.upper_bounds[4]) == (b"p", b"q")


def test_files_without_field_ids_map_by_name_mapping() -> None:
    table = _table(PRIMITIVES, ROWS)
    plain = pa.table({f.name: table.column(f.name) for f in PRIMITIVES.fields})  # no field-id metadata
    renamed = plain.rename_columns([f"c{i}" for i in range(plain.num_columns)])
    md = _footer(renamed)
    from aioiceberg.spec.name_mapping import MappedField, NameMapping

    mapping = NameMapping(MappedField(f.field_id, (f"c{i}",)) for i, f in enumerate(PRIMITIVES.fields))
    by_mapping = metrics_from_parquet(md, PRIMITIVES, {}, name_mapping=mapping)
    with_ids = metrics_from_parquet(_footer(table), PRIMITIVES, {})
    assert by_mapping.lower_bounds == with_ids.lower_bounds
    assert by_mapping.value_counts == with_ids.value_counts
    assert create_mapping_from_schema(PRIMITIVES) is not None


def test_int_file_column_gets_long_bounds_in_a_long_table_column() -> None:
    file_schema = Schema(NestedField(1, "x", IntegerType()))
    table_schema = Schema(NestedField(1, "x", LongType()))
    md = _footer(_table(file_schema, {"x": [3, -7]}))
    m = metrics_from_parquet(md, table_schema, {})
    assert values.from_bytes(m.lower_bounds[1], LongType()) == -7
    assert len(m.upper_bounds[1]) == 8


def test_all_nan_and_all_null_columns_have_counts_but_no_bounds() -> None:
    schema = Schema(NestedField(1, "d", DoubleType()), NestedField(2, "s", StringType()))
    table = _table(schema, {"d": [float("nan")] * 3, "s": [None] * 3})
    m = metrics_from_parquet(_footer(table), schema, {}, count_nans(table, schema))
    assert (m.value_counts, m.null_value_counts, m.nan_value_counts) == ({1: 3, 2: 3}, {1: 0, 2: 3}, {1: 3})
    assert m.lower_bounds == m.upper_bounds == {}


def test_missing_statistics_drop_null_counts_and_bounds() -> None:
    schema = Schema(NestedField(1, "x", LongType()), NestedField(2, "y", LongType()))
    table = _table(schema, {"x": [1, None], "y": [3, 4]})
    buf = io.BytesIO()
    pq.write_table(table, buf, write_statistics=["y"])
    m = metrics_from_parquet(pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata, schema, {})
    assert m.value_counts == {1: 2, 2: 2}
    assert m.null_value_counts == {2: 0}
    assert set(m.lower_bounds) == {2}


def test_nanosecond_file_bounds_round_outwards_for_microsecond_columns() -> None:
    schema = Schema(NestedField(1, "ts", TimestampType()))
    arrow = pa.table({"ts": pa.array([1_500, 2_500], pa.timestamp("ns"))})
    buf = io.BytesIO()
    pq.write_table(arrow, buf, coerce_timestamps=None)
    md = pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata
    m = metrics_from_parquet(md, schema, {"write.metadata.metrics.default": "full"})
    assert values.from_bytes(m.lower_bounds[1], TimestampType()) == 1
    assert values.from_bytes(m.upper_bounds[1], TimestampType()) == 3


def test_metrics_modes_parse_and_reject_nonsense() -> None:
    assert str(parse_metrics_mode(" Truncate(8) ")) == "truncate(8)"
    assert str(parse_metrics_mode("FULL")) == "full"
    for bad in ("truncate(0)", "truncate", "bounds", "truncate(-1)"):
        with pytest.raises(ValidationError):
            parse_metrics_mode(bad)


def test_wide_tables_limit_inferred_default_metrics_like_java() -> None:
    schema = Schema(*(NestedField(i, f"c{i}", LongType()) for i in range(1, 121)))
    modes = metrics_modes(schema, {})
    assert [str(modes[i]) for i in (1, 100, 101, 120)] == ["truncate(16)", "truncate(16)", "none", "none"]
    assert str(metrics_modes(schema, {"write.metadata.metrics.default": "counts"})[120]) == "counts"
    explicit = metrics_modes(schema, {"write.metadata.metrics.column.c120": "full"})
    assert str(explicit[120]) == "full"
