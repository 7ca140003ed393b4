"""Puffin files: blobs of statistics or indexes plus a JSON footer describing them.

Layout (Puffin spec, version 1)::

    Magic Blob1 ... BlobN Magic FooterPayload FooterPayloadSize Flags Magic

Everything here is pure: readers take bytes and return model objects, the writer
returns bytes. A caller that reads from an object store fetches the last
``FOOTER_TRAILER_SIZE`` (or more) bytes first, asks :func:`footer_size_from_tail`
how many tail bytes the footer needs, then hands that tail to :func:`read_footer`
and fetches each blob's byte range for :func:`decompress_blob`.

The domain types (:class:`BlobMetadata`, :class:`PuffinFile`) use Python names;
the on-disk JSON shape (``snapshot-id``, ``compression-codec``, ...) lives only in
the ``*_to_json`` / ``*_from_json`` functions.
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import datasketches
import lz4.frame
import mmh3
import zstandard

from aioiceberg._version import __version__
from aioiceberg.errors import CorruptFileError, UnsupportedError, ValidationError
from aioiceberg.spec import values as single_value
from aioiceberg.spec.types import PrimitiveType

__all__ = [
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CREATED_BY_PROPERTY",
    "DEFAULT_CREATED_BY",
    "DELETION_VECTOR_BLOB_TYPE",
    "FOOTER_TRAILER_SIZE",
    "MAGIC",
    "MAX_BLOB_SIZE",
    "MAX_FOOTER_PAYLOAD_SIZE",
    "NDV_PROPERTY",
    "THETA_SKETCH_BLOB_TYPE",
    "BlobMetadata",
    "PuffinFile",
    "PuffinWriter",
    "blob_metadata_from_json",
    "blob_metadata_to_json",
    "build_theta_sketch",
    "decompress_blob",
    "footer_size_from_tail",
    "ndv_property",
    "puffin_file_from_json",
    "puffin_file_to_json",
    "read_blob",
    "read_footer",
    "sketch_input_bytes",
    "theta_sketch_estimate",
]

MAGIC: Final = b"PFA1"
"""Short for Puffin *Fratercula arctica*, version 1; starts the file and the footer."""

FOOTER_TRAILER_SIZE: Final = 12
"""FooterPayloadSize (4) + Flags (4) + Magic (4): the fixed-size end of every file."""

CODEC_LZ4: Final = "lz4"
CODEC_ZSTD: Final = "zstd"
_CODECS: Final = frozenset({CODEC_LZ4, CODEC_ZSTD})

THETA_SKETCH_BLOB_TYPE: Final = "apache-datasketches-theta-v1"
DELETION_VECTOR_BLOB_TYPE: Final = "deletion-vector-v1"
"""A v3 deletion vector: properties ``referenced-data-file`` and ``cardinality`` are required."""
NDV_PROPERTY: Final = "ndv"
CREATED_BY_PROPERTY: Final = "created-by"
DEFAULT_CREATED_BY: Final = f"aioiceberg {__version__}"

_FLAG_FOOTER_COMPRESSED: Final = 0x01
_KNOWN_FLAGS: Final = _FLAG_FOOTER_COMPRESSED

# Decompression sizes are capped so that a damaged or hostile length field cannot make
# the reader allocate unbounded memory; footers are small JSON, blobs may be large.
MAX_FOOTER_PAYLOAD_SIZE: Final = 64 * 1024 * 1024
MAX_BLOB_SIZE: Final = 2 * 1024 * 1024 * 1024

_INT32_MAX: Final = 2**31 - 1
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1


# --------------------------------------------------------------------------- model


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """Where one blob lives in the file and what it was computed from."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class PuffinFile:
    """The footer's ``FileMetadata``: every blob in the file plus file-level properties."""

    blobs: tuple[BlobMetadata, ...]
    properties: dict[str, str] = field(default_factory=dict, hash=False)

    def blobs_of_type(self, blob_type: str) -> tuple[BlobMetadata, ...]:
        return tuple(b for b in self.blobs if b.type == blob_type)


# --------------------------------------------------------------------------- JSON shape


