"""A plan's tasks as Arrow record batches: one row per task, for consumers that take them whole.

A ``FileScanTask`` costs a ``DataFile`` and a task object per file (~40-50 us each to
build); a caller that hands the file list to Arrow, DuckDB, Polars or Spark needs neither.
A delete-free, unsplit manifest's tasks are built here straight from its decoded Arrow
columns (:class:`~aioiceberg.spec.manifest.columnar.ColumnarRows`: a take of the kept
rows, no row tuple per entry), or from its decoded rows (plain tuples, see
:mod:`aioiceberg.spec.manifest.entry_rows`) when only rows are held, with the partition
and residual of each distinct partition tuple rendered once; other tasks (with deletes,
or split) are read off the task objects the plan built anyway.

Partition values are the Appendix C JSON object keyed by partition field id; residuals
are the filter's JSON (``"true"`` when the partition decides everything), bound to the
scan's schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.expressions.serde import expression_to_json
from aioiceberg.expressions.tree import Expression
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.spec.arrow_numpy import arrow_of, column_of
from aioiceberg.spec.manifest.columnar import ColumnarManifest, ColumnarRows
from aioiceberg.spec.manifest.data_file import DataFile, FileFormat
from aioiceberg.spec.manifest.entry_rows import ROW_FIELDS, EntryRows
from aioiceberg.spec.scan_tasks import FileScanTask, partition_to_json
from aioiceberg.spec.types import StructType

if TYPE_CHECKING:
    from aioiceberg.scan.planner import Planner

__all__ = [
    "DELETE_FILE_TYPE",
    "TASK_SCHEMA",
    "Rendered",
    "batch_of_columns",
    "batch_of_rows",
    "batch_of_tasks",
    "task_batch",
]

DELETE_FILE_TYPE = pa.struct(
    [
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("content", pa.int8(), nullable=False),  # 1: position deletes, 2: equality deletes
        pa.field("file_format", pa.string(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("file_size_in_bytes", pa.int64(), nullable=False),
        pa.field("referenced_data_file", pa.string()),
        pa.field("content_offset", pa.int64()),
        pa.field("content_size_in_bytes", pa.int64()),
        pa.field("equality_ids", pa.list_(pa.int32())),
    ]
)

TASK_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False),
        pa.field("file_format", pa.string(), nullable=False),
        pa.field("spec_id", pa.int32(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),  # JSON object keyed by field id
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("file_size_in_bytes", pa.int64(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("length", pa.int64()),  # null: to the end of the file
        pa.field("residual", pa.string(), nullable=False),  # expression JSON
        pa.field("first_row_id", pa.int64()),
        pa.field(
            "delete_files", pa.list_(pa.field("item", DELETE_FILE_TYPE, nullable=False)), nullable=False
        ),
    ]
)

_AT = {name: i for i, name in enumerate(ROW_FIELDS)}

# partition value types whose text is kept by value: equal values render alike (floats do
# not: 0.0 == -0.0; nor decimals: 1.0 == 1.00)
_MEMO_TYPES = frozenset({int, str, bytes, bool})


class Rendered:
    """Partition and residual JSON per (spec id, partition tuple), rendered once a batch.

    One object may serve a plan's every batch (``task_batch``'s ``rendered``): each field's
    value is then rendered once a plan and a tuple's object is joined from its fields' texts,
    as ``json.dumps(..., sort_keys=True)`` writes it. Most tuples are new to a batch while
    their values are not (a manifest holds one day, the buckets recur): rendering every tuple
    whole was ~40% of building a 500-entry manifest's batch.
    """

    # value texts kept across batches, at most this many (a high-cardinality identity
    # partition must not grow the memo with the plan)
    MAX_VALUES = 65536

    def __init__(self, planner: Planner) -> None:
        self._planner = planner
        self._partitions: dict[tuple[int, tuple[Any, ...]], str] = {}
        # by id of the residual object (the planner shares one per partition), kept alive here
        self._residuals: dict[int, tuple[Expression, str]] = {}
        self._formats: dict[str, str] = {}
        self._types: dict[int, StructType] = {}
        # per spec: (position, '"<field id>": ') in the sorted order of the field ids as text
        self._layouts: dict[int, list[tuple[int, str]]] = {}
        self._values: dict[tuple[int, int, type, Any], str] = {}
        # the values of every delete-free task's empty ``delete_files``: built once a plan.
        # Not ``pa.array([])``: pyarrow imports pandas on its first ``pa.array`` (~0.25 CPU-s),
        # and here that import stood between ``plan_batches()`` and its plan's first request
        self.no_deletes = pa.nulls(0, TASK_SCHEMA.field("delete_files").type.value_type)

    def start_batch(self) -> None:
        """Tuples are kept for one batch (a plan may hold as many as it has files); values
        for the plan, up to :attr:`MAX_VALUES`."""
        self._partitions.clear()
        self._residuals.clear()
        if len(self._values) > self.MAX_VALUES:
            self._values.clear()

    def partition(self, spec_id: int, partition: tuple[Any, ...], file_path: str) -> str:
        key = (spec_id, partition)
        found = self._partitions.get(key)
        if found is None:
            found = self._partitions[key] = self._render(spec_id, partition, file_path)
        return found

    def _render(self, spec_id: int, partition: tuple[Any, ...], file_path: str) -> str:
        layout = self._layouts.get(spec_id)
        if layout is not None and len(partition) == len(layout):
            values = self._values
            texts: list[str] = []
            for pos, prefix in layout:
                value = partition[pos]
                if value is None:
                    continue  # absent means null
                kind = type(value)
                text = values.get((spec_id, pos, kind, value)) if kind in _MEMO_TYPES else None
                if text is None:
                    break
                texts.append(prefix + text)
            else:
                return "{" + ", ".join(texts) + "}"
        return self._render_whole(spec_id, partition, file_path)

    def _render_whole(self, spec_id: int, partition: tuple[Any, ...], file_path: str) -> str:
        """The tuple through :func:`partition_to_json` (which checks it), its values kept."""
        ptype = self._types.get(spec_id)
        if ptype is None:
            planner = self._planner
            ptype = self._types[spec_id] = planner.spec(spec_id).partition_type(planner.schema)
        obj = partition_to_json(partition, ptype, file_path, spec_id)
        layout = self._layouts.get(spec_id)
        if layout is None:
            order = sorted(range(len(ptype.fields)), key=lambda i: str(ptype.fields[i].field_id))
            layout = self._layouts[spec_id] = [
                (i, json.dumps(str(ptype.fields[i].field_id)) + ": ") for i in order
            ]
        for pos, field in enumerate(ptype.fields):
            value = partition[pos]
            if value is not None and type(value) in _MEMO_TYPES:
                self._values[(spec_id, pos, type(value), value)] = json.dumps(obj[str(field.field_id)])
        return json.dumps(obj, sort_keys=True)

    def residual(self, expr: Expression) -> str:
        found = self._residuals.get(id(expr))
        if found is None or found[0] is not expr:
            found = self._residuals[id(expr)] = (expr, json.dumps(expression_to_json(expr), sort_keys=True))
        return found[1]

    def file_format(self, raw: str) -> str:
        found = self._formats.get(raw)
        if found is None:
            found = self._formats[raw] = FileFormat.parse(raw).value
        return found


def batch_of_rows(planner: Planner, entries: EntryRows, rendered: Rendered | None = None) -> pa.RecordBatch:
    """Delete-free, unsplit tasks of a manifest's decoded rows (no object per file)."""
    rows = entries.rows
    n = len(rows)
    spec_id = entries.spec_id
    rendered = _batch_rendering(planner, rendered)
    if n == 0:
        return _empty()
    columns = list(zip(*rows, strict=True))
    paths = columns[_AT["file_path"]]
    partitions = columns[_AT["partition"]]
    residual_of = planner.residual_of
    partition_text: list[str] = []
    residual_text: list[str] = []
    memo: dict[tuple[Any, ...], tuple[str, str]] = {}
    for path, partition in zip(paths, partitions, strict=True):
        found = memo.get(partition)
        if found is None:
            found = memo[partition] = (
                rendered.partition(spec_id, partition, path),
                rendered.residual(residual_of(spec_id, partition)),
            )
        partition_text.append(found[0])
        residual_text.append(found[1])
    arrays = [
        column_of(paths, pa.string()),
        column_of([rendered.file_format(f) for f in columns[_AT["file_format"]]], pa.string()),
        arrow_of(np.full(n, spec_id, dtype=np.int32)),
        column_of(partition_text, pa.string()),
        column_of(columns[_AT["record_count"]], pa.int64()),
        column_of(columns[_AT["file_size_in_bytes"]], pa.int64()),
        arrow_of(np.zeros(n, dtype=np.int64)),
        pa.nulls(n, pa.int64()),
        column_of(residual_text, pa.string()),
        column_of(columns[_AT["first_row_id"]], pa.int64()),
        _no_deletes(n, rendered.no_deletes),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=TASK_SCHEMA)


