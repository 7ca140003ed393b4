"""Scan options, typed: what ``table.scan(**options)`` accepts, checked once, split by stage.

``ScanOptions`` types the keywords for callers (mypy checks ``table.scan(io_concurency=8)``);
``PlanOptions`` and ``ReadOptions`` hold the checked values with their defaults in one place,
so the planner and the reader never see an unknown key or an out-of-range value.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict

from aioiceberg.errors import ValidationError

if TYPE_CHECKING:
    from aioiceberg.scan.cache import ManifestCache, ManifestListCache

__all__ = ["PlanOptions", "ReadOptions", "ScanArgs", "ScanOptions", "split_scan_options"]

# Below this many manifest bytes to decode, starting worker processes costs more than it saves.
PROCESS_THRESHOLD_BYTES = 4 * 1024 * 1024
# Below this many entries a manifest goes to the batch lane: the columnar decoder has a fixed
# cost of ~2-3 ms per call, so small manifests are decoded together (or, alone, by fastavro).
COLUMNAR_MIN_ENTRIES = 100
DEFAULT_FILES_IN_FLIGHT = 4
DEFAULT_BATCH_ROWS = 64 * 1024


class ScanOptions(TypedDict, total=False):
    """Keyword options of a scan (planner knobs first, then the reader's)."""

    io_concurrency: int
    decode_workers: int | None
    channel_size: int | None
    split_size: int | None
    include_column_stats: bool
    cache: ManifestCache | None
    manifest_list_cache: ManifestListCache | None
    process_threshold_bytes: int
    columnar: bool
    columnar_min_entries: int
    vectorized: bool
    native_decoder: bool
    files_in_flight: int
    batch_rows: int
    include_file_column: bool
    include_pos_column: bool


class ScanArgs(ScanOptions, total=False):
    """What a scan reads (besides its filter) and its options: ``TableScan``'s keywords."""

    selected_fields: Sequence[str]
    case_sensitive: bool
    snapshot_id: int | None
    ref: str | None
    as_of: int | dt.datetime | None
    limit: int | None


def _at_least(name: str, value: int | None, low: int) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise ValidationError(f"scan option {name!r} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How a plan runs. ``io_concurrency``: manifests fetched at once; ``decode_workers``:
    threads decoding columnar manifests (or processes for fastavro; 0: one thread; None: the
    CPU count); ``channel_size``: decoded manifests buffered ahead of the consumer (None: a
    quarter of ``io_concurrency``); ``split_size``: split files along their split offsets into
    tasks of about this many bytes; ``include_column_stats``: keep every column's metrics on
    task files (default: the filter's columns); ``cache`` / ``manifest_list_cache``: instead of
    the runtime's; ``process_threshold_bytes``: manifest bytes below which fastavro stays in
    one thread; ``columnar``: False decodes with fastavro only; ``columnar_min_entries``:
    manifests listing fewer entries are decoded in batches; ``vectorized``: False prunes every
    entry with the per-entry evaluators only (the bulk path must keep the same files: this is
    how that is checked); ``native_decoder``: False decodes columnar manifests with polars even
    where the compiled decoder is installed (both give the same columns: this is how that is
    checked)."""

    io_concurrency: int = 64
    decode_workers: int | None = None
    channel_size: int | None = None
    split_size: int | None = None
    include_column_stats: bool = False
    cache: ManifestCache | None = None
    manifest_list_cache: ManifestListCache | None = None
    process_threshold_bytes: int = PROCESS_THRESHOLD_BYTES
    columnar: bool = True
    columnar_min_entries: int = COLUMNAR_MIN_ENTRIES
    vectorized: bool = True
    native_decoder: bool = True

    def __post_init__(self) -> None:
        _at_least("io_concurrency", self.io_concurrency, 1)
        _at_least("decode_workers", self.decode_workers, 0)
        _at_least("channel_size", self.channel_size, 0)
        _at_least("split_size", self.split_size, 1)
        _at_least("process_threshold_bytes", self.process_threshold_bytes, 0)
        _at_least("columnar_min_entries", self.columnar_min_entries, 0)

    @property
    def workers(self) -> int:
        """Decode workers, resolved (0 means: decode in one thread)."""
        return (os.cpu_count() or 1) if self.decode_workers is None else self.decode_workers

    @property
    def buffered_manifests(self) -> int:
        return self.channel_size if self.channel_size is not None else max(2, self.io_concurrency // 4)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How rows are read: ``files_in_flight`` files fetched and decoded at once,
    ``batch_rows`` rows per batch at most, and the ``_file`` / ``_pos`` columns."""

    files_in_flight: int = DEFAULT_FILES_IN_FLIGHT
    batch_rows: int = DEFAULT_BATCH_ROWS
    include_file_column: bool = False
    include_pos_column: bool = False

    def __post_init__(self) -> None:
        _at_least("files_in_flight", self.files_in_flight, 1)
        _at_least("batch_rows", self.batch_rows, 1)

    def as_kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_PLAN = frozenset(f.name for f in fields(PlanOptions))
_READ = frozenset(f.name for f in fields(ReadOptions))


def split_scan_options(options: Mapping[str, Any]) -> tuple[PlanOptions, ReadOptions]:
    """The planner's and the reader's options; an unknown key is an error naming it."""
    unknown = sorted(set(options) - _PLAN - _READ)
    if unknown:
        raise ValidationError(
            f"unknown scan option(s) {', '.join(map(repr, unknown))}: "
            f"known are {', '.join(sorted(_PLAN | _READ))}"
        )
    plan = PlanOptions(**{k: v for k, v in options.items() if k in _PLAN})
    read = ReadOptions(**{k: v for k, v in options.items() if k in _READ})
    return plan, read
