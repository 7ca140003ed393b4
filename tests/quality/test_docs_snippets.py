"""Every fenced Python block of README.md and docs/*.md runs, as pasted, in a clean process.

A block is a program: it runs with this interpreter in an empty folder, in a clean
environment (tests/process_env.py: no ``PYSPARK_PYTHON``, the venv not on ``PATH``, so a
Spark snippet must point Spark's workers at its Python itself, as a user's script must).
An HTML comment on the line before a block's fence changes that, visibly in the source:

* ``<!-- snippet: continues -->``: the block runs after the blocks before it in the same
  file, as one program (a page that builds on its first example);
* ``<!-- snippet: excerpt of examples/NAME.py -->``: the block's code lines appear, in order,
  in that example, which tests/test_examples.py runs;
* ``<!-- snippet: not run (REASON) -->``: it is only compiled (say, it needs AWS).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest
from process_env import run_as_user
from servers.jvm import QUICK_PYSPARK_ENV

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<text>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>\S*)")
TIMEOUT_S = 120
# A block that starts Spark does the work of examples/spark_pipeline.py, so it gets that test's
# bound: ~16 CPU-s and 22 s alone (C1-only driver), but one took over 120 s in a loaded suite run.
SPARK_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    code: str
    marker: str


@dataclass(frozen=True)
class Case:
    """What one test runs: a block, or a block with those it continues."""

    doc: str
    lines: tuple[int, ...]
    code: str
    marker: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{'+'.join(map(str, self.lines))}"

    @property
    def starts_spark(self) -> bool:
        return self.marker == "" and ("SparkSession" in self.code or "pyspark" in self.code)


def python_blocks(path: Path) -> list[Block]:
    """The ``python`` fenced blocks of one Markdown file, with the marker line before each."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(opening["fence"]):
            end += 1
        if opening["lang"] in ("python", "py"):
            before = next((text for text in reversed(lines[:index]) if text.strip()), "")
            marker = MARKER.match(before)
            indent = len(opening["indent"])
            code = "\n".join(text[indent:] for text in lines[index + 1 : end]) + "\n"
            blocks.append(
                Block(path.relative_to(ROOT).as_posix(), index + 1, code, marker["text"] if marker else "")
            )
        index = end + 1
    return blocks


def cases() -> list[Case]:
    found: list[Case] = []
    for path in DOCS:
        for block in python_blocks(path):
            if block.marker == "continues" and found and found[-1].doc == block.doc:
                last = found.pop()
                found.append(Case(last.doc, (*last.lines, block.line), last.code + block.code, last.marker))
            else:
                found.append(Case(block.doc, (block.line,), block.code, block.marker))
    return found


def params() -> list[object]:
    return [
        pytest.param(case, id=case.where, marks=[pytest.mark.slow] if case.starts_spark else [])
        for case in cases()
    ]


def numbered(code: str) -> str:
    return "\n".join(f"{n:3} | {text}" for n, text in enumerate(code.splitlines(), 1))


def code_lines(code: str) -> list[str]:
    """Non-blank lines without their comments, stripped: what an excerpt must match."""
    lines = code.splitlines()
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                row, col = token.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, IndentationError):
        pass
    return [text.strip() for text in lines if text.strip()]


def check_excerpt(case: Case, target: str) -> None:
    example = ROOT / target
    assert example.is_file(), f"{case.where} is an excerpt of {target}, which does not exist"
    remaining = iter(code_lines(example.read_text()))
    for text in code_lines(case.code):
        assert any(text == line for line in remaining), (
            f"{case.where}: {text!r} is not in {target} (in the block's order): the block and the "
            "example it shows have drifted apart"
        )


def test_the_docs_have_python_blocks() -> None:
    found = cases()
    blocks = [block for path in DOCS for block in python_blocks(path)]
    assert len(blocks) >= 8 and {case.doc for case in found} >= {"README.md", "docs/spark.md"}
    for case in found:
        assert case.marker in ("", "continues") or case.marker.startswith(("excerpt of ", "not run (")), (
            f"{case.where}: unknown snippet marker {case.marker!r}"
        )


def test_the_docs_index_links_every_page_and_example() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [path.name for path in sorted((ROOT / "docs").glob("*.md")) if path.name != "README.md"]
    examples = [f"../examples/{path.name}" for path in sorted((ROOT / "examples").glob("*.py"))]
    missing = [target for target in pages + examples if f"]({target})" not in index]
    assert not missing, f"docs/README.md does not link {missing}"


@pytest.mark.parametrize("case", params())
def test_snippet(case: Case, tmp_path: Path) -> None:
    if case.marker == "continues":
        pytest.fail(f"{case.where} continues nothing: it is the first Python block of {case.doc}")
    if case.marker.startswith("excerpt of "):
        check_excerpt(case, case.marker.removeprefix("excerpt of "))
        return
    compile(case.code, case.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if case.marker.startswith("not run ("):
        return
    if case.starts_spark:
        pytest.importorskip("pyspark")
    script = tmp_path / "snippet.py"
    script.write_text(case.code)
    timeout_s = SPARK_TIMEOUT_S if case.starts_spark else TIMEOUT_S
    try:
        quick = QUICK_PYSPARK_ENV if case.starts_spark else None  # Spark's driver JVM: C1 only
        run_as_user(script, tmp_path, timeout_s, f"{case.where}:\n{numbered(case.code)}\n", quick)
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"{case.where} ran over {timeout_s}s:\n{numbered(case.code)}\n{timeout.stderr!r}")
