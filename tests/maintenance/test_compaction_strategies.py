"""Compaction strategies: z-order byte forms and interleaving (hand-computed, as Java's
ZOrderByteUtils), the group planner's options, and sort / z-order rewrites whose output
files cover narrower ranges than their inputs (checked on the written files' bounds)."""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from compaction_helpers import SCHEMA, add_small_files, bounds, mean_width, sorted_rows
from maint_helpers import duckdb_connection, pyiceberg_table

import aioiceberg
from aioiceberg.errors import RewriteFailedError, UnsupportedError, ValidationError
from aioiceberg.maintenance.compaction_groups import FileGroup, RewriteOptions, batches, parse_sort_order
from aioiceberg.maintenance.zorder import (
    column_bytes,
    double_ordered_bytes,
    interleave_bits,
    long_ordered_bytes,
    string_ordered_bytes,
    zorder_keys,
)
from aioiceberg.spec.manifest import DataFile
from aioiceberg.table import Table


def hexes(values: pa.Array) -> list[str]:
    return [bytes(row).hex() for row in column_bytes(values)]


def test_whole_numbers_flip_the_sign_bit_in_eight_big_endian_bytes() -> None:
    assert long_ordered_bytes(0).hex() == "8000000000000000"
    assert long_ordered_bytes(1).hex() == "8000000000000001"
    assert long_ordered_bytes(-1).hex() == "7fffffffffffffff"
    assert long_ordered_bytes(-(2**63)).hex() == "0000000000000000"
    assert hexes(pa.array([5, -2, None], pa.int32())) == ["8000000000000005", "7ffffffffffffffe", "00" * 8]
    assert hexes(pa.array([2**40], pa.int64())) == ["8000010000000000"]
    # dates are days, timestamps microseconds (nanoseconds for timestamp_ns): whole numbers
    assert hexes(pa.array([dt.date(1970, 1, 11), dt.date(1969, 12, 31)])) == [
        "800000000000000a",
        "7fffffffffffffff",
    ]
    ts = pa.array([dt.datetime(1970, 1, 1, 0, 0, 1)], pa.timestamp("us"))
    assert hexes(ts) == ["80000000000f4240"]  # 1,000,000 us
    assert hexes(pa.array([dt.datetime(1970, 1, 1, 0, 0, 1)], pa.timestamp("ns"))) == ["800000003b9aca00"]


def test_floats_are_widened_to_doubles_positives_flip_the_sign_negatives_every_bit() -> None:
    assert double_ordered_bytes(1.0).hex() == "bff0000000000000"  # 0x3ff0... with the sign bit set
    assert double_ordered_bytes(-1.0).hex() == "400fffffffffffff"  # ~0xbff0...
    assert double_ordered_bytes(0.0).hex() == "8000000000000000"
    assert hexes(pa.array([1.5], pa.float32())) == [double_ordered_bytes(1.5).hex()]
    values = [-math.inf, -1e300, -2.5, -0.0, 0.0, 1e-300, 3.25, 1e300, math.inf]
    forms = [double_ordered_bytes(v) for v in values]
    assert forms == sorted(forms)


def test_strings_give_their_first_eight_utf8_bytes_whole_characters_only() -> None:
    assert string_ordered_bytes("ab").hex() == "6162000000000000"
    assert string_ordered_bytes("abcdefghij").hex() == "6162636465666768"
    assert string_ordered_bytes(None).hex() == "00" * 8
    # "é" is two bytes: three fit in six, a fourth would cross the eighth byte and is left out
    assert string_ordered_bytes("aéééé").hex() == "61c3a9c3a9c3a900"
    assert hexes(pa.array(["ab", None, "aéééé"])) == ["6162000000000000", "00" * 8, "61c3a9c3a9c3a900"]
    assert [bytes(r).hex() for r in column_bytes(pa.array([b"\x01\x02"], pa.binary()))] == [
        "0102000000000000"
    ]
    assert [bytes(r).hex() for r in column_bytes(pa.array([True, False, None]))] == ["ff", "00", "00"]


def test_whole_number_and_string_forms_keep_the_order() -> None:
    rnd = random.Random(3)
    longs = sorted(rnd.randrange(-(2**62), 2**62) for _ in range(500))
    assert [long_ordered_bytes(v) for v in longs] == sorted(long_ordered_bytes(v) for v in longs)
    words = sorted(f"{rnd.randrange(10**7):07d}" for _ in range(200))
    assert [string_ordered_bytes(w) for w in words] == sorted(string_ordered_bytes(w) for w in words)


