"""Table metadata JSON: real PyIceberg tables, round trips both ways, v1 defaults, v3, bad input."""

from __future__ import annotations

import copy
import datetime
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.table.metadata import TableMetadataUtil

from aioiceberg.errors import (
    CorruptFileError,
    IcebergError,
    InvalidMetadataError,
    UnsupportedFormatVersionError,
    ValidationError,
)
from aioiceberg.spec.metadata import (
    Operation,
    Snapshot,
    SnapshotRef,
    SnapshotRefType,
    Summary,
    TableMetadata,
)
from aioiceberg.spec.metadata_json import (
    new_table_metadata,
    parse_table_metadata,
    serialize_table_metadata,
)
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import type_to_json
from aioiceberg.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
)

# -- real tables written by PyIceberg ------------------------------------------------------


def _write_pyiceberg_tables(root: Path) -> list[Path]:
    """v1 and v2 tables with several transforms, appends, evolution, properties, a tag and a branch."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField as PyPartitionField
    from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.table.sorting import SortField as PySortField
    from pyiceberg.table.sorting import SortOrder as PySortOrder
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        TruncateTransform,
    )
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyField
    from pyiceberg.types import StringType as PyString
    from pyiceberg.types import TimestampType as PyTimestamp
    from pyiceberg.types import TimestamptzType as PyTimestamptz

    catalog = SqlCatalog("md", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
    catalog.create_namespace("ns")
    schema = PySchema(
        PyField(1, "id", PyLong(), required=True),
        PyField(2, "name", PyString(), required=False),
        PyField(3, "ts", PyTimestamp(), required=False),
        PyField(4, "tstz", PyTimestamptz(), required=False),
        PyField(5, "cat", PyString(), required=False),
        identifier_field_ids=[1],
    )
    spec = PyPartitionSpec(
        PyPartitionField(1, 1000, BucketTransform(4), "id_bucket"),
        PyPartitionField(5, 1001, IdentityTransform(), "cat"),
        PyPartitionField(2, 1002, TruncateTransform(3), "name_trunc"),
        PyPartitionField(3, 1003, DayTransform(), "ts_day"),
        PyPartitionField(4, 1004, HourTransform(), "tstz_hour"),
    )
    order = PySortOrder(PySortField(source_id=2, transform=IdentityTransform()))
    for version in (1, 2):
        name = f"ns.t{version}"
        table = catalog.create_table(
            name,
            schema,
            partition_spec=spec,
            sort_order=order,
            properties={"format-version": str(version), "owner": "tests"},
        )
        for i in range(3):
            batch = pa.table(
                {
                    "id": pa.array([i, i + 10], pa.int64()),
                    "name": ["alpha", "beta"],
                    "ts": pa.array(
                        [datetime.datetime(2024, 1, 1, i), datetime.datetime(2024, 2, 1)], pa.timestamp("us")
                    ),
                    "tstz": pa.array(
                        [datetime.datetime(2024, 1, 1, i, tzinfo=datetime.UTC)] * 2,
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "cat": ["x", "y"],
                },
                schema=table.schema().as_arrow(),
            )
            table.append(batch)
        with table.update_schema() as update:
            update.add_column("extra", PyLong())
        with table.update_spec() as update:
            update.add_field("extra", IdentityTransform(), "extra")
        with table.transaction() as tx:
            tx.set_properties(answer="42")
        table = catalog.load_table(name)
        first = table.metadata.snapshots[0].snapshot_id
        table.manage_snapshots().create_tag(first, "tag1").create_branch(first, "branch1").commit()
        table.delete("id = 0")
    return sorted(root.glob("wh/**/*.metadata.json"))


@pytest.fixture(scope="module")
def pyiceberg_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    files = _write_pyiceberg_tables(tmp_path_factory.mktemp("pyiceberg"))
    assert len(files) >= 10
    return files


def _py_type_json(t: Any) -> Any:
    return json.loads(t.model_dump_json(by_alias=True)) if hasattr(t, "model_dump_json") else str(t)


def _py_transform(t: Any) -> str:
    # PyIceberg prints every unknown transform as "unknown" but keeps the original text.
    return str(t._transform) if type(t).__name__ == "UnknownTransform" else str(t)


def assert_same_as_pyiceberg(ours: TableMetadata, theirs: Any) -> None:
    """Field-by-field comparison against PyIceberg's parsed model."""
    assert ours.format_version == theirs.format_version
    assert ours.table_uuid == str(theirs.table_uuid)
    assert ours.location == theirs.location
    assert ours.last_updated_ms == theirs.last_updated_ms
    assert ours.last_column_id == theirs.last_column_id
    assert ours.last_sequence_number == getattr(theirs, "last_sequence_number", 0)
    assert ours.current_schema_id == theirs.current_schema_id
    assert ours.default_spec_id == theirs.default_spec_id
    assert ours.last_partition_id == theirs.last_partition_id
    assert ours.default_sort_order_id == theirs.default_sort_order_id
    assert dict(ours.properties) == dict(theirs.properties)
    assert ours.current_snapshot_id == theirs.current_snapshot_id

    assert len(ours.schemas) == len(theirs.schemas)
    for schema, py_schema in zip(ours.schemas, theirs.schemas, strict=True):
        assert schema.schema_id == py_schema.schema_id
        assert set(schema.identifier_field_ids) == set(py_schema.identifier_field_ids)
        assert len(schema.fields) == len(py_schema.fields)
        for f, pf in zip(schema.fields, py_schema.fields, strict=True):
            assert (f.field_id, f.name, f.required, f.doc) == (pf.field_id, pf.name, pf.required, pf.doc)
            assert type_to_json(f.field_type) == _py_type_json(pf.field_type)

    assert [
        (s.spec_id, [(f.source_id, f.field_id, str(f.transform), f.name) for f in s.fields])
        for s in ours.partition_specs
    ] == [
        (s.spec_id, [(f.source_id, f.field_id, _py_transform(f.transform), f.name) for f in s.fields])
        for s in theirs.partition_specs
    ]
    assert [
        (
            o.order_id,
            [(f.source_id, str(f.transform), f.direction.value, f.null_order.value) for f in o.fields],
        )
        for o in ours.sort_orders
    ] == [
        (
            o.order_id,
            [
                (f.source_id, _py_transform(f.transform), f.direction.value, f.null_order.value)
                for f in o.fields
            ],
        )
        for o in theirs.sort_orders
    ]

    assert len(ours.snapshots) == len(theirs.snapshots)
    for s, ps in zip(ours.snapshots, theirs.snapshots, strict=True):
        assert s.snapshot_id == ps.snapshot_id
        assert s.parent_snapshot_id == ps.parent_snapshot_id
        assert s.sequence_number == (ps.sequence_number or 0)
        assert s.timestamp_ms == ps.timestamp_ms
        assert s.manifest_list == ps.manifest_list
        assert s.schema_id == ps.schema_id
        assert s.summary is not None and ps.summary is not None
        assert s.summary.operation.value == ps.summary.operation.value
        assert dict(s.summary.properties) == dict(ps.summary.additional_properties)

    assert {
        name: (r.snapshot_id, r.type.value, r.min_snapshots_to_keep, r.max_snapshot_age_ms, r.max_ref_age_ms)
        for name, r in ours.refs.items()
    } == {
        name: (
            r.snapshot_id,
            r.snapshot_ref_type.value,
            r.min_snapshots_to_keep,
            r.max_snapshot_age_ms,
            r.max_ref_age_ms,
        )
        for name, r in theirs.refs.items()
    }
    assert [(e.snapshot_id, e.timestamp_ms) for e in ours.snapshot_log] == [
        (e.snapshot_id, e.timestamp_ms) for e in theirs.snapshot_log
    ]
    assert [(e.metadata_file, e.timestamp_ms) for e in ours.metadata_log] == [
        (e.metadata_file, e.timestamp_ms) for e in theirs.metadata_log
    ]
    assert [(s.snapshot_id, s.statistics_path) for s in ours.statistics] == [
        (s.snapshot_id, s.statistics_path) for s in theirs.statistics
    ]


