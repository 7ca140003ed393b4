"""Column bounds decoded in bulk, compared exactly as the metrics evaluator compares them.

The inclusive metrics evaluator decodes one bound at a time (``spec.values.from_bytes``)
and compares the Python value with the filter's literal. Here a whole bound column is
decoded into one numpy array per type, and a literal is turned into something numpy
compares with that array the same way Python compares the decoded values:

- integer-like types (int, long, date, time, timestamps in micros and nanos) and boolean
  decode to int64 and compare with the literal as a Python int;
- float and double decode to float64 (a float32 widens exactly; NaN stays NaN, which the
  evaluator reads as an unknown bound);
- decimal decodes its big-endian unscaled integer to int64 when it fits (else the bound is
  left to the evaluator) and compares with the literal scaled to an exact fraction, rounded
  the way the comparison needs (``u >= x`` iff ``u >= ceil(x)`` for an integer ``u``);
- string, binary, fixed and uuid keep the bytes (numpy object arrays): UTF-8 byte order is
  code point order, and ``UUID`` order is the order of its big-endian bytes.

A bound a kind cannot read (wrong width, invalid UTF-8, a decimal beyond int64) is left
unread (state 2): the caller leaves such rows to the evaluator.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from aioiceberg.spec.arrow_numpy import binary_of
from aioiceberg.spec.manifest.columnar import fixed_width_items
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
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

__all__ = ["BoundKind", "bound_kind", "compare", "prefix_above", "prefix_below", "starts_with", "surely_in"]

Array = np.ndarray[Any, Any]
Reader = Callable[[list[Any]], tuple[Array, Array]]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EXACT_FLOAT_INT = 2**53  # ints up to this magnitude are floats exactly


@dataclass(frozen=True, slots=True)
class BoundKind:
    """How one type's bounds are read in bulk and how its literals compare with them.

    ``key`` names the reading (the manifest keeps each field's column per key); ``literal``
    turns a filter literal into what :func:`compare` takes, or None when it cannot be
    compared exactly in bulk."""

    key: tuple[Any, ...]
    dtype: Any
    read: Reader
    literal: Callable[[Any], Any]
    floating: bool = False
    scaled: bool = False  # decimal: literals are exact fractions of the unscaled integer

    @property
    def bulk(self) -> Callable[[pa.Array], tuple[Array, Array] | None] | None:
        """``read`` from the Arrow array of the raw values, where that is done in bulk."""
        return self.read.bulk if isinstance(self.read, _FixedReader) else None


def _lengths(raw: list[Any]) -> Array:
    """Each raw value's byte length, -1 for anything that is not bytes (a null)."""
    if all(isinstance(b, bytes) for b in raw):
        return np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
    return np.fromiter((len(b) if isinstance(b, bytes) else -1 for b in raw), dtype=np.int64, count=len(raw))


def _kept(raw: list[Any], ok: Array) -> list[Any]:
    return raw if ok.all() else [b for b, k in zip(raw, ok.tolist(), strict=True) if k]


class _FixedReader:
    """Little-endian values of the given widths (width -> numpy dtype): from the raw values,
    or in bulk from the Arrow array holding them (:meth:`bulk`, no object per value)."""

    __slots__ = ("dtype", "widths")

    def __init__(self, widths: dict[int, str], dtype: Any) -> None:
        self.widths, self.dtype = widths, dtype

    def __call__(self, raw: list[Any]) -> tuple[Array, Array]:
        widths, dtype = self.widths, self.dtype
        lengths = _lengths(raw)
        ok = np.isin(lengths, list(widths))
        out = np.zeros(int(ok.sum()), dtype=dtype)
        at = lengths[ok]
        good = _kept(raw, ok)
        for width, code in widths.items():
            mine = at == width
            if mine.any():
                joined = b"".join(_kept(good, mine))
                out[mine] = np.frombuffer(joined, dtype=code).astype(dtype)
        return ok, out

    def bulk(self, values: pa.Array) -> tuple[Array, Array] | None:
        return fixed_width_items(values, self.widths, self.dtype)


def _fixed_reader(widths: dict[int, str], dtype: Any) -> Reader:
    return _FixedReader(widths, dtype)


def _read_bool(raw: list[Any]) -> tuple[Array, Array]:
    ok = _lengths(raw) == 1
    good = [b != b"\x00" for b in _kept(raw, ok)]
    return ok, np.fromiter(good, dtype=np.int64, count=len(good))


def _read_decimal(raw: list[Any]) -> tuple[Array, Array]:
    """Unscaled values of 1 to 16 bytes that fit int64 (the rest are left unread)."""
    ok = np.zeros(len(raw), dtype=bool)
    good: list[int] = []
    for i, b in enumerate(raw):
        if isinstance(b, bytes) and 1 <= len(b) <= 16:
            v = int.from_bytes(b, "big", signed=True)
            if _INT64_MIN <= v <= _INT64_MAX:
                ok[i] = True
                good.append(v)
    return ok, np.array(good, dtype=np.int64)


def _objects(values: list[Any]) -> Array:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _bytes_reader(accept: Callable[[Array], Array]) -> Reader:
    """Bytes kept as they are, where ``accept`` takes their lengths."""

    def read(raw: list[Any]) -> tuple[Array, Array]:
        lengths = _lengths(raw)
        ok = (lengths >= 0) & accept(lengths)
        return ok, _objects(_kept(raw, ok))

    return read


def _read_utf8(raw: list[Any]) -> tuple[Array, Array]:
    """Bounds that are valid UTF-8 (checked for all at once; one by one only if some is not)."""
    ok = _lengths(raw) >= 0
    good = _kept(raw, ok)
    try:
        binary_of(good).cast(pa.string())
    except pa.ArrowInvalid:
        valid = np.fromiter((_utf8(b) for b in good), dtype=bool, count=len(good))
        ok[ok] = valid
        good = _kept(good, valid)
    return ok, _objects(good)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _int_literal(v: Any) -> int | None:
    return int(v) if isinstance(v, int) else None  # bool is an int to Python's comparisons too


def _float_literal(v: Any) -> float | None:
    if isinstance(v, float):
        return v
    if isinstance(v, int) and abs(v) <= _EXACT_FLOAT_INT:
        return float(v)
    return None


def _decimal_literal(scale: int) -> Callable[[Any], Fraction | None]:
    def literal(v: Any) -> Fraction | None:
        if isinstance(v, Decimal) and not v.is_finite():
            return None
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if not isinstance(v, Decimal | int | float):
            return None
        return Fraction(v) * Fraction(10) ** scale

    return literal


def _str_literal(v: Any) -> bytes | None:
    # surrogatepass keeps code point order for a literal holding lone surrogates
    return v.encode("utf-8", "surrogatepass") if isinstance(v, str) else None


def _bytes_literal(v: Any) -> bytes | None:
    return bytes(v) if isinstance(v, bytes | bytearray) else None


def _uuid_literal(v: Any) -> bytes | None:
    return v.bytes if isinstance(v, uuid.UUID) else None


_I4, _I8 = {4: "<i4"}, {8: "<i8"}
_INT_KINDS: dict[type, BoundKind] = {
    IntegerType: BoundKind(("i", 4), np.int64, _fixed_reader(_I4, np.int64), _int_literal),
    DateType: BoundKind(("i", 4), np.int64, _fixed_reader(_I4, np.int64), _int_literal),
    # 4 bytes: written before the column was promoted from int
    LongType: BoundKind(("i", 4, 8), np.int64, _fixed_reader({4: "<i4", 8: "<i8"}, np.int64), _int_literal),
    **{
        t: BoundKind(("i", 8), np.int64, _fixed_reader(_I8, np.int64), _int_literal)
        for t in (TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
    },
    BooleanType: BoundKind(("bool",), np.int64, _read_bool, _int_literal),
    FloatType: BoundKind(("f", 4), np.float64, _fixed_reader({4: "<f4"}, np.float64), _float_literal, True),
    DoubleType: BoundKind(
        ("f", 4, 8), np.float64, _fixed_reader({4: "<f4", 8: "<f8"}, np.float64), _float_literal, True
    ),
    StringType: BoundKind(("utf8",), object, _read_utf8, _str_literal),
    BinaryType: BoundKind(("bytes",), object, _bytes_reader(lambda n: n >= 0), _bytes_literal),
    UUIDType: BoundKind(("uuid",), object, _bytes_reader(lambda n: n == 16), _uuid_literal),
}


def bound_kind(t: PrimitiveType) -> BoundKind | None:
    """How bounds of type ``t`` are read in bulk (None: they are not)."""
    found = _INT_KINDS.get(type(t))
    if found is not None:
        return found
    if isinstance(t, DecimalType):
        return BoundKind(
            ("decimal", t.scale), np.int64, _read_decimal, _decimal_literal(t.scale), scaled=True
        )
    if isinstance(t, FixedType):
        length = t.length
        return BoundKind(("fixed", length), object, _bytes_reader(lambda n: n <= length), _bytes_literal)
    return None


def _scalar(lit: Any) -> Any:
    """``lit`` as numpy compares it with an object array: bytes boxed as an object, since
    numpy would read them as its fixed-width bytes type, which drops trailing NUL bytes."""
    if not isinstance(lit, bytes):
        return lit
    boxed = np.empty((), dtype=object)
    boxed[()] = lit
    return boxed


def compare(values: Array, op: str, lit: Any, kind: BoundKind) -> Array:
    """``values OP lit`` element by element (``op``: lt, le, gt, ge), as Python compares the
    decoded values with the literal; ``lit`` is what ``kind.literal`` made."""
    if kind.scaled:  # an integer u against an exact fraction x
        floor, ceil = math.floor(lit), math.ceil(lit)
        if op == "ge":
            out: Array = values >= ceil
        elif op == "gt":
            out = values > floor
        elif op == "le":
            out = values <= floor
        else:
            out = values < ceil
        return out
    lit = _scalar(lit)
    if op == "ge":
        out = values >= lit
    elif op == "gt":
        out = values > lit
    elif op == "le":
        out = values <= lit
    else:
        out = values < lit
    return np.asarray(out, dtype=bool)


def _successor(prefix: bytes) -> bytes | None:
    """The least byte string above every string starting with ``prefix`` (None: none is)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def prefix_above(values: Array, prefix: bytes) -> Array:
    """``v[:len(prefix)] > prefix`` per value: the value is at or above the prefix's successor."""
    nxt = _successor(prefix)
    if nxt is None:
        return np.zeros(len(values), dtype=bool)
    return np.asarray(values >= _scalar(nxt), dtype=bool)


def prefix_below(values: Array, prefix: bytes) -> Array:
    """``v[:len(prefix)] < prefix`` per value: the same as ``v < prefix``."""
    return np.asarray(values < _scalar(prefix), dtype=bool)


def starts_with(values: Array, prefix: bytes) -> Array:
    """``v.startswith(prefix)`` per value: ``prefix <= v < successor``."""
    out = np.asarray(values >= _scalar(prefix), dtype=bool)
    nxt = _successor(prefix)
    if nxt is not None:
        out &= np.asarray(values < _scalar(nxt), dtype=bool)
    return out


def surely_in(kind: BoundKind, literals: Iterable[Any]) -> tuple[Array, Array] | None:
    """The literals of an IN as two sorted arrays, (below, above), such that for a bound
    ``b``: ``b <= v`` iff ``b <= below[i]`` and ``v <= b`` iff ``above[i] <= b``, for the
    i-th literal ``v`` in order; None when some literal cannot be compared exactly in bulk."""
    converted = [kind.literal(v) for v in literals]
    if any(c is None for c in converted):
        return None
    if kind.floating and any(math.isnan(c) for c in converted):
        return None
    converted.sort()
    if kind.scaled:
        below = [math.floor(c) for c in converted]
        above = [math.ceil(c) for c in converted]
        if any(not _INT64_MIN <= x <= _INT64_MAX for x in (*below, *above)):
            return None
        return np.array(below, dtype=np.int64), np.array(above, dtype=np.int64)
    if kind.dtype is object:
        arr = np.empty(len(converted), dtype=object)
        arr[:] = converted
        return arr, arr
    if kind.dtype == np.int64 and any(not _INT64_MIN <= c <= _INT64_MAX for c in converted):
        return None
    arr = np.array(converted, dtype=kind.dtype)
    return arr, arr
