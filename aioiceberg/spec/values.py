"""Single values: binary (Appendix D) and JSON single-value serialization, ISO date/time helpers.

Values follow the project convention: dates are ``int`` days, times ``int`` micros from
midnight, timestamps ``int`` micros (``_ns`` types: nanos) from the epoch, decimals
``Decimal``, uuids ``uuid.UUID``, fixed/binary ``bytes``. The calendar arithmetic here is
pure integer (proleptic Gregorian), so values outside Python's ``datetime`` range (years
1..9999) still serialize, the same way Java's ``java.time`` renders them.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from aioiceberg.errors import InvalidMetadataError, ValidationError
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
    ListType,
    LongType,
    MapType,
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

__all__ = [
    "MICROS_PER_DAY",
    "MICROS_PER_HOUR",
    "NANOS_PER_DAY",
    "NANOS_PER_HOUR",
    "civil_from_days",
    "date_to_days",
    "days_from_civil",
    "days_to_date",
    "decimal_to_unscaled",
    "format_date",
    "format_time",
    "format_timestamp",
    "from_bytes",
    "from_json",
    "iso_to_value",
    "micros_to_time",
    "micros_to_timestamp",
    "min_bytes_big_endian",
    "parse_date",
    "parse_time",
    "parse_timestamp",
    "time_to_micros",
    "timestamp_to_micros",
    "to_bytes",
    "to_json",
    "unscaled_to_decimal",
]

MICROS_PER_SECOND = 1_000_000
MICROS_PER_HOUR = 3_600 * MICROS_PER_SECOND
MICROS_PER_DAY = 24 * MICROS_PER_HOUR
NANOS_PER_HOUR = 1_000 * MICROS_PER_HOUR
NANOS_PER_DAY = 1_000 * MICROS_PER_DAY

_INT_MIN, _INT_MAX = IntegerType.min, IntegerType.max
_LONG_MIN, _LONG_MAX = LongType.min, LongType.max

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


# --------------------------------------------------------------------------- calendar


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count from 1970-01-01; exact for any int (H. Hinnant's algorithm)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 of a proleptic Gregorian date (no range limit, unlike ``datetime``)."""
    y = year - (1 if month <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_to_date(days: int) -> _dt.date:
    """A ``datetime.date`` for a day count; ValidationError outside years 1..9999."""
    try:
        return _EPOCH_DATE + _dt.timedelta(days=days)
    except OverflowError as e:
        raise ValidationError(f"day {days} is outside the range of datetime.date") from e


def date_to_days(value: _dt.date) -> int:
    """Days from 1970-01-01 of a ``datetime.date`` (a ``datetime`` is rejected: use timestamp_to_micros)."""
    if isinstance(value, _dt.datetime):
        raise ValidationError(f"expected a date, got a datetime {value!r}")
    return (value - _EPOCH_DATE).days


def micros_to_timestamp(micros: int, *, utc: bool = False) -> _dt.datetime:
    """A ``datetime`` for epoch micros: naive, or UTC-aware when ``utc``."""
    try:
        return (_EPOCH_UTC if utc else _EPOCH_NAIVE) + _dt.timedelta(microseconds=micros)
    except OverflowError as e:
        raise ValidationError(f"timestamp {micros} is outside the range of datetime") from e


def timestamp_to_micros(value: _dt.datetime) -> int:
    """Epoch micros of a ``datetime``: aware values are taken as instants, naive ones as wall time."""
    delta = value - (_EPOCH_UTC if value.utcoffset() is not None else _EPOCH_NAIVE)
    return (delta.days * 86_400 + delta.seconds) * MICROS_PER_SECOND + delta.microseconds


def micros_to_time(micros: int) -> _dt.time:
    if not 0 <= micros < MICROS_PER_DAY:
        raise ValidationError(f"time {micros} is not within a day (0 <= micros < {MICROS_PER_DAY})")
    seconds, us = divmod(micros, MICROS_PER_SECOND)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return _dt.time(h, m, s, us)


def time_to_micros(value: _dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * MICROS_PER_SECOND + value.microsecond


# --------------------------------------------------------------------------- ISO text

_DATE_RE = r"(?P<year>[+-]?\d{4,})-(?P<month>\d{2})-(?P<day>\d{2})"
_TIME_RE = r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<frac>\d{1,9}))?)?"
_OFFSET_RE = r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)"
_DATE_FULL = re.compile(_DATE_RE)
_TIME_FULL = re.compile(_TIME_RE)
_TS_FULL = re.compile(_DATE_RE + r"(?:[Tt ]" + _TIME_RE + _OFFSET_RE + r"?)?")