def test_reads_pyiceberg_tables(pyiceberg_files: list[Path]) -> None:
    versions = set()
    for path in pyiceberg_files:
        text = path.read_text()
        ours = parse_table_metadata(text.encode(), str(path))
        assert_same_as_pyiceberg(ours, TableMetadataUtil.parse_raw(text))
        versions.add(ours.format_version)
    assert versions == {1, 2}


def test_pyiceberg_tables_cover_the_interesting_shapes(pyiceberg_files: list[Path]) -> None:
    for version in (1, 2):
        last = [p for p in pyiceberg_files if f"/t{version}/" in str(p)][-1]
        md = parse_table_metadata(last.read_bytes(), str(last))
        assert len(md.snapshots) == 4
        assert len(md.schemas) == 2 and len(md.partition_specs) == 2
        assert [str(f.transform) for f in md.partition_specs[0].fields] == [
            "bucket[4]",
            "identity",
            "truncate[3]",
            "day",
            "hour",
        ]
        assert md.refs["tag1"].type is SnapshotRefType.TAG
        assert md.refs["branch1"].type is SnapshotRefType.BRANCH
        assert md.snapshot_by_ref("tag1") == md.snapshots[0]
        assert md.properties["answer"] == "42"
        assert md.sort_order().fields and md.sort_order().fields[0].source_id == 2
        current = md.current_snapshot()
        assert current is not None and current.operation is Operation.DELETE
        assert [s.snapshot_id for s in md.ancestors_of(current.snapshot_id)] == [
            s.snapshot_id for s in reversed(md.snapshots)
        ]
        if version == 2:
            assert [s.sequence_number for s in md.snapshots] == [1, 2, 3, 4]
            assert md.next_sequence_number() == 5
        else:
            assert all(s.sequence_number == 0 for s in md.snapshots)
            assert md.next_sequence_number() == 0
        assert len(md.metadata_log) >= 7


def test_round_trips_through_pyiceberg(pyiceberg_files: list[Path]) -> None:
    for path in pyiceberg_files:
        ours = parse_table_metadata(path.read_bytes(), str(path))
        data = serialize_table_metadata(ours)
        assert parse_table_metadata(data) == ours
        assert serialize_table_metadata(parse_table_metadata(data)) == data
        assert_same_as_pyiceberg(ours, TableMetadataUtil.parse_raw(data.decode()))


