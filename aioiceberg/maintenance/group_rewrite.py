"""What the file rewrites share: Java's option names, groups rewritten here, their commit.

Compaction (``compaction.py``) and the position delete rewrite (``position_deletes.py``)
both plan groups of files, rewrite each group (in this process or on Spark executors) and
commit the outcome as ``replace`` snapshots with the same rules: a failed group fails the
whole rewrite (every new file deleted) unless ``partial-progress.enabled``, which leaves it
out and commits the others in up to ``partial-progress.max-commits`` batches, a batch whose
commit fails left out the same way; no group is committed twice. What a group holds, how it
is rewritten and what its ``replace`` snapshot checks stay each rewrite's own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from aioiceberg.commit.requirements import TableRequirement
from aioiceberg.commit.snapshot_producer import delete_quietly
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import CommitConflictError, IcebergError, RewriteFailedError, ValidationError
from aioiceberg.io.base import FileIO
from aioiceberg.maintenance.reachable import ManifestWalker
from aioiceberg.maintenance.rewrite import ManifestSink, ReplaceSnapshot, carried
from aioiceberg.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata

__all__ = [
    "DEFAULT_MAX_COMMITS",
    "DEFAULT_MAX_GROUP_SIZE",
    "GROUP_OPTION_KEYS",
    "Attempt",
    "GroupLimits",
    "GroupOutcome",
    "GroupReplace",
    "GroupRewriteResult",
    "JavaOptions",
    "batches",
    "bin_pack",
    "commit_groups",
    "rewrite_here",
]

DEFAULT_MAX_GROUP_SIZE = 100 * 1024**3  # Java's max-file-group-size-bytes
DEFAULT_MAX_COMMITS = 10  # Java's partial-progress.max-commits
GROUP_OPTION_KEYS = frozenset(
    {
        "target-file-size-bytes",
        "min-file-size-bytes",
        "max-file-size-bytes",
        "min-input-files",
        "max-file-group-size-bytes",
        "partial-progress.enabled",
        "partial-progress.max-commits",
        "rewrite-all",
    }
)


class JavaOptions:
    """A rewrite's options by Java's names (keys case-insensitive, an empty value is unset);
    unknown keys are refused, naming ``action``."""

    def __init__(self, options: Mapping[str, Any] | None, known: frozenset[str], action: str) -> None:
        self.values = {str(k).lower(): v for k, v in (options or {}).items()}
        unknown = sorted(set(self.values) - known)
        if unknown:
            raise ValidationError(
                f"unknown {action} options {', '.join(unknown)}: known are {', '.join(sorted(known))}"
            )

    def maybe_number(self, key: str) -> int | None:
        value = self.values.get(key)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except (TypeError, ValueError) as e:
            raise ValidationError(f"rewrite option {key!r} must be an integer, got {value!r}") from e

    def number(self, key: str, default: int) -> int:
        value = self.maybe_number(key)
        return default if value is None else value

    def flag(self, key: str) -> bool:
        value = str(self.values.get(key, "false")).strip().lower()
        if value not in ("true", "false"):
            raise ValidationError(f"rewrite option {key!r} must be true or false, got {self.values[key]!r}")
        return value == "true"

    def limits(self, target_file_size: int, min_input_files: int) -> LimitArgs:
        """The options every group rewrite takes, over the given defaults."""
        return LimitArgs(
            target_file_size_bytes=self.number("target-file-size-bytes", target_file_size),
            min_file_size_bytes=self.maybe_number("min-file-size-bytes"),
            max_file_size_bytes=self.maybe_number("max-file-size-bytes"),
            min_input_files=self.number("min-input-files", min_input_files),
            max_file_group_size_bytes=self.maybe_number("max-file-group-size-bytes"),
            partial_progress_enabled=self.flag("partial-progress.enabled"),
            partial_progress_max_commits=self.number("partial-progress.max-commits", DEFAULT_MAX_COMMITS),
            rewrite_all=self.flag("rewrite-all"),
        )


class LimitArgs(TypedDict):
    target_file_size_bytes: int
    min_file_size_bytes: int | None
    max_file_size_bytes: int | None
    min_input_files: int
    max_file_group_size_bytes: int | None
    partial_progress_enabled: bool
    partial_progress_max_commits: int
    rewrite_all: bool


@dataclass(frozen=True)
class GroupLimits:
    """The options Java's file rewrites share: which files are chosen (outside the size range,
    or all with ``rewrite-all``), how large a group grows, how many commits."""

    target_file_size_bytes: int
    min_file_size_bytes: int | None = None  # default 3/4 of the target
    max_file_size_bytes: int | None = None  # default 1.8 times the target
    min_input_files: int = 2
    max_file_group_size_bytes: int | None = None  # default: max_group_size
    partial_progress_enabled: bool = False
    partial_progress_max_commits: int = DEFAULT_MAX_COMMITS
    rewrite_all: bool = False

    def __post_init__(self) -> None:
        for name in ("target_file_size_bytes", "partial_progress_max_commits", "max_file_group_size_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValidationError(f"{name.replace('_', '-')} must be positive, got {value}")
        if self.min_input_files < 1:
            raise ValidationError(f"min-input-files must be at least 1, got {self.min_input_files}")

    @property
    def min_file_size(self) -> int:
        m = self.min_file_size_bytes
        return m if m is not None else self.target_file_size_bytes * 3 // 4

    @property
    def max_file_size(self) -> int:
        m = self.max_file_size_bytes
        return m if m is not None else self.target_file_size_bytes * 9 // 5

    @property
    def max_group_size(self) -> int:
        m = self.max_file_group_size_bytes
        return m if m is not None else DEFAULT_MAX_GROUP_SIZE


T = TypeVar("T")


def batches(groups: Sequence[T], opts: GroupLimits) -> list[list[T]]:
    """Groups per commit: all in one, or with partial progress up to ``max-commits`` commits
    of about equal numbers of groups (as Java splits them)."""
    if not groups:
        return []
    if not opts.partial_progress_enabled:
        return [list(groups)]
    commits = min(opts.partial_progress_max_commits, len(groups))
    per = -(-len(groups) // commits)
    return [list(groups[i : i + per]) for i in range(0, len(groups), per)]


def bin_pack(items: Sequence[T], size: Callable[[T], int], capacity: int) -> list[list[T]]:
    """First-fit decreasing by ``size`` (ties in the given order), each bin at most
    ``capacity`` (a larger item alone)."""
    bins: list[tuple[int, list[T]]] = []
    for item in sorted(items, key=lambda item: -size(item)):
        n = size(item)
        for i, (used, members) in enumerate(bins):
            if used + n <= capacity:
                members.append(item)
                bins[i] = (used + n, members)
                break
        else:
            bins.append((n, [item]))
    return [members for _, members in bins]


class Group(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def files(self) -> Sequence[DataFile]: ...


G = TypeVar("G", bound=Group)


@dataclass
class GroupOutcome(Generic[G]):
    """A group and the files its rewrite wrote, or why the rewrite failed."""

    group: G
    added: list[DataFile] = field(default_factory=list)
    error: str | None = None


R = TypeVar("R", bound=GroupOutcome[Any])


@dataclass
class GroupRewriteResult:
    """``snapshot_id``: the last snapshot committed (``snapshot_ids``: all of them, one per
    commit with partial progress); ``failed_groups``: indexes of the groups left out."""

    snapshot_id: int | None = None
    rewritten_files: list[str] = field(default_factory=list)
    added_files: list[str] = field(default_factory=list)
    groups: int = 0
    failed_groups: list[int] = field(default_factory=list)
    snapshot_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rewritten_files_count(self) -> int:
        return len(self.rewritten_files)

    @property
    def added_files_count(self) -> int:
        return len(self.added_files)


async def rewrite_here(
    io: FileIO,
    groups: Sequence[G],
    rewrite: Callable[[G], Awaitable[R]],
    failed: Callable[[G, str], R],
    *,
    partial_progress: bool,
    noun: str,
) -> list[R]:
    """Rewrite the groups in this process, one after another. Without partial progress the
    first failure deletes what was written and raises ``RewriteFailedError``; with it,
    failures are recorded (``failed``). ``noun`` names a group in errors."""
    out: list[R] = []
    for g in groups:
        try:
            out.append(await rewrite(g))
        except Exception as e:
            if not partial_progress:
                await delete_quietly(io, [f.file_path for r in out for f in r.added])
                raise RewriteFailedError(
                    f"{noun} {g.index} of {len(groups)} failed to rewrite, nothing was committed: "
                    f"{type(e).__name__}: {e}"
                ) from e
            out.append(failed(g, f"{type(e).__name__}: {e}"))
        except BaseException:
            await delete_quietly(io, [f.file_path for r in out for f in r.added])
            raise
    return out


@dataclass
class Attempt:
    """One commit attempt of a ``GroupReplace``: what it reads and writes manifests with,
    the main it commits on, the replaced files found live and other files it removes."""

    walker: ManifestWalker
    sink: ManifestSink
    base: TableMetadata
    parent: Snapshot
    found: set[tuple[str, int | None]] = field(default_factory=set)
    dropped: list[DataFile] = field(default_factory=list)


class GroupReplace(ReplaceSnapshot, ABC):
    """A ``replace`` snapshot on main of rewritten groups: ``deleted`` files out, ``added``
    in. The conflict checks both rewrites make, at every attempt: the start still an
    ancestor of main, every replaced file still live; the files of a failed attempt
    deleted. A rewrite says which entries it adds and what becomes of the manifests of
    the other content (``content``: the replaced files' manifests)."""

    content = ManifestContent.DATA
    replaced = "files"  # what ``deleted`` holds, in errors
    summary_key = "rewritten-files"  # the snapshot summary's count of ``deleted``

    def __init__(self, deleted: Sequence[DataFile], added: Sequence[DataFile], start: Snapshot) -> None:
        super().__init__()
        self.deleted = list(deleted)
        self.added = list(added)
        self.start = start
        self.written: list[str] = []
        self.kept_manifests: set[str] = set()

    def since_start(self, base: TableMetadata, parent: Snapshot) -> set[int]:
        """The snapshots committed on main since the start (a conflict when it is gone)."""
        since: set[int] = set()
        for snap in base.ancestors_of(parent.snapshot_id):
            if snap.snapshot_id == self.start.snapshot_id:
                return since
            since.add(snap.snapshot_id)
        raise CommitConflictError(
            f"snapshot {self.start.snapshot_id} the rewrite started from is no longer an ancestor of main"
        )

    async def check_conflicts(self, walker: ManifestWalker, base: TableMetadata, parent: Snapshot) -> None:
        self.since_start(base, parent)

    @abstractmethod
    def added_entries(self, base: TableMetadata) -> list[ManifestEntry]:
        """The manifest entries of ``added`` (their sequence numbers are the rewrite's)."""

    async def other_manifest(self, at: Attempt, m: ManifestFile) -> ManifestFile:
        """A manifest of the other content as the snapshot lists it: unchanged by default."""
        return m

    async def build(
        self, io: FileIO, base: TableMetadata, attempt: int
    ) -> tuple[list[TableUpdate], list[TableRequirement]]:
        parent = base.current_snapshot()
        if parent is None:
            raise CommitConflictError("the table no longer has a current snapshot")
        walker = ManifestWalker(io)
        await self.check_conflicts(walker, base, parent)
        at = Attempt(
            walker, ManifestSink(io, base, self.snapshot_id, f"{self.commit_uuid}-{attempt}"), base, parent
        )
        try:
            manifests = await self._write_added(at)
            for m in await walker.manifests(parent):
                if m.content == self.content:
                    manifests.append(await self._without_replaced(at, m))
                else:
                    manifests.append(await self.other_manifest(at, m))
        finally:
            self.written += at.sink.written
        missing = {_key(f) for f in self.deleted} - at.found
        if missing:
            raise CommitConflictError(
                f"{len(missing)} {self.replaced} being rewritten were removed by a concurrent commit, "
                f"e.g. {min(missing, key=str)[0]}"
            )
        extra = {self.summary_key: str(len(self.deleted))}
        updates, requirements, list_path = await self.publish(
            io,
            base,
            parent,
            manifests,
            attempt,
            extra,
            added=self.added,
            removed=[*self.deleted, *at.dropped],
        )
        self.written.append(list_path)
        self.kept_manifests = {m.manifest_path for m in manifests} | {list_path}
        return updates, requirements

    async def _write_added(self, at: Attempt) -> list[ManifestFile]:
        """The new files' manifests, one per partition spec."""
        by_spec: dict[int, list[ManifestEntry]] = {}
        for e in self.added_entries(at.base):
            by_spec.setdefault(e.data_file.spec_id, []).append(e)
        return [await at.sink.write(spec_id, group, self.content) for spec_id, group in by_spec.items()]

    async def _without_replaced(self, at: Attempt, m: ManifestFile) -> ManifestFile:
        """Manifest ``m`` with the replaced files it lists marked deleted, or ``m`` itself
        when it lists none."""
        entries = await at.walker.entries(m)
        hits = {_key(e.data_file) for e in entries if e.is_live} & {_key(f) for f in self.deleted}
        if not hits:
            return m
        at.found |= hits
        drop, keep = ManifestEntryStatus.DELETED, ManifestEntryStatus.EXISTING
        live = [e for e in entries if e.is_live]
        rewritten = [carried(e, drop if _key(e.data_file) in hits else keep) for e in live]
        return await at.sink.write(m.partition_spec_id, rewritten, m.content)

    async def committed(self, io: FileIO, metadata: TableMetadata) -> None:
        await delete_quietly(io, [p for p in self.written if p not in self.kept_manifests])

    async def aborted(self, io: FileIO) -> None:
        await delete_quietly(io, [*self.written, *(f.file_path for f in self.added)])


def _key(f: DataFile) -> tuple[str, int | None]:
    """A file as a manifest entry names it: deletion vectors share their Puffin file."""
    return f.file_path, f.content_offset


C = TypeVar("C", bound=GroupReplace)


async def commit_groups(
    io: FileIO,
    commit: Callable[[C], Awaitable[None]],
    rewritten: Sequence[R],
    opts: GroupLimits,
    change_for: Callable[[list[R]], C],
    result: GroupRewriteResult,
    *,
    noun: str,
) -> list[R]:
    """Commit the rewritten groups (``commit`` commits one change, ``change_for`` makes it of
    a batch): one ``replace`` snapshot, or with partial progress one per batch. Fills
    ``result``; returns the groups committed. Every group is committed at most once; the
    files of a group left out are deleted."""
    result.groups = len(rewritten)
    failed = [r for r in rewritten if r.error is not None]
    done = [r for r in rewritten if r.error is None]
    await delete_quietly(io, [f.file_path for r in failed for f in r.added])
    if failed and not opts.partial_progress_enabled:
        await delete_quietly(io, [f.file_path for r in done for f in r.added])
        first = failed[0]
        raise RewriteFailedError(
            f"{len(failed)} of {len(rewritten)} {noun}s failed to rewrite, nothing was committed; "
            f"group {first.group.index}: {first.error}"
        )
    result.failed_groups = [r.group.index for r in failed]
    result.errors = [f"group {r.group.index}: {r.error}" for r in failed]
    committed: list[R] = []
    for batch in batches(done, opts):
        change = change_for(batch)
        try:
            await commit(change)  # a failed commit deletes the change's files (``aborted``)
        except IcebergError as e:
            if not opts.partial_progress_enabled:
                raise
            result.failed_groups += [r.group.index for r in batch]
            result.errors.append(f"groups {[r.group.index for r in batch]}: {e}")
            continue
        committed += batch
        result.snapshot_ids.append(change.snapshot_id)
        result.snapshot_id = change.snapshot_id
        result.rewritten_files += sorted(f.file_path for f in change.deleted)
        result.added_files += sorted(f.file_path for f in change.added)
    return committed
