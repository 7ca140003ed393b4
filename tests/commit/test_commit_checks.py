"""The checks every commit passes (``commit/checks.py`` through ``apply_updates``), rule by rule.

Pure: metadata values in, ``ValidationError`` (or new metadata) out; the REST face's
tests through a real server are in ``test_server_validation.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from aioiceberg.commit import apply_updates
from aioiceberg.commit.checks import check_settable_properties
from aioiceberg.commit.evolution import check_settable_properties as evolution_check
from aioiceberg.commit.rest_json import update_from_json
from aioiceberg.commit.updates import (
    AddPartitionSpec,
    AddSchema,
    AddSnapshot,
    AddSortOrder,
    RemoveProperties,
    SetCurrentSchema,
    SetDefaultSpec,
    SetProperties,
    SetSnapshotRef,
    SetStatistics,
    TableUpdate,
)
from aioiceberg.errors import InvalidPropertyError, ValidationError
from aioiceberg.spec.metadata import (
    Operation,
    Snapshot,
    SnapshotRefType,
    StatisticsFile,
    Summary,
    TableMetadata,
)
from aioiceberg.spec.metadata_json import new_table_metadata
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import SortField, SortOrder
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import (
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
)

LOCATION = "s3://bucket/wh/db/t"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "point", StructType(NestedField(5, "x", LongType()))),
    identifier_field_ids=[1],
)
BY_REGION = PartitionSpec(0, (PartitionField((2,), 1000, parse_transform("identity"), "region"),))


def table(
    location: str = LOCATION, *, format_version: int = 2, properties: dict[str, str] | None = None
) -> TableMetadata:
    return new_table_metadata(
        SCHEMA,
        BY_REGION,
        SortOrder(),
        location,
        properties,
        format_version,
        table_uuid="9a8b7c6d-0000-4000-8000-000000000000",
        last_updated_ms=1,
    )


def assert_refused(md: TableMetadata, *updates: TableUpdate, match: str) -> ValidationError:
    with pytest.raises(ValidationError, match=match) as caught:
        apply_updates(md, list(updates))
    return caught.value


def snapshot(
    snapshot_id: int = 10,
    manifest_list: str | None = f"{LOCATION}/metadata/snap-10.avro",
    *,
    parent: int | None = None,
    sequence_number: int = 1,
    **extra: Any,
) -> Snapshot:
    return Snapshot(
        snapshot_id, parent, sequence_number, 2, manifest_list, Summary(Operation.APPEND), **extra
    )


# -- set-properties -------------------------------------------------------------------------------


def test_a_value_the_library_cannot_use_is_refused_naming_the_update_and_key() -> None:
    error = assert_refused(table(), SetProperties({"commit.retry.num-retries": "abc"}), match="num-retries")
    assert isinstance(error, InvalidPropertyError)
    assert str(error).startswith("set-properties: ") and "non-negative integer" in str(error)


@pytest.mark.parametrize("key", ["format-version", "uuid", "current-snapshot-id", "default-sort-order"])
def test_reserved_keys_cannot_be_set(key: str) -> None:
    assert_refused(table(), SetProperties({key: "3"}), match=f"set-properties: .*{key}")


def test_the_python_api_and_apply_updates_share_one_property_check() -> None:
    assert evolution_check is check_settable_properties


def test_unknown_keys_and_good_values_pass() -> None:
    md = apply_updates(table(), [SetProperties({"owner": "x", "commit.retry.num-retries": "7"})])
    assert md.properties["owner"] == "x" and md.properties["commit.retry.num-retries"] == "7"


def test_an_odd_value_another_engine_left_does_not_block_other_changes() -> None:
    md = table(properties={"commit.retry.num-retries": "lots", "write.format.default": "carrot"})
    md = apply_updates(md, [SetProperties({"owner": "y"})])
    md = apply_updates(md, [RemoveProperties(("commit.retry.num-retries",))])
    assert md.properties == {"write.format.default": "carrot", "owner": "y"}


@pytest.mark.parametrize("path", ["s3://bucket/wh/db/t/../../other", "relative/dir", "/a/./b"])
def test_location_properties_must_be_one_spelling(path: str) -> None:
    error = assert_refused(table(), SetProperties({"write.metadata.path": path}), match="write.metadata.path")
    assert isinstance(error, InvalidPropertyError)


def test_property_values_are_strings() -> None:
    assert_refused(table(), SetProperties({"owner": 5}), match="values are strings")  # type: ignore[dict-item]


# -- add-schema -----------------------------------------------------------------------------------


def evolved(*extra: NestedField, identifier_field_ids: tuple[int, ...] = (1,)) -> Schema:
    return Schema(*SCHEMA.fields, *extra, identifier_field_ids=identifier_field_ids)


def test_duplicate_field_ids_are_refused_top_level_and_nested() -> None:
    assert_refused(
        table(), AddSchema(evolved(NestedField(2, "other", StringType()))), match="field id 2 is used"
    )
    nested = NestedField(6, "tags", ListType(5, StringType()))
    assert_refused(
        table(), AddSchema(evolved(nested)), match="field id 5 is used by both 'point.x' and 'tags.element'"
    )


def test_empty_and_duplicate_names_are_refused() -> None:
    assert_refused(table(), AddSchema(evolved(NestedField(6, "", StringType()))), match="empty name")
    assert_refused(
        table(), AddSchema(evolved(NestedField(6, "region", StringType()))), match="duplicate field name"
    )


def test_negative_ids_are_refused() -> None:
    assert_refused(table(), AddSchema(evolved(NestedField(-3, "neg", StringType()))), match="negative id")


def test_identifier_fields_must_be_required_primitives() -> None:
    assert_refused(
        table(), AddSchema(evolved(identifier_field_ids=(2,))), match="identifier.*must be required"
    )
    assert_refused(table(), AddSchema(evolved(identifier_field_ids=(99,))), match="identifier field id 99")


def test_types_need_the_tables_format_version() -> None:
    nanos = NestedField(6, "ts_ns", TimestampNanoType())
    assert_refused(table(), AddSchema(evolved(nanos)), match="timestamp_ns needs format version 3")
    apply_updates(table(format_version=3), [AddSchema(evolved(nanos))])


def test_new_fields_take_ids_above_last_column_id() -> None:
    """Ids up to last-column-id that no schema holds belonged to dropped columns: reusing one
    would read old data files' values as the new column."""
    md = table().replace(last_column_id=8)
    assert_refused(
        md, AddSchema(evolved(NestedField(7, "reused", LongType()))), match="id 7, which the table assigned"
    )
    md = apply_updates(md, [AddSchema(evolved(NestedField(9, "fresh", LongType()))), SetCurrentSchema()])
    assert md.last_column_id == 9 and md.schema().find_field("point.x").field_id == 5


