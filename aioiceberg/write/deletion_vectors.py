"""Deletion vectors (v3): the deleted positions of one data file as a Puffin blob.

A ``deletion-vector-v1`` blob is framed as Java's ``BitmapPositionDeleteIndex`` writes it
and ``read/deletes.py`` reads it: the length of magic + bitmap (u32 big-endian), the magic
``D1 D3 39 64``, the positions as a portable 64-bit roaring bitmap (u64 little-endian count
of 32-bit bitmaps, then per bitmap a u32 little-endian key and the portable 32-bit roaring
serialization; pyroaring's ``BitMap64`` writes exactly that), and a CRC-32 (big-endian) of
magic + bitmap. Blobs are stored uncompressed, with ``fields`` = the row-position column
and snapshot id and sequence number -1 (inherited from the manifest entry), as Java does.
One Puffin file holds the vectors of one change; each gets its own manifest entry.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import anyio.to_thread
import numpy as np
from pyroaring import BitMap64

from aioiceberg.errors import ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.puffin import DELETION_VECTOR_BLOB_TYPE, PuffinWriter
from aioiceberg.write.location_provider import LocationProvider

__all__ = ["DV_MAGIC", "ROW_POSITION_FIELD_ID", "encode_deletion_vector", "write_deletion_vectors"]

DV_MAGIC = b"\xd1\xd3\x39\x64"
ROW_POSITION_FIELD_ID = 2147483545
"""The reserved ``_pos`` metadata column: the one field a deletion vector covers."""

# Java keeps at most 2**31 - 1 32-bit bitmaps, keys 0 .. 2**31 - 2.
_MAX_POSITION = ((2**31 - 2) << 32) | 0xFFFFFFFF


def encode_deletion_vector(positions: np.ndarray) -> bytes:
    """The ``deletion-vector-v1`` blob for ``positions`` (any order, duplicates allowed)."""
    values = np.asarray(positions)
    if values.size and (int(values.min()) < 0 or int(values.max()) > _MAX_POSITION):
        raise ValidationError(f"deletion vector positions must lie in [0, {_MAX_POSITION}]")
    bitmap = BitMap64()
    bitmap.update(values.astype(np.uint64, copy=False))
    bitmap.run_optimize()  # Java run-length encodes before serializing
    body = DV_MAGIC + bitmap.serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


async def write_deletion_vectors(
    io: FileIO,
    location_provider: LocationProvider,
    vectors: Sequence[tuple[DataFile, np.ndarray]],
) -> list[DataFile]:
    """One Puffin file with a vector per data file; their delete-file entries, in order.

    Each entry carries the data file's spec and partition, ``referenced_data_file``, the
    blob's ``content_offset`` and ``content_size_in_bytes``, and the cardinality as
    ``record_count``; ``file_size_in_bytes`` is the whole Puffin file's.
    """
    if not vectors:
        return []
    paths = [f.file_path for f, _ in vectors]
    if len(set(paths)) != len(paths):
        raise ValidationError("one deletion vector per data file: a data file is named twice")

    def encode() -> tuple[bytes, list[tuple[int, int, int]]]:
        writer = PuffinWriter()
        blobs: list[tuple[int, int, int]] = []
        for f, positions in vectors:
            unique = np.unique(np.asarray(positions, dtype=np.int64))
            blob = writer.add_blob(
                DELETION_VECTOR_BLOB_TYPE,
                encode_deletion_vector(unique),
                fields=(ROW_POSITION_FIELD_ID,),
                snapshot_id=-1,
                sequence_number=-1,
                properties={"referenced-data-file": f.file_path, "cardinality": str(len(unique))},
            )
            blobs.append((blob.offset, blob.length, len(unique)))
        return writer.finish(), blobs

    data, blobs = await anyio.to_thread.run_sync(encode)
    location = location_provider.new_data_location(location_provider.new_file_name(extension="puffin"))
    await io.write(location, data)
    return [
        DataFile(
            content=DataFileContent.POSITION_DELETES,
            file_path=location,
            file_format=FileFormat.PUFFIN,
            partition=tuple(f.partition),
            record_count=cardinality,
            file_size_in_bytes=len(data),
            referenced_data_file=f.file_path,
            content_offset=offset,
            content_size_in_bytes=length,
            spec_id=f.spec_id,
        )
        for (f, _), (offset, length, cardinality) in zip(vectors, blobs, strict=True)
    ]
