"""A REST commit passes the checks the Python API makes: ``aioiceberg serve`` as a separate
process on a local warehouse, sent what a hostile client would send (raw HTTP), and what
PyIceberg 0.12's RestCatalog sends in normal use.

One server for the module; each test works in its own namespace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import BadRequestError, NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType
from servers.rest import RestServer, request_json

import aioiceberg
from aioiceberg.errors import ValidationError

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
)
SECRET = "canary-secret-7f3a"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("validation") / "warehouse"


@pytest.fixture(scope="module")
def server(warehouse: Path) -> Iterator[RestServer]:
    with RestServer(str(warehouse)) as rest:
        yield rest


@pytest.fixture
def catalog(server: RestServer) -> PyCatalog:
    return load_catalog("rest", type="rest", uri=server.url)


@pytest.fixture
def ns(catalog: PyCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def batch(ids: list[int], regions: list[str]) -> pa.Table:
    return pa.table({"id": ids, "region": regions}, schema=ARROW)


def load(server: RestServer, ns: str, name: str) -> dict[str, Any]:
    status, body = request_json(server.url, "GET", f"/v1/namespaces/{ns}/tables/{name}")
    assert status == 200, body
    return dict(body)


def commit(server: RestServer, ns: str, name: str, *updates: dict[str, Any]) -> tuple[int, Any]:
    body = {"identifier": {"namespace": [ns], "name": name}, "requirements": [], "updates": list(updates)}
    return request_json(server.url, "POST", f"/v1/namespaces/{ns}/tables/{name}", body)


def assert_bad_request(status: int, body: Any, *words: str) -> str:
    assert status == 400, body
    error = body["error"]
    assert (error["type"], error["code"]) == ("BadRequestException", 400)
    message = str(error["message"])
    for word in words:
        assert word in message, message
    assert "Traceback" not in message and SECRET not in message
    return message


def made(catalog: PyCatalog, ns: str, name: str = "t") -> Any:
    table = catalog.create_table(f"{ns}.{name}", schema=SCHEMA, partition_spec=BY_REGION)
    table.append(batch([1, 2], ["eu", "us"]))
    return table


# -- set-properties ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_retry_count_of_abc_is_400_and_the_table_stays_writable(
    server: RestServer, catalog: PyCatalog, ns: str
) -> None:
    table = made(catalog, ns)
    before = load(server, ns, "t")["metadata-location"]
    status, body = commit(
        server, ns, "t", {"action": "set-properties", "updates": {"commit.retry.num-retries": "abc"}}
    )
    assert_bad_request(status, body, "set-properties", "commit.retry.num-retries", "non-negative integer")
    after = load(server, ns, "t")
    assert after["metadata-location"] == before
    assert "commit.retry.num-retries" not in after["metadata"]["properties"]

    table.append(batch([3], ["ap"]))  # PyIceberg, through the server
    direct = await aioiceberg.load_table(table.location())  # our writer reads commit.retry.*
    await direct.append(batch([4], ["eu"]))
    assert sorted(r["id"] for r in catalog.load_table(f"{ns}.t").scan().to_arrow().to_pylist()) == [
        1,
        2,
        3,
        4,
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "updates",
    [
        {"format-version": "3"},
        {"uuid": "00000000-0000-4000-8000-000000000000"},
        {"current-snapshot-id": "1"},
        {"write.target-file-size-bytes": "-5"},
        {"write.delete.mode": "sometimes"},
        {"write.metadata.metrics.column.id": "most"},
        {"write.metadata.path": "relative/metadata"},
    ],
)
async def test_properties_the_python_api_refuses_are_refused_with_its_words(
    server: RestServer, catalog: PyCatalog, ns: str, updates: dict[str, str]
) -> None:
    table = made(catalog, ns)
    direct = await aioiceberg.load_table(table.location())
    with pytest.raises(ValidationError) as python_api:
        await direct.set_properties(updates)
    status, body = commit(server, ns, "t", {"action": "set-properties", "updates": updates})
    assert_bad_request(status, body, str(python_api.value))


def test_non_string_property_values_are_400_not_stored_as_text(
    server: RestServer, catalog: PyCatalog, ns: str
) -> None:
    made(catalog, ns)
    for value in (None, 5, ["x"]):
        status, body = commit(server, ns, "t", {"action": "set-properties", "updates": {"owner": value}})
        assert_bad_request(status, body, "must be a string")
    assert "owner" not in load(server, ns, "t")["metadata"]["properties"]


def test_a_staged_create_with_a_bad_property_creates_nothing(catalog: PyCatalog, ns: str) -> None:
    with pytest.raises(BadRequestError, match=r"commit\.retry\.num-retries"):
        tx = catalog.create_table_transaction(
            f"{ns}.staged", schema=SCHEMA, properties={"commit.retry.num-retries": "abc"}
        )
        tx.commit_transaction()
    with pytest.raises(BadRequestError, match=r"write\.delete\.mode"):
        catalog.create_table(f"{ns}.direct", schema=SCHEMA, properties={"write.delete.mode": "sometimes"})
    for name in ("staged", "direct"):
        with pytest.raises(NoSuchTableError):
            catalog.load_table(f"{ns}.{name}")


# -- add-schema / add-spec / add-sort-order ----------------------------------------------------------


def schema_json(*fields: dict[str, Any], identifier_field_ids: list[int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "struct", "schema-id": 1, "fields": list(fields)}
    if identifier_field_ids is not None:
        out["identifier-field-ids"] = identifier_field_ids
    return out


ID = {"id": 1, "name": "id", "required": True, "type": "long"}
REGION = {"id": 2, "name": "region", "required": False, "type": "string"}


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (schema_json(ID, REGION, {"id": 2, "name": "dup", "required": False, "type": "int"}), ["field id 2"]),
        (
            schema_json(
                ID,
                REGION,
                {
                    "id": 3,
                    "name": "tags",
                    "required": False,
                    "type": {"type": "list", "element-id": 1, "element": "string", "element-required": False},
                },
            ),
            ["field id 1", "tags.element"],
        ),
        (schema_json(ID, REGION, {"id": 3, "name": "", "required": False, "type": "int"}), ["empty name"]),
        (
            schema_json(ID, REGION, {"id": 3, "name": "region", "required": False, "type": "int"}),
            ["duplicate"],
        ),
        (
            schema_json(ID, REGION, {"id": 3, "name": "ns", "required": False, "type": "timestamp_ns"}),
            ["format"],
        ),
        (schema_json(ID, REGION, identifier_field_ids=[2]), ["identifier", "required"]),
        (schema_json(ID, REGION, {"id": 3, "name": "x", "required": False, "type": "carrot"}), ["carrot"]),
    ],
)
def test_bad_schemas_are_400_and_change_nothing(
    server: RestServer, catalog: PyCatalog, ns: str, schema: dict[str, Any], words: list[str]
) -> None:
    made(catalog, ns)
    before = load(server, ns, "t")
    status, body = commit(
        server,
        ns,
        "t",
        {"action": "add-schema", "schema": schema},
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert_bad_request(status, body, *words)
    assert load(server, ns, "t")["metadata-location"] == before["metadata-location"]


def test_dropping_a_partition_source_column_is_400(server: RestServer, catalog: PyCatalog, ns: str) -> None:
    made(catalog, ns)
    status, body = commit(
        server,
        ns,
        "t",
        {"action": "add-schema", "schema": schema_json(ID)},
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert_bad_request(status, body, "partition field 'region'", "does not have")


@pytest.mark.parametrize(
    ("update", "words"),
    [
        (
            {
                "action": "add-spec",
                "spec": {
                    "spec-id": 1,
                    "fields": [{"source-id": 2, "field-id": 1001, "name": "r_day", "transform": "day"}],
                },
            },
            ["day cannot apply to string"],
        ),
        (
            {
                "action": "add-spec",
                "spec": {
                    "fields": [{"source-id": 42, "field-id": 1001, "name": "x", "transform": "identity"}]
                },
            },
            ["source field id 42"],
        ),
        (
            {
                "action": "add-sort-order",
                "sort-order": {
                    "order-id": 1,
                    "fields": [
                        {"source-id": 2, "transform": "hour", "direction": "asc", "null-order": "nulls-first"}
                    ],
                },
            },
            ["hour cannot transform string"],
        ),
    ],
)
def test_specs_and_orders_that_do_not_bind_are_400(
    server: RestServer, catalog: PyCatalog, ns: str, update: dict[str, Any], words: list[str]
) -> None:
    made(catalog, ns)
    status, body = commit(server, ns, "t", update)
    assert_bad_request(status, body, *words)


# -- add-snapshot / set-statistics -------------------------------------------------------------------


def snapshot_json(metadata: dict[str, Any], manifest_list: str) -> dict[str, Any]:
    return {
        "snapshot-id": 424242,
        "parent-snapshot-id": metadata["current-snapshot-id"],
        "sequence-number": metadata["last-sequence-number"] + 1,
        "timestamp-ms": metadata["last-updated-ms"] + 1,
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": metadata["current-schema-id"],
    }


def test_a_manifest_list_outside_the_table_is_400_and_never_read(
    server: RestServer, catalog: PyCatalog, ns: str, tmp_path: Path
) -> None:
    table = made(catalog, ns)
    canary = tmp_path / "canary.avro"
    canary.write_text(SECRET)
    fifo = tmp_path / "reader-would-hang.avro"
    os.mkfifo(fifo)  # opening it to read blocks until a writer comes: a read would time the request out
    before = load(server, ns, "t")
    location = before["metadata"]["location"]
    for manifest_list in (
        "/etc/passwd",
        "file:///etc/passwd",
        str(canary),
        str(fifo),
        f"{location}/metadata/../../../../{canary.relative_to('/')}",
        f"{location}/../{Path(location).name}-sibling/metadata/snap.avro",
    ):
        status, body = commit(
            server,
            ns,
            "t",
            {"action": "add-snapshot", "snapshot": snapshot_json(before["metadata"], manifest_list)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 424242},
        )
        assert_bad_request(status, body, "add-snapshot", "manifest list", "not among the table's files")
    after = load(server, ns, "t")
    assert after["metadata-location"] == before["metadata-location"]
    assert [s["snapshot-id"] for s in after["metadata"]["snapshots"]] == [
        s["snapshot-id"] for s in before["metadata"]["snapshots"]
    ]
    assert canary.read_text() == SECRET
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [1, 2]


def test_statistics_outside_the_table_are_400(server: RestServer, catalog: PyCatalog, ns: str) -> None:
    made(catalog, ns)
    metadata = load(server, ns, "t")["metadata"]
    statistics = {
        "snapshot-id": metadata["current-snapshot-id"],
        "statistics-path": "/etc/shadow",
        "file-size-in-bytes": 10,
        "file-footer-size-in-bytes": 5,
        "blob-metadata": [],
    }
    status, body = commit(
        server,
        ns,
        "t",
        {
            "action": "set-statistics",
            "snapshot-id": metadata["current-snapshot-id"],
            "statistics": statistics,
        },
    )
    assert_bad_request(status, body, "set-statistics", "not among the table's files")


def test_a_snapshot_with_an_unknown_parent_is_400(server: RestServer, catalog: PyCatalog, ns: str) -> None:
    made(catalog, ns)
    metadata = load(server, ns, "t")["metadata"]
    snap = snapshot_json(metadata, f"{metadata['location']}/metadata/snap-424242.avro")
    snap["parent-snapshot-id"] = 99
    status, body = commit(server, ns, "t", {"action": "add-snapshot", "snapshot": snap})
    assert_bad_request(status, body, "parent snapshot 99 does not exist")


# -- what normal clients send keeps working ----------------------------------------------------------


def test_pyiceberg_appends_and_evolutions_through_the_server_still_commit(
    catalog: PyCatalog, ns: str
) -> None:
    table = catalog.create_table(
        f"{ns}.normal",
        schema=SCHEMA,
        partition_spec=BY_REGION,
        properties={"write.delete.mode": "merge-on-read"},
    )
    table.append(batch([1, 2], ["eu", "us"]))
    with table.update_schema() as update:
        update.add_column("ts", TimestampType())
        update.add_column("score", LongType())
    with table.update_spec() as spec:
        spec.add_field("ts", DayTransform(), "ts_day")
    with table.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    with table.transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "6", "owner": "data-eng"})
    evolved = pa.schema([*ARROW, pa.field("ts", pa.timestamp("us")), pa.field("score", pa.int64())])
    table.append(pa.table({"id": [3], "region": ["ap"], "ts": [None], "score": [7]}, schema=evolved))
    with table.update_schema() as update:
        update.delete_column("score")

    reloaded = catalog.load_table(f"{ns}.normal")
    assert [f.name for f in reloaded.schema().fields] == ["id", "region", "ts"]
    assert [f.name for f in reloaded.spec().fields] == ["region", "ts_day"]
    assert reloaded.properties["commit.retry.num-retries"] == "6"
    assert sorted(r["id"] for r in reloaded.scan().to_arrow().to_pylist()) == [1, 2, 3]
    assert len(reloaded.history()) == 2
