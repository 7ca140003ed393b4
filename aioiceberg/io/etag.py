"""S3 ETag spelling, shared by both S3 backends: the wire form is quoted, ours is bare.

Conditional headers (``If-Match``) need the quoted form; comparisons and ``ObjectInfo``
use the bare one, so an ETag read through one client matches one read through the other.
"""

from __future__ import annotations

__all__ = ["quote_etag", "unquote_etag"]


def quote_etag(etag: str) -> str:
    """The form a conditional header takes; ``*`` (any object) stays bare."""
    return etag if etag.startswith('"') or etag == "*" else f'"{etag}"'


def unquote_etag(etag: str | None) -> str:
    """The bare form; a missing ETag is the empty string."""
    return (etag or "").strip('"')
