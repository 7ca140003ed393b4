"""How the REST catalog client proves who it is: a fixed bearer token, the OAuth2
client-credentials exchange of the Iceberg REST spec, or AWS SigV4 (Glue's and S3 Tables'
Iceberg endpoints).

Each scheme gives the headers for one request (``headers``) and says, after a 401, whether
sending it again may help (``renew``: only a token it could replace). Secrets stay in the
objects here: never in a repr, an error message or a log line of ours.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aioiceberg.errors import NotAuthorizedError, StoreError, UnsupportedError, ValidationError
from aioiceberg.retrying import Backoff, retry

if TYPE_CHECKING:
    import aiohttp

__all__ = ["BearerToken", "ClientCredentials", "NoAuth", "RestAuth", "SigV4"]

_TOKENS = Backoff("OAuth2 token request", base_delay_s=0.1, max_delay_s=2.0, max_attempts=4)
REFRESH_AT = 0.85
"""A token is renewed once this share of its lifetime (``expires_in``) has passed, and at
least ``EXPIRY_SLACK_S`` before its end: expiry kept in whole seconds (a JWT's ``exp``)
can come up to a second before ``expires_in`` says, and a request takes time to arrive."""
EXPIRY_SLACK_S = 2.0


class RestAuth:
    """No authentication: the base every scheme extends."""

    async def headers(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        sent: Mapping[str, str],
    ) -> dict[str, str]:
        """Headers to add to a request for ``method url`` with ``body`` and the headers
        ``sent`` anyway (what SigV4 signs); ``url`` carries the query exactly as sent."""
        return {}

    async def renew(self, session: aiohttp.ClientSession, used: Mapping[str, str]) -> bool:
        """After a 401 to a request that carried ``used``: True when new credentials are in
        place, so sending the request once more may succeed."""
        return False


class NoAuth(RestAuth):
    def __repr__(self) -> str:
        return "NoAuth()"


class BearerToken(RestAuth):
    """A token given once (``token=``): sent as is, never renewed."""

    def __init__(self, token: str) -> None:
        self._authorization = f"Bearer {token}"

    def __repr__(self) -> str:
        return "BearerToken(***)"

    async def headers(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        sent: Mapping[str, str],
    ) -> dict[str, str]:
        return {"Authorization": self._authorization}


@dataclass(frozen=True, slots=True)
class _Token:
    access_token: str
    renew_at: float | None  # a time.monotonic() value; None: the server gave no expiry

    def stale(self, now: float) -> bool:
        return self.renew_at is not None and now >= self.renew_at


class ClientCredentials(RestAuth):
    """OAuth2 client credentials (``credential=CLIENT_ID:SECRET``), exchanged at the token
    endpoint for an access token that is sent as a bearer token.

    The token is renewed before it expires (at ``REFRESH_AT`` of ``expires_in``) and once
    after a 401. One request per loop fetches a token while the others wait for it.
    """

    def __init__(self, token_url: str, client_id: str, secret: str, scope: str) -> None:
        self.token_url = token_url
        self.client_id = client_id
        self._secret = secret
        self.scope = scope
        self._token: _Token | None = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def parse(cls, credential: str, token_url: str, scope: str) -> ClientCredentials:
        client_id, sep, secret = credential.partition(":")
        if not sep or not client_id or not secret:
            raise ValidationError("credential= must be CLIENT_ID:SECRET (both parts non-empty)")
        return cls(token_url, client_id, secret, scope)

    def __repr__(self) -> str:
        return f"ClientCredentials(client_id={self.client_id!r}, token_url={self.token_url!r}, secret=***)"

    async def headers(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        sent: Mapping[str, str],
    ) -> dict[str, str]:
        token = self._token
        if token is None or token.stale(time.monotonic()):
            token = await self._replaced(session, token)
        return {"Authorization": f"Bearer {token.access_token}"}

    async def renew(self, session: aiohttp.ClientSession, used: Mapping[str, str]) -> bool:
        current = self._token
        if current is not None and used.get("Authorization") != f"Bearer {current.access_token}":
            return True  # renewed meanwhile: the current token has not been refused yet
        await self._replaced(session, current)
        return True

    async def _replaced(self, session: aiohttp.ClientSession, seen: _Token | None) -> _Token:
        """A token other than ``seen`` that is not stale: one another task fetched while
        this one waited, else a new one."""
        lock = self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            current = self._token
            if current is not None and current is not seen and not current.stale(time.monotonic()):
                return current
            self._token = await retry(lambda: self._fetch(session), _TOKENS)
            return self._token

    async def _fetch(self, session: aiohttp.ClientSession) -> _Token:
        import aiohttp  # aiohttp: optional (the rest and server extras)

        form = urlencode(
            {
                "grant_type": "client_credentials",
                "client_id": self.client_id,
                "client_secret": self._secret,
                "scope": self.scope,
            }
        ).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        what = f"OAuth2 token endpoint {self.token_url} (client {self.client_id!r})"
        started = time.monotonic()
        try:
            async with session.post(self.token_url, data=form, headers=headers) as resp:
                status, data = resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            # asking again for a token changes nothing on the server
            raise StoreError(
                f"{what}: {type(exc).__name__}: {self._scrub(str(exc))}", retryable=True
            ) from exc
        if status >= 500 or status == 429:
            raise StoreError(f"{what}: HTTP {status}", retryable=True, throttled=status in (429, 503))
        reply = self._json(data)
        if status != 200:
            code = str(reply.get("error") or "no error code") if reply else "no error code"
            description = str(reply.get("error_description") or "") if reply else ""
            detail = f": {self._scrub(description)[:300]}" if description else ""
            raise NotAuthorizedError(f"{what} refused the credential: {code} (HTTP {status}){detail}")
        access_token = reply.get("access_token") if reply else None
        if not isinstance(access_token, str) or not access_token:
            raise NotAuthorizedError(f"{what}: the answer has no access_token")
        token_type = reply.get("token_type") if reply else None
        if isinstance(token_type, str) and token_type.lower() != "bearer":
            raise UnsupportedError(f"{what}: token_type {token_type!r} is not supported (only bearer)")
        expires_in = reply.get("expires_in") if reply else None
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool) and expires_in > 0:
            lifetime = max(0.0, min(REFRESH_AT * expires_in, expires_in - EXPIRY_SLACK_S))
            return _Token(access_token, started + lifetime)
        return _Token(access_token, None)

    @staticmethod
    def _json(data: bytes) -> dict[str, Any] | None:
        try:
            reply = json.loads(data)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    def _scrub(self, text: str) -> str:
        """``text`` from elsewhere (a server's description, a transport error) without our secret."""
        return text.replace(self._secret, "***")


_AWS_HOST = re.compile(
    r"^[a-z0-9-]+(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.(?:api\.)?amazonaws\.com(?:\.cn)?$"
)


class SigV4(RestAuth):
    """AWS Signature V4 on every request, with botocore's ``SigV4Auth`` and credentials from
    botocore's chain (environment, profiles, SSO, web identity, containers, instance roles).

    The credential chain is resolved once, on first use (aiobotocore: it does its I/O without
    blocking the loop), and refreshed by aiobotocore before temporary credentials expire. The
    payload's SHA-256 travels in ``x-amz-content-sha256`` and is signed with the rest.
    """

    def __init__(self, host: str, *, region: str | None = None, service: str = "glue") -> None:
        self.host = host
        self.service = service
        self._region = region
        self._credentials: Any = None
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"SigV4(service={self.service!r}, region={self._region!r})"

    async def _resolved(self) -> tuple[Any, str]:
        if self._credentials is not None and self._region is not None:
            return self._credentials, self._region
        lock = self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if self._credentials is None or self._region is None:
                self._credentials, self._region = await self._resolve()
            return self._credentials, self._region

    async def _resolve(self) -> tuple[Any, str]:
        try:
            # botocore: optional (the s3 extra); aiobotocore: optional (the s3 extra)
            import botocore.exceptions
            from aiobotocore.session import AioSession
        except ImportError as exc:
            raise UnsupportedError(
                "SigV4 signing of REST requests needs aiobotocore: pip install 'aioiceberg[s3]'"
            ) from exc
        try:
            session = AioSession()
            credentials = await session.get_credentials()
            region = self._region or _host_region(self.host) or os.environ.get("AWS_REGION")
            region = region or session.get_config_variable("region")
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreError(f"SigV4 for {self.host}: cannot resolve AWS credentials: {exc}") from exc
        if credentials is None:
            raise NotAuthorizedError(
                f"SigV4 for {self.host}: no AWS credentials found (AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity or an instance role)"
            )
        if not region:
            raise ValidationError(
                f"SigV4 for {self.host}: no signing region: give signing-region= (or AWS_REGION)"
            )
        return credentials, str(region)

    async def headers(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        body: bytes | None,
        sent: Mapping[str, str],
    ) -> dict[str, str]:
        # botocore: optional (the s3 extra)
        import botocore.exceptions
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials, region = await self._resolved()
        try:
            frozen = await credentials.get_frozen_credentials()  # refreshes when due
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreError(f"SigV4 for {self.host}: cannot refresh AWS credentials: {exc}") from exc
        payload = body or b""
        headers = {**sent, "x-amz-content-sha256": hashlib.sha256(payload).hexdigest()}
        request = AWSRequest(method=method, url=url, data=payload, headers=headers)
        SigV4Auth(frozen, self.service, region).add_auth(request)
        return dict(request.headers.items())


def _host_region(host: str) -> str | None:
    """The region in an AWS endpoint's host name (``glue.us-east-1.amazonaws.com``)."""
    m = _AWS_HOST.match(host.lower())
    return m.group(1) if m else None
