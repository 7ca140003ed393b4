"""Imports point one way: no cycle among aioiceberg's modules and no import up the layers;
and they sit at the top of their module.

The graph is read from the source with ``ast``: every ``import`` and ``from ... import``,
at module level and inside functions alike (an import moved into a function still runs,
so it still counts), except those under ``if TYPE_CHECKING:``, which never run. Relative
imports are resolved, and ``from pkg import name`` is an edge to ``pkg.name`` when that is
a module, else to ``pkg`` (its ``__init__``). Imports by ``importlib`` with a computed
name are not seen.

The layers follow the architecture (docs/architecture.md): ``spec`` and ``expressions``
are pure and import nothing above them, ``io`` knows nothing of Iceberg, the engine
(``scan``, ``read``, ``write``, ``commit``, ...) imports no catalog, table or face, the
runtime is passed down (a catalog makes one; nothing below the catalogs imports it), and
only a face imports a face (``server``, ``cli``, ``spark``, ``sync``). What still breaks
a rule is listed in ``KNOWN`` with why it is there; the test fails on anything new and on
an entry that no longer occurs, so the list only shrinks. ``KNOWN_TYPING`` does the same
for cycles through imports that only the type checker reads.

An import inside a function hides a module's dependencies from its reader and, for a
module of the package, usually a cycle; it is there only for a dependency the package does
not require (an extra: ``OPTIONAL``) or one loaded late on purpose (``LATE_ON_PURPOSE``),
and a comment on it, or right above it, names that dependency. ``KNOWN_LATE`` lists what
still breaks that rule, and only shrinks.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import aioiceberg

PACKAGE = Path(aioiceberg.__file__).parent
ROOT = "aioiceberg"

# component -> what it may not import. A component is the first name under aioiceberg/
# (a package such as ``spec`` or a top module such as ``catalog``), or one of SPLIT: a
# module that sits lower than the rest of its package.
SPLIT = frozenset(
    {
        "_sync.runner",  # the loop a runtime owns; the rest of _sync is the sync face's
        # a file scan task: the REST spec's planning product, the format's data plus the
        # residual filter its file still needs (an expression), so one step above both
        "spec.scan_tasks",
    }
)
ENGINE = frozenset({"scan", "read", "write", "commit", "maintenance", "rowlevel"})
CATALOGS = frozenset({"catalog", "catalogs", "table", "table_scan"})
FACES = frozenset({"server", "cli", "spark", "sync", "_sync"})
ABOVE_PURE = ENGINE | CATALOGS | FACES | {"io", "runtime", "_sync.runner", "testing"}
FORBIDDEN: dict[str, frozenset[str]] = {
    # the format and the expressions over it: pure, synchronous, no I/O
    "spec": ABOVE_PURE | {"expressions", "spec.scan_tasks"},
    "expressions": ABOVE_PURE | {"spec.scan_tasks"},
    "spec.scan_tasks": ABOVE_PURE,
    # storage: bytes and objects, nothing of Iceberg
    "io": ABOVE_PURE - {"io"} | {"spec", "expressions", "spec.scan_tasks"},
    # the runtime is passed down to these, never fetched back
    **{c: CATALOGS | FACES | {"runtime", "testing"} for c in ENGINE},
    "_sync.runner": CATALOGS | FACES | {"runtime", "testing"},
    "runtime": CATALOGS | FACES | {"testing"},
    # a table gets its runtime from its catalog; catalog.py (the warehouse) builds on catalogs/
    "table": FACES | {"catalog", "catalogs", "runtime"},
    "table_scan": FACES | {"catalog", "catalogs", "runtime", "table"},
    "catalogs": FACES | {"catalog"},
    # the leaves everything may use
    **{
        c: ABOVE_PURE | {"spec", "expressions", "spec.scan_tasks"}
        for c in ("errors", "retrying", "_concurrency", "extras")
    },
}

# Violations still present, each with why it stands. Remove an entry when its edge goes.
KNOWN: frozenset[str] = frozenset()
# Cycles that only the type checker sees (imports under ``if TYPE_CHECKING:`` included):
# they run nowhere, but they still tie the modules together for a reader.
KNOWN_TYPING: frozenset[str] = frozenset()


# the extras' imports (pyproject's optional-dependencies): a function may import them late,
# so the module imports without them, with a comment naming the one it needs
OPTIONAL = frozenset(
    {
        *("aiobotocore", "botocore", "obstore", "s3fs", "fsspec"),  # s3
        *("pyspark", "aiohttp", "yarl", "asyncpg", "pandas", "duckdb"),  # spark, rest/server, postgres, ...
    }
)
# required, but loaded late on purpose, as the comment at each import says
LATE_ON_PURPOSE = frozenset(
    {
        "polars",  # ~0.15 s to import and not fork-safe: only a columnar decode or to_polars loads it
        "pyarrow.orc",  # not in every pyarrow build: only an ORC read needs it
    }
)
# faces that start fast: ``aioiceberg --help`` loads no engine (test_install_extras.py), so a
# command imports the engine it runs, each such import saying it "loads on use"
LAZY_FACES = frozenset({"aioiceberg.cli.app"})
# Function-level imports that break the rule, as "module -> imported"; remove an entry when
# its import moves to the top.
KNOWN_LATE: frozenset[str] = frozenset()


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([ROOT, *parts])


MODULES: dict[str, Path] = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, typing: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import under ``node`` that runs; ``typing``: those under ``if TYPE_CHECKING:`` too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and not typing:
            for other in child.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]))
        else:
            yield from _imports(child, typing)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in MODULES:  # ``import pkg.mod.Class`` is not valid,
                name = name.rpartition(".")[0]  # but a prefix may be a package
            if name:
                yield name
        return
    base = node.module or ""
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    if base != ROOT and not base.startswith(f"{ROOT}."):
        return
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in MODULES:
            yield sub
        elif base in MODULES:
            yield base


def _graph(typing: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[module] = {t for node in _imports(tree, typing) for t in _targets(module, node)}
    return graph


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), iterative so depth is no limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    scc: list[str] = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        scc.append(top)
                        if top == node:
                            break
                    found.append(sorted(scc))
    return found


def _component(module: str) -> str:
    parts = module.split(".")
    two = ".".join(parts[1:3])
    return two if two in SPLIT else parts[1] if len(parts) > 1 else ""


def cycles(graph: dict[str, set[str]]) -> set[str]:
    found = {f"cycle: {' <-> '.join(c)}" for c in _components(graph) if len(c) > 1}
    found |= {f"cycle: {m} imports itself" for m, targets in graph.items() if m in targets}
    return found


def upward(graph: dict[str, set[str]]) -> set[str]:
    found: set[str] = set()
    for module, targets in graph.items():
        here = _component(module)
        for target in targets:
            there = _component(target)
            if there == here:
                continue
            if there in FORBIDDEN.get(here, frozenset()):
                found.add(f"upward: {module} -> {target}")
            elif there in FACES and here not in FACES:
                found.add(f"face: {module} -> {target}")
    return found


GRAPH = _graph()
TYPING_GRAPH = _graph(typing=True)


def test_the_graph_sees_the_package() -> None:
    # the rules below mean nothing if the walk missed the imports it exists for
    assert "aioiceberg.spec.schema" in GRAPH["aioiceberg.spec.arrow"]
    assert "aioiceberg.scan.planner" in GRAPH["aioiceberg.table_scan"]
    inside_a_function = ast.parse("def f() -> None:\n    from aioiceberg.spec import schema\n")
    assert {t for imp in _imports(inside_a_function) for t in _targets("aioiceberg.table", imp)} == {
        "aioiceberg.spec.schema"
    }
    assert {"aioiceberg.catalog", "aioiceberg.table"}.isdisjoint(GRAPH["aioiceberg"])
    assert {"aioiceberg.catalog", "aioiceberg.table"} <= TYPING_GRAPH["aioiceberg"]


def test_the_rules_catch_what_they_exist_for() -> None:
    graph = {
        "aioiceberg.spec.a": {"aioiceberg.io.b"},
        "aioiceberg.io.b": {"aioiceberg.spec.a", "aioiceberg.io.b"},
        "aioiceberg.commit.c": {"aioiceberg.server.d"},
        "aioiceberg.server.d": set(),
    }
    assert cycles(graph) == {
        "cycle: aioiceberg.io.b <-> aioiceberg.spec.a",
        "cycle: aioiceberg.io.b imports itself",
    }
    assert upward(graph) == {
        "upward: aioiceberg.spec.a -> aioiceberg.io.b",
        "upward: aioiceberg.io.b -> aioiceberg.spec.a",
        "upward: aioiceberg.commit.c -> aioiceberg.server.d",
    }
    assert upward({"aioiceberg.catalog": {"aioiceberg.cli.app"}}) == {
        "face: aioiceberg.catalog -> aioiceberg.cli.app"
    }


def _comments(source: str) -> dict[int, str]:
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def _function_imports(tree: ast.AST, inside: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            if inside:
                yield child
        elif not (isinstance(child, ast.If) and _is_type_checking(child.test)):
            yield from _function_imports(
                child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            )


def _named(module: str, names: frozenset[str]) -> str | None:
    return next((n for n in sorted(names) if module == n or module.startswith(f"{n}.")), None)


def late_imports(module: str, source: str) -> set[str]:
    """``module -> imported`` for each function-level import of ``module`` that no comment
    explains: one of the package (a cycle in hiding, unless it needs an extra the comment
    names), the standard library's, or a required dependency not loaded late on purpose."""
    tree = ast.parse(source)
    comments = _comments(source)
    lines = source.splitlines()
    import_lines = {
        n
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    found: set[str] = set()
    for node in _function_imports(tree):
        said = [comments.get(n, "") for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)]
        above = node.lineno - 1  # the comments and imports of its group, right above it
        while above >= 1 and (above in import_lines or lines[above - 1].strip().startswith("#")):
            said.append(comments.get(above, ""))
            above -= 1
        text = " ".join(said)
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif node.level or (node.module or "").split(".")[0] == ROOT:
            imported = sorted(set(_targets(module, node))) if module in MODULES else [node.module or ""]
        else:
            imported = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in imported:
            if module in LAZY_FACES and "loads on use" in text:
                ok = True
            elif name.split(".")[0] == ROOT:
                ok = any(dep in text for dep in OPTIONAL)
            else:
                dep = _named(name, OPTIONAL | LATE_ON_PURPOSE)
                ok = dep is not None and dep in text and name.split(".")[0] not in sys.stdlib_module_names
            if not ok:
                found.add(f"{module} -> {name}")
    return found


