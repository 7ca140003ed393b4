"""Structured Streaming through the aioiceberg source and sink, on a real local SparkSession."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from region_rows import SCHEMA, rows
from spark_sessions import local_session

from aioiceberg import sync
from aioiceberg.spark.streaming import EPOCH_ID_PROPERTY, QUERY_ID_PROPERTY


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-streaming-tests")


def new_table(tmp_path: Path, name: str = "src", partitioned: bool = False) -> sync.Table:
    return sync.connect(str(tmp_path / "wh")).create_table(
        f"db.{name}", schema=SCHEMA, partition_by=["region"] if partitioned else []
    )


def stream(spark: Any, table: sync.Table, **options: str) -> Any:
    reader = spark.readStream.format("aioiceberg")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(table.location)


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def input_rows(query: Any) -> list[int]:
    """Rows per micro-batch that read any."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def run_available_now(df: Any, sink: Any) -> Any:
    query = sink(df.writeStream).trigger(availableNow=True).start()
    query.awaitTermination(120)
    return query


def test_appends_arrive_exactly_once_between_batches_and_across_a_restart(
    spark: Any,
    tmp_path: Path,
) -> None:
    table = new_table(tmp_path)
    table.append(rows(0, 10))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start() -> Any:
        return (
            stream(spark, table)
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ck)
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    query = start()
    query.processAllAvailable()
    table.append(rows(10, 10))  # another writer, between micro-batches
    table.rewrite_data_files()  # compaction: a replace snapshot, no new rows
    assert table.current_snapshot().operation.value == "replace"  # type: ignore[union-attr]
    query.processAllAvailable()
    assert ids(spark.read.parquet(out)) == list(range(20))
    query.stop()
    table.append(rows(20, 10))  # while the query is down
    table.append(rows(30, 5))
    query = start()  # from the checkpoint: on from the last batch's snapshot
    query.processAllAvailable()
    query.stop()
    assert ids(spark.read.parquet(out)) == list(range(35))


def test_max_files_splits_a_backlog_over_batches_inside_a_snapshot(spark: Any, tmp_path: Path) -> None:
    table = new_table(tmp_path, partitioned=True)
    table.append(rows(0, 30))  # one file per region: 3 files of 10 rows
    table.append(rows(30, 30))
    df = stream(spark, table, **{"streaming-max-files-per-micro-batch": "4"})
    query = run_available_now(df, lambda w: w.format("memory").queryName("max_files"))
    assert input_rows(query) == [40, 20]  # the second snapshot's files split 1 + 2
    assert ids(spark.table("max_files")) == list(range(60))


