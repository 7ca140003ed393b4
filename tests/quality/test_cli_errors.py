"""The command line over a broken table: exit code 1 and one ``error:`` line on stderr that
names the broken object, never a traceback nor a foreign exception's type."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from broken_tables import (
    _break_data_file,
    _break_manifest,
    _break_manifest_list,
    _listing,
    _local,
    _rows,
    _table,
    _truncate,
)

from aioiceberg.table import Table

SCRIPT = shutil.which("aioiceberg", path=os.path.dirname(sys.executable)) or "aioiceberg"


async def _break_metadata_json(table: Table) -> str:
    _truncate(_local(table.metadata_location))
    return table.metadata_location


BREAKAGES: dict[str, Callable[[Table], Awaitable[str]]] = {
    "data-file": lambda t: _break_data_file(t, _truncate),
    "manifest": _break_manifest,
    "manifest-list": _break_manifest_list,
    "metadata.json": _break_metadata_json,
}
CASES = [  # (command after the table name, what is broken)
    (("scan", "--limit", "1000"), "data-file"),  # the first 20 rows may not need the file
    (("scan", "--filter", "id > 3"), "manifest"),
    (("scan",), "manifest-list"),
    (("scan",), "metadata.json"),
    (("plan",), "manifest"),
    (("plan",), "manifest-list"),
    (("history",), "metadata.json"),
    (("describe",), "metadata.json"),
    (("expire", "--retain-last", "1", "--older-than", "0d"), "manifest-list"),
    (("stats",), "data-file"),
    (("append", "{new}"), "metadata.json"),
    (("append", "{new}"), "manifest-list"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("command", "broken"), CASES, ids=[f"{c[0]}-{b}" for c, b in CASES])
async def test_a_command_over_a_broken_table_prints_one_error_line_naming_the_object(
    command: tuple[str, ...], broken: str, tmp_path: Path
) -> None:
    table = await _table(tmp_path / "wh")
    victim = await BREAKAGES[broken](table)
    new = tmp_path / "new.parquet"
    pq.write_table(_rows(500, 3), new)
    before = _listing(_local(table.location))
    args = [a.replace("{new}", str(new)) for a in command]
    proc = subprocess.run(
        [SCRIPT, "-w", str(tmp_path / "wh"), args[0], "db.t", *args[1:]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("error: ") and os.path.basename(victim) in lines[0], lines[0]
    assert not re.match(r"error: \w+: ", lines[0]), f"a foreign exception reached the user: {lines[0]}"
    assert _listing(_local(table.location)) == before
