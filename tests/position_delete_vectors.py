"""What a table's position deletes look like after v2 position delete files were turned into
deletion vectors (shared by the single-process, Spark and Java tests of the conversion)."""

from __future__ import annotations

from dataclasses import dataclass

from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.read.deletes import decode_deletion_vector
from aioiceberg.read.formats import decode_file
from aioiceberg.spec.manifest import DataFile, DataFileContent, ManifestEntryStatus
from aioiceberg.table import Table


@dataclass
class DeleteState:
    """The current snapshot's live data files, v2 position delete files and deletion vectors,
    and the delete files it removed (path, content offset)."""

    data: set[str]
    v2_files: list[DataFile]
    vectors: list[DataFile]
    removed: set[tuple[str, int | None]]


async def delete_state(table: Table) -> DeleteState:
    snap = table.current_snapshot()
    assert snap is not None
    walker = ManifestWalker(table.io)
    state = DeleteState(set(), [], [], set())
    for m in await walker.manifests(snap):
        for e in await walker.entries(m):
            f = e.data_file
            if e.status == ManifestEntryStatus.DELETED:
                if e.snapshot_id == snap.snapshot_id and f.content != DataFileContent.DATA:
                    state.removed.add((f.file_path, f.content_offset))
            elif f.content == DataFileContent.DATA:
                state.data.add(f.file_path)
            elif f.is_deletion_vector:
                state.vectors.append(f)
            elif f.content == DataFileContent.POSITION_DELETES:
                state.v2_files.append(f)
    return state


async def deleted_positions(table: Table, state: DeleteState) -> dict[str, set[int]]:
    """Deleted positions per live data file, from every live position delete file and vector
    (rows naming files no longer live left out)."""
    out: dict[str, set[int]] = {}
    for f in state.v2_files:
        rows = decode_file(await table.io.read(f.file_path), f.file_format, f.file_path)
        paths, positions = rows.column("file_path").to_pylist(), rows.column("pos").to_pylist()
        for path, pos in zip(paths, positions, strict=True):
            if path in state.data:
                out.setdefault(path, set()).add(pos)
    for v in state.vectors:
        assert v.content_offset is not None and v.content_size_in_bytes is not None
        blob = await table.io.read_range(v.file_path, v.content_offset, v.content_size_in_bytes)
        assert v.referenced_data_file is not None
        vector = decode_deletion_vector(blob, v.file_path).tolist()
        assert v.record_count == len(vector)
        out.setdefault(v.referenced_data_file, set()).update(vector)
    return out


def assert_converted(before: DeleteState, after: DeleteState) -> None:
    """No v2 position delete file left, one vector per data file (all live), and every v2
    file that was live in ``before`` removed by the current snapshot."""
    assert after.v2_files == []
    targets = [v.referenced_data_file for v in after.vectors]
    assert len(targets) == len(set(targets)), "two deletion vectors for one data file"
    assert set(targets) <= after.data
    assert {(f.file_path, f.content_offset) for f in before.v2_files} <= after.removed
