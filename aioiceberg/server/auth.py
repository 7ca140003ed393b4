"""Who may use ``aioiceberg serve``: principals, their secrets and static tokens, their grants.

Read from a JSON file (``serve --auth-file``, or ``AIOICEBERG_SERVE_AUTH_FILE``) and from the
environment, never from command-line values: any user of the machine can read those in the
process list. The file::

    {"principals": {
        "etl": {"secret": "...", "tokens": ["a-static-bearer-token"], "grants": {"*": "write"}},
        "analyst": {"secret": "...", "grants": {"sales": "read", "sales.eu": "write"}}},
     "token-ttl-seconds": 3600,
     "signing-key": "..."}

A grant on namespace ``a`` covers ``a.b`` and below; ``*`` covers every namespace; the most
specific grant wins, so ``{"*": "write", "hr": "none"}`` hides ``hr``. Levels are ``none``,
``read`` (GET / HEAD) and ``write`` (everything). A level holding ``.`` is named by joining
the levels with U+001F instead of ``.``.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aioiceberg.errors import ValidationError

__all__ = [
    "AUTH_FILE_ENV",
    "CREDENTIAL_ENV",
    "ISSUED_TOKEN_PREFIX",
    "SIGNING_KEY_ENV",
    "TOKEN_ENV",
    "Access",
    "AuthConfig",
    "AuthConfigError",
    "Principal",
    "load_auth",
]

#: the auth file's path, when ``--auth-file`` is not given
AUTH_FILE_ENV = "AIOICEBERG_SERVE_AUTH_FILE"
#: one static bearer token for a principal named ``token`` with write on everything
TOKEN_ENV = "AIOICEBERG_SERVE_TOKEN"
#: ``client_id:secret`` for the OAuth2 exchange, a principal with write on everything
CREDENTIAL_ENV = "AIOICEBERG_SERVE_CREDENTIAL"
#: the key issued tokens are signed with; with one, tokens survive a restart
SIGNING_KEY_ENV = "AIOICEBERG_SERVE_SIGNING_KEY"

#: secrets, static tokens and signing keys shorter than this are refused as guessable
MIN_SECRET_CHARS = 16
DEFAULT_TOKEN_TTL_S = 3600
#: how the tokens the server issues begin (see ``server/tokens.py``)
ISSUED_TOKEN_PREFIX = "aioi1."

_FILE_KEYS = frozenset({"principals", "token-ttl-seconds", "signing-key"})
_PRINCIPAL_KEYS = frozenset({"secret", "tokens", "grants"})
_LEVEL_SEPARATOR = "\x1f"


class AuthConfigError(ValidationError):
    """The auth file or environment cannot be used; the message names the file and the fault."""


class Access(enum.IntEnum):
    NONE = 0
    READ = 1
    WRITE = 2


@dataclass(frozen=True, slots=True)
class Principal:
    """A client identity: a secret for the OAuth2 exchange and/or static bearer tokens."""

    name: str
    secret: str | None = None
    tokens: tuple[str, ...] = ()
    #: namespace levels -> access; ``()`` is every namespace
    grants: Mapping[tuple[str, ...], Access] = field(default_factory=dict)

    def access(self, namespace: Sequence[str]) -> Access:
        """The most specific grant covering ``namespace`` (none when no grant does)."""
        levels = tuple(namespace)
        for depth in range(len(levels), -1, -1):
            found = self.grants.get(levels[:depth])
            if found is not None:
                return found
        return Access.NONE

    def sees(self, namespace: Sequence[str]) -> bool:
        """Whether a listing shows ``namespace``: readable, or on the way to a readable one."""
        levels = tuple(namespace)
        if self.access(levels) >= Access.READ:
            return True
        return any(
            len(key) > len(levels) and key[: len(levels)] == levels and self.access(key) >= Access.READ
            for key in self.grants
        )


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Every principal of one server, the lifetime of the tokens it issues and their key."""

    principals: Mapping[str, Principal]
    token_ttl_s: int = DEFAULT_TOKEN_TTL_S
    signing_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    #: whether the key came from the configuration (tokens outlive the process) or is random
    persistent_key: bool = False
    #: worth telling whoever starts the server (a file other users may read, say)
    warnings: tuple[str, ...] = ()


def load_auth(path: str | None, environ: Mapping[str, str]) -> AuthConfig | None:
    """The auth configuration from ``path`` (else ``AIOICEBERG_SERVE_AUTH_FILE``) and the
    environment's ``AIOICEBERG_SERVE_*`` values; ``None`` when none of them is set."""
    path = path or environ.get(AUTH_FILE_ENV) or None
    principals: dict[str, Principal] = {}
    ttl = DEFAULT_TOKEN_TTL_S
    key: str | None = None
    warnings: tuple[str, ...] = ()
    if path is not None:
        principals, ttl, key, warnings = _read_file(path)
    where = "the environment"
    token = environ.get(TOKEN_ENV)
    if token:
        _check_secret(token, f"{where}: {TOKEN_ENV}")
        _add(principals, Principal("token", None, (token,), {(): Access.WRITE}), where)
    credential = environ.get(CREDENTIAL_ENV)
    if credential:
        client_id, colon, secret = credential.partition(":")
        if not colon or not client_id:
            raise AuthConfigError(f"{where}: {CREDENTIAL_ENV} must be CLIENT_ID:SECRET")
        _check_secret(secret, f"{where}: the secret in {CREDENTIAL_ENV}")
        _add(principals, Principal(client_id, secret, (), {(): Access.WRITE}), where)
    env_key = environ.get(SIGNING_KEY_ENV)
    if env_key:
        _check_secret(env_key, f"{where}: {SIGNING_KEY_ENV}")
        key = env_key
    if not principals:
        if path is not None:
            raise AuthConfigError(f"auth file {path}: no principals")
        return None
    _check_unique_tokens(principals, path or where)
    if key is None:
        return AuthConfig(principals, ttl, warnings=warnings)
    return AuthConfig(principals, ttl, key.encode(), persistent_key=True, warnings=warnings)