def test_serialized_fields_follow_the_version(pyiceberg_files: list[Path]) -> None:
    for path in pyiceberg_files:
        md = parse_table_metadata(path.read_bytes(), str(path))
        obj = json.loads(serialize_table_metadata(md))
        if md.format_version == 1:
            assert "last-sequence-number" not in obj
            assert obj["schema"]["fields"] == obj["schemas"][-1]["fields"] or md.current_schema_id == 0
            assert obj["partition-spec"] == next(
                s["fields"] for s in obj["partition-specs"] if s["spec-id"] == obj["default-spec-id"]
            )
            assert all("sequence-number" not in s for s in obj["snapshots"])
        else:
            assert "schema" not in obj and "partition-spec" not in obj
            for key in (
                "last-sequence-number",
                "table-uuid",
                "current-schema-id",
                "schemas",
                "partition-specs",
                "default-spec-id",
                "last-partition-id",
                "sort-orders",
                "default-sort-order-id",
            ):
                assert key in obj
            assert all("sequence-number" in s and "manifest-list" in s for s in obj["snapshots"])
            assert all("manifests" not in s for s in obj["snapshots"])


# -- hand-written documents ----------------------------------------------------------------

V1_MINIMAL: dict[str, Any] = {
    "format-version": 1,
    "location": "s3://bucket/db/t",
    "last-updated-ms": 1600000000000,
    "last-column-id": 3,
    "schema": {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "x", "required": True, "type": "long"},
            {"id": 2, "name": "y", "required": False, "type": "string"},
            {"id": 3, "name": "ts", "required": False, "type": "timestamp"},
        ],
    },
    "partition-spec": [
        {"name": "x_bucket", "transform": "bucket[8]", "source-id": 1},
        {"name": "ts_day", "transform": "day", "source-id": 3},
    ],
    "properties": {"a": "b"},
    "current-snapshot-id": 2,
    "snapshots": [
        {"snapshot-id": 1, "timestamp-ms": 1600000000001, "manifests": ["s3://bucket/db/t/m1.avro"]},
        {
            "snapshot-id": 2,
            "parent-snapshot-id": 1,
            "timestamp-ms": 1600000000002,
            "summary": {"operation": "append", "added-data-files": "1"},
            "manifest-list": "s3://bucket/db/t/snap-2.avro",
        },
    ],
    "snapshot-log": [
        {"snapshot-id": 1, "timestamp-ms": 1600000000001},
        {"snapshot-id": 2, "timestamp-ms": 1600000000002},
    ],
}


def v2_doc() -> dict[str, Any]:
    return {
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "s3://bucket/test/location",
        "last-sequence-number": 34,
        "last-updated-ms": 1602638573590,
        "last-column-id": 3,
        "current-schema-id": 1,
        "schemas": [
            {
                "type": "struct",
                "schema-id": 0,
                "fields": [{"id": 1, "name": "x", "required": True, "type": "long"}],
            },
            {
                "type": "struct",
                "schema-id": 1,
                "identifier-field-ids": [1, 2],
                "fields": [
                    {"id": 1, "name": "x", "required": True, "type": "long"},
                    {"id": 2, "name": "y", "required": True, "type": "long", "doc": "comment"},
                    {"id": 3, "name": "z", "required": True, "type": "long"},
                ],
            },
        ],
        "default-spec-id": 0,
        "partition-specs": [
            {
                "spec-id": 0,
                "fields": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}],
            }
        ],
        "last-partition-id": 1000,
        "default-sort-order-id": 3,
        "sort-orders": [
            {
                "order-id": 3,
                "fields": [
                    {
                        "transform": "identity",
                        "source-id": 2,
                        "direction": "asc",
                        "null-order": "nulls-first",
                    },
                    {
                        "transform": "bucket[4]",
                        "source-id": 3,
                        "direction": "desc",
                        "null-order": "nulls-last",
                    },
                ],
            }
        ],
        "properties": {"read.split.target.size": "134217728"},
        "current-snapshot-id": 3055729675574597004,
        "snapshots": [
            {
                "snapshot-id": 3051729675574597004,
                "timestamp-ms": 1515100955770,
                "sequence-number": 33,
                "summary": {"operation": "append"},
                "manifest-list": "s3://a/b/1.avro",
            },
            {
                "snapshot-id": 3055729675574597004,
                "parent-snapshot-id": 3051729675574597004,
                "timestamp-ms": 1555100955770,
                "sequence-number": 34,
                "summary": {"operation": "append"},
                "manifest-list": "s3://a/b/2.avro",
                "schema-id": 1,
            },
        ],
        "snapshot-log": [
            {"snapshot-id": 3051729675574597004, "timestamp-ms": 1515100955770},
            {"snapshot-id": 3055729675574597004, "timestamp-ms": 1555100955770},
        ],
        "metadata-log": [{"metadata-file": "s3://bucket/.../v1.json", "timestamp-ms": 1515100}],
        "refs": {
            "main": {"snapshot-id": 3055729675574597004, "type": "branch"},
            "test": {"snapshot-id": 3051729675574597004, "type": "tag", "max-ref-age-ms": 10000000},
            "audit": {
                "snapshot-id": 3051729675574597004,
                "type": "branch",
                "min-snapshots-to-keep": 2,
                "max-snapshot-age-ms": 3600000,
            },
        },
        "statistics": [
            {
                "snapshot-id": 3055729675574597004,
                "statistics-path": "s3://a/b/stats.puffin",
                "file-size-in-bytes": 413,
                "file-footer-size-in-bytes": 42,
                "blob-metadata": [
                    {
                        "type": "apache-datasketches-theta-v1",
                        "snapshot-id": 3055729675574597004,
                        "sequence-number": 34,
                        "fields": [1],
                        "properties": {"ndv": "3"},
                    }
                ],
            }
        ],
        "partition-statistics": [
            {
                "snapshot-id": 3055729675574597004,
                "statistics-path": "s3://a/b/partition-stats.parquet",
                "file-size-in-bytes": 43,
            }
        ],
    }


