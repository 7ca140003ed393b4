"""JSON forms of content files, file scan tasks and row-filter expressions (Appendix C)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    ResidualEvaluator,
    StartsWith,
    bind,
)
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    read_manifest,
    read_manifest_list,
)
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.scan_tasks import (
    FileScanTask,
    content_file_from_json,
    content_file_to_json,
    file_scan_task_from_json,
    file_scan_task_to_json,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
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
from aioiceberg.spec.values import to_bytes

U1 = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "tstz", TimestamptzType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "f", FloatType()),
    NestedField(7, "amount", DecimalType(9, 2)),
    NestedField(8, "day", DateType()),
    NestedField(9, "t", TimeType()),
    NestedField(10, "u", UUIDType()),
    NestedField(11, "b", BinaryType()),
    NestedField(12, "fx", FixedType(4)),
    NestedField(13, "flag", BooleanType()),
    NestedField(14, "i", IntegerType()),
    NestedField(15, "ts_ns", TimestampNanoType()),
    NestedField(16, "tstz_ns", TimestamptzNanoType()),
    NestedField(17, "s", StructType(NestedField(18, "inner", StringType()))),
    schema_id=4,
)


def _pf(source: int, fid: int, transform: str, name: str) -> PartitionField:
    return PartitionField((source,), fid, parse_transform(transform), name)


SPEC = PartitionSpec(
    3,
    (
        _pf(1, 1000, "bucket[16]", "id_bucket"),
        _pf(2, 1001, "truncate[3]", "name_trunc"),
        _pf(3, 1002, "hour", "ts_hour"),
        _pf(4, 1003, "day", "tstz_day"),
        _pf(5, 1004, "identity", "d"),
        _pf(7, 1005, "identity", "amount"),
        _pf(8, 1006, "identity", "day"),
        _pf(9, 1007, "identity", "t"),
        _pf(10, 1008, "identity", "u"),
        _pf(11, 1009, "identity", "b"),
        _pf(12, 1010, "identity", "fx"),
        _pf(13, 1011, "identity", "flag"),
        _pf(15, 1012, "identity", "ts_ns"),
        _pf(16, 1013, "identity", "tstz_ns"),
        _pf(14, 1014, "void", "i_void"),
        _pf(18, 1015, "identity", "inner"),
    ),
)
PARTITION = (
    7,
    "abc",
    475_000,
    19_844,
    -1.5,
    Decimal("12.30"),
    19_844,
    81_068_123_456,
    U1,
    b"\x00\x01\xff",
    b"\x00\x01\x02\xff",
    True,
    1_510_871_468_123_456_789,
    -1,
    None,
    "x",
)


def _roundtrip(obj: Any) -> Any:
    """Through real, strict JSON text: no NaN tokens, no Python-only values."""
    return json.loads(json.dumps(obj, allow_nan=False))


def _data_file(**kw: Any) -> DataFile:
    base: dict[str, Any] = {
        "content": DataFileContent.DATA,
        "file_path": "s3://b/wh/data.db/table/data/00000-0.parquet",
        "file_format": FileFormat.PARQUET,
        "partition": PARTITION,
        "record_count": 12,
        "file_size_in_bytes": 4096,
        "column_sizes": {1: 100, 2: 200},
        "value_counts": {1: 12, 2: 12},
        "null_value_counts": {1: 0, 2: 3},
        "nan_value_counts": {5: 1},
        "lower_bounds": {1: to_bytes(1, LongType()), 2: b"a"},
        "upper_bounds": {1: to_bytes(99, LongType()), 2: b"z\xff"},
        "key_metadata": bytes(range(16)),
        "split_offsets": (4, 2048),
        "sort_order_id": 1,
        "first_row_id": 1000,
        "spec_id": SPEC.spec_id,
    }
    base.update(kw)
    return DataFile(**base)


def _pos_delete(**kw: Any) -> DataFile:
    return _data_file(
        content=DataFileContent.POSITION_DELETES,
        file_path="s3://b/wh/data.db/table/data/dv-0.puffin",
        file_format=FileFormat.PUFFIN,
        sort_order_id=None,
        first_row_id=None,
        referenced_data_file="s3://b/wh/data.db/table/data/00000-0.parquet",
        content_offset=4,
        content_size_in_bytes=120,
        **kw,
    )


def _eq_delete(**kw: Any) -> DataFile:
    return _data_file(
        content=DataFileContent.EQUALITY_DELETES,
        file_path="s3://b/wh/data.db/table/data/eq-0.parquet",
        equality_ids=(1, 2),
        first_row_id=None,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# Content files


@pytest.mark.parametrize("make", [_data_file, _pos_delete, _eq_delete])
def test_every_content_file_field_round_trips(make: Any) -> None:
    f = make()
    obj = _roundtrip(content_file_to_json(f, SPEC, SCHEMA))
    assert content_file_from_json(obj, {SPEC.spec_id: SPEC}, SCHEMA) == f


def test_content_file_json_shape() -> None:
    obj = _roundtrip(content_file_to_json(_data_file(), SPEC, SCHEMA))
    assert obj["spec-id"] == 3
    assert obj["content"] == "DATA"
    assert obj["file-format"] == "PARQUET"
    assert obj["column-sizes"] == {"keys": [1, 2], "values": [100, 200]}
    assert obj["lower-bounds"] == {"keys": [1, 2], "values": ["0100000000000000", "61"]}
    assert obj["key-metadata"] == bytes(range(16)).hex().upper()
    assert obj["split-offsets"] == [4, 2048]
    assert obj["first-row-id"] == 1000
    # partition: keyed by partition field id, JSON single values typed by the partition type,
    # null values left out
    assert obj["partition"] == {
        "1000": 7,
        "1001": "abc",
        "1002": 475_000,
        "1003": "2024-05-01",  # day transform results are dates
        "1004": -1.5,
        "1005": "12.30",
        "1006": "2024-05-01",
        "1007": "22:31:08.123456",
        "1008": str(U1),
        "1009": "0001ff",
        "1010": "000102ff",
        "1011": True,
        "1012": "2017-11-16T22:31:08.123456789",
        "1013": "1969-12-31T23:59:59.999999999+00:00",
        "1015": "x",
    }
    assert "equality-ids" not in obj and "referenced-data-file" not in obj


def test_unpartitioned_file_writes_an_empty_partition_object() -> None:
    spec = PartitionSpec(0, ())
    f = _data_file(partition=(), spec_id=0, key_metadata=None, column_sizes=None)
    obj = content_file_to_json(f, spec, SCHEMA)
    assert obj["partition"] == {}
    assert "key-metadata" not in obj and "column-sizes" not in obj
    assert content_file_from_json(_roundtrip(obj), {0: spec}, SCHEMA) == f


def test_non_finite_partition_floats_are_strict_json() -> None:
    f = _data_file(partition=(None,) * 4 + (float("inf"),) + (None,) * 11)
    obj = _roundtrip(content_file_to_json(f, SPEC, SCHEMA))
    assert obj["partition"] == {"1004": "Infinity"}
    assert content_file_from_json(obj, {3: SPEC}, SCHEMA).partition[4] == float("inf")


def test_spec_table_examples_decode_to_what_they_say() -> None:
    # Every example from the Content File table of the spec, in one object.
    spec = PartitionSpec(1, (_pf(14, 1000, "identity", "i"),))
    obj = json.loads(
        """{
        "spec-id": 1, "content": "POSITION_DELETES", "file-path": "s3://b/wh/data.db/table",
        "file-format": "AVRO", "partition": {"1000":1}, "record-count": 1,
        "file-size-in-bytes": 1024,
        "column-sizes": {"keys":[3,4],"values":[100,200]},
        "value-counts": {"keys":[3,4],"values":[90,180]},
        "null-value-counts": {"keys":[3,4],"values":[10,20]},
        "nan-value-counts": {"keys":[3,4],"values":[0,0]},
        "lower-bounds": {"keys":[3,4],"values":["01000000","02000000"]},
        "upper-bounds": {"keys":[3,4],"values":["05000000","0A000000"]},
        "key-metadata": "00000000000000000000000000000000",
        "split-offsets": [128,256], "equality-ids": [1], "sort-order-id": 1
        }"""
    )
    f = content_file_from_json(obj, {1: spec}, SCHEMA)
    assert f == DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path="s3://b/wh/data.db/table",
        file_format=FileFormat.AVRO,
        partition=(1,),
        record_count=1,
        file_size_in_bytes=1024,
        column_sizes={3: 100, 4: 200},
        value_counts={3: 90, 4: 180},
        null_value_counts={3: 10, 4: 20},
        nan_value_counts={3: 0, 4: 0},
        lower_bounds={3: to_bytes(1, IntegerType()), 4: to_bytes(2, IntegerType())},
        upper_bounds={3: to_bytes(5, IntegerType()), 4: to_bytes(10, IntegerType())},
        key_metadata=bytes(16),
        split_offsets=(128, 256),
        equality_ids=(1,),
        sort_order_id=1,
        spec_id=1,
    )
    for content in ("DATA", "EQUALITY_DELETES"):
        assert content_file_from_json({**obj, "content": content}, {1: spec}, SCHEMA).content.name == content


def test_json_single_value_table_examples_decode_in_partitions() -> None:
    # The Appendix D JSON single-value examples, as partition values of identity fields.
    examples: list[tuple[Any, Any, Any]] = [
        (BooleanType(), True, True),
        (IntegerType(), 34, 34),
        (LongType(), 34, 34),
        (FloatType(), 1.0, 1.0),
        (DoubleType(), 1.0, 1.0),
        (DecimalType(4, 2), "14.20", Decimal("14.20")),
        (DateType(), "2017-11-16", 17_486),
        (TimeType(), "22:31:08.123456", 81_068_123_456),
        (TimestampType(), "2017-11-16T22:31:08.123456", 1_510_871_468_123_456),
        (TimestamptzType(), "2017-11-16T22:31:08.123456+00:00", 1_510_871_468_123_456),
        (TimestampNanoType(), "2017-11-16T22:31:08.123456789", 1_510_871_468_123_456_789),
        (TimestamptzNanoType(), "2017-11-16T22:31:08.123456789+00:00", 1_510_871_468_123_456_789),
        (StringType(), "iceberg", "iceberg"),
        (UUIDType(), "f79c3e09-677c-4bbd-a479-3f349cb785e7", U1),
        (FixedType(4), "000102ff", b"\x00\x01\x02\xff"),
        (BinaryType(), "000102ff", b"\x00\x01\x02\xff"),
    ]
    schema = Schema(*(NestedField(i + 1, f"c{i}", t) for i, (t, _, _) in enumerate(examples)))
    spec = PartitionSpec(0, tuple(_pf(i + 1, 1000 + i, "identity", f"c{i}") for i in range(len(examples))))
    obj = {
        "spec-id": 0,
        "content": "DATA",
        "file-path": "f",
        "file-format": "PARQUET",
        "partition": {str(1000 + i): text for i, (_, text, _) in enumerate(examples)},
        "record-count": 1,
        "file-size-in-bytes": 1,
    }
    f = content_file_from_json(obj, {0: spec}, schema)
    assert f.partition == tuple(value for _, _, value in examples)
    assert content_file_to_json(f, spec, schema)["partition"] == obj["partition"]


def test_newer_java_forms_are_read() -> None:
    obj = _roundtrip(content_file_to_json(_eq_delete(), SPEC, SCHEMA))
    theirs = {**obj, "content": "equality-deletes", "file-format": "parquet"}
    theirs["partition"] = [obj["partition"].get(str(f.field_id)) for f in SPEC.fields]
    lower = {**obj["lower-bounds"], "values": [v.lower() for v in obj["lower-bounds"]["values"]]}
    theirs["lower-bounds"] = lower
    assert content_file_from_json(theirs, {3: SPEC}, SCHEMA) == _eq_delete()


_counts = st.dictionaries(st.integers(1, 2**31 - 1), st.integers(0, 2**63 - 1), max_size=5)
_bounds = st.dictionaries(st.integers(1, 2**31 - 1), st.binary(max_size=20), max_size=5)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.tuples(*[st.none() | _counts] * 4),
    bounds=st.tuples(*[st.none() | _bounds] * 2),
    key=st.none() | st.binary(max_size=32),
    offsets=st.none() | st.lists(st.integers(0, 2**63 - 1), max_size=4).map(tuple),
    records=st.integers(0, 2**63 - 1),
    path=st.text(min_size=1),
)
def test_random_metrics_round_trip(
    counts: tuple[Any, ...],
    bounds: tuple[Any, ...],
    key: bytes | None,
    offsets: tuple[int, ...] | None,
    records: int,
    path: str,
) -> None:
    f = _data_file(
        file_path=path,
        record_count=records,
        column_sizes=counts[0],
        value_counts=counts[1],
        null_value_counts=counts[2],
        nan_value_counts=counts[3],
        lower_bounds=bounds[0],
        upper_bounds=bounds[1],
        key_metadata=key,
        split_offsets=offsets,
    )
    obj = _roundtrip(content_file_to_json(f, SPEC, SCHEMA))
    assert content_file_from_json(obj, {3: SPEC}, SCHEMA) == f


def test_writing_checks_spec_and_partition_arity() -> None:
    with pytest.raises(ValidationError, match="spec id"):
        content_file_to_json(_data_file(spec_id=9), SPEC, SCHEMA)
    with pytest.raises(ValidationError, match="partition tuple"):
        content_file_to_json(_data_file(partition=(1,)), SPEC, SCHEMA)
    with pytest.raises(ValidationError, match="name_trunc"):
        content_file_to_json(_data_file(partition=(1, 2, *PARTITION[2:])), SPEC, SCHEMA)


_GOOD = content_file_to_json(_data_file(), SPEC, SCHEMA)


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in _GOOD.items() if k != key}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ([], "content file"),
        (_without("file-path"), "file-path"),
        (_without("spec-id"), "spec-id"),
        ({**_GOOD, "spec-id": 8}, "spec-id"),
        ({**_GOOD, "spec-id": "3"}, "spec-id"),
        (_without("content"), "content"),
        ({**_GOOD, "content": "ROWS"}, "content"),
        ({**_GOOD, "file-format": "CSV"}, "file-format"),
        (_without("record-count"), "record-count"),
        ({**_GOOD, "record-count": True}, "record-count"),
        ({**_GOOD, "file-size-in-bytes": 1.5}, "file-size-in-bytes"),
        ({**_GOOD, "partition": "x"}, "partition"),
        ({**_GOOD, "partition": [1, 2]}, "partition"),
        ({**_GOOD, "partition": {"999": 1}}, "partition"),
        ({**_GOOD, "partition": {"1006": 19844}}, "partition"),  # a date must be a string
        ({**_GOOD, "column-sizes": [1, 2]}, "column-sizes"),
        ({**_GOOD, "value-counts": {"keys": [1], "values": []}}, "value-counts"),
        ({**_GOOD, "null-value-counts": {"keys": ["a"], "values": [1]}}, "null-value-counts"),
        ({**_GOOD, "nan-value-counts": {"keys": [1], "values": ["1"]}}, "nan-value-counts"),
        ({**_GOOD, "lower-bounds": {"keys": [1], "values": ["0g"]}}, "lower-bounds"),
        ({**_GOOD, "upper-bounds": {"keys": [1], "values": ["012"]}}, "upper-bounds"),
        ({**_GOOD, "key-metadata": 5}, "key-metadata"),
        ({**_GOOD, "split-offsets": [1, "2"]}, "split-offsets"),
        ({**_GOOD, "equality-ids": 1}, "equality-ids"),
        ({**_GOOD, "sort-order-id": "1"}, "sort-order-id"),
        ({**_GOOD, "referenced-data-file": 1}, "referenced-data-file"),
    ],
)
def test_malformed_content_files_name_the_field(obj: Any, field: str) -> None:
    with pytest.raises(InvalidMetadataError, match=field):
        content_file_from_json(obj, {3: SPEC}, SCHEMA)


# ---------------------------------------------------------------------------------------------
# A data file from a PyIceberg-written manifest


def test_pyiceberg_written_data_files_round_trip(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField as PyPartitionField
    from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import DateType as PyDateType
    from pyiceberg.types import DecimalType as PyDecimalType
    from pyiceberg.types import LongType as PyLongType
    from pyiceberg.types import NestedField as PyNestedField
    from pyiceberg.types import StringType as PyStringType
    from pyiceberg.types import TimestampType as PyTimestampType

    from aioiceberg.spec.schema_json import partition_spec_from_json, schema_from_json

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t",
        PySchema(
            PyNestedField(1, "id", PyLongType(), required=False),
            PyNestedField(2, "region", PyStringType(), required=False),
            PyNestedField(3, "day", PyDateType(), required=False),
            PyNestedField(4, "amount", PyDecimalType(10, 2), required=False),
            PyNestedField(5, "ts", PyTimestampType(), required=False),
        ),
        partition_spec=PyPartitionSpec(
            PyPartitionField(2, 1000, IdentityTransform(), "region"),
            PyPartitionField(3, 1001, IdentityTransform(), "day"),
            PyPartitionField(5, 1002, DayTransform(), "ts_day"),
        ),
        properties={"format-version": "2"},
    )
    table.append(
        pa.table(
            {
                "id": pa.array([1, 2, 3, None], pa.int64()),
                "region": pa.array(["eu", "us", "eu", None], pa.string()),
                "day": pa.array([dt.date(2024, 5, 1)] * 3 + [None], pa.date32()),
                "amount": pa.array(
                    [Decimal("1.50"), None, Decimal("-2.25"), Decimal("0")], pa.decimal128(10, 2)
                ),
                "ts": pa.array(
                    [dt.datetime(2024, 5, 1, 3), None, dt.datetime(2024, 5, 2), None], pa.timestamp("us")
                ),
            }
        )
    )
    table = catalog.load_table("db.t")
    schema = schema_from_json(json.loads(table.schema().model_dump_json()))
    spec = partition_spec_from_json(json.loads(table.spec().model_dump_json()))
    local = Path(table.current_snapshot().manifest_list.removeprefix("file://"))
    files = []
    for mf in read_manifest_list(local.read_bytes()):
        data = Path(mf.manifest_path.removeprefix("file://")).read_bytes()
        files += [e.data_file for e in read_manifest(data, mf).entries]
    assert len(files) == 4  # one per partition, one of them all-null
    assert any(all(v is None for v in f.partition) for f in files)
    for f in files:
        assert f.lower_bounds and f.column_sizes
        obj = _roundtrip(content_file_to_json(f, spec, schema))
        assert content_file_from_json(obj, {spec.spec_id: spec}, schema) == f
        task = FileScanTask(f, (), bind(schema, "id > 1 and amount < 1"), spec, schema)
        assert file_scan_task_from_json(_roundtrip(file_scan_task_to_json(task))).file == f


# ---------------------------------------------------------------------------------------------
# File scan tasks


def _task(**kw: Any) -> FileScanTask:
    base: dict[str, Any] = {
        "file": _data_file(),
        "delete_files": (_pos_delete(), _eq_delete()),
        "residual": bind(SCHEMA, "name = 'abc' and amount >= 1.5"),
        "spec": SPEC,
        "schema": SCHEMA,
    }
    base.update(kw)
    return FileScanTask(**base)


def _same_task(a: FileScanTask, b: FileScanTask) -> None:
    assert (a.file, a.delete_files, a.spec, a.schema, a.start, a.length) == (
        b.file,
        b.delete_files,
        b.spec,
        b.schema,
        b.start,
        b.length,
    )
    assert bind(a.schema, b.residual) == a.residual


def test_file_scan_task_round_trips() -> None:
    task = _task()
    obj = _roundtrip(file_scan_task_to_json(task))
    assert set(obj) == {"schema", "spec", "data-file", "delete-files", "residual-filter"}
    assert obj["residual-filter"] == {
        "type": "and",
        "left": {"type": "eq", "term": "name", "value": "abc"},
        "right": {"type": "gt-eq", "term": "amount", "value": "1.50"},
    }
    back = file_scan_task_from_json(obj)
    _same_task(task, back)
    assert back.residual == And(EqualTo("name", "abc"), GreaterThanOrEqual("amount", Decimal("1.50")))


def test_split_task_writes_start_and_length() -> None:
    task = _task(start=4, length=1000, delete_files=[])
    obj = _roundtrip(file_scan_task_to_json(task))
    assert (obj["start"], obj["length"], obj["delete-files"]) == (4, 1000, [])
    back = file_scan_task_from_json(obj)
    assert isinstance(back.delete_files, tuple)
    _same_task(task, back)


def test_residual_from_a_residual_evaluator_round_trips() -> None:
    expr = "id > 5 and (f < 2.5 or name = 'abcdef' or i in (1, 2)) and b != X'00ff'"
    evaluator = ResidualEvaluator(SCHEMA, SPEC, expr)
    residual = evaluator.residual_for(PARTITION)
    assert not isinstance(residual, AlwaysTrue | AlwaysFalse)
    task = _task(residual=residual)
    _same_task(task, file_scan_task_from_json(_roundtrip(file_scan_task_to_json(task))))


def test_global_unpartitioned_deletes_with_another_spec() -> None:
    global_delete = _eq_delete(partition=(), spec_id=0)
    task = _task(delete_files=(global_delete,))
    obj = _roundtrip(file_scan_task_to_json(task))
    assert obj["delete-files"][0]["spec-id"] == 0
    _same_task(task, file_scan_task_from_json(obj))
    with pytest.raises(ValidationError, match="spec"):
        file_scan_task_to_json(_task(delete_files=(_eq_delete(spec_id=1),)))


def test_absent_optional_task_fields_take_defaults() -> None:
    obj = _roundtrip(file_scan_task_to_json(_task()))
    del obj["delete-files"], obj["residual-filter"]
    back = file_scan_task_from_json(obj)
    assert back.delete_files == () and back.residual == AlwaysTrue()
    assert (back.start, back.length) == (0, None)


def test_bad_task_arguments() -> None:
    with pytest.raises(ValidationError):
        _task(start=-1)
    with pytest.raises(ValidationError):
        _task(length=-1)


_TASK = file_scan_task_to_json(_task())


def _task_with(**changes: Any) -> dict[str, Any]:
    obj = copy.deepcopy(_TASK)
    for k, v in changes.items():
        key = k.replace("_", "-")
        if v is KeyError:
            del obj[key]
        else:
            obj[key] = v
    return obj


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ("task", "file scan task"),
        (_task_with(schema=KeyError), "schema"),
        (_task_with(schema={"fields": 1}), "schema"),
        (_task_with(spec=KeyError), "spec"),
        (_task_with(spec={"fields": []}), "spec"),
        (_task_with(data_file=KeyError), "data-file"),
        (_task_with(data_file=_TASK["delete-files"][0]), "data-file"),
        (_task_with(delete_files={}), "delete-files"),
        (_task_with(delete_files=[_TASK["data-file"]]), "delete-files"),
        (_task_with(delete_files=[{**_TASK["delete-files"][0], "spec-id": 1}]), "spec-id"),
        (_task_with(residual_filter={"type": "eq", "term": "id"}), "residual-filter"),
        (_task_with(start="0"), "start"),
        (_task_with(length=-5), "length"),
    ],
)
def test_malformed_tasks_name_the_field(obj: Any, field: str) -> None:
    with pytest.raises(InvalidMetadataError, match=field):
        file_scan_task_from_json(obj)


# ---------------------------------------------------------------------------------------------
# Expressions


def test_spec_example_residual() -> None:
    assert expression_from_json({"type": "eq", "term": "id", "value": 1}) == EqualTo("id", 1)


UNBOUND: list[tuple[Expression, Any]] = [
    (EqualTo("id", 1), {"type": "eq", "term": "id", "value": 1}),
    (NotEqualTo("id", 1), {"type": "not-eq", "term": "id", "value": 1}),
    (LessThan("x", 2.5), {"type": "lt", "term": "x", "value": 2.5}),
    (LessThanOrEqual("x", "a"), {"type": "lt-eq", "term": "x", "value": "a"}),
    (GreaterThan("x", True), {"type": "gt", "term": "x", "value": True}),
    (GreaterThanOrEqual("x", -3), {"type": "gt-eq", "term": "x", "value": -3}),
    (StartsWith("s", "ab"), {"type": "starts-with", "term": "s", "value": "ab"}),
    (NotStartsWith("s", "ab"), {"type": "not-starts-with", "term": "s", "value": "ab"}),
    (IsNull("a"), {"type": "is-null", "term": "a"}),
    (NotNull("a"), {"type": "not-null", "term": "a"}),
    (IsNaN("a"), {"type": "is-nan", "term": "a"}),
    (NotNaN("a"), {"type": "not-nan", "term": "a"}),
    (In("c", [3, 1, 2]), {"type": "in", "term": "c", "values": [1, 2, 3]}),
    (NotIn("c", ["b", "a"]), {"type": "not-in", "term": "c", "values": ["a", "b"]}),
    (EqualTo("m", Decimal("1.20")), {"type": "eq", "term": "m", "value": "1.20"}),
    (
        And(EqualTo("a", 1), Or(IsNull("b"), Not(LessThan("c", 2)))),
        {
            "type": "and",
            "left": {"type": "eq", "term": "a", "value": 1},
            "right": {
                "type": "or",
                "left": {"type": "is-null", "term": "b"},
                "right": {"type": "not", "child": {"type": "lt", "term": "c", "value": 2}},
            },
        },
    ),
    (AlwaysTrue(), {"type": "true"}),
    (AlwaysFalse(), {"type": "false"}),
]


@pytest.mark.parametrize(("expr", "expected"), UNBOUND)
def test_unbound_expression_json(expr: Expression, expected: Any) -> None:
    assert expression_to_json(expr) == expected
    back = expression_from_json(_roundtrip(expected))
    if isinstance(expr, EqualTo) and isinstance(expr.value, Decimal):
        assert back == EqualTo("m", "1.20")  # unbound, a JSON string; binding makes it a decimal
    else:
        assert back == expr


def _pyiceberg_equivalent(expr: Expression) -> Any:
    import pyiceberg.expressions as pe

    if isinstance(expr, AlwaysTrue | AlwaysFalse):
        return pe.AlwaysTrue() if isinstance(expr, AlwaysTrue) else pe.AlwaysFalse()
    if isinstance(expr, And | Or):
        cls = pe.And if isinstance(expr, And) else pe.Or
        return cls(_pyiceberg_equivalent(expr.left), _pyiceberg_equivalent(expr.right))
    if isinstance(expr, Not):
        return pe.Not(_pyiceberg_equivalent(expr.child))
    cls = getattr(pe, type(expr).__name__)
    name = expr.term.name  # type: ignore[attr-defined]
    if hasattr(expr, "values"):
        return cls(name, set(expr.values))
    if hasattr(expr, "value"):
        return cls(name, expr.value)
    return cls(name)


@pytest.mark.parametrize(("expr", "expected"), UNBOUND)
def test_json_matches_pyiceberg(expr: Expression, expected: Any) -> None:
    theirs = json.loads(_pyiceberg_equivalent(expr).model_dump_json())
    if isinstance(expr, AlwaysTrue | AlwaysFalse):
        assert theirs is isinstance(expr, AlwaysTrue)  # PyIceberg (like Java) writes bare booleans
        assert expression_from_json(theirs) == expr
        return
    if "values" in theirs:  # a set: PyIceberg's order is arbitrary
        theirs["values"] = sorted(theirs["values"])
    assert theirs == expected
    assert expression_from_json(theirs) == expression_from_json(expected)


def test_java_parser_forms_are_read() -> None:
    # Shapes from Java's ExpressionParser tests and reader: wrapped literals, reference
    # objects, bare and literal constants, upper-case or underscored operation names.
    assert expression_from_json(True) == AlwaysTrue()
    assert expression_from_json(False) == AlwaysFalse()
    assert expression_from_json({"type": "literal", "value": True}) == AlwaysTrue()
    assert expression_from_json({"type": "literal", "value": False}) == AlwaysFalse()
    assert expression_from_json(
        {"type": "lt", "term": {"type": "reference", "term": "column-name"}, "value": 50}
    ) == LessThan("column-name", 50)
    assert expression_from_json(
        {"type": "in", "term": "column-name", "values": [{"type": "literal", "value": 1}, 2]}
    ) == In("column-name", [1, 2])
    assert expression_from_json({"type": "NOT_EQ", "term": "x", "value": 1}) == NotEqualTo("x", 1)
    assert expression_from_json(
        {"type": "and", "left": True, "right": {"type": "not", "child": {"type": "is-nan", "term": "d"}}}
    ) == And(AlwaysTrue(), Not(IsNaN("d")))


def test_unbound_python_literals() -> None:
    cases = [
        (dt.date(2017, 11, 16), "2017-11-16"),
        (dt.time(22, 31, 8), "22:31:08.000000"),
        (dt.datetime(2017, 11, 16, 22, 31, 8), "2017-11-16T22:31:08.000000"),
        (
            dt.datetime(2017, 11, 17, 0, 31, 8, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2017-11-16T22:31:08.000000+00:00",
        ),
        (U1, str(U1)),
        (b"\x00\xff", "00ff"),
        (Decimal("2E+20"), "2E+20"),
        (float("inf"), "Infinity"),
    ]
    for value, text in cases:
        assert expression_to_json(EqualTo("c", value))["value"] == text
    with pytest.raises(ValidationError):
        expression_to_json(EqualTo("c", object()))


BOUND_FILTERS = [
    "id = 5",
    "id in (1, 2, 3)",
    "id not in (1, 2)",
    "name like 'ab%'",
    "name not like 'ab%'",
    "name is null",
    "d is nan",
    "f is not nan",
    "f > 1.1",
    "d <= -2.5e300",
    "amount = 12.3",
    "day < '2017-11-16'",
    "t >= '22:31:08.123456'",
    "ts > '2017-11-16T22:31:08.123456'",
    "tstz != '2017-11-16T22:31:08.123456+00:00'",
    "ts_ns > '2017-11-16T22:31:08.123456789'",
    "tstz_ns <= '2017-11-16T22:31:08.123456789+00:00'",
    "u = 'f79c3e09-677c-4bbd-a479-3f349cb785e7'",
    "flag = true",
    "i < 7",
    "s.inner = 'x'",
    "not (id = 5 or name = 'q')",
]


@pytest.mark.parametrize("text", BOUND_FILTERS)
def test_bound_expressions_rebind_equal(text: str) -> None:
    bound = bind(SCHEMA, text)
    obj = _roundtrip(expression_to_json(bound))
    again = bind(SCHEMA, expression_from_json(obj, SCHEMA))
    assert again == bound


def test_bound_binary_literals_need_the_schema() -> None:
    bound = bind(SCHEMA, EqualTo("b", b"\x00\xff"))
    obj = expression_to_json(bound)
    assert obj == {"type": "eq", "term": "b", "value": "00ff"}
    assert expression_from_json(obj, SCHEMA) == EqualTo("b", b"\x00\xff")
    assert bind(SCHEMA, expression_from_json(obj, SCHEMA)) == bound
    # without a schema the hex string stays a string
    assert expression_from_json(obj) == EqualTo("b", "00ff")


def test_bound_literals_use_the_column_type_json_form() -> None:
    assert expression_to_json(bind(SCHEMA, "day = '2017-11-16'"))["value"] == "2017-11-16"
    assert expression_to_json(bind(SCHEMA, "amount in (1.5, 2)"))["values"] == ["1.50", "2.00"]
    assert expression_to_json(bind(SCHEMA, "tstz = '2017-11-17T00:31:08+02:00'"))["value"] == (
        "2017-11-16T22:31:08.000000+00:00"
    )
    assert expression_to_json(bind(SCHEMA, "s.inner = 'x'"))["term"] == "s.inner"


def test_schema_decoding_keeps_literals_in_other_forms_for_binding() -> None:
    # An unbound int day count for a date column is not the JSON form of a date; binding judges it.
    expr = expression_from_json({"type": "eq", "term": "day", "value": 17486}, SCHEMA)
    assert expr == EqualTo("day", 17486)
    assert bind(SCHEMA, expr) == bind(SCHEMA, "day = '2017-11-16'")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (None, "expression"),
        (1, "expression"),
        ({}, "type"),
        ({"type": 1}, "type"),
        ({"type": "xor"}, "xor"),
        ({"type": "and", "left": True}, "right"),
        ({"type": "or", "right": True}, "left"),
        ({"type": "not"}, "child"),
        ({"type": "not", "child": "x"}, r"expression\.child"),
        ({"type": "and", "left": True, "right": {"type": "eq"}}, r"expression\.right"),
        ({"type": "eq", "term": "x"}, "value"),
        ({"type": "eq", "term": "x", "value": 1, "values": [1]}, "values"),
        ({"type": "in", "term": "x", "value": 1}, "values"),
        ({"type": "in", "term": "x", "values": 1}, "values"),
        ({"type": "in", "term": "x", "values": [1, None]}, r"values\[1\]"),
        ({"type": "is-null", "term": "x", "value": 1}, "value"),
        ({"type": "eq", "term": 5, "value": 1}, "term"),
        (
            {"type": "eq", "term": {"type": "transform", "transform": "day", "term": "ts"}, "value": 1},
            "transform",
        ),
        ({"type": "eq", "term": "x", "value": [1]}, "value"),
        ({"type": "eq", "term": "x", "value": {"type": "other", "value": 1}}, "value"),
        ({"type": "literal", "value": "yes"}, "boolean"),
    ],
)
def test_malformed_expressions_raise(obj: Any, message: str) -> None:
    with pytest.raises(InvalidMetadataError, match=message):
        expression_from_json(obj)