def test_late_imports_are_caught() -> None:
    source = (
        "def f() -> None:\n"
        "    import os\n"
        "    import numpy\n"
        "    import obstore\n"
        "    from aioiceberg.spec import schema\n"
        "def g() -> None:\n"
        "    import obstore  # obstore: optional (the s3 extra)\n"
        "    # pyspark: optional (the spark extra)\n"
        "    from pyspark.sql import functions\n"
        "    from aioiceberg.spark import source\n"
        "    import polars  # polars: loaded only when used\n"
    )
    assert late_imports("aioiceberg.table", source) == {
        "aioiceberg.table -> os",
        "aioiceberg.table -> numpy",
        "aioiceberg.table -> obstore",
        "aioiceberg.table -> aioiceberg.spec.schema",
    }
    lazy = "def f() -> None:\n    import pyarrow  # loads on use\n    import numpy\n"
    assert late_imports("aioiceberg.cli.app", lazy) == set()  # one comment for the group
    assert late_imports("aioiceberg.table", lazy) == {
        "aioiceberg.table -> pyarrow",
        "aioiceberg.table -> numpy",
    }


def test_imports_sit_at_the_top_of_their_module() -> None:
    found = {f for module, path in MODULES.items() for f in late_imports(module, path.read_text())}
    assert sorted(found - KNOWN_LATE) == [], "move these to the top (or name the extra they need)"
    assert sorted(KNOWN_LATE - found) == [], "fixed: remove these from KNOWN_LATE"


def test_no_import_cycle_and_no_upward_import() -> None:
    found = cycles(GRAPH) | upward(GRAPH)
    assert sorted(found - KNOWN) == [], "new violations (fix them, do not add them to KNOWN)"
    assert sorted(KNOWN - found) == [], "fixed: remove these from KNOWN"


def test_no_import_cycle_even_for_the_type_checker() -> None:
    found = cycles(TYPING_GRAPH)
    assert sorted(found - KNOWN_TYPING) == [], "new cycles (fix them, do not add them to KNOWN_TYPING)"
    assert sorted(KNOWN_TYPING - found) == [], "fixed: remove these from KNOWN_TYPING"
