"""What an AWS API error says: its code, HTTP status and message, read off a botocore
``ClientError`` (anything else, a transport error, has none)."""

from __future__ import annotations

__all__ = ["error_code", "error_message", "http_status"]


def _response(exc: BaseException) -> dict[str, object]:
    response = getattr(exc, "response", None)
    return response if isinstance(response, dict) else {}


def error_code(exc: BaseException) -> str:
    """The service's error code ("" when there was no answer)."""
    error = _response(exc).get("Error")
    return str(error.get("Code", "")) if isinstance(error, dict) else ""


def http_status(exc: BaseException) -> int:
    """The HTTP status of the answer (0 when there was none)."""
    meta = _response(exc).get("ResponseMetadata")
    return int(meta.get("HTTPStatusCode", 0) or 0) if isinstance(meta, dict) else 0


def error_message(exc: BaseException) -> str:
    error = _response(exc).get("Error")
    message = str(error.get("Message", "")) if isinstance(error, dict) else ""
    return message or str(exc)
