"""Manifest bytes -> the Arrow table polars' reader gives, through the compiled decoder.

``aioiceberg._manifest_native`` (built from ``native/`` where a Rust toolchain exists at
install) parses the Avro container with the GIL released and hands back one record batch
through the Arrow C Data Interface (the PyCapsule protocol's ``arrow_schema`` and
``arrow_array``), imported here in one call. Its buffers are the decoded vectors themselves
(no copy), freed by the decoder's release callback without the GIL: building the arrays
node by node in Python held the GIL for ~100 objects a manifest, and freeing them held it
again. The types are those ``polars.read_avro(...).to_arrow()`` gives for the same schema
(large strings and binaries, large lists, everything nullable, timestamps in UTC, times in
nanoseconds), so a table from either path is equal and nothing downstream can tell them
apart. Without the extension :func:`native_available` is False and callers keep the polars
path.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa

from aioiceberg.errors import CorruptFileError


class _Decoder(Protocol):
    """``aioiceberg._manifest_native`` (see its ``.pyi``)."""

    def decode_arrow(self, data: bytes, skip: Sequence[str], /) -> tuple[object, object] | str: ...

    def decode_arrow_joined(
        self, datas: Sequence[bytes], skip: Sequence[str], /
    ) -> tuple[object, object, list[int]] | str: ...

    def read_header(self, data: bytes, /) -> tuple[dict[str, str], int]: ...


_manifest_native: _Decoder | None
try:  # built from native/ at install where cargo exists; otherwise polars decodes manifests.
    # By name: a ``from aioiceberg import`` would tie spec/ to the package's __init__.
    _manifest_native = importlib.import_module("aioiceberg._manifest_native")
except ImportError:  # pragma: no cover - an install without a Rust toolchain
    _manifest_native = None

__all__ = ["decode_native", "decode_native_joined", "native_available", "read_header_native"]


class _Batch:
    """The decoder's (schema, array) capsules, offered through the Arrow PyCapsule protocol
    so that ``pa.record_batch`` imports them (each capsule can be imported once)."""

    __slots__ = ("_array", "_schema")

    def __init__(self, schema: object, array: object) -> None:
        self._schema = schema
        self._array = array

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        # pa.record_batch asks for no other schema; the batch is given as decoded
        return self._schema, self._array


def native_available() -> bool:
    """True when the compiled decoder is installed."""
    return _manifest_native is not None


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


def decode_native(data: bytes, location: str | None = None, skip: Sequence[str] = ()) -> pa.Table | None:
    """``data``'s entries as the table polars gives; None when the extension is missing or the
    writer schema holds a type it does not decode (decided from the header, before any
    record). Damaged bytes raise :class:`CorruptFileError` naming ``location``. The
    ``data_file`` array fields named in ``skip`` are read past: each value null or empty."""
    if _manifest_native is None:
        return None
    try:
        found = _manifest_native.decode_arrow(data, list(skip))
    except ValueError as e:
        raise CorruptFileError(f"manifest cannot be decoded: {e}", location=location) from None
    if isinstance(found, str):
        return None
    batch = pa.record_batch(_Batch(*found))
    if batch.num_columns == 0:
        return pa.table({}) if batch.num_rows == 0 else None
    return pa.Table.from_batches([batch])


def decode_native_joined(
    datas: Sequence[bytes], locations: Sequence[str | None] | None = None, skip: Sequence[str] = ()
) -> tuple[pa.Table, list[int]] | None:
    """The entries of several manifests, in order, as one table, and how many each holds; None
    when the extension is missing, the writer schema holds a type it does not decode, or the
    headers' metadata differ (one writer's manifests share them). One call for all: the
    blocks are read where they lie, with the GIL released, where joining them under one header
    first walked every block in Python (~1 ms for a manifest of one-entry blocks). A damaged
    manifest raises :class:`CorruptFileError` naming its ``locations`` entry. ``skip``: as for
    :func:`decode_native`."""
    if _manifest_native is None:
        return None
    try:
        found = _manifest_native.decode_arrow_joined(datas, list(skip))
    except ValueError as e:
        index = getattr(e, "container", None)
        location = None
        if locations is not None and isinstance(index, int) and 0 <= index < len(locations):
            location = locations[index]
        raise CorruptFileError(f"manifest cannot be decoded: {e}", location=location) from None
    if isinstance(found, str):
        return None
    schema, array, counts = found
    batch = pa.record_batch(_Batch(schema, array))
    if batch.num_columns == 0:
        return (pa.table({}), counts) if batch.num_rows == 0 else None
    return pa.Table.from_batches([batch]), counts
