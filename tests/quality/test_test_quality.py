"""Every test asserts what it exists for: a check over the test modules' syntax trees.

Three mistakes pass silently, so they are looked for here: a comparison whose result is
dropped (``a == b`` as a statement), a test that asserts nothing (no ``assert``, no
``pytest.raises`` / ``warns`` / ``fail`` and no call to a helper named ``assert_*``,
``check_*`` or ``expect_*``, leading underscores aside), and an ``assert`` on a tuple or a
string, which is always true.

And no module under tests/ imports a test module: what two test modules share sits in a
helper module at tests/ (named for what it holds). An imported test module brings its
fixtures and module-level set-up along, ties the two modules' layout together (it works
only while pytest happens to have put the other's folder on ``sys.path``) and makes a
change to one test break another.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
HELPER_PREFIXES = ("assert_", "check_", "expect_")
ASSERTING_CALLS = frozenset({"raises", "warns", "fail"})  # pytest's

# Tests that may assert nothing of their own, with the reason. Keep it short: prefer naming
# the helper that asserts ``check_*``.
NO_ASSERT_NEEDED: dict[str, str] = {}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _asserts(test: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call) and (name := _called_name(node)) is not None:
            if name in ASSERTING_CALLS or name.lstrip("_").startswith(HELPER_PREFIXES):
                return True
    return False


def _always_true(test: ast.expr) -> bool:
    if isinstance(test, ast.Tuple):
        return bool(test.elts)
    if isinstance(test, ast.Constant):
        return isinstance(test.value, str | bytes) and bool(test.value)
    if isinstance(test, ast.JoinedStr):  # an f-string with text of its own
        return any(isinstance(v, ast.Constant) and v.value for v in test.values)
    return False


def problems(source: str | ast.Module, module: str, *, is_test_module: bool) -> list[str]:
    """What is wrong in ``source``, one line each, as ``module:line: what``."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source) if isinstance(source, str) else source):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare):
            out.append(f"{module}:{node.lineno}: the result of this comparison is dropped (assert it?)")
        elif isinstance(node, ast.Assert) and _always_true(node.test):
            out.append(f"{module}:{node.lineno}: assert on a non-empty tuple or string is always true")
        elif (
            is_test_module
            and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test")
            and f"{module}::{node.name}" not in NO_ASSERT_NEEDED
            and not _asserts(node)
        ):
            out.append(
                f"{module}:{node.lineno}: {node.name} asserts nothing (no assert, pytest.raises or "
                f"helper named {'/'.join(p + '*' for p in HELPER_PREFIXES)})"
            )
    return out


@pytest.fixture(scope="module")
def modules() -> dict[str, ast.Module]:
    """Every module under tests/, parsed once, by its path there."""
    paths = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)
    return {p.relative_to(TESTS).as_posix(): ast.parse(p.read_text(), str(p)) for p in paths}


def test_every_test_module_asserts_what_it_exists_for(modules: dict[str, ast.Module]) -> None:
    found: list[str] = []
    for name, tree in modules.items():
        found += problems(tree, name, is_test_module=Path(name).name.startswith("test_"))
    assert found == [], "\n".join(found)


