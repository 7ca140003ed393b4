"""Late materialisation: a row group's filter columns first, the others only as far as needed.

pyarrow has no page index or row-range read, so what a filter lets a read skip is every row
after its last match (sorted or clustered data) or, when nothing matches, the other columns
altogether. A helper thread decodes the other columns meanwhile, chunk by chunk, and stops
once the filter side says how far they must go. So the two sides use two cores; a row group
whose matches reach its end costs about what a whole read does; and the calling thread
works instead of waiting. (A thread that wakes pyarrow's pool and then sleeps was measured,
after an idle wait, to find both pool workers on one core in about half the reads: 12 ms
where 6 ms was possible.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from aioiceberg.read.parquet_ranges import ParquetSource
    from aioiceberg.spec.schema import Schema

# Rows the helper decodes between looks at the limit: a chunk past the last match is the most
# it decodes in vain (each chunk's fixed cost is ~0.1 ms; dictionary pages are whole anyway).
CHUNK_ROWS = 16384


class RowLimit:
    """How many leading rows of a row group the other columns must cover, once known.

    Written once by the filter side, read by the helper between chunks (one attribute: the
    interpreter makes the exchange atomic)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: int | None = None


# After a late read that skipped less than half the rows its filter dropped, one of this many
# of the scan's next row groups is read late (to look again), the others whole.
PROBE_EVERY = 8


class LatePayoff:
    """Whether late reads are paying off in one scan (kept on its event loop).

    On data the filter's columns do not cluster (a scattered ``qty = 5``), matches reach the
    end of every row group: a late read skips nothing and costs more than a whole one (two
    decodes, the filter's alone first; 5-7% a scan measured). Until the first late read
    says, only a row group decoded with nothing beside it is read late.
    """

    __slots__ = ("paying", "since")

    def __init__(self) -> None:
        self.paying: bool | None = None  # not known yet
        self.since = 0  # row groups read whole since the last late read

    def worth_trying(self, decoded_alone: bool) -> bool:
        if self.paying is None:
            return decoded_alone
        if self.paying:
            return True
        self.since += 1
        return self.since % PROBE_EVERY == 0

    def record(self, paid: bool) -> None:
        self.paying, self.since = paid, 0


@dataclass(frozen=True, slots=True)
class LateSplit:
    """The top-level file fields a late read decodes first (the filter's) and after."""

    filter_tops: list[int]
    other_tops: list[int]
    schema: Schema  # the filter's fields of the read schema
    arrow: pa.Schema


# the filter over the filter columns as read: a boolean array, or a scalar when it reduced
# to a constant over this file
Evaluate = Callable[[list[pa.Array]], "pa.Array | pa.Scalar"]


def read_late(
    source: ParquetSource,
    split: LateSplit,
    rg: int,
    as_dictionary: list[int],
    evaluate: Evaluate,
    helpers: Executor | None,
) -> tuple[dict[int, Any], pa.Array | None] | None:
    """Row group ``rg``'s columns by top-level field, up to its last matching row, and the
    filter's result over those rows (None when every row matches); None when no row does.

    Call from a worker thread. ``helpers`` decodes the other columns alongside when the
    last match comes in the first half; otherwise (or without a free helper thread by the
    time the filter is known) they are decoded after the filter, exactly as far as the last
    match.
    """
    limit = RowLimit()
    pending: Future[list[pa.RecordBatch]] | None = None
    if helpers is not None:
        batches = source.row_group_batches(rg, split.other_tops, as_dictionary, CHUNK_ROWS)
        try:
            pending = helpers.submit(take_until, batches, limit)
        except RuntimeError:  # its runtime was closed meanwhile: decode alone
            pending = None
    try:
        head = source.read_row_group(rg, split.filter_tops, use_threads=len(split.filter_tops) > 1)
        arrays = [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in head.columns]
        stop, mask = _extent(evaluate(arrays) if head.num_rows else pa.scalar(False), head.num_rows)
    except BaseException:
        limit.rows = 0
        if pending is not None and not pending.cancel():
            pending.exception()  # the helper reads this source: it stops before the error goes up
        raise
    n = head.num_rows
    # Past half the row group, the helper stops after the chunk under way and the rest is
    # decoded here on pyarrow's pool: one core is slower at that much, and on data the
    # filter does not cluster the other decodes of the scan hold the other cores.
    limit.rows = stop if 2 * stop <= n else 0
    rest: pa.Table | None = None
    if pending is not None and not pending.cancel():
        if stop and limit.rows:
            rest = pa.Table.from_batches(pending.result())
        else:  # an error in the chunk under way is in rows decoded again here, or not needed
            pending.exception()
    if rest is None and stop:
        rest = (
            source.read_row_group_prefix(rg, split.other_tops, stop, as_dictionary)
            if stop < n
            else source.read_row_group(rg, split.other_tops, as_dictionary)
        )
    if rest is None:
        return None
    columns: dict[int, Any] = dict(zip(split.filter_tops, (a.slice(0, stop) for a in arrays), strict=True))
    columns.update(zip(split.other_tops, rest.slice(0, stop).columns, strict=True))
    return columns, mask


def take_until(batches: Iterator[pa.RecordBatch], limit: RowLimit) -> list[pa.RecordBatch]:
    """Batches until they cover ``limit.rows`` rows, a limit another thread may set meanwhile
    (unset: all of them)."""
    out: list[pa.RecordBatch] = []
    got = 0
    for batch in batches:
        out.append(batch)
        got += batch.num_rows
        if limit.rows is not None and got >= limit.rows:
            break
    return out


def _extent(found: pa.Array | pa.Scalar, n: int) -> tuple[int, pa.Array | None]:
    """Rows up to the last match, and the matches among them (None: all of them)."""
    if isinstance(found, pa.Scalar):
        return (n if found.as_py() is True else 0), None
    matches = pc.indices_nonzero(found)  # nulls are no match, as in the filter
    if len(matches) == 0:
        return 0, None
    stop = matches[-1].as_py() + 1
    return stop, found.slice(0, stop)
