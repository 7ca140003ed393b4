"""The streaming read options of the ``aioiceberg`` source, under Java Iceberg's names.

Kept apart from ``streaming`` so the data source's option check (``source``) can accept
them without importing the stream reader, which imports the source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aioiceberg.errors import ValidationError

__all__ = [
    "BATCH_ONLY_READ_OPTIONS",
    "BATCH_ONLY_WRITE_OPTIONS",
    "CHECKPOINT_OPTION",
    "STREAM_READ_OPTIONS",
    "StreamOptions",
]

FROM_TIMESTAMP = "stream-from-timestamp"
FROM_SNAPSHOT_ID = "stream-from-snapshot-id"
MAX_FILES = "streaming-max-files-per-micro-batch"
MAX_ROWS = "streaming-max-rows-per-micro-batch"
SKIP_DELETE = "streaming-skip-delete-snapshots"
SKIP_OVERWRITE = "streaming-skip-overwrite-snapshots"
STREAM_READ_OPTIONS = frozenset(
    {FROM_TIMESTAMP, FROM_SNAPSHOT_ID, MAX_FILES, MAX_ROWS, SKIP_DELETE, SKIP_OVERWRITE}
)
# Spark hands the sink its checkpoint location among the options
CHECKPOINT_OPTION = "checkpointlocation"
# time travel picks one snapshot; a stream starts from one (stream-from-*) and follows a branch
BATCH_ONLY_READ_OPTIONS = ("snapshot-id", "as-of-timestamp", "tag")
# an epoch appends (or, in complete mode, replaces the table); its idempotency key is its own
BATCH_ONLY_WRITE_OPTIONS = ("overwrite-mode", "overwrite-filter", "idempotency-key")


@dataclass(frozen=True)
class StreamOptions:
    """Where a stream starts, how much one micro-batch may take, which snapshots it passes over."""

    from_timestamp_ms: int | None = None
    from_snapshot_id: int | None = None
    max_files: int | None = None
    max_rows: int | None = None
    skip_delete: bool = False
    skip_overwrite: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        opts = {str(k).lower(): v for k, v in options.items()}
        for key in BATCH_ONLY_READ_OPTIONS:
            if opts.get(key):
                raise ValidationError(
                    f"option {key!r} picks one snapshot for a batch read; a stream starts with "
                    f"{FROM_SNAPSHOT_ID!r} or {FROM_TIMESTAMP!r} and follows a branch"
                )

        def number(key: str, least: int) -> int | None:
            value = opts.get(key)
            if value in (None, ""):
                return None
            try:
                n = int(value)
            except ValueError:
                n = least - 1
            if n < least:
                raise ValidationError(f"option {key!r} must be an integer >= {least}, got {value!r}")
            return n

        def flag(key: str) -> bool:
            value = (opts.get(key) or "false").strip().lower()
            if value not in ("true", "false"):
                raise ValidationError(f"option {key!r} must be 'true' or 'false', got {opts.get(key)!r}")
            return value == "true"

        found = cls(
            from_timestamp_ms=number(FROM_TIMESTAMP, 0),
            from_snapshot_id=number(FROM_SNAPSHOT_ID, -(2**63)),
            max_files=number(MAX_FILES, 1),
            max_rows=number(MAX_ROWS, 1),
            skip_delete=flag(SKIP_DELETE),
            skip_overwrite=flag(SKIP_OVERWRITE),
        )
        if found.from_timestamp_ms is not None and found.from_snapshot_id is not None:
            raise ValidationError(f"give at most one of {FROM_TIMESTAMP!r} and {FROM_SNAPSHOT_ID!r}")
        return found
