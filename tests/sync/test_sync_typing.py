"""The blocking API's static types: mypy must see each twin with its async method's signature.

A file of ``reveal_type`` lines over every public member of the async classes and of their
twins is checked by mypy (with the project's strict configuration); each twin's revealed type
must be the async one with the blocking translation applied (a coroutine's result, an async
iterator as an iterator, async objects as their twins). A twin that drifts from its async
method, goes missing, or falls back to ``Any`` fails here.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import mypy.api
import pyarrow as pa
import pytest

from aioiceberg import sync
from aioiceberg.catalog import Catalog as AsyncCatalog
from aioiceberg.commit.refs import ManageSnapshots
from aioiceberg.commit.schema_update import UpdateSchema
from aioiceberg.commit.sort_update import UpdateSortOrder
from aioiceberg.commit.spec_update import UpdateSpec
from aioiceberg.table import Table as AsyncTable
from aioiceberg.table import Transaction as AsyncTransaction
from aioiceberg.table_scan import TableScan as AsyncTableScan

ROOT = Path(__file__).resolve().parents[2]
TWINS: list[tuple[type, type]] = [
    (AsyncCatalog, sync.Catalog),
    (AsyncTable, sync.Table),
    (AsyncTransaction, sync.Transaction),
    (AsyncTableScan, sync.TableScan),
]
SCHEMA = pa.schema([pa.field("id", pa.int64())])
Checked = tuple[dict[str, tuple[str, str]], list[str]]
TASKS = "typing.Iterator[aioiceberg.spec.scan_tasks.FileScanTask]"


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# What an async result becomes on the blocking side, by the async type's full name.
BLOCKING_RESULT = {
    **{_name(a): _name(t) for a, t in TWINS},
    **{
        _name(b): f"aioiceberg._sync.twin.Pending[{_name(b)}]"
        for b in (UpdateSchema, UpdateSpec, UpdateSortOrder)
    },
    _name(ManageSnapshots): f"aioiceberg._sync.twin.Pending[{_name(ManageSnapshots)}]",
    "aioiceberg.scan.pipeline.PlanStream": TASKS,
}


def _unpacked(params: str) -> str:
    """``**options: Unpack[SomeTypedDict]`` as mypy shows it once a ParamSpec carries it:
    keyword-only parameters."""
    m = re.search(r", \*\*\w+: \*\*TypedDict\([\w.]+, \{(.*)\}\)\)$", params)
    if m is None:
        return params
    items = m.group(1)
    keys = list(re.finditer(r"'(\w+)'(\??): ", items))
    ends = [k.start() - len(", ") for k in keys[1:]] + [len(items)]
    fields = [
        f"{k.group(1)}: {items[k.end() : e]}{' =' if k.group(2) else ''}"
        for k, e in zip(keys, ends, strict=True)
    ]
    star = [] if ", *" in params[: m.start()] else ["*"]
    return params[: m.start()] + ", " + ", ".join(star + fields) + ")"


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def canonical(revealed: str) -> str:
    """Keyword-only parameters in name order: mypy lists an unpacked TypedDict's keys sorted
    on one side and in declaration order once a ParamSpec carried them, depending on its
    cache, and their order means nothing to a caller."""
    m = re.match(r"((?:async )?def \()(.*)(\)(?: -> .*)?)$", revealed)
    if m is None:
        return revealed
    params = _split_top(m.group(2))
    if "*" not in params:
        return revealed
    star = params.index("*") + 1
    return m.group(1) + ", ".join(params[:star] + sorted(params[star:])) + m.group(3)


def blocking_type(revealed: str) -> str:
    """The type a twin must reveal, given its async original's."""
    if not revealed.startswith("def "):
        return BLOCKING_RESULT.get(revealed, revealed)
    params, arrow, result = revealed.rpartition(" -> ")
    params = _unpacked(params)
    if not arrow:
        return revealed  # returns None (mypy does not print it)
    if m := re.fullmatch(r"typing\.Coroutine\[Any, Any, (.*)\]", result):
        result = m.group(1)
    elif m := re.fullmatch(r"typing\.AsyncIterator\[(.*)\]", result):
        result = f"typing.Iterator[{m.group(1)}]"
    result = BLOCKING_RESULT.get(result, result)
    return params if result == "None" else f"{params} -> {result}"


def _members(tmp_path: Path) -> list[list[str]]:
    """Every public member name of each async class and its live objects (data attributes too)."""
    table = sync.connect(str(tmp_path / "wh")).create_table("db.t", schema=SCHEMA)
    objects = [sync.connect(str(tmp_path / "wh")).aio, table.aio, table.aio.transaction(), table.aio.scan()]
    return [
        sorted({n for n in [*dir(cls), *vars(obj)] if not n.startswith("_")})
        for obj, (cls, _) in zip(objects, TWINS, strict=True)
    ]


