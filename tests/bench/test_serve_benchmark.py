"""The serve load benchmark's tiny mode runs end to end: PyIceberg clients appending through
``aioiceberg serve`` on one table and on one table each, with a ``kill -9`` and a restart,
and every acknowledged append found exactly once afterwards (the script checks the table
and exits non-zero otherwise; here its table is checked too). No timing assertions."""

from __future__ import annotations

from benchmark_runs import run_tiny, table_lines


def test_serve_load_tiny_mode_loses_nothing() -> None:
    out = run_tiny("serve_load.py")
    header, *rows = (line.strip("|").split("|") for line in table_lines(out))
    column = {name.strip(): i for i, name in enumerate(header)}
    by_phase = {row[column["phase"]].strip(): row for row in rows}
    assert sorted(by_phase) == ["many", "many-kill", "one", "one-kill"]
    for phase, row in by_phase.items():
        assert int(row[column["appends acked"]]) > 0, phase
        assert int(row[column["lost or duplicated"]]) == 0, phase
        tables = int(row[column["tables"]])
        assert tables == (1 if phase.startswith("one") else int(row[column["clients"]])), phase
        down = row[column["server down s"]].strip()
        assert (down != "-") == phase.endswith("-kill"), phase
