"""The v3 ``variant`` type: schema JSON, its Arrow form, unshredded writes and reads, and the
rules around it (v3 only, no bounds in manifests, only null checks as filters)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import aioiceberg
from aioiceberg.errors import ExpressionError, ValidationError
from aioiceberg.spec.arrow import schema_to_arrow, variant_arrow_type
from aioiceberg.spec.manifest import read_manifest, read_manifest_list
from aioiceberg.spec.manifest.data_file import DataFile
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import schema_from_json, schema_to_json
from aioiceberg.spec.types import LongType, NestedField, StringType, VariantType, parse_primitive
from aioiceberg.table import Table

SCHEMA = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(2, "v", VariantType(), False),
    NestedField(3, "s", StringType(), False),
)
# Variant encodings (Parquet's variant spec): an empty metadata dictionary, then the
# primitive values int8 1, int8 2 and the short string "hi".
EMPTY_METADATA = b"\x01\x00\x00"
VALUES = [b"\x0c\x01", None, b"\x0c\x02", b"\x09hi", None]


def variant_batch() -> pa.Table:
    v = pa.array(
        [None if x is None else {"metadata": EMPTY_METADATA, "value": x} for x in VALUES],
        type=variant_arrow_type(),
    )
    return pa.table(
        {"id": pa.array(range(len(VALUES)), pa.int64()), "v": v, "s": [str(i) for i in range(len(VALUES))]}
    )


def test_schema_json_round_trip() -> None:
    js = schema_to_json(SCHEMA)
    assert js["fields"][1] == {"id": 2, "name": "v", "required": False, "type": "variant"}
    assert schema_from_json(js) == SCHEMA
    assert parse_primitive("variant") == VariantType()
    assert str(VariantType()) == "variant"


def test_arrow_form_is_the_unshredded_pair() -> None:
    arrow = schema_to_arrow(SCHEMA)
    assert arrow.field("v").type == pa.struct(
        [pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary(), nullable=False)]
    )
    assert arrow.field("v").nullable
    assert schema_to_arrow(SCHEMA, large_types=True).field("v").type.field("value").type == pa.large_binary()


@pytest.mark.anyio
@pytest.mark.parametrize("version", [1, 2])
async def test_variant_needs_v3(tmp_path: Path, version: int) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        with pytest.raises(ValidationError, match=r"'v'.*variant.*format version 3"):
            await cat.create_table("db.t", schema=SCHEMA, format_version=version)


def _data_files(table: Table) -> list[DataFile]:
    snap = table.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    out: list[DataFile] = []
    for mf in read_manifest_list(Path(snap.manifest_list.removeprefix("file://")).read_bytes()):
        data = Path(mf.manifest_path.removeprefix("file://")).read_bytes()
        out.extend(e.data_file for e in read_manifest(data, mf).entries)
    return out


@pytest.mark.anyio
async def test_write_read_round_trip_without_bounds(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA, format_version=3)
        data = variant_batch()
        await table.append(data)
        await table.refresh()

        got = (await table.scan().to_arrow()).sort_by("id")
        assert got.column("v").type == variant_arrow_type()
        assert got.column("v").to_pylist() == data.column("v").to_pylist()
        only_v = await table.scan(selected_fields=("v",)).to_arrow()
        assert sorted(only_v.column("v").to_pylist(), key=repr) == sorted(
            data.column("v").to_pylist(), key=repr
        )

        [f] = _data_files(table)
        # The file holds the spec's group: two required binaries, under the variant's field id.
        parquet = pq.ParquetFile(f.file_path.removeprefix("file://"))
        group = parquet.schema_arrow.field("v")
        assert group.metadata[b"PARQUET:field_id"] == b"2"
        assert [group.type.field(i).name for i in range(group.type.num_fields)] == ["metadata", "value"]
        # Counts for the variant, bounds only for the other columns.
        assert f.value_counts is not None and f.value_counts[2] == 5
        assert f.null_value_counts is not None and f.null_value_counts[2] == 2
        assert f.column_sizes is not None and f.column_sizes[2] > 0
        assert f.lower_bounds is not None and f.upper_bounds is not None
        assert 2 not in f.lower_bounds and 2 not in f.upper_bounds
        assert {1, 3} <= set(f.lower_bounds) and {1, 3} <= set(f.upper_bounds)


@pytest.mark.anyio
async def test_only_null_checks_filter_a_variant(tmp_path: Path) -> None:
    async with aioiceberg.connect(str(tmp_path)) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA, format_version=3)
        await table.append(variant_batch())
        await table.refresh()
        nulls = await table.scan("v IS NULL").to_arrow()
        assert sorted(nulls.column("id").to_pylist()) == [1, 4]
        not_null = await table.scan("v IS NOT NULL AND id > 0").to_arrow()
        assert sorted(not_null.column("id").to_pylist()) == [2, 3]
        for text in ("v = 'hi'", "v > 1", "v IN (1, 2)"):
            with pytest.raises(ExpressionError, match=r"column 'v' is variant"):
                await table.scan(text).to_arrow()
