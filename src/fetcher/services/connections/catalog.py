"""Reading connections (contract §2.6.2, §2.6.3, §2.6.4, §9.4).

:class:`ConnectionCatalog` answers GET of one connection and the two lists: internal
datasources first when no product is given and the list is not the unassigned one, pagination
over the combined sequence. Only the caller's tenant's rows (§12.5); a product-restricted token
lists only its products' connections and never the unassigned ones (§12.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from fetcher.engine import ConnectionDescriptor
from fetcher.services.access import require_product, require_unrestricted
from fetcher.services.connections.directory import ConnectionDirectory
from fetcher.services.connections.stored import connection_response, internal_response
from fetcher.services.principal import Principal
from fetcher.services.records import ConnectionQuery, SortOrder
from fetcher.services.store_roles import ConnectionStore

__all__ = ["ConnectionCatalog", "ListRequest"]


@dataclass(frozen=True, slots=True)
class ListRequest:
    """Validated §2.6.2 query parameters (the host parses them)."""

    page: int = 1
    limit: int = 10
    sort: SortOrder = "desc"
    type: str | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    metadata: Sequence[tuple[str, str]] = ()


@dataclass
class ConnectionCatalog:
    store: ConnectionStore
    directory: ConnectionDirectory

    async def describe(self, connection_id: str, principal: Principal) -> dict[str, object]:
        """§2.6.4 GET: the ConnectionResponse."""
        origin = (await self.directory.resolve(connection_id, principal)).origin()
        if isinstance(origin, ConnectionDescriptor):
            return internal_response(origin)
        return connection_response(origin)

    async def list_page(
        self,
        request: ListRequest,
        *,
        product: str | None,
        principal: Principal,
        unassigned: bool = False,
    ) -> dict[str, object]:
        """§2.6.2 / §2.6.3: internal datasources first when no product is given and the list
        is not the unassigned one; pagination applies to the combined sequence. Only the
        tenant's rows (§12.5); a restricted token lists only its products' connections and
        never the unassigned ones (§12.4)."""
        if unassigned:
            require_unrestricted(principal)
        if product is not None:
            require_product(principal, product)
        offset = (request.page - 1) * request.limit
        internal = (
            []
            if product is not None or unassigned
            else self._internal_matching(request, principal.tenant)
        )
        head = internal[offset : offset + request.limit]
        query = ConnectionQuery(
            offset=max(0, offset - len(internal)),
            limit=request.limit - len(head),
            sort=request.sort,
            product=product,
            products=principal.products if product is None else None,
            unassigned_only=unassigned,
            type=request.type,
            created_from=request.created_from,
            created_before=request.created_before,
            metadata=tuple(request.metadata),
        )
        records, total = await self.store.list_connections(query, tenant=principal.tenant)
        items = [internal_response(d) for d in head] + [connection_response(r) for r in records]
        return {
            "items": items,
            "page": request.page,
            "limit": request.limit,
            "total": total + len(internal),
        }

    def _internal_matching(self, request: ListRequest, tenant: str) -> list[ConnectionDescriptor]:
        """The tenant's internal datasources sorted by configName, matched by ``type`` only
        (§2.6.2, §12.5)."""
        wanted = request.type.casefold() if request.type is not None else None
        internal = self.directory.internal_for(tenant)
        return [
            internal[name]
            for name in sorted(internal)
            if wanted is None or internal[name].type.value.casefold() == wanted
        ]
