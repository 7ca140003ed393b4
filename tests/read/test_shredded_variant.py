"""Shredded variants reassembled as Parquet's VariantShredding.md says, on its own examples:
each reassembled value is decoded here (a decoder of the test's own) and compared with the
value the example stands for. Java's shredded files are read in tests/java/test_java_variant.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from typing import Any

import pyarrow as pa
import pytest

from aioiceberg.errors import CorruptFileError
from aioiceberg.read.shredded_variant import is_shredded_variant, unshred_variant

LONG = "a string that is longer than sixty-four bytes, so it is not a short string"


def metadata(*names: str) -> bytes:
    raw = [n.encode() for n in names]
    offsets = [0]
    for r in raw:
        offsets.append(offsets[-1] + len(r))
    return bytes([0x01, len(raw), *offsets]) + b"".join(raw)


def short(text: str) -> bytes:
    return bytes([(len(text) << 2) | 1]) + text.encode()


def one_field_object(field_id: int, raw: bytes) -> bytes:
    return bytes([0x02, 1, field_id, 0, len(raw)]) + raw


def decode(meta: bytes, value: bytes) -> Any:
    """A variant value as Python (dates as ``date``, timestamps as (kind, micros))."""
    size = ((meta[0] >> 6) & 3) + 1
    count = int.from_bytes(meta[1 : 1 + size], "little")
    offs = [int.from_bytes(meta[1 + size * (k + 1) : 1 + size * (k + 2)], "little") for k in range(count + 1)]
    base = 1 + size * (count + 2)
    names = [meta[base + offs[k] : base + offs[k + 1]].decode() for k in range(count)]

    def value_at(v: bytes) -> Any:
        basic, header = v[0] & 3, v[0] >> 2
        if basic == 1:
            return v[1 : 1 + header].decode()
        if basic in (2, 3):
            large = header & (0x10 if basic == 2 else 0x04)
            n_size = 4 if large else 1
            n = int.from_bytes(v[1 : 1 + n_size], "little")
            off_size = (header & 3) + 1
            id_size = ((header >> 2) & 3) + 1 if basic == 2 else 0
            ids_at = 1 + n_size
            offs_at = ids_at + n * id_size
            data = offs_at + (n + 1) * off_size
            o = [
                int.from_bytes(v[offs_at + k * off_size : offs_at + (k + 1) * off_size], "little")
                for k in range(n + 1)
            ]
            items = [value_at(v[data + o[k] :]) for k in range(n)]
            if basic == 3:
                return items
            keys = [
                names[int.from_bytes(v[ids_at + k * id_size : ids_at + (k + 1) * id_size], "little")]
                for k in range(n)
            ]
            assert keys == sorted(keys, key=str.encode), "object fields out of order"
            return dict(zip(keys, items, strict=True))
        body = v[1:]
        fixed = {3: "<b", 4: "<h", 5: "<i", 6: "<q", 7: "<d", 14: "<f"}
        if header in fixed:
            return struct.unpack_from(fixed[header], body)[0]
        if header in (0, 1, 2):
            return (None, True, False)[header]
        if header in (8, 9, 10):
            width = {8: 4, 9: 8, 10: 16}[header]
            unscaled = int.from_bytes(body[1 : 1 + width], "little", signed=True)
            return ("decimal", width, decimal.Decimal(unscaled).scaleb(-body[0]))
        if header == 11:
            return dt.date(1970, 1, 1) + dt.timedelta(days=struct.unpack_from("<i", body)[0])
        if header in (12, 13, 17, 18, 19):
            return (
                {12: "tz", 13: "ntz", 17: "time", 18: "tz_ns", 19: "ntz_ns"}[header],
                struct.unpack_from("<q", body)[0],
            )
        if header in (15, 16):
            (length,) = struct.unpack_from("<I", body)
            raw = body[4 : 4 + length]
            return raw if header == 15 else raw.decode()
        if header == 20:
            return uuid.UUID(bytes=body[:16])
        raise AssertionError(f"unknown primitive {header}")

    return value_at(value)


def decoded(arr: pa.Array) -> list[Any]:
    out = unshred_variant(arr).to_pylist()
    return [None if r is None else decode(r["metadata"], r["value"]) for r in out]


def field_group(typed: pa.DataType) -> pa.DataType:
    return pa.struct([pa.field("value", pa.binary()), pa.field("typed_value", typed)])


def variant_group(typed: pa.DataType) -> pa.DataType:
    return pa.struct(
        [
            pa.field("metadata", pa.binary(), nullable=False),
            pa.field("value", pa.binary()),
            pa.field("typed_value", typed),
        ]
    )


def test_the_specs_primitive_example() -> None:
    """``34, null, "n/a", 100`` shredded as int64."""
    m = metadata()
    arr = pa.array(
        [
            {"metadata": m, "value": None, "typed_value": 34},
            {"metadata": m, "value": b"\x00", "typed_value": None},
            {"metadata": m, "value": short("n/a"), "typed_value": None},
            {"metadata": m, "value": None, "typed_value": 100},
            None,
        ],
        variant_group(pa.int64()),
    )
    assert is_shredded_variant(arr.type)
    assert decoded(arr) == [34, None, "n/a", 100, None]


def test_the_specs_event_objects() -> None:
    """Fully and partially shredded objects, missing and null fields, a field of another
    type than its column, an empty object, a non-object and a null row."""
    m = metadata("email", "error_msg", "event_ts", "event_type", "click")
    fields = pa.struct(
        [
            pa.field("event_type", field_group(pa.string()), nullable=False),
            pa.field("event_ts", field_group(pa.timestamp("us", tz="UTC")), nullable=False),
        ]
    )

    def row(value: bytes | None, typed: dict[str, Any] | None) -> dict[str, Any]:
        return {"metadata": m, "value": value, "typed_value": typed}

    def f(value: bytes | None = None, typed: Any = None) -> dict[str, Any]:
        return {"value": value, "typed_value": typed}

    ts = dt.datetime.fromtimestamp(1729794114.937, dt.UTC)
    arr = pa.array(
        [
            row(None, {"event_type": f(typed="noop"), "event_ts": f(typed=ts)}),
            row(
                one_field_object(0, short("user@example.com")),
                {"event_type": f(typed="login"), "event_ts": f(typed=ts)},
            ),
            row(one_field_object(1, short("malformed: ...")), {"event_type": f(), "event_ts": f()}),
            row(short("malformed: not an object"), None),
            row(one_field_object(4, short("_button")), {"event_type": f(), "event_ts": f(typed=ts)}),
            row(None, {"event_type": f(value=b"\x00"), "event_ts": f(typed=ts)}),
            row(None, {"event_type": f(typed="noop"), "event_ts": f(value=short("2024-10-24"))}),
            row(None, {"event_type": f(), "event_ts": f()}),
            None,
            row(None, None),
        ],
        variant_group(fields),
    )
    micros = ("tz", 1729794114937000)
    assert decoded(arr) == [
        {"event_type": "noop", "event_ts": micros},
        {"event_type": "login", "event_ts": micros, "email": "user@example.com"},
        {"error_msg": "malformed: ..."},
        "malformed: not an object",
        {"event_ts": micros, "click": "_button"},
        {"event_type": None, "event_ts": micros},
        {"event_type": "noop", "event_ts": "2024-10-24"},
        {},
        None,
        None,  # a present group with nothing in it is Variant null
    ]


def test_the_specs_array_example_and_nested_objects() -> None:
    """``["comedy", "drama"], ["horror", null], [...], null``, then arrays of shredded objects."""
    m = metadata()
    tags = pa.list_(pa.field("element", field_group(pa.string()), nullable=False))
    arr = pa.array(
        [
            {
                "metadata": m,
                "value": None,
                "typed_value": [{"typed_value": "comedy"}, {"typed_value": "drama"}],
            },
            {"metadata": m, "value": None, "typed_value": [{"typed_value": "horror"}, {"value": b"\x00"}]},
            {"metadata": m, "value": b"\x00", "typed_value": None},
            {"metadata": m, "value": None, "typed_value": []},
        ],
        variant_group(tags),
    )
    assert decoded(arr) == [["comedy", "drama"], ["horror", None], None, []]

    m2 = metadata("k", "m")
    inner = pa.struct([pa.field("k", field_group(pa.int8()), nullable=False)])
    items = pa.list_(pa.field("element", field_group(inner), nullable=False))
    arr = pa.array(
        [
            {
                "metadata": m2,
                "value": None,
                "typed_value": [
                    {"typed_value": {"k": {"typed_value": 1}}},
                    {"value": one_field_object(1, short("x")), "typed_value": {"k": {"typed_value": 2}}},
                    {"value": short("plain"), "typed_value": None},
                ],
            },
        ],
        variant_group(items),
    )
    assert decoded(arr) == [[{"k": 1}, {"k": 2, "m": "x"}, "plain"]]


def test_every_shredded_primitive_type() -> None:
    m = metadata(*"abcdefghijklmn")
    kinds: dict[str, tuple[pa.DataType, Any, Any]] = {
        "a": (pa.bool_(), False, False),
        "b": (pa.int16(), -300, -300),
        "c": (pa.int32(), 70000, 70000),
        "d": (pa.float32(), 1.5, 1.5),
        "e": (pa.float64(), -2.25, -2.25),
        "f": (pa.decimal128(5, 2), decimal.Decimal("-123.45"), ("decimal", 4, decimal.Decimal("-123.45"))),
        "g": (
            pa.decimal128(15, 3),
            decimal.Decimal("123456789.123"),
            ("decimal", 8, decimal.Decimal("123456789.123")),
        ),
        "h": (
            pa.decimal128(30, 1),
            decimal.Decimal("10") ** 25,
            ("decimal", 16, decimal.Decimal("10") ** 25),
        ),
        "i": (pa.date32(), dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
        "j": (pa.timestamp("us"), dt.datetime(1970, 1, 1, 0, 0, 1), ("ntz", 1_000_000)),
        "k": (pa.time64("us"), dt.time(0, 0, 2), ("time", 2_000_000)),
        "l": (pa.binary(), b"\x00\x01", b"\x00\x01"),
        "m": (pa.string(), LONG, LONG),
        "n": (pa.binary(16), uuid.UUID(int=7).bytes, uuid.UUID(int=7)),
    }
    typed = pa.struct([pa.field(k, field_group(t), nullable=False) for k, (t, _, _) in kinds.items()])
    arr = pa.array(
        [
            {
                "metadata": m,
                "value": None,
                "typed_value": {k: {"typed_value": v} for k, (_, v, _) in kinds.items()},
            }
        ],
        variant_group(typed),
    )
    assert decoded(arr) == [{k: want for k, (_, _, want) in kinds.items()}]
    nanos = pa.array(
        [{"metadata": metadata(), "value": None, "typed_value": 5}],
        variant_group(pa.timestamp("ns", tz="UTC")),
    )
    assert decoded(nanos) == [("tz_ns", 5)]


def test_unshredded_groups_need_nothing_and_broken_ones_are_named() -> None:
    plain = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)])
    assert not is_shredded_variant(plain)
    fields = pa.struct([pa.field("x", field_group(pa.int32()), nullable=False)])
    arr = pa.array(
        [{"metadata": metadata("y"), "value": None, "typed_value": {"x": {"typed_value": 1}}}],
        variant_group(fields),
    )
    with pytest.raises(CorruptFileError, match="'x' is not in the metadata"):
        unshred_variant(arr)
