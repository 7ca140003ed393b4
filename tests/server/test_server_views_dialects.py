"""``aioiceberg serve`` refuses a view commit whose new current version drops a SQL dialect
(Java's ``replace.drop-dialect.allowed``): 400 in the REST error model, naming the view and
the dialect, the view as it was; our REST client refuses with the typed error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from servers.rest import RestServer, request_json

import aioiceberg
from aioiceberg.errors import ViewDialectDroppedError
from aioiceberg.spec.schema import Schema as OurSchema
from aioiceberg.spec.types import LongType as OurLong
from aioiceberg.spec.types import NestedField as OurField
from aioiceberg.spec.view_metadata import SqlRepresentation
from aioiceberg.spec.view_metadata import ViewVersion as OurVersion
from aioiceberg.view import ViewCatalog

SCHEMA_JSON = json.loads(
    Schema(NestedField(1, "id", LongType(), required=False)).model_dump_json(by_alias=True)
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    base = tmp_path_factory.mktemp("view-dialects")
    (base / "wh").mkdir()
    with RestServer(f"sqlite:///{base / 'catalog.db'}", tables_in=str(base / "wh")) as rest:
        yield rest.url, base / "wh"


def version_json(sql: str, dialects: list[str], schema_id: int = 0, ts: int = 1000) -> dict[str, Any]:
    return {
        "version-id": 1,
        "timestamp-ms": ts,
        "schema-id": schema_id,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": sql, "dialect": d} for d in dialects],
        "default-namespace": ["dd"],
    }


def _create(url: str, namespace: str, name: str, dialects: list[str]) -> dict[str, Any]:
    request_json(url, "POST", "/v1/namespaces", {"namespace": [namespace]})
    body = {"name": name, "schema": SCHEMA_JSON, "view-version": version_json("SELECT 1 AS id", dialects)}
    status, created = request_json(url, "POST", f"/v1/namespaces/{namespace}/views", body)
    assert status == 200 and isinstance(created, dict), created
    return created


def _replace(uuid: str, dialects: list[str], properties: dict[str, str] | None = None) -> dict[str, Any]:
    updates: list[dict[str, Any]] = [
        {"action": "add-schema", "schema": SCHEMA_JSON},
        {"action": "add-view-version", "view-version": version_json("SELECT 2 AS id", dialects, -1, 2000)},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    if properties:
        updates.append({"action": "set-properties", "updates": properties})
    return {"requirements": [{"type": "assert-view-uuid", "uuid": uuid}], "updates": updates}


def test_commit_dropping_a_dialect_answers_400_and_the_view_stays(site: tuple[str, Path]) -> None:
    url, warehouse = site
    created = _create(url, "dd", "v", ["spark", "trino"])
    files = sorted((warehouse / "dd" / "v" / "metadata").iterdir())
    status, answer = request_json(
        url, "POST", "/v1/namespaces/dd/views/v", _replace(created["metadata"]["view-uuid"], ["spark"])
    )
    assert status == 400, answer
    assert set(answer["error"]) == {"message", "type", "code"}
    assert answer["error"]["type"] == "BadRequestException" and answer["error"]["code"] == 400
    message = answer["error"]["message"]
    assert "dd.v" in message and "trino" in message and "replace.drop-dialect.allowed" in message
    assert str(warehouse) not in message
    status, loaded = request_json(url, "GET", "/v1/namespaces/dd/views/v")
    assert status == 200 and loaded["metadata-location"] == created["metadata-location"]
    assert sorted((warehouse / "dd" / "v" / "metadata").iterdir()) == files

    # the view property, set in the same commit, allows it
    allowed = _replace(created["metadata"]["view-uuid"], ["spark"], {"replace.drop-dialect.allowed": "true"})
    status, replaced = request_json(url, "POST", "/v1/namespaces/dd/views/v", allowed)
    assert status == 200, replaced
    (current,) = [v for v in replaced["metadata"]["versions"] if v["version-id"] == 2]
    assert [r["dialect"] for r in current["representations"]] == ["spark"]


@pytest.mark.anyio
async def test_our_rest_client_refuses_with_the_typed_error(site: tuple[str, Path]) -> None:
    url, _ = site
    _create(url, "dc", "v", ["spark", "trino"])
    schema = OurSchema(OurField(1, "id", OurLong(), False))
    spark_only = OurVersion(
        1, 2000, 0, {"engine-name": "aioiceberg"}, (SqlRepresentation("SELECT 2 AS id", "spark"),), ("dc",)
    )
    async with aioiceberg.connect(f"rest+{url}") as client:
        assert isinstance(client, ViewCatalog)
        view = await client.load_view("dc.v")
        with pytest.raises(ViewDialectDroppedError, match=r"dc\.v.*trino") as err:
            await client.replace_view("dc.v", schema, spark_only)
        assert err.value.dropped == ["trino"]
        assert (await client.load_view("dc.v")).metadata_location == view.metadata_location
        replaced = await client.replace_view(
            "dc.v", schema, spark_only, {"replace.drop-dialect.allowed": "true"}
        )
        assert replaced.metadata.current_version.sql_for("trino") is None
