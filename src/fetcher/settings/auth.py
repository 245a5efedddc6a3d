"""The authentication settings of §12.1/§12.2 (``AUTH_*``), and the checks their values pass.

Read by :mod:`fetcher.settings.environment` with the rest of the environment; a value that fails
a check refuses the start (§9.3).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

__all__ = ["AuthMode", "AuthSettings", "hs256_key", "is_loopback", "jwks_url_ok"]


class AuthMode(StrEnum):
    NONE = "none"
    JWT = "jwt"


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """§12.1/§12.2: how the Manager (and embedded mode) verifies bearer tokens.

    With ``mode`` ``jwt`` exactly one of ``jwks_url`` and ``jwt_secret`` is set; ``jwt_secret``
    holds the decoded HS256 key bytes (§12.2), never shown by ``repr``. The Worker reads none
    of these (it verifies no tokens).
    """

    mode: AuthMode = AuthMode.NONE
    issuer: str = ""
    audience: str = "fetcher"
    jwks_url: str | None = None
    jwt_secret: bytes | None = field(default=None, repr=False)
    jwks_refresh_seconds: int = 300
    leeway_seconds: int = 30
    tenant_claim: str = "tenantId"

    @property
    def enabled(self) -> bool:
        return self.mode is AuthMode.JWT


def jwks_url_ok(url: str) -> bool:
    """§9.1 ``AUTH_JWKS_URL``: ``https://…``, ``http://`` to a loopback host, or ``file:///…``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme == "file":
        return not parts.netloc and parts.path.startswith("/")
    if scheme == "https":
        return bool(host)
    return scheme == "http" and is_loopback(host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def hs256_key(text: str) -> bytes | None:
    """§9.1 ``AUTH_JWT_SECRET``: standard base64 of at least 32 bytes → the key bytes."""
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) >= 32 else None
