"""A long manifest list's partition bounds read in bulk from the Arrow buffers agree with the
row-wise read, whatever the shapes: absent bounds, other widths, missing summaries, and
columns that are slices of bigger arrays."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from aioiceberg.spec.manifest.columnar_list import ManifestRows

SUMMARY = pa.struct(
    [
        ("contains_null", pa.bool_()),
        ("contains_nan", pa.bool_()),
        ("lower_bound", pa.binary()),
        ("upper_bound", pa.binary()),
    ]
)


def _bound(rnd: random.Random) -> bytes | None:
    if rnd.random() < 0.2:
        return None
    return bytes(rnd.getrandbits(8) for _ in range(rnd.choice([0, 2, 3, 4, 8])))


def _table(rnd: random.Random, n: int) -> pa.Table:
    partitions: list[list[dict[str, object]] | None] = []
    for _ in range(n):
        if rnd.random() < 0.1:
            partitions.append(None)  # a row without summaries
            continue
        partitions.append(
            [
                {
                    "contains_null": False,
                    "contains_nan": None,
                    "lower_bound": _bound(rnd),
                    "upper_bound": _bound(rnd),
                }
                for _ in range(rnd.choice([0, 1, 2, 3]))
            ]
        )
    return pa.table(
        {
            "manifest_path": [f"m{i}.avro" for i in range(n)],
            "manifest_length": [1] * n,
            "partition_spec_id": [0] * n,
            "added_snapshot_id": [1] * n,
            "partitions": pa.array(partitions, pa.list_(SUMMARY)),
        }
    )


@pytest.mark.parametrize("sliced", [False, True])
def test_bulk_bounds_agree_with_the_row_wise_read(sliced: bool) -> None:
    rnd = random.Random(7)
    for _ in range(60):
        table = _table(rnd, rnd.randint(1, 50))
        if sliced:  # a column that is a slice: its offsets start past the buffers' first value
            start = rnd.randint(0, table.num_rows - 1)
            table = table.slice(start, table.num_rows - start)
        rows = ManifestRows(table, 2)
        picked = np.array(sorted(rnd.sample(range(len(rows)), rnd.randint(0, len(rows)))), dtype=np.int64)
        for fields in (1, 2, 3):
            for position in range(fields):
                for upper in (False, True):
                    shaped_rows, raw = rows.partition_bounds(picked, position, upper, fields)
                    for width in (2, 4, 8):
                        bulk = rows.partition_bound_bytes(picked, position, upper, fields, width)
                        assert bulk is not None
                        shaped, lengths, joined = bulk
                        assert shaped.tolist() == shaped_rows
                        assert lengths.tolist() == [-1 if b is None else len(b) for b in raw]
                        assert joined == b"".join(b for b in raw if b is not None and len(b) == width)