def v3_doc() -> dict[str, Any]:
    doc = v2_doc()
    doc["format-version"] = 3
    doc["last-column-id"] = 6
    doc["schemas"][1]["fields"] += [
        {
            "id": 4,
            "name": "ts_ns",
            "required": False,
            "type": "timestamp_ns",
            "initial-default": "2017-11-16T22:31:08.123456789",
            "write-default": "2017-11-16T22:31:08.123456789",
        },
        {"id": 5, "name": "tstz_ns", "required": False, "type": "timestamptz_ns"},
        {"id": 6, "name": "n", "required": True, "type": "int", "initial-default": 34, "write-default": 7},
    ]
    doc["partition-specs"].append(
        {
            "spec-id": 1,
            "fields": [
                {"name": "x", "transform": "identity", "source-ids": [1], "field-id": 1000},
                {"name": "zz", "transform": "zorder", "source-ids": [2, 3], "field-id": 1001},
                {"name": "ts_hour", "transform": "hour", "source-ids": [4], "field-id": 1002},
            ],
        }
    )
    doc["default-spec-id"] = 1
    doc["last-partition-id"] = 1002
    doc["sort-orders"][0]["fields"][1] = {
        "transform": "some-future-transform[3]",
        "source-ids": [3, 1],
        "direction": "desc",
        "null-order": "nulls-last",
    }
    doc["next-row-id"] = 100
    doc["snapshots"][1]["first-row-id"] = 0
    doc["snapshots"][1]["added-rows"] = 100
    return doc


def test_v1_reading_fills_newer_defaults() -> None:
    md = parse_table_metadata(json.dumps(V1_MINIMAL), "v1.metadata.json")
    assert md.format_version == 1 and md.table_uuid is None
    assert len(md.schemas) == 1 and md.current_schema_id == 0 and md.schema().schema_id == 0
    assert md.default_spec_id == 0 and md.spec().spec_id == 0
    assert [f.field_id for f in md.spec().fields] == [1000, 1001]
    assert md.last_partition_id == 1001
    assert md.sort_orders == (UNSORTED,) and md.default_sort_order_id == 0
    assert md.last_sequence_number == 0 and all(s.sequence_number == 0 for s in md.snapshots)
    assert md.refs == {"main": SnapshotRef(2, SnapshotRefType.BRANCH)}
    first, second = md.snapshots
    assert first.manifest_list is None and first.manifests == ("s3://bucket/db/t/m1.avro",)
    assert first.summary is None
    assert second.summary == Summary(Operation.APPEND, {"added-data-files": "1"})
    assert second.summary["added-data-files"] == "1" and second.summary["operation"] == "append"
    assert md.snapshot_as_of(1600000000001) == first
    assert md.snapshot_as_of(1700000000000) == second
    assert md.snapshot_as_of(1) is None
    assert md.next_sequence_number() == 0

    obj = json.loads(serialize_table_metadata(md))
    assert "last-sequence-number" not in obj and "table-uuid" not in obj
    assert obj["schema"]["fields"] == obj["schemas"][0]["fields"]
    assert obj["partition-spec"][0] == {
        "name": "x_bucket",
        "transform": "bucket[8]",
        "source-id": 1,
        "field-id": 1000,
    }
    assert obj["snapshots"][0]["manifests"] == ["s3://bucket/db/t/m1.avro"]
    assert "summary" not in obj["snapshots"][0]
    assert all("sequence-number" not in s for s in obj["snapshots"])
    assert parse_table_metadata(serialize_table_metadata(md)) == md


def test_v1_current_snapshot_minus_one_means_none() -> None:
    doc = copy.deepcopy(V1_MINIMAL)
    doc["current-snapshot-id"] = -1
    doc["snapshots"] = []
    md = parse_table_metadata(json.dumps(doc))
    assert md.current_snapshot_id is None and md.current_snapshot() is None and md.refs == {}
    assert json.loads(serialize_table_metadata(md))["current-snapshot-id"] == -1
    del doc["current-snapshot-id"]
    assert parse_table_metadata(json.dumps(doc)).current_snapshot_id is None


