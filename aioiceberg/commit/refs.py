"""Branches, tags and moving the current snapshot: ``manage_snapshots()``.

Each operation is recorded as a function of the metadata it applies to, checked at once
against the table as loaded (so mistakes fail where they are made) and replayed on the
latest metadata at every commit attempt (so a concurrent commit is never overwritten by
a stale plan). Cherry-picking adds a snapshot, so it is its own change.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Protocol

from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.requirements import AssertRefSnapshotId, AssertTableUUID, TableRequirement
from aioiceberg.commit.snapshot_producer import Change, FastAppend, new_snapshot_id
from aioiceberg.commit.updates import RemoveSnapshotRef, SetSnapshotRef, TableUpdate
from aioiceberg.errors import NotFoundError, UnsupportedError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.spec.manifest import DataFile, DataFileContent, added_files
from aioiceberg.spec.metadata import MAIN_BRANCH, Operation, SnapshotRef, SnapshotRefType, TableMetadata

__all__ = ["CherryPick", "ManageSnapshots", "RefChange", "SnapshotsHolder", "is_ancestor"]


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET: Final = _Unset.UNSET
"""Marks a retention setting left as it is (``None`` clears it)."""

RefOp = Callable[[TableMetadata], tuple[list[TableUpdate], list[TableRequirement]]]


def is_ancestor(md: TableMetadata, snapshot_id: int, of: int) -> bool:
    """Whether ``snapshot_id`` is ``of`` or one of its (unexpired) parents."""
    return any(s.snapshot_id == snapshot_id for s in md.ancestors_of(of))


def _require_snapshot(md: TableMetadata, snapshot_id: int) -> None:
    if md.snapshot_by_id(snapshot_id) is None:
        raise NotFoundError(f"snapshot {snapshot_id} is not in the table")


def _set(name: str, ref: SnapshotRef) -> SetSnapshotRef:
    return SetSnapshotRef(
        ref.snapshot_id,
        name,
        ref.type,
        ref.min_snapshots_to_keep,
        ref.max_snapshot_age_ms,
        ref.max_ref_age_ms,
    )


def _move(md: TableMetadata, name: str, snapshot_id: int) -> SetSnapshotRef:
    """Point a branch at another snapshot, keeping its retention settings."""
    _require_snapshot(md, snapshot_id)
    ref = md.refs.get(name)
    if ref is None:
        return SetSnapshotRef(snapshot_id, name)
    return _set(
        name,
        SnapshotRef(
            snapshot_id, ref.type, ref.min_snapshots_to_keep, ref.max_snapshot_age_ms, ref.max_ref_age_ms
        ),
    )


def _guard(md: TableMetadata, name: str) -> list[TableRequirement]:
    ref = md.refs.get(name)
    return [AssertTableUUID(md.table_uuid), AssertRefSnapshotId(name, ref.snapshot_id if ref else None)]


def _existing(md: TableMetadata, name: str, kind: SnapshotRefType) -> SnapshotRef:
    ref = md.refs.get(name)
    if ref is None:
        raise NotFoundError(f"no {kind.value} named {name!r} (refs: {sorted(md.refs)})")
    if ref.type is not kind:
        raise ValidationError(f"{name!r} is a {ref.type.value}, not a {kind.value}")
    return ref


@dataclass
class RefChange:
    """Ref operations replayed in order on the latest metadata."""

    ops: list[RefOp] = field(default_factory=list)

    @property
    def snapshot_id(self) -> int | None:
        return None

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        md = base
        updates: list[TableUpdate] = []
        requirements: list[TableRequirement] = []
        for op in self.ops:
            op_updates, op_requirements = op(md)
            md = apply_updates(md, op_updates)
            updates.extend(op_updates)
            requirements.extend(op_requirements)
        return updates, requirements

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        return None

    async def aborted(self, io: FileIO) -> None:
        return None


class CherryPick:
    """Re-commit an append snapshot's data files on a branch (main) as a new append snapshot."""

    def __init__(self, source_snapshot_id: int, branch: str = MAIN_BRANCH) -> None:
        self.source_snapshot_id = source_snapshot_id
        self.branch = branch
        self._snapshot_id = new_snapshot_id()
        self._append: FastAppend | None = None

    @property
    def snapshot_id(self) -> int:
        return self._snapshot_id

    @staticmethod
    def check(md: TableMetadata, source_snapshot_id: int, branch: str = MAIN_BRANCH) -> None:
        """Refuse what cannot be cherry-picked: unknown, non-append, or already on the branch."""
        snap = md.snapshot_by_id(source_snapshot_id)
        if snap is None:
            raise NotFoundError(f"snapshot {source_snapshot_id} is not in the table")
        if snap.operation is not Operation.APPEND:
            raise UnsupportedError(
                f"cannot cherry-pick snapshot {source_snapshot_id}: its operation is "
                f"{snap.operation.value if snap.operation else 'unknown'}, only append snapshots can be "
                "cherry-picked"
            )
        head = md.refs.get(branch)
        if head is not None:
            for ancestor in md.ancestors_of(head.snapshot_id):
                if ancestor.snapshot_id == source_snapshot_id:
                    raise ValidationError(f"snapshot {source_snapshot_id} is already in {branch!r}")
                source = ancestor.summary.get("source-snapshot-id") if ancestor.summary else None
                if source == str(source_snapshot_id):
                    raise ValidationError(
                        f"snapshot {source_snapshot_id} was already cherry-picked as {ancestor.snapshot_id}"
                    )

    async def _added_files(self, io: FileIO, md: TableMetadata) -> list[DataFile]:
        snap = md.snapshot_by_id(self.source_snapshot_id)
        assert snap is not None
        files = await added_files(io, snap)
        if any(f.content != DataFileContent.DATA for f in files):
            raise UnsupportedError(f"snapshot {snap.snapshot_id} adds delete files")
        if not files:
            raise ValidationError(f"snapshot {snap.snapshot_id} added no data files")
        return files

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        self.check(base, self.source_snapshot_id, self.branch)
        if self._append is None:
            self._append = FastAppend(
                await self._added_files(io, base),
                branch=self.branch,
                owns_files=False,
                snapshot_properties={"source-snapshot-id": str(self.source_snapshot_id)},
                snapshot_id=self._snapshot_id,
            )
        return await self._append.build(io, base, attempt)

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        if self._append is not None:
            await self._append.committed(io, metadata)

    async def aborted(self, io: FileIO) -> None:
        if self._append is not None:
            await self._append.aborted(io)