def blob_metadata_to_json(blob: BlobMetadata) -> dict[str, Any]:
    """On-disk ``BlobMetadata`` object; optional keys are left out when unset, as Java does."""
    out: dict[str, Any] = {
        "type": blob.type,
        "fields": list(blob.fields),
        "snapshot-id": blob.snapshot_id,
        "sequence-number": blob.sequence_number,
        "offset": blob.offset,
        "length": blob.length,
    }
    if blob.compression_codec is not None:
        out["compression-codec"] = blob.compression_codec
    if blob.properties:
        out["properties"] = dict(blob.properties)
    return out


def puffin_file_to_json(footer: PuffinFile) -> dict[str, Any]:
    out: dict[str, Any] = {"blobs": [blob_metadata_to_json(b) for b in footer.blobs]}
    if footer.properties:
        out["properties"] = dict(footer.properties)
    return out


def _corrupt(message: str, location: str | None) -> CorruptFileError:
    return CorruptFileError(message, location=location)


def _req_long(obj: Mapping[str, Any], key: str, where: str, location: str | None) -> int:
    if key not in obj:
        raise _corrupt(f"{where}: missing required field {key!r}", location)
    value = obj[key]
    # bool is an int subclass in Python but never a JSON long.
    if type(value) is not int or not _LONG_MIN <= value <= _LONG_MAX:
        raise _corrupt(f"{where}: field {key!r} must be a long, got {value!r:.80}", location)
    return value


def _string_map(value: Any, where: str, location: str | None) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _corrupt(f"{where}: 'properties' must be an object of string values", location)
    return dict(value)


def blob_metadata_from_json(obj: Any, *, index: int = 0, location: str | None = None) -> BlobMetadata:
    """Validate one on-disk ``BlobMetadata`` object; unknown keys are ignored for forward compatibility."""
    where = f"footer blob {index}"
    if not isinstance(obj, dict):
        raise _corrupt(f"{where}: expected a JSON object, got {type(obj).__name__}", location)
    blob_type = obj.get("type")
    if not isinstance(blob_type, str):
        raise _corrupt(f"{where}: field 'type' must be a string", location)
    fields = obj.get("fields")
    if not isinstance(fields, list) or not all(
        type(f) is int and -(2**31) <= f <= _INT32_MAX for f in fields
    ):
        raise _corrupt(f"{where}: field 'fields' must be a list of ints", location)
    offset = _req_long(obj, "offset", where, location)
    length = _req_long(obj, "length", where, location)
    if offset < 0 or length < 0:
        raise _corrupt(f"{where}: negative offset {offset} or length {length}", location)
    codec = obj.get("compression-codec")
    if codec is not None:
        if not isinstance(codec, str):
            raise _corrupt(f"{where}: 'compression-codec' must be a string", location)
        if codec not in _CODECS:
            # The spec forbids codecs other than lz4 and zstd, so this is a broken file,
            # not a newer feature.
            raise _corrupt(
                f"{where}: unknown compression codec {codec!r} (allowed: lz4, zstd or none)", location
            )
    return BlobMetadata(
        type=blob_type,
        fields=tuple(fields),
        snapshot_id=_req_long(obj, "snapshot-id", where, location),
        sequence_number=_req_long(obj, "sequence-number", where, location),
        offset=offset,
        length=length,
        compression_codec=codec,
        properties=_string_map(obj.get("properties", {}), where, location),
    )


def puffin_file_from_json(obj: Any, *, location: str | None = None) -> PuffinFile:
    if not isinstance(obj, dict):
        raise _corrupt("footer payload must be a JSON object", location)
    blobs = obj.get("blobs")
    if not isinstance(blobs, list):
        raise _corrupt("footer payload: required field 'blobs' must be a list", location)
    return PuffinFile(
        blobs=tuple(blob_metadata_from_json(b, index=i, location=location) for i, b in enumerate(blobs)),
        properties=_string_map(obj.get("properties", {}), "footer", location),
    )


# --------------------------------------------------------------------------- codecs