def test_v1_serialization_is_readable_by_pyiceberg() -> None:
    doc = copy.deepcopy(V1_MINIMAL)
    doc["snapshots"] = doc["snapshots"][1:]
    doc["snapshots"][0].pop("parent-snapshot-id")
    doc["snapshot-log"] = doc["snapshot-log"][1:]
    doc["table-uuid"] = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
    md = parse_table_metadata(json.dumps(doc))
    assert_same_as_pyiceberg(md, TableMetadataUtil.parse_raw(serialize_table_metadata(md).decode()))


def test_v2_document() -> None:
    md = parse_table_metadata(json.dumps(v2_doc()), "v2.metadata.json")
    assert_same_as_pyiceberg(md, TableMetadataUtil.parse_raw(json.dumps(v2_doc())))
    assert md.schema().schema_id == 1 and md.schema_by_id(0) is not None and md.schema_by_id(7) is None
    assert md.specs_by_id() == {0: md.spec()}
    assert md.sort_order().order_id == 3
    assert md.sort_order().fields[1] == SortField(
        (3,), parse_transform("bucket[4]"), SortDirection.DESC, NullOrder.NULLS_LAST
    )
    assert md.refs["audit"] == SnapshotRef(3051729675574597004, SnapshotRefType.BRANCH, 2, 3600000, None)
    assert md.refs["test"].max_ref_age_ms == 10000000
    assert md.statistics[0].blob_metadata[0].fields == (1,)
    assert md.statistics[0].blob_metadata[0].properties == {"ndv": "3"}
    assert md.partition_statistics[0].file_size_in_bytes == 43
    assert md.metadata_log[0].metadata_file == "s3://bucket/.../v1.json"
    assert md.next_sequence_number() == 35
    assert md.snapshot_by_ref("nope") is None

    data = serialize_table_metadata(md)
    assert parse_table_metadata(data) == md
    assert_same_as_pyiceberg(md, TableMetadataUtil.parse_raw(data.decode()))
    # Same metadata, same bytes: key order does not depend on how the input was ordered.
    shuffled = dict(reversed(list(v2_doc().items())))
    shuffled["properties"] = {"z": "1", "a": "2"}
    again = parse_table_metadata(json.dumps(shuffled))
    assert serialize_table_metadata(again) == serialize_table_metadata(
        parse_table_metadata(json.dumps(shuffled))
    )
    assert list(json.loads(serialize_table_metadata(again))["properties"]) == ["a", "z"]


def test_v3_document_parses_and_round_trips() -> None:
    md = parse_table_metadata(json.dumps(v3_doc()), "v3.metadata.json")
    assert md.format_version == 3 and md.next_row_id == 100
    ts_ns = md.schema().find_field("ts_ns")
    assert ts_ns.field_type == TimestampNanoType()
    assert ts_ns.initial_default is not None and ts_ns.write_default == ts_ns.initial_default
    assert md.schema().find_field("n").initial_default == 34
    zz = md.spec().fields[1]
    assert zz.source_ids == (2, 3) and zz.transform.is_unknown and str(zz.transform) == "zorder"
    assert md.sort_order().fields[1].source_ids == (3, 1)
    assert md.sort_order().fields[1].transform.is_unknown
    assert md.snapshots[1].first_row_id == 0 and md.snapshots[1].added_rows == 100

    data = serialize_table_metadata(md)
    assert parse_table_metadata(data) == md
    obj = json.loads(data)
    # source-ids as Appendix E asks; source-id beside it for one source, as Java writes and
    # as Java 1.12 and DuckDB require; never for several
    for fields in [spec["fields"] for spec in obj["partition-specs"]] + [
        o["fields"] for o in obj["sort-orders"]
    ]:
        for f in fields:
            assert "source-ids" in f
            assert f.get("source-id") == (f["source-ids"][0] if len(f["source-ids"]) == 1 else None), f
    assert obj["next-row-id"] == 100
    assert obj["schemas"][1]["fields"][3]["initial-default"] == "2017-11-16T22:31:08.123456789"
    assert obj["snapshots"][1]["first-row-id"] == 0

    # The v2 shape of the same document (source-id only) reads the same specs.
    doc = v3_doc()
    for spec in doc["partition-specs"]:
        for f in spec["fields"]:
            ids = f.pop("source-ids", None) or [f["source-id"]]
            f["source-id"] = ids[0]
            if len(ids) > 1:
                f["source-ids"] = ids
    assert parse_table_metadata(json.dumps(doc)).partition_specs == md.partition_specs


def test_v3_output_reads_in_pyiceberg() -> None:
    """PyIceberg reads v3 but not multi-argument transforms or nanosecond defaults: leave those out."""
    doc = v3_doc()
    ts_ns = doc["schemas"][1]["fields"][3]
    del ts_ns["initial-default"], ts_ns["write-default"]
    doc["partition-specs"][1]["fields"][1]["source-ids"] = [2]
    doc["sort-orders"][0]["fields"][1]["source-ids"] = [3]
    md = parse_table_metadata(json.dumps(doc))
    theirs = TableMetadataUtil.parse_raw(serialize_table_metadata(md).decode())
    assert_same_as_pyiceberg(md, theirs)
    assert getattr(theirs, "next_row_id", None) == 100
    assert theirs.snapshots[1].first_row_id == 0 and theirs.snapshots[1].added_rows == 100


