"""Locations as a catalog confines them: one spelling per place, and "is this under that root".

A catalog may write and delete only under its roots. Comparing locations as strings is
only safe once each has one spelling: ``file:///w/t``, ``/w/t`` and ``/w/./t`` name one
directory, ``/w/t/../../etc`` does not lie under ``/w``, and ``s3://b/w`` does not contain
``s3://b/wx``. So a location is first normalized (or refused when it cannot be, e.g. it
holds ``..``), then compared segment by segment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from aioiceberg.errors import LocationNotAllowedError
from aioiceberg.io.resolve import S3_SCHEMES, scheme_of

__all__ = ["Roots", "is_within", "normalized_location"]

_CONTROL = {chr(c) for c in range(32)} | {"\x7f"}


def normalized_location(location: str, what: str = "location") -> str:
    """``location`` in the one spelling used to compare it: local paths as absolute paths,
    ``s3a://`` / ``s3n://`` as ``s3://``, no trailing ``/``.

    Refused (``LocationNotAllowedError``): control characters, relative paths, and ``.`` or
    ``..`` segments or empty segments inside the path, which stores treat differently (a local
    file system resolves ``..``, S3 keeps it as part of the key).
    """
    if not location or any(ch in _CONTROL for ch in location):
        raise LocationNotAllowedError(f"{what} {location!r} is empty or holds control characters")
    scheme = scheme_of(location)
    if scheme == "file":
        if location.startswith("file:"):
            parts = urlsplit(location)
            if parts.netloc not in ("", "localhost"):
                raise LocationNotAllowedError(f"{what} {location!r} names a remote host", location=location)
            path = unquote(parts.path)
        else:
            path = location
        if not os.path.isabs(path):
            raise LocationNotAllowedError(f"{what} {location!r} is not an absolute path", location=location)
        _check_segments(path.lstrip("/"), location, what)
        return "/" + path.strip("/")
    parts = urlsplit(location)
    if not parts.netloc:
        raise LocationNotAllowedError(f"{what} {location!r} names no bucket or host", location=location)
    if parts.query or parts.fragment:
        raise LocationNotAllowedError(f"{what} {location!r} carries a query or fragment", location=location)
    key = parts.path.strip("/")
    _check_segments(key, location, what)
    shown = "s3" if scheme in S3_SCHEMES else scheme
    return f"{shown}://{parts.netloc}/{key}" if key else f"{shown}://{parts.netloc}"


def _check_segments(path: str, location: str, what: str) -> None:
    if not path:
        return
    for segment in path.rstrip("/").split("/"):
        if segment in ("", ".", ".."):
            raise LocationNotAllowedError(
                f"{what} {location!r} holds an empty, '.' or '..' path segment", location=location
            )


def is_within(location: str, root: str) -> bool:
    """Whether normalized ``location`` is ``root`` or below it (both already normalized)."""
    return location == root or location.startswith(root.rstrip("/") + "/")


class Roots:
    """The locations a catalog may write and delete under, normalized once."""

    def __init__(self, roots: Iterable[str], *, tables_at_roots: bool = False) -> None:
        self.locations: tuple[str, ...] = tuple(
            dict.fromkeys(normalized_location(r, "catalog root") for r in roots if r)
        )
        #: each root is one table's own storage (S3 Tables assigns it), so a root itself is
        #: inside; elsewhere a table at a root would own the whole catalog
        self.tables_at_roots = tables_at_roots

    def __repr__(self) -> str:
        at = ", tables_at_roots=True" if self.tables_at_roots else ""
        return f"Roots({list(self.locations)!r}{at})"

    def _inside(self, normal: str) -> bool:
        return any(
            is_within(normal, root) and (normal != root or self.tables_at_roots) for root in self.locations
        )

    def __bool__(self) -> bool:
        return bool(self.locations)

    def contains(self, location: str) -> bool:
        """Whether ``location`` lies strictly below one of the roots (a root itself only with
        ``tables_at_roots``: elsewhere a table or namespace at a root would own the whole
        catalog). False for any location that cannot be normalized."""
        try:
            normal = normalized_location(location)
        except LocationNotAllowedError:
            return False
        return self._inside(normal)

    def require(self, location: str, what: str) -> str:
        """``location`` normalized, or ``LocationNotAllowedError`` naming ``what`` when it lies
        outside every root."""
        normal = normalized_location(location, what)
        if not self._inside(normal):
            allowed = ", ".join(self.locations) or "none: this catalog has no warehouse"
            raise LocationNotAllowedError(
                f"{what} {location!r} is outside this catalog's roots ({allowed})", location=location
            )
        return normal
