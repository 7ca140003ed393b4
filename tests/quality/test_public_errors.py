"""Every public entry point that reads or writes, given a broken object, raises an
IcebergError naming it: never an ExceptionGroup, never pyarrow's own exceptions."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from broken_tables import (
    SCHEMA,
    _bad_magic,
    _break_data_file,
    _break_manifest,
    _break_manifest_list,
    _data_files,
    _garbage_footer,
    _listing,
    _local,
    _missing,
    _not_parquet,
    _remove_manifest_list,
    _rows,
    _table,
    _truncate,
    _wrong_type,
)
from servers.backends import create_bucket
from servers.plugin import s3_storage_options

import aioiceberg
from aioiceberg import sync
from aioiceberg._concurrency import task_group
from aioiceberg.errors import CorruptFileError, IcebergError
from aioiceberg.table import Table

# what is broken -> (break it, which object it names)
Breakage = Callable[[Table], Awaitable[str]]


DATA_BREAKAGES: dict[str, Breakage] = {
    "truncated-parquet": lambda t: _break_data_file(t, _truncate),
    "bad-magic": lambda t: _break_data_file(t, _bad_magic),
    "garbage-footer": lambda t: _break_data_file(t, _garbage_footer),
    "column-type": lambda t: _break_data_file(t, _wrong_type),
    "missing-data-file": lambda t: _break_data_file(t, _missing),
}
METADATA_BREAKAGES: dict[str, Breakage] = {
    "broken-manifest": _break_manifest,
    "missing-manifest": lambda t: _break_manifest(t, _missing),
    "broken-manifest-list": _break_manifest_list,
    "missing-manifest-list": _remove_manifest_list,
}


async def _to_arrow(table: Table) -> Any:
    return await table.scan(row_filter="id >= 0").to_arrow()


async def _upsert(table: Table) -> Any:
    await table.upsert(_rows(38, 4), join_cols=["id"], mode="copy-on-write")  # reads the files


async def _compact(table: Table) -> Any:
    await table.rewrite_data_files()


async def _statistics(table: Table) -> Any:
    await table.compute_statistics()


async def _rewrite_manifests(table: Table) -> Any:
    await table.rewrite_manifests()


async def _append(table: Table) -> Any:
    await table.append(_rows(200, 2))


async def _to_batches(table: Table) -> Any:
    return [b async for b in table.scan().to_batches()]


async def _plan_files(table: Table) -> Any:
    return [t async for t in table.scan().plan_files()]


async def _delete(table: Table) -> Any:
    await table.delete("id = 5 OR x = 46")  # some rows of each file: every file is read


async def _overwrite(table: Table) -> Any:
    await table.overwrite(_rows(100, 3), "id = 5 OR x = 46")


async def _merge_on_read_delete(table: Table) -> Any:
    async with table.transaction() as tx:  # one commit, so a failure must leave the table as it was
        tx.set_properties({"write.delete.mode": "merge-on-read"})
        await tx.delete("id = 5 OR x = 46")


async def _dynamic_overwrite(table: Table) -> Any:
    await table.dynamic_partition_overwrite(_rows(100, 3))  # unpartitioned: replaces every file


async def _expire(table: Table) -> Any:
    await table.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)


async def _remove_orphans(table: Table) -> Any:
    # a cutoff in the future makes every unreferenced object an orphan, however new
    await table.remove_orphan_files(older_than=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))


def _sync_table(table: Table) -> sync.Table:
    return sync.load_table(table.location)


async def _sync_to_arrow(table: Table) -> Any:
    return _sync_table(table).scan().to_arrow()


async def _sync_to_batches(table: Table) -> Any:
    return list(_sync_table(table).scan().to_batches())


async def _sync_plan_files(table: Table) -> Any:
    return list(_sync_table(table).scan().plan_files())


async def _sync_delete(table: Table) -> Any:
    _sync_table(table).delete("id = 5 OR x = 46")


async def _sync_dynamic_overwrite(table: Table) -> Any:
    _sync_table(table).dynamic_partition_overwrite(_rows(100, 3))


async def _sync_expire(table: Table) -> Any:
    _sync_table(table).expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1)


async def _sync_remove_orphans(table: Table) -> Any:
    _sync_table(table).remove_orphan_files(older_than=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))


ENTRY_POINTS: dict[str, Callable[[Table], Awaitable[Any]]] = {
    "to_arrow": _to_arrow,
    "to_batches": _to_batches,
    "delete": _delete,
    "overwrite": _overwrite,
    "delete-merge-on-read": _merge_on_read_delete,
    "upsert": _upsert,
    "rewrite_data_files": _compact,
    "compute_statistics": _statistics,
    "sync.to_arrow": _sync_to_arrow,
    "sync.to_batches": _sync_to_batches,
    "sync.delete": _sync_delete,
}
PLANNING_ENTRY_POINTS = {
    **ENTRY_POINTS,
    "plan_files": _plan_files,
    "rewrite_manifests": _rewrite_manifests,
    "sync.plan_files": _sync_plan_files,
    "dynamic_partition_overwrite": _dynamic_overwrite,
    "expire_snapshots": _expire,
    "remove_orphan_files": _remove_orphans,
    "sync.dynamic_partition_overwrite": _sync_dynamic_overwrite,
    "sync.expire_snapshots": _sync_expire,
    "sync.remove_orphan_files": _sync_remove_orphans,
}


def _assert_names(error: BaseException, victim: str, what: str) -> None:
    assert isinstance(error, IcebergError), f"{what}: {type(error).__name__}: {error}"
    assert not isinstance(error, BaseExceptionGroup), what
    assert os.path.basename(victim) in str(error), f"{what}: {error}"


async def _check_breakage(
    tmp_path: Path, breakage: Breakage, entry: Callable[[Table], Awaitable[Any]], what: str
) -> None:
    table = await _table(tmp_path / "wh")
    victim = await breakage(table)
    await _check_unchanged(table, victim, entry, what)


async def _check_unchanged(
    table: Table, victim: str, entry: Callable[[Table], Awaitable[Any]], what: str
) -> None:
    """``entry`` fails naming ``victim`` and leaves the table's metadata and files as they were."""
    before = (table.metadata_location, _listing(_local(table.location)))
    with pytest.raises(BaseException) as info:
        await entry(table)
    _assert_names(info.value, victim, what)
    if victim != before[0]:  # a broken metadata file cannot be loaded: the listing says enough
        after = await aioiceberg.load_table(table.location)
        assert after.metadata_location == before[0], f"{what}: the failed call committed"
    assert _listing(_local(table.location)) == before[1], f"{what}: the failed call added or deleted files"