def _run_mypy(source: str, path: Path) -> tuple[dict[int, str], list[str]]:
    """mypy's revealed types by line, and its errors, for ``source`` alone."""
    path.write_text(source)
    out, err, _ = mypy.api.run([str(path), "--config-file", str(ROOT / "pyproject.toml"), "--no-pretty"])
    revealed: dict[int, str] = {}
    errors: list[str] = []
    for line in out.splitlines():
        if not line.startswith(f"{path}:"):
            continue  # another module's own errors are its own test's business
        m = re.match(rf"{re.escape(str(path))}:(\d+): note: Revealed type is \"(.*)\"$", line)
        if m:
            revealed[int(m.group(1))] = m.group(2)
        elif ": error:" in line:
            errors.append(line)
    assert not err.strip(), err
    return revealed, errors


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """For each ``Class.member`` (and a few calls), the async and the twin's revealed types."""
    tmp = tmp_path_factory.mktemp("typing")
    lines = [
        "import aioiceberg",
        "from aioiceberg import sync",
        "from aioiceberg.catalog import Catalog",
        "from aioiceberg.table import Table, Transaction",
        "from aioiceberg.table_scan import TableScan",
        "def members(aio_0: Catalog, twin_0: sync.Catalog, aio_1: Table, twin_1: sync.Table,",
        "            aio_2: Transaction, twin_2: sync.Transaction,",
        "            aio_3: TableScan, twin_3: sync.TableScan) -> None:",
    ]
    where: dict[str, tuple[int, int]] = {}

    def pair(key: str, aio: str, twin: str) -> None:
        lines.append(f"    reveal_type({aio})")
        lines.append(f"    reveal_type({twin})")
        where[key] = (len(lines) - 1, len(lines))

    for k, (names, (cls, _)) in enumerate(zip(_members(tmp), TWINS, strict=True)):
        for name in names:
            pair(f"{cls.__name__}.{name}", f"aio_{k}.{name}", f"twin_{k}.{name}")
    pair("connect", "aioiceberg.connect", "sync.connect")
    pair("load_table", "aioiceberg.load_table", "sync.load_table")
    pair("load_table()", "aio_1", "sync.load_table('x')")
    scan = "scan(row_filter='id = 5').plan_files()"
    pair("plan_files()", f"aio_1.{scan}", f"twin_1.{scan}")
    pair("drifted", "aio_1.append", "twin_1.overwrite")  # a control: must not compare equal
    # a fresh module name each run: mypy's cache replays an unchanged module's notes under
    # the path it first had (a second run with no source change found no revealed types)
    name = f"sync_types_{uuid.uuid4().hex[:12]}.py"
    revealed, errors = _run_mypy("\n".join(lines) + "\n", tmp / name)
    return {key: (revealed.get(a, "?"), revealed.get(t, "?")) for key, (a, t) in where.items()}, errors


def test_the_typing_file_checks_without_errors(checked: Checked) -> None:
    _, errors = checked
    assert not errors, "\n".join(errors)


def test_every_twin_reveals_its_async_members_type_made_blocking(
    checked: Checked,
) -> None:
    types, _ = checked
    drifted = {
        key: f"async {aio}\n  twin {twin}\n  want {blocking_type(aio)}"
        for key, (aio, twin) in types.items()
        if key not in {"drifted", "load_table()", "plan_files()"}
        and canonical(twin) != canonical(blocking_type(aio))
    }
    assert not drifted, "\n".join(f"{k}: {v}" for k, v in drifted.items())
    assert len(types) > 100  # the members were found


def test_the_comparison_catches_a_drifted_signature(
    checked: Checked,
) -> None:
    aio, twin = checked[0]["drifted"]
    assert aio.startswith("def (data:") and twin.startswith("def (df:")
    assert canonical(twin) != canonical(blocking_type(aio))


def test_the_calls_a_script_makes_have_real_types(
    checked: Checked,
) -> None:
    types, _ = checked
    assert types["load_table()"][1] == "aioiceberg.sync.Table"
    assert types["plan_files()"][1] == TASKS
    assert types["Catalog.create_table"][1].endswith(") -> aioiceberg.sync.Table")
    assert types["Table.append"][1].startswith("def (data: ")
    assert types["Table.transaction"][1] == "def () -> aioiceberg.sync.Transaction"
