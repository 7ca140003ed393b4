"""A core install (no extras) works on a local warehouse, and every feature whose library is
missing fails with one typed line naming the extra that installs it.

Each check runs in a clean interpreter where the optional libraries cannot be imported:
``sys.modules[name] = None`` before aioiceberg is imported makes every ``import name`` fail
as it does when the package is absent (a real import failure, not a stand-in object). A
fresh virtual environment with ``pip install .`` behaves the same (checked by hand: see
benchmarks/README.md, "Start-up and install").
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("aiobotocore", "botocore", "boto3", "obstore", "s3fs", "fsspec", "aiohttp", "pyspark", "gcsfs")
BLOCK = f"for _m in {OPTIONAL!r}:\n    sys.modules[_m] = None\n"


def run_python(code: str, *, block: bool = True, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    source = "import sys\n" + (BLOCK if block else "") + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def test_core_install_runs_a_local_warehouse(tmp_path: Path) -> None:
    done = run_python(
        f"""
        import pyarrow as pa
        from aioiceberg import sync

        with sync.connect({str(tmp_path)!r}) as catalog:
            schema = pa.schema([("id", pa.int64())])
            table = catalog.create_table("db.t", schema=schema, partition_by=["bucket(4, id)"])
            table.append(pa.table({{"id": pa.array(range(10), pa.int64())}}))
            table.delete("id < 3")
            print(table.scan(row_filter="id >= 5").to_arrow().num_rows)
        loaded = sorted(m for m in {OPTIONAL!r} if sys.modules.get(m) is not None)
        print(loaded)
        """
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["5", "[]"]


CASES = {
    "s3 store": ("aioiceberg.connect('s3://bucket/warehouse')", "s3"),
    "s3 through fsspec": ("aioiceberg.connect('s3://b/wh', storage_options={'io.backend': 'fsspec'})", "s3"),
    "glue catalog": ("aioiceberg.connect('glue://', warehouse='s3://bucket/wh')", "s3"),
    "s3tables catalog": ("aioiceberg.connect('s3tables:arn:aws:s3tables:us-east-1:1:bucket/b')", "s3"),
    "rest catalog": ("aioiceberg.connect('rest+http://127.0.0.1:9/')", "rest"),
    "server": ("__import__('aioiceberg.server')", "server"),
    "spark read_table": ("__import__('aioiceberg.spark').spark.read_table", "spark"),
    "spark data source": ("__import__('aioiceberg.spark').spark.AioIcebergDataSource", "spark"),
}


def test_each_missing_extra_is_one_typed_line_naming_it() -> None:
    done = run_python(
        f"""
        import asyncio, json
        import aioiceberg
        from aioiceberg.errors import IcebergError, MissingExtraError

        async def attempt(expr):
            try:
                made = eval(expr)
                if hasattr(made, "__aenter__"):
                    async with made:
                        pass
            except Exception as exc:
                extra = getattr(exc, "extra", None)
                return [type(exc).__name__, str(exc), isinstance(exc, ImportError), extra]
            return None

        async def main():
            out = {{}}
            for name, (expr, _) in {CASES!r}.items():
                out[name] = await attempt(expr)
            print(json.dumps(out))

        asyncio.run(main())
        """
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    for name, (_, extra) in CASES.items():
        got = results[name]
        assert got is not None, f"{name}: no error without its library"
        kind, message, is_import_error, got_extra = got
        assert kind == "MissingExtraError", (name, got)
        assert is_import_error and got_extra == extra, (name, got)
        assert message.endswith(f"pip install 'aioiceberg[{extra}]'"), (name, message)
        assert "\n" not in message, (name, message)


def test_fsspec_scheme_without_its_filesystem_names_the_library() -> None:
    done = run_python(
        """
        import asyncio, aioiceberg
        from aioiceberg.errors import MissingExtraError

        async def main():
            try:
                async with aioiceberg.connect("gs://bucket/warehouse"):
                    pass
            except MissingExtraError as exc:
                print(exc)

        asyncio.run(main())
        """
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gs://" in done.stdout and "fsspec" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["-w", "s3://bucket/warehouse", "list"], "s3"),
        (["-w", "rest+http://127.0.0.1:9/", "list"], "rest"),
        (["serve", "--port", "0"], "server"),
    ],
)
def test_cli_names_the_extra_in_one_line(argv: list[str], extra: str, tmp_path: Path) -> None:
    done = run_python(f"from aioiceberg.cli import main\nmain({argv!r})", cwd=tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and lines[0].endswith(f"pip install 'aioiceberg[{extra}]'"), lines
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr


def test_cli_help_loads_no_pyarrow_numpy_or_planner() -> None:
    """``aioiceberg --help`` starts in the time of click and rich: the engine loads on use."""
    done = run_python(
        """
        from aioiceberg.cli import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        engine = ("pyarrow", "numpy", "polars", "fastavro", "aioiceberg.table_scan")
        heavy = sorted(m for m in engine if m in sys.modules)
        print("LOADED", heavy, file=sys.stderr)
        """,
        block=False,
    )
    assert "LOADED []" in done.stderr, done.stderr[-2000:]


def test_public_names_load_on_first_use() -> None:
    done = run_python(
        """
        import aioiceberg
        before = "aioiceberg.catalog" in sys.modules
        connect, table = aioiceberg.connect, aioiceberg.Table
        print(before, "aioiceberg.table_scan" in sys.modules, connect.__module__, table.__module__)
        print(sorted(n for n in aioiceberg.__all__ if not hasattr(aioiceberg, n)))
        try:
            aioiceberg.nothing_here
        except AttributeError as exc:
            print("AttributeError", exc)
        """,
        block=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "False True aioiceberg.catalog aioiceberg.table", lines
    assert lines[1] == "[]", lines
    assert lines[2].startswith("AttributeError") and "nothing_here" in lines[2], lines
