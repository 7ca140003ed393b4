"""How an AWS service other than S3 is reached: one resolution for DynamoDB, Glue and S3 Tables.

Each service takes its connection from, in order: its URI's own option, its storage options
(``<service>.endpoint``, ``<service>.region``, ``<service>.access-key-id``,
``<service>.secret-access-key``, ``<service>.session-token``, ``<service>.profile-name``),
then the ``s3.*`` credentials and profile (the region too, unless the service says
otherwise), then the standard AWS configuration, which the client applies to what is unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aioiceberg.io.s3_client import S3Options

__all__ = ["AwsConnection", "service_connection"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AwsConnection:
    """The connection part of a service's options; unset fields come from the AWS configuration."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile: str | None = None

    def client_options(self) -> S3Options:
        """The connection, in the form the runtime's client cache takes."""
        return S3Options(
            endpoint_url=self.endpoint_url,
            region=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
            session_token=self.session_token,
            profile=self.profile,
        )


def service_connection(
    service: str,
    storage_options: Mapping[str, Any] | None,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    profile: str | None = None,
) -> tuple[dict[str, str | None], S3Options]:
    """The connection fields of ``service`` (``endpoint``/``region``/``profile``: its URI's
    values, which win), and the ``s3.*`` options they fell back to. ``region`` is None when
    neither the URI nor ``<service>.region`` names one: each service picks its own default."""
    options = dict(storage_options or {})
    s3 = S3Options.from_storage_options(options)

    def own(key: str) -> str | None:
        value = options.get(f"{service}.{key}")
        return str(value) if value is not None and str(value) else None

    fields: dict[str, str | None] = {
        "endpoint_url": endpoint or own("endpoint"),
        "region": region or own("region"),
        "access_key_id": own("access-key-id") or s3.access_key_id,
        "secret_access_key": own("secret-access-key") or s3.secret_access_key,
        "session_token": own("session-token") or s3.session_token,
        "profile": profile or own("profile-name") or s3.profile,
    }
    return fields, s3