def _format_year(year: int) -> str:
    # java.time's ISO form: 4 digits, a sign before years outside 0..9999.
    if 0 <= year <= 9999:
        return f"{year:04d}"
    return f"+{year}" if year > 0 else f"-{-year:04d}"


def format_date(days: int) -> str:
    """ISO-8601 date, e.g. ``2017-11-16``."""
    y, m, d = civil_from_days(days)
    return f"{_format_year(y)}-{m:02d}-{d:02d}"


def _format_clock(units_of_day: int, digits: int, trim_zero_fraction: bool) -> str:
    scale = 10**digits
    seconds, frac = divmod(units_of_day, scale)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    text = f"{h:02d}:{m:02d}:{s:02d}"
    if frac or not trim_zero_fraction:
        text += f".{frac:0{digits}d}"
    return text


def format_time(micros: int, *, trim_zero_fraction: bool = False) -> str:
    """ISO-8601 time with 6 fractional digits (``22:31:08.123456``), as the JSON form asks."""
    if not 0 <= micros < MICROS_PER_DAY:
        raise ValidationError(f"time {micros} is not within a day (0 <= micros < {MICROS_PER_DAY})")
    return _format_clock(micros, 6, trim_zero_fraction)


def format_timestamp(
    value: int, *, utc: bool = False, nanos: bool = False, trim_zero_fraction: bool = False
) -> str:
    """ISO-8601 timestamp with 6 (or, for ``nanos``, 9) fractional digits; ``+00:00`` when ``utc``.

    ``trim_zero_fraction`` drops an all-zero fraction, the way Python's ``isoformat``
    (and so PyIceberg's partition paths) render whole seconds.
    """
    per_day = NANOS_PER_DAY if nanos else MICROS_PER_DAY
    days, rem = divmod(value, per_day)
    text = f"{format_date(days)}T{_format_clock(rem, 9 if nanos else 6, trim_zero_fraction)}"
    return text + "+00:00" if utc else text


def _int_group(m: re.Match[str], name: str) -> int:
    g = m.group(name)
    return int(g) if g is not None else 0


def _date_parts(m: re.Match[str], text: str) -> int:
    year, month, day = int(m.group("year")), int(m.group("month")), int(m.group("day"))
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        raise ValidationError(f"invalid date {text!r}")
    return days_from_civil(year, month, day)


def _clock_parts(m: re.Match[str], text: str, digits: int) -> int:
    """Units (10**-digits s) since midnight; fractions finer than ``digits`` must be zeros."""
    h, mi, s = _int_group(m, "hour"), _int_group(m, "minute"), _int_group(m, "second")
    if h > 23 or mi > 59 or s > 59:
        raise ValidationError(f"invalid time of day in {text!r}")
    frac = m.group("frac") or ""
    if len(frac) > digits and frac[digits:].strip("0"):
        raise ValidationError(
            f"{text!r} has more than {digits} fractional second digits; the type cannot hold them"
        )
    frac = frac[:digits].ljust(digits, "0")
    return ((h * 60 + mi) * 60 + s) * int(10**digits) + int(frac)


def _offset_seconds(offset: str, text: str) -> int:
    if offset in ("Z", "z"):
        return 0
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or "0")
    if hours > 18 or minutes > 59:
        raise ValidationError(f"invalid zone offset in {text!r}")
    return sign * (hours * 3600 + minutes * 60)


def parse_date(text: str) -> int:
    """``YYYY-MM-DD`` to days from 1970-01-01."""
    m = _DATE_FULL.fullmatch(text.strip())
    if m is None:
        raise ValidationError(f"invalid ISO-8601 date {text!r} (expected YYYY-MM-DD)")
    days = _date_parts(m, text)
    if not _INT_MIN <= days <= _INT_MAX:
        raise ValidationError(f"date {text!r} is out of range")
    return days


def parse_time(text: str) -> int:
    """``HH:MM[:SS[.ffffff]]`` to micros from midnight."""
    m = _TIME_FULL.fullmatch(text.strip())
    if m is None:
        raise ValidationError(f"invalid ISO-8601 time {text!r} (expected HH:MM:SS[.ffffff])")
    return _clock_parts(m, text, 6)


