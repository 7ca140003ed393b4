"""Partition transforms: identity, bucket, truncate, year/month/day/hour, void, and unknown ones.

Transforms are immutable values (equal by value, hashable) that know their source and
result types, apply to single values (``apply``) and to Arrow arrays for writers
(``apply_arrow``), and render partition values for directory names (``to_human_string``,
matching PyIceberg). Transform strings this build does not know (including v3 multi-argument
transforms) parse to ``UnknownTransform``: kept and written back verbatim so tables stay
readable, but never applied.
"""

from __future__ import annotations

import base64
import math
import re
import struct
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa  # pyarrow.compute is imported where used: metadata-only work never loads it
import pyarrow.compute as pc

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from aioiceberg.spec.values import (
    MICROS_PER_DAY,
    MICROS_PER_HOUR,
    NANOS_PER_DAY,
    NANOS_PER_HOUR,
    civil_from_days,
    decimal_to_unscaled,
    format_date,
    format_time,
    format_timestamp,
    min_bytes_big_endian,
    unscaled_to_decimal,
)

__all__ = [
    "BucketTransform",
    "DayTransform",
    "HourTransform",
    "IdentityTransform",
    "MonthTransform",
    "TimeTransform",
    "Transform",
    "TruncateTransform",
    "UnknownTransform",
    "VoidTransform",
    "YearTransform",
    "bucket_hash",
    "parse_transform",
]

_INT_MAX = IntegerType.max
_LONG = struct.Struct("<q")
_DOUBLE = struct.Struct("<d")
_CANONICAL_NAN = 0x7FF8000000000000

_DATE_TYPES = (DateType,)
_MICRO_TS = (TimestampType, TimestamptzType)
_NANO_TS = (TimestampNanoType, TimestamptzNanoType)
_TS_TYPES = _MICRO_TS + _NANO_TS
_LONG_HASHED = (IntegerType, LongType, DateType, TimeType, TimestampType, TimestamptzType)
_BUCKET_SOURCES = (
    IntegerType,
    LongType,
    DecimalType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    TimestampNanoType,
    TimestamptzNanoType,
    StringType,
    UUIDType,
    FixedType,
    BinaryType,
)
_TRUNCATE_SOURCES = (IntegerType, LongType, DecimalType, StringType, BinaryType)


def _type_name(source: IcebergType) -> str:
    return str(source)


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- hashing (Appendix B)


def _hash_bytes_of(value: Any, source: IcebergType) -> bytes:
    """The bytes Appendix B hashes for ``value``; also the non-bucketable boolean/float/double rows."""
    if isinstance(source, _LONG_HASHED):
        if not _is_int(value):
            raise ValidationError(f"{source} value must be an int, got {type(value).__name__}")
        return _LONG.pack(value)
    if isinstance(source, _NANO_TS):
        if not _is_int(value):
            raise ValidationError(f"{source} value must be an int, got {type(value).__name__}")
        # Nanosecond timestamps hash as their (floored) micros, so ns and us columns bucket alike.
        return _LONG.pack(value // 1000)
    if isinstance(source, DecimalType):
        return min_bytes_big_endian(decimal_to_unscaled(value, source.scale))
    if isinstance(source, StringType):
        if not isinstance(value, str):
            raise ValidationError(f"string value must be a str, got {type(value).__name__}")
        return value.encode("utf-8")
    if isinstance(source, UUIDType):
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, bytes) and len(value) == 16:  # Arrow's raw 16-byte form
            return value
        raise ValidationError(f"uuid value must be a uuid.UUID, got {type(value).__name__}")
    if isinstance(source, (FixedType, BinaryType)):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ValidationError(f"{source} value must be bytes, got {type(value).__name__}")
        return bytes(value)
    if isinstance(source, BooleanType):
        return _LONG.pack(1 if value else 0)
    if isinstance(source, (FloatType, DoubleType)):
        f = float(value)
        bits = _CANONICAL_NAN if math.isnan(f) else _LONG.unpack(_DOUBLE.pack(f))[0]
        return _LONG.pack(bits)
    raise ValidationError(f"cannot hash a {source} value")