def _add(principals: dict[str, Principal], principal: Principal, where: str) -> None:
    if principal.name in principals:
        raise AuthConfigError(f"{where}: principal {principal.name!r} is also in the auth file")
    principals[principal.name] = principal


def _check_secret(value: str, what: str) -> None:
    if len(value) < MIN_SECRET_CHARS:
        raise AuthConfigError(f"{what} is shorter than {MIN_SECRET_CHARS} characters")


def _check_unique_tokens(principals: Mapping[str, Principal], where: str) -> None:
    owners: dict[str, str] = {}
    for principal in principals.values():
        for token in principal.tokens:
            other = owners.setdefault(token, principal.name)
            if other != principal.name:
                raise AuthConfigError(f"{where}: principals {other!r} and {principal.name!r} share a token")


def _read_file(path: str) -> tuple[dict[str, Principal], int, str | None, tuple[str, ...]]:
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            data = f.read()
    except OSError as exc:
        raise AuthConfigError(f"auth file {path}: cannot be read ({exc.strerror or exc})") from None
    if os.name == "posix" and mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise AuthConfigError(f"auth file {path}: other users may write it; chmod go-w {path}")
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise AuthConfigError(f"auth file {path}: not valid JSON ({exc})") from None
    principals, ttl, key = _parse(raw, f"auth file {path}")
    # A warning, not a refusal: mounted secrets are often 0644 in a container of one user.
    warnings: tuple[str, ...] = ()
    if os.name == "posix" and mode & (stat.S_IRGRP | stat.S_IROTH):
        warnings = (f"auth file {path} is readable by other users; chmod go-r {path}",)
    return principals, ttl, key, warnings


def _parse(raw: Any, where: str) -> tuple[dict[str, Principal], int, str | None]:
    if not isinstance(raw, dict):
        raise AuthConfigError(f"{where}: must hold a JSON object, not {type(raw).__name__}")
    unknown = sorted(set(raw) - _FILE_KEYS)
    if unknown:
        raise AuthConfigError(f"{where}: unknown keys {unknown} (known: {sorted(_FILE_KEYS)})")
    ttl = raw.get("token-ttl-seconds", DEFAULT_TOKEN_TTL_S)
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
        raise AuthConfigError(f"{where}: token-ttl-seconds must be a positive whole number, not {ttl!r}")
    key = raw.get("signing-key")
    if key is not None:
        if not isinstance(key, str):
            raise AuthConfigError(f"{where}: signing-key must be a string")
        _check_secret(key, f"{where}: signing-key")
    entries = raw.get("principals")
    if not isinstance(entries, dict) or not entries:
        raise AuthConfigError(f"{where}: 'principals' must be a non-empty object of name -> principal")
    principals = {name: _principal(name, entry, where) for name, entry in entries.items()}
    return principals, ttl, key


def _principal(name: str, entry: Any, where: str) -> Principal:
    what = f"{where}: principal {name!r}"
    if not name or ":" in name:
        raise AuthConfigError(f"{what}: a name must be non-empty and hold no ':'")
    if not isinstance(entry, dict):
        raise AuthConfigError(f"{what} must be an object with secret, tokens, grants")
    unknown = sorted(set(entry) - _PRINCIPAL_KEYS)
    if unknown:
        raise AuthConfigError(f"{what}: unknown keys {unknown} (known: {sorted(_PRINCIPAL_KEYS)})")
    secret = entry.get("secret")
    if secret is not None:
        if not isinstance(secret, str):
            raise AuthConfigError(f"{what}: secret must be a string")
        _check_secret(secret, f"{what}: secret")
    tokens = entry.get("tokens", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise AuthConfigError(f"{what}: tokens must be a list of strings")
    for token in tokens:
        _check_secret(token, f"{what}: a token")
        if token.startswith(ISSUED_TOKEN_PREFIX):
            raise AuthConfigError(f"{what}: a static token must not start with {ISSUED_TOKEN_PREFIX!r}")
    if secret is None and not tokens:
        raise AuthConfigError(f"{what}: has neither a secret nor tokens, so it cannot sign in")
    grants_raw = entry.get("grants", {})
    if not isinstance(grants_raw, dict):
        raise AuthConfigError(f"{what}: grants must be an object of namespace -> read|write|none")
    grants: dict[tuple[str, ...], Access] = {}
    for namespace, level in grants_raw.items():
        try:
            access = Access[level.upper()] if isinstance(level, str) else None
        except KeyError:
            access = None
        if access is None:
            raise AuthConfigError(f"{what}: grant {namespace!r}: {level!r} is not read, write or none")
        levels = _grant_levels(namespace, what)
        if levels in grants:
            raise AuthConfigError(f"{what}: grant {namespace!r} is given twice")
        grants[levels] = access
    return Principal(name, secret, tuple(tokens), grants)


def _grant_levels(namespace: str, what: str) -> tuple[str, ...]:
    if namespace == "*":
        return ()
    separator = _LEVEL_SEPARATOR if _LEVEL_SEPARATOR in namespace else "."
    levels = tuple(namespace.split(separator))
    if not all(levels):
        raise AuthConfigError(f"{what}: grant {namespace!r} has an empty namespace level")
    return levels
