"""Commit protocols: one ``commit_table`` seam, several places to put the commit point."""

from aioiceberg.commit.protocols.base import CommitProtocol, TableState, version_hint_path, version_path
from aioiceberg.commit.protocols.conditional import ConditionalWriteProtocol, find_latest_version

__all__ = [
    "CommitProtocol",
    "ConditionalWriteProtocol",
    "TableState",
    "find_latest_version",
    "version_hint_path",
    "version_path",
]