def test_interleaving_takes_each_columns_bits_in_turn() -> None:
    a = np.array([[0b1010_1010]], dtype=np.uint8)
    b = np.array([[0b0000_1111]], dtype=np.uint8)
    # a7 b7 a6 b6 ... : 10 00 10 00 | 11 01 11 01
    assert bytes(interleave_bits([a, b])[0]).hex() == "88dd"
    # three columns of one byte: 24 bits in turn
    c = np.array([[0xFF]], dtype=np.uint8)
    assert bytes(interleave_bits([a, b, c])[0]).hex() == format(0b101_001_101_001_111_011_111_011, "06x")
    # a shorter column is skipped once it has no more bytes (Java's interleaveBits)
    long_col = np.array([[0xFF, 0x00]], dtype=np.uint8)
    short_col = np.array([[0x00]], dtype=np.uint8)
    assert bytes(interleave_bits([long_col, short_col])[0]).hex() == "aaaa00"
    # an output shorter than the inputs keeps the leading bits
    assert bytes(interleave_bits([a, b], size=1)[0]).hex() == "88"


def test_zorder_keys_of_two_long_columns() -> None:
    data = pa.table({"a": pa.array([3, 0], pa.int64()), "b": pa.array([0, 3], pa.int64())})
    keys = [bytes(k).hex() for k in zorder_keys(data, ["a", "b"]).to_pylist()]
    # both 0x80...0N: the sign bits first (a, b: 1 1 -> 0xc0), the last four bits a1 b1 a0 b0
    assert keys == ["c0" + "00" * 14 + "0a", "c0" + "00" * 14 + "05"]
    with pytest.raises(ValidationError, match="no such column"):
        zorder_keys(data, ["c"])


def test_options_take_javas_names_and_refuse_unknown_ones() -> None:
    opts = RewriteOptions.parse(
        {"target-file-size-bytes": "1000", "min-input-files": "3", "partial-progress.enabled": "true"},
        target_file_size=5,
    )
    assert (opts.target_file_size_bytes, opts.min_input_files, opts.partial_progress_enabled) == (
        1000,
        3,
        True,
    )
    assert (opts.min_file_size, opts.max_file_size, opts.max_group_size) == (750, 1800, 1000)
    with pytest.raises(ValidationError, match="unknown rewrite option"):
        RewriteOptions.parse({"target-size": "1"}, target_file_size=5)
    with pytest.raises(ValidationError, match="must be true or false"):
        RewriteOptions.parse({"rewrite-all": "yes"}, target_file_size=5)
    with pytest.raises(ValidationError, match="unknown rewrite strategy"):
        RewriteOptions(10, strategy="shuffle")
    with pytest.raises(ValidationError, match="needs columns"):
        RewriteOptions(10, strategy="zorder")
    groups = list(range(7))
    parted = RewriteOptions(10, partial_progress_enabled=True, partial_progress_max_commits=3)
    assert batches(groups, parted) == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches(groups, RewriteOptions(10)) == [groups]


async def small_file_table(tmp_path: Path, files: int, rows_per_file: int, **kwargs: object) -> Table:
    catalog = aioiceberg.connect(str(tmp_path / "wh"))
    table = await catalog.create_table("db.t", schema=SCHEMA, partition_by=["region"], **kwargs)  # type: ignore[arg-type]
    await add_small_files(table, files, rows_per_file)
    return table


async def data_files(table: Table) -> list[DataFile]:
    return [t.file async for t in table.scan(include_column_stats=True).plan_files()]