def _compress(data: bytes, codec: str | None) -> bytes:
    if codec is None:
        return data
    if codec == CODEC_LZ4:
        # The spec requires a single frame with the content size present.
        return bytes(lz4.frame.compress(data, store_size=True))
    if codec == CODEC_ZSTD:
        return bytes(zstandard.ZstdCompressor(write_content_size=True).compress(data))
    raise UnsupportedError(f"unsupported Puffin compression codec {codec!r} (allowed: lz4, zstd or none)")


def _decompress(raw: bytes, codec: str | None, limit: int, what: str, location: str | None) -> bytes:
    if codec is None:
        return raw
    if codec == CODEC_LZ4:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        try:
            out = bytes(decompressor.decompress(raw, max_length=limit + 1))
        except (RuntimeError, ValueError, MemoryError, OverflowError) as exc:
            raise _corrupt(f"{what}: invalid LZ4 frame: {exc}", location) from exc
        if len(out) > limit:
            raise _corrupt(f"{what}: LZ4 frame decompresses to more than {limit} bytes", location)
        if not decompressor.eof or decompressor.unused_data:
            raise _corrupt(f"{what}: not exactly one complete LZ4 frame", location)
        return out
    if codec == CODEC_ZSTD:
        try:
            size = zstandard.frame_content_size(raw)
        except zstandard.ZstdError as exc:
            raise _corrupt(f"{what}: invalid Zstandard frame: {exc}", location) from exc
        if size < 0:
            raise _corrupt(f"{what}: Zstandard frame lacks the content size the spec requires", location)
        if size > limit:
            raise _corrupt(f"{what}: Zstandard frame claims {size} bytes, over the {limit} limit", location)
        try:
            return bytes(zstandard.ZstdDecompressor().decompress(raw, allow_extra_data=False))
        except (zstandard.ZstdError, MemoryError) as exc:
            raise _corrupt(f"{what}: invalid Zstandard frame: {exc}", location) from exc
    raise _corrupt(f"{what}: unknown compression codec {codec!r}", location)


# --------------------------------------------------------------------------- reading


def footer_size_from_tail(tail: bytes, *, location: str | None = None) -> int:
    """Bytes at the end of the file the whole footer occupies, leading footer magic included.

    ``tail`` is any suffix of the file at least ``FOOTER_TRAILER_SIZE`` long. This is
    also the ``file-footer-size-in-bytes`` of a table's statistics-file entry.
    """
    if len(tail) < FOOTER_TRAILER_SIZE:
        raise _corrupt(
            f"truncated Puffin file: need at least {FOOTER_TRAILER_SIZE} trailing bytes, got {len(tail)}",
            location,
        )
    if tail[-4:] != MAGIC:
        raise _corrupt(f"bad magic at end of Puffin file: expected {MAGIC!r}, got {tail[-4:]!r}", location)
    payload_size = int.from_bytes(tail[-FOOTER_TRAILER_SIZE:-8], "little", signed=True)
    if payload_size < 0:
        raise _corrupt(f"bad footer payload size {payload_size}: negative", location)
    return len(MAGIC) + payload_size + FOOTER_TRAILER_SIZE