def imported_test_modules(tree: ast.Module, test_modules: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, module)`` for each import in ``tree`` of one of ``test_modules`` (module names
    without folder), at any depth: ``import test_x``, ``from test_x import ...``, a dotted
    ``from spec.test_x import ...``, ``from spec import test_x`` and
    ``importlib.import_module("test_x")``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt | ast.expr):
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [part for alias in node.names for part in alias.name.split(".")]
        elif isinstance(node, ast.ImportFrom):
            names = [*(node.module or "").split("."), *(alias.name for alias in node.names)]
        elif (
            isinstance(node, ast.Call)
            and _called_name(node) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = node.args[0].value.split(".")
        found += [(node.lineno, name) for name in names if name in test_modules]
    return found


def test_no_module_imports_a_test_module(modules: dict[str, ast.Module]) -> None:
    test_modules = frozenset(Path(name).stem for name in modules if Path(name).name.startswith("test_"))
    found = [
        f"{name}:{line}: imports the test module {imported} (share through a helper module at tests/)"
        for name, tree in modules.items()
        for line, imported in imported_test_modules(tree, test_modules)
    ]
    assert found == [], "\n".join(found)


def test_the_exceptions_name_tests_that_exist(modules: dict[str, ast.Module]) -> None:
    tests = {
        f"{name}::{node.name}"
        for name, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert set(NO_ASSERT_NEEDED) <= tests, set(NO_ASSERT_NEEDED) - tests


BAD = {
    "dropped comparison": "def test_x() -> None:\n    assert f()\n    f() == 3\n",
    "nothing asserted": "def test_x() -> None:\n    f()\n",
    "nothing asserted, async": "async def test_x() -> None:\n    await f()\n",
    "nothing asserted in a class": "class TestX:\n    def test_y(self) -> None:\n        f()\n",
    "assert on a tuple": "def test_x() -> None:\n    assert (f() == 3, 'message')\n",
    "assert on a string": "def test_x() -> None:\n    assert 'f() == 3'\n",
    "assert on an f-string": "def test_x() -> None:\n    assert f'{f()} == 3'\n",
    "a helper named otherwise": "def test_x() -> None:\n    verify(f())\n",
}

GOOD = {
    "assert": "def test_x() -> None:\n    assert f() == 3\n",
    "pytest.raises": "def test_x() -> None:\n    with pytest.raises(E):\n        f()\n",
    "pytest.warns": "def test_x() -> None:\n    with pytest.warns(W):\n        f()\n",
    "pytest.fail": "def test_x() -> None:\n    if f():\n        pytest.fail('f')\n",
    "assert_ helper": "async def test_x() -> None:\n    await assert_same(f(), 3)\n",
    "check_ helper": "def test_x() -> None:\n    _check_rows(f())\n",
    "expect_ helper": "def test_x() -> None:\n    expect_error(f)\n",
    "a comparison kept": "def test_x() -> None:\n    same = f() == 3\n    assert same\n",
    "not a test": "def helper() -> None:\n    f()\n",
}


@pytest.mark.parametrize("source", list(BAD.values()), ids=list(BAD))
def test_the_check_finds_each_mistake(source: str) -> None:
    assert len(problems(source, "m.py", is_test_module=True)) == 1


@pytest.mark.parametrize("source", list(GOOD.values()), ids=list(GOOD))
def test_the_check_passes_tests_that_assert(source: str) -> None:
    assert problems(source, "m.py", is_test_module=True) == []


def test_only_test_modules_need_assertions_but_all_modules_keep_comparisons() -> None:
    helper = "def test_like_name() -> None:\n    f() != 2\n"
    assert problems(helper, "helpers.py", is_test_module=False) == [
        "helpers.py:2: the result of this comparison is dropped (assert it?)"
    ]
    assert problems("def test_x() -> None:\n    f()\n", "helpers.py", is_test_module=False) == []


TEST_MODULES = frozenset({"test_a", "test_b"})
IMPORTS_OF_TEST_MODULES = {
    "from": "from test_a import ROWS\n",
    "import": "import test_a\n",
    "import as": "import test_a as a\n",
    "from a folder": "from spec.test_a import ROWS\n",
    "from a package": "from spec import test_b\n",
    "inside a function": "def f() -> None:\n    from test_b import rows\n",
    "importlib": "importlib.import_module('test_a')\n",
}
OTHER_IMPORTS = {
    "a helper module": "from spark_sessions import local_session\n",
    "a name like a test's": "from rows_helpers import test_a_rows, test_rows\n",
    "a module that is not a test's": "import test_c\nfrom tests import testing\n",
}


@pytest.mark.parametrize("source", list(IMPORTS_OF_TEST_MODULES.values()), ids=list(IMPORTS_OF_TEST_MODULES))
def test_the_check_finds_each_import_of_a_test_module(source: str) -> None:
    assert len(imported_test_modules(ast.parse(source), TEST_MODULES)) == 1


@pytest.mark.parametrize("source", list(OTHER_IMPORTS.values()), ids=list(OTHER_IMPORTS))
def test_the_check_passes_other_imports(source: str) -> None:
    assert imported_test_modules(ast.parse(source), TEST_MODULES) == []
