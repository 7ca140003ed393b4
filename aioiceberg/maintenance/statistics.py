"""Table statistics: per-column NDV theta sketches in a Puffin file, registered with SetStatistics.

Engines (Trino, Spark, Java's planners) read the ``ndv`` blob property for join
ordering; the sketches themselves let them merge statistics across snapshots later.
Values are hashed in Iceberg's single-value binary form, so sketches match Java's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from aioiceberg.commit.requirements import AssertTableUUID, TableRequirement
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.updates import SetStatistics, TableUpdate
from aioiceberg.errors import NotFoundError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.read import read_to_table
from aioiceberg.scan import Planner
from aioiceberg.spec.metadata import BlobMetadata, StatisticsFile, TableMetadata
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.puffin import PuffinWriter
from aioiceberg.spec.types import (
    DateType,
    PrimitiveType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

__all__ = ["SetStatisticsChange", "plan_compute_statistics", "sketch_values"]

_AS_INT: dict[type[PrimitiveType], pa.DataType] = {
    DateType: pa.int32(),
    TimeType: pa.int64(),
    TimestampType: pa.int64(),
    TimestamptzType: pa.int64(),
    TimestampNanoType: pa.int64(),
    TimestamptzNanoType: pa.int64(),
}


def sketch_values(column: pa.ChunkedArray | pa.Array, field_type: PrimitiveType) -> list[object]:
    """The distinct non-null values of a column, in the form ``spec.values.to_bytes`` takes."""
    distinct = pc.unique(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
    distinct = distinct.drop_null()
    if isinstance(field_type, UUIDType):
        if not pa.types.is_fixed_size_binary(distinct.type) and not pa.types.is_binary(distinct.type):
            distinct = distinct.cast(pa.binary(16))  # pre-serialized: bytes are hashed as they are
        return [bytes(v) for v in distinct.to_pylist()]
    as_int = _AS_INT.get(type(field_type))
    if as_int is not None:
        distinct = distinct.cast(as_int)
    return distinct.to_pylist()  # type: ignore[no-any-return]


class SetStatisticsChange:
    """Registers one statistics file; deletes it if the commit definitely failed."""

    def __init__(self, statistics: StatisticsFile) -> None:
        self.statistics = statistics

    @property
    def snapshot_id(self) -> int | None:
        return None

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        if base.snapshot_by_id(self.statistics.snapshot_id) is None:
            raise NotFoundError(
                f"snapshot {self.statistics.snapshot_id} expired before its statistics landed"
            )
        return [SetStatistics(self.statistics)], [AssertTableUUID(base.table_uuid)]

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        return None

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, [self.statistics.statistics_path])


async def plan_compute_statistics(
    io: FileIO, md: TableMetadata, columns: Sequence[str] | None = None, snapshot_id: int | None = None
) -> SetStatisticsChange | None:
    """NDV sketches of ``columns`` (default: every top-level primitive column) of a snapshot.

    The Puffin file is written now; the change registers it (its ``statistics``). None for
    a table without snapshots.
    """
    snap = md.snapshot_by_id(snapshot_id) if snapshot_id is not None else md.current_snapshot()
    if snap is None:
        if snapshot_id is not None:
            raise NotFoundError(f"snapshot {snapshot_id} is not in the table")
        return None
    schema = md.schema_by_id(snap.schema_id) if snap.schema_id is not None else None
    schema = schema or md.schema()
    if columns is None:
        fields = [f for f in schema.fields if isinstance(f.field_type, PrimitiveType)]
    else:
        fields = [schema.find_field(name) for name in columns]
    fields = [f for f in fields if not isinstance(f.field_type, UnknownType)]
    for f in fields:
        if not isinstance(f.field_type, PrimitiveType):
            raise ValidationError(
                f"column {f.name!r} is {f.field_type}: NDV sketches need a primitive column"
            )
    if not fields:
        raise ValidationError("no columns to compute statistics for")
    projection = schema.select(*(f.name for f in fields))
    tasks = [t async for t in Planner(io, md, snapshot_id=snap.snapshot_id).plan_files()]
    rows = await read_to_table(io, tasks, projection, table_schema=schema)

    writer = PuffinWriter()
    for f in fields:
        assert isinstance(f.field_type, PrimitiveType)
        values = sketch_values(rows.column(f.name), f.field_type)
        value_type = None if isinstance(f.field_type, UUIDType) else f.field_type
        writer.add_theta_sketch(
            values,
            field_id=f.field_id,
            snapshot_id=snap.snapshot_id,
            sequence_number=snap.sequence_number,
            value_type=value_type,
        )
    data = writer.finish()
    name = f"{snap.snapshot_id}-{uuid.uuid4()}.stats"
    path = TableProperties.of(md.properties).metadata_file(md.location, name)
    await io.write(path, data)
    assert writer.footer_size is not None
    statistics = StatisticsFile(
        snapshot_id=snap.snapshot_id,
        statistics_path=path,
        file_size_in_bytes=len(data),
        file_footer_size_in_bytes=writer.footer_size,
        blob_metadata=tuple(
            BlobMetadata(b.type, b.snapshot_id, b.sequence_number, b.fields, b.properties)
            for b in writer.blobs
        ),
    )
    return SetStatisticsChange(statistics)
