"""Decoded manifest entries kept as rows of plain values; objects are built as they are read.

A plan holds tens of thousands of decoded entries in flight. As ``ManifestEntry`` and
``DataFile`` objects they are tracked by the cycle collector, outlive its young
generations and are promoted, so every full collection walks them all again: on a plan
of 500 manifests of 1000 entries that cost 2-3 s of 8. A tuple of ints, strings, bytes,
untracked tuples and plain dicts is untracked the first time the collector sees it, so a
row costs the collector nothing once decoded. The objects are built when a caller takes
them: in a streaming plan they die young, before any collection promotes them.

A row is the manifest's columns as decoded (see :data:`ROW_FIELDS`), raw enum values
included, plus what the row inherits from its manifest; the decoder checks those raw
values, so building an entry from a row cannot fail. Any dict, even an empty one, keeps
a tuple tracked, so metric maps are flat ``(key, value, ...)`` tuples (None: a null map)
and lists are tuples.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeAlias, overload

from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.data_file import FORMATS_BY_TEXT, DataFile, DataFileContent, FileFormat
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus

__all__ = ["ROW_FIELDS", "STAT_FIELDS", "EntryRows", "Row"]

Row: TypeAlias = tuple[Any, ...]

STAT_FIELDS = (
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)
# What each row holds, in order; the last item is (snapshot id, sequence number, whether
# every entry inherits it) of the row's manifest.
ROW_FIELDS = (
    "status",
    "snapshot_id",
    "sequence_number",
    "file_sequence_number",
    "content",
    "file_path",
    "file_format",
    "partition",
    "record_count",
    "file_size_in_bytes",
    *STAT_FIELDS,
    "key_metadata",
    "split_offsets",
    "equality_ids",
    "sort_order_id",
    "first_row_id",
    "referenced_data_file",
    "content_offset",
    "content_size_in_bytes",
    "inherited",
)

_ADDED = ManifestEntryStatus.ADDED
_STATUS = {s.value: s for s in ManifestEntryStatus}
_CONTENT: dict[int | None, DataFileContent] = {None: DataFileContent.DATA}
for _c in DataFileContent:
    _CONTENT[_c.value] = _c

_new_file = frozen_builder(DataFile)
_new_entry = frozen_builder(ManifestEntry)


def _map(flat: tuple[Any, ...] | None) -> dict[int, Any] | None:
    if flat is None:
        return None
    if len(flat) == 2:  # a plan keeps the stats its filter reads: often one column's
        return {flat[0]: flat[1]}
    if not flat:
        return {}
    pairs = iter(flat)  # one iterator zipped with itself: no slices (0.52 us against 0.90 us)
    return dict(zip(pairs, pairs, strict=False))  # the decoder writes pairs: never odd


def _data_file(row: Row, spec_id: int) -> DataFile:
    # indexed, not sliced: slices and star-arguments are tuples the collector would count
    m = _map
    fmt = FORMATS_BY_TEXT.get(row[6])
    return _new_file(
        _CONTENT[row[4]], row[5], fmt if fmt is not None else FileFormat.parse(row[6]),
        row[7], row[8], row[9],
        None if (a := row[10]) is None else m(a) if a else {},
        None if (b := row[11]) is None else m(b) if b else {},
        None if (c := row[12]) is None else m(c) if c else {},
        None if (d := row[13]) is None else m(d) if d else {},
        None if (e := row[14]) is None else m(e) if e else {},
        None if (g := row[15]) is None else m(g) if g else {},
        row[16], row[17], row[18], row[19], row[20], row[21], row[22], row[23], spec_id,
    )  # fmt: skip


def _entry(row: Row, spec_id: int) -> ManifestEntry:
    status = _STATUS[row[0]]
    snapshot_id, seq, file_seq = row[1], row[2], row[3]
    inherit_snapshot, inherit_seq, inherit_all = row[24]
    if snapshot_id is None:
        snapshot_id = inherit_snapshot
    if seq is None and (status is _ADDED or inherit_all):
        seq = inherit_seq
    if file_seq is None and (status is _ADDED or inherit_all):
        file_seq = inherit_seq
    return _new_entry(status, snapshot_id, seq, file_seq, _data_file(row, spec_id))


class EntryRows(Sequence[ManifestEntry]):
    """Entries of one partition spec, as rows; each read builds a fresh, equal entry."""

    __slots__ = ("rows", "spec_id")

    def __init__(self, rows: list[Row], spec_id: int) -> None:
        self.rows = rows
        self.spec_id = spec_id

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> ManifestEntry: ...

    @overload
    def __getitem__(self, index: slice) -> EntryRows: ...

    def __getitem__(self, index: int | slice) -> ManifestEntry | EntryRows:
        if isinstance(index, slice):
            return EntryRows(self.rows[index], self.spec_id)
        return _entry(self.rows[index], self.spec_id)

    def __iter__(self) -> Iterator[ManifestEntry]:
        spec_id = self.spec_id
        for row in self.rows:
            yield _entry(row, spec_id)

    def data_file(self, index: int) -> DataFile:
        return _data_file(self.rows[index], self.spec_id)

    def data_files(self) -> Iterator[DataFile]:
        """The entries' data files, without building the entries."""
        spec_id = self.spec_id
        for row in self.rows:
            yield _data_file(row, spec_id)

    def rows_at(self, positions: Sequence[int]) -> list[Row]:
        """The rows at ``positions`` (a sample to size them by: see ``ColumnarRows``)."""
        rows = self.rows
        return [rows[i] for i in positions]

    def select(self, keep: Iterable[bool]) -> EntryRows:
        """The rows where ``keep`` is true, in order."""
        return EntryRows([r for r, k in zip(self.rows, keep, strict=True) if k], self.spec_id)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EntryRows | list | tuple):  # as a list of entries compares
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EntryRows({len(self.rows)} entries, spec_id={self.spec_id})"