def test_a_delete_snapshot_stops_the_stream_unless_skipped(spark: Any, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    table = new_table(tmp_path, partitioned=True)
    table.append(rows(0, 30))
    table.delete("region = 'eu'")  # whole files: a delete snapshot
    deleted = table.current_snapshot()
    assert deleted is not None and deleted.operation is not None and deleted.operation.value == "delete"
    table.append(rows(30, 30))

    df = stream(spark, table)
    query = df.writeStream.format("memory").queryName("refused").trigger(availableNow=True).start()
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(120)
    message = str(caught.value)
    assert f"snapshot {deleted.snapshot_id}" in message and "delete snapshot" in message
    assert "streaming-skip-delete-snapshots" in message
    assert ids(spark.table("refused")) == list(range(30))  # what came before it was delivered

    df = stream(spark, table, **{"streaming-skip-delete-snapshots": "true"})
    run_available_now(df, lambda w: w.format("memory").queryName("skipped"))
    assert ids(spark.table("skipped")) == list(range(60))


def test_unknown_and_batch_only_options_are_refused_by_name(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    from aioiceberg.errors import ValidationError
    from aioiceberg.spark.source import AioIcebergDataSource
    from aioiceberg.spark.streaming import AioIcebergStreamWriter

    table = new_table(tmp_path)
    table.append(rows(0, 3))
    with pytest.raises(Exception, match="streaming-max-file-per-micro-batch"):
        stream(spark, table, **{"streaming-max-file-per-micro-batch": "1"})
    with pytest.raises(ValidationError, match="'snapshot-id' picks one snapshot for a batch read"):
        reader_of(table, **{"snapshot-id": "1"})
    source = AioIcebergDataSource(
        {"path": table.location, "idempotency-key": "k", "checkpointLocation": "/ck"}
    )
    with pytest.raises(ValidationError, match="'idempotency-key' is for batch writes"):
        AioIcebergStreamWriter.for_source(source, StructType([StructField("id", LongType())]), False)


def test_a_streaming_write_commits_each_epoch_once_across_restart_and_replay(
    spark: Any,
    tmp_path: Path,
) -> None:
    source = new_table(tmp_path)
    for k in range(2):
        source.append(rows(k * 10, 10))
    sink = new_table(tmp_path, "sink")
    ck = tmp_path / "ck"

    def run() -> None:
        df = stream(spark, source, **{"streaming-max-files-per-micro-batch": "1"})
        query = (
            df.writeStream.format("aioiceberg")
            .option("checkpointLocation", str(ck))
            .option("snapshot-property.app", "test")
            .trigger(availableNow=True)
            .start(sink.location)
        )
        query.awaitTermination(120)

    def epochs() -> list[tuple[str, str]]:
        table = sync.load_table(sink.location)
        out = []
        for snap in table.history():
            props = snap.summary.properties if snap.summary is not None else {}
            out.append((props[QUERY_ID_PROPERTY], props[EPOCH_ID_PROPERTY]))
            assert props["app"] == "test"
        return out

    def data_files_on_disk() -> int:
        return sum(1 for _ in (Path(sink.location.removeprefix("file://")) / "data").rglob("*.parquet"))

    run()
    first = epochs()
    assert [e for _, e in first] == ["0", "1"] and len({q for q, _ in first}) == 1
    source.append(rows(20, 10))
    run()  # restarted from the checkpoint: only the new epoch
    assert [e for _, e in epochs()] == ["0", "1", "2"]
    assert ids(spark.read.format("aioiceberg").load(sink.location)) == list(range(30))

    for name in ("2", ".2.crc"):  # Spark re-runs batch 2 with the offsets it logged
        (ck / "commits" / name).unlink(missing_ok=True)
    run()
    assert (ck / "commits" / "2").exists()
    assert [e for _, e in epochs()] == ["0", "1", "2"]  # the replay committed nothing
    assert ids(spark.read.format("aioiceberg").load(sink.location)) == list(range(30))
    assert data_files_on_disk() == 3  # and took its files away again


# The stream reader outside a query: the offsets and plans Spark would ask for, read back here.


def reader_of(table: sync.Table, **options: str) -> Any:
    from pyspark.sql.types import LongType, StructField, StructType

    from aioiceberg.spark.streaming import AioIcebergStreamReader

    schema = StructType([StructField("id", LongType())])
    return AioIcebergStreamReader({"path": table.location, **options}, schema)


def drain(reader: Any, limit: Any = None) -> list[list[int]]:
    """The ids of each batch a run would read, until no new offset comes."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    batches, start = [], reader.initialOffset()
    while (end := reader.latestOffset(start, limit or ReadAllAvailable())) != start:
        batch = [
            i
            for p in reader.partitions(start, end)
            for b in reader.read(p)
            for i in b.column("id").to_pylist()
        ]
        batches.append(sorted(batch))
        reader.commit(end)
        start = end
    return batches


def test_a_stream_starts_at_the_snapshot_or_timestamp_given(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    for k in range(3):
        table.append(rows(k * 10, 10))
    second = table.history()[1]
    assert drain(reader_of(table)) == [list(range(30))]
    assert drain(reader_of(table, **{"stream-from-snapshot-id": str(second.snapshot_id)})) == [
        list(range(10, 30))
    ]
    assert drain(reader_of(table, **{"stream-from-timestamp": str(second.timestamp_ms)})) == [
        list(range(10, 30))
    ]
    after_all = table.history()[-1].timestamp_ms + 1
    assert drain(reader_of(table, **{"stream-from-timestamp": str(after_all)})) == []


def test_a_stream_follows_the_branch_it_names(tmp_path: Path) -> None:
    table = new_table(tmp_path)
    table.append(rows(0, 10))
    with table.manage_snapshots() as ms:
        ms.create_branch("audit")
    table.append(rows(10, 10), branch="audit")
    table.append(rows(20, 10))  # main only
    assert drain(reader_of(table, branch="audit")) == [list(range(20))]
    assert drain(reader_of(table)) == [list(range(10)) + list(range(20, 30))]


def test_admission_control_stops_inside_a_snapshot(tmp_path: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxFiles, ReadMaxRows

    table = new_table(tmp_path, partitioned=True)
    table.append(rows(0, 30))  # 3 files of 10 rows
    table.append(rows(30, 3))  # 3 files of 1 row
    reader = reader_of(table, **{"streaming-max-files-per-micro-batch": "2"})
    assert reader.getDefaultReadLimit() == ReadMaxFiles(2)
    assert [len(b) for b in drain(reader, reader.getDefaultReadLimit())] == [20, 11, 2]
    assert [len(b) for b in drain(reader_of(table), ReadMaxRows(15))] == [10, 10, 13]  # at least one file


def test_complete_mode_replaces_the_table_each_epoch(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa

    source = new_table(tmp_path)
    source.append(rows(0, 6))
    source.append(rows(6, 3))
    counts_schema = pa.schema([pa.field("region", pa.string()), pa.field("n", pa.int64())])
    sink = sync.connect(str(tmp_path / "wh")).create_table("db.counts", schema=counts_schema)
    df = stream(spark, source, **{"streaming-max-files-per-micro-batch": "1"})
    query = (
        df.groupBy("region")
        .count()
        .withColumnRenamed("count", "n")
        .writeStream.outputMode("complete")
        .format("aioiceberg")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(sink.location)
    )
    query.awaitTermination(120)
    table = sync.load_table(sink.location)
    assert [s.summary.properties[EPOCH_ID_PROPERTY] for s in table.history() if s.summary] == ["0", "1"]
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["region"]) == [
        {"region": "ap", "n": 3},
        {"region": "eu", "n": 3},
        {"region": "us", "n": 3},
    ]
