"""Arrow <-> numpy for fixed-width columns, read and made from their buffers.

pyarrow imports pandas (when it is installed) the first time it converts between Arrow and
numpy or Python values: ``Array.to_numpy``, ``np.asarray`` of an array, ``pa.array``,
``pa.scalar``, a compute function given a Python scalar. That is ~0.3 CPU-s with the GIL
held, once a process, and a cold plan paid it on its critical path while it had nothing
to do with pandas. These give the same results from the buffers for the types planning
converts (integers, floats, booleans); any other type goes to pyarrow's own conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["arrow_of", "binary_of", "column_of", "null_mask", "numpy_of", "scalar_of", "value_offsets"]

Array = np.ndarray[Any, Any]


def _dtype(t: pa.DataType) -> np.dtype[Any] | None:
    """The numpy dtype of an integer or float type's values (None: another type)."""
    if pa.types.is_integer(t):
        return np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    if pa.types.is_floating(t):
        return np.dtype(f"f{t.bit_width // 8}")
    return None


def _bits(buf: pa.Buffer | None, offset: int, n: int) -> Array:
    """``n`` bits of an Arrow bitmap from bit ``offset``, as booleans."""
    if n == 0 or buf is None:
        return np.zeros(n, dtype=bool)
    raw = np.frombuffer(buf, dtype=np.uint8, count=(offset + n + 7) // 8)
    bits: Array = np.unpackbits(raw, count=offset + n, bitorder="little")[offset:].view(bool)
    return bits


def null_mask(arr: pa.Array) -> Array:
    """True where ``arr`` is null (``arr.is_null().to_numpy()``)."""
    n = len(arr)
    if arr.null_count == 0:
        return np.zeros(n, dtype=bool)
    if arr.null_count == n:
        return np.ones(n, dtype=bool)
    mask: Array = ~_bits(arr.buffers()[0], arr.offset, n)
    return mask


def value_offsets(arr: pa.Array) -> tuple[Array, pa.Buffer | None] | None:
    """A binary or string array's ``len(arr) + 1`` value offsets (its slice's own, as int64,
    into the data buffer) and that buffer; None for another type."""
    t = arr.type
    dtype: np.dtype[Any]
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        dtype = np.dtype(np.int64)
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        dtype = np.dtype(np.int32)
    else:
        return None
    n = len(arr)
    _, offsets_buf, data = arr.buffers()
    if offsets_buf is None:  # an empty array may have none
        return np.zeros(n + 1, dtype=np.int64), data
    offsets = np.frombuffer(offsets_buf, dtype=dtype, count=n + 1, offset=arr.offset * dtype.itemsize)
    return offsets.astype(np.int64, copy=False), data


def numpy_of(arr: pa.Array | pa.ChunkedArray) -> Array:
    """``arr.to_numpy(zero_copy_only=False)``: a view of an integer or float array without
    nulls; with nulls, integers as float64 and floats with NaN where null; booleans copied
    (with nulls: objects, as pyarrow gives)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            if arr.num_chunks == 0:
                dtype = _dtype(arr.type)
                if dtype is not None:
                    return np.empty(0, dtype=dtype)
                converted: Array = arr.to_numpy()  # another type: pyarrow's conversion
                return converted
            return np.concatenate([numpy_of(c) for c in arr.chunks])
        arr = arr.chunk(0)
    t, n = arr.type, len(arr)
    if pa.types.is_boolean(t) and arr.null_count == 0:
        return _bits(arr.buffers()[1], arr.offset, n).copy()
    dtype = _dtype(t)
    if dtype is None or (arr.null_count == n and n > 0):
        other: Array = arr.to_numpy(zero_copy_only=False)  # another type: pyarrow's conversion
        return other
    if n == 0:
        return np.empty(0, dtype=dtype)
    values: Array = np.frombuffer(arr.buffers()[1], dtype=dtype, count=n, offset=arr.offset * dtype.itemsize)
    if arr.null_count == 0:
        return values
    out = values.astype(np.float64 if dtype.kind in "iu" else dtype)
    out[null_mask(arr)] = np.nan
    return out


def _validity(valid: Array | None) -> pa.Buffer | None:
    """The validity bitmap of ``valid`` (None: every value valid, as pyarrow leaves it)."""
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def arrow_of(
    values: Array | Sequence[int], type: pa.DataType | None = None, valid: Array | None = None
) -> pa.Array:
    """An array holding ``values`` (numpy integers, floats or booleans, or a list of ints:
    int64), as ``pa.array(values, type)`` gives it; null where ``valid`` (booleans) is False."""
    arr = np.asarray(values) if isinstance(values, np.ndarray) else np.asarray(values, dtype=np.int64)
    if type is None:
        type = pa.from_numpy_dtype(arr.dtype)
    bitmap = _validity(valid)
    if pa.types.is_boolean(type):
        packed = np.packbits(arr.astype(bool, copy=False), bitorder="little")
        return pa.Array.from_buffers(type, len(arr), [bitmap, pa.py_buffer(packed)])
    dtype = _dtype(type)
    if dtype is None:  # another type: pyarrow's conversion
        return pa.array(arr, type, mask=None if valid is None else ~valid)
    data = np.ascontiguousarray(arr.astype(dtype, copy=False))
    return pa.Array.from_buffers(type, len(data), [bitmap, pa.py_buffer(data)])


def column_of(values: Sequence[Any], type: pa.DataType) -> pa.Array:
    """``pa.array(values, type)`` for Python values (None: null) of a string, binary, integer,
    float, boolean, list or struct (dicts) type; any other type goes to pyarrow."""
    n = len(values)
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
    bitmap = _validity(valid)
    if pa.types.is_string(type) or pa.types.is_binary(type):
        raw = [b"" if v is None else v.encode() if isinstance(v, str) else v for v in values]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] > np.iinfo(np.int32).max:
            raise pa.ArrowInvalid("values too large for 32-bit offsets")
        data = pa.py_buffer(b"".join(raw))
        return pa.Array.from_buffers(type, n, [bitmap, pa.py_buffer(offsets.astype(np.int32)), data])
    dtype = _dtype(type)
    if dtype is not None or pa.types.is_boolean(type):
        filled = np.fromiter((0 if v is None else v for v in values), dtype=dtype or bool, count=n)
        return arrow_of(filled, type, valid)
    if pa.types.is_list(type):
        items = [() if v is None else v for v in values]
        offsets32 = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=n), out=offsets32[1:])
        child = column_of([x for item in items for x in item], type.value_type)
        return pa.Array.from_buffers(type, n, [bitmap, pa.py_buffer(offsets32)], children=[child])
    if pa.types.is_struct(type):
        children = [column_of([None if v is None else v.get(f.name) for v in values], f.type) for f in type]
        return pa.Array.from_buffers(type, n, [bitmap], children=children)
    return pa.array(values, type)  # another type: pyarrow's conversion


def binary_of(values: Sequence[bytes], type: pa.DataType | None = None) -> pa.Array:
    """``pa.array(values, type)`` for a list of bytes without nulls (binary by default)."""
    type = pa.binary() if type is None else type
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = pa.types.is_large_binary(type) or pa.types.is_large_string(type)
    if not large and offsets[-1] > np.iinfo(np.int32).max:
        raise pa.ArrowInvalid("binary values too large for 32-bit offsets")
    kept = offsets if large else offsets.astype(np.int32)
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(type, len(values), [None, pa.py_buffer(kept), data])


def scalar_of(value: bool | int | float, type: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, type)`` for a boolean, integer or float type."""
    return arrow_of(np.asarray([value], dtype=_dtype(type)), type)[0]
