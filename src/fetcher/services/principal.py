"""Who is calling (contract §12): the verified token's subject, scopes, products and tenant.

The Manager builds a :class:`Principal` per request (``fetcher.manager.auth``) and hands it to
the services, which apply §12.4 (product restriction) and §12.5 (tenant isolation) with it.
With ``AUTH_MODE=none`` every request acts as :data:`ANONYMOUS`: no subject, every scope, no
product restriction and the single-tenant tenant ``""`` (§12.5 "Switching modes").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ANONYMOUS", "SINGLE_TENANT", "Principal", "Scope"]

#: The tenant of every row in single-tenant mode; no token can carry it (§12.5).
SINGLE_TENANT = ""


class Scope(StrEnum):
    """The §12.3 scopes; ``ADMIN`` grants every route."""

    CONNECTIONS_READ = "fetcher:connections:read"
    CONNECTIONS_WRITE = "fetcher:connections:write"
    JOBS_WRITE = "fetcher:jobs:write"
    JOBS_READ = "fetcher:jobs:read"
    EVENTS_READ = "fetcher:events:read"
    #: §14.2: ``GET /v1/fetcher/{id}/result``.
    RESULTS_READ = "fetcher:results:read"
    ADMIN = "fetcher:admin"


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request.

    ``sub`` is ``None`` only without authentication (then nothing records ``createdBy``).
    ``products`` is ``None`` for an unrestricted token, else the normalized (§2.4) product
    names the token may act for (possibly none). ``tenant`` is ``""`` in single-tenant mode.
    """

    sub: str | None = None
    scopes: frozenset[str] = frozenset({Scope.ADMIN})
    products: frozenset[str] | None = None
    tenant: str = SINGLE_TENANT

    @property
    def restricted(self) -> bool:
        """A product-restricted token (§12.4): it acts only for ``products``."""
        return self.products is not None

    def may_act_for(self, product: str | None) -> bool:
        """Whether this caller may act for the normalized ``product`` (§12.4)."""
        if self.products is None:
            return True
        return product is not None and product in self.products

    def has_scope(self, scope: Scope) -> bool:
        """§12.3: the route's scope or ``fetcher:admin``."""
        return scope in self.scopes or Scope.ADMIN in self.scopes


#: Every request with ``AUTH_MODE=none`` (§2.1): unrestricted, single-tenant, no ``createdBy``.
ANONYMOUS = Principal()