def bucket_hash(value: Any, source: IcebergType) -> int:
    """Murmur3 x86 32-bit (seed 0) hash of a value per Appendix B, as a signed 32-bit int."""
    return int(mmh3.hash(_hash_bytes_of(value, source), 0, True))


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: Any, r: int) -> Any:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _murmur3_longs(values: Any) -> Any:
    """Vectorised murmur3_x86_32 of int64 values as 8-byte little-endian keys (seed 0)."""
    u = values.astype(np.int64).view(np.uint64)
    h = np.zeros(len(u), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for block in ((u & np.uint64(0xFFFFFFFF)).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)):
            k = _rotl(block * _C1, 15) * _C2
            h = _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h


# --------------------------------------------------------------------------- Arrow helpers


def _null_mask(arr: Any) -> Any:
    return arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None


def _with_mask(values: Any, mask: Any, type_: Any) -> Any:
    return pa.array(values, type=type_, mask=mask)


_UNIT_SCALE = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _arrow_ints(arr: Any, source: IcebergType) -> Any:
    """The Iceberg int form (days / micros / nanos / plain ints) of an Arrow array, as int64 numpy."""
    t = arr.type
    raw: Any
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date64(t):
        width = pa.int64() if t.bit_width == 64 else pa.int32()
        raw = pc.fill_null(arr, pa.scalar(0, t)).view(width).to_numpy().astype(np.int64)
        if pa.types.is_date64(t):
            return raw // 86_400_000
        have = _UNIT_SCALE[t.unit]
        want = 1_000_000_000 if isinstance(source, _NANO_TS) else 1_000_000
        return raw * (want // have) if want >= have else raw // (have // want)
    if pa.types.is_date32(t):
        return pc.fill_null(arr, pa.scalar(0, t)).view(pa.int32()).to_numpy().astype(np.int64)
    if pa.types.is_integer(t):
        return pc.fill_null(arr, 0).to_numpy().astype(np.int64)
    raise ValidationError(f"cannot read Arrow {t} as {source}")


def _per_value(arr: Any, fn: Any, type_: Any) -> Any:
    return pa.array([None if v is None else fn(v) for v in arr.to_pylist()], type=type_)


def _civil_numpy(days: Any) -> tuple[Any, Any]:
    """Vectorised civil_from_days: (year, month) arrays for int64 day counts."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year, month


# --------------------------------------------------------------------------- the transforms


class Transform(ABC):
    """A partition (or sort) transform; immutable and compared by value."""

    __slots__ = ()

    @abstractmethod
    def __str__(self) -> str: ...

    @abstractmethod
    def can_transform(self, source: IcebergType) -> bool:
        """Whether this transform accepts values of ``source``."""

    @abstractmethod
    def result_type(self, source: IcebergType) -> IcebergType:
        """Type of the partition values this transform produces from ``source``."""

    @abstractmethod
    def _apply(self, value: Any, source: IcebergType) -> Any: ...

    def apply(self, value: Any, source: IcebergType) -> Any:
        """Transform one value (project value convention); ``None`` maps to ``None``."""
        self._check(source)
        if value is None:
            return None
        return self._apply(value, source)

    def apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        """Transform a whole ``pyarrow.Array`` (or ``ChunkedArray``); nulls stay null."""
        self._check(source)
        if isinstance(arr, pa.ChunkedArray):
            chunks = [self._apply_arrow(c, source) for c in arr.chunks]
            return pa.chunked_array(chunks, type=self._arrow_result_type(arr.type, source))
        return self._apply_arrow(arr, source)

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        return _per_value(arr, lambda v: self._apply(v, source), self._arrow_result_type(arr.type, source))

    def _arrow_result_type(self, arrow_type: Any, source: IcebergType) -> Any:
        return pa.int32()

    def _check(self, source: IcebergType) -> None:
        if not self.can_transform(source):
            raise ValidationError(f"transform {self} cannot be applied to {_type_name(source)}")

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        """The partition value as written in data-file paths (PyIceberg's rendering)."""
        return "null" if value is None else str(value)

    @property
    def preserves_order(self) -> bool:
        """True when ordering by the result is consistent with ordering by the source."""
        return False

    def satisfies_order_of(self, other: Transform, source: IcebergType | None = None) -> bool:
        """Whether data ordered by this transform is also ordered by ``other``.

        Some answers depend on the source type (truncate widths), so pass ``source`` when
        known; without it only the type-independent cases answer True.
        """
        return self == other

    @property
    def is_identity(self) -> bool:
        return False

    @property
    def is_void(self) -> bool:
        return False

    @property
    def is_unknown(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class IdentityTransform(Transform):
    def __str__(self) -> str:
        return "identity"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, PrimitiveType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, value: Any, source: IcebergType) -> Any:
        return value

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        return arr

    def _arrow_result_type(self, arrow_type: Any, source: IcebergType) -> Any:
        return arrow_type

    @property
    def preserves_order(self) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source: IcebergType | None = None) -> bool:
        return other.preserves_order

    @property
    def is_identity(self) -> bool:
        return True

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _base64(bytes(value))
        if _is_int(value):
            if isinstance(source, DateType):
                return format_date(value)
            if isinstance(source, TimeType):
                return format_time(value, trim_zero_fraction=True)
            if isinstance(source, _TS_TYPES):
                return format_timestamp(
                    value,
                    utc=isinstance(source, (TimestamptzType, TimestamptzNanoType)),
                    nanos=isinstance(source, _NANO_TS),
                    trim_zero_fraction=True,
                )
        return str(value)


@dataclass(frozen=True, slots=True)
class BucketTransform(Transform):
    num_buckets: int

    def __post_init__(self) -> None:
        if not _is_int(self.num_buckets) or not 0 < self.num_buckets <= _INT_MAX:
            raise ValidationError(f"number of buckets must be a positive int, got {self.num_buckets!r}")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _BUCKET_SOURCES)

    def result_type(self, source: IcebergType) -> IcebergType:
        return IntegerType()

    def _apply(self, value: Any, source: IcebergType) -> int:
        return (bucket_hash(value, source) & _INT_MAX) % self.num_buckets

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        t = arr.type
        if isinstance(source, _LONG_HASHED + _NANO_TS):
            ints = _arrow_ints(arr, source)
            if isinstance(source, _NANO_TS):
                ints = ints // 1000
            buckets = (_murmur3_longs(ints) & np.uint32(_INT_MAX)) % np.uint32(self.num_buckets)
            return _with_mask(buckets.astype(np.int32), _null_mask(arr), pa.int32())
        if isinstance(source, StringType) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            n = self.num_buckets
            return pa.array(
                [
                    None if s is None else (mmh3.hash(s.encode("utf-8"), 0, True) & _INT_MAX) % n
                    for s in arr.to_pylist()
                ],
                type=pa.int32(),
            )
        return super(BucketTransform, self)._apply_arrow(arr, source)

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class TruncateTransform(Transform):
    width: int

    def __post_init__(self) -> None:
        if not _is_int(self.width) or not 0 < self.width <= _INT_MAX:
            raise ValidationError(f"truncate width must be a positive int, got {self.width!r}")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _TRUNCATE_SOURCES)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, value: Any, source: IcebergType) -> Any:
        w = self.width
        if isinstance(source, (IntegerType, LongType)):
            if not _is_int(value):
                raise ValidationError(f"{source} value must be an int, got {type(value).__name__}")
            # Java computes in int/long arithmetic, so results below the minimum wrap around.
            bits = 32 if isinstance(source, IntegerType) else 64
            out = value - value % w
            return (out + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
        if isinstance(source, DecimalType):
            unscaled = decimal_to_unscaled(value, source.scale)
            return unscaled_to_decimal(unscaled - unscaled % w, source.scale)
        if isinstance(source, StringType):
            if not isinstance(value, str):
                raise ValidationError(f"string value must be a str, got {type(value).__name__}")
            return value[:w]  # Python str indexes code points, as the spec asks
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise ValidationError(f"binary value must be bytes, got {type(value).__name__}")
        return bytes(value[:w])

    def _arrow_result_type(self, arrow_type: Any, source: IcebergType) -> Any:
        return arrow_type

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        t = arr.type
        if isinstance(source, (IntegerType, LongType)) and pa.types.is_integer(t):
            dtype = np.int32 if t.bit_width <= 32 else np.int64
            values = pc.fill_null(arr, 0).to_numpy().astype(dtype)
            with np.errstate(over="ignore"):
                out = values - np.mod(values, dtype(self.width))
            return _with_mask(out, _null_mask(arr), t)
        if isinstance(source, StringType) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            return pc.utf8_slice_codeunits(arr, 0, self.width)  # slices by code point
        if isinstance(source, BinaryType) and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            return pc.binary_slice(arr, 0, self.width)
        try:
            return super(TruncateTransform, self)._apply_arrow(arr, source)
        except pa.ArrowInvalid:
            if not pa.types.is_decimal(t):
                raise
            # Truncating toward -inf can add a digit (-9.95 -> -10.00 at width 100): widen.
            return _per_value(arr, lambda v: self._apply(v, source), pa.decimal256(t.precision + 1, t.scale))

    @property
    def preserves_order(self) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source: IcebergType | None = None) -> bool:
        if self == other:
            return True
        if not isinstance(other, TruncateTransform):
            return False
        if isinstance(source, (StringType, BinaryType)):
            return self.width >= other.width  # a longer prefix refines a shorter one
        if isinstance(source, (IntegerType, LongType, DecimalType)):
            return other.width % self.width == 0  # finer steps that nest in the coarser ones
        return False

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        if value is None:
            return "null"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _base64(bytes(value))
        return str(value)


