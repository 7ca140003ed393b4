"""Retries with capped exponential backoff and full jitter.

The SDK's own retries are off: this loop owns every retry so that a conditional write
is never repeated blindly, and the error itself (``StoreError.retryable``) decides.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from aioiceberg.errors import StoreError

T = TypeVar("T")

DEFAULT_MAX_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_delay: float = 0.05
    max_delay: float = 5.0

    def delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**attempt)]."""
        return random.uniform(0.0, min(self.max_delay, self.base_delay * (2**attempt)))


async def retrying(op: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Run ``op`` until it succeeds, raises a non-retryable error, or attempts run out."""
    attempt = 0
    while True:
        try:
            return await op()
        except StoreError as exc:
            attempt += 1
            if not exc.retryable or attempt >= policy.max_attempts:
                raise
        await anyio.sleep(policy.delay(attempt - 1))
