"""The command line explains itself: a missing warehouse, column typos, timestamp forms, naive CSV
timestamps, deletes in ``history``, ``--help`` texts and ``expire --dry-run``, on real tables in a
temporary warehouse (in process through click's runner; one console-script run for the exit code)."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from aioiceberg import sync
from aioiceberg.cli import CliError, cli
from aioiceberg.cli.app import FILTER_HELP
from aioiceberg.errors import ExpressionError, ValidationError
from aioiceberg.spec.values import parse_timestamp

SCRIPT = shutil.which("aioiceberg", path=os.path.dirname(sys.executable)) or "aioiceberg"
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def ok(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, f"{args}: {result.output}\n{result.exception!r}"
    return result.output


def error(*args: str) -> str:
    """The message of the user mistake ``main`` prints as its one ``error:`` line."""
    result = invoke(*args)
    assert isinstance(result.exception, CliError | ValidationError | ExpressionError), (
        f"{args}: {result.output}\n{result.exception!r}"
    )
    message = str(result.exception)
    assert "\n" not in message, message
    return message


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "ts": pa.array(
                [T0 + dt.timedelta(hours=i) for i in range(start, start + n)], pa.timestamp("us", "UTC")
            ),
            "region": pa.array([["eu", "us", "ap"][i % 3] for i in range(start, start + n)], pa.string()),
        }
    )


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[str]:
    """A warehouse with db.t (partitioned by day(ts), 48 rows in two appends)."""
    root = str(tmp_path / "wh")
    with sync.connect(root) as catalog:
        table = catalog.create_table("db.t", schema=rows(0).schema, partition_by=["day(ts)"])
        table.append(rows(24))
        table.append(rows(24, 24))
    yield root


def files_under(path: str) -> set[str]:
    return {os.path.join(d, f) for d, _, names in os.walk(path) for f in names}


# -- a warehouse that is not there ------------------------------------------------------------------
def test_a_missing_warehouse_directory_is_said_so_instead_of_no_tables(wh: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "wherehouse")
    for command in (["list"], ["describe", "db.t"], ["history", "db.t"], ["drop", "db.t"], ["scan", "db.t"]):
        message = error("-w", missing, *command)
        assert message.startswith(f"warehouse {missing} does not exist (no directory {missing})"), message
        assert "-w / AIOICEBERG_WAREHOUSE" in message
    assert error("-w", f"file://{missing}", "list").startswith(f"warehouse file://{missing} does not exist")
    assert not os.path.exists(missing)

    proc = subprocess.run([SCRIPT, "-w", missing, "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == "", proc
    assert proc.stderr.strip().splitlines() == [f"error: {error('-w', missing, 'list')}"]

    (tmp_path / "afile").write_text("x")
    assert (
        error("-w", str(tmp_path / "afile"), "list") == f"warehouse {tmp_path / 'afile'} is not a directory"
    )
    # a table named by its location needs no warehouse; an empty existing one lists no tables
    assert "2 snapshot(s)" in ok("-w", missing, "history", f"{wh}/db/t")
    os.mkdir(tmp_path / "empty")
    assert ok("-w", str(tmp_path / "empty"), "list").strip() == f"no tables in {tmp_path / 'empty'}"


def test_create_and_namespace_start_a_new_warehouse(tmp_path: Path) -> None:
    first, second = str(tmp_path / "new1"), str(tmp_path / "new2")
    ok("-w", first, "create", "db.t", "--schema", "id long")
    ok("-w", second, "namespace", "db")
    assert ok("-w", first, "list").split() == ["db", "db.t"]
    assert ok("-w", second, "list").split() == ["db"]


# -- columns: "did you mean" -------------------------------------------------------------------------
def test_a_column_typo_names_the_table_its_schema_and_close_names(wh: str) -> None:
    expected = (
        f"cannot select column 'regoin': table {wh}/db/t has no such column in its current schema (id 0); "
        "did you mean 'region'?"
    )
    assert error("-w", wh, "scan", "db.t", "--columns", "id,regoin") == expected
    assert error("-w", wh, "plan", "db.t", "-c", "regoin") == expected  # plans fail too, not just reads
    assert error("-w", wh, "scan", "db.t", "-c", "zzz").endswith("current schema (id 0)")
    assert "did you mean 'region'?" in error("-w", wh, "scan", "db.t", "-f", "regoin = 'eu'")

    with sync.connect(wh) as catalog:
        table = catalog.load_table("db.t")
        with pytest.raises(ValidationError) as caught:
            table.scan(selected_fields=("id", "tss")).to_arrow()
        assert str(caught.value) == (
            f"cannot select column 'tss': table {wh}/db/t has no such column in its current schema (id 0); "
            "did you mean 'ts'?"
        )
        with pytest.raises(ValidationError, match=r"did you mean 'region'\?"):
            table.scan(selected_fields=("REGION",), case_sensitive=True).to_arrow()
        assert table.scan(selected_fields=("REGION",), case_sensitive=False).to_arrow().num_rows == 48
        first = table.snapshots()[0].snapshot_id
        with table.update_schema() as update:
            update.add_column("country", "string")
        with pytest.raises(ValidationError) as caught:
            table.scan(selected_fields=("countr",)).to_arrow()
        assert "in its current schema (id 1); did you mean 'country'?" in str(caught.value)
        with pytest.raises(ValidationError) as caught:
            table.scan(selected_fields=("country",), snapshot_id=first).to_arrow()
        assert str(caught.value).endswith("in the schema of the snapshot scanned (id 0)")


# -- timestamps --------------------------------------------------------------------------------------
def test_the_timestamp_hint_lists_forms_that_are_accepted(wh: str) -> None:
    message = error("-w", wh, "scan", "db.t", "-f", "ts >= '2024-05-01 10:00'")
    assert "needs a zone offset" in message and "Z, +HH:MM or -HHMM" in message, message
    examples = re.search(r"e\.g\. (\S+) or ([^)]+)\)", message)
    assert examples is not None, message
    for form in (*examples.groups(), "2024-05-01", "2024-05-01T10:00+0200", "2024-05-01 10:00:00.5-01:00"):
        out = ok("-w", wh, "scan", "db.t", "-f", f"ts >= '{form}'", "-n", "0")
        assert "0 rows" in out
    bad = error("-w", wh, "scan", "db.t", "-f", "ts >= 'yesterday'")
    assert (
        "(accepted: YYYY-MM-DD (midnight UTC), YYYY-MM-DD[T ]HH:MM[:SS[.ffffff]] followed by a zone offset"
        in bad
    )
    older = error("-w", wh, "expire", "db.t", "--older-than", "last week")
    forms = re.search(r"use an ISO time \((.+); UTC when it has no offset\)", older)
    assert forms is not None, older
    for form in forms.group(1).split(", "):
        assert "would expire 0 snapshot(s)" in ok(
            "-w", wh, "expire", "db.t", "--older-than", form, "--dry-run"
        )


def test_csv_timestamps_without_offset_take_the_zone_given_by_timezone(wh: str, tmp_path: Path) -> None:
    csv = tmp_path / "naive.csv"
    csv.write_text("id,ts,region\n100,2024-06-01 10:00:00,eu\n101,2024-06-01T10:00:00+05:00,us\n102,,ap\n")
    message = error("-w", wh, "append", "db.t", str(csv))
    assert message == (
        f"cannot read {csv}: column 'ts' is a timestamptz but '2024-06-01 10:00:00' has no zone offset; "
        "say which zone such times are in with --timezone (e.g. --timezone UTC, Europe/Paris, +02:00), "
        "or write them with an offset (2024-05-01T12:30:00Z, 2024-05-01 14:30:00+02:00)"
    )
    assert "assume_timezone" not in message
    assert error("-w", wh, "append", "db.t", str(csv), "--timezone", "Mars/Olympus").startswith(
        "unknown time zone 'Mars/Olympus'"
    )

    ok("-w", wh, "append", "db.t", str(csv), "--timezone", "Europe/Paris")
    naive = tmp_path / "naive.parquet"
    pq.write_table(
        pa.table({"id": pa.array([200], pa.int64()), "ts": pa.array([dt.datetime(2024, 6, 1, 10)])}), naive
    )
    ok("-w", wh, "append", "db.t", str(naive), "-z", "-03:00")
    with sync.connect(wh) as catalog:
        got = catalog.load_table("db.t").scan("id >= 100").to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["ts"]) for r in got] == [
        (100, dt.datetime(2024, 6, 1, 8, tzinfo=dt.UTC)),  # Paris in summer: +02:00
        (101, dt.datetime(2024, 6, 1, 5, tzinfo=dt.UTC)),  # its own offset kept
        (102, None),
        (200, dt.datetime(2024, 6, 1, 13, tzinfo=dt.UTC)),
    ]


# -- history -----------------------------------------------------------------------------------------
def history_rows(wh: str, table: str) -> dict[str, list[str]]:
    """Snapshot id -> the row's cells after the id (parent, time, operation, counts)."""
    out: dict[str, list[str]] = {}
    for line in ok("-w", wh, "history", table).splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) > 2 and cells[1].isdigit():
            out[cells[1]] = cells[2:]
    return out


