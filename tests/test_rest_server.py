"""``aioiceberg serve`` as an Iceberg REST catalog: real PyIceberg 0.12 RestCatalog and DuckDB
1.5.5 clients over HTTP against the real server process, on a local warehouse.

One server per module (tests use their own namespaces) keeps the start-up cost to one process.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from servers.rest import RestServer

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    with RestServer(str(tmp_path_factory.mktemp("rest") / "warehouse")) as rest:
        yield rest


def client(server: RestServer) -> PyCatalog:
    return load_catalog("rest", type="rest", uri=server.url)


@pytest.fixture
def catalog(server: RestServer) -> PyCatalog:
    return client(server)


@pytest.fixture
def ns(catalog: PyCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def batch(ids: list[int], regions: list[str]) -> pa.Table:
    return pa.table({"id": ids, "region": regions}, schema=ARROW)


def http(server: RestServer, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path, data=body, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            data = response.read()
            return response.status, json.loads(data) if data else None
    except urllib.error.HTTPError as exc:
        data = exc.read()
        return exc.code, json.loads(data) if data else None


# -- PyIceberg ---------------------------------------------------------------------------------
def test_pyiceberg_writes_evolves_and_reads_back_through_the_server(catalog: PyCatalog) -> None:
    name = f"db_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name, {"owner": "data-eng", "team": "core"})
    assert catalog.load_namespace_properties(name) == {"owner": "data-eng", "team": "core"}
    table = catalog.create_table(f"{name}.events", schema=SCHEMA, partition_spec=BY_REGION)
    assert table.spec().fields[0].name == "region"

    table.append(batch([1, 2, 3], ["eu", "us", "eu"]))
    table.append(batch([4], ["ap"]))
    table.overwrite(batch([10, 11], ["eu", "eu"]), overwrite_filter="region == 'eu'")
    with table.update_schema() as update:
        update.add_column("score", LongType())
    evolved = pa.schema([*ARROW, pa.field("score", pa.int64())])
    table.append(pa.table({"id": [20], "region": ["us"], "score": [7]}, schema=evolved))

    reloaded = catalog.load_table(f"{name}.events")
    assert [f.name for f in reloaded.schema().fields] == ["id", "region", "score"]
    assert rows(reloaded) == [
        {"id": 2, "region": "us", "score": None},
        {"id": 4, "region": "ap", "score": None},
        {"id": 10, "region": "eu", "score": None},
        {"id": 11, "region": "eu", "score": None},
        {"id": 20, "region": "us", "score": 7},
    ]
    assert len(reloaded.history()) == 4 + 1  # appends, overwrite's delete + append, append


def test_namespaces_list_properties_and_drop(catalog: PyCatalog) -> None:
    top = f"top_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(top)
    catalog.create_namespace((top, "child"), {"a": "1", "b": "2"})
    assert (top,) in catalog.list_namespaces()
    assert catalog.list_namespaces(top) == [(top, "child")]
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace(top)

    summary = catalog.update_namespace_properties((top, "child"), removals={"a", "zz"}, updates={"c": "3"})
    assert (summary.removed, summary.updated, summary.missing) == (["a"], ["c"], ["zz"])
    assert catalog.load_namespace_properties((top, "child")) == {"b": "2", "c": "3"}

    catalog.create_table((top, "child", "t"), schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((top, "child"))
    catalog.drop_table((top, "child", "t"))
    catalog.drop_namespace((top, "child"))
    assert not catalog.namespace_exists((top, "child"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties((top, "child"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_namespaces(f"missing_{uuid.uuid4().hex[:8]}")


def test_tables_list_rename_drop_and_errors(catalog: PyCatalog, ns: str, server: RestServer) -> None:
    table = catalog.create_table(f"{ns}.a", schema=SCHEMA)
    table.append(batch([1], ["eu"]))
    catalog.create_table(f"{ns}.b", schema=SCHEMA)
    assert sorted(catalog.list_tables(ns)) == [(ns, "a"), (ns, "b")]
    assert catalog.table_exists(f"{ns}.a") and not catalog.table_exists(f"{ns}.nope")

    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(f"{ns}.a", schema=SCHEMA)
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.nope")
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table(f"missing_{uuid.uuid4().hex[:8]}.t", schema=SCHEMA)

    renamed = catalog.rename_table(f"{ns}.a", f"{ns}.c")
    assert rows(renamed) == [{"id": 1, "region": "eu"}]
    assert not catalog.table_exists(f"{ns}.a")
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table(f"{ns}.c", f"{ns}.b")
    with pytest.raises(NoSuchTableError):
        catalog.rename_table(f"{ns}.a", f"{ns}.d")

    location = Path(catalog.load_table(f"{ns}.c").location())
    catalog.drop_table(f"{ns}.b")
    catalog.purge_table(f"{ns}.c")
    assert catalog.list_tables(ns) == []
    left = [p.name for p in location.rglob("*") if p.is_file() and p.name != ".aioiceberg.lock"]
    assert left == []  # data files, manifests and metadata are gone
    with pytest.raises(NoSuchTableError):
        catalog.drop_table(f"{ns}.b")


def test_register_brings_back_a_dropped_table(catalog: PyCatalog, ns: str) -> None:
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(batch([1, 2], ["eu", "us"]))
    catalog.drop_table(f"{ns}.t")
    kept = sorted((Path(table.location()) / "metadata").glob("*-dropped-*.metadata.json"))
    assert len(kept) == 1
    registered = catalog.register_table(f"{ns}.t", str(kept[0]))
    assert rows(registered) == [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table(f"{ns}.t", str(kept[0]))


def test_staged_create_lands_with_its_first_snapshot(catalog: PyCatalog, ns: str) -> None:
    transaction = catalog.create_table_transaction(f"{ns}.staged", schema=SCHEMA, partition_spec=BY_REGION)
    assert not catalog.table_exists(f"{ns}.staged")
    transaction.append(batch([1, 2], ["eu", "us"]))
    transaction.commit_transaction()
    table = catalog.load_table(f"{ns}.staged")
    assert rows(table) == [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
    assert len(table.history()) == 1
    assert [p.name for p in (Path(table.location()) / "metadata").glob("00000-*.metadata.json")] == []

    again = catalog.create_table_transaction(f"{ns}.staged2", schema=SCHEMA)
    catalog.create_table(f"{ns}.staged2", schema=SCHEMA)  # someone else creates the name first
    with pytest.raises(CommitFailedException):
        again.commit_transaction()