@pytest.mark.anyio
async def test_sort_and_zorder_rewrites_write_files_of_narrower_ranges(tmp_path: Path) -> None:
    table = await small_file_table(tmp_path, 60, 200)
    before = await data_files(table)
    rows_before = sorted_rows(await table.scan().to_arrow())
    assert len(before) == 60
    target = max(f.file_size_in_bytes for f in before) * 2  # several outputs per partition

    parse_sort_order("x DESC NULLS LAST, name", table.metadata.schema())  # the Java text form parses
    result = await table.rewrite_data_files(target, sort_order="x", options={"rewrite-all": "true"})
    after = await data_files(table)
    assert result.groups == 3 and len(result.rewritten_files) == 60 and 3 < len(after) < 60
    assert sorted_rows(await table.scan().to_arrow()) == rows_before
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    # sorted groups: each output covers a slice of x; the inputs covered nearly all of it
    assert mean_width(table, after, "x") < mean_width(table, before, "x") / 3
    for region in ("eu", "us", "ap"):
        ranges = sorted(bounds(table, f, "x") for f in after if tuple(f.partition) == (region,))
        assert all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(ranges))  # disjoint

    z = await table.rewrite_data_files(
        target, zorder_by=["x", "y"], options={"rewrite-all": "true", "max-file-group-size-bytes": str(10**9)}
    )
    zfiles = await data_files(table)
    assert z.groups == 3 and sorted_rows(await table.scan().to_arrow()) == rows_before
    area = sum(
        (bounds(table, f, "x")[1] - bounds(table, f, "x")[0])
        * (bounds(table, f, "y")[1] - bounds(table, f, "y")[0])
        for f in zfiles
    ) / len(zfiles)
    whole = (mean_width(table, before, "x")) * mean_width(table, before, "y")
    assert area < whole / 3  # each z-ordered file covers a small box of the (x, y) plane
    py = pyiceberg_table(table).scan().to_arrow()
    assert sorted_rows(py) == rows_before
    duck = duckdb_connection().execute(f"SELECT count(*) FROM iceberg_scan('{table.metadata_location}')")
    assert duck.fetchall() == [(len(rows_before),)]


@pytest.mark.anyio
async def test_table_sort_order_partial_progress_and_deletes(tmp_path: Path) -> None:
    table = await small_file_table(
        tmp_path, 40, 100, properties={"write.delete.mode": "merge-on-read"}, format_version=3
    )
    async with table.replace_sort_order() as order:
        order.asc("name")
    await table.delete("x < 500")
    expected = sorted_rows(await table.scan().to_arrow())
    snapshots = len(table.metadata.snapshots)
    target = max(f.file_size_in_bytes for f in await data_files(table)) * 4
    result = await table.rewrite_data_files(
        target,
        strategy="sort",
        options={
            "partial-progress.enabled": "true",
            "partial-progress.max-commits": "3",
            "rewrite-all": "true",
            "max-file-group-size-bytes": str(target * 2),
        },
    )
    assert result.groups > 3 and len(result.snapshot_ids) == 3 and not result.failed_groups
    assert len(table.metadata.snapshots) == snapshots + 3
    for sid in result.snapshot_ids:
        snap = table.metadata.snapshot_by_id(sid)
        assert snap is not None and snap.summary is not None and snap.summary["operation"] == "replace"
    assert sorted_rows(await table.scan().to_arrow()) == expected
    after = await data_files(table)
    assert {f.sort_order_id for f in after} == {table.metadata.default_sort_order_id}
    assert len(after) == len(result.added_files)
    with pytest.raises(UnsupportedError, match="partial-progress"):
        async with table.transaction() as tx:
            await tx.rewrite_data_files(options={"partial-progress.enabled": "true"})


@pytest.mark.anyio
async def test_a_failed_group_fails_the_rewrite_and_leaves_nothing(tmp_path: Path) -> None:
    table = await small_file_table(tmp_path, 12, 50)
    victim = (await data_files(table))[0]
    await table.io.delete(victim.file_path)  # the group holding it cannot be read
    version = table.version
    listed = {o.location async for o in table.io.list(table.location + "/data/")}
    with pytest.raises(RewriteFailedError, match="nothing was committed") as failed:
        await table.rewrite_data_files(options={"rewrite-all": "true", "max-file-group-size-bytes": "1"})
    assert "group" in str(failed.value)
    assert (await table.refresh()).version == version
    assert {o.location async for o in table.io.list(table.location + "/data/")} == listed
    # with partial progress the group is left out, the others commit
    result = await table.rewrite_data_files(
        options={"rewrite-all": "true", "max-file-group-size-bytes": "1", "partial-progress.enabled": "true"}
    )
    assert len(result.failed_groups) == 1 and result.groups == 12 and len(result.rewritten_files) == 11
    assert victim.file_path in {f.file_path for f in await data_files(table)}


def test_file_group_sizes() -> None:
    assert FileGroup(0, (0, ()), ()).size == 0
