"""Retries: one backoff policy and one loop, asked by the error whether to go on.

An error says itself whether the same call may succeed later (``IcebergError.retryable``),
so no loop here keeps lists of exception types: a retryable error waits and tries again
until the policy's attempts or deadline run out; any other error is re-raised at once.
A conditional write is safe under this rule because its backends report an answer that
never came as ``WriteOutcomeUnknownError`` (not retryable), never as a retryable error.

Who uses what:

* :func:`retry` runs one call to the end: the store backends (``io/s3.py``,
  ``io/obstore_s3.py``), DynamoDB calls and conditional PutItems, and the commit loop
  (``commit/retry.py``, which rebases each retry on the latest version).
* :class:`Retries` is the same decision for loops whose attempts are not one call: a
  stream resumed at its offset, a DynamoDB commit item re-sent after a read-back found
  it absent.
* Waits that are not retries (a DynamoDB lease another process holds, a DynamoDB table
  becoming active) keep their own loops and take only their delays from a
  :class:`Backoff`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from aioiceberg.errors import IcebergError, StoreError

__all__ = ["Backoff", "FailedAttempt", "Retries", "RetryCounts", "RetryHook", "retry"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait between attempts and when to stop.

    Waits grow exponentially from ``base_delay_s`` up to ``max_delay_s`` with equal
    jitter (uniform between half and all of the step): concurrent callers spread out,
    and a minimum wait still means something. With ``paced_by_attempt`` the step starts
    from the failed attempt's duration when that is longer, so writers racing through a
    slow store spread over several attempts' time rather than ``base_delay_s``.
    ``max_attempts`` counts the first attempt; ``None`` bounds by ``deadline_s`` alone.
    """

    name: str
    base_delay_s: float = 0.05
    max_delay_s: float = 5.0
    max_attempts: int | None = 10
    deadline_s: float | None = None
    paced_by_attempt: bool = False

    def delay(self, retry: int, attempt_s: float = 0.0) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        base = max(self.base_delay_s, attempt_s) if self.paced_by_attempt else self.base_delay_s
        step = min(self.max_delay_s, base * 2 ** min(retry, 32))
        return random.uniform(step / 2, step)

    def exhausted(self, attempts: int, elapsed_s: float) -> bool:
        """Whether ``attempts`` made over ``elapsed_s`` seconds use up the budget."""
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return True
        return self.deadline_s is not None and elapsed_s >= self.deadline_s


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """What a retry hook is told: attempt ``attempt`` (1-based) failed with ``error`` and
    the next one starts after ``delay_s`` seconds."""

    backoff: Backoff
    attempt: int
    error: IcebergError
    delay_s: float


RetryHook = Callable[[FailedAttempt], None]
"""Called before each wait to retry: counters of retries and throttling live with the caller."""


@dataclass
class RetryCounts:
    """Retries one component made, and how many of them the store asked for by throttling
    (503 SlowDown and kin); :meth:`count` is its :data:`RetryHook`."""

    retries: int = 0
    throttled: int = 0

    def count(self, failed: FailedAttempt) -> None:
        self.retries += 1
        if isinstance(failed.error, StoreError) and failed.error.throttled:
            self.throttled += 1


PolicyFor = Callable[[IcebergError], Backoff]
"""A policy chosen by the error, for callers whose budgets differ by kind of failure."""


class Retries:
    """One call's retry state: the attempts made so far, the clock, the decision and the wait."""

    def __init__(
        self, policy: Backoff | PolicyFor, *, on_retry: RetryHook | None = None, started: float | None = None
    ) -> None:
        """``started``: the ``time.monotonic()`` at which the first attempt began, when the
        state is made only once it has failed."""
        self._policy = policy
        self._on_retry = on_retry
        self.attempts = 1  # the one under way
        self._started = self._attempt_started = time.monotonic() if started is None else started

    async def wait_to_retry(self, error: IcebergError) -> bool:
        """Wait before the next attempt and return True, or return False when ``error``
        ends the call: it is not retryable, or the policy's budget is spent (then the
        error gets a note saying so)."""
        if not error.retryable or error.retries_spent:
            return False
        backoff = self._policy if isinstance(self._policy, Backoff) else self._policy(error)
        now = time.monotonic()
        elapsed = now - self._started
        if backoff.exhausted(self.attempts, elapsed):
            error.add_note(f"{backoff.name}: gave up after {self.attempts} attempts in {elapsed:.1f} s")
            error.retries_spent = True
            return False
        delay = backoff.delay(self.attempts - 1, now - self._attempt_started)
        if self._on_retry is not None:
            self._on_retry(FailedAttempt(backoff, self.attempts, error, delay))
        await anyio.sleep(delay)
        self.attempts += 1
        self._attempt_started = time.monotonic()
        return True


async def retry(
    op: Callable[[], Awaitable[T]], policy: Backoff | PolicyFor, *, on_retry: RetryHook | None = None
) -> T:
    """Run ``op`` until it succeeds; a non-retryable error, or the last one once the
    budget is spent, propagates as raised. Anything but an ``IcebergError`` (a bug, a
    cancellation) propagates at once. The retry state is made only once an attempt fails:
    most calls succeed at once, and a store read pays this per request."""
    started = time.monotonic()
    try:
        return await op()
    except IcebergError as exc:
        retries = Retries(policy, on_retry=on_retry, started=started)
        if not await retries.wait_to_retry(exc):
            raise
    while True:
        try:
            return await op()
        except IcebergError as exc:
            if not await retries.wait_to_retry(exc):
                raise
