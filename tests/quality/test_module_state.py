"""Process state has one owner, the runtime: no module of aioiceberg keeps mutable state.

Module-level names may hold constants (lookup tables included), the default runtime
(``aioiceberg/runtime.py``) and the collector's pause count (``gc_pause.py``), nothing a
call changes. Checked on the source: no ``global`` statement, and no function stores
into, deletes from, or calls a mutating method on a module-level name; and on the
imported modules: no lock, weak map, event or queue at module level (they exist only to
guard or hold shared state).
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import pkgutil
import threading
import weakref
from pathlib import Path

import aioiceberg

PACKAGE = Path(aioiceberg.__file__).parent
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "clear",
        "pop",
        "popitem",
        "setdefault",
        "remove",
        "discard",
    }
)
# the default runtime: created on first use, the one piece of process state allowed here;
# and the count of pauses of the cyclic collector, which is the process's whichever runtime asks
ALLOWED = {("runtime.py", "_DEFAULT"), ("runtime.py", "_DEFAULT_LOCK"), ("gc_pause.py", "_PAUSES")}


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _mutations(path: Path) -> list[str]:
    rel = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(), str(path))
    names = {n for n in _module_names(tree) if (path.name, n) not in ALLOWED}
    found: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        local = (
            {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
            if not isinstance(fn, ast.Lambda)
            else set()
        )
        for node in ast.walk(fn):
            if isinstance(node, ast.Global | ast.Nonlocal) and isinstance(node, ast.Global):
                found.append(f"{rel}:{node.lineno}: global {', '.join(node.names)}")
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Store | ast.Del)
                and isinstance(node.value, ast.Name)
                and node.value.id in names - local
            ):
                found.append(f"{rel}:{node.lineno}: stores into module-level {node.value.id}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in names - local
            ):
                found.append(
                    f"{rel}:{node.lineno}: {node.func.value.id}.{node.func.attr}() on module level state"
                )
    return found


def test_no_function_changes_module_level_state() -> None:
    found = [m for path in sorted(PACKAGE.rglob("*.py")) for m in _mutations(path)]
    assert found == []


def test_no_locks_weak_maps_or_queues_at_module_level() -> None:
    guards = (
        type(threading.Lock()),
        type(threading.RLock()),
        threading.Event,
        threading.local,
        weakref.WeakKeyDictionary,
        weakref.WeakValueDictionary,
        weakref.WeakSet,
        asyncio.Lock,
        asyncio.Event,
        asyncio.Queue,
    )
    found = []
    for info in pkgutil.walk_packages(aioiceberg.__path__, "aioiceberg."):
        module = importlib.import_module(info.name)
        file = Path(module.__file__ or "").name
        for name, value in vars(module).items():
            if isinstance(value, guards) and (file, name) not in ALLOWED:
                found.append(f"{info.name}.{name}: {type(value).__name__}")
    assert found == []
