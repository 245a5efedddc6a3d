"""Signature and registered claims of one bearer token (contract §12.2), with PyJWT.

The order is fixed and cheap checks come first:

1. The token is at most 8 KiB, measured before anything is decoded.
2. The header's ``alg`` is one the key source accepts (``RS256``/``PS256``/``ES256``/``EdDSA``
   with a JWKS, ``HS256`` with the secret); ``none`` and every other value fail here.
3. The key is the one ``kid`` names, bound to that ``alg`` (:class:`KeyRing`); a ``kid`` the
   ring does not know raises :class:`UnknownKey` so the caller may refetch the JWKS, and a key
   of another type (an HS256 token against an RSA key: algorithm confusion) has no entry.
4. PyJWT verifies the signature, ``iss`` (equal), ``aud`` (string or array containing ours),
   ``exp`` (required, future), ``nbf``/``iat`` (not future), all with the configured leeway.

The work is a few tens of microseconds (one signature check; keys are parsed once), so it runs
on the event loop: a thread hop would cost more than it saves (bench/auth_cost.py).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.exceptions import PyJWTError

from fetcher.adapters.auth.claims import InvalidToken
from fetcher.adapters.auth.keys import KeyRing

__all__ = ["MAX_TOKEN_BYTES", "TokenVerifier", "UnknownKey"]

#: §12.2: a longer token is refused before it is decoded.
MAX_TOKEN_BYTES = 8 * 1024

#: PyJWT options: every registered claim checked, ``exp``/``iss``/``aud`` required, and RSA
#: keys under 2048 bits refused rather than merely warned about.
_OPTIONS: Any = {
    "require": ["exp", "iss", "aud"],
    "verify_signature": True,
    "verify_exp": True,
    "verify_nbf": True,
    "verify_iat": True,
    "verify_aud": True,
    "verify_iss": True,
    "enforce_minimum_key_length": True,
}


class UnknownKey(InvalidToken):
    """The token names a ``kid`` the current key set does not hold (§12.2 refetch)."""

    def __init__(self, kid: str | None) -> None:
        super().__init__("unknown kid")
        self.kid = kid


@dataclass(frozen=True, slots=True)
class TokenVerifier:
    """The §12.2 checks for one deployment: ``AUTH_ISSUER``, ``AUTH_AUDIENCE``, leeway and the
    algorithms its key source accepts."""

    issuer: str
    audience: str
    leeway: int
    algorithms: Set[str]

    def header(self, token: str) -> tuple[str, str | None]:
        """Steps 1–2: ``(alg, kid)`` of a token small enough and with an accepted ``alg``."""
        if len(token.encode("utf-8", "surrogatepass")) > MAX_TOKEN_BYTES:
            raise InvalidToken("token longer than 8 KiB")
        try:
            header = jwt.get_unverified_header(token)
        except PyJWTError:
            raise InvalidToken("malformed token") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("algorithm not accepted")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed kid")
        return alg, kid

    def verify(self, token: str, ring: KeyRing) -> dict[str, Any]:
        """Steps 1–4: the verified claims, or :class:`InvalidToken` / :class:`UnknownKey`."""
        alg, kid = self.header(token)
        if not ring.knows(kid):
            raise UnknownKey(kid)
        key = ring.key_for(kid, alg)
        if key is None:
            raise InvalidToken("algorithm does not fit the key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options=_OPTIONS,
            )
        except PyJWTError as exc:
            raise InvalidToken(f"{type(exc).__name__}: {exc}") from None
        return claims
