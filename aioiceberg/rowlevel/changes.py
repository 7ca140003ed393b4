"""Deletes, overwrites, dynamic partition overwrites and upserts, planned as one change each.

Planning happens when the change is staged, on the snapshot the table object holds: files
are classified (``files.py``), partly matching files are rewritten (copy-on-write) or get
position deletes (merge-on-read), new rows are written, and the result is one
``RowLevelChange``. The commit loop may rebase it onto newer snapshots; the change itself
decides, from what it touched, whether that is safe (``commit/validate.py``).

Memory: copy-on-write holds the kept rows of all partly matching files at once; a delete
that rewrites more data than fits in memory should be split by partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.commit.dangling_deletes import file_scoped_target
from aioiceberg.commit.overwrite import RemovedFile, RowLevelChange
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.validate import ConflictDetection
from aioiceberg.errors import UnsupportedError, ValidationError
from aioiceberg.expressions.arrow_filter import field_paths, filter_table, to_arrow_expression
from aioiceberg.expressions.tree import AlwaysTrue, EqualTo, Expression, and_, in_, or_
from aioiceberg.io.base import FileIO
from aioiceberg.read import read_to_table
from aioiceberg.read.deletes import DeleteCache
from aioiceberg.rowlevel.touched_files import (
    PartialFile,
    Selection,
    delete_schema,
    select_by_filter,
    select_by_partitions,
    sql_filter,
)
from aioiceberg.scan import Planner
from aioiceberg.spec.manifest import DataFile, DataFileContent, ManifestContent, snapshot_manifests
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, TableMetadata
from aioiceberg.spec.name_mapping import schema_as_read
from aioiceberg.spec.properties import COPY_ON_WRITE, MERGE_ON_READ, TableProperties
from aioiceberg.spec.row_lineage import LAST_UPDATED_SEQUENCE_NUMBER, LINEAGE_FIELDS, ROW_ID, with_lineage
from aioiceberg.spec.scan_tasks import FileScanTask
from aioiceberg.spec.schema import Schema, prune_columns
from aioiceberg.write import (
    LocationProvider,
    conform_to_schema,
    split_by_partition,
    write_data_files,
    write_equality_delete_file,
    write_position_delete_file,
)
from aioiceberg.write.deletion_vectors import write_deletion_vectors

__all__ = [
    "DELETE_ISOLATION_LEVEL",
    "DELETE_MODE",
    "plan_delete",
    "plan_dynamic_partition_overwrite",
    "plan_replace_partitions",
    "plan_upsert",
]

DELETE_MODE = TableProperties.delete_mode.key
"""Table property: ``copy-on-write`` (default) or ``merge-on-read`` (position delete files
on v2, deletion vectors on v3)."""
DELETE_ISOLATION_LEVEL = TableProperties.delete_isolation.key
"""Table property: ``serializable`` (default: a concurrent append of matching rows fails the
delete) or ``snapshot`` (it does not; the appended rows survive the delete)."""


async def _write_rows(io: FileIO, md: TableMetadata, data: pa.Table, lineage: bool = False) -> list[DataFile]:
    """``lineage``: ``data`` holds the v3 row lineage columns of rows moved from old files,
    written so each row keeps its id and sequence number."""
    props = TableProperties(md.properties)
    if data.num_rows == 0:
        return []
    return await write_data_files(
        io,
        with_lineage(md.schema(), LINEAGE_FIELDS) if lineage else md.schema(),
        md.spec(),
        data,
        LocationProvider(md.location, props),
        props,
    )


def _task(md: TableMetadata, p: PartialFile, residual: Expression) -> FileScanTask:
    spec = md.spec_by_id(p.file.spec_id)
    if spec is None:
        raise ValidationError(f"{p.file.file_path}: partition spec {p.file.spec_id} is not in the table")
    return FileScanTask(
        p.file, p.deletes, residual, spec, _as_read(md), data_sequence_number=p.removed.entry.sequence_number
    )


def _as_read(md: TableMetadata) -> Schema:
    """The schema rows are read with, as a scan reads them (see ``delete_schema``)."""
    return schema_as_read(md.schema(), md.properties)


async def _kept_rows(
    io: FileIO, md: TableMetadata, partial: Sequence[PartialFile], expr: Expression
) -> tuple[pa.Table, frozenset[str]]:
    """The live rows of the files of ``partial`` with a row matching ``expr`` for which
    ``expr`` is false or null (copy-on-write), with their row lineage columns from v3 on;
    and those files' paths (a file none of whose rows matches stays as it is)."""
    schema = _as_read(md)
    projection = with_lineage(schema, LINEAGE_FIELDS) if md.format_version >= 3 else schema
    rows = await read_to_table(
        io,
        [_task(md, p, AlwaysTrue()) for p in partial],
        projection,
        table_schema=schema,
        name_mapping=TableProperties(md.properties).name_mapping,
        include_file_column=True,
    )
    files = rows.column("_file")
    rows = rows.drop_columns(["_file"])
    at = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    matched = filter_table(
        rows.append_column("\x00row", at), to_arrow_expression(expr, field_paths(projection))
    )
    hit = pc.is_in(at, matched.column("\x00row"))
    touched = frozenset(pc.unique(files.filter(hit)).to_pylist())
    keep = pc.and_(pc.invert(hit), pc.is_in(files, pa.array(sorted(touched), pa.string())))
    return rows.filter(keep), touched