def _timestamp_forms(utc: bool, allow_date: bool) -> str:
    """The forms ``parse_timestamp`` takes, with an example of each, for its error messages."""
    date = "YYYY-MM-DD (midnight" + (" UTC), " if utc else "), ") if allow_date else ""
    if utc:
        return (
            f"{date}YYYY-MM-DD[T ]HH:MM[:SS[.ffffff]] followed by a zone offset Z, +HH:MM or -HHMM, "
            "e.g. 2024-05-01T12:30:00Z or 2024-05-01 14:30+02:00"
        )
    return f"{date}YYYY-MM-DD[T ]HH:MM[:SS[.ffffff]] without a zone offset, e.g. 2024-05-01T12:30:00"


def parse_timestamp(text: str, *, utc: bool = False, nanos: bool = False, allow_date: bool = False) -> int:
    """An ISO-8601 timestamp to epoch micros (``nanos``: nanoseconds).

    ``utc`` (timestamptz) requires a zone offset and converts to UTC; otherwise an offset
    is an error, since a timestamp without zone is wall-clock time. ``allow_date`` also
    accepts a bare date as its midnight (in UTC for ``utc``), handy for filter literals.
    """
    stripped = text.strip()
    m = _TS_FULL.fullmatch(stripped)
    what = "timestamptz" if utc else "timestamp"
    forms = _timestamp_forms(utc, allow_date)
    if m is None:
        raise ValidationError(f"invalid ISO-8601 {what} {text!r} (accepted: {forms})")
    digits = 9 if nanos else 6
    has_time = m.group("hour") is not None
    if not has_time and not allow_date:
        raise ValidationError(
            f"invalid ISO-8601 {what} {text!r}: a time of day is required (accepted: {forms})"
        )
    offset = m.group("offset")
    if has_time and utc and offset is None:
        raise ValidationError(f"{what} {text!r} needs a zone offset (accepted: {forms})")
    if offset is not None and not utc:
        raise ValidationError(
            f"timestamp without zone {text!r} must not carry a zone offset (accepted: {forms})"
        )
    days = _date_parts(m, text)
    clock = _clock_parts(m, text, digits) if has_time else 0
    value = days * (NANOS_PER_DAY if nanos else MICROS_PER_DAY) + clock
    if offset is not None:
        value -= _offset_seconds(offset, text) * 10**digits
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ValidationError(f"{what} {text!r} is out of range")
    return value


