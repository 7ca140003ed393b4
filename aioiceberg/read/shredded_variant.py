"""Shredded variant columns reassembled into the unshredded ``metadata`` / ``value`` pair.

A writer may store parts of a variant in typed Parquet columns (``typed_value`` beside
``value``, Parquet's VariantShredding.md; Java's Parquet writer does with
``write.parquet.shred-variants``). Readers must put the value back together: a shredded
primitive is encoded as the variant primitive of its Parquet type, a shredded list as a
variant array, a shredded group as an object whose fields are the present shredded fields
merged with the residual object in ``value``. Field ids come from the row's own metadata
dictionary, which must name every field, shredded or not.

The work runs row by row in Python: shredding is a writer's choice we only need to undo
correctly, and the batches it touches are the variant columns of the files that have it.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from aioiceberg.errors import CorruptFileError

__all__ = ["is_shredded_variant", "unshred_variant"]

VARIANT_NULL = b"\x00"
_Encoded = bytes | None  # None: missing (no value here)


def is_shredded_variant(t: pa.DataType) -> bool:
    """Whether a variant group read from a file needs reassembly: it has ``typed_value``,
    or its ``value`` may be null."""
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if not pa.types.is_struct(t):
        return False
    names = [t.field(i).name for i in range(t.num_fields)]
    return "typed_value" in names or "value" not in names or t.field("value").nullable


def unshred_variant(arr: pa.Array, location: str = "variant") -> pa.StructArray:
    """``arr`` (a variant group: ``metadata``, optional ``value``, optional ``typed_value``) as
    ``struct<metadata, value>`` holding each row's whole variant; null where the group is."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    assert isinstance(arr, pa.StructArray)
    t = arr.type
    names = {t.field(i).name for i in range(t.num_fields)}
    if "metadata" not in names:
        raise CorruptFileError(f"{location}: the variant group has no metadata column")
    valid = arr.is_valid().to_pylist()
    children = _children(arr)
    metadata = _binary_list(children["metadata"])
    dictionaries = [
        _names(m, location) if ok and m is not None else {} for m, ok in zip(metadata, valid, strict=True)
    ]
    value = _binary_list(children["value"]) if "value" in names else [None] * len(arr)
    typed = (
        _encode_typed(children["typed_value"], dictionaries, location)
        if "typed_value" in names
        else [None] * len(arr)
    )
    whole: list[bytes | None] = []
    for i, ok in enumerate(valid):
        if not ok:
            whole.append(None)
            continue
        encoded = _merge(value[i], typed[i], dictionaries[i], location)
        whole.append(VARIANT_NULL if encoded is None else encoded)
    out_type = pa.struct(
        [pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary(), nullable=False)]
    )
    mask = pa.array([not ok for ok in valid], pa.bool_())
    meta_out = pa.array([m if m is not None else b"" for m in metadata], pa.binary())
    value_out = pa.array([w if w is not None else b"" for w in whole], pa.binary())
    return pa.StructArray.from_arrays([meta_out, value_out], fields=list(out_type), mask=mask)


def _children(arr: pa.StructArray) -> dict[str, pa.Array]:
    """A struct's children by name, null wherever the struct is (Arrow leaves the children's
    slots under a null struct undefined)."""
    t = arr.type
    return {t.field(k).name: child for k, child in enumerate(arr.flatten())}


def _binary_list(arr: pa.Array) -> list[bytes | None]:
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return [None if v is None else bytes(v) for v in arr.to_pylist()]


def _uint(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "little")


def _names(metadata: bytes, location: str) -> dict[str, int]:
    """The metadata dictionary: field name -> id."""
    if not metadata or metadata[0] & 0x0F != 1:
        raise CorruptFileError(f"{location}: variant metadata of an unknown version")
    size = ((metadata[0] >> 6) & 0x03) + 1
    count = _uint(metadata, 1, size)
    offsets = [_uint(metadata, 1 + size * (k + 1), size) for k in range(count + 1)]
    start = 1 + size * (count + 2)
    out: dict[str, int] = {}
    for k in range(count):
        out.setdefault(metadata[start + offsets[k] : start + offsets[k + 1]].decode(), k)
    return out


