"""Sort-order replacement: the order writers are asked to use from now on.

A sort order is a whole new value, not an edit of the old one (Java's
``replaceSortOrder``): ``asc``/``desc`` calls list its fields in priority order, an empty
builder makes the table unsorted. An identical existing order is reused by id.
"""

from __future__ import annotations

from typing import Self

from aioiceberg.commit.evolution import ChangeSink, PendingUpdate
from aioiceberg.commit.requirements import AssertDefaultSortOrderId, TableRequirement
from aioiceberg.commit.updates import LAST_ADDED, AddSortOrder, SetDefaultSortOrder, TableUpdate
from aioiceberg.errors import ValidationError
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from aioiceberg.spec.transforms import Transform, parse_transform

__all__ = ["UpdateSortOrder"]


class UpdateSortOrder(PendingUpdate):
    """Builds the table's new default sort order; ``async with`` commits it."""

    def __init__(
        self, base: TableMetadata, *, case_sensitive: bool = True, sink: ChangeSink | None = None
    ) -> None:
        super().__init__(base, sink)
        self._case_sensitive = case_sensitive
        self._schema = base.schema()
        self._fields: list[SortField] = []

    def _add(
        self, column: str, transform: str | Transform, direction: SortDirection, null_order: NullOrder
    ) -> Self:
        fid = self._schema.find_field_id(column, self._case_sensitive)
        if fid is None:
            raise ValidationError(f"cannot sort by {column!r}: no such column")
        source = self._schema.find_field(fid)
        t = parse_transform(transform) if isinstance(transform, str) else transform
        if t.is_unknown:
            raise ValidationError(f"cannot sort by {column!r}: unknown transform {transform!r}")
        if not t.can_transform(source.field_type):
            raise ValidationError(f"cannot sort by {t}({column}): {t} cannot transform {source.field_type}")
        if any(f.source_ids == (fid,) and f.transform == t for f in self._fields):
            raise ValidationError(f"cannot sort by {t}({column}) twice")
        self._fields.append(SortField((fid,), t, direction, NullOrder(null_order)))
        return self

    def asc(
        self,
        source_column_name: str,
        transform: str | Transform = "identity",
        null_order: NullOrder = NullOrder.NULLS_FIRST,
    ) -> Self:
        """Sort ascending; nulls first by default, as Java and SQL engines do."""
        return self._add(source_column_name, transform, SortDirection.ASC, null_order)

    def desc(
        self,
        source_column_name: str,
        transform: str | Transform = "identity",
        null_order: NullOrder = NullOrder.NULLS_LAST,
    ) -> Self:
        """Sort descending; nulls last by default, as Java and SQL engines do."""
        return self._add(source_column_name, transform, SortDirection.DESC, null_order)

    def apply(self) -> SortOrder:
        """The new order: unsorted when empty, else the id of an identical order or the next id."""
        if not self._fields:
            return UNSORTED
        fields = tuple(self._fields)
        for existing in self._base.sort_orders:
            if existing.fields == fields:
                return existing
        return SortOrder(max((o.order_id for o in self._base.sort_orders), default=0) + 1, fields)

    def updates_and_requirements(self) -> tuple[list[TableUpdate], list[TableRequirement]]:
        order = self.apply()
        if order.order_id == self._base.default_sort_order_id:
            return [], []
        updates: list[TableUpdate]
        if order.is_unsorted or self._base.sort_order_by_id(order.order_id) is not None:
            updates = [SetDefaultSortOrder(order.order_id)]
        else:
            updates = [AddSortOrder(order), SetDefaultSortOrder(LAST_ADDED)]
        return updates, [AssertDefaultSortOrderId(self._base.default_sort_order_id)]
