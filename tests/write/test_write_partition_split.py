"""Splitting Arrow data by partition agrees with PyIceberg's transforms row by row."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg import transforms as pt
from pyiceberg.types import (
    BinaryType as PyBinary,
)
from pyiceberg.types import (
    DateType as PyDate,
)
from pyiceberg.types import (
    DecimalType as PyDecimal,
)
from pyiceberg.types import (
    IntegerType as PyInt,
)
from pyiceberg.types import (
    LongType as PyLong,
)
from pyiceberg.types import (
    StringType as PyString,
)
from pyiceberg.types import (
    TimestampType as PyTimestamp,
)
from pyiceberg.types import (
    TimestamptzType as PyTimestamptz,
)
from pyiceberg.types import (
    UUIDType as PyUUID,
)

from aioiceberg.errors import UnsupportedError
from aioiceberg.spec import values
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from aioiceberg.write.conform import conform_to_schema
from aioiceberg.write.location_provider import LocationProvider, partition_path
from aioiceberg.write.partition_split import split_by_partition

SCHEMA = Schema(
    NestedField(1, "i", IntegerType()),
    NestedField(2, "l", LongType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "ts", TimestampType()),
    NestedField(6, "tstz", TimestamptzType()),
    NestedField(7, "dec", DecimalType(10, 2)),
    NestedField(8, "b", BinaryType()),
    NestedField(9, "u", UUIDType()),
    NestedField(10, "st", StructType(NestedField(11, "inner", LongType()))),
)
PY_TYPES = {
    1: PyInt(),
    2: PyLong(),
    3: PyString(),
    4: PyDate(),
    5: PyTimestamp(),
    6: PyTimestamptz(),
    7: PyDecimal(10, 2),
    8: PyBinary(),
    9: PyUUID(),
    11: PyLong(),
}
N = 300


def _rows() -> pa.Table:
    base = dt.datetime(1969, 12, 30, 22, 0)
    data = {
        "i": pa.array([(-1) ** k * k * 7 if k % 13 else None for k in range(N)], pa.int32()),
        "l": [k * 1_000_003 - 5_000_000 for k in range(N)],
        "s": [f"key-{k % 17}-\u00e9{k}" if k % 11 else None for k in range(N)],
        "d": [dt.date(1969, 12, 1) + dt.timedelta(days=k * 3) for k in range(N)],
        "ts": [base + dt.timedelta(hours=k * 5, microseconds=k) for k in range(N)],
        "tstz": [
            (base + dt.timedelta(hours=k * 37)).replace(tzinfo=dt.UTC) if k % 5 else None for k in range(N)
        ],
        "dec": pa.array([decimal.Decimal(k * 37 - 4000) / 100 for k in range(N)], pa.decimal128(10, 2)),
        "b": [bytes([k % 7, k % 3, 255]) for k in range(N)],
        "u": pa.array([uuid.UUID(int=k * 0x9E3779B97F4A7C15).bytes for k in range(N)], pa.binary(16)),
        "st": [{"inner": k * 31 - 900} if k % 9 else None for k in range(N)],
    }
    return conform_to_schema(pa.table(data), SCHEMA)


def _py_value(v: Any, fid: int) -> Any:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return values.timestamp_to_micros(v)
    if isinstance(v, dt.date):
        return values.date_to_days(v)
    if fid == 9:
        return uuid.UUID(bytes=v) if isinstance(v, bytes) else v
    return v


CASES = [
    ("identity", [1, 3, 4, 9]),
    ("bucket[7]", [1, 2, 3, 4, 5, 6, 7, 8, 9, 11]),
    ("truncate[4]", [1, 2, 3, 7, 8]),
    ("year", [4, 5, 6]),
    ("month", [4, 5, 6]),
    ("day", [4, 5, 6]),
    ("hour", [5, 6]),
]


@pytest.mark.parametrize(("transform", "sources"), CASES, ids=[c[0] for c in CASES])
def test_rows_land_in_the_partition_pyiceberg_computes(transform: str, sources: list[int]) -> None:
    table = _rows()
    ours = parse_transform(transform)
    theirs = pt.parse_transform(transform)
    for sid in sources:
        spec = PartitionSpec.of(PartitionField((sid,), 1000, ours, "p"))
        parts = split_by_partition(table, SCHEMA, spec)
        assert sum(t.num_rows for _, t in parts) == N
        assert len({p for p, _ in parts}) == len(parts)
        name = SCHEMA.find_column_name(sid)
        assert name is not None
        fn = theirs.transform(PY_TYPES[sid])
        for partition, rows in parts:
            col = rows.column(name.split(".")[0]).to_pylist()
            if "." in name:
                col = [None if v is None else v["inner"] for v in col]
            for v in col:
                expected = fn(_py_value(v, sid))
                assert partition == (expected,), (transform, name, v)


def test_multi_field_spec_groups_by_all_fields_and_keeps_row_order() -> None:
    table = _rows()
    spec = PartitionSpec.of(
        PartitionField((4,), 1000, parse_transform("month"), "d_month"),
        PartitionField((3,), 1001, parse_transform("bucket[2]"), "s_bucket"),
        PartitionField((2,), 1002, parse_transform("void"), "l_null"),
    )
    parts = split_by_partition(table, SCHEMA, spec)
    assert all(p[2] is None for p, _ in parts)
    assert sum(t.num_rows for _, t in parts) == N
    for _, rows in parts:
        ls = rows.column("l").to_pylist()
        assert ls == sorted(ls)  # "l" increases with the row number: order kept


def test_unpartitioned_and_empty_inputs() -> None:
    table = _rows()
    assert split_by_partition(table, SCHEMA, PartitionSpec()) == [((), table)]
    spec = PartitionSpec.of(PartitionField((1,), 1000, parse_transform("identity"), "i"))
    assert split_by_partition(table.slice(0, 0), SCHEMA, spec) == []


def test_unknown_transforms_refuse_writes() -> None:
    spec = PartitionSpec.of(PartitionField((1,), 1000, parse_transform("zorder"), "z"))
    with pytest.raises(UnsupportedError):
        split_by_partition(_rows(), SCHEMA, spec)


def test_partition_paths_are_form_encoded_like_java_and_pyiceberg() -> None:
    schema = Schema(NestedField(1, "s", StringType()), NestedField(2, "ts", TimestamptzType()))
    spec = PartitionSpec.of(
        PartitionField((1,), 1000, parse_transform("identity"), "s key"),
        PartitionField((2,), 1001, parse_transform("hour"), "ts_hour"),
    )
    path = partition_path(spec, ("a b/c=d", 10), schema)
    assert path == "s+key=a+b%2Fc%3Dd/ts_hour=1970-01-01-10"
    provider = LocationProvider("s3://b/t/", {})
    name = provider.new_file_name(task=3, partition_index=2)
    assert provider.new_data_location(name, path).startswith("s3://b/t/data/s+key=a+b%2Fc%3Dd/ts_hour=")
    assert name.startswith("00002-3-") and name.endswith("-00001.parquet")
    assert provider.new_file_name() != provider.new_file_name()
    custom = LocationProvider("s3://b/t", {"write.data.path": "s3://other/place/"})
    assert custom.new_data_location("f.parquet") == "s3://other/place/f.parquet"
