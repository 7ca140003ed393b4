"""The ``aioiceberg`` command line, on top of the blocking API (``aioiceberg.sync``).

``main`` turns every user mistake (missing table, bad filter, unreadable file, bad
schema text) into one ``error: ...`` line on stderr and exit code 1; usage mistakes
exit 2 with click's usage message. ``AIOICEBERG_DEBUG=1`` shows tracebacks instead.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

import click

from aioiceberg.cli.app import CliError, cli
from aioiceberg.cli.messages import one_line
from aioiceberg.errors import IcebergError

__all__ = ["CliError", "cli", "main", "one_line"]


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="aioiceberg", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("AIOICEBERG_DEBUG"):
            raise
        prefix = "" if isinstance(exc, CliError) else _kind(exc)
        click.echo(f"error: {prefix}{one_line(exc)}", err=True)
        _exit_now(1)
    code = code if isinstance(code, int) else 0
    if argv is None:  # the console script: nothing follows, so no teardown either
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> NoReturn:
    """End a failed command without the interpreter's teardown: after an error, pyarrow's
    native thread pools aborted it at exit (SIGABRT, "terminate called without an active
    exception"; apache/arrow#34314) in 2 of 5 CI runs of a failing ``stats``. The exit
    handlers (closing clients) run first, and the output is flushed. The console script
    ends every command so: the teardown (freeing pyarrow's and numpy's state) was ~0.1 s
    of CPU, a fifth of a metadata-only command's start-up."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _kind(exc: BaseException) -> str:
    if isinstance(exc, IcebergError | OSError):
        return ""
    return f"{type(exc).__name__}: "