def _taken(cm: ColumnarManifest, idx: pa.Array | None, n: int, name: str, typ: pa.DataType) -> pa.Array:
    """The column's kept rows (``idx``; None: every row, as decoded), as ``typ``."""
    found = cm.data_file_column(name)
    if found is None:
        return pa.nulls(n, typ)
    if idx is not None:
        found = found.take(idx)
    return found if found.type == typ else found.cast(typ)


def _rows_of(arr: pa.Array, idx: pa.Array | None) -> pa.Array:
    return arr if idx is None else arr.take(idx)


def batch_of_columns(
    planner: Planner, entries: ColumnarRows, rendered: Rendered | None = None
) -> pa.RecordBatch:
    """Delete-free, unsplit tasks of a manifest's decoded columns: its kept rows taken from
    the Arrow arrays, partition and residual rendered per distinct partition tuple and
    spread by index (no Python object per file)."""
    shared = entries.shared
    if shared is not None and len(entries.parts) == 1:
        # one of several manifests decoded in one call: the call's batch is built once (one
        # take and conversion per column, not per manifest) and each manifest gets its slice
        group, start, stop = shared
        key = ("task batch", id(planner))
        found = group.memo.get(key)
        if found is None or found[0] is not planner:
            whole = _batch_of_columns(planner, ColumnarRows((group.part,), entries.spec_id), rendered)
            found = group.memo[key] = (planner, whole)
        batch: pa.RecordBatch = found[1]
        return batch.slice(start, stop - start)
    return _batch_of_columns(planner, entries, rendered)


