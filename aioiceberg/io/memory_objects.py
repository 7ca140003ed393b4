"""What one in-memory store holds, apart from the FileIO that reaches it: a runtime keeps
the process's (``memory://``) without depending on the FileIO contract."""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Entry:
    data: bytes
    etag: str
    modified: float


class MemoryObjects:
    """The objects of one in-memory store; ``memory://`` locations use their runtime's."""

    def __init__(self) -> None:
        self.objects: dict[str, _Entry] = {}
        self.generation = itertools.count()
