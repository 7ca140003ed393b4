"""Iceberg <-> Arrow schema conversion, checked against PyIceberg and real Parquet files."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_samples import PRIMITIVES, rich_schema, to_pyiceberg

from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.spec.arrow import (
    DOC_KEY,
    FIELD_ID_KEY,
    arrow_to_iceberg_type,
    arrow_to_schema,
    arrow_to_schema_assign_ids,
    arrow_type_for,
    field_id_of,
    schema_to_arrow,
)
from aioiceberg.spec.name_mapping import MappedField, NameMapping
from aioiceberg.spec.schema import Schema, assign_fresh_ids
from aioiceberg.spec.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
)

# ---------------------------------------------------------------------------
# Iceberg -> Arrow
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("iceberg", "arrow"), PRIMITIVES, ids=[str(t) for t, _ in PRIMITIVES])
def test_primitive_types(iceberg: PrimitiveType, arrow: pa.DataType) -> None:
    assert arrow_type_for(iceberg) == arrow
    assert arrow_to_iceberg_type(arrow) == iceberg


def test_large_types_option() -> None:
    assert arrow_type_for(StringType(), large_types=True) == pa.large_string()
    assert arrow_type_for(BinaryType(), large_types=True) == pa.large_binary()
    assert pa.types.is_large_list(arrow_type_for(ListType(1, IntegerType()), large_types=True))
    assert pa.types.is_list(arrow_type_for(ListType(1, IntegerType())))


def test_field_metadata_names_and_nullability() -> None:
    arrow = schema_to_arrow(rich_schema())
    first = arrow.field(0)
    assert first.metadata == {DOC_KEY: b"doc 0", FIELD_ID_KEY: b"1"}
    assert not first.nullable
    assert arrow.field(1).metadata == {FIELD_ID_KEY: b"2"}
    assert arrow.field(1).nullable

    tags = arrow.field("tags").type
    assert tags.value_field.name == "element"
    assert tags.value_field.metadata == {FIELD_ID_KEY: b"102"}
    assert not tags.value_field.nullable

    props = arrow.field("props").type
    assert isinstance(props, pa.MapType)
    assert props.key_field.name == "key" and props.item_field.name == "value"
    assert props.key_field.metadata == {FIELD_ID_KEY: b"106"}
    assert props.item_field.metadata == {FIELD_ID_KEY: b"107"}
    assert props.item_field.nullable


def test_without_field_ids() -> None:
    arrow = schema_to_arrow(rich_schema(), include_field_ids=False)

    def ids(t: pa.DataType) -> list[int | None]:
        out: list[int | None] = []
        for f in _children(t):
            out.append(field_id_of(f))
            out.extend(ids(f.type))
        return out

    assert all(i is None for f in arrow for i in [field_id_of(f), *ids(f.type)])
    assert arrow.field(0).metadata == {DOC_KEY: b"doc 0"}  # docs stay
    assert arrow_to_schema_assign_ids(arrow).fields[0].doc == "doc 0"


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    return []


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("large_types", [False, True])
def test_round_trip_every_type(large_types: bool) -> None:
    schema = rich_schema()
    back = arrow_to_schema(schema_to_arrow(schema, large_types=large_types))
    assert back.fields == schema.fields  # ids, names, types, required, docs
    assert back.schema_id == 0  # Arrow has no schema id


def test_round_trip_through_parquet_file() -> None:
    schema = rich_schema()
    buf = io.BytesIO()
    arrow = schema_to_arrow(schema)
    # Schema.empty_table cannot build the uuid extension type; nulls(0) can.
    pq.write_table(pa.table([pa.nulls(0, f.type) for f in arrow], schema=arrow), buf)
    buf.seek(0)
    file_schema = pq.read_schema(buf)
    assert arrow_to_schema(file_schema).fields == schema.fields
    # The Parquet schema itself carries the ids (not only the stored Arrow schema).
    buf.seek(0)
    parquet_schema = pq.ParquetFile(buf).schema
    assert parquet_schema.column(0).path == "c_boolean_0"
    assert "field_id=54" in str(parquet_schema)


def _iceberg_types(depth: int) -> st.SearchStrategy[IcebergType]:
    prim = st.sampled_from([t for t, _ in PRIMITIVES if not isinstance(t, UnknownType)])
    if depth == 0:
        return prim
    inner = _iceberg_types(depth - 1)
    struct = st.lists(st.tuples(inner, st.booleans()), min_size=1, max_size=3).map(
        lambda items: StructType(*(NestedField(-1, f"f{i}", t, r) for i, (t, r) in enumerate(items)))
    )
    lists = st.tuples(inner, st.booleans()).map(lambda x: ListType(-1, x[0], x[1]))
    maps = st.tuples(prim, inner, st.booleans()).map(lambda x: MapType(-1, x[0], -1, x[1], x[2]))
    return st.one_of(prim, struct, lists, maps)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_iceberg_types(2), st.booleans()), min_size=1, max_size=4), st.booleans())
def test_round_trip_random(cols: list[tuple[IcebergType, bool]], large: bool) -> None:
    schema = assign_fresh_ids(Schema(*(NestedField(-1, f"c{i}", t, r) for i, (t, r) in enumerate(cols))))
    arrow = schema_to_arrow(schema, large_types=large)
    assert arrow_to_schema(arrow).fields == schema.fields
    # Fresh ids from Arrow follow the same order as assign_fresh_ids.
    assert arrow_to_schema_assign_ids(arrow).fields == schema.fields


# ---------------------------------------------------------------------------
# Agreement with PyIceberg
# ---------------------------------------------------------------------------


def test_arrow_schema_equals_pyiceberg_with_large_types() -> None:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    ours = schema_to_arrow(rich_schema(), large_types=True)
    theirs = schema_to_pyarrow(to_pyiceberg(rich_schema()))
    assert ours.equals(theirs, check_metadata=True)
    for a, b in zip(ours, theirs, strict=True):
        assert a.metadata == b.metadata


def test_default_arrow_schema_differs_from_pyiceberg_only_in_offsets() -> None:
    """Intended difference: by default strings, binaries and lists use 32-bit offsets."""
    from pyiceberg.io.pyarrow import _pyarrow_schema_ensure_large_types, schema_to_pyarrow

    ours = schema_to_arrow(rich_schema())
    theirs = schema_to_pyarrow(to_pyiceberg(rich_schema()))
    assert not ours.equals(theirs)
    assert _pyarrow_schema_ensure_large_types(ours) == _pyarrow_schema_ensure_large_types(theirs)


@pytest.mark.parametrize("large_types", [False, True])
def test_pyiceberg_reads_our_arrow_schema(large_types: bool) -> None:
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    schema = rich_schema()
    theirs = pyarrow_to_schema(schema_to_arrow(schema, large_types=large_types), format_version=3)
    assert theirs == to_pyiceberg(Schema(*schema.fields))


def test_we_read_pyiceberg_arrow_schema() -> None:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = rich_schema()
    assert arrow_to_schema(schema_to_pyarrow(to_pyiceberg(schema))).fields == schema.fields


def test_fresh_ids_match_pyiceberg() -> None:
    from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
    from pyiceberg.schema import assign_fresh_schema_ids

    arrow = schema_to_arrow(rich_schema(), include_field_ids=False)
    theirs = assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(arrow, format_version=3))
    ours = arrow_to_schema_assign_ids(arrow)
    assert to_pyiceberg(ours) == theirs


# ---------------------------------------------------------------------------
# Arrow -> Iceberg: ids, name mapping, lenient types, errors
# ---------------------------------------------------------------------------


def _f(name: str, t: pa.DataType, fid: int | None = None, nullable: bool = True) -> pa.Field:
    return pa.field(
        name, t, nullable, metadata={FIELD_ID_KEY: str(fid).encode()} if fid is not None else None
    )


def test_missing_id_names_the_field() -> None:
    arrow = pa.schema([_f("a", pa.int32(), 1), _f("s", pa.struct([_f("inner", pa.int64())]), 2)])
    with pytest.raises(ValidationError, match=r"'s\.inner' has no field id"):
        arrow_to_schema(arrow)
    lst = pa.schema([_f("l", pa.list_(pa.int32()), 1)])  # element has no id
    with pytest.raises(ValidationError, match=r"'l\.element'"):
        arrow_to_schema(lst)


def test_missing_ids_filled_from_name_mapping_and_file_ids_win() -> None:
    arrow = pa.schema(
        [
            _f("a", pa.int32(), 7),
            _f("s", pa.struct([_f("inner", pa.int64())])),
            _f("m", pa.map_(pa.string(), pa.list_(pa.int32()))),
        ]
    )
    mapping = NameMapping(
        [
            MappedField(1, ("a",)),
            MappedField(2, ("s",), (MappedField(3, ("inner",)),)),
            MappedField(
                4,
                ("m",),
                (MappedField(5, ("key",)), MappedField(6, ("value",), (MappedField(8, ("element",)),))),
            ),
        ]
    )
    schema = arrow_to_schema(arrow, mapping)
    assert schema.find_field("a").field_id == 7
    assert schema.find_field("s.inner").field_id == 3
    assert schema.find_field("m").field_type == MapType(
        5, StringType(), 6, ListType(8, IntegerType(), False), False
    )

    partial = NameMapping([MappedField(1, ("a",))])
    with pytest.raises(ValidationError, match=r"'s' has no field id and the name mapping does not map it"):
        arrow_to_schema(arrow, partial)


def test_other_id_keys() -> None:
    orc = pa.schema([pa.field("a", pa.int32(), metadata={b"iceberg.id": b"9"})])
    assert arrow_to_schema(orc).fields[0].field_id == 9
    plain = pa.schema([pa.field("a", pa.int32(), metadata={b"field_id": b"9"})])
    with pytest.raises(ValidationError):  # neither pyarrow nor PyIceberg reads this key
        arrow_to_schema(plain)


def test_bad_and_duplicate_ids() -> None:
    with pytest.raises(ValidationError, match="non-integer field id"):
        arrow_to_schema(pa.schema([pa.field("a", pa.int32(), metadata={FIELD_ID_KEY: b"x"})]))
    with pytest.raises(ValidationError, match="appears twice"):
        arrow_to_schema(pa.schema([_f("a", pa.int32(), 1), _f("b", pa.int32(), 1)]))


LENIENT: list[tuple[pa.DataType, IcebergType]] = [
    (pa.int8(), IntegerType()),
    (pa.int16(), IntegerType()),
    (pa.uint8(), IntegerType()),
    (pa.uint16(), IntegerType()),
    (pa.uint32(), LongType()),
    (pa.float16(), FloatType()),
    (pa.large_string(), StringType()),
    (pa.string_view(), StringType()),
    (pa.large_binary(), BinaryType()),
    (pa.binary_view(), BinaryType()),
    (pa.dictionary(pa.int32(), pa.string()), StringType()),
    (pa.run_end_encoded(pa.int32(), pa.int64()), LongType()),
    (pa.timestamp("s"), TimestampType()),
    (pa.timestamp("ms"), TimestampType()),
    (pa.timestamp("ms", tz="Europe/Paris"), TimestamptzType()),
    (pa.timestamp("us", tz="+00:00"), TimestamptzType()),
    (pa.timestamp("ns", tz="America/New_York"), TimestamptzNanoType()),
    (pa.date64(), DateType()),
    (pa.time32("s"), TimeType()),
    (pa.time32("ms"), TimeType()),
    (pa.decimal32(5, 1), DecimalType(5, 1)),
    (pa.decimal64(15, 3), DecimalType(15, 3)),
    (pa.decimal256(20, 2), DecimalType(20, 2)),
    (pa.binary(16), FixedType(16)),
    (pa.list_(pa.int32(), 3), ListType(1, IntegerType(), False)),
    (pa.large_list(pa.field("x", pa.int32(), False)), ListType(1, IntegerType(), True)),
    (pa.list_view(pa.string()), ListType(1, StringType(), False)),
]


@pytest.mark.parametrize(("arrow", "iceberg"), LENIENT, ids=[str(a) for a, _ in LENIENT])
def test_lenient_arrow_types(arrow: pa.DataType, iceberg: IcebergType) -> None:
    assert arrow_to_iceberg_type(arrow) == iceberg


def test_assign_ids_ignores_existing_ids() -> None:
    arrow = pa.schema(
        [
            _f("a", pa.int32(), 50, nullable=False),
            _f("s", pa.struct([_f("x", pa.string(), 40), _f("l", pa.list_(pa.int64()), 41)]), 30),
            _f("b", pa.large_string(), 20),
        ]
    )
    schema = arrow_to_schema_assign_ids(arrow)
    assert schema == Schema(
        NestedField(1, "a", IntegerType(), True),
        NestedField(
            2,
            "s",
            StructType(
                NestedField(4, "x", StringType()), NestedField(5, "l", ListType(6, LongType(), False))
            ),
        ),
        NestedField(3, "b", StringType()),
    )


UNSUPPORTED: list[pa.DataType] = [
    pa.uint64(),
    pa.duration("us"),
    pa.month_day_nano_interval(),
    pa.time64("ns"),
    pa.decimal256(40, 2),
    pa.dense_union([pa.field("i", pa.int32())]),
    pa.bool8(),
]


@pytest.mark.parametrize("arrow", UNSUPPORTED, ids=[str(a) for a in UNSUPPORTED])
def test_unsupported_types_name_the_field(arrow: pa.DataType) -> None:
    nested = pa.schema([pa.field("outer", pa.struct([pa.field("bad", arrow)]))])
    with pytest.raises(UnsupportedError, match=r"'outer\.bad'"):
        arrow_to_schema_assign_ids(nested)
    with pytest.raises(UnsupportedError, match=r"'l\.element'"):
        arrow_to_schema_assign_ids(pa.schema([pa.field("l", pa.list_(arrow))]))
