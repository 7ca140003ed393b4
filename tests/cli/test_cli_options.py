"""``aioiceberg -o KEY=VALUE`` and ``--warehouse``: unknown keys are refused with the known ones,
and a secret is taken from the environment (``env:NAME``) or a file (``@PATH``), never from
the command line, where every user of the machine sees it (``ps``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import aioiceberg
from aioiceberg.cli import cli
from aioiceberg.cli.arguments import is_secret_key, parse_storage_options, storage_option_keys
from aioiceberg.errors import ValidationError

SCRIPT = shutil.which("aioiceberg", path=os.path.dirname(sys.executable)) or "aioiceberg"


def invoke(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    """``aioiceberg -w TMP/wh ARGS... list`` in this process."""
    return CliRunner().invoke(cli, ["-w", str(tmp_path / "wh"), *args, "list"], env=env)


def refused(result: Result) -> str:
    assert result.exit_code == 1 and isinstance(result.exception, ValidationError), result.output
    return str(result.exception)


# -- unknown keys --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("s3.endpiont", "s3.endpoint"),
        ("s3.regoin", "s3.region"),
        ("glue.regin", "glue.region"),
        ("local.fsynk", "local.fsync"),
        ("io.backed", "io.backend"),
        ("endpoint-url", "endpoint_url"),  # a near miss of a boto-style alias
    ],
)
def test_a_mistyped_key_is_refused_naming_the_key_meant_and_the_known_ones(
    tmp_path: Path, key: str, meant: str
) -> None:
    message = refused(invoke(tmp_path, "-o", f"{key}=x"))
    assert f"unknown storage option {key!r}" in message and f"did you mean {meant}" in message
    assert "s3.{access-key-id" in message and "io.backend" in message and "dynamodb.{" in message
    assert not (tmp_path / "wh").exists()  # refused before anything was opened


def test_an_unknown_dotted_key_nothing_is_close_to_is_refused_too(tmp_path: Path) -> None:
    message = refused(invoke(tmp_path, "-o", "azure.tenant=x"))
    assert "did you mean" not in message and "known keys: client.region" in message


def test_known_keys_and_fsspec_arguments_are_accepted(tmp_path: Path) -> None:
    # keys without a dot that are near no known key go to fsspec filesystems as arguments
    (tmp_path / "wh").mkdir()  # `list` says so when the warehouse is missing
    for option in ("s3.region=us-east-1", "local.fsync=false", "endpoint_url=http://x", "anon=true"):
        result = invoke(tmp_path, "-o", option)
        assert result.exit_code == 0, (option, result.output, result.exception)


def test_every_key_the_library_reads_is_known_to_the_command_line() -> None:
    """A key read somewhere below (``options.get("glue.id")``) but unknown here would be refused."""
    root = Path(aioiceberg.__file__).parent
    read = re.compile(r"""options(?:\.get\(|\[)\s*"([a-z0-9_]+\.[a-z0-9_.-]+)\"""")
    found = {
        key
        for layer in ("io", "catalogs", "commit")
        for path in (root / layer).rglob("*.py")
        for key in read.findall(path.read_text())
    }
    assert {"local.fsync", "glue.skip-archive", "dynamodb.create-table"} <= found  # the scan works
    assert found <= storage_option_keys(), found - storage_option_keys()


# -- secrets -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key", ["s3.secret-access-key", "s3.session-token", "glue.secret-access-key", "secret", "account_key"]
)
def test_a_secret_on_the_command_line_is_refused_explaining_the_alternatives(
    tmp_path: Path, key: str
) -> None:
    message = refused(invoke(tmp_path, "-o", f"{key}=hunter2"))
    assert "hunter2" not in message
    assert f"-o {key}=env:NAME" in message and f"-o {key}=@FILE" in message and "ps" in message


def test_secrets_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    options = parse_storage_options(
        [
            "s3.secret-access-key=env:MY_SECRET",
            f"s3.session-token=@{secret_file}",
            "s3.endpoint=env:MY_ENDPOINT",  # any key may come from elsewhere
            "s3.region=us-east-1",
        ],
        {"MY_SECRET": "from-the-environment", "MY_ENDPOINT": "http://127.0.0.1:9"},
    )
    assert options == {
        "s3.secret-access-key": "from-the-environment",
        "s3.session-token": "from-a-file",
        "s3.endpoint": "http://127.0.0.1:9",
        "s3.region": "us-east-1",
    }
    assert is_secret_key("s3.secret-access-key") and not is_secret_key("s3.access-key-id")


def test_a_missing_variable_or_unreadable_file_is_named(tmp_path: Path) -> None:
    message = refused(invoke(tmp_path, "-o", "s3.secret-access-key=env:AIOICEBERG_NOT_SET_ANYWHERE"))
    assert "'AIOICEBERG_NOT_SET_ANYWHERE' is not set" in message
    message = refused(invoke(tmp_path, "-o", f"s3.session-token=@{tmp_path / 'missing'}"))
    assert "cannot read" in message and "missing" in message


def test_the_console_script_takes_a_secret_from_the_environment_and_refuses_it_typed(tmp_path: Path) -> None:
    args = [SCRIPT, "-w", str(tmp_path / "wh"), "-o", "s3.secret-access-key=hunter2", "list"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith("error: storage option s3.secret-access-key")
    assert len(proc.stderr.strip().splitlines()) == 1 and "hunter2" not in proc.stderr

    args[4] = "s3.secret-access-key=env:SOME_SECRET"
    (tmp_path / "wh").mkdir()  # `list` says so when the warehouse is missing
    env = {**os.environ, "SOME_SECRET": "hunter2"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr


def test_a_catalog_uri_carrying_a_token_is_refused_on_the_command_line_not_from_the_environment(
    tmp_path: Path,
) -> None:
    uri = "rest+http://127.0.0.1:9?token=hunter2"
    result = CliRunner().invoke(cli, ["-w", uri, "list"])
    assert result.exit_code == 1 and "AIOICEBERG_WAREHOUSE" in str(result.exception), result.output
    assert "hunter2" not in str(result.exception)

    from_env = CliRunner().invoke(cli, ["list"], env={"AIOICEBERG_WAREHOUSE": uri})
    assert "AIOICEBERG_WAREHOUSE" not in str(from_env.exception)  # got past it (nothing listens there)


def test_the_help_says_how_to_give_a_secret() -> None:
    text = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    assert "env:NAME" in text and "@PATH" in text and "unknown keys are refused" in text


def test_serve_table_config_takes_a_secret_only_from_the_environment_or_a_file(tmp_path: Path) -> None:
    from aioiceberg.cli.arguments import parse_table_config

    base = ["-w", str(tmp_path / "wh"), "serve", "--port", "0"]
    typed = CliRunner().invoke(cli, [*base, "--table-config", "s3.secret-access-key=abc"])
    assert typed.exit_code == 1 and isinstance(typed.exception, ValidationError), typed.output
    message = str(typed.exception)
    assert "table config s3.secret-access-key holds a secret" in message
    assert "--table-config s3.secret-access-key=env:NAME" in message and "abc" not in message
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    config = parse_table_config(
        ["s3.secret-access-key=env:SECRET", "s3.session-token=@" + str(secret_file), "s3.endpoint=http://x"],
        {"SECRET": "from-env"},
    )
    assert config == {
        "s3.secret-access-key": "from-env",
        "s3.session-token": "from-file",
        "s3.endpoint": "http://x",
    }
