"""The runtime's parsed metadata files: a reload of the same bytes reuses the parse."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import aioiceberg
from aioiceberg.commit.protocols import base
from aioiceberg.io.parsed import ParsedFiles
from aioiceberg.runtime import Runtime
from aioiceberg.spec.metadata import TableMetadata

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def test_the_same_bytes_at_the_same_location_are_parsed_once() -> None:
    parses: list[str] = []

    def parse(data: bytes, location: str) -> str:
        parses.append(location)
        return data.decode()

    files: ParsedFiles[str] = ParsedFiles(max_bytes=100, max_items=2)
    assert files.get_or_parse("a", b"one", parse) == "one"
    assert files.get_or_parse("a", b"one", parse) == "one"
    assert parses == ["a"]
    assert files.get_or_parse("a", b"two", parse) == "two"  # rewritten: parsed anew
    assert files.get_or_parse("b", b"one", parse) == "one"  # same bytes elsewhere: another file
    assert parses == ["a", "a", "b"]
    files.get_or_parse("c", b"three", parse)  # a third location: the least recent goes
    assert len(files) == 2
    files.get_or_parse("a", b"two", parse)
    assert parses[-1] == "a"
    files.get_or_parse("big", b"x" * 101, parse)  # above the byte bound: never kept
    files.get_or_parse("big", b"x" * 101, parse)
    assert parses[-2:] == ["big", "big"]
    files.get_or_parse("d", b"y" * 60, parse)
    files.get_or_parse("e", b"z" * 60, parse)  # 120 bytes held would pass the bound
    assert len(files) == 1
    files.clear()
    assert len(files) == 0


@pytest.mark.anyio
async def test_a_table_loaded_again_shares_its_metadata_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = Runtime()
    catalog = aioiceberg.connect(str(tmp_path / "wh"), runtime=runtime)
    table = await catalog.create_table("db.t", schema=SCHEMA)
    await table.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    parsed: list[str] = []
    parse = base.parse_table_metadata

    def spy(data: bytes, location: str) -> TableMetadata:
        parsed.append(location)
        return parse(data, location)

    monkeypatch.setattr(base, "parse_table_metadata", spy)
    first = await aioiceberg.load_table(table.metadata_location, runtime=runtime)
    again = await aioiceberg.load_table(table.metadata_location, runtime=runtime)
    by_name = await catalog.load_table("db.t")
    assert again.metadata is first.metadata and by_name.metadata is first.metadata
    assert parsed == [table.metadata_location]  # the first load's parse serves the others
    await table.append(pa.table({"id": [3]}, schema=SCHEMA))
    newer = await catalog.load_table("db.t")
    assert newer.metadata_location != first.metadata_location
    assert (await newer.scan().to_arrow()).num_rows == 3
    await catalog.aclose()
    assert len(runtime.metadata_files) == 2  # the catalog shared its runtime: its owner closes it
    await runtime.aclose()
    assert len(runtime.metadata_files) == 0