def iso_to_value(text: str, type_: PrimitiveType) -> int:
    """Parse an ISO literal into the int form of a date/time/timestamp type (for filter literals).

    Timestamps accept a bare date as midnight. Raises ValidationError for other types and for
    conversions that would lose information (zone on a timestamp without zone, extra digits).
    """
    if isinstance(type_, DateType):
        return parse_date(text)
    if isinstance(type_, TimeType):
        return parse_time(text)
    if isinstance(type_, (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        return parse_timestamp(
            text,
            utc=isinstance(type_, (TimestamptzType, TimestamptzNanoType)),
            nanos=isinstance(type_, (TimestampNanoType, TimestamptzNanoType)),
            allow_date=True,
        )
    raise ValidationError(f"cannot convert ISO string {text!r} to {type_}")


# --------------------------------------------------------------------------- decimals


def decimal_to_unscaled(value: Decimal, scale: int) -> int:
    """Unscaled integer of ``value`` at ``scale``; exact integer arithmetic, no context rounding."""
    if not isinstance(value, Decimal) or not value.is_finite():
        raise ValidationError(f"expected a finite Decimal, got {value!r}")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    n = int("".join(map(str, digits)) or "0")
    if sign:
        n = -n
    shift = exponent + scale
    if shift >= 0:
        return n * int(10**shift)
    q, r = divmod(n, int(10**-shift))
    if r:
        raise ValidationError(f"decimal {value} does not fit scale {scale} without rounding")
    return q


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    """``Decimal`` with exactly ``scale`` fractional digits (exponent ``-scale``)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def min_bytes_big_endian(n: int) -> bytes:
    """Two's-complement big-endian in the fewest bytes (Java ``BigInteger.toByteArray``)."""
    length = (n.bit_length() if n >= 0 else (~n).bit_length()) // 8 + 1
    return n.to_bytes(length, "big", signed=True)


def _checked_unscaled(value: Any, type_: DecimalType) -> int:
    unscaled = decimal_to_unscaled(value, type_.scale)
    if len(str(abs(unscaled))) > type_.precision and unscaled != 0:
        raise ValidationError(f"decimal {value} has more digits than {type_} allows")
    return unscaled


# --------------------------------------------------------------------------- binary (Appendix D)


def _expect_int(value: Any, type_: PrimitiveType, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(f"{type_} value must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValidationError(f"{type_} value {value} is out of range")
    return value


_LONG_LIKE = (LongType, TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)


def to_bytes(value: Any, type_: PrimitiveType) -> bytes:
    """Appendix D single-value binary form, as stored in manifest lower/upper bounds."""
    if value is None:
        raise ValidationError(f"cannot serialize null as a {type_} single value")
    if isinstance(type_, BooleanType):
        if not isinstance(value, bool):
            raise ValidationError(f"boolean value must be a bool, got {type(value).__name__}")
        return b"\x01" if value else b"\x00"
    if isinstance(type_, (IntegerType, DateType)):
        return _I32.pack(_expect_int(value, type_, _INT_MIN, _INT_MAX))
    if isinstance(type_, TimeType):
        return _I64.pack(_expect_int(value, type_, 0, MICROS_PER_DAY - 1))
    if isinstance(type_, _LONG_LIKE):
        return _I64.pack(_expect_int(value, type_, _LONG_MIN, _LONG_MAX))
    if isinstance(type_, FloatType):
        return _F32.pack(_expect_float(value, type_, single=True))
    if isinstance(type_, DoubleType):
        return _F64.pack(_expect_float(value, type_, single=False))
    if isinstance(type_, StringType):
        if not isinstance(value, str):
            raise ValidationError(f"string value must be a str, got {type(value).__name__}")
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValidationError(f"string value is not valid Unicode: {e}") from e
    if isinstance(type_, UUIDType):
        if not isinstance(value, uuid.UUID):
            raise ValidationError(f"uuid value must be a uuid.UUID, got {type(value).__name__}")
        return value.bytes
    if isinstance(type_, FixedType):
        data = _expect_bytes(value, type_)
        # Bounds of fixed columns may be truncated prefixes, so shorter is allowed.
        if len(data) > type_.length:
            raise ValidationError(f"{type_} value has {len(data)} bytes")
        return data
    if isinstance(type_, BinaryType):
        return _expect_bytes(value, type_)
    if isinstance(type_, DecimalType):
        return min_bytes_big_endian(_checked_unscaled(value, type_))
    raise ValidationError(f"type {type_} has no single-value binary form")


def _expect_float(value: Any, type_: PrimitiveType, single: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{type_} value must be a float, got {type(value).__name__}")
    f = float(value)
    if single and math.isfinite(f) and abs(f) > 3.4028234663852886e38:
        raise ValidationError(f"{type_} value {value} is out of range")
    return f


def _expect_bytes(value: Any, type_: PrimitiveType) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise ValidationError(f"{type_} value must be bytes, got {type(value).__name__}")


def _bad_length(type_: PrimitiveType, data: bytes, expected: str) -> InvalidMetadataError:
    return InvalidMetadataError(
        f"single value for {type_} has {len(data)} bytes, expected {expected}: {data[:32].hex()}"
    )


def from_bytes(data: bytes, type_: PrimitiveType) -> Any:
    """Decode an Appendix D value; wrong lengths raise InvalidMetadataError.

    As in Java and PyIceberg, a 4-byte long or double is read as the int or float it was
    written as before the column was promoted.
    """
    data = bytes(data)
    n = len(data)
    if isinstance(type_, BooleanType):
        if n != 1:
            raise _bad_length(type_, data, "1")
        return data != b"\x00"
    if isinstance(type_, (IntegerType, DateType)):
        if n != 4:
            raise _bad_length(type_, data, "4")
        return _I32.unpack(data)[0]
    if isinstance(type_, LongType):
        if n == 4:
            return _I32.unpack(data)[0]
        if n != 8:
            raise _bad_length(type_, data, "8 (or 4 for a promoted int)")
        return _I64.unpack(data)[0]
    if isinstance(type_, _LONG_LIKE):
        if n != 8:
            raise _bad_length(type_, data, "8")
        return _I64.unpack(data)[0]
    if isinstance(type_, FloatType):
        if n != 4:
            raise _bad_length(type_, data, "4")
        return _F32.unpack(data)[0]
    if isinstance(type_, DoubleType):
        if n == 4:
            return _F32.unpack(data)[0]
        if n != 8:
            raise _bad_length(type_, data, "8 (or 4 for a promoted float)")
        return _F64.unpack(data)[0]
    if isinstance(type_, StringType):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidMetadataError(f"single value for string is not valid UTF-8: {e}") from e
    if isinstance(type_, UUIDType):
        if n != 16:
            raise _bad_length(type_, data, "16")
        return uuid.UUID(bytes=data)
    if isinstance(type_, FixedType):
        if n > type_.length:
            raise _bad_length(type_, data, f"at most {type_.length}")
        return data
    if isinstance(type_, BinaryType):
        return data
    if isinstance(type_, DecimalType):
        if not 1 <= n <= 16:
            raise _bad_length(type_, data, "1 to 16")
        return unscaled_to_decimal(int.from_bytes(data, "big", signed=True), type_.scale)
    if isinstance(type_, UnknownType):
        return None
    raise InvalidMetadataError(f"type {type_} has no single-value binary form")


# --------------------------------------------------------------------------- JSON


def _decimal_to_json(value: Any, type_: DecimalType) -> str:
    unscaled = _checked_unscaled(value, type_)
    if type_.scale < 0:
        # The spec's form for negative scales: scientific, exponent equal to the negated scale.
        return f"{unscaled}E+{-type_.scale}"
    return f"{unscaled_to_decimal(unscaled, type_.scale):f}"


def to_json(value: Any, type_: IcebergType) -> Any:
    """The JSON single-value form (used for defaults): ``None`` becomes JSON null.

    Structs are ``Mapping[int, Any]`` keyed by field id (or a sequence in field order),
    lists are sequences, maps are ``Mapping``.
    """
    if value is None:
        return None
    if isinstance(type_, StructType):
        if isinstance(value, Mapping):
            items = [(f, value.get(f.field_id)) for f in type_.fields]
        elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            if len(value) != len(type_.fields):
                raise ValidationError(f"struct value has {len(value)} items, {type_} has {len(type_.fields)}")
            items = list(zip(type_.fields, value, strict=True))
        else:
            raise ValidationError(f"struct value must be a mapping by field id, got {type(value).__name__}")
        return {str(f.field_id): to_json(v, f.field_type) for f, v in items if v is not None}
    if isinstance(type_, ListType):
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise ValidationError(f"list value must be a sequence, got {type(value).__name__}")
        return [to_json(v, type_.element_type) for v in value]
    if isinstance(type_, MapType):
        if not isinstance(value, Mapping):
            raise ValidationError(f"map value must be a mapping, got {type(value).__name__}")
        return {
            "keys": [to_json(k, type_.key_type) for k in value],
            "values": [to_json(v, type_.value_type) for v in value.values()],
        }
    if not isinstance(type_, PrimitiveType):
        raise ValidationError(f"type {type_} has no JSON single-value form")
    if isinstance(type_, BooleanType):
        if not isinstance(value, bool):
            raise ValidationError(f"boolean value must be a bool, got {type(value).__name__}")
        return value
    if isinstance(type_, IntegerType):
        return _expect_int(value, type_, _INT_MIN, _INT_MAX)
    if isinstance(type_, LongType):
        return _expect_int(value, type_, _LONG_MIN, _LONG_MAX)
    if isinstance(type_, (FloatType, DoubleType)):
        return _expect_float(value, type_, single=isinstance(type_, FloatType))
    if isinstance(type_, DecimalType):
        return _decimal_to_json(value, type_)
    if isinstance(type_, DateType):
        return format_date(_expect_int(value, type_, _INT_MIN, _INT_MAX))
    if isinstance(type_, TimeType):
        return format_time(_expect_int(value, type_, 0, MICROS_PER_DAY - 1))
    if isinstance(type_, (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        return format_timestamp(
            _expect_int(value, type_, _LONG_MIN, _LONG_MAX),
            utc=isinstance(type_, (TimestamptzType, TimestamptzNanoType)),
            nanos=isinstance(type_, (TimestampNanoType, TimestamptzNanoType)),
        )
    if isinstance(type_, StringType):
        if not isinstance(value, str):
            raise ValidationError(f"string value must be a str, got {type(value).__name__}")
        return value
    if isinstance(type_, UUIDType):
        if not isinstance(value, uuid.UUID):
            raise ValidationError(f"uuid value must be a uuid.UUID, got {type(value).__name__}")
        return str(value)
    if isinstance(type_, FixedType):
        data = _expect_bytes(value, type_)
        if len(data) != type_.length:
            raise ValidationError(f"{type_} value has {len(data)} bytes")
        return data.hex()
    if isinstance(type_, BinaryType):
        return _expect_bytes(value, type_).hex()
    raise ValidationError(f"type {type_} has no non-null JSON single value")


def from_json(obj: Any, type_: IcebergType) -> Any:
    """Read the JSON single-value form; malformed input raises InvalidMetadataError."""
    try:
        return _from_json(obj, type_)
    except ValidationError as e:
        raise InvalidMetadataError(f"bad JSON value for {type_}: {e}") from e


def _json_str(obj: Any, type_: IcebergType) -> str:
    if not isinstance(obj, str):
        raise ValidationError(f"expected a JSON string, got {obj!r}")
    return obj


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _from_json(obj: Any, type_: IcebergType) -> Any:
    if obj is None:
        return None
    if isinstance(type_, StructType):
        if not isinstance(obj, Mapping):
            raise ValidationError(f"expected a JSON object keyed by field id, got {obj!r}")
        return {f.field_id: _from_json(obj.get(str(f.field_id)), f.field_type) for f in type_.fields}
    if isinstance(type_, ListType):
        if not isinstance(obj, list):
            raise ValidationError(f"expected a JSON array, got {obj!r}")
        return [_from_json(v, type_.element_type) for v in obj]
    if isinstance(type_, MapType):
        if not isinstance(obj, Mapping) or not isinstance(obj.get("keys"), list):
            raise ValidationError(f'expected {{"keys": [...], "values": [...]}}, got {obj!r}')
        keys, vals = obj["keys"], obj.get("values")
        if not isinstance(vals, list) or len(vals) != len(keys):
            raise ValidationError("map keys and values must be arrays of the same length")
        return {
            _from_json(k, type_.key_type): _from_json(v, type_.value_type)
            for k, v in zip(keys, vals, strict=True)
        }
    if isinstance(type_, BooleanType):
        if not isinstance(obj, bool):
            raise ValidationError(f"expected a JSON boolean, got {obj!r}")
        return obj
    if isinstance(type_, IntegerType):
        return _expect_int(obj, type_, _INT_MIN, _INT_MAX)
    if isinstance(type_, LongType):
        return _expect_int(obj, type_, _LONG_MIN, _LONG_MAX)
    if isinstance(type_, (FloatType, DoubleType)):
        if isinstance(obj, str) and obj in _NON_FINITE:  # Jackson writes non-finite floats as strings
            return _NON_FINITE[obj]
        return _expect_float(obj, type_, single=isinstance(type_, FloatType))
    if isinstance(type_, DecimalType):
        text = _json_str(obj, type_)
        try:
            value = Decimal(text.strip())
        except ArithmeticError as e:
            raise ValidationError(f"invalid decimal {text!r}") from e
        return unscaled_to_decimal(_checked_unscaled(value, type_), type_.scale)
    if isinstance(type_, DateType):
        return parse_date(_json_str(obj, type_))
    if isinstance(type_, TimeType):
        return parse_time(_json_str(obj, type_))
    if isinstance(type_, (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        return parse_timestamp(
            _json_str(obj, type_),
            utc=isinstance(type_, (TimestamptzType, TimestamptzNanoType)),
            nanos=isinstance(type_, (TimestampNanoType, TimestamptzNanoType)),
        )
    if isinstance(type_, StringType):
        return _json_str(obj, type_)
    if isinstance(type_, UUIDType):
        text = _json_str(obj, type_)
        try:
            return uuid.UUID(text)
        except ValueError as e:
            raise ValidationError(f"invalid uuid {text!r}") from e
    if isinstance(type_, (FixedType, BinaryType)):
        text = _json_str(obj, type_)
        try:
            data = bytes.fromhex(text)
        except ValueError as e:
            raise ValidationError(f"invalid hex string {text!r}") from e
        if isinstance(type_, FixedType) and len(data) != type_.length:
            raise ValidationError(f"{type_} value has {len(data)} bytes")
        return data
    if isinstance(type_, UnknownType):
        raise ValidationError(f"unknown-typed values can only be null, got {obj!r}")
    raise ValidationError(f"type {type_} has no JSON single-value form")
