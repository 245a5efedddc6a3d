"""Which connections a caller reaches (contract §2.6.4, §9.4, §12.4, §12.5).

:class:`ConnectionDirectory` resolves a connection ID or ``configName`` to a :class:`Target`:
an internal datasource the caller's tenant sees, or a stored connection of its tenant that a
product-restricted token may act for. Anything else is missing (``404 FET-1001``). Every
connection use case resolves through it, so the rule is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import EngineType
from fetcher.services.connections.internal_datasources import (
    internal_connection_id,
    visible_internal,
)
from fetcher.services.errors import ApiError
from fetcher.services.principal import Principal
from fetcher.services.records import ConnectionRecord
from fetcher.services.store_roles import ConnectionLookup
from fetcher.services.timeutil import SystemClock

__all__ = ["ConnectionDirectory", "Target", "not_found"]

_NOT_FOUND = (
    "It was not possible to find the connection entity during the requested flow. "
    "Please review the data provided in the request."
)


def not_found(entity: str) -> ApiError:
    """§2.3 FET-1001 for ``connection`` or ``job`` (message exact)."""
    return ApiError("FET-1001", _NOT_FOUND.replace("connection", entity))


def _internal_conflict() -> ApiError:
    return ApiError("FET-0004", "Internal datasources are read-only through the API.")


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved connection: a stored record, or an internal datasource (§9.4).

    ``updated_at`` is the stored ``updatedAt``, or the process start time for an internal
    datasource (§2.7).
    """

    id: str
    config_name: str
    type: EngineType
    database_name: str
    schema: str | None
    updated_at: datetime
    record: ConnectionRecord | None = None
    internal: ConnectionDescriptor | None = None

    @classmethod
    def stored(cls, record: ConnectionRecord) -> Target:
        return cls(
            record.id,
            record.config_name,
            EngineType(record.type),
            record.database_name,
            record.schema,
            record.updated_at,
            record=record,
        )

    @classmethod
    def of_internal(cls, descriptor: ConnectionDescriptor, started_at: datetime) -> Target:
        return cls(
            descriptor.connection_id or internal_connection_id(descriptor.config_name),
            descriptor.config_name,
            descriptor.type,
            descriptor.database,
            descriptor.schema,
            started_at,
            internal=descriptor,
        )

    def origin(self) -> ConnectionDescriptor | ConnectionRecord:
        """The internal descriptor, else the stored record (a target holds exactly one)."""
        if self.internal is not None:
            return self.internal
        if self.record is None:
            raise ValueError("a Target holds a stored record or an internal descriptor")
        return self.record


@dataclass
class ConnectionDirectory:
    """Connections by ID or name. ``internal`` maps configName → internal descriptor (§9.4)
    and ``internal_tenants`` configName → the tenants that see it (§12.5); ``started_at`` is
    the internal datasources' ``updatedAt`` for the §2.7 cache."""

    store: ConnectionLookup
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    internal_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    started_at: datetime = field(default_factory=lambda: SystemClock().now())

    def internal_for(self, tenant: str) -> dict[str, ConnectionDescriptor]:
        """The internal datasources ``tenant`` sees, under its IDs (§9.4, §12.5)."""
        return visible_internal(self.internal, self.internal_tenants, tenant)

    def internal_by_id(self, connection_id: str, tenant: str) -> ConnectionDescriptor | None:
        for descriptor in self.internal_for(tenant).values():
            if (descriptor.connection_id or internal_connection_id(descriptor.config_name)) == (
                connection_id
            ):
                return descriptor
        return None

    async def stored_by_name(self, name: str, *, tenant: str) -> ConnectionRecord | None:
        """The tenant's non-deleted stored connection named ``name`` (case-sensitive)."""
        return await self.store.get_connection_by_name(name, tenant=tenant)

    async def get(self, connection_id: str, principal: Principal) -> ConnectionRecord:
        """The tenant's non-deleted stored connection, else ``404 FET-1001``; for a
        product-restricted token also when it belongs to another product or none (§12.4)."""
        record = await self.store.get_connection(connection_id, tenant=principal.tenant)
        if record is None or not principal.may_act_for(record.product_name):
            raise not_found("connection")
        return record

    async def resolve(self, connection_id: str, principal: Principal) -> Target:
        """§2.6.4: an internal datasource the tenant sees (by its UUIDv5) or a stored connection
        the caller may reach, else 404."""
        descriptor = self.internal_by_id(connection_id, principal.tenant)
        if descriptor is not None:
            return Target.of_internal(descriptor, self.started_at)
        return Target.stored(await self.get(connection_id, principal))

    async def resolve_name(self, name: str, principal: Principal) -> Target | None:
        """Internal, then stored; a name that is both is ambiguous and does not resolve. Only
        the internal datasources the tenant sees and the stored connections the caller may
        reach (§12.4: a restricted token's products; §12.5: its tenant) count."""
        record = await self.stored_by_name(name, tenant=principal.tenant)
        if record is not None and not principal.may_act_for(record.product_name):
            record = None
        descriptor = self.internal_for(principal.tenant).get(name)
        if record is not None and descriptor is not None:
            return None
        if descriptor is not None:
            return Target.of_internal(descriptor, self.started_at)
        return Target.stored(record) if record is not None else None

    async def mutable(self, connection_id: str, principal: Principal) -> ConnectionRecord:
        """A stored connection the caller may change: existence (404), then internal (409
        FET-0004)."""
        if self.internal_by_id(connection_id, principal.tenant) is not None:
            raise _internal_conflict()
        return await self.get(connection_id, principal)
