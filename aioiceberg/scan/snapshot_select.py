"""Which snapshot a scan reads: current, by id, by branch or tag name, or as of a time."""

from __future__ import annotations

import datetime as dt

from aioiceberg.errors import NotFoundError, ValidationError
from aioiceberg.spec.metadata import Snapshot, TableMetadata

__all__ = ["select_snapshot"]


def _millis(as_of: int | dt.datetime) -> int:
    if isinstance(as_of, dt.datetime):
        if as_of.tzinfo is None:
            raise ValidationError("as_of datetime must be timezone-aware (a naive time is ambiguous)")
        return int(as_of.timestamp() * 1000)
    if isinstance(as_of, bool) or not isinstance(as_of, int):
        raise ValidationError(f"as_of must be epoch milliseconds or a datetime, got {type(as_of).__name__}")
    return as_of


def select_snapshot(
    metadata: TableMetadata,
    snapshot_id: int | None = None,
    ref: str | None = None,
    as_of: int | dt.datetime | None = None,
) -> Snapshot | None:
    """The snapshot to plan, or None for a table with no current snapshot (an empty scan).

    At most one selector may be given. A selector that names nothing raises NotFoundError
    saying what exists, rather than silently scanning the current state.
    """
    given = [
        name for name, v in (("snapshot_id", snapshot_id), ("ref", ref), ("as_of", as_of)) if v is not None
    ]
    if len(given) > 1:
        raise ValidationError(f"give at most one of snapshot_id, ref, as_of; got {', '.join(given)}")
    if snapshot_id is not None:
        found = metadata.snapshot_by_id(snapshot_id)
        if found is None:
            known = sorted(s.snapshot_id for s in metadata.snapshots)
            raise NotFoundError(f"snapshot {snapshot_id} is not in the table (known: {known[-10:]})")
        return found
    if ref is not None:
        if ref not in metadata.refs:
            raise NotFoundError(f"no branch or tag named {ref!r} (refs: {sorted(metadata.refs)})")
        found = metadata.snapshot_by_ref(ref)
        if found is None:
            raise NotFoundError(
                f"ref {ref!r} points at snapshot {metadata.refs[ref].snapshot_id}, which has expired"
            )
        return found
    if as_of is not None:
        ms = _millis(as_of)
        found = metadata.snapshot_as_of(ms)
        if found is None:
            first = metadata.snapshot_log[0].timestamp_ms if metadata.snapshot_log else None
            raise NotFoundError(
                f"no snapshot was current at {ms} ms"
                + (f" (the oldest logged is at {first} ms)" if first is not None else " (no snapshot log)")
            )
        return found
    return metadata.current_snapshot()
