"""A metadata file that starts with a UTF-8 byte order mark reads as the same file without one
(plain or gzip-compressed); a BOM is stripped once, and bytes that are not UTF-8 still say so."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from aioiceberg.errors import CorruptFileError
from aioiceberg.spec.metadata_json import parse_table_metadata

BOM = b"\xef\xbb\xbf"


def _doc() -> dict[str, Any]:
    return {
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "s3://bucket/t",
        "last-sequence-number": 0,
        "last-updated-ms": 1602638573590,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [
            {
                "type": "struct",
                "schema-id": 0,
                "fields": [{"id": 1, "name": "ünïcode", "required": True, "type": "long"}],
            }
        ],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
    }


@pytest.mark.parametrize("compress", [False, True])
def test_a_leading_bom_is_stripped(compress: bool) -> None:
    plain = json.dumps(_doc(), ensure_ascii=False).encode()
    want = parse_table_metadata(plain)
    data = BOM + plain
    got = parse_table_metadata(gzip.compress(data) if compress else data)
    assert got == want
    assert got.schema().fields[0].name == "ünïcode"


def test_only_one_bom_is_stripped() -> None:
    with pytest.raises(CorruptFileError, match="not valid JSON"):
        parse_table_metadata(
            BOM + BOM + json.dumps(_doc()).encode(), "s3://bucket/t/metadata/v1.metadata.json"
        )


def test_bytes_that_are_not_utf8_say_so_after_a_bom() -> None:
    with pytest.raises(CorruptFileError, match="not UTF-8"):
        parse_table_metadata(BOM + b'{"a": "\xff"}', "s3://bucket/t/metadata/v1.metadata.json")