def test_v1_v2_write_source_id_for_multi_argument_transforms() -> None:
    doc = v2_doc()
    doc["schemas"][1]["fields"] = doc["schemas"][1]["fields"][:3]
    doc["partition-specs"][0]["fields"].append(
        {"name": "zz", "transform": "zorder", "source-id": 2, "source-ids": [2, 3], "field-id": 1001}
    )
    doc["last-partition-id"] = 1001
    md = parse_table_metadata(json.dumps(doc))
    written = json.loads(serialize_table_metadata(md))["partition-specs"][0]["fields"]
    assert written[0] == {"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}
    assert written[1]["source-id"] == 2 and written[1]["source-ids"] == [2, 3]


def test_upgraded_table_keeps_v1_snapshots() -> None:
    doc = v2_doc()
    legacy = {"snapshot-id": 11, "timestamp-ms": 1, "sequence-number": 0, "manifests": ["m.avro"]}
    doc["snapshots"].insert(0, legacy)
    doc["snapshots"][1]["parent-snapshot-id"] = 11
    md = parse_table_metadata(json.dumps(doc))
    assert md.snapshots[0].manifests == ("m.avro",) and md.snapshots[0].summary is None
    assert parse_table_metadata(serialize_table_metadata(md)) == md


@pytest.mark.parametrize("suffix", [".gz.metadata.json", ".metadata.json.gz"])
def test_gzip_files(suffix: str, tmp_path: Path) -> None:
    path = tmp_path / f"00001-abc{suffix}"
    path.write_bytes(gzip.compress(json.dumps(v2_doc()).encode()))
    assert parse_table_metadata(path.read_bytes(), str(path)) == parse_table_metadata(json.dumps(v2_doc()))


def test_damaged_gzip_names_the_file() -> None:
    data = gzip.compress(json.dumps(v2_doc()).encode())
    with pytest.raises(CorruptFileError, match=r"s3://b/t/metadata/v3\.gz\.metadata\.json.*gzip"):
        parse_table_metadata(data[:40], "s3://b/t/metadata/v3.gz.metadata.json")


# -- bad input -----------------------------------------------------------------------------

LOC = "s3://bucket/t/metadata/00007-x.metadata.json"


def _with(change: Callable[[dict[str, Any]], None]) -> str:
    doc = v2_doc()
    change(doc)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("data", "error", "pattern"),
    [
        ('{"format-version": 2, ', CorruptFileError, "not valid JSON"),
        (b"\xff\xfe\x00garbage", CorruptFileError, "not UTF-8|not valid JSON"),
        ("", CorruptFileError, "not valid JSON"),
        ("[1, 2]", InvalidMetadataError, "must be a JSON object"),
        (_with(lambda d: d.update({"format-version": 4})), UnsupportedFormatVersionError, "format-version 4"),
        (_with(lambda d: d.update({"format-version": "two"})), UnsupportedFormatVersionError, "'two'"),
        (_with(lambda d: d.pop("format-version")), InvalidMetadataError, "'format-version'"),
        (_with(lambda d: d.pop("location")), InvalidMetadataError, "missing required field 'location'"),
        (_with(lambda d: d.pop("table-uuid")), InvalidMetadataError, "'table-uuid'"),
        (_with(lambda d: d.pop("last-sequence-number")), InvalidMetadataError, "'last-sequence-number'"),
        (_with(lambda d: d.pop("schemas")), InvalidMetadataError, "'schemas'"),
        (_with(lambda d: d.pop("sort-orders")), InvalidMetadataError, "'sort-orders'"),
        (
            _with(lambda d: d.update({"last-column-id": "3"})),
            InvalidMetadataError,
            "'last-column-id'.*integer",
        ),
        (_with(lambda d: d.update({"last-updated-ms": 1.5})), InvalidMetadataError, "'last-updated-ms'"),
        (_with(lambda d: d.update({"table-uuid": "nope"})), InvalidMetadataError, "not a UUID"),
        (_with(lambda d: d.update({"properties": {"a": 1}})), InvalidMetadataError, "'a' must be a string"),
        (_with(lambda d: d.update({"snapshots": {}})), InvalidMetadataError, "'snapshots' must be a list"),
        (_with(lambda d: d["snapshots"][0].pop("manifest-list")), InvalidMetadataError, "'manifest-list'"),
        (
            _with(lambda d: d["snapshots"][0].pop("sequence-number")),
            InvalidMetadataError,
            "'sequence-number'",
        ),
        (
            _with(lambda d: d["snapshots"][0]["summary"].update({"operation": "x"})),
            InvalidMetadataError,
            "'x'",
        ),
        (_with(lambda d: d["snapshots"][0].update({"summary": {}})), InvalidMetadataError, "'operation'"),
        (_with(lambda d: d["refs"]["test"].update({"type": "leaf"})), InvalidMetadataError, "ref 'test'"),
        (
            _with(lambda d: d["refs"]["test"].update({"min-snapshots-to-keep": 1})),
            InvalidMetadataError,
            "tags",
        ),
        (_with(lambda d: d["schemas"][0].update({"fields": [{"id": 1}]})), InvalidMetadataError, "'name'"),
        (
            _with(lambda d: d["schemas"][0]["fields"][0].update({"type": "nope"})),
            InvalidMetadataError,
            "nope",
        ),
        (_with(lambda d: d["statistics"][0].pop("blob-metadata")), InvalidMetadataError, "'blob-metadata'"),
    ],
)
def test_bad_input_raises_specific_errors(data: str | bytes, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern) as info:
        parse_table_metadata(data, LOC)
    assert str(info.value).startswith(LOC)
    assert info.value.location == LOC  # type: ignore[attr-defined]


