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
from array import array
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.errors import ValidationError
from aioiceberg.expressions.serde import expression_to_json
from aioiceberg.expressions.tree import Expression
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.spec.arrow_numpy import arrow_of, column_of, value_offsets
from aioiceberg.spec.manifest.columnar import ColumnarManifest, ColumnarRows, joined_partition_keys
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
_INT32_MAX = (1 << 31) - 1

# partition value types whose text is kept by value: equal values render alike (floats do
# not: 0.0 == -0.0; nor decimals: 1.0 == 1.00). Kept under the value itself, booleans under
# (bool, value): True == 1
_MEMO_TYPES = frozenset({int, str, bytes, bool})
# value types a column of tuples is rendered for at once (see ``Rendered.partitions``)
_PLAIN_TYPES = frozenset({int, str, bytes})


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
    # columns of one repeated value (see :meth:`constant`) kept, at most this many
    MAX_CONSTANTS = 64
    # residual texts kept across batches, at most this many (a filtered plan may hold one
    # residual a partition)
    MAX_RESIDUALS = 4096

    def __init__(self, planner: Planner) -> None:
        self._planner = planner
        self._partitions: dict[tuple[int, tuple[Any, ...]], str] = {}
        # by id of the residual object (the planner shares one per partition), kept alive here
        self._residuals: dict[int, tuple[Expression, str]] = {}
        self._formats: dict[str, str] = {}
        self._types: dict[int, StructType] = {}
        # per spec: (position, '"<field id>": ', the position's value texts) in the sorted
        # order of the field ids as text
        self._layouts: dict[int, list[tuple[int, str, dict[Any, str]]]] = {}
        # the values of every delete-free task's empty ``delete_files``: built once a plan.
        # Not ``pa.array([])``: pyarrow imports pandas on its first ``pa.array`` (~0.25 CPU-s),
        # and here that import stood between ``plan_batches()`` and its plan's first request
        self.no_deletes = pa.nulls(0, TASK_SCHEMA.field("delete_files").type.value_type)
        self._constants: dict[tuple[str, Any], pa.Array] = {}
        # (offset width, rows, first offset, text) -> offsets, data and text of as many rows
        # of that text (see :meth:`one_text`)
        self._alike: dict[tuple[int, int, int, bytes], tuple[pa.Buffer, pa.Buffer, str]] = {}

    def start_batch(self) -> None:
        """Tuples are kept for one batch (a plan may hold as many as it has files); values
        for the plan, up to :attr:`MAX_VALUES`, and residuals up to :attr:`MAX_RESIDUALS`."""
        self._partitions.clear()
        if len(self._residuals) > self.MAX_RESIDUALS:
            self._residuals.clear()
        layouts = self._layouts.values()
        if sum(len(texts) for layout in layouts for _, _, texts in layout) > self.MAX_VALUES:
            for layout in layouts:
                for _, _, texts in layout:
                    texts.clear()

    def partition(self, spec_id: int, partition: tuple[Any, ...], file_path: str) -> str:
        key = (spec_id, partition)
        found = self._partitions.get(key)
        if found is None:
            found = self._joined(spec_id, partition)
            if found is None:
                found = self._render_whole(spec_id, partition, file_path)
            self._partitions[key] = found
        return found

    def partitions(
        self, spec_id: int, tuples: Sequence[tuple[Any, ...]], path_of: Callable[[int], str]
    ) -> list[str]:
        """:meth:`partition` of each of a manifest's distinct tuples; ``path_of(i)`` names a
        file of ``tuples[i]`` (for messages), asked only when the tuple is rendered whole.

        Field by field over the tuples when every value is an int, str or bytes (each field's
        texts looked up at once, each tuple's object joined from them): tuple by tuple, a
        500-entry manifest's 16 tuples cost ~30 us. A value not kept yet (a manifest's new
        day) is rendered alone, as :func:`partition_to_json` renders it in its tuple. Which of
        several tuples that cannot be rendered raises first is not this order's: see
        ``_raise_in_row_order``."""
        layout = self._layouts.get(spec_id)
        if layout is None or not tuples or set(map(len, tuples)) != {len(layout)}:
            return self._each(spec_id, tuples, path_of)
        if not layout:
            return ["{}"] * len(tuples)
        columns = list(zip(*tuples, strict=True))
        for pos, _, _ in layout:
            if not _PLAIN_TYPES.issuperset(map(type, columns[pos])):  # nulls, floats, booleans
                return self._each(spec_id, tuples, path_of)
        fields = [list(map(kept.get, columns[pos])) for pos, _, kept in layout]
        if any(None in texts for texts in fields):  # values not kept yet: rendered and kept
            ptype = self._partition_type(spec_id)
            for (pos, _, kept), texts in zip(layout, fields, strict=True):
                if None not in texts:
                    continue
                field = ptype.fields[pos]
                alone, key = StructType(field), str(field.field_id)
                column = columns[pos]
                for i, text in enumerate(texts):
                    if text is None:
                        value = column[i]
                        found = kept.get(value)
                        if found is None:
                            try:
                                obj = partition_to_json((value,), alone, "", spec_id)
                            except ValidationError:  # raised again, naming its file
                                self._render_whole(spec_id, tuples[i], path_of(i))
                                raise
                            found = kept[value] = json.dumps(obj[key])
                        texts[i] = found
        filled = cast(list[list[str]], fields)  # (each None was filled above)
        pieces = [
            list(map(prefix.__add__, texts)) for (_, prefix, _), texts in zip(layout, filled, strict=True)
        ]
        return ["{" + text + "}" for text in map(", ".join, zip(*pieces, strict=True))]

    def _each(
        self, spec_id: int, tuples: Sequence[tuple[Any, ...]], path_of: Callable[[int], str]
    ) -> list[str]:
        """:meth:`partitions` tuple by tuple."""
        memo = self._partitions
        out: list[str] = []
        for i, partition in enumerate(tuples):
            key = (spec_id, partition)
            found = memo.get(key)
            if found is None:
                found = self._joined(spec_id, partition)
                if found is None:
                    found = self._render_whole(spec_id, partition, path_of(i))
                memo[key] = found
            out.append(found)
        return out

    def _joined(self, spec_id: int, partition: tuple[Any, ...]) -> str | None:
        """The tuple's object joined from its values' kept texts (None: one is not kept)."""
        layout = self._layouts.get(spec_id)
        if layout is None or len(partition) != len(layout):
            return None
        texts: list[str] = []
        for pos, prefix, kept in layout:
            value = partition[pos]
            if value is None:
                continue  # absent means null
            kind = type(value)
            if kind is bool:
                value = (bool, value)
            elif kind not in _MEMO_TYPES:
                return None
            text = kept.get(value)
            if text is None:
                return None
            texts.append(prefix + text)
        return "{" + ", ".join(texts) + "}"

    def _render_whole(self, spec_id: int, partition: tuple[Any, ...], file_path: str) -> str:
        """The tuple through :func:`partition_to_json` (which checks it), its values kept."""
        ptype = self._partition_type(spec_id)
        obj = partition_to_json(partition, ptype, file_path, spec_id)
        layout = self._layouts.get(spec_id)
        if layout is None:
            order = sorted(range(len(ptype.fields)), key=lambda i: str(ptype.fields[i].field_id))
            layout = self._layouts[spec_id] = [
                (i, json.dumps(str(ptype.fields[i].field_id)) + ": ", {}) for i in order
            ]
        for pos, _, kept in layout:
            value = partition[pos]
            kind = type(value)
            if value is not None and kind in _MEMO_TYPES:
                text = json.dumps(obj[str(ptype.fields[pos].field_id)])
                kept[(bool, value) if kind is bool else value] = text
        return json.dumps(obj, sort_keys=True)

    def _partition_type(self, spec_id: int) -> StructType:
        ptype = self._types.get(spec_id)
        if ptype is None:
            planner = self._planner
            ptype = self._types[spec_id] = planner.spec(spec_id).partition_type(planner.schema)
        return ptype

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

    def one_text(self, arr: pa.Array | None) -> str | None:
        """The text every row of a string array holds (None: the rows differ, or hold nulls,
        or the array is of another type): its offsets and data compared, as buffers, with
        those of as many rows of its first row's text (kept: a manifest's format recurs).
        ``pc.unique``, or reading the offsets with numpy, cost ~2x as much."""
        if arr is None:
            return None
        n = len(arr)
        large = pa.types.is_large_string(arr.type)
        if n == 0 or arr.null_count or not (large or pa.types.is_string(arr.type)):
            return None
        _, offset_buf, data = arr.buffers()
        width = 8 if large else 4
        first, second = np.frombuffer(
            offset_buf, dtype=f"i{width}", count=2, offset=arr.offset * width
        ).tolist()
        size = second - first
        raw = b"" if data is None else data.slice(first, size).to_pybytes()
        key = (width, n, first, raw)
        found = self._alike.get(key)
        if found is None:
            if len(self._alike) >= self.MAX_CONSTANTS:
                self._alike.clear()
            offsets = np.arange(n + 1, dtype=np.int64) * size + first
            found = self._alike[key] = (
                pa.py_buffer(offsets.astype(f"i{width}")),
                pa.py_buffer(raw * n),
                raw.decode(),
            )
        expected_offsets, expected_data, text = found
        if not offset_buf.slice(arr.offset * width, (n + 1) * width).equals(expected_offsets):
            return None
        if size and (data is None or not data.slice(first, n * size).equals(expected_data)):
            return None
        return text

    def constant(self, key: tuple[str, Any], n: int, build: Callable[[int], pa.Array]) -> pa.Array:
        """``n`` rows of a column whose every row is alike (``key`` names it, ``build(n)``
        makes it): a slice of one kept for the plan, as long as its longest batch. A batch's
        spec ids, starts, lengths, formats, residuals and empty delete lists were built anew
        for each manifest (~25 us of a 500-entry manifest's batch)."""
        found = self._constants.get(key)
        if found is None or len(found) < n:
            if found is None and len(self._constants) >= self.MAX_CONSTANTS:
                self._constants.clear()
            found = self._constants[key] = build(n)
        return found if len(found) == n else found.slice(0, n)

    def text_column(self, text: str, n: int) -> pa.Array:
        """``n`` rows of ``text`` (see :meth:`constant`)."""
        return self.constant(("text", text), n, lambda k: pa.repeat(_strings([text])[0], k))


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
    if found.type == typ:
        return found
    return _as_string(found) if typ == pa.string() else found.cast(typ)