def _check_required(md: TableMetadata, kept: pa.Table) -> None:
    """Kept rows are written back under the table's schema: a required column that no field
    id and no name mapping resolves reads as NULL and cannot be (``schema_as_read``)."""
    as_read = _as_read(md)
    for f in md.schema().fields:
        if not f.required or as_read.find_field(f.field_id).required or f.name not in kept.column_names:
            continue
        if kept.column(f.name).null_count:
            raise ValidationError(
                f"cannot rewrite rows of table {md.location} (copy-on-write): required column "
                f"{f.name!r} is resolved by no field id and no name mapping entry, so its values "
                "read as NULL; delete with write.delete.mode=merge-on-read (v2 on) or map the column"
            )


async def _hits(io: FileIO, md: TableMetadata, partial: Sequence[PartialFile], expr: Expression) -> pa.Table:
    """``_file`` and ``_pos`` of the live rows of ``partial`` matching ``expr``."""
    return await read_to_table(
        io,
        [_task(md, p, expr) for p in partial],
        Schema(),
        table_schema=_as_read(md),
        name_mapping=TableProperties(md.properties).name_mapping,
        include_file_column=True,
        include_pos_column=True,
    )


async def _position_deletes(
    io: FileIO, md: TableMetadata, partial: Sequence[PartialFile], expr: Expression
) -> list[DataFile]:
    """Position delete files (one per partition) for the rows of ``partial`` matching ``expr``."""
    schema = md.schema()
    hits = await _hits(io, md, partial, expr)
    if hits.num_rows == 0:
        return []
    groups: dict[tuple[int, tuple[Any, ...]], list[str]] = {}
    for p in partial:
        groups.setdefault((p.file.spec_id, p.file.partition), []).append(p.file.file_path)
    props = TableProperties(md.properties)
    provider = LocationProvider(md.location, props)
    out: list[DataFile] = []
    for (spec_id, partition), paths in groups.items():
        rows = hits.filter(pc.is_in(hits.column("_file"), pa.array(paths, pa.string())))
        if rows.num_rows == 0:
            continue
        spec = md.spec_by_id(spec_id)
        assert spec is not None  # checked by _task
        deletes = pa.table({"file_path": rows.column("_file"), "pos": rows.column("_pos")})
        out.append(
            await write_position_delete_file(
                io,
                provider,
                deletes,
                table_schema=schema,
                spec=spec,
                partition=partition,
                properties=props,
            )
        )
    return out


async def _deletion_vectors(
    io: FileIO, md: TableMetadata, selection: Selection, expr: Expression
) -> tuple[list[DataFile], list[RemovedFile]]:
    """One deletion vector per partly matching file with matching rows (v3), merged with
    what already deletes rows of it: its DV and its v2 position deletes, as Java does. The
    file-scoped ones (its DV, file-scoped position delete files) are returned for removal,
    so a data file never has two DVs; partition-scoped position delete files stay (the DV
    holds their positions for this file, so readers get the same rows either way)."""
    partial = selection.partial
    hits = await _hits(io, md, partial, expr)
    if hits.num_rows == 0:
        return [], []
    files = hits.column("_file").combine_chunks()
    if pa.types.is_dictionary(files.type):
        files = files.dictionary_decode()
    positions = hits.column("_pos").to_numpy().astype(np.int64)
    cache = DeleteCache(io, md.schema(), TableProperties(md.properties).name_mapping)
    vectors: list[tuple[DataFile, np.ndarray]] = []
    replaced: list[RemovedFile] = []
    for p in partial:
        mask = pc.equal(files, pa.scalar(p.file.file_path, pa.string())).to_numpy(zero_copy_only=False)
        new = positions[mask]
        if not len(new):
            continue
        previous = [d for d in p.deletes if d.content == DataFileContent.POSITION_DELETES]
        old = (await cache.for_task(p.file, previous)).positions if previous else None
        vectors.append((p.file, new if old is None else np.union1d(old, new)))
        for d in previous:
            if file_scoped_target(d) == p.file.file_path:
                entry = selection.delete_entries.get((d.file_path, d.content_offset))
                if entry is None:
                    raise ValidationError(f"{d.file_path}: delete file of {p.file.file_path} not found")
                replaced.append(entry)
    provider = LocationProvider(md.location, TableProperties(md.properties))
    return await write_deletion_vectors(io, provider, vectors), replaced


