"""A scan's row filter bound once, with what it was bound against: the parts of a plan take it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aioiceberg.expressions.tree import Expression
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema

__all__ = ["BoundFilter"]


@dataclass(frozen=True, slots=True)
class BoundFilter:
    """``expr``: the filter as ``bind_row_filter`` binds it to ``schema`` (SQL's rule for NULLs
    included); ``specs``: the table's partition specs by id, which the manifest summaries and
    the residuals are read with."""

    schema: Schema
    specs: Mapping[int, PartitionSpec]
    expr: Expression
    case_sensitive: bool
