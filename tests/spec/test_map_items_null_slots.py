"""Map columns (as the decoders give them: large lists of key/value structs) whose null slots
span values: Arrow allows it (a null slot's offsets need not be equal), and an item must
still be given to the row that holds it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from aioiceberg.spec.manifest.columnar import _map_items, _read_map

ITEM = pa.struct([("key", pa.int32()), ("value", pa.large_binary())])
MAP = pa.large_list(ITEM)


def _map_with_null_spanning() -> pa.Array:
    keys = pa.array([1, 2, 1, 2, 3, 1], pa.int32())
    values = pa.array([b"a", b"b", b"x", b"y", b"z", b"c"], pa.large_binary())
    items = pa.StructArray.from_arrays([keys, values], fields=list(ITEM))
    offsets = pa.array([0, 2, 5, 6], pa.int64())  # row 1 is null but spans three items
    arr = pa.LargeListArray.from_arrays(offsets, items, mask=pa.array([False, True, False]))
    assert arr.null_count == 1 and len(arr.offsets) == 4
    return arr


def test_items_under_a_null_slot_are_nobodys() -> None:
    found = _map_items(_map_with_null_spanning(), None)
    assert found is not None
    parents, keys, values = found
    assert parents.tolist() == [0, 0, 2]
    assert keys.to_pylist() == [1, 2, 1]
    assert values.to_pylist() == [b"a", b"b", b"c"]


def test_wanted_keys_keep_their_rows() -> None:
    read = _read_map(_map_with_null_spanning(), frozenset({1}))
    assert read is not None
    parents, keys, values = read
    assert np.asarray(parents).tolist() == [0, 2]
    assert keys == [1, 1]
    assert values == [b"a", b"c"]


def test_without_nulls_every_item_has_its_row() -> None:
    arr = pa.array(
        [[{"key": 1, "value": b"a"}], [], [{"key": 1, "value": b"b"}, {"key": 2, "value": b"c"}]], MAP
    )
    found = _map_items(arr, None)
    assert found is not None
    assert found[0].tolist() == [0, 2, 2]
    assert found[2].to_pylist() == [b"a", b"b", b"c"]


def test_a_slice_with_a_spanning_null_slot() -> None:
    sliced = _map_with_null_spanning().slice(1)
    found = _map_items(sliced, None)
    assert found is not None
    assert found[0].tolist() == [1]
    assert found[2].to_pylist() == [b"c"]