def _as_string(arr: pa.Array) -> pa.Array:
    """``arr.cast(pa.string())``; of a large string array without nulls, its offsets narrowed
    and its data shared (the cast costs ~7 us a 500-row column)."""
    n = len(arr)
    if n == 0 or arr.null_count or not pa.types.is_large_string(arr.type):
        return arr.cast(pa.string())
    found = value_offsets(arr)
    assert found is not None  # (a large string array)
    offsets, data = found
    if offsets[n] > _INT32_MAX:
        return arr.cast(pa.string())  # (which says it does not fit)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), data])


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


class _Columns(NamedTuple):
    """What a batch takes from one manifest's kept rows, or several manifests' joined."""

    n: int
    paths: pa.Array
    # the column whose one text (see ``Rendered.one_text``) is every kept row's format
    formats: pa.Array | None
    kept_formats: Callable[[], pa.Array]
    codes: np.ndarray[Any, Any]  # each row's tuple, an index into ``tuples``
    tuples: list[tuple[Any, ...]]
    record_count: pa.Array
    file_size: pa.Array
    row_ids: pa.Array | None  # None: every row's is null


def _batch_of_columns(planner: Planner, entries: ColumnarRows, rendered: Rendered | None) -> pa.RecordBatch:
    spec_id = entries.spec_id
    rendered = _batch_rendering(planner, rendered)
    parts = [(cm, at) for cm, at, _ in entries.parts if len(at)]
    if not parts:
        return _empty()
    if len(parts) > 1:
        joined = _joined_columns(parts)
        if joined is not None:
            return pa.RecordBatch.from_arrays(
                _task_columns(planner, rendered, spec_id, joined), schema=TASK_SCHEMA
            )
    pieces = [_task_columns(planner, rendered, spec_id, _one_manifest(cm, at)) for cm, at in parts]
    if len(pieces) == 1:
        return pa.RecordBatch.from_arrays(pieces[0], schema=TASK_SCHEMA)
    arrays = [pa.concat_arrays([piece[i] for piece in pieces]) for i in range(len(TASK_SCHEMA))]
    return pa.RecordBatch.from_arrays(arrays, schema=TASK_SCHEMA)


