"""Text the command line accepts: inline schemas, partition lists, ``key=value`` options, times."""

from __future__ import annotations

import datetime as dt
import glob
import os
import re

from aioiceberg.errors import ValidationError
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import NestedField, parse_primitive

__all__ = [
    "expand_files",
    "parse_key_values",
    "parse_schema_text",
    "parse_time",
    "split_top_level",
]

_FIELD = re.compile(r"^\s*([A-Za-z_][\w]*)\s+(.+?)(\s+(?:not\s+null|required))?\s*$", re.I)
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.I)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses, so ``decimal(9, 2)`` and ``bucket(16, id)`` survive."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_schema_text(text: str) -> Schema:
    """``"id long not null, ts timestamptz, price decimal(9, 2)"`` -> a schema with ids 1..n."""
    fields: list[NestedField] = []
    for i, item in enumerate(split_top_level(text), start=1):
        m = _FIELD.match(item)
        if m is None:
            raise ValidationError(f"bad schema field {item!r}: expected 'name type', e.g. 'id long'")
        try:
            field_type = parse_primitive(m.group(2))
        except ValidationError:
            raise ValidationError(
                f"bad schema field {item!r}: unknown type {m.group(2)!r} (use e.g. long, string, "
                "timestamptz, decimal(9, 2))"
            ) from None
        fields.append(NestedField(i, m.group(1), field_type, required=m.group(3) is not None))
    if not fields:
        raise ValidationError("the schema is empty")
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise ValidationError(f"duplicate column names in schema: {', '.join(names)}")
    return Schema(*fields)


def parse_key_values(items: tuple[str, ...] | list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"bad {what} {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def parse_time(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """An ISO time (``2024-05-01T00:00:00+00:00``, UTC if no zone) or an age like ``7d`` / ``12h``."""
    now = now or dt.datetime.now(dt.UTC)
    m = _DURATION.match(text)
    if m is not None:
        return now - dt.timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2).lower()])
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(f"bad time {text!r}: use an ISO time or an age such as 7d, 12h, 30m") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def expand_files(patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Local files named directly or by glob, in order, each once; a pattern matching nothing fails."""
    out: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise ValidationError(f"no files match {pattern!r}")
        for path in matches:
            if not os.path.isfile(path):
                raise ValidationError(f"cannot read {path}: no such file")
            if path not in out:
                out.append(path)
    return out
