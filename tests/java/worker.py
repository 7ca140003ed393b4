"""A Spark session with Apache Iceberg's Java runtime, driven over a pipe by the tests.

Runs in the Java peer's own environment (``.venv-java``: the PySpark that Iceberg's Spark
runtime supports), never imports aioiceberg. Commands arrive as JSON lines on stdin; each
answer is one JSON line on the file descriptor named by ``PEER_RESULT_FD`` (the JVM shares
stdout and stderr, so neither can carry answers).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sys
import traceback
from typing import Any

from pyspark.sql import SparkSession


def _session(jars: list[str], conf: dict[str, str]) -> SparkSession:
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("java-iceberg-peer")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _plain(value: Any) -> Any:
    """A collected value as JSON can carry it (the tests compare typed values through Arrow)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return _plain(value.asDict())
    return value


def _handle(spark: SparkSession, command: dict[str, Any]) -> dict[str, Any]:
    op = command["op"]
    if op == "sql":
        rows = spark.sql(command["sql"]).collect()
        return {"rows": [_plain(list(r)) for r in rows]}
    if op == "arrow":
        import pyarrow as pa

        table = spark.sql(command["sql"]).toArrow()
        with pa.OSFile(command["path"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return {"rows": table.num_rows}
    if op == "conf":
        for key, value in command["conf"].items():
            spark.conf.set(key, value)
        return {}
    if op == "input_files":
        # The data files Spark reads for a query: what its own planning kept.
        df = spark.sql(command["sql"])
        return {"files": sorted(df.inputFiles())}
    raise ValueError(f"unknown command {op!r}")


def main() -> None:
    out = os.fdopen(int(os.environ["PEER_RESULT_FD"]), "w", buffering=1)
    start = json.loads(sys.stdin.readline())
    try:
        spark = _session(start["jars"], start.get("conf", {}))
        out.write(json.dumps({"ok": True, "version": spark.version}) + "\n")
    except Exception as exc:  # the tests report why the peer did not start
        out.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("op") == "stop":
            break
        try:
            answer = {"ok": True, **_handle(spark, command)}
        except Exception as exc:
            message = str(exc).strip().splitlines()
            answer = {
                "ok": False,
                "error": type(exc).__name__,
                "message": "\n".join(message[:20]),
                "trace": traceback.format_exc(limit=3)[-2000:],
            }
        out.write(json.dumps(answer) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