def _kept_index(cm: ColumnarManifest, at: np.ndarray[Any, Any]) -> pa.Array | None:
    """The kept rows as an index to take (None: every decoded row, in order: no take)."""
    n = len(at)
    every = n == cm.entries_read and (at is cm.rows or np.array_equal(at, np.arange(n)))
    return None if every else arrow_of(at, pa.int64())


def _one_manifest(cm: ColumnarManifest, at: np.ndarray[Any, Any]) -> _Columns:
    n = len(at)
    idx = _kept_index(cm, at)
    codes, tuples = cm.partition_keys(at, idx is None)
    row_ids = cm.first_row_ids
    return _Columns(
        n,
        _taken(cm, idx, n, "file_path", pa.string()),
        # the manifest's whole column: one format in it is one format in its kept rows
        cm.data_file_column("file_format"),
        lambda: _taken(cm, idx, n, "file_format", pa.string()),
        codes,
        tuples,
        _taken(cm, idx, n, "record_count", pa.int64()),
        _taken(cm, idx, n, "file_size_in_bytes", pa.int64()),
        None if row_ids is None else _rows_of(row_ids, idx).cast(pa.int64()),
    )


def _joined_columns(parts: Sequence[tuple[ColumnarManifest, np.ndarray[Any, Any]]]) -> _Columns | None:
    """Several manifests' kept rows as one manifest's: each column joined, the partition
    tuples grouped once (:func:`joined_partition_keys`). A batch built per manifest costs
    ~30 Arrow and numpy calls whatever its rows; a plan whose manifests queue up behind its
    consumer builds one batch of them all. None: not joinable (a column missing, or of
    another type, in one of them)."""
    kept = [(cm, at, _kept_index(cm, at)) for cm, at in parts]
    grouped = joined_partition_keys([(cm, idx, len(at)) for cm, at, idx in kept])
    if grouped is None:  # grouped per manifest, the tuples side by side (a tuple may recur)
        codes_of: list[np.ndarray[Any, Any]] = []
        tuples_of: list[tuple[Any, ...]] = []
        for cm, at, idx in kept:
            codes, tuples = cm.partition_keys(at, idx is None)
            codes_of.append(codes + len(tuples_of))
            tuples_of.extend(tuples)
        grouped = np.concatenate(codes_of), tuples_of

    def column(name: str) -> pa.Array | None:
        pieces = []
        for cm, _, idx in kept:
            found = cm.data_file_column(name)
            if found is None:
                return None
            pieces.append(found if idx is None else found.take(idx))
        try:
            return pa.concat_arrays(pieces)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # (types differ between the manifests)
            return None

    paths, formats = column("file_path"), column("file_format")
    record_count, file_size = column("record_count"), column("file_size_in_bytes")
    if paths is None or formats is None or record_count is None or file_size is None:
        return None
    row_ids: pa.Array | None = None
    if any(cm.first_row_ids is not None for cm, _, _ in kept):
        row_ids = pa.concat_arrays(
            [
                pa.nulls(len(at), pa.int64()) if ids is None else _rows_of(ids, idx).cast(pa.int64())
                for cm, at, idx in kept
                for ids in (cm.first_row_ids,)
            ]
        )
    codes, tuples = grouped
    return _Columns(
        len(paths),
        _as_string(paths) if paths.type != pa.string() else paths,
        formats,
        lambda: formats if formats.type == pa.string() else _as_string(formats),
        codes,
        tuples,
        record_count if record_count.type == pa.int64() else record_count.cast(pa.int64()),
        file_size if file_size.type == pa.int64() else file_size.cast(pa.int64()),
        row_ids,
    )