@pytest.mark.anyio
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("broken", list(DATA_BREAKAGES))
async def test_a_broken_data_file_raises_an_iceberg_error_naming_it(
    broken: str, entry: str, tmp_path: Path
) -> None:
    await _check_breakage(tmp_path, DATA_BREAKAGES[broken], ENTRY_POINTS[entry], f"{broken} / {entry}")


@pytest.mark.anyio
@pytest.mark.parametrize("entry", list(PLANNING_ENTRY_POINTS))
@pytest.mark.parametrize("broken", list(METADATA_BREAKAGES))
async def test_broken_manifests_raise_an_iceberg_error_naming_them(
    broken: str, entry: str, tmp_path: Path
) -> None:
    await _check_breakage(
        tmp_path, METADATA_BREAKAGES[broken], PLANNING_ENTRY_POINTS[entry], f"{broken} / {entry}"
    )


def _with_ids(schema: pa.Schema) -> pa.Schema:
    ids = {"id": "1", "x": "2"}
    return pa.schema(f.with_metadata({"PARQUET:field_id": ids.get(f.name, "99")}) for f in schema)


def _parquet(path: Path, data: pa.Table | None = None) -> None:
    data = _rows(500, 10) if data is None else data
    pq.write_table(data.cast(_with_ids(data.schema)), path)


def _other_type(path: Path) -> None:
    _parquet(path, pa.table({"id": pa.array([1], pa.int64()), "x": ["a"]}))


