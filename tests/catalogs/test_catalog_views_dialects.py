"""A view replace that drops a SQL dialect is refused (Java's ``replace.drop-dialect.allowed``,
false when unset) through our API on the SQL catalog, whichever way the new version comes:
``replace_view``, ``commit_view`` with metadata made by hand, or the view builder itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from aioiceberg.catalogs.sql import SqlCatalog
from aioiceberg.errors import ValidationError, ViewDialectDroppedError
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField
from aioiceberg.spec.view_metadata import SqlRepresentation, ViewVersion
from aioiceberg.spec.view_updates import ViewChanges

SCHEMA = Schema(NestedField(1, "id", LongType(), False))


def version(sql: str, ts: int, *dialects: str) -> ViewVersion:
    representations = tuple(SqlRepresentation(sql, d) for d in dialects)
    return ViewVersion(1, ts, 0, {"engine-name": "test"}, representations, ("ns",))


@pytest.fixture
async def catalog(tmp_path: Path) -> AsyncIterator[SqlCatalog]:
    found = SqlCatalog(str(tmp_path / "catalog.db"), warehouse=str(tmp_path / "wh"))
    async with found:
        await found.create_namespace("ns")
        yield found


def _files(catalog: SqlCatalog, name: str) -> list[str]:
    return sorted(p.name for p in Path(f"{catalog.warehouse}/ns/{name}/metadata").iterdir())


@pytest.mark.anyio
async def test_replace_dropping_a_dialect_is_refused_and_the_view_stays(catalog: SqlCatalog) -> None:
    view = await catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id", 1000, "spark", "Trino"))
    before = _files(catalog, "v")
    with pytest.raises(ViewDialectDroppedError) as err:
        await catalog.replace_view("ns.v", SCHEMA, version("SELECT 2 AS id", 2000, "spark"))
    assert err.value.view == "ns.v" and err.value.dropped == ["trino"]
    assert "ns.v" in str(err.value) and "trino" in str(err.value)
    assert "replace.drop-dialect.allowed" in str(err.value)
    assert isinstance(err.value, ValidationError)
    assert (await catalog.load_view("ns.v")).metadata_location == view.metadata_location
    assert _files(catalog, "v") == before

    # metadata made by hand is held to the same rule at commit_view
    changes = ViewChanges(view.metadata)  # the builder alone, without a name, would refuse too
    changes.set_current(changes.add_version(version("SELECT 2 AS id", 2000, "spark")))
    with pytest.raises(ViewDialectDroppedError, match="trino"):
        changes.build()
    by_hand = replace(
        view.metadata,
        versions=(*view.metadata.versions, replace(version("SELECT 2 AS id", 2000, "spark"), version_id=2)),
        current_version_id=2,
    )
    with pytest.raises(ViewDialectDroppedError, match=r"ns\.v"):
        await catalog.commit_view(view, by_hand)
    assert _files(catalog, "v") == before


@pytest.mark.anyio
async def test_keeping_or_adding_dialects_and_the_property_override(catalog: SqlCatalog) -> None:
    await catalog.create_view("ns.v", SCHEMA, version("SELECT 1 AS id", 1000, "spark"))
    # the same dialect spelled otherwise, plus a new one: nothing is dropped
    kept = await catalog.replace_view("ns.v", SCHEMA, version("SELECT 2 AS id", 2000, "SPARK", "trino"))
    assert kept.metadata.current_version.sql_for("trino") == "SELECT 2 AS id"
    # the property, set in the same replace, allows the drop (case-blind "true", as Java reads it)
    dropped = await catalog.replace_view(
        "ns.v", SCHEMA, version("SELECT 3 AS id", 3000, "trino"), {"replace.drop-dialect.allowed": "TRUE"}
    )
    assert dropped.metadata.current_version.sql_for("spark") is None
    # any other value is false; the property set earlier keeps allowing it
    await catalog.replace_view("ns.v", SCHEMA, version("SELECT 4 AS id", 4000, "spark"))
    with pytest.raises(ViewDialectDroppedError):
        await catalog.replace_view(
            "ns.v",
            SCHEMA,
            version("SELECT 5 AS id", 5000, "trino"),
            {"replace.drop-dialect.allowed": "yes"},
        )
    assert (await catalog.load_view("ns.v")).metadata.current_version.sql_for("spark") == "SELECT 4 AS id"
