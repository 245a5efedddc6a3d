"""The bearer-token authenticator of ``AUTH_MODE=jwt`` (contract §12.1, §12.2).

``await authenticator.authenticate(request)`` reads the ``Authorization`` header of anything
with ``headers.get`` (a Starlette request; no web framework is imported here) and returns the
caller's :class:`Principal`, or raises the §2.2 error the guard answers with:

* ``401 FET-0010`` ``missing or invalid bearer token`` with ``WWW-Authenticate: Bearer
  realm="fetcher"``, plus ``, error="invalid_token"`` exactly when the header uses the
  ``Bearer`` scheme (any letter case) with a non-empty credential. The reason is logged at
  ``info``; the token never is.
* ``401 FET-0010`` with ``error="invalid_request"`` when the request carries more than one
  ``Authorization`` header: which one counts would otherwise depend on who reads it (we took
  the first, a gateway may check the last), so neither is used.
* ``503 FET-0003`` when the request carries a bearer token while no JWKS key set is loaded
  yet (a request without one still gets 401).

A token naming an unknown ``kid`` asks the key source to refetch (rate-limited there) and is
checked once more against the new set. Accepted tokens are remembered until their ``exp``
(:mod:`fetcher.adapters.auth.cache`), so a repeated token is not verified again.
"""

from __future__ import annotations

import logging
from collections.abc import Set
from typing import Protocol

from fetcher.adapters.auth.cache import VerifiedTokens
from fetcher.adapters.auth.claims import InvalidToken, principal_from_claims
from fetcher.adapters.auth.keys import JWKS_ALGORITHMS, SECRET_ALGORITHM, KeyRing
from fetcher.adapters.auth.verifier import TokenVerifier, UnknownKey
from fetcher.services.errors import ApiError
from fetcher.services.infrastructure import HeaderCarrier, RequestHeaders
from fetcher.services.principal import Principal

__all__ = [
    "UNAUTHORIZED_MESSAGE",
    "BearerAuthenticator",
    "KeySource",
    "bearer_credential",
]

log = logging.getLogger(__name__)

#: §12.2: the exact 401 message.
UNAUTHORIZED_MESSAGE = "missing or invalid bearer token"
_CHALLENGE = 'Bearer realm="fetcher"'
_UNAVAILABLE = "The service is temporarily unavailable. Please try again later."


def authorization_values(headers: RequestHeaders) -> list[str]:
    """Every ``Authorization`` header of a request, in order (a Starlette ``getlist`` or an
    httpx ``get_list``; an object with neither is read through ``get``: one value at most)."""
    many = getattr(headers, "getlist", None) or getattr(headers, "get_list", None)
    if callable(many):
        return [str(value) for value in many("authorization")]
    value = headers.get("authorization")
    return [] if value is None else [value]


class KeySource(Protocol):
    """Where the verification keys come from (``fetcher.adapters.auth.jwks``)."""

    @property
    def ring(self) -> KeyRing | None: ...
    def start(self) -> None: ...
    async def refetch_unknown(self) -> bool: ...
    async def check(self) -> None: ...
    async def aclose(self) -> None: ...


def bearer_credential(header: str | None) -> str | None:
    """The credential of a ``Bearer`` ``Authorization`` header (scheme in any case), or
    ``None`` for a missing header, another scheme or an empty credential."""
    if header is None:
        return None
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        return None
    return credential


def unauthorized(*, invalid_token: bool, invalid_request: bool = False) -> ApiError:
    """§12.2 ``401 FET-0010`` with its ``WWW-Authenticate`` challenge (RFC 6750 §3.1:
    ``invalid_request`` for a malformed request, ``invalid_token`` for a bad token)."""
    challenge = _CHALLENGE
    if invalid_request:
        challenge = f'{_CHALLENGE}, error="invalid_request"'
    elif invalid_token:
        challenge = f'{_CHALLENGE}, error="invalid_token"'
    return ApiError("FET-0010", UNAUTHORIZED_MESSAGE, headers={"WWW-Authenticate": challenge})


class BearerAuthenticator:
    """``AUTH_MODE=jwt``: a verified bearer token → :class:`Principal` (module docstring)."""

    def __init__(
        self,
        verifier: TokenVerifier,
        keys: KeySource,
        *,
        multi_tenant: bool,
        tenant_claim: str,
    ) -> None:
        self.verifier = verifier
        self.keys = keys
        self._multi_tenant = multi_tenant
        self._tenant_claim = tenant_claim
        self._verified = VerifiedTokens()

    async def authenticate(self, request: HeaderCarrier) -> Principal:
        values = authorization_values(request.headers)
        if len(values) > 1:
            log.info("authentication failed: %d Authorization headers", len(values))
            raise unauthorized(invalid_token=False, invalid_request=True)
        token = bearer_credential(values[0] if values else None)
        if token is None:
            log.info("authentication failed: no bearer token")
            raise unauthorized(invalid_token=False)
        try:
            return await self._principal(token)
        except InvalidToken as exc:
            log.info("authentication failed: %s", exc.reason)
            raise unauthorized(invalid_token=True) from None

    async def _principal(self, token: str) -> Principal:
        ring = self.keys.ring
        if ring is None:
            self.keys.start()
            log.warning("authentication unavailable: no JWKS key set loaded yet")
            raise ApiError("FET-0003", _UNAVAILABLE, headers={"Retry-After": "1"})
        digest = self._verified.digest(token)
        known = self._verified.get(digest, ring)
        if known is not None:
            return known
        try:
            claims = self.verifier.verify(token, ring)
        except UnknownKey:
            if not await self.keys.refetch_unknown() or self.keys.ring is None:
                raise
            ring = self.keys.ring
            claims = self.verifier.verify(token, ring)
        principal = principal_from_claims(
            claims, multi_tenant=self._multi_tenant, tenant_claim=self._tenant_claim
        )
        self._verified.put(digest, ring, principal, float(claims["exp"]))
        return principal

    def start(self) -> None:
        """Begin loading keys (the JWKS loads in the background; needs a running loop)."""
        self.keys.start()

    async def keys_check(self) -> None:
        """§2.10 ``auth_keys`` readiness probe."""
        await self.keys.check()

    async def aclose(self) -> None:
        await self.keys.aclose()


def accepted_algorithms(*, jwks: bool) -> Set[str]:
    """§12.2: the JWKS algorithms, or HS256 alone with the secret."""
    return JWKS_ALGORITHMS if jwks else frozenset({SECRET_ALGORITHM})