def read_footer(data: bytes, *, file_size: int | None = None, location: str | None = None) -> PuffinFile:
    """Parse and validate the footer from the file's last bytes (or the whole file).

    ``data`` must end at the end of the file. When ``file_size`` is omitted, ``data``
    is taken to be the whole file. Blob ranges are checked against the file size so
    that a later ranged read cannot run past the blob area.
    """
    if file_size is None:
        file_size = len(data)
    if len(data) > file_size:
        raise ValidationError(f"got {len(data)} tail bytes for a file of {file_size} bytes")
    footer_size = footer_size_from_tail(data, location=location)
    footer_start = file_size - footer_size
    if footer_start < len(MAGIC):
        raise _corrupt(
            f"bad footer payload size: footer of {footer_size} bytes does not fit in a file of "
            f"{file_size} bytes after the leading magic",
            location,
        )
    if len(data) < footer_size:
        raise ValidationError(
            f"{location or 'Puffin file'}: tail of {len(data)} bytes is shorter than the "
            f"{footer_size}-byte footer; fetch footer_size_from_tail() bytes"
        )
    if len(data) == file_size and data[:4] != MAGIC:
        raise _corrupt(f"bad magic at start of Puffin file: expected {MAGIC!r}, got {data[:4]!r}", location)
    footer = data[len(data) - footer_size :]
    if footer[:4] != MAGIC:
        raise _corrupt(
            f"bad magic at start of footer (offset {footer_start}): expected {MAGIC!r}, got {footer[:4]!r}",
            location,
        )
    flags = footer[-8:-4]
    if flags[0] & ~_KNOWN_FLAGS or any(flags[1:]):
        raise UnsupportedError(
            f"{location + ': ' if location else ''}unsupported Puffin footer flags {flags.hex()} "
            "(only bit 0 of byte 0, footer compressed, is known)"
        )
    payload = footer[4:-FOOTER_TRAILER_SIZE]
    if flags[0] & _FLAG_FOOTER_COMPRESSED:
        payload = _decompress(payload, CODEC_LZ4, MAX_FOOTER_PAYLOAD_SIZE, "footer payload", location)
    try:
        obj = json.loads(payload.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _corrupt(f"footer payload is not valid UTF-8 JSON: {exc}", location) from exc
    result = puffin_file_from_json(obj, location=location)
    for i, blob in enumerate(result.blobs):
        if blob.offset < len(MAGIC) or blob.offset + blob.length > footer_start:
            raise _corrupt(
                f"footer blob {i}: range [{blob.offset}, {blob.offset + blob.length}) lies outside "
                f"the blob area [{len(MAGIC)}, {footer_start})",
                location,
            )
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decompress_blob(
    raw: bytes, blob: BlobMetadata, *, location: str | None = None, max_size: int = MAX_BLOB_SIZE
) -> bytes:
    """Blob contents from exactly the ``blob.length`` stored bytes (for ranged reads)."""
    if len(raw) != blob.length:
        raise _corrupt(
            f"truncated blob at offset {blob.offset}: expected {blob.length} bytes, got {len(raw)}", location
        )
    return _decompress(raw, blob.compression_codec, max_size, f"blob at offset {blob.offset}", location)


def read_blob(
    data: bytes, blob: BlobMetadata, *, location: str | None = None, max_size: int = MAX_BLOB_SIZE
) -> bytes:
    """Blob contents out of the whole file's bytes."""
    end = blob.offset + blob.length
    if blob.offset < 0 or end > len(data):
        raise _corrupt(
            f"truncated Puffin file: blob [{blob.offset}, {end}) runs past the end ({len(data)} bytes)",
            location,
        )
    return decompress_blob(data[blob.offset : end], blob, location=location, max_size=max_size)


# --------------------------------------------------------------------------- writing


class PuffinWriter:
    """Accumulates blobs and produces a complete Puffin file as bytes.

    After :meth:`finish`, ``footer_size`` and ``file_size`` hold the numbers a table's
    statistics-file entry needs.
    """

    def __init__(
        self,
        *,
        compress_footer: bool = False,
        created_by: str | None = DEFAULT_CREATED_BY,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        # Footer compression defaults off: PyIceberg 0.12 cannot read compressed footers.
        self._compress_footer = compress_footer
        self._properties = dict(properties or {})
        if created_by is not None:
            self._properties.setdefault(CREATED_BY_PROPERTY, created_by)
        self._chunks: list[bytes] = [MAGIC]
        self._position = len(MAGIC)
        self._blobs: list[BlobMetadata] = []
        self._result: bytes | None = None
        self.footer_size: int | None = None

    @property
    def blobs(self) -> tuple[BlobMetadata, ...]:
        return tuple(self._blobs)

    @property
    def file_size(self) -> int | None:
        return None if self._result is None else len(self._result)

    def add_blob(
        self,
        blob_type: str,
        data: bytes,
        *,
        fields: Sequence[int],
        snapshot_id: int,
        sequence_number: int,
        compression_codec: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> BlobMetadata:
        """Append one blob, compressed with ``compression_codec``; returns its footer entry."""
        if self._result is not None:
            raise ValidationError("PuffinWriter already finished")
        if compression_codec is not None and compression_codec not in _CODECS:
            raise UnsupportedError(
                f"unsupported Puffin compression codec {compression_codec!r} (allowed: lz4, zstd or none)"
            )
        stored = _compress(bytes(data), compression_codec)
        blob = BlobMetadata(
            type=blob_type,
            fields=tuple(fields),
            snapshot_id=snapshot_id,
            sequence_number=sequence_number,
            offset=self._position,
            length=len(stored),
            compression_codec=compression_codec,
            properties=dict(properties or {}),
        )
        self._chunks.append(stored)
        self._position += len(stored)
        self._blobs.append(blob)
        return blob

    def add_theta_sketch(
        self,
        values: Iterable[object],
        *,
        field_id: int,
        snapshot_id: int,
        sequence_number: int,
        value_type: PrimitiveType | None = None,
        compression_codec: str | None = None,
    ) -> BlobMetadata:
        """Append an ``apache-datasketches-theta-v1`` blob for one column, with its ``ndv`` property."""
        sketch = build_theta_sketch(values, value_type=value_type)
        return self.add_blob(
            THETA_SKETCH_BLOB_TYPE,
            sketch,
            fields=(field_id,),
            snapshot_id=snapshot_id,
            sequence_number=sequence_number,
            compression_codec=compression_codec,
            properties={NDV_PROPERTY: ndv_property(theta_sketch_estimate(sketch))},
        )

    def finish(self) -> bytes:
        """The complete file; calling it again returns the same bytes."""
        if self._result is not None:
            return self._result
        footer = PuffinFile(blobs=tuple(self._blobs), properties=dict(self._properties))
        payload = json.dumps(puffin_file_to_json(footer), separators=(",", ":"), ensure_ascii=False).encode()
        flags = 0
        if self._compress_footer:
            payload = _compress(payload, CODEC_LZ4)
            flags |= _FLAG_FOOTER_COMPRESSED
        if len(payload) > _INT32_MAX:
            raise ValidationError("Puffin footer payload exceeds the 4-byte size field")
        trailer = struct.pack("<i4B", len(payload), flags, 0, 0, 0) + MAGIC
        self._chunks += [MAGIC, payload, trailer]
        self.footer_size = len(MAGIC) + len(payload) + len(trailer)
        self._result = b"".join(self._chunks)
        self._chunks = []
        return self._result


# --------------------------------------------------------------------------- theta sketches
#
# The spec feeds the sketch "individual distinct values converted to bytes using
# Iceberg's single-value serialization", with the default seed. Iceberg Java does
# exactly that: UpdateSketch.update(Conversions.toByteBuffer(type, value)), which
# hashes the serialized bytes with MurmurHash3_x64_128. The datasketches Python
# binding cannot hash arbitrary bytes (its update() takes int, float or str and
# hashes an int as 8 bytes, so a 4-byte Iceberg int would hash differently), so the
# hashes are computed here with mmh3 and the compact sketch is serialized in the
# DataSketches compact format (serial version 3). The result is byte-identical to
# datasketches' update_theta_sketch(lg_k=12) -> trim() -> compact() fed the same
# bytes, and datasketches reads it back for the estimate.

_THETA_SEED: Final = 9001
_THETA_LG_K: Final = 12
_THETA_MAX: Final = _LONG_MAX
_THETA_SEED_HASH: Final = mmh3.hash64(struct.pack("<q", _THETA_SEED), seed=0, signed=False)[0] & 0xFFFF
_THETA_SERIAL_VERSION: Final = 3
_THETA_FAMILY_COMPACT: Final = 3
_THETA_FLAGS: Final = 0x02 | 0x08 | 0x10  # read-only, compact, ordered
_THETA_FLAG_EMPTY: Final = 0x04


def sketch_input_bytes(value: object, value_type: PrimitiveType | None = None) -> bytes:
    """Iceberg binary single-value serialization of ``value``: the bytes a theta sketch hashes.

    ``bytes`` are taken as already serialized. With ``value_type`` the column's type
    decides the form (``int``, ``date`` and ``float`` are 4 bytes; dates, times and
    timestamps are given as int day/micro/nano counts), via ``spec.values.to_bytes``.
    Without it: ``bool`` is one byte, ``int`` a long (8 bytes little-endian),
    ``float`` a double, ``str`` UTF-8, ``uuid.UUID`` 16 bytes big-endian. For int,
    date and float columns pass ``value_type`` (or bytes), or the sketch will not
    match other engines' sketches of the same column.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if value_type is not None:
        return single_value.to_bytes(value, value_type)
    if isinstance(value, bool):
        return b"\x01" if value else b"\x00"
    if isinstance(value, int):
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise ValidationError(f"int {value} does not fit an Iceberg long; pass value_type or bytes")
        return struct.pack("<q", value)
    if isinstance(value, float):
        return struct.pack("<d", value)
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(f"string sketch input is not valid Unicode: {exc}") from exc
    if isinstance(value, uuid.UUID):
        return value.bytes
    raise ValidationError(
        f"cannot serialize {type(value).__name__} {value!r:.80} as a sketch input; pass value_type or bytes"
    )


def build_theta_sketch(
    values: Iterable[object], *, value_type: PrimitiveType | None = None, lg_k: int = _THETA_LG_K
) -> bytes:
    """Serialized compact theta sketch of ``values`` (``None`` values are skipped, as nulls are).

    Keeps the ``2**lg_k`` smallest hashes and sets theta to the next one, which is what
    a DataSketches update sketch holds after ``trim()``: deterministic whatever the
    input order. Memory stays bounded by pruning whenever twice that many accumulate.
    """
    if not 4 <= lg_k <= 26:
        raise ValidationError(f"theta sketch lg_k must be in 4..26, got {lg_k}")
    k = 1 << lg_k
    theta = _THETA_MAX
    kept: set[int] = set()
    for value in values:
        if value is None:
            continue
        data = sketch_input_bytes(value, value_type)
        if not data:
            continue  # DataSketches ignores empty input; so does Iceberg Java
        h = mmh3.hash64(data, seed=_THETA_SEED, signed=False)[0] >> 1
        if h == 0 or h >= theta:
            continue
        kept.add(h)
        if len(kept) > 2 * k:
            ordered = sorted(kept)
            theta = ordered[k]
            kept = set(ordered[:k])
    hashes = sorted(kept)
    if len(hashes) > k:
        theta = hashes[k]
        hashes = hashes[:k]
    return _serialize_compact(hashes, theta)


def _serialize_compact(hashes: list[int], theta: int) -> bytes:
    """DataSketches compact theta sketch, serial version 3, ordered, uncompressed."""
    if not hashes and theta == _THETA_MAX:
        pre_longs, flags = 1, _THETA_FLAGS | _THETA_FLAG_EMPTY
    elif len(hashes) == 1 and theta == _THETA_MAX:
        pre_longs, flags = 1, _THETA_FLAGS
    elif theta == _THETA_MAX:
        pre_longs, flags = 2, _THETA_FLAGS
    else:
        pre_longs, flags = 3, _THETA_FLAGS
    out = bytearray(
        struct.pack(
            "<BBBBBBH", pre_longs, _THETA_SERIAL_VERSION, _THETA_FAMILY_COMPACT, 0, 0, flags, _THETA_SEED_HASH
        )
    )
    if pre_longs >= 2:
        out += struct.pack("<Ii", len(hashes), 0)
    if pre_longs == 3:
        out += struct.pack("<Q", theta)
    out += struct.pack(f"<{len(hashes)}Q", *hashes)
    return bytes(out)


def theta_sketch_estimate(sketch: bytes, *, location: str | None = None) -> float:
    """Distinct-value estimate of a serialized theta sketch blob (decompressed)."""
    try:
        compact = datasketches.compact_theta_sketch.deserialize(bytes(sketch), _THETA_SEED)
        estimate = float(compact.get_estimate())
    except (RuntimeError, ValueError, LookupError, MemoryError) as exc:
        raise _corrupt(f"invalid {THETA_SKETCH_BLOB_TYPE} blob: {exc}", location) from exc
    if not math.isfinite(estimate) or estimate < 0:
        raise _corrupt(f"invalid {THETA_SKETCH_BLOB_TYPE} blob: estimate {estimate}", location)
    return estimate


def ndv_property(estimate: float) -> str:
    """The ``ndv`` blob property: the estimate truncated to a long, as Iceberg Java and Trino write it."""
    return str(int(estimate))
