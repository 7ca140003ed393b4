"""A new table's first metadata, as every catalog builds it before placing the table.

Lower than the catalogs that use it (the warehouse in ``catalog.py``, the pointer
catalogs, REST), so none of them imports another to create a table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from aioiceberg.errors import ValidationError
from aioiceberg.spec.arrow import arrow_to_schema_assign_ids
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import new_table_metadata
from aioiceberg.spec.partitioning import (
    PARTITION_DATA_ID_START,
    PartitionField,
    PartitionSpec,
    default_partition_name,
)
from aioiceberg.spec.properties import check_property_values
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.sorting import SortOrder
from aioiceberg.spec.transforms import UnknownTransform, parse_transform

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FORMAT_VERSION_PROPERTY", "first_metadata", "parse_partition_by", "to_schema"]

_TRANSFORM = re.compile(r"^\s*(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([^()]+?)\s*\)\s*(?:as\s+(\w+))?\s*$", re.I)
_SIMPLE_NAME = re.compile(r"^\s*([^()\s]+)\s*$")


def parse_partition_by(items: Sequence[str] | PartitionSpec | None, schema: Schema) -> PartitionSpec:
    """``["day(ts)", "bucket(16, id)", "region"]`` -> a spec against ``schema``'s ids."""
    if items is None:
        return PartitionSpec(0, ())
    if isinstance(items, PartitionSpec):
        return items
    fields: list[PartitionField] = []
    for i, text in enumerate(items):
        m = _TRANSFORM.match(text)
        if m is not None:
            name, arg, column, alias = m.group(1).lower(), m.group(2), m.group(3), m.group(4)
            transform = parse_transform(f"{name}[{arg}]" if arg is not None else name)
        elif (s := _SIMPLE_NAME.match(text)) is not None:
            column, alias, transform = s.group(1), None, parse_transform("identity")
        else:
            raise ValidationError(f"cannot parse partition field {text!r}")
        if isinstance(transform, UnknownTransform):
            raise ValidationError(f"unknown transform in partition field {text!r}")
        source = schema.find_field(column)
        fields.append(
            PartitionField(
                (source.field_id,),
                PARTITION_DATA_ID_START + i,
                transform,
                alias or default_partition_name(transform, column),
            )
        )
    return PartitionSpec(0, tuple(fields))


def to_schema(schema: pa.Schema | Schema) -> Schema:
    if isinstance(schema, Schema):
        return schema

    return arrow_to_schema_assign_ids(schema)


def first_metadata(
    schema: pa.Schema | Schema,
    partition_by: Sequence[str] | PartitionSpec | None,
    properties: Mapping[str, str] | None,
    format_version: int,
    sort_order: SortOrder,
) -> Callable[[str], TableMetadata]:
    """A new table's first metadata: checked now (schema, spec, property values), placed once
    the catalog has chosen its location (a service may have to reserve it first)."""
    iceberg_schema = to_schema(schema)
    spec = parse_partition_by(partition_by, iceberg_schema)
    check_property_values(properties or {})
    props = dict(properties or {})
    format_version = _requested_format_version(props, format_version)

    def place(location: str) -> TableMetadata:
        return new_table_metadata(iceberg_schema, spec, sort_order, location, props, format_version)

    return place


FORMAT_VERSION_PROPERTY = "format-version"


def _requested_format_version(props: dict[str, str], format_version: int) -> int:
    """The ``format-version`` table property picks a new table's version, as in PyIceberg and
    Java; it is reserved, so it is taken out of the stored properties."""
    raw = props.pop(FORMAT_VERSION_PROPERTY, None)
    if raw is None:
        return format_version
    try:
        asked = int(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"table property 'format-version' must be 1, 2 or 3, not {raw!r}") from None
    if format_version not in (2, asked):  # 2 is the argument's default
        raise ValidationError(
            f"format_version={format_version} and table property 'format-version'={raw!r} disagree: give one"
        )
    return asked