def test_history_shows_deleted_rows_and_files(wh: str) -> None:
    header = ["parent", "committed at", "operation", "added rows", "deleted rows"]
    header += ["net rows", "data files", "delete files", "total rows"]
    with sync.connect(wh) as catalog:
        table = catalog.load_table("db.t")
        table.delete("ts < '2024-05-02T00:00:00Z'")  # the first day's file, whole
        table.delete("id = 30")  # copy-on-write: the file is rewritten without it
        table.set_properties({"write.delete.mode": "merge-on-read"})
        table.delete("id = 40")  # merge-on-read: a position delete file
        ids = [str(s.snapshot_id) for s in sorted(table.snapshots(), key=lambda s: s.sequence_number)]
    out = ok("-w", wh, "history", "db.t")
    assert [h for h in header if h in out] == header
    got = {sid: cells[2:] for sid, cells in history_rows(wh, "db.t").items()}
    assert [got[i] for i in ids] == [
        ["append", "24", "-", "+24", "+1", "-", "24"],
        ["append", "24", "-", "+24", "+1", "-", "48"],
        ["delete", "-", "24", "-24", "-1", "-", "24"],
        ["overwrite", "23", "24", "-1", "+1 -1", "-", "23"],
        ["delete", "-", "1 by position deletes", "-1", "-", "+1", "23"],
    ]