def _drop_struct_type(doc: dict[str, Any]) -> None:
    for schema in doc.get("schemas", []):
        schema.pop("type", None)
    if "schema" in doc:
        doc["schema"].pop("type", None)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (_drop_struct_type, "missing required field 'type'"),
        (lambda d: [s.update({"type": "list"}) for s in d.get("schemas", [d.get("schema")])], "'list'"),
    ],
)
def test_schema_must_be_a_struct(
    pyiceberg_files: list[Path], change: Callable[[dict[str, Any]], None], pattern: str, tmp_path: Path
) -> None:
    """Java's SchemaParser refuses a schema that is not ``"type": "struct"``; so do we, naming the file."""
    by_version = {json.loads(p.read_text())["format-version"]: p for p in pyiceberg_files}
    assert {1, 2} <= set(by_version)
    for source in (by_version[1], by_version[2]):
        doc = json.loads(source.read_text())
        change(doc)
        path = tmp_path / source.name
        path.write_text(json.dumps(doc))
        with pytest.raises(InvalidMetadataError, match=pattern) as info:
            parse_table_metadata(path.read_bytes(), str(path))
        assert info.value.location == str(path) and str(path) in str(info.value)
        assert "schema" in str(info.value)


def _set_refs_main(doc: dict[str, Any], snapshot_id: int) -> None:
    doc["refs"]["main"]["snapshot-id"] = snapshot_id


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (lambda d: d.update({"current-schema-id": 9}), "current-schema-id 9"),
        (lambda d: d["schemas"][0].update({"schema-id": 1}), "schema id 1 appears more than once"),
        (lambda d: d.update({"default-spec-id": 5}), "default-spec-id 5"),
        (lambda d: d["partition-specs"].append({"spec-id": 0, "fields": []}), "partition spec id 0"),
        (lambda d: d.update({"default-sort-order-id": 4}), "default-sort-order-id 4"),
        (lambda d: d["sort-orders"].append({"order-id": 3, "fields": []}), "sort order id 3"),
        (lambda d: d.update({"current-snapshot-id": 77}), "current-snapshot-id 77"),
        (lambda d: d["refs"]["test"].update({"snapshot-id": 78}), "ref 'test' points at unknown snapshot 78"),
        (lambda d: _set_refs_main(d, 3051729675574597004), "ref 'main'"),
        (lambda d: d["refs"]["main"].update({"type": "tag"}), "ref 'main' must be a branch"),
        (lambda d: d.update({"last-sequence-number": 0}), "above last-sequence-number 0"),
        (lambda d: d["snapshots"][0].update({"sequence-number": 34}), "not above its parent"),
        (lambda d: d["snapshots"][1].update({"sequence-number": 0}), "not above its parent"),
        (lambda d: d.update({"last-column-id": 2}), "last-column-id 2"),
        (lambda d: d.update({"last-partition-id": 999}), "last-partition-id 999"),
        (lambda d: d["partition-specs"][0]["fields"][0].update({"source-id": 42}), "source id 42"),
        (lambda d: d["snapshots"].append(dict(d["snapshots"][0])), "snapshot id 3051729675574597004"),
    ],
)
def test_inconsistent_metadata_is_refused(change: Callable[[dict[str, Any]], None], pattern: str) -> None:
    doc = v2_doc()
    change(doc)
    with pytest.raises(InvalidMetadataError, match=pattern) as info:
        parse_table_metadata(json.dumps(doc), LOC)
    assert LOC in str(info.value)


def test_v1_sequence_numbers_do_not_need_to_increase() -> None:
    doc = v2_doc()
    for s in doc["snapshots"]:
        s["sequence-number"] = 0
    doc["snapshots"].append(
        {
            "snapshot-id": 5,
            "parent-snapshot-id": 3055729675574597004,
            "timestamp-ms": 1555100955771,
            "sequence-number": 1,
            "summary": {"operation": "overwrite"},
            "manifest-list": "s3://a/b/3.avro",
        }
    )
    md = parse_table_metadata(json.dumps(doc))
    assert [s.sequence_number for s in md.ancestors_of(5)] == [1, 0, 0]


# -- building a new table ------------------------------------------------------------------


