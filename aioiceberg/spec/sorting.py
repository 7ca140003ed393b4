"""Sort orders: how writers are asked to order rows in data files."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from aioiceberg.spec.transforms import Transform

__all__ = ["UNSORTED", "NullOrder", "SortDirection", "SortField", "SortOrder"]


class SortDirection(StrEnum):
    ASC = "asc"
    DESC = "desc"


class NullOrder(StrEnum):
    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"


@dataclass(frozen=True, slots=True)
class SortField:
    source_ids: tuple[int, ...]
    transform: Transform
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder = NullOrder.NULLS_FIRST

    @property
    def source_id(self) -> int:
        return self.source_ids[0]


@dataclass(frozen=True, slots=True)
class SortOrder:
    order_id: int = 0
    fields: tuple[SortField, ...] = field(default=())

    @property
    def is_unsorted(self) -> bool:
        return not self.fields


UNSORTED = SortOrder(0, ())
