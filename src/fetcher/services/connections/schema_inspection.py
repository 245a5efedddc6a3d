"""Live schema use cases (contract §2.6.8, §2.6.9, §2.7).

:class:`SchemaInspector` serves fresh discovery of one connection (no cache, 502 FET-1041 /
FET-1042 on failure) and validate-schema, which checks each requested datasource's tables and
fields through the tenant's §2.7 cache entries. The pure rules live in
:mod:`fetcher.services.connections.schema_requests` and
:mod:`fetcher.services.connections.schema_discovery`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fetcher.services.connections import schema_requests as rules
from fetcher.services.connections.dialer import ConnectFailed, ConnectionDialer, DiscoveryFailed
from fetcher.services.connections.directory import ConnectionDirectory, Target
from fetcher.services.connections.schema_cache import SchemaCache
from fetcher.services.connections.schema_discovery import (
    datasource_errors,
    requested_scope,
    schema_body,
    schema_scope,
)
from fetcher.services.connections.tester import TEST_FAILURE_MESSAGE
from fetcher.services.errors import ApiError
from fetcher.services.principal import Principal

__all__ = ["SCHEMA_DISCOVERY_MESSAGE", "SchemaInspector"]

SCHEMA_DISCOVERY_MESSAGE = "Failed to retrieve database schema information."


@dataclass
class SchemaInspector:
    """``cache`` is the §2.7 cache the connection editor invalidates on PATCH and DELETE."""

    directory: ConnectionDirectory
    dialer: ConnectionDialer
    cache: SchemaCache = field(default_factory=SchemaCache)

    async def schema(
        self, connection_id: str, schemas: str | None, *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.8: fresh discovery (no cache), 30 s; 502 FET-1041 / FET-1042 on failure."""
        requested = rules.parse_schemas_param(schemas)
        target = await self.directory.resolve(connection_id, principal)
        scope = schema_scope(target.type, requested, target.schema)
        try:
            discovered = await self.dialer.discover(target, scope)
        except DiscoveryFailed as exc:
            await self.dialer.log_failure("schema discovery failed", target, exc)
            raise ApiError("FET-1042", SCHEMA_DISCOVERY_MESSAGE) from None
        except ConnectFailed as exc:
            await self.dialer.log_failure("schema connect failed", target, exc)
            raise ApiError("FET-1041", TEST_FAILURE_MESSAGE) from None
        return schema_body(
            connection_id=target.id,
            config_name=target.config_name,
            database_name=target.database_name,
            engine=target.type,
            discovered=discovered,
        )

    async def validate_schema(
        self, body: Mapping[str, object], *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.9: body checks, resolution (FET-1062), then per-datasource checks through the
        tenant's §2.7 cache entries; inconsistencies → ``422 FET-1060`` with the sorted
        ``errors``."""
        mapped = rules.check_validation_body(body)
        names = sorted(mapped)
        targets = [await self.directory.resolve_name(name, principal) for name in names]
        if all(t is None for t in targets):
            raise ApiError("FET-1062", "No connections configured for the requested datasources")
        results = await asyncio.gather(
            *(
                self._datasource_errors(name, target, mapped[name], principal.tenant)
                for name, target in zip(names, targets, strict=True)
            )
        )
        errors = [entry for entries in results for entry in entries]
        if errors:
            raise ApiError("FET-1060", rules.VALIDATION_FAILED_MESSAGE, errors=errors)
        return dict(rules.VALIDATION_SUCCESS)

    async def _datasource_errors(
        self, name: str, target: Target | None, tables: Mapping[str, Sequence[str]], tenant: str
    ) -> list[dict[str, str]]:
        if target is None:
            return [{"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": name}]
        scope = requested_scope(target.type, name, tables)
        discovered = self.cache.get(name, scope, target.updated_at, tenant=tenant)
        if discovered is None:
            try:
                discovered = await self.dialer.discover(target, scope)
            except (ApiError, ConnectFailed) as exc:
                await self.dialer.log_failure("validate-schema discovery failed", target, exc)
                return [{"type": "DATA_SOURCE_DOWN", "dataSourceId": name}]
            self.cache.put(name, scope, target.updated_at, discovered, tenant=tenant)
        return datasource_errors(name, target.type, discovered, tables)
