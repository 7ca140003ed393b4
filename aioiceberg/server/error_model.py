"""Our typed errors as REST error responses: ``{"error": {"message", "type", "code"}}``.

Clients choose their exception by status code and the ``type`` names Java's exception, so
the pair must match what Java and PyIceberg expect: 409 on a commit is a conflict the
client rebases on, 500 on a commit means the outcome is unknown. No answer carries a stack
trace or an operating system's error text (with the server's paths in it).
"""

from __future__ import annotations

import json
import logging
import secrets

from aiohttp import web

from aioiceberg.errors import (
    AlreadyExistsError,
    CommitError,
    CommitPointMismatchError,
    CommitStateUnknownError,
    ExpressionError,
    LocationNotAllowedError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    NotFoundError,
    ReadOnlyTableError,
    StoreError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
    ViewNotFoundError,
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
    (ViewNotFoundError, 404, "NoSuchViewException"),
    (NotFoundError, 404, "NotFoundException"),
    (AlreadyExistsError, 409, "AlreadyExistsException"),
    (CommitStateUnknownError, 500, "CommitStateUnknownException"),
    (CommitError, 409, "CommitFailedException"),
    (ReadOnlyTableError, 403, "ForbiddenException"),
    (LocationNotAllowedError, 403, "ForbiddenException"),
    (CommitPointMismatchError, 403, "ForbiddenException"),
    (UnsupportedError, 501, "UnsupportedOperationException"),
    (ValidationError, 400, "BadRequestException"),
    (ExpressionError, 400, "BadRequestException"),
)


def rest_error_for(exc: BaseException, where: str = "") -> RestError:
    """The REST answer for an exception raised while serving ``where`` (``METHOD /path``).

    Typed errors keep their message: it names what the client asked about. Anything else, a
    store failure, or a message carrying an operating system's error text (which names the
    server's own paths) answers with an incident id instead, logged here with the traceback.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]  # a task group's one failure is that failure
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, RecursionError):  # a body nested deeper than its decoders recurse
        return bad_request("the request is nested too deeply")
    message = str(exc) or type(exc).__name__
    for kind, status, name in _MAPPING:
        if isinstance(exc, kind):
            if _carries_os_text(exc, message):
                return _incident(status, name, exc, where)
            return RestError(status, name, message)
    if isinstance(exc, StoreError) and (exc.retryable or exc.throttled):
        return _incident(503, "ServiceUnavailableException", exc, where, "storage is busy; retry later")
    return _incident(500, "ServiceFailureException", exc, where)


def _carries_os_text(exc: BaseException, message: str) -> bool:
    """Whether ``message`` repeats an ``OSError`` it was made from (absolute paths, errno texts)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError):
            texts = (str(cause), *(str(f) for f in (cause.filename, cause.filename2) if f))
            if any(t and t in message for t in texts):
                return True
        cause = cause.__cause__ or cause.__context__
    return False


def _incident(
    status: int, kind: str, exc: BaseException, where: str, what: str = "internal server error"
) -> RestError:
    """An answer that shows the client nothing of the failure but an id to quote."""
    incident = secrets.token_hex(6)
    level = logging.WARNING if status == 503 else logging.ERROR
    # %r: a client's path cannot forge log lines
    log.log(level, "incident %s: %r failed", incident, where or "a request", exc_info=exc)
    return RestError(status, kind, f"{what} (incident {incident}; the server's log has the details)")


def error_response(error: RestError) -> web.Response:
    body = {"error": {"message": error.message, "type": error.kind, "code": error.status}}
    return web.Response(status=error.status, body=json.dumps(body), content_type="application/json")