def test_last_column_id_afterwards_covers_every_field() -> None:
    md = apply_updates(table(), [AddSchema(evolved(NestedField(9, "late", StringType())), last_column_id=6)])
    assert md.last_column_id == 9


def test_a_schema_without_the_default_specs_source_cannot_become_current() -> None:
    without_region = Schema(*(f for f in SCHEMA.fields if f.name != "region"), identifier_field_ids=(1,))
    md = apply_updates(table(), [AddSchema(without_region)])  # added, not current: fine
    assert_refused(md, SetCurrentSchema(1), match="needs field 2, which the current schema 1 does not have")


# -- add-spec / add-sort-order --------------------------------------------------------------------


def spec(*fields: tuple[int, int, str, str]) -> PartitionSpec:
    return PartitionSpec(
        0, tuple(PartitionField((s,), fid, parse_transform(t), n) for s, fid, t, n in fields)
    )


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ([(42, 1001, "identity", "nope")], "missing source field id 42"),
        ([(2, 1001, "year", "region_year")], "year cannot apply to string"),
        ([(2, 1001, "zorder", "z")], "unknown transform"),
        ([(3, 1001, "day", "d"), (3, 1002, "hour", "d")], "'d' is used twice"),
        ([(3, 1001, "day", "d"), (2, 1001, "bucket[4]", "b")], "id 1001 is used twice"),
        ([(3, 1001, "day", "region")], "named like a column"),
        ([(3, 1001, "day", "")], "empty name"),
    ],
)
def test_partition_specs_bind_to_the_current_schema(
    fields: list[tuple[int, int, str, str]], match: str
) -> None:
    assert_refused(table(), AddPartitionSpec(spec(*fields)), match=f"add-spec: .*{match}")


def test_a_good_spec_becomes_the_default() -> None:
    md = apply_updates(
        table(),
        [
            AddPartitionSpec(spec((2, 1000, "identity", "region"), (3, 1001, "day", "ts_day"))),
            SetDefaultSpec(),
        ],
    )
    assert md.default_spec_id == 1 and md.last_partition_id == 1001


@pytest.mark.parametrize(
    ("source", "transform", "match"),
    [
        (42, "identity", "no field 42"),
        (2, "month", "month cannot transform string"),
        (1, "zorder", "unknown"),
    ],
)
def test_sort_orders_bind_to_the_current_schema(source: int, transform: str, match: str) -> None:
    order = SortOrder(1, (SortField((source,), parse_transform(transform)),))
    assert_refused(table(), AddSortOrder(order), match=f"add-sort-order: .*{match}")


# -- add-snapshot / set-statistics ----------------------------------------------------------------


@pytest.mark.parametrize(
    "manifest_list",
    [
        "/etc/passwd",
        "file:///etc/passwd",
        f"{LOCATION}/../../../../etc/passwd",
        f"{LOCATION}/metadata/../../t2/snap.avro",
        "s3://bucket/wh/db/t2/metadata/snap.avro",  # a sibling whose name starts like the table's
        "s3://other/wh/db/t/metadata/snap.avro",
        LOCATION,
        "http://127.0.0.1:1/snap.avro",
    ],
)
def test_a_manifest_list_outside_the_table_is_refused(manifest_list: str) -> None:
    error = assert_refused(
        table(), AddSnapshot(snapshot(manifest_list=manifest_list)), match="not among the table's files"
    )
    assert type(error) is ValidationError  # a bad update (400), not a catalog root refusal (403)
    assert str(error).startswith("add-snapshot: snapshot 10: manifest list")