class SnapshotsHolder(Protocol):
    """What ``ManageSnapshots`` needs from a transaction: its changes and its table's metadata."""

    changes: list[Change]

    def _metadata(self) -> TableMetadata: ...


class ManageSnapshots:
    """Branch, tag and current-snapshot operations, committed together.

    ``async with table.manage_snapshots() as ms: ms.create_tag(...)`` commits on exit;
    on a transaction the operations join the transaction's commit. Every method returns
    ``self`` so calls chain.
    """

    def __init__(
        self, holder: SnapshotsHolder, commit: Callable[[], Awaitable[object]] | None = None
    ) -> None:
        self._holder = holder
        self._commit = commit
        self._preview = holder._metadata()
        self._changes: list[Change] = []
        self._done = False

    async def __aenter__(self) -> ManageSnapshots:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and not self._done:
            await self.commit()

    async def commit(self) -> None:
        """Hand the operations to the transaction (and commit it when this object owns it)."""
        if self._done:
            raise UnsupportedError("these snapshot operations were already committed")
        self._done = True
        self._holder.changes.extend(self._changes)
        if self._commit is not None:
            await self._commit()

    # -- plumbing ------------------------------------------------------------------------
    def _op(self, op: RefOp) -> ManageSnapshots:
        updates, _ = op(self._preview)  # fail now, not at commit time
        self._preview = apply_updates(self._preview, updates)
        if self._changes and isinstance(self._changes[-1], RefChange):
            self._changes[-1].ops.append(op)
        else:
            self._changes.append(RefChange([op]))
        return self

    def _current_or(self, snapshot_id: int | None) -> int:
        if snapshot_id is not None:
            return snapshot_id
        current = self._preview.current_snapshot_id
        if current is None:
            raise ValidationError("the table has no current snapshot; give a snapshot id")
        return current

    # -- branches and tags ---------------------------------------------------------------
    def create_branch(
        self,
        name: str,
        snapshot_id: int | None = None,
        *,
        min_snapshots_to_keep: int | None = None,
        max_snapshot_age_ms: int | None = None,
        max_ref_age_ms: int | None = None,
    ) -> ManageSnapshots:
        target = self._current_or(snapshot_id)
        ref = SnapshotRef(
            target, SnapshotRefType.BRANCH, min_snapshots_to_keep, max_snapshot_age_ms, max_ref_age_ms
        )
        return self._op(lambda md: _create(md, name, ref))

    def create_tag(
        self, name: str, snapshot_id: int | None = None, *, max_ref_age_ms: int | None = None
    ) -> ManageSnapshots:
        target = self._current_or(snapshot_id)
        ref = SnapshotRef(target, SnapshotRefType.TAG, max_ref_age_ms=max_ref_age_ms)
        return self._op(lambda md: _create(md, name, ref))

    def replace_branch(self, name: str, snapshot_id: int) -> ManageSnapshots:
        """Point an existing branch at any snapshot (retention settings stay)."""

        def op(md: TableMetadata) -> tuple[list[TableUpdate], list[TableRequirement]]:
            _existing(md, name, SnapshotRefType.BRANCH)
            return [_move(md, name, snapshot_id)], _guard(md, name)

        return self._op(op)

    def replace_tag(self, name: str, snapshot_id: int) -> ManageSnapshots:
        def op(md: TableMetadata) -> tuple[list[TableUpdate], list[TableRequirement]]:
            ref = _existing(md, name, SnapshotRefType.TAG)
            _require_snapshot(md, snapshot_id)
            moved = SnapshotRef(snapshot_id, SnapshotRefType.TAG, max_ref_age_ms=ref.max_ref_age_ms)
            return [_set(name, moved)], _guard(md, name)

        return self._op(op)

    def remove_branch(self, name: str) -> ManageSnapshots:
        if name == MAIN_BRANCH:
            raise ValidationError("the main branch cannot be removed")
        return self._op(lambda md: _remove(md, name, SnapshotRefType.BRANCH))

    def remove_tag(self, name: str) -> ManageSnapshots:
        return self._op(lambda md: _remove(md, name, SnapshotRefType.TAG))

    def set_retention(
        self,
        name: str,
        *,
        min_snapshots_to_keep: int | _Unset | None = UNSET,
        max_snapshot_age_ms: int | _Unset | None = UNSET,
        max_ref_age_ms: int | _Unset | None = UNSET,
    ) -> ManageSnapshots:
        """Change a ref's retention; settings not given stay, ``None`` clears one (tags: age only)."""

        def op(md: TableMetadata) -> tuple[list[TableUpdate], list[TableRequirement]]:
            ref = md.refs.get(name)
            if ref is None:
                raise NotFoundError(f"no branch or tag named {name!r}")
            new = SnapshotRef(
                ref.snapshot_id,
                ref.type,
                ref.min_snapshots_to_keep if min_snapshots_to_keep is UNSET else min_snapshots_to_keep,
                ref.max_snapshot_age_ms if max_snapshot_age_ms is UNSET else max_snapshot_age_ms,
                ref.max_ref_age_ms if max_ref_age_ms is UNSET else max_ref_age_ms,
            )
            return [_set(name, new)], _guard(md, name)

        return self._op(op)

    # -- moving branches -----------------------------------------------------------------
    def fast_forward(self, branch: str, to: str | int) -> ManageSnapshots:
        """Move ``branch`` to ``to`` (a ref name or snapshot id) when its head is an ancestor of it."""

        def op(md: TableMetadata) -> tuple[list[TableUpdate], list[TableRequirement]]:
            ref = _existing(md, branch, SnapshotRefType.BRANCH)
            if isinstance(to, str):
                target_ref = md.refs.get(to)
                if target_ref is None:
                    raise NotFoundError(f"no branch or tag named {to!r}")
                target = target_ref.snapshot_id
            else:
                _require_snapshot(md, to)
                target = to
            if not is_ancestor(md, ref.snapshot_id, target):
                raise ValidationError(
                    f"cannot fast-forward {branch!r}: its head {ref.snapshot_id} "
                    f"is not an ancestor of {target}"
                )
            return [_move(md, branch, target)], _guard(md, branch)

        return self._op(op)

    def rollback_to_snapshot(self, snapshot_id: int) -> ManageSnapshots:
        """Make an ancestor of the current snapshot current again."""

        def op(md: TableMetadata) -> tuple[list[TableUpdate], list[TableRequirement]]:
            _require_snapshot(md, snapshot_id)
            current = md.current_snapshot_id
            if current is None or not is_ancestor(md, snapshot_id, current):
                raise ValidationError(
                    f"cannot roll back to {snapshot_id}: not an ancestor of the current snapshot {current}"
                )
            return [_move(md, MAIN_BRANCH, snapshot_id)], _guard(md, MAIN_BRANCH)

        return self._op(op)

    def rollback_to_timestamp(self, timestamp_ms: int) -> ManageSnapshots:
        """Roll back to the newest ancestor of the current snapshot older than ``timestamp_ms``."""
        current = self._preview.current_snapshot_id
        older = [
            s
            for s in (self._preview.ancestors_of(current) if current is not None else ())
            if s.timestamp_ms < timestamp_ms
        ]
        if not older:
            raise ValidationError(f"no ancestor of the current snapshot is older than {timestamp_ms}")
        return self.rollback_to_snapshot(older[0].snapshot_id)

    def set_current_snapshot(
        self, snapshot_id: int | None = None, ref_name: str | None = None
    ) -> ManageSnapshots:
        """Make any snapshot (by id, or a ref's) current, ancestor or not."""
        if (snapshot_id is None) == (ref_name is None):
            raise ValidationError("give exactly one of snapshot_id and ref_name")
        if ref_name is not None:
            ref = self._preview.refs.get(ref_name)
            if ref is None:
                raise NotFoundError(f"no branch or tag named {ref_name!r}")
            snapshot_id = ref.snapshot_id
        target = snapshot_id
        assert target is not None
        return self._op(lambda md: ([_move(md, MAIN_BRANCH, target)], _guard(md, MAIN_BRANCH)))

    def cherry_pick(self, snapshot_id: int) -> ManageSnapshots:
        """Add a new snapshot on main with the data files ``snapshot_id`` appended (appends only)."""
        CherryPick.check(self._preview, snapshot_id)
        self._changes.append(CherryPick(snapshot_id))
        return self


def _create(
    md: TableMetadata, name: str, ref: SnapshotRef
) -> tuple[list[TableUpdate], list[TableRequirement]]:
    if name in md.refs:
        raise ValidationError(f"a {md.refs[name].type.value} named {name!r} already exists")
    _require_snapshot(md, ref.snapshot_id)
    return [_set(name, ref)], _guard(md, name)


def _remove(
    md: TableMetadata, name: str, kind: SnapshotRefType
) -> tuple[list[TableUpdate], list[TableRequirement]]:
    _existing(md, name, kind)
    return [RemoveSnapshotRef(name)], _guard(md, name)
