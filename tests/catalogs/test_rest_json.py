"""Table updates and requirements in the REST protocol's JSON, checked against PyIceberg's models.

What PyIceberg builds for real transactions must parse here and come back as the same JSON,
and every update we send must parse in PyIceberg as the same thing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pydantic import TypeAdapter
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.update import TableRequirement as PyRequirement
from pyiceberg.table.update import TableUpdate as PyUpdate
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import LongType, StringType

from aioiceberg.commit.rest_json import (
    requirement_from_json,
    requirement_to_json,
    update_from_json,
    update_to_json,
)
from aioiceberg.commit.updates import (
    AddPartitionSpec,
    AddSortOrder,
    RemoveProperties,
    RemoveSnapshotRef,
    RemoveSnapshots,
    RemoveStatistics,
    SetDefaultSortOrder,
    SetDefaultSpec,
    SetLocation,
    SetSnapshotRef,
    SetStatistics,
    TableUpdate,
    UpgradeFormatVersion,
)
from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.metadata import BlobMetadata, SnapshotRefType, StatisticsFile
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.sorting import NullOrder, SortDirection, SortField, SortOrder
from aioiceberg.spec.transforms import parse_transform

UPDATES: TypeAdapter[Any] = TypeAdapter(PyUpdate)
REQUIREMENTS: TypeAdapter[Any] = TypeAdapter(PyRequirement)


def _py_json(model: Any) -> dict[str, Any]:
    return {k: v for k, v in json.loads(model.model_dump_json()).items() if v is not None}


def _pyiceberg_transaction(tmp_path: Path) -> tuple[list[Any], list[Any]]:
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("s", pa.string())]))
    table.append(pa.table({"id": [1], "s": ["a"]}))
    tx = table.transaction()
    tx.append(pa.table({"id": [2], "s": ["b"]}))
    with tx.update_schema() as update:
        update.add_column("x", LongType())
        update.add_column("y", StringType())
    with tx.update_spec() as spec:
        spec.add_field("id", BucketTransform(4), "id_bucket")
    tx.set_properties(a="b", c="d")
    tx.remove_properties("c")
    return list(tx._updates), list(tx._requirements)


def test_what_pyiceberg_sends_parses_and_comes_back_the_same(tmp_path: Path) -> None:
    updates, requirements = _pyiceberg_transaction(tmp_path)
    actions = {_py_json(u)["action"] for u in updates}
    wanted = {
        "add-snapshot",
        "add-schema",
        "add-spec",
        "set-snapshot-ref",
        "set-properties",
        "remove-properties",
    }
    assert wanted <= actions
    for update in updates:
        sent = _py_json(update)
        ours = update_to_json(update_from_json(sent))
        assert update_from_json(ours) == update_from_json(sent), sent["action"]
        assert UPDATES.validate_python(ours) == update
    for requirement in requirements:
        sent = json.loads(requirement.model_dump_json(by_alias=True))
        ours = requirement_to_json(requirement_from_json(sent))
        assert REQUIREMENTS.validate_python(ours) == requirement
        assert {k: v for k, v in ours.items()} == {k: v for k, v in sent.items() if k in ours}


def _ours() -> list[TableUpdate]:
    spec = PartitionSpec(1, (PartitionField((3,), 1000, parse_transform("day"), "ts_day"),))
    order = SortOrder(
        1, (SortField((1,), parse_transform("identity"), SortDirection.DESC, NullOrder.NULLS_LAST),)
    )
    stats = StatisticsFile(
        snapshot_id=7,
        statistics_path="s3://b/t/metadata/7.stats",
        file_size_in_bytes=100,
        file_footer_size_in_bytes=20,
        blob_metadata=(BlobMetadata("apache-datasketches-theta-v1", 7, 3, (1, 2), {"ndv": "4"}),),
    )
    return [
        UpgradeFormatVersion(2),
        AddPartitionSpec(spec),
        SetDefaultSpec(-1),
        AddSortOrder(order),
        SetDefaultSortOrder(-1),
        SetSnapshotRef(7, "audit", SnapshotRefType.BRANCH, 2, 3600_000, 86_400_000),
        RemoveSnapshotRef("audit"),
        RemoveSnapshots((5, 6)),
        SetStatistics(stats),
        RemoveStatistics(7),
        RemoveProperties(("a",)),
        SetLocation("s3://b/elsewhere"),
    ]


@pytest.mark.parametrize("update", _ours(), ids=lambda u: type(u).__name__)
def test_every_update_we_send_parses_in_pyiceberg_as_the_same(update: TableUpdate) -> None:
    sent = update_to_json(update)
    parsed = UPDATES.validate_python(copy.deepcopy(sent))  # its validators edit what they get
    assert _py_json(parsed) == {k: v for k, v in sent.items() if v is not None}
    assert update_from_json(sent) == update


def test_day_and_bucket_transforms_survive_in_specs() -> None:
    update = update_from_json(
        {
            "action": "add-spec",
            "spec": {
                "spec-id": 1,
                "fields": [
                    {"source-id": 3, "field-id": 1000, "transform": "day", "name": "d"},
                    {"source-id": 1, "field-id": 1001, "transform": "bucket[16]", "name": "b"},
                ],
            },
        }
    )
    assert isinstance(update, AddPartitionSpec)
    transforms = [str(f.transform) for f in update.spec.fields]
    assert transforms == [str(DayTransform()), str(BucketTransform(16))]


def test_bad_bodies_are_typed_errors_naming_what_is_wrong() -> None:
    with pytest.raises(UnsupportedError, match="enable-row-lineage"):
        update_from_json({"action": "enable-row-lineage"})
    with pytest.raises(ValidationError, match="missing field 'schema-id'"):
        update_from_json({"action": "set-current-schema"})
    with pytest.raises(ValidationError, match="'snapshot-ids' has the wrong type"):
        update_from_json({"action": "remove-snapshots", "snapshot-ids": "5"})
    with pytest.raises(UnsupportedError, match="assert-nothing"):
        requirement_from_json({"type": "assert-nothing"})
    with pytest.raises(ValidationError, match="must be an object"):
        requirement_from_json(["assert-create"])
