"""Bearer-token authentication (contract §12.2), free of any web framework.

:func:`build_authenticator` turns ``Settings.auth`` into a :class:`BearerAuthenticator` over
a JWKS (:class:`JwksSource`) or the HS256 secret (:class:`StaticKeys`); the Manager's guard
(``fetcher.manager.auth``) calls its ``authenticate(request)``.
"""

from __future__ import annotations

from fetcher.adapters.auth.authenticator import (
    UNAUTHORIZED_MESSAGE,
    BearerAuthenticator,
    KeySource,
    accepted_algorithms,
    bearer_credential,
)
from fetcher.adapters.auth.claims import InvalidToken, principal_from_claims
from fetcher.adapters.auth.jwks import JwksSource, StaticKeys
from fetcher.adapters.auth.keys import KeyRing, parse_jwks
from fetcher.adapters.auth.verifier import MAX_TOKEN_BYTES, TokenVerifier
from fetcher.settings import AuthSettings

__all__ = [
    "MAX_TOKEN_BYTES",
    "UNAUTHORIZED_MESSAGE",
    "BearerAuthenticator",
    "InvalidToken",
    "JwksSource",
    "KeyRing",
    "KeySource",
    "StaticKeys",
    "TokenVerifier",
    "bearer_credential",
    "build_authenticator",
    "parse_jwks",
    "principal_from_claims",
]


def build_authenticator(auth: AuthSettings, *, multi_tenant: bool) -> BearerAuthenticator:
    """The authenticator of ``AUTH_MODE=jwt`` (``auth.enabled``); the JWKS is not fetched
    until :meth:`BearerAuthenticator.start` runs on the event loop."""
    keys: KeySource
    if auth.jwks_url is not None:
        keys = JwksSource(auth.jwks_url, refresh_seconds=auth.jwks_refresh_seconds)
    elif auth.jwt_secret:
        keys = StaticKeys(KeyRing.secret(auth.jwt_secret))
    else:  # the settings refuse this (§9.3); never verify with an empty key
        raise ValueError("AUTH_MODE=jwt needs AUTH_JWKS_URL or AUTH_JWT_SECRET")
    verifier = TokenVerifier(
        issuer=auth.issuer,
        audience=auth.audience,
        leeway=auth.leeway_seconds,
        algorithms=accepted_algorithms(jwks=auth.jwks_url is not None),
    )
    return BearerAuthenticator(
        verifier, keys, multi_tenant=multi_tenant, tenant_claim=auth.tenant_claim
    )
