"""Text the command line accepts: inline schemas, partition lists, ``key=value`` options, times."""

from __future__ import annotations

import datetime as dt
import difflib
import glob
import os
import re
from collections.abc import Mapping

from aioiceberg.errors import ValidationError
from aioiceberg.io.resolve import BACKEND_OPTION
from aioiceberg.io.s3_client import S3_OPTION_ALIASES
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import NestedField, parse_primitive

__all__ = [
    "expand_files",
    "is_secret_key",
    "parse_key_values",
    "parse_schema_text",
    "parse_storage_options",
    "parse_time",
    "split_top_level",
    "storage_option_keys",
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


#: what every AWS service client reads as ``<service>.<key>`` (``io/aws_connection.py``)
_SERVICE_KEYS = ("endpoint", "region", "access-key-id", "secret-access-key", "session-token", "profile-name")
_SERVICE_OPTIONS = {
    "dynamodb": ("create-table",),  # commit/protocols/dynamodb.py
    "glue": ("id", "skip-archive"),  # catalogs/glue.py
    "s3tables": (),
}
# Words that make a key a secret: its value must not be typed on a command line.
_SECRET_WORDS = re.compile(
    r"secret|token|password|passwd|credential|private|account[_-]?key|connection[_-]?string", re.I
)
_FROM_ENV = "env:"
_FROM_FILE = "@"


def storage_option_keys() -> frozenset[str]:
    """Every storage option key aioiceberg reads: ``io.backend``, ``local.fsync``, the S3 keys
    with their boto-style aliases, and each AWS service's connection (``glue.region``, ...)."""

    keys = {BACKEND_OPTION, "local.fsync"}
    keys.update(key for aliases in S3_OPTION_ALIASES.values() for key in aliases)
    for service, own in _SERVICE_OPTIONS.items():
        keys.update(f"{service}.{key}" for key in (*_SERVICE_KEYS, *own))
    return frozenset(keys)


def is_secret_key(key: str) -> bool:
    return _SECRET_WORDS.search(key) is not None


def _known_keys_text(known: frozenset[str]) -> str:
    """``io.backend, s3.{endpoint, region, ...}, ...``: the dotted keys, grouped by prefix."""
    groups: dict[str, list[str]] = {}
    for key in sorted(k for k in known if "." in k):
        prefix, _, rest = key.partition(".")
        groups.setdefault(prefix, []).append(rest)
    return ", ".join(
        f"{prefix}.{rest[0]}" if len(rest) == 1 else f"{prefix}.{{{', '.join(rest)}}}"
        for prefix, rest in groups.items()
    )


def _check_key(key: str, known: frozenset[str]) -> None:
    """Refuse a key nothing reads. Keys without a dot also go to fsspec filesystems as keyword
    arguments (each has its own), so only near misses of a known key are refused there."""
    if key in known:
        return
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.75)
    if "." not in key and not close:
        return
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ValidationError(
        f"unknown storage option {key!r}: {hint}known keys: {_known_keys_text(known)} "
        "(and boto-style aliases such as endpoint_url, region_name; keys without a dot go to fsspec)"
    )


def _resolve_value(
    key: str, value: str, environ: Mapping[str, str], what: str = "storage option", flag: str = "-o"
) -> str:
    """``env:NAME`` -> that variable, ``@PATH`` -> the file's text; a literal secret is refused."""
    if value.startswith(_FROM_ENV):
        name = value[len(_FROM_ENV) :]
        if not name or name not in environ:
            raise ValidationError(f"{what} {key}: environment variable {name!r} is not set")
        return environ[name]
    if value.startswith(_FROM_FILE):
        path = value[len(_FROM_FILE) :]
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ValidationError(f"{what} {key}: cannot read {path!r}: {reason}") from None
    if is_secret_key(key):
        raise ValidationError(
            f"{what} {key} holds a secret: a value on the command line is visible to every "
            f"user of this machine (ps, shell history). Use {flag} {key}=env:NAME (an environment "
            f"variable) or {flag} {key}=@FILE (a file only you can read), or the standard AWS "
            "variables and profiles (AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"
        )
    return value


def parse_storage_options(items: tuple[str, ...] | list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """``-o KEY=VALUE`` options: known keys only; a value ``env:NAME`` or ``@PATH`` is read from
    the environment or a file, which is how a secret must be given."""
    known = storage_option_keys()
    out = parse_key_values(items, "storage option")
    for key, value in out.items():
        _check_key(key, known)
        out[key] = _resolve_value(key, value, environ)
    return out


def parse_table_config(items: tuple[str, ...] | list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """``serve --table-config KEY=VALUE``: any key (clients' FileIO settings), values read as
    ``-o`` reads them, so a secret handed to clients never sits on the command line either."""
    out = parse_key_values(items, "table config")
    for key, value in out.items():
        out[key] = _resolve_value(key, value, environ, "table config", "--table-config")
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
        raise ValidationError(
            f"bad time {text!r}: use an ISO time (2024-05-01, 2024-05-01T12:30:00Z, 2024-05-01 14:30+02:00; "
            "UTC when it has no offset) or an age such as 7d, 12h, 30m"
        ) from None
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