async def _cleanup(io: FileIO, files: Iterable[DataFile]) -> None:
    await delete_quietly(io, [f.file_path for f in files])


def _start_of(selection: Selection, md: TableMetadata, branch: str) -> int | None:
    snap = md.snapshot_by_ref(branch)
    return snap.snapshot_id if snap is not None else selection.snapshot_id


async def plan_delete(
    io: FileIO,
    md: TableMetadata,
    delete_filter: Expression | str,
    *,
    new_rows: pa.Table | None = None,
    new_files: Sequence[DataFile] = (),
    case_sensitive: bool = True,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
    operation: Operation | None = None,
    isolation: str | None = None,
) -> RowLevelChange | None:
    """Delete the rows matching ``delete_filter`` (and add ``new_rows`` and the data files
    ``new_files`` someone already wrote, which the change then owns): one change, or None
    when nothing matches and nothing is added.

    Files proven to match whole are dropped; partly matching ones are rewritten, or, when
    the table says ``write.delete.mode=merge-on-read``, get position delete files (v2) or
    one deletion vector each (v3), merged with the DV and position deletes they had.
    """
    expr = sql_filter(delete_schema(md, delete_filter, case_sensitive), delete_filter, case_sensitive)
    snapshot = md.snapshot_by_ref(branch)
    selection = await select_by_filter(io, md, snapshot, expr, case_sensitive)
    props = TableProperties(md.properties)
    removed: list[RemovedFile] = list(selection.drop)
    added_data: list[DataFile] = []
    added_deletes: list[DataFile] = []
    removed_deletes: list[RemovedFile] = []
    referenced: set[str] = set()
    dv_referenced: set[str] = set()
    try:
        if selection.partial:  # only a partly matching file needs the delete mode
            if props.delete_mode == MERGE_ON_READ and md.format_version >= 3:
                added_deletes, removed_deletes = await _deletion_vectors(io, md, selection, expr)
                dv_referenced = {f.referenced_data_file or "" for f in added_deletes}
                referenced = dv_referenced
            elif props.delete_mode == MERGE_ON_READ and md.format_version == 2:
                added_deletes = await _position_deletes(io, md, selection.partial, expr)
                referenced = {p.file.file_path for p in selection.partial}
            else:
                kept, touched = await _kept_rows(io, md, selection.partial, expr)
                _check_required(md, kept)
                removed += [p.removed for p in selection.partial if p.file.file_path in touched]
                added_data = await _write_rows(io, md, kept, lineage=md.format_version >= 3)
        if new_rows is not None:
            added_data += await _write_rows(io, md, new_rows)
        added_data += new_files
    except BaseException:
        await _cleanup(io, [*added_data, *added_deletes])
        raise
    if not (removed or added_data or added_deletes):
        return None
    level = isolation or props.delete_isolation
    if level not in ("serializable", "snapshot"):
        raise ValidationError(f"unknown isolation level {level!r}: use 'serializable' or 'snapshot'")
    detection = ConflictDetection(
        row_filter=expr,
        check_added_data=level == "serializable",
        removed=frozenset(r.file.file_path for r in removed),
        removed_partitions=frozenset((r.file.spec_id, r.file.partition) for r in removed),
        referenced=frozenset(referenced),
        dv_referenced=frozenset(dv_referenced),
        case_sensitive=case_sensitive,
    )
    return RowLevelChange(
        removed=removed,
        removed_delete_files=removed_deletes,
        added_data_files=added_data,
        added_delete_files=added_deletes,
        start_snapshot_id=_start_of(selection, md, branch),
        start_manifests=selection.manifests,
        detection=detection,
        operation=operation,
        branch=branch,
        snapshot_properties=snapshot_properties,
    )


