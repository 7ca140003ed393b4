"""Partition specs: how rows map to partition tuples.

A partition tuple is a plain Python ``tuple`` of values in spec-field order, each in
the project's value convention (see ``values``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus

from aioiceberg.errors import ValidationError
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import Transform
from aioiceberg.spec.types import NestedField, StructType, UnknownType

__all__ = ["PARTITION_DATA_ID_START", "UNPARTITIONED", "PartitionField", "PartitionSpec"]

PARTITION_DATA_ID_START = 1000


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One partition field; ``source_ids`` has several ids only for v3 multi-argument transforms."""

    source_ids: tuple[int, ...]
    field_id: int
    transform: Transform
    name: str

    @property
    def source_id(self) -> int:
        return self.source_ids[0]

    def __str__(self) -> str:
        return f"{self.field_id}: {self.name}: {self.transform}({', '.join(map(str, self.source_ids))})"


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    spec_id: int = 0
    fields: tuple[PartitionField, ...] = field(default=())

    @staticmethod
    def of(*fields: PartitionField, spec_id: int = 0) -> PartitionSpec:
        return PartitionSpec(spec_id, tuple(fields))

    @property
    def is_unpartitioned(self) -> bool:
        """True when no field partitions data (void and unknown transforms don't)."""
        return all(f.transform.is_void or f.transform.is_unknown for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        return max((f.field_id for f in self.fields), default=PARTITION_DATA_ID_START - 1)

    def fields_by_source_id(self, source_id: int) -> list[PartitionField]:
        return [f for f in self.fields if source_id in f.source_ids]

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Same fields in the same order with the same transforms and sources (names and ids may differ)."""
        if len(self.fields) != len(other.fields):
            return False
        return all(
            a.source_ids == b.source_ids and a.transform == b.transform and a.name == b.name
            for a, b in zip(self.fields, other.fields, strict=True)
        )

    def partition_type(self, schema: Schema) -> StructType:
        """The struct of partition values; optional fields, types from the transforms."""
        out: list[NestedField] = []
        for f in self.fields:
            source = schema.find_field(f.source_id) if f.source_id in schema.field_ids() else None
            if source is None or f.transform.is_unknown:
                result_type = UnknownType() if source is None else f.transform.result_type(source.field_type)
            else:
                result_type = f.transform.result_type(source.field_type)
            out.append(NestedField(f.field_id, f.name, result_type, required=False))
        return StructType(*out)

    def partition_path(self, values: Sequence[Any], schema: Schema) -> str:
        """The conventional directory for a partition tuple, e.g. ``ts_day=2024-05-01/id_bucket=3``.

        Parts are form-encoded (a space becomes ``+``) as Java's URLEncoder and PyIceberg write them.
        """
        if len(values) != len(self.fields):
            raise ValidationError(
                f"partition tuple has {len(values)} values, spec {self.spec_id} has {len(self.fields)} fields"
            )
        parts = []
        for f, value in zip(self.fields, values, strict=True):
            source_type = schema.find_type(f.source_id)
            human = f.transform.to_human_string(value, source_type)
            parts.append(f"{quote_plus(f.name, safe='')}={quote_plus(human, safe='')}")
        return "/".join(parts)

    def check_against(self, schema: Schema) -> None:
        """Every source exists and every transform accepts its source type (unknown ones are kept)."""
        names: set[str] = set()
        ids = schema.field_ids()
        for f in self.fields:
            if f.name in names:
                raise ValidationError(f"partition spec {self.spec_id} has two fields named {f.name!r}")
            names.add(f.name)
            for sid in f.source_ids:
                if sid not in ids:
                    raise ValidationError(
                        f"partition field {f.name!r} references missing source field id {sid}"
                    )
            if f.transform.is_unknown:
                continue
            source = schema.find_type(f.source_id)
            if not f.transform.can_transform(source):
                raise ValidationError(
                    f"partition field {f.name!r}: transform {f.transform} cannot apply to {source}"
                )

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"


UNPARTITIONED = PartitionSpec(0, ())


def default_partition_name(transform: Transform, source_name: str) -> str:
    """The field name Java and PyIceberg give a partition field when none is chosen."""
    text = str(transform)
    if text == "identity":
        return source_name
    if text.startswith("bucket["):
        return f"{source_name}_bucket"
    if text.startswith("truncate["):
        return f"{source_name}_trunc"
    if text == "void":
        return f"{source_name}_null"
    return f"{source_name}_{text}"


def fields_from_ids(
    items: Iterable[tuple[tuple[int, ...], Transform, str]], start: int
) -> list[PartitionField]:
    """Assign partition field ids from ``start`` in order."""
    return [PartitionField(src, start + i, t, n) for i, (src, t, n) in enumerate(items)]