@pytest.mark.parametrize(
    "manifest_list",
    [
        f"{LOCATION}/metadata/snap-10.avro",
        "s3a://bucket/wh/db/t/metadata/snap-10.avro",
        f"{LOCATION}/x/y.avro",
    ],
)
def test_a_manifest_list_inside_the_table_is_taken(manifest_list: str) -> None:
    md = apply_updates(table(), [AddSnapshot(snapshot(manifest_list=manifest_list)), SetSnapshotRef(10)])
    assert md.current_snapshot_id == 10


def test_local_spellings_of_one_directory_compare_equal() -> None:
    md = table("/tmp/wh/db/t")
    apply_updates(md, [AddSnapshot(snapshot(manifest_list="file:///tmp/wh/db/t/metadata/snap.avro"))])
    assert_refused(md, AddSnapshot(snapshot(manifest_list="/tmp/wh/db/t/../u/snap.avro")), match="not among")


def test_write_metadata_path_is_the_tables_too() -> None:
    md = table(properties={"write.metadata.path": "s3://meta/t1"})
    apply_updates(md, [AddSnapshot(snapshot(manifest_list="s3://meta/t1/snap-10.avro"))])
    assert_refused(md, AddSnapshot(snapshot(manifest_list="s3://meta/t2/snap-10.avro")), match="not among")


def test_a_table_location_normalization_refuses_is_compared_as_written() -> None:
    md = table("s3://bucket/wh//db/t")
    apply_updates(md, [AddSnapshot(snapshot(manifest_list="s3://bucket/wh//db/t/metadata/snap.avro"))])
    assert_refused(
        md, AddSnapshot(snapshot(manifest_list="s3://bucket/wh//db/t/../../x.avro")), match="not among"
    )


def test_v1_inline_manifests_are_checked_too() -> None:
    inline = snapshot(manifest_list=None, sequence_number=0, manifests=(f"{LOCATION}/m.avro", "/etc/passwd"))
    assert_refused(table(format_version=1), AddSnapshot(inline), match="manifest '/etc/passwd'")
    assert_refused(table(), AddSnapshot(inline), match="need a manifest list")


def test_snapshot_parent_schema_and_sequence_number_must_make_sense() -> None:
    md = apply_updates(table(), [AddSnapshot(snapshot()), SetSnapshotRef(10)])
    assert_refused(
        md, AddSnapshot(snapshot(11, parent=99, sequence_number=2)), match="parent snapshot 99 does not exist"
    )
    assert_refused(md, AddSnapshot(snapshot(11, parent=10, sequence_number=2, schema_id=7)), match="schema 7")
    assert_refused(md, AddSnapshot(snapshot(11, parent=10, sequence_number=1)), match="not above")
    assert_refused(md, AddSnapshot(snapshot(10, sequence_number=2)), match="already exists")


def test_statistics_files_lie_inside_the_table() -> None:
    md = apply_updates(table(), [AddSnapshot(snapshot()), SetSnapshotRef(10)])
    apply_updates(md, [SetStatistics(StatisticsFile(10, f"{LOCATION}/metadata/10.stats", 10, 5))])
    assert_refused(
        md, SetStatistics(StatisticsFile(10, "/etc/shadow", 10, 5)), match="set-statistics: .*not among"
    )


def test_metadata_rules_broken_by_updates_are_validation_errors() -> None:
    md = apply_updates(table(), [AddSnapshot(snapshot()), SetSnapshotRef(10)])
    assert_refused(md, SetSnapshotRef(10, "main", SnapshotRefType.TAG), match="ref 'main' must be a branch")


# -- read from REST JSON: what needs no table is refused as it is read -----------------------------


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"action": "set-properties", "updates": {"commit.retry.num-retries": "abc"}}, "num-retries"),
        ({"action": "set-properties", "updates": {"format-version": "3"}}, "format-version"),
        (
            {"action": "set-properties", "updates": {"owner": None}},
            r"updates\['owner'\] must be a string, not null",
        ),
        ({"action": "remove-properties", "removals": [1]}, "must be a string, not a number"),
        ({"action": "remove-snapshots", "snapshot-ids": ["abc"]}, "must be an integer"),
        (
            {
                "action": "add-schema",
                "schema": {
                    "type": "struct",
                    "schema-id": 1,
                    "fields": [
                        {"id": 1, "name": "a", "required": False, "type": "long"},
                        {"id": 1, "name": "b", "required": False, "type": "string"},
                    ],
                },
            },
            "field id 1 is used by both 'a' and 'b'",
        ),
    ],
)
def test_rest_updates_are_checked_as_they_are_read(body: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        update_from_json(body)