def _batch_of_columns(planner: Planner, entries: ColumnarRows, rendered: Rendered | None) -> pa.RecordBatch:
    spec_id = entries.spec_id
    rendered = _batch_rendering(planner, rendered)
    residual_of = planner.residual_of
    no_deletes = rendered.no_deletes
    pieces: list[list[pa.Array]] = []
    for cm, at, _ in entries.parts:
        n = len(at)
        if n == 0:
            continue
        # every decoded row kept (an unfiltered plan): the columns as they are, no take
        every = n == cm.entries_read and np.array_equal(at, np.arange(n))
        idx = None if every else arrow_of(at, pa.int64())
        paths = _taken(cm, idx, n, "file_path", pa.string())
        raw_formats = _taken(cm, idx, n, "file_format", pa.string())
        format_set = pc.unique(raw_formats)
        formats = column_of([rendered.file_format(f) for f in format_set.to_pylist()], pa.string())
        if len(formats) == 1:  # one format (the usual case): repeated, not looked up per row
            file_formats = pa.repeat(formats[0], n)
        else:
            file_formats = formats.take(pc.index_in(raw_formats, value_set=format_set))
        codes, tuples = cm.partition_keys(at, every)
        firsts = np.zeros(len(tuples), dtype=np.int64)
        firsts[codes[::-1]] = np.arange(n - 1, -1, -1)  # each tuple's first row: for messages
        first_paths = paths.take(arrow_of(firsts)).to_pylist()
        partition_text = [
            rendered.partition(spec_id, p, path) for p, path in zip(tuples, first_paths, strict=True)
        ]
        residual_text = [rendered.residual(residual_of(spec_id, p)) for p in tuples]
        by_code = arrow_of(codes)
        row_ids = cm.first_row_ids
        pieces.append(
            [
                paths,
                file_formats,
                arrow_of(np.full(n, spec_id, dtype=np.int32)),
                column_of(partition_text, pa.string()).take(by_code),
                _taken(cm, idx, n, "record_count", pa.int64()),
                _taken(cm, idx, n, "file_size_in_bytes", pa.int64()),
                arrow_of(np.zeros(n, dtype=np.int64)),
                pa.nulls(n, pa.int64()),
                column_of(residual_text, pa.string()).take(by_code),
                pa.nulls(n, pa.int64()) if row_ids is None else _rows_of(row_ids, idx).cast(pa.int64()),
                _no_deletes(n, no_deletes),
            ]
        )
    if not pieces:
        return _empty()
    if len(pieces) == 1:
        return pa.RecordBatch.from_arrays(pieces[0], schema=TASK_SCHEMA)
    arrays = [pa.concat_arrays([piece[i] for piece in pieces]) for i in range(len(TASK_SCHEMA))]
    return pa.RecordBatch.from_arrays(arrays, schema=TASK_SCHEMA)


