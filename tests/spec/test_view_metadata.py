"""View metadata (the view spec, format version 1): the spec's example documents read and
written back unchanged, changes applied as Java's view builder applies them, and damaged
documents refused with typed errors naming what is wrong."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from aioiceberg.errors import (
    CorruptFileError,
    InvalidMetadataError,
    UnsupportedFormatVersionError,
    ValidationError,
)
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import IntegerType, NestedField
from aioiceberg.spec.view_metadata import (
    SqlRepresentation,
    UnknownRepresentation,
    ViewVersion,
    parse_view_metadata,
    serialize_view_metadata,
    view_metadata_from_dict,
    view_metadata_to_dict,
)
from aioiceberg.spec.view_updates import ViewChanges, new_view_metadata

# The view spec's first example (one version, Spark SQL), as the spec prints it.
SPEC_EXAMPLE: dict[str, Any] = {
    "view-uuid": "fa6506c3-7681-40c8-86dc-e36561f83385",
    "format-version": 1,
    "location": "s3://bucket/warehouse/default.db/event_agg",
    "current-version-id": 1,
    "properties": {"comment": "Daily event counts"},
    "versions": [
        {
            "version-id": 1,
            "timestamp-ms": 1573518431292,
            "schema-id": 1,
            "default-catalog": "prod",
            "default-namespace": ["default"],
            "summary": {"engine-name": "Spark", "engine-version": "3.3.2"},
            "representations": [
                {
                    "type": "sql",
                    "sql": "SELECT\n    COUNT(1), CAST(event_ts AS DATE)\nFROM events\nGROUP BY 2",
                    "dialect": "spark",
                }
            ],
        }
    ],
    "schemas": [
        {
            "schema-id": 1,
            "type": "struct",
            "fields": [
                {"id": 1, "name": "event_count", "required": False, "type": "int", "doc": "Count of events"},
                {"id": 2, "name": "event_date", "required": False, "type": "date"},
            ],
        }
    ],
    "version-log": [{"timestamp-ms": 1573518431292, "version-id": 1}],
}


def second_example() -> dict[str, Any]:
    """The spec's second example: the view replaced, a Trino representation beside Spark's."""
    doc = copy.deepcopy(SPEC_EXAMPLE)
    doc["current-version-id"] = 2
    doc["versions"].append(
        {
            "version-id": 2,
            "timestamp-ms": 1573518981593,
            "schema-id": 1,
            "default-catalog": "prod",
            "default-namespace": ["default"],
            "summary": {"engine-name": "Spark", "engine-version": "3.3.2"},
            "representations": [
                {
                    "type": "sql",
                    "sql": (
                        "SELECT\n    COUNT(1), CAST(event_ts AS DATE)\nFROM prod.default.events\nGROUP BY 2"
                    ),
                    "dialect": "spark",
                },
                {"type": "sql", "sql": "SELECT count(*) FROM events", "dialect": "trino"},
            ],
        }
    )
    doc["version-log"].append({"timestamp-ms": 1573518981593, "version-id": 2})
    return doc


@pytest.mark.parametrize("doc", [SPEC_EXAMPLE, second_example()], ids=["first", "replaced"])
def test_spec_examples_round_trip(doc: dict[str, Any]) -> None:
    md = parse_view_metadata(json.dumps(doc).encode())
    assert view_metadata_to_dict(md) == doc
    assert parse_view_metadata(serialize_view_metadata(md)) == md
    assert md.current_version.version_id == doc["current-version-id"]
    assert md.current_version.default_namespace == ("default",)
    assert md.current_schema.fields[0].name == "event_count"


def test_representations_by_dialect_and_unknown_kept() -> None:
    doc = second_example()
    doc["versions"][1]["representations"].append({"type": "substrait", "plan": "AAEC"})
    md = view_metadata_from_dict(doc)
    version = md.current_version
    assert version.sql_for("TRINO") == "SELECT count(*) FROM events"
    assert version.sql_for("duckdb") is None
    assert isinstance(version.representations[-1], UnknownRepresentation)
    assert view_metadata_to_dict(md) == doc


def test_optional_fields_absent() -> None:
    doc = copy.deepcopy(SPEC_EXAMPLE)
    del doc["properties"]
    del doc["versions"][0]["default-catalog"]
    md = view_metadata_from_dict(doc)
    assert md.properties == {}
    assert md.current_version.default_catalog is None
    out = view_metadata_to_dict(md)
    assert "default-catalog" not in out["versions"][0]
    assert out["properties"] == {}


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(second_example())
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (["view-uuid"], _DELETE, "'view-uuid'"),
        (["location"], 7, "'location'"),
        (["current-version-id"], 9, "current-version-id 9"),
        (["current-version-id"], True, "'current-version-id'"),
        (["versions"], [], "no versions"),
        (["versions", 0, "schema-id"], 5, "schema 5"),
        (["versions", 1, "version-id"], 1, "repeat"),
        (["versions", 0, "summary"], {"engine-name": 3}, "engine-name"),
        (["versions", 0, "summary"], _DELETE, "'summary'"),
        (["versions", 0, "representations"], [], "no representations"),
        (["versions", 0, "representations", 0, "sql"], None, "'sql'"),
        (["versions", 0, "representations", 0, "dialect"], _DELETE, "'dialect'"),
        (["versions", 0, "default-namespace"], "default", "'default-namespace'"),
        (["versions", 0, "default-namespace"], [1], "'default-namespace'"),
        (["versions", 1, "representations", 1, "dialect"], "SPARK", "dialect"),
        (["schemas", 0, "type"], "list", "struct"),
        (["schemas"], "none", "'schemas'"),
        (["version-log", 0], [1, 2], "version-log"),
        (["properties"], {"a": 1}, "'a'"),
    ],
)
def test_bad_documents_are_refused(path: list[Any], value: Any, words: str) -> None:
    with pytest.raises(InvalidMetadataError) as err:
        parse_view_metadata(json.dumps(_broken(path, value)), "s3://b/v/metadata/00001-x.metadata.json")
    assert words in str(err.value)
    assert "s3://b/v/metadata/00001-x.metadata.json" in str(err.value)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"{not json", CorruptFileError),
        (b"\xff\xfe", CorruptFileError),
        (b"[1, 2]", InvalidMetadataError),
        (b"[" * 100_000 + b"]" * 100_000, CorruptFileError),
    ],
)
def test_damaged_files(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_view_metadata(data)


def test_unknown_format_version() -> None:
    with pytest.raises(UnsupportedFormatVersionError, match="view format version 2"):
        view_metadata_from_dict(_broken(["format-version"], 2))


SCHEMA = Schema(NestedField(1, "a", IntegerType(), False), schema_id=7)


def _version(sql: str, ts: int = 1000, version_id: int = 1) -> ViewVersion:
    return ViewVersion(
        version_id, ts, 0, {"engine-name": "test"}, (SqlRepresentation(sql, "spark"),), ("ns",)
    )


def test_new_view_gets_schema_zero_and_version_one() -> None:
    md = new_view_metadata("u-1", "file:///w/ns/v/", SCHEMA, _version("select 1 as a"), {"k": "v"})
    assert md.location == "file:///w/ns/v"
    assert [s.schema_id for s in md.schemas] == [0]
    assert md.current_version_id == 1 and md.current_version.schema_id == 0
    assert [(e.version_id, e.timestamp_ms) for e in md.version_log] == [(1, 1000)]
    assert parse_view_metadata(serialize_view_metadata(md)) == md


def _replace_updates(sql: str, ts: int, schema: Schema = SCHEMA) -> list[dict[str, Any]]:
    version = {
        "version-id": 1,
        "timestamp-ms": ts,
        "schema-id": -1,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["ns"],
    }
    fields = [
        {"id": f.field_id, "name": f.name, "required": f.required, "type": "int"} for f in schema.fields
    ]
    return [
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 5, "fields": fields}},
        {"action": "add-view-version", "view-version": version},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]


def test_replace_adds_a_version_and_reuses_equal_ones() -> None:
    base = new_view_metadata("u-1", "/w/ns/v", SCHEMA, _version("select 1 as a"))
    changes = ViewChanges(base)
    changes.apply_all(_replace_updates("select 2 as a", 2000))
    second = changes.build()
    assert second.current_version_id == 2
    assert [s.schema_id for s in second.schemas] == [0]  # the same schema: reused
    assert second.current_version.sql_for("spark") == "select 2 as a"
    # back to the first query: no third version, the first becomes current again
    changes = ViewChanges(second)
    changes.apply_all(_replace_updates("select 1 as a", 3000))
    third = changes.build()
    assert [v.version_id for v in third.versions] == [1, 2]
    assert [e.version_id for e in third.version_log] == [1, 2, 1]


def test_new_schema_gets_the_next_id() -> None:
    base = new_view_metadata("u-1", "/w/ns/v", SCHEMA, _version("select 1 as a"))
    wider = Schema(NestedField(1, "a", IntegerType(), False), NestedField(2, "b", IntegerType(), False))
    changes = ViewChanges(base)
    changes.apply_all(_replace_updates("select 1 as a, 2 as b", 2000, wider))
    md = changes.build()
    assert [s.schema_id for s in md.schemas] == [0, 1]
    assert md.current_version.schema_id == 1


def test_old_versions_expire_by_property() -> None:
    md = new_view_metadata(
        "u-1", "/w/ns/v", SCHEMA, _version("select 0 as a"), {"version.history.num-entries": "2"}
    )
    for n in range(1, 4):
        changes = ViewChanges(md)
        changes.apply_all(_replace_updates(f"select {n} as a", 1000 + n))
        md = changes.build()
    assert [v.version_id for v in md.versions] == [3, 4]
    assert {e.version_id for e in md.version_log} == {3, 4}


@pytest.mark.parametrize(
    ("update", "words"),
    [
        ({"action": "drop-everything"}, "unknown action"),
        ("add-schema", "JSON object"),
        ({"action": "assign-uuid", "uuid": "other"}, "cannot become"),
        ({"action": "upgrade-format-version", "format-version": 2}, "not supported"),
        ({"action": "set-current-view-version", "view-version-id": 42}, "no version 42"),
        ({"action": "set-current-view-version", "view-version-id": -1}, "none was added"),
        ({"action": "set-properties", "updates": {"a": 1}}, "string"),
        ({"action": "remove-properties", "removals": "a"}, "removals"),
        ({"action": "set-location", "location": ""}, "location"),
        ({"action": "add-schema", "schema": {"type": "struct", "fields": [{"id": "x"}]}}, "add-schema"),
        ({"action": "add-view-version", "view-version": {"version-id": 3}}, "add-view-version"),
    ],
)
def test_bad_updates_are_refused(update: Any, words: str) -> None:
    base = new_view_metadata("u-1", "/w/ns/v", SCHEMA, _version("select 1 as a"))
    changes = ViewChanges(base)
    with pytest.raises(ValidationError, match=words):
        changes.apply(update)
