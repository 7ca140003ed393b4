"""A columnar manifest's rows, built for any subset of its entries (a plan's kept rows, in
file order, read from the whole map columns; rows repeated or out of order, taken first),
equal the entries fastavro's reader builds with the same stats: maps null, empty, of one
key or of several, for every choice of stats kept. Partition dates read as their integers."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
)
from aioiceberg.spec.manifest.columnar import columnar_available, open_columnar
from aioiceberg.spec.manifest.entry_rows import EntryRows
from aioiceberg.spec.manifest.fastavro_reader import iter_manifest_entries
from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import parse_transform
from aioiceberg.spec.types import LongType, NestedField, TimestampType
from aioiceberg.spec.values import to_bytes

pytestmark = pytest.mark.skipif(not columnar_available(), reason="needs the columnar decoder")

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestampType(), required=False),
    NestedField(3, "x", LongType(), required=False),
    schema_id=0,
)
SPEC = PartitionSpec(0, (PartitionField((2,), 1000, parse_transform("day"), "ts_day"),))
DAY_US = 86_400_000_000


def _stats(rng: random.Random, i: int) -> dict[int, int] | None:
    shape = rng.randrange(6)
    if shape == 0:
        return None  # a null map
    if shape == 1:
        return {}
    if shape == 2:
        return {2: i}
    return {k: i * 10 + k for k in rng.sample([1, 2, 3], rng.randrange(1, 4))}


def _bounds(rng: random.Random, i: int) -> dict[int, bytes] | None:
    found = _stats(rng, i)
    return None if found is None else {k: to_bytes(v, LongType()) for k, v in found.items()}


def _manifest(n: int, seed: int) -> tuple[bytes, ManifestFile]:
    rng = random.Random(seed)
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            DataFile(
                DataFileContent.DATA,
                f"s3://b/t/data/f{i}.parquet",
                FileFormat.PARQUET,
                (19000 + i % 3,),
                10 + i,
                1000 + i,
                column_sizes=_stats(rng, i),
                value_counts=_stats(rng, i),
                null_value_counts=_stats(rng, i),
                lower_bounds=_bounds(rng, i),
                upper_bounds=_bounds(rng, i),
                split_offsets=(4,) if i % 2 else None,
                spec_id=0,
            ),
        )
        for i in range(n)
    ]
    data, mf = write_manifest(entries, SPEC, SCHEMA, 2, 1, manifest_path="s3://b/t/metadata/m.avro")
    return data, dataclasses.replace(mf, sequence_number=1, min_sequence_number=1)


@pytest.mark.parametrize("wanted", [None, frozenset(), frozenset({2}), frozenset({1, 3}), frozenset({9})])
def test_rows_of_any_subset_equal_the_readers(wanted: frozenset[int] | None) -> None:
    data, mf = _manifest(120, 5)
    cm = open_columnar(data, mf, columns_needed=wanted, discard_deleted=True)
    assert cm is not None
    want = list(iter_manifest_entries(data, mf, columns_needed=wanted))
    rng = random.Random(11)
    subsets = [list(range(120)), [0], [119], [5, 6, 7, 50, 119], [3, 3, 9], [40, 2, 77]]
    # one range (a manifest's rows in a batch's columns): read from slices
    subsets += [list(range(10, 40)), list(range(60)), list(range(60, 120)), [7, 8]]
    subsets += [sorted(rng.sample(range(120), rng.randrange(1, 120))) for _ in range(20)]
    for rows in subsets:
        got = list(EntryRows(cm.built_rows(np.asarray(rows, dtype=np.int64), wanted), 0))
        assert got == [want[i] for i in rows], rows
    assert {e.data_file.partition for e in got} <= {(19000,), (19001,), (19002,)}
