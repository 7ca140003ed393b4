"""Compaction's plan: which files to rewrite, in which groups, and how a group's rows are ordered.

One planner for the single-process rewrite and the Spark action (the Spark action only
changes where a group is rewritten). Three strategies, as Java Iceberg's
``rewrite_data_files``:

- ``binpack``: small files (and files with deletes) packed per partition into groups of
  about the target size, first-fit decreasing; rows keep their order.
- ``sort``: a group's rows sorted by the table's sort order or given columns; a
  partition's files ordered by their lower bounds before they are cut into groups, so
  each group (and each file it writes) covers a narrow range.
- ``zorder``: as ``sort``, by the z-value of given columns (``zorder.py``).

Options carry Java's names (``target-file-size-bytes``, ``min-input-files``...); pure
and synchronous.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.maintenance.group_rewrite import (
    GROUP_OPTION_KEYS,
    GroupLimits,
    JavaOptions,
    batches,
    bin_pack,
)
from aioiceberg.maintenance.zorder import PRIMITIVE_BUFFER_SIZE, sort_by_zorder, zorder_keys
from aioiceberg.spec.manifest import DataFile
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import NullOrder, SortDirection, SortOrder
from aioiceberg.spec.transforms import Transform
from aioiceberg.spec.types import PrimitiveType
from aioiceberg.spec.values import from_bytes

__all__ = [
    "STRATEGIES",
    "FileGroup",
    "RewriteOptions",
    "SortKey",
    "batches",
    "order_rows",
    "parse_sort_order",
    "plan_groups",
    "table_sort_keys",
]

STRATEGIES = ("binpack", "sort", "zorder")
OPTION_KEYS = GROUP_OPTION_KEYS | {"var-length-contribution"}
_ZORDER = re.compile(r"^\s*zorder\s*\((?P<cols>[^)]*)\)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class SortKey:
    """One sort column; ``transform`` (from the table's sort order) is applied before sorting."""

    column: str
    descending: bool = False
    nulls_first: bool = True
    transform: Transform | None = None
    source_type: PrimitiveType | None = None


@dataclass(frozen=True)
class RewriteOptions(GroupLimits):
    """A compaction's options; ``parse`` reads them from Java's option names."""

    strategy: str = "binpack"
    sort_keys: tuple[SortKey, ...] = ()
    zorder_columns: tuple[str, ...] = ()
    var_length_contribution: int = PRIMITIVE_BUFFER_SIZE

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValidationError(
                f"unknown rewrite strategy {self.strategy!r}: use one of {', '.join(STRATEGIES)}"
            )
        super().__post_init__()
        if (v := self.var_length_contribution) <= 0:
            raise ValidationError(f"var-length-contribution must be positive, got {v}")
        if self.strategy == "sort" and not self.sort_keys:
            raise ValidationError("the sort strategy needs a sort order: the table has none, give sort_order")
        if self.strategy == "zorder" and not self.zorder_columns:
            raise ValidationError(
                "the zorder strategy needs columns: zorder_by=[...] or sort_order='zorder(a, b)'"
            )

    @property
    def max_group_size(self) -> int:
        """Java's defaults: the target (binpack), 100 GiB (sort, zorder)."""
        m = self.max_file_group_size_bytes
        if m is None and self.strategy == "binpack":
            return self.target_file_size_bytes
        return super().max_group_size

    @classmethod
    def parse(
        cls,
        options: Mapping[str, Any] | None,
        *,
        target_file_size: int,
        strategy: str = "binpack",
        sort_keys: Sequence[SortKey] = (),
        zorder_columns: Sequence[str] = (),
        min_input_files: int = 2,
    ) -> RewriteOptions:
        """Java-named ``options`` over the given defaults; unknown keys are refused."""
        opts = JavaOptions(options, OPTION_KEYS, "rewrite")
        return cls(
            **opts.limits(target_file_size, min_input_files),
            strategy=strategy.lower(),
            sort_keys=tuple(sort_keys),
            zorder_columns=tuple(zorder_columns),
            var_length_contribution=opts.number("var-length-contribution", PRIMITIVE_BUFFER_SIZE),
        )


@dataclass(frozen=True)
class FileGroup:
    """Files of one partition rewritten together (by one executor task on Spark)."""

    index: int
    partition: tuple[int, tuple[Any, ...]]  # (spec id, partition tuple)
    tasks: tuple[FileScanTask, ...] = field(default=())

    @property
    def files(self) -> list[DataFile]:
        return [t.file for t in self.tasks]

    @property
    def size(self) -> int:
        return sum(t.file.file_size_in_bytes for t in self.tasks)


def parse_sort_order(
    order: str | Sequence[str], schema: Schema
) -> tuple[tuple[SortKey, ...], tuple[str, ...]]:
    """Sort keys from Java's ``sort_order`` text (``"a DESC NULLS LAST, b"``) or a list of such
    items; ``"zorder(a, b)"`` gives z-order columns instead. Returns (sort keys, z-order columns)."""
    if isinstance(order, str):
        z = _ZORDER.match(order)
        if z:
            cols = tuple(c.strip() for c in z.group("cols").split(",") if c.strip())
            for c in cols:
                _column(schema, c)
            return (), cols
        items: Sequence[str] = [p for p in order.split(",") if p.strip()]
    else:
        items = order
    keys = []
    for item in items:
        words = item.split()
        if not words:
            continue
        rest = [w.upper() for w in words[1:]]
        descending = "DESC" in rest
        nulls_first = not descending  # Spark's default: nulls first ascending, last descending
        if "NULLS" in rest:
            i = rest.index("NULLS")
            nulls_first = i + 1 < len(rest) and rest[i + 1] == "FIRST"
        allowed = {"ASC", "DESC", "NULLS", "FIRST", "LAST"}
        if set(rest) - allowed:
            raise ValidationError(
                f"cannot parse sort item {item!r}: use 'column [ASC|DESC] [NULLS FIRST|LAST]'"
            )
        _column(schema, words[0])
        keys.append(SortKey(words[0], descending, nulls_first))
    return tuple(keys), ()


def _column(schema: Schema, name: str) -> None:
    try:
        schema.find_field(name)
    except Exception as e:
        raise ValidationError(f"cannot sort by {name!r}: no such column in the table") from e


def table_sort_keys(order: SortOrder, schema: Schema) -> tuple[SortKey, ...]:
    """The table's sort order as sort keys; an order by bucket cannot order ranges."""
    keys = []
    for f in order.fields:
        name = schema.find_column_name(f.source_id)
        if name is None:
            raise ValidationError(f"sort order field {f.source_id} is not in the table schema")
        source = schema.find_field(f.source_id).field_type
        if not f.transform.preserves_order:
            raise UnsupportedError(
                f"cannot compact by the table's sort order: {f.transform}({name}) keeps no order"
            )
        keys.append(
            SortKey(
                name,
                f.direction == SortDirection.DESC,
                f.null_order == NullOrder.NULLS_FIRST,
                None if f.transform.is_identity else f.transform,
                source if isinstance(source, PrimitiveType) else None,
            )
        )
    return tuple(keys)


# -- choosing files and forming groups ---------------------------------------------------------


def _selected(task: FileScanTask, opts: RewriteOptions) -> bool:
    size = task.file.file_size_in_bytes
    return (
        opts.rewrite_all or size < opts.min_file_size or size > opts.max_file_size or bool(task.delete_files)
    )


def _size(task: FileScanTask) -> int:
    return task.file.file_size_in_bytes


def _worth(members: Sequence[FileScanTask], opts: RewriteOptions) -> bool:
    """Java's rules: enough input files, enough (or too much) content, a file too large, deletes."""
    size = sum(t.file.file_size_in_bytes for t in members)
    return (
        opts.rewrite_all
        or len(members) >= opts.min_input_files
        or (len(members) > 1 and size > opts.target_file_size_bytes)
        or size > opts.max_group_size
        or any(t.file.file_size_in_bytes > opts.max_file_size for t in members)
        or any(t.delete_files for t in members)
    )


def _runs(tasks: Sequence[FileScanTask], capacity: int) -> list[list[FileScanTask]]:
    """Consecutive runs of ``tasks`` (already in key order) of at most ``capacity`` bytes."""
    runs: list[list[FileScanTask]] = []
    used = 0
    for t in tasks:
        size = t.file.file_size_in_bytes
        if not runs or (used + size > capacity and runs[-1]):
            runs.append([])
            used = 0
        runs[-1].append(t)
        used += size
    return runs


def _lower(task: FileScanTask, column: str) -> Any:
    schema = task.schema
    try:
        f = schema.find_field(column)
    except Exception:
        return None
    raw = (task.file.lower_bounds or {}).get(f.field_id)
    if raw is None or not isinstance(f.field_type, PrimitiveType):
        return None
    try:
        return from_bytes(raw, f.field_type)
    except Exception:
        return None


def _range_order(tasks: Sequence[FileScanTask], opts: RewriteOptions) -> list[FileScanTask]:
    """A partition's files by the lower bounds of the sort (or z-order) columns, files
    without bounds last: consecutive runs of this order cover narrow ranges."""
    if opts.strategy == "sort":
        first = opts.sort_keys[0]

        def sort_key(t: FileScanTask) -> tuple[bool, Any]:
            v = _lower(t, first.column)
            return (v is None, v if v is not None else 0)

        try:
            return sorted(tasks, key=sort_key, reverse=False)
        except TypeError:
            return list(tasks)
    lowers = {c: [_lower(t, c) for t in tasks] for c in opts.zorder_columns}
    try:
        table = pa.table({c: pa.array(v) for c, v in lowers.items()})
        keys = zorder_keys(table, opts.zorder_columns, opts.var_length_contribution).to_pylist()
    except (pa.ArrowException, ValidationError):
        return list(tasks)
    order = sorted(range(len(tasks)), key=lambda i: keys[i])
    return [tasks[i] for i in order]


def plan_groups(tasks: Sequence[FileScanTask], opts: RewriteOptions) -> list[FileGroup]:
    """The file groups worth rewriting, per partition, in a stable order."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[FileScanTask]] = {}
    for t in tasks:
        if _selected(t, opts):
            by_partition.setdefault((t.file.spec_id, tuple(t.file.partition)), []).append(t)
    out: list[FileGroup] = []
    for key, members in by_partition.items():
        if opts.strategy == "binpack":
            groups = bin_pack(members, _size, opts.max_group_size)
        else:
            groups = _runs(_range_order(members, opts), opts.max_group_size)
        for g in groups:
            if _worth(g, opts):
                out.append(FileGroup(len(out), key, tuple(g)))
    return out


# -- ordering a group's rows -----------------------------------------------------------------


def _sorted(rows: pa.Table, keys: Sequence[SortKey]) -> pa.Table:
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    sort_keys: list[tuple[str, str, str]] = []
    for i, k in enumerate(keys):
        values = rows.column(k.column) if k.column in rows.column_names else None
        if values is None:
            raise ValidationError(f"cannot sort by {k.column!r}: not a top-level column of the rows")
        if k.transform is not None and k.source_type is not None:
            values = k.transform.apply_arrow(values, k.source_type)
        name = f"k{i}"
        columns[name] = values
        order = "descending" if k.descending else "ascending"
        sort_keys.append((name, order, "at_start" if k.nulls_first else "at_end"))
    order = pc.sort_indices(pa.table(columns), sort_keys=sort_keys)
    return rows.take(order)


def order_rows(rows: pa.Table, opts: RewriteOptions) -> pa.Table:
    """A group's rows in the strategy's order (bin-pack keeps them as read)."""
    if opts.strategy == "sort" and rows.num_rows:
        return _sorted(rows, opts.sort_keys)
    if opts.strategy == "zorder" and rows.num_rows:
        return sort_by_zorder(rows, opts.zorder_columns, opts.var_length_contribution)
    return rows
