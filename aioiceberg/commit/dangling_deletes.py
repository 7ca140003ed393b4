"""Delete files left pointing at nothing: those of a data file a change removes.

When a data file is dropped or rewritten, its deletion vector would stay live yet apply to
no row; Java's ``MergingSnapshotProducer`` removes such a DV in the same snapshot
(``removeDanglingDeletesFor``). On v3 a position delete file that names only that data file
(``referenced_data_file``, or equal ``file_path`` bounds) is dropped with it too: nothing
else can use it, and v3 folds what is left of v2 deletes into DVs anyway. Position delete
files that may name other files stay.
"""

from __future__ import annotations

from collections.abc import Collection

from aioiceberg.spec.manifest import DataFile, DataFileContent

__all__ = ["file_scoped_target", "is_dangling"]

_FILE_PATH_FIELD_ID = 2147483546  # file_path of position delete files


def file_scoped_target(f: DataFile) -> str | None:
    """The one data file the position delete file ``f`` names, when that is known."""
    if f.content != DataFileContent.POSITION_DELETES:
        return None
    if f.referenced_data_file is not None:
        return f.referenced_data_file
    lower = (f.lower_bounds or {}).get(_FILE_PATH_FIELD_ID)
    upper = (f.upper_bounds or {}).get(_FILE_PATH_FIELD_ID)
    if lower is not None and lower == upper:
        return lower.decode("utf-8", "replace")
    return None


def is_dangling(f: DataFile, removed_data_paths: Collection[str], format_version: int) -> bool:
    """Whether the delete file ``f`` goes with the removal of ``removed_data_paths``: a DV of
    one of them (any version), or on v3 a position delete file naming only one of them."""
    if not removed_data_paths or f.content != DataFileContent.POSITION_DELETES:
        return False
    if not f.is_deletion_vector and format_version < 3:
        return False
    target = file_scoped_target(f)
    return target is not None and target in removed_data_paths
