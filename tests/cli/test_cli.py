"""The ``aioiceberg`` console script, driven as a user would: a subprocess per command, against a
local warehouse and against moto S3. User mistakes must give one ``error:`` line and exit 1."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from servers.backends import create_bucket

SCRIPT = shutil.which("aioiceberg", path=os.path.dirname(sys.executable)) or "aioiceberg"


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [SCRIPT, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok:
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr}"
    return proc


def fails(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """The one error line of a command that must fail with exit code 1."""
    proc = run(*args, cwd=cwd, env=env, ok=False)
    assert proc.returncode == 1, f"{args}: rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def events(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "ts": pa.array(
                [1_714_521_600_000_000 + i * 3_600_000_000 for i in range(start, start + n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "region": [["eu", "us", "ap"][i % 3] for i in range(start, start + n)],
        }
    )


def test_demo_runs_from_the_console_script_into_the_default_warehouse(tmp_path: Path) -> None:
    out = run("demo", "--rows", "20000", cwd=tmp_path).stdout
    for expected in (
        "1. created demo.events, partitioned by day(ts)",
        "2.4 appended 5,000 rows",
        "3. evolved the schema",
        "4. deleted",
        "5. planned  ts >= '2024-05-26T00:00:00+00:00' AND region = 'eu'",
        "skipped by partition summaries",
        "6. scanned",
        "7. full scan of 2 columns",
        "done in",
    ):
        assert expected in out, out
    assert (tmp_path / "warehouse" / "demo" / "events" / "metadata").is_dir()
    again = run("demo", "--rows", "1000", "--appends", "1", cwd=tmp_path).stdout  # re-runnable
    assert "dropped the previous demo.events (purge)" in again
    assert "2.1 appended 1,000 rows" in again


def test_every_subcommand_on_a_local_warehouse(tmp_path: Path) -> None:
    env = {"AIOICEBERG_WAREHOUSE": str(tmp_path / "wh")}
    pq.write_table(events(0, 30), tmp_path / "a.parquet")
    pq.write_table(events(30, 30), tmp_path / "b.parquet")
    pcsv.write_csv(events(60, 12), tmp_path / "c.csv")

    out = run(
        "create", "db.events", "--schema", "id long, ts timestamptz, region string",
        "--partition-by", "day(ts), bucket(4, id)", "--property", "owner=ops", cwd=tmp_path, env=env,
    ).stdout  # fmt: skip
    assert (
        "created db.events" in out and "partitioned by day(ts) as ts_day, bucket[4](id) as id_bucket" in out
    )
    out = run("create", "db.copy", "--schema", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env).stdout
    assert "ts: optional timestamptz" in out
    run("namespace", "db", "--property", "team=data", cwd=tmp_path, env=env)

    out = run(
        "append", "db.events", str(tmp_path / "*.parquet"), str(tmp_path / "c.csv"), cwd=tmp_path, env=env
    )
    assert "appended 72 rows from 3 file(s) to db.events" in out.stdout
    run("append", "db.events", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)

    out = run("list", cwd=tmp_path, env=env).stdout
    assert out.splitlines() == ["db  (team=data)", "  db.copy", "  db.events"]

    out = run("describe", "db.events", cwd=tmp_path, env=env).stdout
    assert "partition spec (id 0): day(ts) as ts_day, bucket[4](id) as id_bucket" in out
    assert "owner = ops" in out and "total-records = 102" in out and "snapshots: 2" in out
    assert "sort order (id 0): unsorted" in out and "timestamptz" in out

    out = run("plan", "db.events", "--filter", "ts < '2024-05-02T00:00:00+00:00' AND id < 10",
              cwd=tmp_path, env=env).stdout  # fmt: skip
    assert "ts_day=2024-05-01" in out and "files skipped:" in out and "by partition" in out
    assert "manifests: 2 total" in out

    out = run("scan", "db.events", "-f", "region = 'eu' AND id < 9", "-c", "id,region", cwd=tmp_path, env=env)
    assert "6 rows in" in out.stdout and "│ 6  │ eu     │" in out.stdout  # a.parquet went in twice
    out = run("scan", "db.events", "-n", "2", cwd=tmp_path, env=env).stdout
    assert "2 rows in" in out
    run("scan", "db.events", "-f", "id >= 60", "-O", str(tmp_path / "out.parquet"), cwd=tmp_path, env=env)
    assert sorted(pq.read_table(tmp_path / "out.parquet").column("id").to_pylist()) == list(range(60, 72))
    run("scan", "db.events", "-c", "id", "-O", str(tmp_path / "out.csv"), cwd=tmp_path, env=env)
    assert pcsv.read_csv(tmp_path / "out.csv").num_rows == 102

    history = run("history", "db.events", cwd=tmp_path, env=env).stdout
    assert "2 snapshot(s)" in history and "append" in history
    first = re.findall(r"^│   │ (\d+) ", history, re.M)[0]  # the oldest, not current
    assert run("snapshots", "db.events", cwd=tmp_path, env=env).stdout == history

    out = run("stats", "db.events", "-c", "id,region", cwd=tmp_path, env=env).stdout
    assert "statistics for db.events written to" in out and "region: ndv 3" in out
    out = run("rollback", "db.events", first, cwd=tmp_path, env=env).stdout
    assert f"db.events is at snapshot {first}" in out
    out = run("expire", "db.events", "--older-than", "0s", "--retain-last", "1", cwd=tmp_path, env=env).stdout
    assert "expired 1 snapshot(s)" in out

    out = run("rename", "db.copy", "db.copy2", cwd=tmp_path, env=env).stdout
    assert "renamed db.copy to db.copy2" in out
    out = run("drop", "db.copy2", cwd=tmp_path, env=env).stdout
    assert "dropped db.copy2; its data stays, metadata kept at" in out
    run("drop", "db.events", "--purge", cwd=tmp_path, env=env)
    assert run("list", cwd=tmp_path, env=env).stdout.splitlines() == ["db  (team=data)"]


def test_user_mistakes_print_one_error_line_and_exit_1(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    env = {"AIOICEBERG_WAREHOUSE": wh}
    run("create", "db.t", "--schema", "id long, name string", cwd=tmp_path, env=env)
    (tmp_path / "junk.parquet").write_bytes(b"this is not parquet")

    assert fails("describe", "db.missing", cwd=tmp_path, env=env) == (
        f"error: table db.missing not found in warehouse {wh}"
    )
    assert fails("scan", "db.t", "--filter", "id >>> 3", cwd=tmp_path, env=env) == (
        "error: bad filter 'id >>> 3': expected a literal (number, 'string', true or false), "
        "found '>' at position 4: id >>> 3"
    )
    assert fails("plan", "db.t", "--filter", "nope = 1", cwd=tmp_path, env=env).startswith(
        "error: bad filter 'nope = 1': "
    )
    assert fails("scan", "db.t", "--columns", "nme", cwd=tmp_path, env=env) == (
        f"error: cannot select column 'nme': table {wh}/db/t has no such column in its current "
        "schema (id 0); did you mean 'name'?"
    )
    assert fails("append", "db.t", str(tmp_path / "junk.parquet"), cwd=tmp_path, env=env).startswith(
        f"error: cannot read {tmp_path / 'junk.parquet'}: "
    )
    assert fails("append", "db.t", str(tmp_path / "absent.parquet"), cwd=tmp_path, env=env) == (
        f"error: cannot read {tmp_path / 'absent.parquet'}: no such file"
    )
    assert fails("append", "db.t", str(tmp_path / "*.csv"), cwd=tmp_path, env=env) == (
        f"error: no files match '{tmp_path / '*.csv'}'"
    )
    assert fails("create", "db.u", "--schema", "id lng", cwd=tmp_path, env=env) == (
        "error: bad schema field 'id lng': unknown type 'lng' (use e.g. long, string, timestamptz, "
        "decimal(9, 2))"
    )
    assert fails("create", "db.t", "--schema", "id long", cwd=tmp_path, env=env) == (
        f"error: table db.t already exists in warehouse {wh}"
    )
    assert fails("rollback", "db.t", "42", cwd=tmp_path, env=env) == "error: table db.t has no snapshot 42"
    assert (
        fails("list", "nope", cwd=tmp_path, env=env) == f"error: namespace nope not found in warehouse {wh}"
    )
    assert fails("drop", "db.missing", cwd=tmp_path, env=env) == (
        f"error: table db.missing not found in warehouse {wh}"
    )
    usage = run("scan", cwd=tmp_path, env=env, ok=False)
    assert usage.returncode == 2 and "Missing argument 'TABLE'" in usage.stderr


def test_s3_warehouse_from_aws_environment_and_from_storage_options(
    tmp_path: Path, moto_endpoint: str
) -> None:
    bucket = anyio.run(create_bucket, moto_endpoint)
    pq.write_table(events(0, 48), tmp_path / "a.parquet")
    env = {"AIOICEBERG_WAREHOUSE": f"s3://{bucket}/wh", "AWS_ENDPOINT_URL": moto_endpoint}
    run(
        "create", "db.events", "--schema", str(tmp_path / "a.parquet"), "-p", "day(ts)", cwd=tmp_path, env=env
    )
    assert (
        "appended 48 rows"
        in run("append", "db.events", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env).stdout
    )
    assert run("list", cwd=tmp_path, env=env).stdout.splitlines() == ["db", "  db.events"]
    assert (
        f"s3://{bucket}/wh/db/events/metadata/v2.metadata.json"
        in run("describe", "db.events", cwd=tmp_path, env=env).stdout
    )
    out = run("plan", "db.events", "-f", "ts >= '2024-05-02T12:00:00+00:00'", cwd=tmp_path, env=env).stdout
    assert "files: 1 to read" in out and "files skipped: 1 by partition" in out
    out = run("scan", "db.events", "-f", "id = 47", cwd=tmp_path, env=env).stdout
    assert "1 rows in" in out and "47" in out
    assert "1 snapshot(s)" in run("history", "db.events", cwd=tmp_path, env=env).stdout
    assert fails("rename", "db.events", "db.other", cwd=tmp_path, env=env) == (
        "error: renaming tables is not supported on s3:// warehouses: it would mean copying every file "
        "and rewriting the absolute paths inside its metadata"
    )
    assert fails("describe", "db.missing", cwd=tmp_path, env=env) == (
        f"error: table db.missing not found in warehouse s3://{bucket}/wh"
    )
    # the same warehouse through explicit options instead of the AWS environment
    options = ["-w", f"s3://{bucket}/wh", "-o", f"s3.endpoint={moto_endpoint}", "-o", "s3.region=us-east-1"]
    plain = {"AWS_ENDPOINT_URL": "", "AIOICEBERG_WAREHOUSE": ""}
    out = run(*options, "scan", "db.events", "-c", "id", "-n", "100", cwd=tmp_path, env=plain).stdout
    assert "48 rows in" in out
    run(*options, "drop", "db.events", "--purge", cwd=tmp_path, env=plain)
    assert "no tables in" in run(*options, "list", cwd=tmp_path, env=plain).stdout


def test_a_dynamodb_table_appended_by_location_commits_through_dynamodb(
    tmp_path: Path, moto_endpoint: str
) -> None:
    bucket = anyio.run(create_bucket, moto_endpoint)
    pq.write_table(events(0, 6), tmp_path / "a.parquet")
    lock = f"dynamodb://cli_{bucket[-8:]}"
    env = {"AIOICEBERG_WAREHOUSE": f"s3://{bucket}/wh", "AWS_ENDPOINT_URL": moto_endpoint}
    run("--lock", lock, "create", "db.t", "--schema", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)
    run("--lock", lock, "append", "db.t", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)
    # by location, no --lock: the table names its commit point, reached through AWS_ENDPOINT_URL
    run("append", f"s3://{bucket}/wh/db/t", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)
    history = run("--lock", lock, "history", "db.t", cwd=tmp_path, env=env).stdout
    assert "2 snapshot(s)" in history


def test_a_sql_catalog_by_its_uri_with_tables_in_a_warehouse(tmp_path: Path) -> None:
    """``--warehouse`` takes any catalog URI; ``--tables-in`` says where a service puts new
    tables. PyIceberg's SqlCatalog on the same database sees what the CLI made."""
    from pyiceberg.catalog.sql import SqlCatalog

    db = tmp_path / "catalog.db"
    env = {"AIOICEBERG_WAREHOUSE": f"sqlite:///{db}", "AIOICEBERG_TABLES_IN": str(tmp_path / "tables")}
    pq.write_table(events(0, 30), tmp_path / "a.parquet")
    fails("create", "db.events", "--schema", "id long", cwd=tmp_path, env={**env, "AIOICEBERG_TABLES_IN": ""})
    run("namespace", "db", "--property", "team=data", cwd=tmp_path, env=env)
    run("create", "db.events", "--schema", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)
    run("append", "db.events", str(tmp_path / "a.parquet"), cwd=tmp_path, env=env)
    assert "db.events" in run("list", "db", cwd=tmp_path, env=env).stdout
    assert (tmp_path / "tables" / "db" / "events" / "metadata").is_dir()
    peer = SqlCatalog("default", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path / 'tables'}")
    assert peer.load_table("db.events").scan().to_arrow().num_rows == 30
