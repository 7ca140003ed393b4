"""Data and delete files as tracked by manifests (the domain shape, free of Avro)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any

__all__ = ["FORMATS_BY_TEXT", "DataFile", "DataFileContent", "FileFormat"]


class DataFileContent(IntEnum):
    """What rows a content file holds; the integer is the on-disk value of field 134."""

    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class FileFormat(StrEnum):
    """File format names as written in field 101 (upper case, as Java and PyIceberg write them)."""

    PARQUET = "PARQUET"
    AVRO = "AVRO"
    ORC = "ORC"
    PUFFIN = "PUFFIN"

    @classmethod
    def parse(cls, text: str) -> FileFormat:
        """Accept any case: the spec lists lower-case names, writers use upper case. The
        two usual spellings are a dict lookup (this runs once per manifest entry)."""
        found = FORMATS_BY_TEXT.get(text)
        return found if found is not None else cls(text.upper())


# the two usual spellings of each name (builders look them up without calling parse)
FORMATS_BY_TEXT: dict[str, FileFormat] = {t: f for f in FileFormat for t in (f.value, f.value.lower())}


@dataclass(frozen=True, slots=True)
class DataFile:
    """One data or delete file with its partition tuple and column metrics.

    Bounds stay as Appendix D bytes: most are never looked at, so callers decode the few
    they compare. ``spec_id`` is not stored in the file; readers fill it from the manifest.
    """

    content: DataFileContent
    file_path: str
    file_format: FileFormat
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None
    first_row_id: int | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None
    spec_id: int = 0

    def __hash__(self) -> int:
        # The path identifies a file within a table; the metric maps are not hashable.
        return hash(self.file_path)

    @property
    def is_deletion_vector(self) -> bool:
        """A v3 deletion vector: position deletes stored as a blob inside a Puffin file."""
        return self.content == DataFileContent.POSITION_DELETES and self.file_format == FileFormat.PUFFIN
