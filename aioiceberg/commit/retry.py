"""The commit loop: build the change on the latest state, swap, and on a lost race rebase and retry.

The loop is :func:`aioiceberg.retrying.retry`: it asks each error whether a retry can help
(``retryable``); :class:`RetryConfig` is the commit's configuration of its
:class:`~aioiceberg.retrying.Backoff`, from the table properties Java and PyIceberg use.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from aioiceberg.commit.apply import apply_updates
from aioiceberg.commit.protocols.base import CommitProtocol, TableState
from aioiceberg.commit.requirements import AssertRefSnapshotId, TableRequirement
from aioiceberg.commit.snapshot_producer import Change
from aioiceberg.commit.updates import TableUpdate
from aioiceberg.errors import CommitConflictError, CommitFailedError, CommitStateUnknownError, IcebergError
from aioiceberg.retrying import Backoff, FailedAttempt, retry
from aioiceberg.spec.properties import TableProperties

__all__ = ["IN_PROCESS_LOCK", "CommitStats", "RetryConfig", "commit_changes"]

IN_PROCESS_LOCK = "commit.in-process-lock"
"""Table property: tasks of one process take turns committing to a table (default true).

Racing them only burns requests: all but one lose each version and redo their manifest
list. Writers in other processes or hosts still race through the protocol."""


@contextlib.asynccontextmanager
async def _turn(protocol: CommitProtocol, table_location: str, enabled: bool) -> AsyncIterator[None]:
    if not enabled:
        yield
        return
    async with protocol.io.runtime.commit_turn(table_location):
        yield


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """When to give up and how long to wait, from the table properties Java and PyIceberg use.

    ``num_retries`` bounds retries after errors that may pass (a store error). A writer that
    lost the race for a version retries until ``total_timeout_ms``: another writer's
    progress is no reason to give up on a change that rebases; ``num_retries`` bounds those
    retries too only when the table sets ``commit.retry.num-retries`` itself
    (``lost_race_retries``).
    """

    num_retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 1_800_000
    in_process_lock: bool = True
    lost_race_retries: int | None = None

    @classmethod
    def from_properties(cls, properties: TableProperties | Mapping[str, str]) -> RetryConfig:
        """The table's ``commit.retry.*`` and ``commit.in-process-lock``; a bad value raises
        InvalidPropertyError (the commit needs them)."""
        props = TableProperties.of(properties)
        lost_race = props.commit_num_retries if props.is_set(TableProperties.commit_num_retries) else None
        return cls(
            props.commit_num_retries,
            props.commit_min_wait_ms,
            props.commit_max_wait_ms,
            props.commit_total_timeout_ms,
            props.commit_in_process_lock,
            lost_race,
        )

    def backoff(self, error: IcebergError) -> Backoff:
        """The policy for one failed attempt: a lost race and any other failure have their
        own attempt budgets, the same waits and the same deadline."""
        lost_race = error.lost_race
        retries = self.lost_race_retries if lost_race else self.num_retries
        return Backoff(
            "commit after a lost race" if lost_race else "commit",
            base_delay_s=self.min_wait_ms / 1000,
            max_delay_s=self.max_wait_ms / 1000,
            max_attempts=None if retries is None else retries + 1,
            deadline_s=self.total_timeout_ms / 1000,
            paced_by_attempt=True,
        )


@dataclass
class CommitStats:
    """What one commit cost: attempts made (1 = no retry) and seconds spent waiting between them."""

    attempts: int = 0
    waited_s: float = 0.0

    def count_retry(self, failed: FailedAttempt) -> None:
        self.attempts += 1
        self.waited_s += failed.delay_s


def _dedupe(requirements: list[TableRequirement]) -> list[TableRequirement]:
    """Keep the first requirement of each kind: later changes in a transaction build on the
    earlier ones' output, so only the first describes the table as found."""
    seen: set[object] = set()
    out: list[TableRequirement] = []
    for r in requirements:
        key: object = (type(r), r.ref) if isinstance(r, AssertRefSnapshotId) else type(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


async def _build(
    protocol: CommitProtocol, base: TableState, changes: Sequence[Change], attempt: int
) -> tuple[list[TableRequirement], list[TableUpdate]]:
    metadata = base.metadata
    requirements: list[TableRequirement] = []
    updates: list[TableUpdate] = []
    for change in changes:
        change_updates, change_requirements = await change.build(protocol.io, metadata, attempt)
        metadata = apply_updates(metadata, change_updates)
        requirements.extend(change_requirements)
        updates.extend(change_updates)
    return _dedupe(requirements), updates


def _landed(state: TableState, changes: Sequence[Change]) -> bool:
    ids = [c.snapshot_id for c in changes if c.snapshot_id is not None]
    return bool(ids) and all(state.metadata.snapshot_by_id(i) is not None for i in ids)


async def commit_changes(
    protocol: CommitProtocol,
    table_location: str,
    base: TableState,
    changes: Sequence[Change],
    config: RetryConfig | None = None,
    stats: CommitStats | None = None,
) -> TableState:
    """Commit ``changes`` as one new version, rebasing on lost races; returns the new state.

    On a definite failure every file the changes wrote is deleted; on an unknown outcome
    nothing is.
    """
    try:
        if config is None:
            config = RetryConfig.from_properties(base.metadata.properties)
    except IcebergError:  # a bad commit.retry.* value: nothing was committed
        await _abort(protocol, changes)
        raise
    async with _turn(protocol, table_location, config.in_process_lock):
        new_state = await _commit_loop(protocol, table_location, base, changes, config, stats)
    # after our turn: what a change does once it landed (expiry deleting files) holds up no one
    await _committed(protocol, changes, new_state)
    return new_state


async def _commit_loop(
    protocol: CommitProtocol,
    table_location: str,
    base: TableState,
    changes: Sequence[Change],
    config: RetryConfig,
    stats: CommitStats | None,
) -> TableState:
    stats = stats if stats is not None else CommitStats()
    state = base
    tries = 0

    async def attempt() -> TableState:
        nonlocal state, tries
        tries += 1
        if tries > 1:  # a retry: rebase on the version that won
            try:
                state = await protocol.load(table_location, since=state)
            except IcebergError as exc:
                raise CommitConflictError(f"cannot reload the table to retry: {exc}") from exc
            if _landed(state, changes):  # an earlier attempt landed after all
                return state
        requirements, updates = await _build(protocol, state, changes, tries - 1)
        return await protocol.commit_table(state, requirements, updates)

    stats.attempts += 1
    try:
        if config.in_process_lock:
            # Our turn may come long after this table object was loaded: start from the latest.
            state = await protocol.load(table_location, since=state)
        new_state = await retry(attempt, config.backoff, on_retry=stats.count_retry)
    except CommitStateUnknownError:
        raise  # the write may have landed: keep every file
    except CommitFailedError as exc:
        await _abort(protocol, changes)
        raise CommitConflictError(f"gave up after {tries} attempts: {exc}") from exc
    except IcebergError:
        await _abort(protocol, changes)
        raise
    # anything else (a cancellation, a bug) propagates with the files kept: a write may be in flight
    return new_state


async def _committed(protocol: CommitProtocol, changes: Sequence[Change], state: TableState) -> None:
    for change in changes:
        await change.committed(protocol.io, state.metadata)


async def _abort(protocol: CommitProtocol, changes: Sequence[Change]) -> None:
    for change in changes:
        await change.aborted(protocol.io)