class TimeTransform(Transform):
    """Common base of year/month/day/hour: floor-based, so pre-1970 values are exact."""

    __slots__ = ()
    granularity: int = 0  # hour < day < month < year

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _DATE_TYPES + _TS_TYPES)

    def result_type(self, source: IcebergType) -> IcebergType:
        return IntegerType()

    @property
    def preserves_order(self) -> bool:
        return True

    def satisfies_order_of(self, other: Transform, source: IcebergType | None = None) -> bool:
        if isinstance(other, TimeTransform):
            return self.granularity <= other.granularity
        return self == other

    @staticmethod
    def _days(value: Any, source: IcebergType) -> int:
        if not _is_int(value):
            raise ValidationError(f"{source} value must be an int, got {type(value).__name__}")
        days: int = (
            value
            if isinstance(source, DateType)
            else value // (NANOS_PER_DAY if isinstance(source, _NANO_TS) else MICROS_PER_DAY)
        )
        return days

    @staticmethod
    def _arrow_days(arr: Any, source: IcebergType) -> Any:
        ints = _arrow_ints(arr, source)
        if isinstance(source, DateType):
            return ints
        return ints // (NANOS_PER_DAY if isinstance(source, _NANO_TS) else MICROS_PER_DAY)

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        out = self._from_arrow_ints(arr, source)
        return _with_mask(out.astype(np.int32), _null_mask(arr), pa.int32())

    @abstractmethod
    def _from_arrow_ints(self, arr: Any, source: IcebergType) -> Any: ...