def _no_required_column(path: Path) -> None:
    _parquet(path, pa.table({"x": pa.array([1], pa.int64())}))


def _unknown_column(path: Path) -> None:
    _parquet(path, pa.table({"id": pa.array([1], pa.int64()), "extra": [1.5]}))


def _unsigned(path: Path) -> None:
    _parquet(path, pa.table({"id": pa.array([1], pa.int64()), "x": pa.array([1], pa.uint64())}))


def _no_field_ids(path: Path) -> None:
    pq.write_table(_rows(500, 10), path)  # and the table has no name mapping


ADD_FILES_BREAKAGES: dict[str, Callable[[Path], None]] = {
    "truncated-parquet": _truncate,
    "bad-magic": _bad_magic,
    "garbage-footer": _garbage_footer,
    "not-parquet": _not_parquet,
    "missing-file": _missing,
    "column-type": _other_type,
    "missing-required-column": _no_required_column,
    "unknown-column": _unknown_column,
    "unsupported-type": _unsigned,
    "no-field-ids": _no_field_ids,
}
COLUMN_NAMED = {
    "column-type": "'x'",
    "missing-required-column": "'id'",
    "unknown-column": "'extra'",
    "unsupported-type": "'x'",
    "no-field-ids": "'id'",
}


@pytest.mark.anyio
@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("broken", list(ADD_FILES_BREAKAGES))
async def test_add_files_of_a_broken_file_raises_an_iceberg_error_naming_it(
    broken: str, blocking: bool, tmp_path: Path
) -> None:
    """One bad file among good ones fails the whole call: nothing is committed."""
    table = await _table(tmp_path / "wh")
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    good, bad = incoming / "good.parquet", incoming / "bad.parquet"
    _parquet(good)
    _parquet(bad)
    ADD_FILES_BREAKAGES[broken](bad)
    paths = [str(good), str(bad)]
    before = (table.metadata_location, _listing(_local(table.location)))
    with pytest.raises(BaseException) as info:
        if blocking:
            _sync_table(table).add_files(paths)
        else:
            await table.add_files(paths)
    _assert_names(info.value, str(bad), f"add_files {broken}")
    assert COLUMN_NAMED.get(broken, "") in str(info.value)
    after = await aioiceberg.load_table(table.location)
    assert after.metadata_location == before[0]
    assert _listing(_local(table.location)) == before[1]
    await table.add_files([str(good)])  # the good file alone is accepted
    assert (await table.scan().to_arrow()).num_rows == 90


BAD_ROWS: dict[str, tuple[pa.Table, str]] = {  # rows that do not fit SCHEMA -> the column named
    "missing-required-column": (pa.table({"x": pa.array([1], pa.int64())}), "id"),
    "null-in-required-column": (pa.table({"id": pa.array([None], pa.int64()), "x": [1]}), "id"),
    "column-type": (pa.table({"id": pa.array([1], pa.int64()), "x": ["a"]}), "x"),
    "unknown-column": (pa.table({"id": pa.array([1], pa.int64()), "extra": [1.5]}), "extra"),
}
WRITES: dict[str, Callable[[Table, pa.Table], Awaitable[Any]]] = {
    "append": lambda t, rows: t.append(rows),
    "overwrite": lambda t, rows: t.overwrite(rows, "id = 5"),
    "dynamic_partition_overwrite": lambda t, rows: t.dynamic_partition_overwrite(rows),
    "upsert": lambda t, rows: t.upsert(rows, join_cols=["id"]),
}


async def _sync_append(table: Table, rows: pa.Table) -> None:
    _sync_table(table).append(rows)


WRITES["sync.append"] = _sync_append


@pytest.mark.anyio
@pytest.mark.parametrize("entry", list(WRITES))
@pytest.mark.parametrize("bad", list(BAD_ROWS))
async def test_writing_rows_that_do_not_fit_the_schema_raises_an_iceberg_error_naming_the_column(
    bad: str, entry: str, tmp_path: Path
) -> None:
    table = await _table(tmp_path / "wh")
    rows, column = BAD_ROWS[bad]
    before = (table.metadata_location, _listing(_local(table.location)))
    with pytest.raises(BaseException) as info:
        await WRITES[entry](table, rows)
    error = info.value
    assert isinstance(error, IcebergError) and not isinstance(error, BaseExceptionGroup), repr(error)
    assert repr(column) in str(error) or f"'{column}'" in str(error), f"{bad} / {entry}: {error}"
    after = await aioiceberg.load_table(table.location)
    assert after.metadata_location == before[0]
    assert _listing(_local(table.location)) == before[1]