def _task_columns(planner: Planner, rendered: Rendered, spec_id: int, cols: _Columns) -> list[pa.Array]:
    """The :data:`TASK_SCHEMA` columns of ``cols``: partition and residual rendered per
    distinct tuple and spread by index (no Python object per file)."""
    n, paths, codes, tuples = cols.n, cols.paths, cols.codes, cols.tuples
    # one format in the rows (the usual case): repeated, not looked up per row
    one_format = rendered.one_text(cols.formats)
    if one_format is not None:
        file_formats = rendered.text_column(rendered.file_format(one_format), n)
    else:
        raw_formats = cols.kept_formats()
        format_set = pc.unique(raw_formats)
        formats = column_of([rendered.file_format(f) for f in format_set.to_pylist()], pa.string())
        file_formats = formats.take(pc.index_in(raw_formats, value_set=format_set))
    by_code = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(codes))])

    def path_of(i: int) -> str:
        path: str = paths[int(np.argmax(codes == i))].as_py()  # the tuple's first file
        return path

    try:
        partition_text = rendered.partitions(spec_id, tuples, path_of)
    except Exception:  # whatever rendering raises: the first bad row's, as the rows' batch
        _raise_in_row_order(rendered, spec_id, tuples, codes, paths)
        raise
    residuals = list(map(planner.residual_of, repeat(spec_id), tuples))
    if len(tuples) == 1:
        partitions = pa.repeat(_strings(partition_text)[0], n)
    else:
        partitions = pc.array_take(_strings(partition_text), by_code)
    first = residuals[0]
    if all(r is first for r in residuals):  # one residual (an unfiltered plan's, or a day's)
        residual_column = rendered.text_column(rendered.residual(first), n)
    else:
        residual_column = pc.array_take(_strings([rendered.residual(r) for r in residuals]), by_code)
    no_deletes = rendered.no_deletes
    return [
        paths,
        file_formats,
        rendered.constant(("spec id", spec_id), n, lambda k: arrow_of(np.full(k, spec_id, dtype=np.int32))),
        partitions,
        cols.record_count,
        cols.file_size,
        rendered.constant(("zeros", None), n, lambda k: arrow_of(np.zeros(k, dtype=np.int64))),
        rendered.constant(("nulls", None), n, lambda k: pa.nulls(k, pa.int64())),
        residual_column,
        rendered.constant(("nulls", None), n, lambda k: pa.nulls(k, pa.int64()))
        if cols.row_ids is None
        else cols.row_ids,
        rendered.constant(("no deletes", None), n, lambda k: _no_deletes(k, no_deletes)),
    ]


def _raise_in_row_order(
    rendered: Rendered,
    spec_id: int,
    tuples: Sequence[tuple[Any, ...]],
    codes: np.ndarray[Any, Any],
    paths: pa.Array,
) -> None:
    """The error of the first row whose tuple cannot be rendered, naming its file, as the
    rows' batch (which renders row by row) raises it: the tuples are grouped in value order,
    so the first of several bad ones to fail above need not be the first in the manifest."""
    _, firsts = np.unique(codes, return_index=True)  # each tuple's first row
    for i in np.argsort(firsts, kind="stable").tolist():
        rendered._render_whole(spec_id, tuples[i], paths[int(firsts[i])].as_py())


def _strings(texts: Sequence[str]) -> pa.Array:
    """A string array of ``texts`` (none null)."""
    joined = "".join(texts)
    data = joined.encode()
    if len(data) > _INT32_MAX:
        raise pa.ArrowInvalid("values too large for 32-bit offsets")
    sizes = map(len, texts) if len(data) == len(joined) else (len(t.encode()) for t in texts)
    offsets = array("i", [0])  # (few values: numpy's calls cost more than the values)
    offsets.extend(accumulate(sizes))
    return pa.Array.from_buffers(pa.string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


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
