"""A scan's file scan tasks, built from its pruned entries with each file's residual.

:class:`TaskBuilder` is what the planning stages' last step holds: the schema, the specs
and the bound filter of one scan, with the residuals memoised per spec id and partition
tuple (stateless for the tasks, so every plan of the scan shares it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from aioiceberg.expressions import ResidualEvaluator
from aioiceberg.expressions.lineage import LineageEvaluator
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.scan.bound_filter import BoundFilter
from aioiceberg.spec.manifest import DataFile, ManifestEntry
from aioiceberg.spec.manifest.builders import frozen_builder
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.scan_tasks import FileScanTask

__all__ = ["TaskBuilder", "split_ranges"]

# Residuals memoised per partition tuple (cleared when full).
_RESIDUAL_MEMO = 4096
_MISSHAPEN = object()  # keys the residual of a partition tuple not of its spec's width
# FileScanTask's checks (a tuple of deletes, start >= 0, length >= 0 or None) hold for every
# task built here, so tasks are built without them (several times faster per task).
_new_task = frozen_builder(FileScanTask, trusted=True)


def split_ranges(f: DataFile, target: int) -> list[tuple[int, int]]:
    """(start, length) ranges of about ``target`` bytes along the file's split offsets."""
    offsets = f.split_offsets
    size = f.file_size_in_bytes
    if not offsets or size <= target:
        return [(0, size)]
    points = list(offsets)
    if points != sorted(points) or points[0] < 0 or points[-1] >= size:
        return [(0, size)]  # offsets that contradict the file are ignored, not trusted
    points.append(size)
    out: list[tuple[int, int]] = []
    start = points[0]
    for end in points[1:]:
        if end - start >= target or end == size:
            out.append((start, end - start))
            start = end
    return out if out else [(0, size)]