async def plan_dynamic_partition_overwrite(
    io: FileIO,
    md: TableMetadata,
    data: pa.Table,
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
) -> RowLevelChange | None:
    """Replace exactly the partitions ``data`` has rows in (of the current spec) with ``data``.

    On an unpartitioned table that is the whole table, as Java's ``ReplacePartitions``.
    """
    added = await _write_rows(io, md, data)
    return await plan_replace_partitions(
        io, md, added, snapshot_properties=snapshot_properties, branch=branch
    )


async def plan_replace_partitions(
    io: FileIO,
    md: TableMetadata,
    added: Sequence[DataFile],
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
) -> RowLevelChange | None:
    """Replace the partitions the data files ``added`` (already written, now owned by the
    change) fall in with those files: a dynamic partition overwrite of files."""
    added = list(added)
    if not added:
        return None
    try:
        partitions = frozenset((f.spec_id, f.partition) for f in added)
        selection = await select_by_partitions(io, md.snapshot_by_ref(branch), partitions)
    except BaseException:
        await _cleanup(io, added)
        raise
    detection = ConflictDetection(
        partitions=partitions,
        removed=frozenset(r.file.file_path for r in selection.drop),
        removed_partitions=partitions,
    )
    return RowLevelChange(
        removed=selection.drop,
        added_data_files=added,
        start_snapshot_id=_start_of(selection, md, branch),
        start_manifests=selection.manifests,
        detection=detection,
        operation=Operation.OVERWRITE,
        branch=branch,
        snapshot_properties={"replace-partitions": "true", **(snapshot_properties or {})},
    )


def _key_names(schema: Schema, join_cols: Sequence[str] | None, case_sensitive: bool) -> list[str]:
    if join_cols is None:
        names = list(schema.identifier_field_names)
        if not names:
            raise ValidationError("upsert needs join_cols, or identifier fields in the table schema")
        return names
    if not join_cols:
        raise ValidationError("upsert needs at least one join column")
    return [schema.find_column_name(schema.find_field(c, case_sensitive).field_id) or c for c in join_cols]


async def _keep_row_ids(
    io: FileIO, md: TableMetadata, data: pa.Table, names: Sequence[str], expr: Expression, branch: str
) -> pa.Table:
    """``data`` conformed, with the v3 row lineage columns: a row replacing one with its key
    keeps that row's ``_row_id``, its ``_last_updated_sequence_number`` left null (the commit's),
    as Java's copy-on-write MERGE does; a new key's row gets a new id from its file's."""
    schema = md.schema()
    data = conform_to_schema(data, schema)
    planner = Planner(io, md, expr, selected_fields=(*names, ROW_ID.name), ref=branch)
    key_ids = {schema.find_field(n).field_id for n in names}
    async with planner.plan_files() as tasks:
        old = await read_to_table(
            io,
            tasks,
            with_lineage(prune_columns(schema, key_ids), (ROW_ID,)),
            table_schema=planner.schema,
            name_mapping=TableProperties(md.properties).name_mapping,
        )
    # one id per key (two old rows with one key both go; the new row keeps the first id)
    old = old.select([*names, ROW_ID.name]).group_by(list(names)).aggregate([(ROW_ID.name, "min")])
    old = old.rename_columns([*names, ROW_ID.name])
    marked = data.append_column("\x00order", pa.array(np.arange(data.num_rows)))
    joined = marked.join(old, keys=list(names), join_type="left outer").sort_by("\x00order")
    ids = joined.column(ROW_ID.name)
    data = data.append_column(pa.field(ROW_ID.name, pa.int64()), ids.cast(pa.int64()))
    return data.append_column(
        pa.field(LAST_UPDATED_SEQUENCE_NUMBER.name, pa.int64()), pa.nulls(data.num_rows, pa.int64())
    )


def _match_filter(keys: pa.Table, names: Sequence[str]) -> Expression:
    """A filter true exactly for rows whose key equals one of ``keys``' rows."""
    if len(names) == 1:
        values = [v for v in keys.column(0).to_pylist() if v is not None]
        return in_(names[0], values)
    columns = [keys.column(i).to_pylist() for i in range(len(names))]
    rows = [r for r in zip(*columns, strict=True) if all(v is not None for v in r)]
    return or_(*(and_(*(EqualTo(n, v) for n, v in zip(names, row, strict=True))) for row in rows))


