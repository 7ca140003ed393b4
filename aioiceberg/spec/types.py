"""Iceberg data types (v1-v3).

Primitive types are immutable value objects compared by value; nested types carry
field ids. ``parse_primitive`` reads the type strings used in JSON schemas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aioiceberg.errors import ValidationError

__all__ = [
    "BinaryType",
    "BooleanType",
    "DateType",
    "DecimalType",
    "DoubleType",
    "FixedType",
    "FloatType",
    "IcebergType",
    "IntegerType",
    "ListType",
    "LongType",
    "MapType",
    "NestedField",
    "NestedType",
    "PrimitiveType",
    "StringType",
    "StructType",
    "TimeType",
    "TimestampNanoType",
    "TimestampType",
    "TimestamptzNanoType",
    "TimestamptzType",
    "UUIDType",
    "UnknownType",
    "VariantType",
    "parse_primitive",
]


class IcebergType:
    """Base of every Iceberg type."""

    @property
    def is_primitive(self) -> bool:
        return isinstance(self, PrimitiveType)

    @property
    def is_nested(self) -> bool:
        return isinstance(self, NestedType)


class PrimitiveType(IcebergType):
    """A type without children; ``str()`` gives its JSON/spec name."""

    name: ClassVar[str] = ""
    min_format_version: ClassVar[int] = 1

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class BooleanType(PrimitiveType):
    name = "boolean"


class IntegerType(PrimitiveType):
    name = "int"
    min: ClassVar[int] = -(2**31)
    max: ClassVar[int] = 2**31 - 1


class LongType(PrimitiveType):
    name = "long"
    min: ClassVar[int] = -(2**63)
    max: ClassVar[int] = 2**63 - 1


class FloatType(PrimitiveType):
    name = "float"


class DoubleType(PrimitiveType):
    name = "double"


class DateType(PrimitiveType):
    name = "date"


class TimeType(PrimitiveType):
    name = "time"


class TimestampType(PrimitiveType):
    name = "timestamp"


class TimestamptzType(PrimitiveType):
    name = "timestamptz"


class TimestampNanoType(PrimitiveType):
    name = "timestamp_ns"
    min_format_version = 3


class TimestamptzNanoType(PrimitiveType):
    name = "timestamptz_ns"
    min_format_version = 3


class StringType(PrimitiveType):
    name = "string"


class UUIDType(PrimitiveType):
    name = "uuid"


class BinaryType(PrimitiveType):
    name = "binary"


class UnknownType(PrimitiveType):
    """v3 type of a column whose values are all null and whose type is not known yet."""

    name = "unknown"
    min_format_version = 3


class VariantType(PrimitiveType):
    """v3 semi-structured value: a (metadata, value) pair of binaries in the Variant encoding.

    The spec calls it neither primitive nor nested; it is a leaf here because, like a
    primitive, it has no child field ids and serializes as a bare name in schema JSON.
    Files hold it as a group of ``metadata`` and ``value`` binaries (maybe shredded).
    """

    name = "variant"
    min_format_version = 3


class DecimalType(PrimitiveType):
    name = "decimal"
    __slots__ = ("precision", "scale")

    def __init__(self, precision: int, scale: int) -> None:
        if not 1 <= precision <= 38:
            raise ValidationError(f"decimal precision must be 1..38, got {precision}")
        self.precision = precision
        self.scale = scale

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DecimalType) and other.precision == self.precision and other.scale == self.scale
        )

    def __hash__(self) -> int:
        return hash(("decimal", self.precision, self.scale))


class FixedType(PrimitiveType):
    name = "fixed"
    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        if length < 0:
            raise ValidationError(f"fixed length must be >= 0, got {length}")
        self.length = length

    def __str__(self) -> str:
        return f"fixed[{self.length}]"

    def __repr__(self) -> str:
        return f"FixedType({self.length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedType) and other.length == self.length

    def __hash__(self) -> int:
        return hash(("fixed", self.length))


_SIMPLE: dict[str, PrimitiveType] = {
    t.name: t()
    for t in (
        BooleanType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DateType,
        TimeType,
        TimestampType,
        TimestamptzType,
        TimestampNanoType,
        TimestamptzNanoType,
        StringType,
        UUIDType,
        BinaryType,
        UnknownType,
        VariantType,
    )
}
_DECIMAL = re.compile(r"decimal\s*\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_FIXED = re.compile(r"fixed\s*\[\s*(\d+)\s*\]")


def parse_primitive(text: str) -> PrimitiveType:
    """Parse a primitive type name such as ``long``, ``decimal(9, 2)`` or ``fixed[16]``."""
    name = text.strip().lower()
    simple = _SIMPLE.get(name)
    if simple is not None:
        return simple
    if m := _DECIMAL.fullmatch(name):
        return DecimalType(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.fullmatch(name):
        return FixedType(int(m.group(1)))
    raise ValidationError(f"unknown primitive type {text!r}")


class NestedType(IcebergType):
    """A type with children (struct, list, map)."""

    @property
    def fields(self) -> tuple[NestedField, ...]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class NestedField:
    """A named, id-carrying field of a struct (and, internally, list elements and map keys/values)."""

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None

    @property
    def optional(self) -> bool:
        return not self.required

    def __str__(self) -> str:
        req = "required" if self.required else "optional"
        doc = f" ({self.doc})" if self.doc else ""
        return f"{self.field_id}: {self.name}: {req} {self.field_type}{doc}"


@dataclass(frozen=True, slots=True, init=False)
class StructType(NestedType):
    field_tuple: tuple[NestedField, ...] = field(default=())

    def __init__(self, *fields: NestedField) -> None:
        object.__setattr__(self, "field_tuple", tuple(fields))

    @property
    def fields(self) -> tuple[NestedField, ...]:
        return self.field_tuple

    def field_by_id(self, field_id: int) -> NestedField | None:
        for f in self.field_tuple:
            if f.field_id == field_id:
                return f
        return None

    def field_by_name(self, name: str, case_sensitive: bool = True) -> NestedField | None:
        if case_sensitive:
            return next((f for f in self.field_tuple if f.name == name), None)
        low = name.lower()
        return next((f for f in self.field_tuple if f.name.lower() == low), None)

    def __str__(self) -> str:
        return "struct<" + ", ".join(str(f) for f in self.field_tuple) + ">"


@dataclass(frozen=True, slots=True)
class ListType(NestedType):
    element_id: int
    element_type: IcebergType
    element_required: bool = True

    @property
    def element_field(self) -> NestedField:
        return NestedField(self.element_id, "element", self.element_type, self.element_required)

    @property
    def fields(self) -> tuple[NestedField, ...]:
        return (self.element_field,)

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@dataclass(frozen=True, slots=True)
class MapType(NestedType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = True

    @property
    def key_field(self) -> NestedField:
        return NestedField(self.key_id, "key", self.key_type, True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(self.value_id, "value", self.value_type, self.value_required)

    @property
    def fields(self) -> tuple[NestedField, ...]:
        return (self.key_field, self.value_field)

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"
