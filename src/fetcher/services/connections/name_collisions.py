"""§9.4 "Name collisions": an internal datasource added while a stored connection already
uses its ``configName``.

Creation refuses a stored name equal to an internal one, but an operator can define an internal
datasource later. Every job resolving such a name then fails as ambiguous (§3.6 step 14, §4.5)
until one of the two is renamed or removed; the operator learns it at startup, from one ERROR
line per collision, logged once the metadata store is reachable (after its migrations). In
multi-tenant mode a collision exists only where the internal datasource is visible: in the
tenants its ``DATASOURCE_<NAME>_TENANTS`` lists (§12.5).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fetcher.services.store_roles import ConnectionLookup

__all__ = ["log_name_collisions"]

log = logging.getLogger(__name__)


async def log_name_collisions(
    store: ConnectionLookup,
    internal_names: list[str],
    tenants: Mapping[str, frozenset[str]],
    *,
    multi_tenant: bool,
) -> list[tuple[str, str]]:
    """Log each ``(tenant, configName)`` collision at ERROR and return them, sorted."""
    found: list[tuple[str, str]] = []
    for name in sorted(internal_names):
        scopes = sorted(tenants.get(name, frozenset())) if multi_tenant else [""]
        for tenant in scopes:
            if await store.get_connection_by_name(name, tenant=tenant) is None:
                continue
            found.append((tenant, name))
            where = f" of tenant {tenant}" if tenant else ""
            log.error(
                "internal datasource %s has the configName of a stored connection%s: every job "
                "that resolves '%s' fails as ambiguous until one of them is renamed or removed",
                name,
                where,
                name,
            )
    return found
