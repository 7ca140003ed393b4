"""A long manifest list's few chosen rows, built together from their own values (taken from
the columns, none converted whole), equal the rows fastavro's reader builds: v1-v3 lists,
rows with and without partition summaries, sequence numbers a v1 list lacks; and a list
whose content column holds a value outside its enum is refused, negative ones included."""

from __future__ import annotations

import io
import random
from typing import Any

import fastavro
import pytest

from aioiceberg.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary, write_manifest_list
from aioiceberg.spec.manifest.columnar_list import (
    ManifestRows,
    decode_manifest_rows,
    read_manifest_list_columnar,
)
from aioiceberg.spec.manifest.fastavro_reader import read_manifest_list

pytest.importorskip("polars")


def _rows(n: int, version: int) -> list[ManifestFile]:
    rng = random.Random(n * 7 + version)
    out = []
    for i in range(n):
        summaries: tuple[PartitionFieldSummary, ...] | None = (
            PartitionFieldSummary(False, None if i % 3 == 0 else True, i.to_bytes(4, "little"), None),
            PartitionFieldSummary(i % 2 == 0, None, None, b"\x01" * (i % 4)),
        )
        if i % 5 == 0:
            summaries = None
        elif i % 9 == 0:
            summaries = ()
        out.append(
            ManifestFile(
                f"s3://b/t/metadata/m{i}.avro",
                1000 + rng.randrange(10**6),
                i % 2,
                ManifestContent.DELETES if version > 1 and i % 6 == 1 else ManifestContent.DATA,
                None if version > 1 and i % 4 == 0 else i,
                None if version > 1 and i % 4 == 0 else max(0, i - 3),
                77 if version > 1 and i % 4 == 0 else 5 + i,
                rng.randrange(50),
                rng.randrange(50),
                rng.randrange(4),
                rng.randrange(10**8),
                rng.randrange(10**8),
                rng.randrange(10),
                summaries,
                b"k" if i % 8 == 0 else None,
                None,
            )
        )
    return out


@pytest.mark.parametrize("version", [1, 2, 3])
def test_few_rows_built_together_equal_the_eager_readers(version: int) -> None:
    data = write_manifest_list(_rows(400, version), version, 77, 76, 9, first_row_id=500)
    want = read_manifest_list(data)
    rows = decode_manifest_rows(data)
    assert isinstance(rows, ManifestRows)
    picked = [399, 0, 5, 9, 10, 11, 45, 45, 200, 1, 3]  # unordered, one twice, with and without summaries
    rows.build(picked)
    assert rows._columns is None  # taken from the columns, none converted
    assert len(rows.unbuilt(range(400))) == 400 - len(set(picked))
    for i in picked:
        assert rows[i] == want[i]
    rows.build([2, 5])  # built ones stay as they are, the others join them
    assert rows[2] == want[2] and rows._columns is None
    assert list(rows) == want  # the rest, one by one, from the columns converted whole
    assert rows.total_length([0, 5, 399]) == sum(want[i].manifest_length for i in (0, 5, 399))
    assert rows.has_deletes() == any(mf.content == ManifestContent.DELETES for mf in want)


def _list_with_schema(fields: list[dict[str, Any]], records: list[dict[str, Any]], version: str) -> bytes:
    buf = io.BytesIO()
    schema = {"type": "record", "name": "manifest_file", "fields": fields}
    fastavro.writer(buf, fastavro.parse_schema(schema), records, metadata={"format-version": version})
    return buf.getvalue()


_BASE: list[dict[str, Any]] = [
    {"name": "manifest_path", "type": "string"},
    {"name": "manifest_length", "type": "long"},
    {"name": "partition_spec_id", "type": "int"},
    {"name": "added_snapshot_id", "type": ["null", "long"]},
]


def test_a_bare_v1_lists_rows_read_sequence_numbers_zero() -> None:
    records = [
        {"manifest_path": f"m{i}", "manifest_length": i, "partition_spec_id": 0, "added_snapshot_id": i}
        for i in range(300)
    ]
    data = _list_with_schema(_BASE, records, "1")
    want = read_manifest_list(data)
    rows = decode_manifest_rows(data)
    assert isinstance(rows, ManifestRows)
    rows.build([3, 250])
    assert rows[3] == want[3] and rows[250] == want[250]
    assert rows[3].sequence_number == 0 and rows[3].partitions is None
    assert not rows.has_deletes()


@pytest.mark.parametrize("bad", [-1, 2, 5])
def test_content_outside_its_enum_is_refused(bad: int) -> None:
    records = [
        {
            "manifest_path": f"m{i}",
            "manifest_length": i,
            "partition_spec_id": 0,
            "added_snapshot_id": i,
            "content": bad if i == 120 else i % 2,
        }
        for i in range(300)
    ]
    data = _list_with_schema([*_BASE, {"name": "content", "type": "int"}], records, "2")
    assert read_manifest_list_columnar(data) is None