def test_new_table_metadata_assigns_fresh_ids() -> None:
    schema = Schema(
        NestedField(10, "id", LongType(), required=True),
        NestedField(
            20, "point", StructType(NestedField(21, "x", IntegerType()), NestedField(22, "y", IntegerType()))
        ),
        NestedField(30, "name", StringType()),
        schema_id=5,
        identifier_field_ids=[10],
    )
    spec = PartitionSpec(
        7,
        (
            PartitionField((30,), 5, parse_transform("truncate[2]"), "name_trunc"),
            PartitionField((22,), 9, parse_transform("bucket[16]"), "y_bucket"),
        ),
    )
    order = SortOrder(4, (SortField((10,), parse_transform("identity")),))
    for version in (1, 2, 3):
        md = new_table_metadata(schema, spec, order, "s3://b/t/", {"k": "v"}, version)
        fresh = md.schema()
        assert fresh.schema_id == 0 and fresh.find_field("id").field_id == 1
        assert fresh.find_field("point.y").field_id == 5 and fresh.find_field("name").field_id == 3
        assert fresh.identifier_field_ids == (1,)
        assert md.last_column_id == 5 and md.last_partition_id == 1001
        assert [(f.source_ids, f.field_id, f.name) for f in md.spec().fields] == [
            ((3,), 1000, "name_trunc"),
            ((5,), 1001, "y_bucket"),
        ]
        assert md.sort_order().order_id == 1 and md.sort_order().fields[0].source_ids == (1,)
        assert md.location == "s3://b/t" and md.properties == {"k": "v"} and md.snapshots == ()
        assert md.table_uuid is not None and md.current_snapshot_id is None
        data = serialize_table_metadata(md)
        assert parse_table_metadata(data) == md
        if version < 3:
            assert_same_as_pyiceberg(md, TableMetadataUtil.parse_raw(data.decode()))

    unpartitioned = new_table_metadata(schema, PartitionSpec(), UNSORTED, "s3://b/u", None, 2)
    assert unpartitioned.last_partition_id == 999 and unpartitioned.sort_order() == UNSORTED
    assert unpartitioned.table_uuid != new_table_metadata(schema, spec, order, "s3://b/t", None).table_uuid


def test_new_table_metadata_refuses_types_newer_than_the_version() -> None:
    schema = Schema(NestedField(1, "ts", TimestampNanoType()))
    with pytest.raises(ValidationError, match="timestamp_ns"):
        new_table_metadata(schema, PartitionSpec(), UNSORTED, "s3://b/t", None, 2)
    with pytest.raises(UnsupportedFormatVersionError):
        new_table_metadata(schema, PartitionSpec(), UNSORTED, "s3://b/t", None, 4)
    assert new_table_metadata(schema, PartitionSpec(), UNSORTED, "s3://b/t", None, 3).format_version == 3


def test_domain_objects_copy_their_inputs() -> None:
    props = {"a": "1"}
    summary = Summary(Operation.APPEND, props)
    props["b"] = "2"
    assert summary.properties == {"a": "1"}
    snap = Snapshot(1, None, 1, 1, "ml.avro", summary, manifests=["x"])  # type: ignore[arg-type]
    assert snap.manifests == ("x",)
    with pytest.raises(ValidationError):
        SnapshotRef(1, SnapshotRefType.TAG, min_snapshots_to_keep=1)
    with pytest.raises(ValidationError):
        SnapshotRef(1, SnapshotRefType.BRANCH, max_ref_age_ms=0)


# -- fuzzing -------------------------------------------------------------------------------

_BASES = [V1_MINIMAL, v2_doc(), v3_doc()]
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def _mutated_documents(draw: st.DrawFn) -> bytes | str:
    doc = copy.deepcopy(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["delete", "replace", "replace"]))
        if action == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(_JSON_VALUES)
    text = json.dumps(doc)
    shape = draw(st.sampled_from(["text", "bytes", "gzip", "truncated", "flipped"]))
    if shape == "text":
        return text
    data = text.encode()
    if shape == "gzip":
        return gzip.compress(data)
    if shape == "truncated":
        return data[: draw(st.integers(0, len(data)))]
    if shape == "flipped":
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_documents())
def test_fuzzed_input_raises_only_iceberg_errors(data: bytes | str) -> None:
    try:
        md = parse_table_metadata(data, "fuzz.metadata.json")
    except IcebergError as e:
        assert "fuzz.metadata.json" in str(e)
        return
    # Whatever parses must also serialize and read back identically.
    assert parse_table_metadata(serialize_table_metadata(md)) == md


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_raise_only_iceberg_errors(data: bytes) -> None:
    with pytest.raises(IcebergError):
        parse_table_metadata(data, "random")


def test_a_v3_file_without_next_row_id_gets_the_first_free_id() -> None:
    """The spec requires ``next-row-id`` in v3; a file without it must not hand new rows ids
    its snapshots already assigned (0 here would reuse 0-99), and must write back the same."""
    doc = v3_doc()
    del doc["next-row-id"]
    md = parse_table_metadata(json.dumps(doc), "v3.metadata.json")
    assert md.next_row_id == 100
    assert parse_table_metadata(serialize_table_metadata(md)) == md
    doc["snapshots"] = []
    doc.pop("current-snapshot-id", None)
    doc["refs"] = {}
    doc["snapshot-log"] = []
    doc["statistics"] = []
    doc["partition-statistics"] = []
    assert parse_table_metadata(json.dumps(doc), "v3.metadata.json").next_row_id == 0
