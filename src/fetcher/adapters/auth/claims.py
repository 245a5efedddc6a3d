"""From verified claims to a :class:`Principal` (contract §12.2–§12.5).

The signature and ``iss``/``aud``/``exp``/``nbf``/``iat`` are checked by PyJWT
(:mod:`fetcher.adapters.auth.verifier`); this module applies the rules PyJWT does not know:

* ``exp`` is required; ``exp``, ``nbf`` and ``iat`` are JSON numbers (PyJWT would accept the
  string ``"123"``, which RFC 7519 NumericDate is not).
* ``sub``: a non-empty string of at most 256 characters.
* ``products`` (§12.4), when present: an array of strings, each valid as ``X-Product-Name``
  (§2.4) after normalization; the normalized names restrict the token (an empty array: to none).
* Scopes (§12.3): the space-separated ``scope`` string and the ``scp`` array both count.
* The tenant (§12.5), in multi-tenant mode: the claim ``AUTH_TENANT_CLAIM``, a string matching
  the tenant pattern; single-tenant mode ignores it (tenant ``""``).

Every violation raises :class:`InvalidToken` with a reason for the log (never the token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fetcher.crypto import is_tenant_id
from fetcher.services.connections.validation import validate_product_header
from fetcher.services.errors import ApiError
from fetcher.services.principal import SINGLE_TENANT, Principal

__all__ = ["MAX_SUB_CHARS", "InvalidToken", "principal_from_claims"]
#: §12.2: ``sub`` is at most this many characters.
MAX_SUB_CHARS = 256


class InvalidToken(Exception):
    """A token that fails §12.2; ``reason`` is logged at info, the token never is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def principal_from_claims(
    claims: Mapping[str, Any], *, multi_tenant: bool, tenant_claim: str
) -> Principal:
    """The caller the verified ``claims`` describe, or :class:`InvalidToken`."""
    _numeric_dates(claims)
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub or len(sub) > MAX_SUB_CHARS:
        raise InvalidToken("sub must be a non-empty string of at most 256 characters")
    return Principal(
        sub=sub,
        scopes=_scopes(claims),
        products=_products(claims),
        tenant=_tenant(claims, tenant_claim) if multi_tenant else SINGLE_TENANT,
    )


def _numeric_dates(claims: Mapping[str, Any]) -> None:
    if "exp" not in claims:
        raise InvalidToken("exp is required")
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidToken(f"{name} must be a number")


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """§12.3: ``scope`` (separated by U+0020 only: a tab, a newline or any other whitespace
    is part of a scope name, so ``"x\tfetcher:admin"`` is one unknown scope that grants
    nothing) and ``scp`` (array); a malformed one grants nothing."""
    scopes: set[str] = set()
    scope = claims.get("scope")
    if isinstance(scope, str):
        scopes.update(part for part in scope.split(" ") if part)
    scp = claims.get("scp")
    if isinstance(scp, list):
        scopes.update(s for s in scp if isinstance(s, str))
    return frozenset(scopes)


def _products(claims: Mapping[str, Any]) -> frozenset[str] | None:
    """§12.4: ``None`` without the claim (unrestricted), else the normalized names."""
    if "products" not in claims:
        return None
    raw = claims["products"]
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise InvalidToken("products must be an array of strings")
    try:
        return frozenset(validate_product_header(p, required=True) or "" for p in raw)
    except ApiError:
        raise InvalidToken("products holds an invalid product name") from None


def _tenant(claims: Mapping[str, Any], name: str) -> str:
    """§12.5: the tenant claim, present and matching the tenant pattern."""
    tenant = claims.get(name)
    if not isinstance(tenant, str) or not is_tenant_id(tenant):
        raise InvalidToken(f"the {name} claim is missing or malformed")
    return tenant