def _merge(value: bytes | None, typed: _Encoded | _Object, names: dict[str, int], location: str) -> _Encoded:
    """One slot's variant from its ``value`` and its typed form (either may be missing)."""
    if isinstance(typed, _Object):
        fields = dict(typed.fields)
        if value is not None:  # a partially shredded object: the residual holds the rest
            for field_id, raw in _object_fields(value, location):
                fields.setdefault(field_id, raw)
        return _object(fields, names, location)
    return typed if typed is not None else value


class _Object:
    """A shredded object's present fields (field id -> encoded value), residual not yet merged."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[int, bytes]) -> None:
        self.fields = fields


def _object_fields(value: bytes, location: str) -> list[tuple[int, bytes]]:
    if not value or value[0] & 0x03 != 2:
        raise CorruptFileError(f"{location}: a shredded object's residual value is not an object")
    header = value[0] >> 2
    offset_size = (header & 0x03) + 1
    id_size = ((header >> 2) & 0x03) + 1
    count_size = 4 if header & 0x10 else 1
    count = _uint(value, 1, count_size)
    ids_at = 1 + count_size
    offsets_at = ids_at + count * id_size
    data_at = offsets_at + (count + 1) * offset_size
    offsets = [_uint(value, offsets_at + k * offset_size, offset_size) for k in range(count + 1)]
    ids = [_uint(value, ids_at + k * id_size, id_size) for k in range(count)]
    ends = sorted(set(offsets))
    out = []
    for k in range(count):
        start = offsets[k]
        end = next((e for e in ends if e > start), offsets[count])
        out.append((ids[k], value[data_at + start : data_at + end]))
    return out


def _size_of(n: int) -> int:
    return 1 if n < 1 << 8 else 2 if n < 1 << 16 else 3 if n < 1 << 24 else 4


def _object(fields: dict[int, bytes], names: dict[str, int], location: str) -> bytes:
    by_id = {i: n for n, i in names.items()}
    try:
        ordered = sorted(fields.items(), key=lambda item: by_id[item[0]].encode())
    except KeyError as e:
        raise CorruptFileError(f"{location}: variant field id {e} is not in the metadata") from None
    data = b"".join(raw for _, raw in ordered)
    count = len(ordered)
    large = count > 0xFF
    id_size = _size_of(max((i for i, _ in ordered), default=0))
    offset_size = _size_of(len(data))
    header = (int(large) << 4) | ((id_size - 1) << 2) | (offset_size - 1)
    out = bytearray([(header << 2) | 2])
    out += count.to_bytes(4 if large else 1, "little")
    for field_id, _ in ordered:
        out += field_id.to_bytes(id_size, "little")
    at = 0
    for _, raw in ordered:
        out += at.to_bytes(offset_size, "little")
        at += len(raw)
    out += at.to_bytes(offset_size, "little")
    return bytes(out + data)


def _array(elements: Sequence[bytes]) -> bytes:
    data = b"".join(elements)
    count = len(elements)
    large = count > 0xFF
    offset_size = _size_of(len(data))
    header = (int(large) << 2) | (offset_size - 1)
    out = bytearray([(header << 2) | 3])
    out += count.to_bytes(4 if large else 1, "little")
    at = 0
    for raw in elements:
        out += at.to_bytes(offset_size, "little")
        at += len(raw)
    out += at.to_bytes(offset_size, "little")
    return bytes(out + data)


def _primitive(type_id: int, payload: bytes = b"") -> bytes:
    return bytes([type_id << 2]) + payload


def _string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) < 64:
        return bytes([(len(raw) << 2) | 1]) + raw
    return _primitive(16, struct.pack("<I", len(raw)) + raw)


def _decimal(value: decimal.Decimal, precision: int, scale: int) -> bytes:
    unscaled = int(value.scaleb(scale))
    type_id, width = (8, 4) if precision <= 9 else (9, 8) if precision <= 18 else (10, 16)
    return _primitive(type_id, bytes([scale]) + unscaled.to_bytes(width, "little", signed=True))


def _packer(type_id: int, fmt: str) -> Callable[[Any], bytes]:
    return lambda v: _primitive(type_id, struct.pack(fmt, v))


_INTS = {8: (3, "<b"), 16: (4, "<h"), 32: (5, "<i"), 64: (6, "<q")}


def _primitive_encoder(t: pa.DataType, location: str) -> tuple[Callable[[Any], bytes], pa.DataType | None]:
    """How to encode one typed value, and the type to cast the column to before reading it."""
    if pa.types.is_boolean(t):
        return (lambda v: _primitive(1 if v else 2)), None
    if pa.types.is_integer(t) and pa.types.is_signed_integer(t):
        type_id, fmt = _INTS[t.bit_width]
        return _packer(type_id, fmt), None
    if pa.types.is_float32(t):
        return _packer(14, "<f"), None
    if pa.types.is_float64(t):
        return _packer(7, "<d"), None
    if pa.types.is_decimal(t):
        precision, scale = t.precision, t.scale
        return (lambda v: _decimal(v, precision, scale)), None
    if pa.types.is_date32(t):
        return _packer(11, "<i"), pa.int32()
    if pa.types.is_time64(t) and t.unit == "us":
        return _packer(17, "<q"), pa.int64()
    if pa.types.is_timestamp(t) and t.unit in ("us", "ns"):
        zoned = t.tz is not None
        type_id = (12 if zoned else 13) if t.unit == "us" else (18 if zoned else 19)
        return _packer(type_id, "<q"), pa.int64()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _string, None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return (lambda v: _primitive(15, struct.pack("<I", len(v)) + bytes(v))), None
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return (lambda v: _primitive(20, bytes(v))), None
    raise CorruptFileError(f"{location}: a shredded variant's typed_value of type {t} has no variant type")


def _encode_typed(
    arr: pa.Array, dictionaries: Sequence[dict[str, int]], location: str
) -> list[_Encoded | _Object]:
    """Each slot's ``typed_value`` encoded (a primitive or array) or gathered (an object)."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    valid = arr.is_valid().to_pylist()
    if pa.types.is_struct(t):
        assert isinstance(arr, pa.StructArray)
        fields = [
            (name, _slot_values(child, dictionaries, location)) for name, child in _children(arr).items()
        ]
        out_obj: list[_Encoded | _Object] = []
        for i, ok in enumerate(valid):
            if not ok:
                out_obj.append(None)
                continue
            present: dict[int, bytes] = {}
            for name, values in fields:
                raw = values[i]
                if raw is None:
                    continue  # missing in this row
                field_id = dictionaries[i].get(name)
                if field_id is None:
                    raise CorruptFileError(
                        f"{location}: shredded variant field {name!r} is not in the metadata"
                    )
                present[field_id] = raw
            out_obj.append(_Object(present))
        return out_obj
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        assert isinstance(arr, pa.ListArray | pa.LargeListArray)
        lengths = arr.value_lengths().to_pylist()
        owners: list[dict[str, int]] = []
        spans: list[tuple[int, int]] = []
        for i, ok in enumerate(valid):
            n = lengths[i] if ok else 0
            spans.append((len(owners), len(owners) + n))
            owners.extend([dictionaries[i]] * n)
        elements = _slot_values(arr.flatten(), owners, location)  # the valid slots' elements
        out_arr: list[_Encoded | _Object] = []
        for i, ok in enumerate(valid):
            if not ok:
                out_arr.append(None)
                continue
            row = elements[spans[i][0] : spans[i][1]]
            out_arr.append(_array([VARIANT_NULL if e is None else e for e in row]))
        return out_arr
    encode, storage = _primitive_encoder(t, location)
    plain = arr.cast(storage) if storage is not None else arr
    return [None if v is None else encode(v) for v in plain.to_pylist()]


def _slot_values(group: pa.Array, dictionaries: Sequence[dict[str, int]], location: str) -> list[_Encoded]:
    """Each slot of a ``{value, typed_value}`` group (an object field or array element) as its
    encoded variant, or None where it is missing."""
    if isinstance(group, pa.ExtensionArray):
        group = group.storage
    if not pa.types.is_struct(group.type):
        raise CorruptFileError(f"{location}: a shredded variant field is {group.type}, not a group")
    assert isinstance(group, pa.StructArray)
    t = group.type
    names = {t.field(k).name for k in range(t.num_fields)}
    children = _children(group)
    value = _binary_list(children["value"]) if "value" in names else [None] * len(group)
    typed: list[_Encoded | _Object] = (
        _encode_typed(children["typed_value"], dictionaries, location)
        if "typed_value" in names
        else [None] * len(group)
    )
    return [_merge(value[i], typed[i], dictionaries[i], location) for i in range(len(group))]
