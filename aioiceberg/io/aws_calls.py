"""Calls on one AWS API (Glue, S3 Tables) through the runtime's shared aiobotocore client:
reads retried, writes sent again only after a throttling refusal, every failure typed.

A write that may have been applied (a 5xx, no answer) is ``WriteOutcomeUnknownError``, for
the caller to settle by reading back; a definite refusal is an :class:`AwsAnswer`, which the
caller maps to what the error code means for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aioiceberg.errors import IcebergError, StoreError, ValidationError, WriteOutcomeUnknownError
from aioiceberg.io.aws_errors import error_code, error_message, http_status
from aioiceberg.io.s3_client import S3Options
from aioiceberg.retrying import Backoff, retry

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime

__all__ = ["AwsAnswer", "AwsService"]

_THROTTLES = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "SlowDown", "RequestLimitExceeded"}
)


class AwsAnswer(Exception):
    """The service answered with a definite error (a 4xx it did not apply); mapped by each
    caller, never raised past the catalog that made the call."""

    def __init__(self, label: str, method: str, code: str, message: str, invalid: frozenset[str]) -> None:
        self.label = label
        self.method = method
        self.code = code
        self.message = message
        self.invalid = invalid
        super().__init__(f"{label} {method}: {code}: {message}")

    def fallback(self, subject: str) -> IcebergError:
        """The typed error for an answer the caller has no better meaning for."""
        if self.code in self.invalid:
            return ValidationError(f"{subject}: {self.label} refused the request: {self.message}")
        return StoreError(f"{subject}: {self.label} {self.method} refused ({self.code}): {self.message}")


class AwsService:
    """One AWS API for one catalog: ``service`` is botocore's name ("glue"), ``label`` the
    one errors use ("Glue"); ``fixed`` arguments go with every call (a catalog id, an ARN);
    ``invalid`` error codes mean a bad request (``ValidationError``)."""

    def __init__(
        self,
        runtime: Runtime,
        connection: S3Options,
        *,
        service: str,
        label: str,
        fixed: Mapping[str, Any] | None = None,
        invalid: frozenset[str] = frozenset(),
    ) -> None:
        self.runtime = runtime
        self.connection = connection
        self.service = service
        self.label = label
        self.fixed = dict(fixed or {})
        self.invalid = invalid
        self._reads = Backoff(f"{label} call", base_delay_s=0.05, max_delay_s=2.0, max_attempts=8)
        # a write refused by throttling was not applied: it may be sent again, a few times
        self._writes = Backoff(f"{label} write", base_delay_s=0.1, max_delay_s=2.0, max_attempts=5)

    async def client(self) -> Any:
        try:
            return await self.runtime.clients.get(self.connection, self.service, holder=self)
        except Exception as exc:  # a missing profile, an unknown region: nothing was sent
            raise StoreError(f"cannot create a {self.label} client: {exc}") from exc

    async def release(self) -> None:
        await self.runtime.clients.release(self, self.connection, self.service)

    async def _send(self, method: str, write: bool, kwargs: dict[str, Any]) -> dict[str, Any]:
        import botocore.exceptions as bx  # botocore: optional (the s3 extra)

        client = await self.client()
        what = f"{self.label} {method}"
        try:
            response: dict[str, Any] = await getattr(client, method)(**self.fixed, **kwargs)
            return response
        except bx.ClientError as exc:
            code, status = error_code(exc), http_status(exc)
            if code in _THROTTLES or status == 429:
                raise StoreError(f"{what}: {code}", retryable=True, throttled=True) from exc
            if status >= 500 or not status:
                if write:  # a server error may come after the change was applied
                    raise WriteOutcomeUnknownError(f"{what}: {code} ({status})") from exc
                raise StoreError(f"{what}: {code} ({status})", retryable=True) from exc
            raise AwsAnswer(self.label, method, code, error_message(exc), self.invalid) from exc
        except (bx.EndpointConnectionError, bx.ConnectTimeoutError) as exc:  # never sent
            raise StoreError(f"{what}: {exc}", retryable=True) from exc
        except (bx.NoCredentialsError, bx.PartialCredentialsError, bx.NoRegionError) as exc:
            raise StoreError(f"{what}: {exc}") from exc
        except bx.ParamValidationError as exc:
            raise ValidationError(f"{what}: {exc}") from exc
        except Exception as exc:  # no answer: the connection dropped, a timeout
            if write:
                raise WriteOutcomeUnknownError(f"{what}: no answer: {exc!r}") from exc
            raise StoreError(f"{what}: {exc!r}", retryable=True) from exc

    async def read(self, method: str, **kwargs: Any) -> dict[str, Any]:
        return await retry(lambda: self._send(method, False, kwargs), self._reads)

    async def write(self, method: str, **kwargs: Any) -> dict[str, Any]:
        """Sent again only after a throttling refusal; ``WriteOutcomeUnknownError`` when the
        request may have been applied."""
        return await retry(lambda: self._send(method, True, kwargs), self._writes)
