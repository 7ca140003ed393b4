"""Partition evolution: add, remove and rename partition fields of the default spec.

Follows Java's ``BaseUpdatePartitionSpec`` and PyIceberg's ``UpdateSpec``: new partition
field ids continue from last-partition-id; in v2+ re-adding a field that an older spec
had recycles its id (so old and new files agree on what the field is); in v1, where
specs must keep their fields' positions, a removed field becomes a ``void`` transform.
Data already written keeps its spec; only new writes use the evolved one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from aioiceberg.commit.evolution import ChangeSink, PendingUpdate
from aioiceberg.commit.requirements import (
    AssertDefaultSpecId,
    AssertLastAssignedPartitionId,
    TableRequirement,
)
from aioiceberg.commit.updates import LAST_ADDED, AddPartitionSpec, SetDefaultSpec, TableUpdate
from aioiceberg.errors import ValidationError
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.partitioning import PARTITION_DATA_ID_START, PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TimeTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
    parse_transform,
)

__all__ = ["UpdateSpec", "partition_field_name"]


def partition_field_name(transform: Transform, source_name: str) -> str:
    """The name Java's and PyIceberg's spec updates give a partition field when none is chosen."""
    if isinstance(transform, IdentityTransform):
        return source_name
    if isinstance(transform, BucketTransform):
        return f"{source_name}_bucket_{transform.num_buckets}"
    if isinstance(transform, TruncateTransform):
        return f"{source_name}_trunc_{transform.width}"
    if isinstance(transform, VoidTransform):
        return f"{source_name}_null"
    for cls, suffix in (
        (YearTransform, "year"),
        (MonthTransform, "month"),
        (DayTransform, "day"),
        (HourTransform, "hour"),
    ):
        if isinstance(transform, cls):
            return f"{source_name}_{suffix}"
    return f"{source_name}_{transform}"


def _check_name(name: str, pf_transform: Transform, source_id: int, schema: Schema, taken: set[str]) -> None:
    """A partition name may equal a column name only for identity/void on that same column."""
    if not name:
        raise ValidationError("a partition field needs a name")
    if name in taken:
        raise ValidationError(f"partition field name {name!r} is used twice in the spec")
    clash = schema.find_field_id(name)
    if clash is not None and not ((pf_transform.is_identity or pf_transform.is_void) and clash == source_id):
        raise ValidationError(
            f"cannot name partition field {name!r}: a column of that name exists and the field is not "
            "an identity of it"
        )
    taken.add(name)


@dataclass(frozen=True, slots=True)
class _Key:
    source_id: int
    transform: str


class UpdateSpec(PendingUpdate):
    """Collects partition-field changes against the default spec; ``async with`` commits them."""

    def __init__(
        self, base: TableMetadata, *, case_sensitive: bool = True, sink: ChangeSink | None = None
    ) -> None:
        super().__init__(base, sink)
        self._case_sensitive = case_sensitive
        self._schema = base.schema()
        self._spec = base.spec()
        self._last_partition_id = max(base.last_partition_id, PARTITION_DATA_ID_START - 1)
        self._by_name = {f.name: f for f in self._spec.fields}
        self._by_key = {_Key(f.source_id, str(f.transform)): f for f in self._spec.fields}
        self._adds: list[PartitionField] = []
        self._added_by_name: dict[str, PartitionField] = {}
        self._added_by_key: dict[_Key, PartitionField] = {}
        self._added_time_fields: dict[int, PartitionField] = {}
        self._deletes: set[int] = set()
        self._renames: dict[str, str] = {}

    def add_field(
        self,
        source_column_name: str,
        transform: str | Transform = "identity",
        partition_field_name: str | None = None,
    ) -> Self:
        """Partition new writes by ``transform(source_column_name)``."""
        fid = self._schema.find_field_id(source_column_name, self._case_sensitive)
        if fid is None:
            raise ValidationError(f"cannot partition by {source_column_name!r}: no such column")
        source = self._schema.find_field(fid)
        t = parse_transform(transform) if isinstance(transform, str) else transform
        if t.is_unknown:
            raise ValidationError(
                f"cannot partition by {source_column_name!r}: unknown transform {transform!r}"
            )
        if not t.can_transform(source.field_type):
            raise ValidationError(
                f"cannot partition by {t}({source_column_name}): {t} cannot transform {source.field_type}"
            )
        key = _Key(fid, str(t))
        existing = self._by_key.get(key)
        if existing is not None and existing.field_id not in self._deletes and existing.transform == t:
            raise ValidationError(
                f"cannot add partition field {t}({source_column_name}): the spec already has it as "
                f"{existing.name!r}"
            )
        if key in self._added_by_key:
            raise ValidationError(
                f"cannot add partition field {t}({source_column_name}) twice "
                f"(already added as {self._added_by_key[key].name!r})"
            )
        new_field = self._partition_field(fid, t, partition_field_name, source_column_name)
        if new_field.name in self._added_by_name:
            raise ValidationError(f"cannot add partition field {new_field.name!r} twice")
        if isinstance(t, TimeTransform):
            clash = self._added_time_fields.get(fid)
            if clash is not None:
                raise ValidationError(
                    f"cannot add time partition field {new_field.name!r}: it conflicts with {clash.name!r} "
                    "on the same column"
                )
            self._added_time_fields[fid] = new_field
        self._added_by_key[key] = new_field
        same_name = self._by_name.get(new_field.name)
        if same_name is not None and same_name.field_id not in self._deletes:
            if same_name.transform.is_void:
                # A v1 field removed earlier keeps its name; move it aside for the new field.
                self.rename_field(same_name.name, f"{same_name.name}_{same_name.field_id}")
            else:
                raise ValidationError(
                    f"cannot add partition field {new_field.name!r}: the spec already has that name"
                )
        self._added_by_name[new_field.name] = new_field
        self._adds.append(new_field)
        return self

    def add_identity(self, source_column_name: str) -> Self:
        return self.add_field(source_column_name, IdentityTransform())

    def remove_field(self, name: str) -> Self:
        """Stop partitioning new writes by this field (v1: it becomes ``void``)."""
        if name in self._added_by_name:
            raise ValidationError(f"cannot remove partition field {name!r}: it is added in this change")
        if name in self._renames:
            raise ValidationError(f"cannot remove partition field {name!r}: it is renamed in this change")
        f = self._by_name.get(name)
        if f is None:
            raise ValidationError(f"cannot remove partition field {name!r}: the spec has no such field")
        self._deletes.add(f.field_id)
        return self

    def rename_field(self, name: str, new_name: str) -> Self:
        existing = self._by_name.get(new_name)
        if existing is not None and existing.transform.is_void:
            return self.rename_field(name, f"{name}_{existing.field_id}")
        if name in self._added_by_name:
            raise ValidationError(f"cannot rename partition field {name!r}: it is added in this change")
        f = self._by_name.get(name)
        if f is None:
            raise ValidationError(f"cannot rename partition field {name!r}: the spec has no such field")
        if f.field_id in self._deletes:
            raise ValidationError(f"cannot rename partition field {name!r}: it is removed in this change")
        self._renames[name] = new_name
        return self

    def _partition_field(
        self, source_id: int, transform: Transform, name: str | None, source_name: str
    ) -> PartitionField:
        if self._base.format_version >= 2:
            for spec in self._base.partition_specs:
                for f in spec.fields:
                    if f.source_id == source_id and str(f.transform) == str(transform):
                        if name is None or f.name == name:
                            return PartitionField((source_id,), f.field_id, transform, f.name)
        self._last_partition_id += 1
        if name is None:
            name = partition_field_name(transform, self._schema.find_column_name(source_id) or source_name)
        return PartitionField((source_id,), self._last_partition_id, transform, name)

    def apply(self) -> PartitionSpec:
        """The evolved spec (id of an identical existing spec, else the next id)."""
        taken: set[str] = set()
        fields: list[PartitionField] = []
        for f in self._spec.fields:
            name = self._renames.get(f.name, f.name)
            if f.field_id not in self._deletes:
                transform = f.transform
            elif self._base.format_version == 1:
                transform = VoidTransform()
            else:
                continue
            _check_name(name, transform, f.source_id, self._schema, taken)
            fields.append(PartitionField(f.source_ids, f.field_id, transform, name))
        for f in self._adds:
            _check_name(f.name, f.transform, f.source_id, self._schema, taken)
            fields.append(f)
        spec = PartitionSpec(0, tuple(fields))
        new_id = max(s.spec_id for s in self._base.partition_specs) + 1
        for existing in self._base.partition_specs:
            if existing.fields == spec.fields:
                new_id = existing.spec_id
                break
        spec = PartitionSpec(new_id, tuple(fields))
        spec.check_against(self._schema)
        return spec

    def updates_and_requirements(self) -> tuple[list[TableUpdate], list[TableRequirement]]:
        spec = self.apply()
        if spec.spec_id == self._base.default_spec_id:
            return [], []
        updates: list[TableUpdate]
        if self._base.spec_by_id(spec.spec_id) is not None:
            updates = [SetDefaultSpec(spec.spec_id)]
        else:
            updates = [AddPartitionSpec(spec), SetDefaultSpec(LAST_ADDED)]
        requirements: list[TableRequirement] = [
            AssertLastAssignedPartitionId(self._base.last_partition_id),
            AssertDefaultSpecId(self._base.default_spec_id),
        ]
        return updates, requirements