@dataclass(frozen=True, slots=True)
class YearTransform(TimeTransform):
    granularity = 3

    def __str__(self) -> str:
        return "year"

    def _apply(self, value: Any, source: IcebergType) -> int:
        return civil_from_days(self._days(value, source))[0] - 1970

    def _from_arrow_ints(self, arr: Any, source: IcebergType) -> Any:
        return _civil_numpy(self._arrow_days(arr, source))[0] - 1970

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null" if value is None else f"{1970 + value:04d}"


@dataclass(frozen=True, slots=True)
class MonthTransform(TimeTransform):
    granularity = 2

    def __str__(self) -> str:
        return "month"

    def _apply(self, value: Any, source: IcebergType) -> int:
        y, m, _ = civil_from_days(self._days(value, source))
        return (y - 1970) * 12 + m - 1

    def _from_arrow_ints(self, arr: Any, source: IcebergType) -> Any:
        y, m = _civil_numpy(self._arrow_days(arr, source))
        return (y - 1970) * 12 + m - 1

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null" if value is None else f"{1970 + value // 12:04d}-{value % 12 + 1:02d}"


@dataclass(frozen=True, slots=True)
class DayTransform(TimeTransform):
    """Result type is ``date``; values are still int days from 1970-01-01."""

    granularity = 1

    def __str__(self) -> str:
        return "day"

    def result_type(self, source: IcebergType) -> IcebergType:
        return DateType()

    def _apply(self, value: Any, source: IcebergType) -> int:
        return self._days(value, source)

    def _from_arrow_ints(self, arr: Any, source: IcebergType) -> Any:
        return self._arrow_days(arr, source)

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null" if value is None else format_date(value)


@dataclass(frozen=True, slots=True)
class HourTransform(TimeTransform):
    granularity = 0

    def __str__(self) -> str:
        return "hour"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _TS_TYPES)

    def _apply(self, value: Any, source: IcebergType) -> int:
        if not _is_int(value):
            raise ValidationError(f"{source} value must be an int, got {type(value).__name__}")
        hours: int = value // (NANOS_PER_HOUR if isinstance(source, _NANO_TS) else MICROS_PER_HOUR)
        return hours

    def _from_arrow_ints(self, arr: Any, source: IcebergType) -> Any:
        per_hour = NANOS_PER_HOUR if isinstance(source, _NANO_TS) else MICROS_PER_HOUR
        return _arrow_ints(arr, source) // per_hour

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null" if value is None else f"{format_date(value // 24)}-{value % 24:02d}"


@dataclass(frozen=True, slots=True)
class VoidTransform(Transform):
    """Always null: what a dropped partition field becomes in v1 tables."""

    def __str__(self) -> str:
        return "void"

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def _apply(self, value: Any, source: IcebergType) -> None:
        return None

    def _apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        return pa.nulls(len(arr), type=arr.type)

    def _arrow_result_type(self, arrow_type: Any, source: IcebergType) -> Any:
        return arrow_type

    def to_human_string(self, value: Any, source: IcebergType) -> str:
        return "null"

    @property
    def is_void(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class UnknownTransform(Transform):
    """A transform this build does not know; v3 requires reading such tables, ignoring it.

    ``can_transform`` is True so specs holding it still validate on read; writers must check
    ``is_unknown`` and refuse, since ``apply`` raises UnsupportedError. The result type is
    ``string``, as in Java and PyIceberg.
    """

    text: str

    def __str__(self) -> str:
        return self.text

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def result_type(self, source: IcebergType) -> IcebergType:
        return StringType()

    def apply(self, value: Any, source: IcebergType) -> Any:
        raise UnsupportedError(f"cannot apply unknown transform {self.text!r}")

    def apply_arrow(self, arr: Any, source: IcebergType) -> Any:
        raise UnsupportedError(f"cannot apply unknown transform {self.text!r}")

    def _apply(self, value: Any, source: IcebergType) -> Any:
        raise UnsupportedError(f"cannot apply unknown transform {self.text!r}")

    @property
    def is_unknown(self) -> bool:
        return True


_WITH_ARG = re.compile(r"(bucket|truncate)\s*\[\s*(\d+)\s*\]")
_SIMPLE: dict[str, Transform] = {
    "identity": IdentityTransform(),
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
    "void": VoidTransform(),
}


def parse_transform(text: str) -> Transform:
    """Parse a transform string (case-insensitive, whitespace tolerant); never raises.

    Anything unrecognised, including a zero or oversized bucket count or width, becomes an
    ``UnknownTransform`` holding the original text.
    """
    norm = text.strip().lower()
    simple = _SIMPLE.get(norm)
    if simple is not None:
        return simple
    m = _WITH_ARG.fullmatch(norm)
    if m is not None:
        n = int(m.group(2))
        if 0 < n <= _INT_MAX:
            return BucketTransform(n) if m.group(1) == "bucket" else TruncateTransform(n)
    return UnknownTransform(text)