def _no_deletes(n: int, no_deletes: pa.Array) -> pa.Array:
    """``n`` empty ``delete_files`` lists over ``Rendered.no_deletes``."""
    offsets = arrow_of(np.zeros(n + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, no_deletes, type=TASK_SCHEMA.field("delete_files").type)


def _empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([column_of([], f.type) for f in TASK_SCHEMA], schema=TASK_SCHEMA)


def _batch_of_dicts(rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    """``pa.RecordBatch.from_pylist(rows, schema=TASK_SCHEMA)``, column by column through
    :func:`column_of` (``from_pylist`` goes through ``pa.array``: see :class:`Rendered`)."""
    arrays = [column_of([row[f.name] for row in rows], f.type) for f in TASK_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=TASK_SCHEMA)


def _delete_file(d: DataFile) -> dict[str, Any]:
    return {
        "file_path": d.file_path,
        "content": d.content.value,
        "file_format": d.file_format.value,
        "record_count": d.record_count,
        "file_size_in_bytes": d.file_size_in_bytes,
        "referenced_data_file": d.referenced_data_file,
        "content_offset": d.content_offset,
        "content_size_in_bytes": d.content_size_in_bytes,
        "equality_ids": list(d.equality_ids) if d.equality_ids is not None else None,
    }


def batch_of_tasks(
    planner: Planner, tasks: Sequence[FileScanTask], rendered: Rendered | None = None
) -> pa.RecordBatch:
    """Tasks the plan built as objects (with deletes, or split), as a batch."""
    rendered = _batch_rendering(planner, rendered)
    # by path and offset: deletion vectors of many data files share one Puffin file
    deletes: dict[tuple[str, int | None], dict[str, Any]] = {}

    def delete_row(d: DataFile) -> dict[str, Any]:
        key = (d.file_path, d.content_offset)
        found = deletes.get(key)
        if found is None:
            found = deletes[key] = _delete_file(d)
        return found

    get: Callable[[FileScanTask], dict[str, Any]] = lambda t: {  # noqa: E731
        "file_path": t.file.file_path,
        "file_format": t.file.file_format.value,
        "spec_id": t.spec.spec_id,
        "partition": rendered.partition(t.spec.spec_id, t.file.partition, t.file.file_path),
        "record_count": t.file.record_count,
        "file_size_in_bytes": t.file.file_size_in_bytes,
        "start": t.start,
        "length": t.length,
        "residual": rendered.residual(t.residual),
        "first_row_id": t.file.first_row_id,
        "delete_files": [delete_row(d) for d in t.delete_files],
    }
    return _batch_of_dicts([get(t) for t in tasks])


def task_batch(
    planner: Planner, tasks: Sequence[FileScanTask], rendered: Rendered | None = None
) -> pa.RecordBatch:
    """One of a plan's task sequences (see ``PlanStream.batches``) as a record batch.
    ``rendered``: one :class:`Rendered` for every batch of the plan (values rendered once)."""
    if isinstance(tasks, LazyTasks) and isinstance(tasks.entries, ColumnarRows):
        return batch_of_columns(planner, tasks.entries, rendered)
    if isinstance(tasks, LazyTasks) and isinstance(tasks.entries, EntryRows):
        return batch_of_rows(planner, tasks.entries, rendered)
    return batch_of_tasks(planner, tasks, rendered)


def _batch_rendering(planner: Planner, rendered: Rendered | None) -> Rendered:
    if rendered is None:
        return Rendered(planner)
    rendered.start_batch()
    return rendered