# -- help --------------------------------------------------------------------------------------------
def test_every_command_has_examples_and_scan_and_plan_the_filter_grammar(wh: str) -> None:
    for name, command in cli.commands.items():  # type: ignore[attr-defined]
        text = ok(name, "--help")
        assert "Examples:\n    aioiceberg " in text, f"{name} --help has no example"
        for example in re.findall(r"^    (aioiceberg .*)$", text, re.M):
            assert example.split()[1] in cli.commands or example.split()[1] == "-w", example  # type: ignore[attr-defined]
        if "snapshot_id" in {p.name for p in command.params if p.param_type_name == "option"}:
            assert "--snapshot-id INTEGER Read this snapshot instead of the current one" in " ".join(
                text.split()
            )
    for name in ("scan", "plan"):
        text = ok(name, "--help")
        assert "Filter (--filter) grammar" in text and "[NOT] BETWEEN" in text and "IS [NOT] NULL" in text
    assert "aioiceberg scan --help" in " ".join(ok("--help").split())


def test_the_filters_the_help_shows_are_accepted(wh: str) -> None:
    shown = re.findall(r'-f "([^"]+)"', ok("scan", "--help") + ok("plan", "--help"))
    assert len(shown) >= 3, shown
    for text in shown:
        ok("-w", wh, "plan", "db.t", "-f", text, "--max-files", "0")
    forms = re.findall(r"'(\d{4}-[^']*)'", FILTER_HELP)
    assert len(forms) >= 4, forms
    for form in forms:  # dates and zoned forms on the timestamptz column, the others on their own
        if len(form) == 10 or re.search(r"(Z|[+-]\d\d:?\d\d)$", form):
            ok("-w", wh, "plan", "db.t", "-f", f"ts >= '{form}'", "--max-files", "0")
        else:
            parse_timestamp(form, allow_date=True)
    for grammar in ("id = 5", "5 < id", "id <> 3", "region IN ('eu', 'us')", "region NOT IN ('eu')"):
        ok("-w", wh, "plan", "db.t", "-f", grammar, "--max-files", "0")
    for grammar in ("id NOT BETWEEN 1 AND 9", "region IS NOT NULL", "ts IS NULL", "region LIKE 'e%'"):
        ok("-w", wh, "plan", "db.t", "-f", f"NOT ({grammar}) OR id = 1", "--max-files", "0")


# -- expire --dry-run --------------------------------------------------------------------------------
def test_expire_dry_run_lists_what_would_go_and_changes_nothing(wh: str) -> None:
    with sync.connect(wh) as catalog:
        table = catalog.load_table("db.t")
        table.delete("id < 30")
        table.append(rows(5, 100))
        location, metadata_before = table.location, table.metadata_location
        snapshots = [s.snapshot_id for s in table.snapshots()]
    before = files_under(location)

    out = ok("-w", wh, "expire", "db.t", "--older-than", "0s", "--retain-last", "1", "--dry-run")
    lines = out.splitlines()
    assert re.fullmatch(
        r"dry run: would expire 3 snapshot\(s\) and delete (\d+) file\(s\) \(\d+ data and delete files, "
        r"\d+ manifests, 3 manifest lists\); nothing changed",
        lines[0],
    ), lines[0]
    listed = {
        os.path.join(location, line.split("would delete ", 1)[1]) for line in lines if "would delete " in line
    }
    assert len(listed) == int(re.findall(r"delete (\d+) file", lines[0])[0])
    assert {int(line.split()[1]) for line in lines if line.startswith("  snapshot ")} == set(snapshots[:3])
    assert files_under(location) == before
    with sync.connect(wh) as catalog:
        table = catalog.load_table("db.t")
        assert table.metadata_location == metadata_before
        preview = table.expire_snapshots(older_than=dt.datetime.now(dt.UTC), retain_last=1, dry_run=True)
        assert preview.dry_run and preview.expired_snapshot_ids == sorted(snapshots[:3])
        assert {os.path.normpath(p.removeprefix("file://")) for p in preview.deleted_files} == listed

    out = ok("-w", wh, "expire", "db.t", "--older-than", "0s", "--retain-last", "1")
    deleted = lines[0].split(" and delete ", 1)[1].removesuffix("; nothing changed")
    assert out.splitlines()[0] == f"expired 3 snapshot(s), deleted {deleted}"
    assert before - files_under(location) == listed
