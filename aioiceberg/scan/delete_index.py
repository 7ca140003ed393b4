"""Which delete files apply to a data file (spec "Scan Planning", delete file rules).

- Position deletes and deletion vectors: same spec and partition, data sequence number
  of the delete >= the data file's; when the delete names its data file
  (``referenced_data_file``, or equal lower/upper bounds on ``file_path``) only that
  file; otherwise, when it has ``file_path`` bounds, only files whose path lies in them.
- Equality deletes: sequence number strictly greater; same spec and partition, or any
  partition when written with an unpartitioned spec (global deletes).

Deletes are bucketed by partition and by target path, and each bucket is sorted by
sequence number once, so a lookup is a dict hit plus a bisect.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from aioiceberg.spec.manifest import DataFile, DataFileContent, ManifestEntry

__all__ = ["FILE_PATH_FIELD_ID", "DeleteIndex"]

FILE_PATH_FIELD_ID = 2147483546

_PartitionKey = tuple[int, tuple[Any, ...]]


class _Bucket:
    """Delete files sorted by data sequence number (sorted lazily, after the last add)."""

    __slots__ = ("_files", "_pending", "_seqs")

    def __init__(self) -> None:
        self._pending: list[tuple[int, DataFile]] | None = []
        self._seqs: list[int] = []
        self._files: list[DataFile] = []

    def add(self, seq: int, f: DataFile) -> None:
        if self._pending is None:
            self._pending = list(zip(self._seqs, self._files, strict=True))
        self._pending.append((seq, f))

    def _ready(self) -> None:
        if self._pending is not None:
            self._pending.sort(key=lambda p: p[0])
            self._seqs = [s for s, _ in self._pending]
            self._files = [f for _, f in self._pending]
            self._pending = None

    def at_least(self, seq: int) -> list[DataFile]:
        self._ready()
        return self._files[bisect_left(self._seqs, seq) :]

    def greater_than(self, seq: int) -> list[DataFile]:
        self._ready()
        return self._files[bisect_right(self._seqs, seq) :]


def _target_path(f: DataFile) -> str | None:
    """The one data file a position delete is for, when it says so."""
    if f.referenced_data_file is not None:
        return f.referenced_data_file
    lower = (f.lower_bounds or {}).get(FILE_PATH_FIELD_ID)
    upper = (f.upper_bounds or {}).get(FILE_PATH_FIELD_ID)
    if lower is not None and lower == upper:
        try:
            return lower.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _path_in_bounds(f: DataFile, path: bytes) -> bool:
    """False only when the delete's file_path bounds prove ``path`` is not referenced.

    UTF-8 byte order is code point order, so comparing bytes is comparing strings; a
    truncated upper bound is still >= every value, so this stays sound.
    """
    lower = (f.lower_bounds or {}).get(FILE_PATH_FIELD_ID)
    upper = (f.upper_bounds or {}).get(FILE_PATH_FIELD_ID)
    if lower is None or upper is None:
        return True
    return lower <= path <= upper


class DeleteIndex:
    """Delete files of one snapshot, indexed for lookups by data file."""

    def __init__(self) -> None:
        self._pos_by_partition: dict[_PartitionKey, _Bucket] = {}
        self._pos_by_path: dict[str, _Bucket] = {}
        self._eq_by_partition: dict[_PartitionKey, _Bucket] = {}
        self._eq_global = _Bucket()
        self._has_global = False
        self.count = 0
        self.max_sequence_number: int | None = None

    def is_empty(self) -> bool:
        return self.count == 0

    def add(self, entry: ManifestEntry, unpartitioned_spec_ids: Iterable[int] = ()) -> None:
        """Index one live delete entry; ``unpartitioned_spec_ids`` marks global equality deletes."""
        f = entry.data_file
        seq = entry.sequence_number or 0
        self.count += 1
        if self.max_sequence_number is None or seq > self.max_sequence_number:
            self.max_sequence_number = seq
        if f.content == DataFileContent.POSITION_DELETES:
            target = _target_path(f)
            if target is not None:
                self._pos_by_path.setdefault(target, _Bucket()).add(seq, f)
            else:
                self._pos_by_partition.setdefault((f.spec_id, f.partition), _Bucket()).add(seq, f)
        elif f.content == DataFileContent.EQUALITY_DELETES:
            if not f.partition or f.spec_id in unpartitioned_spec_ids:
                self._eq_global.add(seq, f)
                self._has_global = True
            else:
                self._eq_by_partition.setdefault((f.spec_id, f.partition), _Bucket()).add(seq, f)
        else:
            raise ValueError(f"{f.file_path} is a data file, not a delete file")

    def for_data_file(self, seq: int | None, data_file: DataFile) -> tuple[DataFile, ...]:
        """The delete files that apply to ``data_file`` with data sequence number ``seq``."""
        if self.count == 0:
            return ()
        seq = seq or 0
        key = (data_file.spec_id, data_file.partition)
        out: list[DataFile] = []
        bucket = self._pos_by_partition.get(key)
        if bucket is not None:
            path = data_file.file_path.encode("utf-8")
            out.extend(d for d in bucket.at_least(seq) if _path_in_bounds(d, path))
        bucket = self._pos_by_path.get(data_file.file_path)
        if bucket is not None:
            out.extend(bucket.at_least(seq))
        bucket = self._eq_by_partition.get(key)
        if bucket is not None:
            out.extend(bucket.greater_than(seq))
        if self._has_global:
            out.extend(self._eq_global.greater_than(seq))
        return tuple(out)
