"""Structured Streaming through the aioiceberg source and sink, on a real local SparkSession."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from test_spark import SCHEMA, rows, spark  # noqa: F401  (spark: the module's session fixture)

from aioiceberg import sync
from aioiceberg.spark.streaming import EPOCH_ID_PROPERTY, QUERY_ID_PROPERTY


def new_table(tmp_path: Path, name: str = "src", partitioned: bool = False) -> sync.Table:
    return sync.connect(str(tmp_path / "wh")).create_table(
        f"db.{name}", schema=SCHEMA, partition_by=["region"] if partitioned else []
    )


def stream(spark: Any, table: sync.Table, **options: str) -> Any:  # noqa: F811
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
    spark: Any,  # noqa: F811
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
    query.processAllAvailable()
    assert ids(spark.read.parquet(out)) == list(range(20))
    query.stop()
    table.append(rows(20, 10))  # while the query is down
    table.append(rows(30, 5))
    query = start()  # from the checkpoint: on from the last batch's snapshot
    query.processAllAvailable()
    table.append(rows(35, 5))
    query.processAllAvailable()
    query.stop()
    assert ids(spark.read.parquet(out)) == list(range(40))


def test_max_files_splits_a_backlog_over_batches_inside_a_snapshot(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    table = new_table(tmp_path, partitioned=True)
    table.append(rows(0, 30))  # one file per region: 3 files of 10 rows
    table.append(rows(30, 30))
    df = stream(spark, table, **{"streaming-max-files-per-micro-batch": "4"})
    query = run_available_now(df, lambda w: w.format("memory").queryName("max_files"))
    assert input_rows(query) == [40, 20]  # the second snapshot's files split 1 + 2
    assert ids(spark.table("max_files")) == list(range(60))

    df = stream(spark, table, **{"streaming-max-rows-per-micro-batch": "25"})
    query = run_available_now(df, lambda w: w.format("memory").queryName("max_rows"))
    assert input_rows(query) == [20, 20, 20]
    assert ids(spark.table("max_rows")) == list(range(60))


def test_a_delete_snapshot_stops_the_stream_unless_skipped(spark: Any, tmp_path: Path) -> None:  # noqa: F811
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


def test_unknown_and_batch_only_options_are_refused_by_name(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    table = new_table(tmp_path)
    table.append(rows(0, 3))
    with pytest.raises(Exception, match="streaming-max-file-per-micro-batch"):
        stream(spark, table, **{"streaming-max-file-per-micro-batch": "1"})
    df = stream(spark, table)
    with pytest.raises(Exception, match="idempotency-key"):
        df.writeStream.format("aioiceberg").option("idempotency-key", "k").option(
            "checkpointLocation", str(tmp_path / "ck")
        ).start(table.location).awaitTermination(60)


def test_a_streaming_write_commits_each_epoch_once_across_restart_and_replay(
    spark: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    source = new_table(tmp_path)
    for k in range(3):
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
    assert [e for _, e in first] == ["0", "1", "2"] and len({q for q, _ in first}) == 1
    source.append(rows(30, 10))
    run()  # restarted from the checkpoint: only the new epoch
    assert [e for _, e in epochs()] == ["0", "1", "2", "3"]
    assert ids(spark.read.format("aioiceberg").load(sink.location)) == list(range(40))

    for name in ("3", ".3.crc"):  # Spark re-runs batch 3 with the offsets it logged
        (ck / "commits" / name).unlink(missing_ok=True)
    run()
    assert (ck / "commits" / "3").exists()
    assert [e for _, e in epochs()] == ["0", "1", "2", "3"]  # the replay committed nothing
    assert ids(spark.read.format("aioiceberg").load(sink.location)) == list(range(40))
    assert data_files_on_disk() == 4  # and took its files away again
