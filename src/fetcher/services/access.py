"""What a caller may reach (contract §12.4 product-restricted tokens, §12.5 tenants).

The services apply these with the request's :class:`~fetcher.services.principal.Principal`:
a restricted token acts only for its products (``403 FET-0012`` where §12.4 says so, else the
resource is missing, ``404 FET-1001``); every stored row read or written belongs to the
caller's tenant, and another tenant's resource is missing too (§12.5, never a 403 that would
confirm it exists). With ``AUTH_MODE=none`` the caller is ``ANONYMOUS``: unrestricted, tenant
``""``, so nothing here changes the single-tenant behaviour.
"""

from __future__ import annotations

from fetcher.services.errors import ApiError
from fetcher.services.principal import Principal

__all__ = [
    "UNASSIGNED_FORBIDDEN",
    "product_not_allowed",
    "require_product",
    "require_unrestricted",
]

#: §12.4: list unassigned and assign with a restricted token (message exact).
UNASSIGNED_FORBIDDEN = "a product-restricted token cannot manage unassigned connections"


def product_not_allowed(product: str) -> ApiError:
    """§12.4: ``403 FET-0012``, title ``Product Not Allowed`` (message exact)."""
    return ApiError(
        "FET-0012",
        f"token is not allowed to act for product '{product}'",
        title="Product Not Allowed",
    )


def require_product(principal: Principal, product: str) -> None:
    """§12.4 create, list with ``X-Product-Name`` and §3.6 step 10a: the normalized
    ``product`` must be one of a restricted token's products."""
    if not principal.may_act_for(product):
        raise product_not_allowed(product)


def require_unrestricted(principal: Principal) -> None:
    """§12.4 list unassigned and assign: only unrestricted tokens, checked right after the
    scope (before the header, the path ID and the query)."""
    if principal.restricted:
        raise ApiError("FET-0012", UNASSIGNED_FORBIDDEN, title="Product Not Allowed")