async def plan_upsert(
    io: FileIO,
    md: TableMetadata,
    data: pa.Table,
    join_cols: Sequence[str] | None = None,
    *,
    mode: str | None = None,
    case_sensitive: bool = True,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
) -> RowLevelChange | None:
    """Replace the rows whose key is in ``data`` by ``data``'s rows and insert the others.

    ``merge-on-read`` (default from v2): equality deletes on the key plus the new rows, in
    one snapshot; nothing is read. Their sequence number makes the deletes hit every older
    row with that key, so concurrent commits need no check and the change always rebases.
    ``copy-on-write`` (default for v1): an overwrite filtered on the keys, checked at the
    table's ``write.merge.isolation-level``. A table's ``write.merge.mode`` replaces the
    default (v1 tables always copy on write).
    """
    schema = md.schema()
    names = _key_names(schema, join_cols, case_sensitive)
    if data.num_rows == 0:
        return None
    missing = [n for n in names if n not in data.column_names]
    if missing:
        raise ValidationError(f"upsert rows lack the key columns {missing}")
    keys = data.select(names)
    if keys.group_by(names).aggregate([]).num_rows != keys.num_rows:
        raise ValidationError(f"upsert rows hold duplicate keys on {names}")
    props = TableProperties(md.properties)
    if mode is None and props.merge_mode is not None:  # v1 has no equality deletes
        mode = props.merge_mode if md.format_version >= 2 else COPY_ON_WRITE
    mode = mode or (MERGE_ON_READ if md.format_version >= 2 else COPY_ON_WRITE)
    if mode == COPY_ON_WRITE:
        matching = _match_filter(keys, names)
        written: list[DataFile] = []
        if md.format_version >= 3 and md.snapshot_by_ref(branch) is not None:
            written = await _write_rows(
                io, md, await _keep_row_ids(io, md, data, names, matching, branch), lineage=True
            )
        try:
            return await plan_delete(
                io,
                md,
                matching,
                new_rows=None if written else data,
                new_files=written,
                case_sensitive=case_sensitive,
                snapshot_properties=snapshot_properties,
                branch=branch,
                operation=Operation.OVERWRITE,
                isolation=props.merge_isolation,
            )
        except BaseException:
            await _cleanup(io, written)
            raise
    if mode != MERGE_ON_READ:
        raise ValidationError(f"unknown upsert mode {mode!r}: use {COPY_ON_WRITE!r} or {MERGE_ON_READ!r}")
    if md.format_version < 2:
        raise UnsupportedError("equality deletes need format version 2 or later; use mode='copy-on-write'")
    key_ids = [schema.find_field(n).field_id for n in names]
    spec = md.spec()
    if spec.fields:
        # A partition-scoped delete only reaches rows of its own partition and spec: the key
        # must decide the partition, and no older spec may hold rows.
        outside = [f.name for f in spec.fields if not set(f.source_ids) <= set(key_ids)]
        if outside:
            raise UnsupportedError(
                f"partition fields {outside} do not derive from the key {names}: an equality "
                "delete could miss the old row; use mode='copy-on-write'"
            )
        snap = md.snapshot_by_ref(branch)
        if snap is not None:
            for mf in await snapshot_manifests(io, snap):
                if mf.content == ManifestContent.DATA and mf.partition_spec_id != spec.spec_id:
                    if mf.has_added_files() or mf.has_existing_files():
                        raise UnsupportedError(
                            "rows written under an older partition spec are out of reach of "
                            "partitioned equality deletes; use mode='copy-on-write'"
                        )
    added = await _write_rows(io, md, data)
    deletes: list[DataFile] = []
    try:
        provider = LocationProvider(md.location, props)
        conformed = conform_to_schema(data, schema)
        for partition, rows in split_by_partition(conformed, schema, spec):
            deletes.append(
                await write_equality_delete_file(
                    io,
                    provider,
                    rows,
                    key_ids,
                    table_schema=schema,
                    spec=spec,
                    partition=partition,
                    properties=props,
                )
            )
    except BaseException:
        await _cleanup(io, [*added, *deletes])
        raise
    snap = md.snapshot_by_ref(branch)
    return RowLevelChange(
        added_data_files=added,
        added_delete_files=deletes,
        start_snapshot_id=snap.snapshot_id if snap is not None else None,
        detection=None,
        operation=Operation.OVERWRITE,
        branch=branch,
        snapshot_properties=snapshot_properties,
    )
