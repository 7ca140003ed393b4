"""Our typed errors as REST error responses: ``{"error": {"message", "type", "code"}}``.

Clients choose their exception by status code and the ``type`` names Java's exception, so
the pair must match what Java and PyIceberg expect: 409 on a commit is a conflict the
client rebases on, 500 on a commit means the outcome is unknown.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web

from aioiceberg.errors import (
    AlreadyExistsError,
    CommitError,
    CommitPointMismatchError,
    CommitStateUnknownError,
    ExpressionError,
    IcebergError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    NotFoundError,
    ReadOnlyTableError,
    StoreError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)

__all__ = ["RestError", "bad_request", "error_response", "rest_error_for"]

log = logging.getLogger("aioiceberg.server")


class RestError(Exception):
    """An answer other than success, with the status and the Java exception name clients map."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


def bad_request(message: str) -> RestError:
    return RestError(400, "BadRequestException", message)


# First match wins: subclasses before their parents.
_MAPPING: tuple[tuple[type[BaseException], int, str], ...] = (
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (TableNotFoundError, 404, "NoSuchTableException"),
    (NamespaceNotFoundError, 404, "NoSuchNamespaceException"),
    (NotFoundError, 404, "NotFoundException"),
    (AlreadyExistsError, 409, "AlreadyExistsException"),
    (CommitStateUnknownError, 500, "CommitStateUnknownException"),
    (CommitError, 409, "CommitFailedException"),
    (ReadOnlyTableError, 403, "ForbiddenException"),
    (CommitPointMismatchError, 403, "ForbiddenException"),
    (UnsupportedError, 501, "UnsupportedOperationException"),
    (ValidationError, 400, "BadRequestException"),
    (ExpressionError, 400, "BadRequestException"),
)


def rest_error_for(exc: BaseException) -> RestError:
    """The REST answer for an exception raised while serving a request."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a task group's one failure is that failure
    if isinstance(exc, RestError):
        return exc
    message = str(exc) or type(exc).__name__
    for kind, status, name in _MAPPING:
        if isinstance(exc, kind):
            return RestError(status, name, message)
    if isinstance(exc, StoreError) and (exc.retryable or exc.throttled):
        return RestError(503, "ServiceUnavailableException", message)
    if not isinstance(exc, IcebergError):
        log.error("unexpected error serving a request", exc_info=exc)
    return RestError(500, "ServiceFailureException", message)


def error_response(error: RestError) -> web.Response:
    body = {"error": {"message": error.message, "type": error.kind, "code": error.status}}
    return web.Response(status=error.status, body=json.dumps(body), content_type="application/json")
