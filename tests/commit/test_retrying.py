"""The retry helper: one backoff policy, retries only what the error calls retryable."""

from __future__ import annotations

import dataclasses
import time

import pytest
from servers.backends import create_bucket
from servers.plugin import s3_storage_options
from servers.proxy import FaultProxy

from aioiceberg.commit.retry import RetryConfig
from aioiceberg.errors import (
    CommitFailedError,
    IcebergError,
    PreconditionFailedError,
    StoreError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.obstore_s3 import ObstoreS3FileIO
from aioiceberg.io.s3 import S3FileIO
from aioiceberg.io.s3_client import S3Options
from aioiceberg.retrying import Backoff, FailedAttempt, Retries, RetryCounts, retry
from aioiceberg.runtime import default_runtime

pytestmark = pytest.mark.anyio

QUICK = Backoff("test", base_delay_s=0.001, max_delay_s=0.004, max_attempts=5)


class Flaky:
    """An operation that raises the given errors in turn, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_delays_grow_exponentially_with_equal_jitter_up_to_the_cap() -> None:
    backoff = Backoff("b", base_delay_s=0.1, max_delay_s=1.0)
    for retry_number, step in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (40, 1.0)]:
        delays = [backoff.delay(retry_number) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in delays), (retry_number, min(delays), max(delays))
        assert max(delays) - min(delays) > step / 4  # jittered, not fixed


def test_a_paced_backoff_starts_from_a_slow_attempts_duration() -> None:
    paced = Backoff("b", base_delay_s=0.1, max_delay_s=60, paced_by_attempt=True)
    assert all(1.0 <= paced.delay(0, attempt_s=2.0) <= 2.0 for _ in range(100))
    assert all(0.05 <= paced.delay(0, attempt_s=0.01) <= 0.1 for _ in range(100))
    unpaced = dataclasses.replace(paced, paced_by_attempt=False)
    assert all(unpaced.delay(0, attempt_s=2.0) <= 0.1 for _ in range(100))


def test_budget_is_attempts_or_deadline() -> None:
    assert Backoff("b", max_attempts=3).exhausted(3, 0.0)
    assert not Backoff("b", max_attempts=3).exhausted(2, 1e9)
    assert Backoff("b", max_attempts=None, deadline_s=1.0).exhausted(10**6, 1.0)
    assert not Backoff("b", max_attempts=None, deadline_s=1.0).exhausted(10**6, 0.5)


async def test_a_retryable_error_is_retried_and_each_retry_reported() -> None:
    op = Flaky(StoreError("503", retryable=True), StoreError("reset", retryable=True))
    seen: list[FailedAttempt] = []
    assert await retry(op, QUICK, on_retry=seen.append) == "done"
    assert op.calls == 3
    assert [f.attempt for f in seen] == [1, 2]
    assert [str(f.error) for f in seen] == ["503", "reset"]
    assert all(0 < f.delay_s <= QUICK.max_delay_s for f in seen)


@pytest.mark.parametrize(
    "error",
    [
        PreconditionFailedError(location="s3://b/k"),
        WriteOutcomeUnknownError(location="s3://b/k"),  # a conditional write is never resent blindly
        StoreError("403 AccessDenied", retryable=False),
    ],
    ids=type,
)
async def test_an_error_that_is_not_retryable_is_raised_at_once(error: IcebergError) -> None:
    op = Flaky(error)
    seen: list[FailedAttempt] = []
    with pytest.raises(type(error)) as caught:
        await retry(op, QUICK, on_retry=seen.append)
    assert caught.value is error
    assert op.calls == 1 and seen == []


async def test_an_error_outside_the_library_is_not_retried() -> None:
    op = Flaky(KeyError("bug"))
    with pytest.raises(KeyError):
        await retry(op, QUICK)
    assert op.calls == 1


async def test_the_last_error_propagates_with_a_note_once_attempts_run_out() -> None:
    op = Flaky(*(StoreError(f"503 #{i}", retryable=True) for i in range(10)))
    with pytest.raises(StoreError, match="503 #4") as caught:
        await retry(op, QUICK)
    assert op.calls == QUICK.max_attempts
    assert caught.value.__notes__[0].startswith("test: gave up after 5 attempts in ")


async def test_a_deadline_bounds_a_policy_without_an_attempt_limit() -> None:
    endless = Backoff("endless", base_delay_s=0.01, max_delay_s=0.01, max_attempts=None, deadline_s=0.1)
    op = Flaky(*(StoreError("busy", retryable=True) for _ in range(1000)))
    started = time.monotonic()
    with pytest.raises(StoreError):
        await retry(op, endless)
    assert 0.1 <= time.monotonic() - started < 1.0
    assert 5 <= op.calls < 1000


async def test_commit_budgets_differ_for_a_lost_race_and_other_failures() -> None:
    """A lost race retries until the deadline unless the table bounds it; a store error gives
    up after ``commit.retry.num-retries``."""
    config = RetryConfig(num_retries=2, min_wait_ms=1, max_wait_ms=2, total_timeout_ms=60_000)
    assert config.backoff(StoreError("x", retryable=True)).max_attempts == 3
    assert config.backoff(CommitFailedError("lost")).max_attempts is None
    assert config.backoff(CommitFailedError("lost")).deadline_s == 60.0

    races = Flaky(*(CommitFailedError(f"lost {i}") for i in range(8)))
    assert await retry(races, config.backoff) == "done"
    assert races.calls == 9

    outages = Flaky(*(StoreError(f"503 #{i}", retryable=True) for i in range(8)))
    with pytest.raises(StoreError, match="503 #2"):
        await retry(outages, config.backoff)
    assert outages.calls == 3

    bounded = dataclasses.replace(config, lost_race_retries=2)
    with pytest.raises(CommitFailedError, match="lost 2"):
        await retry(Flaky(*(CommitFailedError(f"lost {i}") for i in range(8))), bounded.backoff)


async def test_retries_serve_a_loop_whose_attempts_are_not_one_call() -> None:
    """A stream resumed at its offset keeps one budget across its attempts."""
    seen: list[FailedAttempt] = []
    retries = Retries(QUICK, on_retry=seen.append)
    assert await retries.wait_to_retry(StoreError("reset", retryable=True))
    assert not await retries.wait_to_retry(StoreError("403", retryable=False))
    while await retries.wait_to_retry(StoreError("reset", retryable=True)):
        pass
    assert retries.attempts == QUICK.max_attempts
    assert [f.attempt for f in seen] == [1, 2, 3, 4]


def test_retry_counts_tell_throttling_apart() -> None:
    counts = RetryCounts()
    counts.count(FailedAttempt(QUICK, 1, StoreError("503 SlowDown", retryable=True, throttled=True), 0.0))
    counts.count(FailedAttempt(QUICK, 2, StoreError("connection reset", retryable=True), 0.0))
    counts.count(FailedAttempt(QUICK, 1, CommitFailedError("lost"), 0.0))
    assert (counts.retries, counts.throttled) == (3, 1)


@pytest.mark.parametrize("backend", [S3FileIO, ObstoreS3FileIO])
async def test_the_s3_layer_counts_the_slowdown_retries_it_made(
    backend: type[S3FileIO | ObstoreS3FileIO], fault_proxy: FaultProxy, moto_endpoint: str
) -> None:
    bucket = await create_bucket(moto_endpoint)
    options = S3Options.from_storage_options(s3_storage_options(fault_proxy.url))
    io = backend(options=dataclasses.replace(options, backoff=dataclasses.replace(QUICK, max_attempts=30)))
    io.bind_runtime(default_runtime())
    fault_proxy.configure(slowdown_rate=0.3, seed=3)
    try:
        for i in range(20):
            await io.write(f"s3://{bucket}/k{i}", b"x")
            info = await io.write_if_absent(f"s3://{bucket}/c{i}", b"y")
            await io.write_if_match(f"s3://{bucket}/c{i}", b"z", info.etag)
            assert await io.read(f"s3://{bucket}/c{i}") == b"z"
    finally:
        await io.aclose()
    assert fault_proxy.stats.slowdowns > 0
    assert io.retries.throttled == io.retries.retries == fault_proxy.stats.slowdowns
