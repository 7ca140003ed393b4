"""The compiled decoder's tables own their memory: they outlive the bytes they came from.

The decoder hands pyarrow one record batch through the Arrow C Data Interface, whose buffers
are the decoder's own vectors, freed by its release callback (on whichever thread drops the
last reference). A table read after its inputs are gone, or many decoded at once in threads,
must hold exactly what polars reads from the same bytes.
"""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from manifest_samples import small_manifests, write_sample

from aioiceberg.spec.manifest.columnar import _to_arrow
from aioiceberg.spec.manifest.native_decode import decode_native, native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="built without a Rust toolchain (no cargo)")


def _samples() -> list[bytes]:
    """Manifests with nulls, NaN, decimals, UUIDs, timestamps, maps and lists; v1 to v3."""
    out = [write_sample(v, codec)[0] for v in (1, 2, 3) for codec in ("deflate", "null")]
    return out + [data for data, _ in small_manifests()]


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables; NaN (unequal to itself in ``Table.equals``) compared by its repr."""
    return a.schema == b.schema and (a.equals(b) or repr(a.to_pylist()) == repr(b.to_pylist()))


def _values(data: bytes) -> tuple[pa.Schema, str]:
    """What a table holds, in Python objects (no memory shared with any table): polars' table
    where polars reads the manifest, else a table decoded and read at once (the comparisons
    with polars and fastavro in test_manifest_native.py cover those)."""
    try:
        table = _to_arrow(data, native=False)
    except Exception:  # polars cannot read v1 manifests and some v3 ones
        table = _decoded(data)
    return table.schema, repr(table.to_pylist())


def _decoded(data: bytes) -> pa.Table:
    table = decode_native(data)
    assert table is not None, "the native decoder declined a schema it should handle"
    return table


def test_a_table_outlives_the_bytes_and_the_decoders_objects() -> None:
    samples = _samples()
    want = [_values(data) for data in samples]
    # each from its own copy of the bytes, dropped (and collected) before the table is read
    tables = [_decoded(bytes(bytearray(data))) for data in samples]
    gc.collect()
    # churn the allocator: freed memory a table still pointed into would be reused here
    for _ in range(3):
        for data in samples:
            _decoded(bytes(data))
    gc.collect()
    for table, expected in zip(tables, want, strict=True):
        table.validate(full=True)
        assert (table.schema, repr(table.to_pylist())) == expected


def test_a_column_outlives_its_table() -> None:
    data = write_sample(2)[0]
    want = _decoded(data).column("data_file").to_pylist()
    table = _decoded(data)
    column = table.column("data_file").chunk(0)
    bounds = column.field("lower_bounds")
    del table
    gc.collect()
    column.validate(full=True)
    assert repr(column.to_pylist()) == repr(want)
    assert repr(bounds.to_pylist()) == repr([row["lower_bounds"] for row in want])


def test_tables_dropped_on_another_thread() -> None:
    samples = _samples()
    tables = [_decoded(data) for data in samples]
    # the release callbacks run on the thread that drops the last reference
    worker = threading.Thread(target=tables.clear)
    worker.start()
    worker.join()
    assert tables == []
    assert [(t.schema, repr(t.to_pylist())) for t in map(_decoded, samples)] == list(map(_values, samples))


def test_many_decodes_at_once_give_equal_tables() -> None:
    samples = _samples()
    want = [_decoded(data) for data in samples]
    jobs = samples * 20
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(_decoded, jobs))
    for table, expected in zip(got, want * 20, strict=True):
        assert _same(table, expected)
