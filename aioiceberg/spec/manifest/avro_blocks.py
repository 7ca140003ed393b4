"""Re-block an Avro container: every record under one header in few big uncompressed blocks.

``polars.read_avro`` pays a fixed cost per data block. PyIceberg writes one manifest entry
per block, which makes polars several times slower there than fastavro; Java's ~64 KB
blocks cost it less, but still something. Inflating the blocks and joining their record
bytes is cheap next to decoding them, so :func:`reblock` hands the decoder the same records
in as few blocks as it can.

The result is a fast path's input, never an authority: anything unexpected in the bytes
(a marker that differs, a count or size out of range, a length not consumed exactly, a
stream cut short, a codec not handled here) is None, and the caller
decodes the original bytes, whose reader says what is wrong. Record boundaries inside a
block are not checked (that takes decoding): where a block holds more records than its count
says, fastavro and polars skip the extra ones, but in the joined block they are read and the
records after them shift.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

__all__ = ["MAX_BLOCK_BYTES", "first_block_rows", "header_length", "read_long", "reblock"]

# The uncompressed record bytes of one output block before a new one starts: a decoder holds a
# block at once, and a block this big already costs polars nothing per block worth saving.
MAX_BLOCK_BYTES = 8 << 20

_MAGIC = b"Obj\x01"
_CODEC_KEY = b"avro.codec"


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """An Avro zig-zag varint at ``pos``: (value, next position); IndexError when truncated."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _inflate_raw(block: bytes) -> bytes | None:
    """Avro's ``deflate``: one raw DEFLATE stream (RFC 1951), which must be complete. Bytes
    after its end are ignored, as fastavro, polars and PyIceberg ignore them: PyIceberg leaves
    three bytes of zlib's checksum there."""
    try:
        return zlib.decompress(block, -15)
    except zlib.error:
        return None


def _as_is(block: bytes) -> bytes | None:
    return block


_CODECS: dict[bytes, Callable[[bytes], bytes | None]] = {b"null": _as_is, b"deflate": _inflate_raw}


def _long(value: int) -> bytes:
    """An Avro zig-zag varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _metadata(data: bytes) -> tuple[list[tuple[bytes, bytes]], int] | None:
    """The header's metadata map in file order and where the map ends; None if malformed."""
    items: list[tuple[bytes, bytes]] = []
    pos = 4
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            return items, pos
        if count < 0:  # a block of the map written with its byte size
            count = -count
            _, pos = read_long(data, pos)
        for _ in range(count):
            pair: list[bytes] = []
            for _ in range(2):
                length, pos = read_long(data, pos)
                if length < 0 or pos + length > len(data):
                    return None
                pair.append(data[pos : pos + length])
                pos += length
            items.append((pair[0], pair[1]))


def first_block_rows(data: bytes) -> int | None:
    """How many records the container's first data block holds (None: not well formed, or
    no block): a hint of its layout, read from the header and one varint."""
    end = header_length(data)
    if end is None or end + 16 >= len(data):
        return None
    try:
        count, _ = read_long(data, end + 16)  # past the sync marker
    except (IndexError, ValueError):
        return None
    return count if count >= 0 else None


def header_length(data: bytes) -> int | None:
    """How many bytes the magic and metadata take (the sync marker follows them), or None when
    ``data`` is not well formed that far: one writer's manifests share those bytes, so they
    group manifests a joined decode takes, without walking a block."""
    try:
        if data[:4] != _MAGIC:
            return None
        pos = 4
        while True:
            count, pos = read_long(data, pos)
            if count == 0:
                break
            if count < 0:  # a block of the map written with its byte size
                count = -count
                _, pos = read_long(data, pos)
            for _ in range(2 * count):  # key, value
                length, pos = read_long(data, pos)
                if length < 0:
                    return None
                pos += length
    except (IndexError, ValueError):
        return None
    return pos if pos + 16 <= len(data) else None


def _header(items: list[tuple[bytes, bytes]]) -> bytes:
    """The magic and ``items`` as one map block, ``avro.codec`` set to ``null``."""
    parts = [_MAGIC, _long(len(items))] if items else [_MAGIC]
    for key, value in items:
        if key == _CODEC_KEY:
            value = b"null"
        parts += (_long(len(key)), key, _long(len(value)), value)
    parts.append(b"\x00")
    return b"".join(parts)


def reblock(data: bytes, max_block_bytes: int = MAX_BLOCK_BYTES) -> bytes | None:
    """``data``'s records under its schema, metadata and sync marker, uncompressed
    (``avro.codec`` = ``null``), in one block (a new one after each ``max_block_bytes`` of
    records); None when ``data`` is not a container this can vouch for (see the module).

    One pass over the blocks, reading each count and size once (``avro_layout`` would read
    them a second time: on one-entry blocks that is a third of the work)."""
    try:
        return _reblock(data, max_block_bytes)
    except (IndexError, ValueError):  # a varint cut off or too long
        return None


def _reblock(data: bytes, max_block_bytes: int) -> bytes | None:
    if data[:4] != _MAGIC:
        return None
    found = _metadata(data)
    if found is None:
        return None
    items, pos = found
    codecs = [value for key, value in items if key == _CODEC_KEY]
    if len(codecs) > 1:
        return None
    inflate = _CODECS.get(codecs[0] if codecs else b"null")
    if inflate is None:  # snappy, zstandard, bzip2, xz: left to the decoder
        return None
    sync = data[pos : pos + 16]
    pos += 16
    if len(sync) != 16 or pos > len(data):
        return None
    out = [_header(items), sync]
    pending: list[bytes] = []
    rows = size = blocks = 0
    end = len(data)
    while pos < end:
        b = data[pos]  # count and size are mostly one- and two-byte varints: the first inline
        if b < 0x80:
            count, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            count, pos = read_long(data, pos)
        length, pos = read_long(data, pos)
        stop = pos + length
        if count < 0 or length < 0 or data[stop : stop + 16] != sync:
            return None
        records = inflate(data[pos:stop])
        pos = stop + 16
        blocks += 1
        if records is None or (count == 0 and records):
            return None
        if not count:
            continue
        if pending and size + len(records) > max_block_bytes:
            out += (_long(rows), _long(size), *pending, sync)
            pending.clear()
            rows = size = 0
        pending.append(records)
        rows += count
        size += len(records)
    if inflate is _as_is and blocks <= 1:
        return data  # nothing inflated, nothing joined
    if pending:
        out += (_long(rows), _long(size), *pending, sync)
    return b"".join(out)
