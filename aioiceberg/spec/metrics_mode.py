"""How much of a column's statistics a manifest keeps: the value of the table properties
``write.metadata.metrics.default`` and ``write.metadata.metrics.column.<name>``.

In the format model (not the writer) so that table properties parse without the writer."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aioiceberg.errors import ValidationError

__all__ = ["COUNTS", "DEFAULT", "FULL", "NONE", "MetricsMode", "parse_metrics_mode"]


@dataclass(frozen=True, slots=True)
class MetricsMode:
    counts: bool
    bounds: bool
    truncate: int | None = None  # None: full bounds

    def __str__(self) -> str:
        if not self.counts:
            return "none"
        if not self.bounds:
            return "counts"
        return "full" if self.truncate is None else f"truncate({self.truncate})"


NONE = MetricsMode(False, False)
COUNTS = MetricsMode(True, False)
FULL = MetricsMode(True, True)
DEFAULT = MetricsMode(True, True, 16)
_TRUNCATE = re.compile(r"truncate\((\d+)\)")


def parse_metrics_mode(text: str) -> MetricsMode:
    """Parse ``none`` / ``counts`` / ``truncate(N)`` / ``full`` (case and space tolerant)."""
    mode = text.strip().lower()
    if mode == "none":
        return NONE
    if mode == "counts":
        return COUNTS
    if mode == "full":
        return FULL
    if m := _TRUNCATE.fullmatch(mode):
        width = int(m.group(1))
        if width <= 0:
            raise ValidationError(f"metrics mode {text!r}: truncate length must be positive")
        return MetricsMode(True, True, width)
    raise ValidationError(f"unknown metrics mode {text!r}: expected none, counts, truncate(N) or full")
