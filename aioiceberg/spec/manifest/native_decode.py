"""Manifest bytes -> the Arrow table polars' reader gives, through the compiled decoder.

``aioiceberg._manifest_native`` (built from ``native/`` where a Rust toolchain exists at
install) parses the Avro container with the GIL released and hands back each column's
buffers (the decoded vectors themselves, read through the buffer protocol: no copy); they
are assembled here into arrays of the types ``polars.read_avro(...).to_arrow()``
gives for the same schema (large strings and binaries, large lists, everything nullable,
timestamps in UTC, times in nanoseconds), so a table from either path is equal and nothing
downstream can tell them apart. Without the extension :func:`native_available` is False
and callers keep the polars path.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import pyarrow as pa

from aioiceberg.errors import CorruptFileError


class _Decoder(Protocol):
    """``aioiceberg._manifest_native`` (see its ``.pyi``)."""

    def decode_columns(self, data: bytes, /) -> tuple[int, list[tuple[str, tuple[Any, ...]]]] | str: ...

    def read_header(self, data: bytes, /) -> tuple[dict[str, str], int]: ...


_manifest_native: _Decoder | None
try:  # built from native/ at install where cargo exists; otherwise polars decodes manifests.
    # By name: a ``from aioiceberg import`` would tie spec/ to the package's __init__.
    _manifest_native = importlib.import_module("aioiceberg._manifest_native")
except ImportError:  # pragma: no cover - an install without a Rust toolchain
    _manifest_native = None

__all__ = ["decode_native", "native_available", "read_header_native"]

_FIXED: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "i32": pa.int32(),
    "date32": pa.date32(),
    "time64ns": pa.time64("ns"),
    "i64": pa.int64(),
    "ts_us_utc": pa.timestamp("us", tz="UTC"),
    "ts_ms_utc": pa.timestamp("ms", tz="UTC"),
    "ts_us": pa.timestamp("us"),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "lstr": pa.large_string(),
    "lbin": pa.large_binary(),
}


def native_available() -> bool:
    """True when the compiled decoder is installed."""
    return _manifest_native is not None


def _array(column: tuple[Any, ...]) -> pa.Array:
    tag, length, nulls, validity, buffers, children = column
    valid = None if validity is None else pa.py_buffer(validity)
    if tag == "struct":
        kids = [_array(c) for _, c in children]
        typ = pa.struct([pa.field(name, k.type) for (name, _), k in zip(children, kids, strict=True)])
        return pa.Array.from_buffers(typ, length, [valid], nulls, children=kids)
    if tag == "llist":
        item = _array(children[0][1])
        return pa.Array.from_buffers(
            pa.large_list(item.type), length, [valid, pa.py_buffer(buffers[0])], nulls, children=[item]
        )
    typ = _FIXED.get(tag)
    if typ is None:  # "dec:precision:scale"
        _, precision, scale = tag.split(":")
        typ = pa.decimal128(int(precision), int(scale))
    return pa.Array.from_buffers(typ, length, [valid, *map(pa.py_buffer, buffers)], nulls)


_AVRO_MAGIC = b"Obj\x01"


def read_header_native(data: bytes, location: str | None = None) -> dict[str, str] | None:
    """The manifest's header metadata (``avro.*`` keys included, values as text), read by the
    compiled decoder; None when the extension is missing. A damaged header raises
    :class:`CorruptFileError` naming ``location``, as the fastavro reader's check does."""
    if _manifest_native is None:
        return None
    if data[:4] != _AVRO_MAGIC:
        magic = bytes(data[:4])
        raise CorruptFileError(f"manifest is not an Avro file (bad magic {magic!r})", location=location)
    try:
        properties, _ = _manifest_native.read_header(data)
    except ValueError as e:
        raise CorruptFileError(f"manifest has an unreadable Avro header: {e}", location=location) from None
    return properties


def decode_native(data: bytes, location: str | None = None) -> pa.Table | None:
    """``data``'s entries as the table polars gives; None when the extension is missing or the
    writer schema holds a type it does not decode (decided from the header, before any
    record). Damaged bytes raise :class:`CorruptFileError` naming ``location``."""
    if _manifest_native is None:
        return None
    try:
        found = _manifest_native.decode_columns(data)
    except ValueError as e:
        raise CorruptFileError(f"manifest cannot be decoded: {e}", location=location) from None
    if isinstance(found, str):
        return None
    rows, columns = found
    arrays = [_array(c) for _, c in columns]
    if not arrays:
        return pa.table({}) if rows == 0 else None
    return pa.Table.from_arrays(arrays, names=[name for name, _ in columns])