@pytest.mark.anyio
@pytest.mark.parametrize("entry", ["append", "sync.append"])
@pytest.mark.parametrize("broken", ["broken-manifest-list", "missing-manifest-list"])
async def test_append_over_a_broken_manifest_list_raises_an_iceberg_error_naming_it(
    broken: str, entry: str, tmp_path: Path
) -> None:
    """An append carries the parent's manifests over, so it reads the parent's manifest list."""
    table = await _table(tmp_path / "wh")
    victim = await METADATA_BREAKAGES[broken](table)
    await _check_unchanged(table, victim, lambda t: WRITES[entry](t, _rows(200, 2)), f"{broken} / {entry}")


@pytest.mark.anyio
async def test_append_with_a_broken_metadata_json(tmp_path: Path) -> None:
    """Loading the table names the broken file; a table object loaded before the damage holds
    that metadata, so it commits without reading the file, and the new version is whole."""
    table = await _table(tmp_path / "wh")
    victim = table.metadata_location
    _truncate(_local(victim))
    await _check_unchanged(table, victim, lambda t: _sync_append(t, _rows(200, 2)), "sync.append")
    await table.append(_rows(200, 2))
    assert (await (await aioiceberg.load_table(table.location)).scan().to_arrow()).num_rows == 82


async def _s3_truncate(table: Table, location: str) -> None:
    data = await table.io.read(location)
    await table.io.write(location, data[: len(data) // 2])


async def _s3_break_data_file(table: Table) -> str:
    victim = (await _data_files(table))[0]
    await _s3_truncate(table, victim)
    return victim


async def _s3_remove_data_file(table: Table) -> str:
    victim = (await _data_files(table))[0]
    await table.io.delete(victim)
    return victim


async def _s3_break_manifest(table: Table) -> str:
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    from aioiceberg.spec.manifest import read_manifest_list

    victim = read_manifest_list(await table.io.read(snap.manifest_list), snap.manifest_list)[0].manifest_path
    await _s3_truncate(table, victim)
    return victim


async def _s3_remove_manifest_list(table: Table) -> str:
    snap = table.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    await table.io.delete(snap.manifest_list)
    return snap.manifest_list


S3_BREAKAGES: dict[str, tuple[Breakage, tuple[str, ...]]] = {  # -> the entry points that read it
    "truncated-parquet": (_s3_break_data_file, ("to_arrow", "delete", "rewrite_data_files")),
    "missing-data-file": (_s3_remove_data_file, ("to_arrow", "delete", "rewrite_data_files")),
    "broken-manifest": (_s3_break_manifest, ("to_arrow", "plan_files", "expire_snapshots")),
    "missing-manifest-list": (
        _s3_remove_manifest_list,
        ("to_arrow", "plan_files", "expire_snapshots", "remove_orphan_files"),
    ),
}
S3_CASES = [(b, e) for b, (_, entries) in S3_BREAKAGES.items() for e in entries]


@pytest.mark.anyio
@pytest.mark.parametrize(("broken", "entry"), S3_CASES, ids=[f"{b}-{e}" for b, e in S3_CASES])
async def test_on_s3_a_broken_object_raises_an_iceberg_error_naming_it(
    broken: str, entry: str, moto_endpoint: str
) -> None:
    """The same through the S3 client: no botocore error reaches the caller."""
    bucket = await create_bucket(moto_endpoint)
    async with aioiceberg.connect(
        f"s3://{bucket}/wh", storage_options=s3_storage_options(moto_endpoint)
    ) as cat:
        table = await cat.create_table("db.t", schema=SCHEMA)
        await table.append(_rows(0, 40))
        await table.append(_rows(40, 40))
        victim = await S3_BREAKAGES[broken][0](table)
        before = table.metadata_location
        with pytest.raises(BaseException) as info:
            await PLANNING_ENTRY_POINTS[entry](table)
        _assert_names(info.value, victim, f"{broken} / {entry}")
        assert (await cat.load_table("db.t")).metadata_location == before


@pytest.mark.anyio
async def test_expiry_of_a_snapshot_whose_manifest_list_is_gone_still_expires_it(tmp_path: Path) -> None:
    """Only what the remaining snapshots reach must be readable: a half-finished earlier
    cleanup may have deleted the expired snapshot's list already."""
    table = await _table(tmp_path / "wh")
    first = table.history()[0]
    assert first.manifest_list is not None
    _missing(_local(first.manifest_list))
    result = await table.expire_snapshots(snapshot_ids=[first.snapshot_id])
    assert result.expired_snapshot_ids == [first.snapshot_id]
    assert (await table.scan().to_arrow()).num_rows == 80


@pytest.mark.anyio
async def test_orphan_removal_skips_files_an_expiry_deleted_from_older_versions(tmp_path: Path) -> None:
    """Only the current snapshots must be readable: older metadata files still name the
    snapshots an expiry removed, whose manifest lists are gone."""
    table = await _table(tmp_path / "wh")
    first = table.history()[0]
    assert first.manifest_list is not None
    await table.expire_snapshots(snapshot_ids=[first.snapshot_id])
    assert not _local(first.manifest_list).exists()
    files = _listing(_local(table.location))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    assert await table.remove_orphan_files(older_than=later) == []
    assert _listing(_local(table.location)) == files
    assert (await table.scan().to_arrow()).num_rows == 80


@pytest.mark.anyio
@pytest.mark.parametrize("blocking", [False, True])
async def test_a_broken_metadata_json_raises_an_iceberg_error_naming_it(
    blocking: bool, tmp_path: Path
) -> None:
    table = await _table(tmp_path / "wh")
    victim = table.metadata_location
    _truncate(_local(victim))
    for target in (table.location, victim):
        with pytest.raises(BaseException) as info:
            if blocking:
                sync.load_table(target)
            else:
                await aioiceberg.load_table(target)
        _assert_names(info.value, victim, f"load_table({target})")


@pytest.mark.anyio
async def test_a_task_group_raises_its_first_error_with_the_others_as_notes() -> None:
    async def fail(name: str) -> None:
        with anyio.CancelScope(shield=True):  # both fail although the first cancels the group
            await anyio.sleep(0)
        raise CorruptFileError("broken", location=name)

    with pytest.raises(CorruptFileError) as info:
        async with task_group() as tg:
            tg.start_soon(fail, "a.parquet")
            tg.start_soon(fail, "b.parquet")
    assert str(info.value) == "a.parquet: broken"
    assert info.value.__notes__ == ["also failed: CorruptFileError: b.parquet: broken"]


@pytest.mark.anyio
async def test_a_cancelled_task_group_stays_cancelled() -> None:
    with anyio.move_on_after(0.01) as scope:
        async with task_group() as tg:
            tg.start_soon(anyio.sleep, 10)
    assert scope.cancelled_caught


def test_no_error_class_flips_the_retryable_flag_it_inherits() -> None:
    """``retryable`` is fixed where a class decides it; a subclass never reverses a parent
    (a conflict caught as a retryable failure was once retried by callers)."""
    import inspect

    from aioiceberg import errors

    undecided = {errors.IcebergError, errors.CommitError, errors.StoreError}  # roots, not verdicts
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.IcebergError)
    ]
    assert errors.CommitConflictError in classes
    for cls in classes:
        for base in cls.__mro__[1:]:
            if issubclass(base, errors.IcebergError) and base not in undecided:
                assert cls.retryable == base.retryable, (cls.__name__, base.__name__)
    assert not issubclass(errors.CommitConflictError, errors.CommitFailedError)
    for outcome in (errors.CommitFailedError, errors.CommitConflictError, errors.CommitStateUnknownError):
        assert issubclass(outcome, errors.CommitError)
