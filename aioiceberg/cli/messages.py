"""Errors as the command line prints them: one line each."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(exc: BaseException) -> str:
    """The message on one line: caret markers dropped, the rest joined."""
    lines = [line.strip() for line in str(exc).splitlines()]
    text = " ".join(line for line in lines if line and set(line) != {"^"})
    return text or type(exc).__name__
