"""Bearer tokens: static ones from the auth configuration, and signed ones the OAuth2
client-credentials exchange (``POST /v1/oauth/tokens``) issues.

An issued token is ``aioi1.<payload>.<mac>``: the principal and the expiry, signed with
HMAC-SHA256 under a key derived from the signing key and the principal's secret. The
server keeps no token table, so tokens survive a restart when the configuration names
the signing key, and changing a principal's secret revokes every token issued to it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

from aiohttp import web

from aioiceberg.server.auth import ISSUED_TOKEN_PREFIX, AuthConfig, Principal
from aioiceberg.server.request_parsing import request_form
from aioiceberg.server.state import served

__all__ = [
    "TOKEN_PATH",
    "TokenRejected",
    "issue_token",
    "oauth_routes",
    "principal_for_token",
    "token_endpoint",
]

_ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


class TokenRejected(Exception):
    """A bearer token that names no principal: unknown, forged, expired or revoked."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _principal_key(config: AuthConfig, principal: Principal) -> bytes:
    material = b"\0".join(
        [b"aioiceberg-principal", principal.name.encode(), (principal.secret or "").encode()]
    )
    return hmac.new(config.signing_key, material, hashlib.sha256).digest()


def _mac(config: AuthConfig, principal: Principal, payload: str) -> str:
    return _b64(hmac.new(_principal_key(config, principal), payload.encode(), hashlib.sha256).digest())


def issue_token(config: AuthConfig, principal: Principal, now: float | None = None) -> tuple[str, int]:
    """A signed token for ``principal`` and its lifetime in seconds."""
    issued = int(time.time() if now is None else now)
    expires = issued + config.token_ttl_s
    payload = _b64(json.dumps({"sub": principal.name, "exp": expires}, separators=(",", ":")).encode())
    return f"{ISSUED_TOKEN_PREFIX}{payload}.{_mac(config, principal, payload)}", config.token_ttl_s


def principal_for_token(config: AuthConfig, token: str, now: float | None = None) -> Principal:
    """The principal ``token`` stands for (raises :class:`TokenRejected`)."""
    if token.startswith(ISSUED_TOKEN_PREFIX):
        return _signed_principal(config, token, time.time() if now is None else now)
    # Compare digests, not the tokens: equal lengths, and every token is compared.
    given = hashlib.sha256(token.encode()).digest()
    found: Principal | None = None
    for principal in config.principals.values():
        for known in principal.tokens:
            if hmac.compare_digest(given, hashlib.sha256(known.encode()).digest()):
                found = principal
    if found is None:
        raise TokenRejected("the bearer token is not valid")
    return found


def _signed_principal(config: AuthConfig, token: str, now: float) -> Principal:
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRejected("the bearer token is malformed")
    _, payload, mac = parts
    try:
        claims = json.loads(_unb64(payload))
        name, expires = claims["sub"], claims["exp"]
    except (ValueError, binascii.Error, KeyError, TypeError):
        raise TokenRejected("the bearer token is malformed") from None
    principal = config.principals.get(name) if isinstance(name, str) else None
    if principal is None or not hmac.compare_digest(mac, _mac(config, principal, payload)):
        raise TokenRejected("the bearer token is not valid (forged, revoked, or signed by another server)")
    if not isinstance(expires, int) or now >= expires:
        raise TokenRejected("the bearer token has expired; fetch a new one from /v1/oauth/tokens")
    return principal


def _client_secret_matches(principal: Principal | None, secret: str) -> bool:
    expected = principal.secret if principal is not None and principal.secret else ""
    # Always compare (against a dummy for an unknown client) so timing does not tell which.
    same = hmac.compare_digest(
        hashlib.sha256(secret.encode()).digest(), hashlib.sha256((expected or "\0").encode()).digest()
    )
    return same and bool(expected)


def _oauth_error(status: int, error: str, description: str) -> web.Response:
    body = {"error": error, "error_description": description}
    headers = {"Cache-Control": "no-store"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="aioiceberg"'
    return web.json_response(body, status=status, headers=headers)


def _basic_credentials(request: web.Request) -> tuple[str, str] | None:
    """``Authorization: Basic`` client credentials (RFC 6749 2.3.1), when sent."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        client_id, colon, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (ValueError, binascii.Error):
        return None
    return (client_id, secret) if colon else None


def _client(request: web.Request, form: Any, config: AuthConfig) -> Principal | web.Response:
    """The principal whose client credentials the request carries (Basic header or form)."""
    basic = _basic_credentials(request)
    client_id, secret = basic if basic is not None else (form.get("client_id"), form.get("client_secret"))
    if not isinstance(client_id, str) or not isinstance(secret, str) or not client_id:
        return _oauth_error(
            401, "invalid_client", "send client_id and client_secret (credential=CLIENT_ID:SECRET)"
        )
    principal = config.principals.get(client_id)
    if not _client_secret_matches(principal, secret) or principal is None:
        return _oauth_error(401, "invalid_client", "unknown client or wrong secret")
    return principal


def _exchanged(form: Any, config: AuthConfig) -> Principal | web.Response:
    """A still-valid issued token for a fresh one (how the Java client refreshes, RFC 8693);
    static tokens are not exchanged: they do not expire, and must not become ones that do."""
    subject = form.get("subject_token")
    if not isinstance(subject, str) or not subject.startswith(ISSUED_TOKEN_PREFIX):
        return _oauth_error(400, "invalid_request", "subject_token must be a token this server issued")
    try:
        return principal_for_token(config, subject)
    except TokenRejected as exc:
        return _oauth_error(400, "invalid_grant", str(exc))


async def token_endpoint(request: web.Request) -> web.Response:
    """``POST /v1/oauth/tokens``: client credentials in, a signed bearer token out."""
    config = served(request).auth
    if config is None:
        raise web.HTTPNotFound()
    if request.content_type != "application/x-www-form-urlencoded":
        return _oauth_error(400, "invalid_request", "the body must be application/x-www-form-urlencoded")
    form: Any = await request_form(request)
    grant_type = form.get("grant_type")
    if grant_type == "client_credentials":
        found = _client(request, form, config)
    elif grant_type == _TOKEN_EXCHANGE:
        found = _exchanged(form, config)
    else:
        return _oauth_error(
            400,
            "unsupported_grant_type",
            f"grant_type {grant_type!r}: client_credentials or token exchange only",
        )
    if isinstance(found, web.Response):
        return found
    principal = found
    token, expires_in = issue_token(config, principal)
    body: dict[str, Any] = {
        "access_token": token,
        "token_type": "bearer",
        "expires_in": expires_in,
        "issued_token_type": _ACCESS_TOKEN_TYPE,
    }
    scope = form.get("scope")
    if isinstance(scope, str) and scope:
        body["scope"] = scope
    return web.json_response(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})


#: the one route a client reaches without a token
TOKEN_PATH = "/v1/oauth/tokens"


def oauth_routes() -> list[web.RouteDef]:
    return [web.post(TOKEN_PATH, token_endpoint)]