class TaskBuilder:
    """Tasks of one scan: a file, its deletes, its residual, its spec and the scan's schema.

    The scan's filter is bound with SQL's rule for NULLs (:class:`BoundFilter`), so every
    residual taken from it keeps that rule for the file's rows, and each task says so
    (``residual_null_safe``): the reader applies it as it is.
    """

    def __init__(self, bound: BoundFilter, split_size: int | None) -> None:
        self.schema = bound.schema
        self.specs = bound.specs
        self.bound_filter = bound.expr
        self.case_sensitive = bound.case_sensitive
        self.split_size = split_size
        # v3 row lineage read: tasks carry their file's data sequence number (built from
        # whole entries, which the plain path otherwise skips)
        self.lineage = False
        # a filter on the row lineage columns: files it proves hold no matching row are dropped
        self.lineage_filter: LineageEvaluator | None = None
        self._residuals: dict[int, ResidualEvaluator] = {}
        self._residual_keys: dict[int, Callable[[tuple[Any, ...]], Any]] = {}
        self._unknown_specs: dict[int, PartitionSpec] = {}
        # one residual object per partition tuple: files of a partition share it
        self._residual_by_partition: dict[tuple[int, Any], Expression] = {}

    def residual(self, f: DataFile) -> Expression:
        """What of the filter the file's partition leaves for its rows, memoised per tuple of
        the partition values the filter reads (a ``ts`` range over ``day(ts), bucket(16, id)``
        has as many residuals as days, not as days times buckets)."""
        return self.residual_of(f.spec_id, f.partition)

    def residual_of(self, spec_id: int, partition: tuple[Any, ...]) -> Expression:
        """:meth:`residual` of a file of ``spec_id`` with this partition tuple."""
        if isinstance(self.bound_filter, AlwaysTrue):
            return self.bound_filter
        read = self._residual_keys.get(spec_id)
        if read is None:
            read = self._residual_key_for(spec_id)
        key = (spec_id, read(partition))
        found = self._residual_by_partition.get(key)
        if found is not None:
            return found
        residual = self._residuals[spec_id].residual_for(partition)
        if len(self._residual_by_partition) >= _RESIDUAL_MEMO:
            self._residual_by_partition.clear()
        try:
            self._residual_by_partition[key] = residual
        except TypeError:  # an unhashable partition value: not memoised
            pass
        return residual

    def _residual_key_for(self, spec_id: int) -> Callable[[tuple[Any, ...]], Any]:
        spec = self.spec(spec_id)
        ev = self._residuals[spec_id] = ResidualEvaluator(
            self.schema, spec, self.bound_filter, self.case_sensitive
        )
        width, positions = len(spec.fields), ev.positions

        def read(partition: tuple[Any, ...]) -> Any:
            if len(partition) != width:  # not the spec's shape: keyed whole, apart
                return (_MISSHAPEN, partition)
            return tuple([partition[i] for i in positions])

        self._residual_keys[spec_id] = read
        return read

    def prepare(self, spec_ids: Iterable[int]) -> None:
        """Build these specs' residual evaluators now (asked while a plan's manifest list is
        in flight), not as the plan's first task of each spec is built."""
        if isinstance(self.bound_filter, AlwaysTrue):
            return
        for spec_id in spec_ids:
            if spec_id not in self._residual_keys:
                self._residual_key_for(spec_id)

    def spec(self, spec_id: int) -> PartitionSpec:
        spec = self.specs.get(spec_id)
        if spec is None:  # not in the metadata: typed as unpartitioned (built once)
            spec = self._unknown_specs.get(spec_id)
            if spec is None:
                spec = self._unknown_specs[spec_id] = PartitionSpec(spec_id, ())
        return spec

    def kept(self, entries: Sequence[ManifestEntry]) -> Sequence[ManifestEntry]:
        """``entries`` without the files a filter on the row lineage columns rules out (their
        values are not in the stats the metrics evaluators read: see LineageEvaluator)."""
        ev = self.lineage_filter
        if ev is None or not entries:
            return entries
        if isinstance(entries, EntryRows):
            rows = [
                r
                for r, e in zip(entries.rows, entries, strict=True)
                if ev.eval(e.data_file, e.sequence_number)
            ]
            return entries if len(rows) == len(entries) else EntryRows(rows, entries.spec_id)
        found = [e for e in entries if ev.eval(e.data_file, e.sequence_number)]
        return entries if len(found) == len(entries) else found

    def iter_plain_tasks(self, entries: Sequence[ManifestEntry]) -> Iterator[FileScanTask]:
        """One delete-free, unsplit task per entry, built as taken (of :class:`EntryRows`,
        only the data files are built, never the entries)."""
        schema, new_task, residual, spec = self.schema, _new_task, self.residual, self.spec
        if self.lineage:
            for e in entries:
                f = e.data_file
                yield new_task(f, (), residual(f), spec(f.spec_id), schema, 0, None, True, e.sequence_number)
            return
        if isinstance(entries, EntryRows):
            # one spec for all the rows, and without a filter one residual: looked up once,
            # not per file (~0.5 us a task)
            spec_of = spec(entries.spec_id)
            if isinstance(self.bound_filter, AlwaysTrue):
                always = self.bound_filter
                for f in entries.data_files():
                    yield new_task(f, (), always, spec_of, schema, 0, None, True, None)
                return
            residual_of, spec_id = self.residual_of, entries.spec_id
            # a batch's files share few partitions: each tuple's residual is looked up once
            # (equal tuples have equal residuals; ~0.3 us a task less than keying each one)
            memo: dict[tuple[Any, ...], Expression] = {}
            for f in entries.data_files():
                partition = f.partition
                try:
                    found = memo.get(partition)
                except TypeError:  # an unhashable value: looked up as it is
                    found = residual_of(spec_id, partition)
                else:
                    if found is None:
                        found = memo[partition] = residual_of(spec_id, partition)
                yield new_task(f, (), found, spec_of, schema, 0, None, True, None)
            return
        for f in (e.data_file for e in entries):
            yield new_task(f, (), residual(f), spec(f.spec_id), schema, 0, None, True, None)

    def tasks_for(self, entry: ManifestEntry, deletes: tuple[DataFile, ...]) -> list[FileScanTask]:
        """The entry's tasks with these deletes: one, or one per split of ``split_size``."""
        f = entry.data_file
        spec = self.spec(f.spec_id)
        residual = self.residual(f)
        split_size, schema, seq = self.split_size, self.schema, entry.sequence_number
        if split_size is None:
            return [_new_task(f, deletes, residual, spec, schema, 0, None, True, seq)]
        ranges = split_ranges(f, split_size)
        if len(ranges) == 1:
            return [_new_task(f, deletes, residual, spec, schema, ranges[0][0], None, True, seq)]
        return [
            _new_task(f, deletes, residual, spec, schema, start, length, True, seq)
            for start, length in ranges
        ]
