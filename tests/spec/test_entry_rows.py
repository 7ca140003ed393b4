"""Data files built from decoded rows: null, empty and filled metric maps, both format spellings."""

from __future__ import annotations

from typing import Any

from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.manifest.entry_rows import EntryRows


def _row(i: int, stats: tuple[Any, ...] | None, fmt: str) -> tuple[Any, ...]:
    return (
        1, 5, 3, 3, 0, f"s3://b/t/data/f{i}.parquet", fmt, (i,), 100 + i, 2000 + i,
        stats, stats, stats, stats, stats, stats,
        None, (4, 9), None, 0, None, None, None, None, (1, 3, False),
    )  # fmt: skip


def test_data_files_from_rows_equal_files_built_field_by_field() -> None:
    cases: list[tuple[tuple[Any, ...] | None, dict[int, Any] | None]] = [
        (None, None),
        ((), {}),
        ((1, 10), {1: 10}),
        ((1, 10, 2, 20), {1: 10, 2: 20}),
    ]
    rows, expected = [], []
    for i, (flat, mapped) in enumerate(cases):
        for fmt in ("PARQUET", "parquet", "Avro"):
            rows.append(_row(i, flat, fmt))
            expected.append(
                DataFile(
                    DataFileContent.DATA,
                    f"s3://b/t/data/f{i}.parquet",
                    FileFormat(fmt.upper()),
                    (i,),
                    100 + i,
                    2000 + i,
                    mapped,
                    mapped,
                    mapped,
                    mapped,
                    mapped,
                    mapped,
                    None,
                    (4, 9),
                    None,
                    0,
                    None,
                    None,
                    None,
                    None,
                    7,
                )
            )
    entries = EntryRows(rows, 7)
    built = list(entries.data_files())
    assert (
        built
        == expected
        == [e.data_file for e in entries]
        == [entries.data_file(i) for i in range(len(rows))]
    )
    # every file gets maps of its own, never one shared between files
    empties = [f.lower_bounds for f in built if f.lower_bounds == {}]
    assert len({id(m) for m in empties}) == len(empties) == 3
