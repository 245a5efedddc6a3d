"""Changing connections (contract §2.6.1, §2.6.5, §2.6.6, §2.6.10).

:class:`ConnectionEditor` creates, PATCHes, soft-deletes and assigns stored connections once
the host has parsed the path, header and body. Create and PATCH share one validation path and
one record merge (:mod:`fetcher.services.connections.stored`); internal datasources are
read-only (``409 FET-0004``); a connection with active jobs is neither changed nor deleted
(``409 FET-1021``); PATCH and DELETE drop the §2.7 cache entries of the names involved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from fetcher.services.access import require_product, require_unrestricted
from fetcher.services.connections.credentials import CredentialCipher
from fetcher.services.connections.directory import ConnectionDirectory, not_found
from fetcher.services.connections.schema_cache import SchemaCache
from fetcher.services.connections.sqlite_files import SqlitePolicy
from fetcher.services.connections.ssrf import is_blocked_host_literal
from fetcher.services.connections.stored import (
    check_retarget,
    connection_response,
    merged_record,
    stored_input,
)
from fetcher.services.connections.validation import (
    ConnectionInput,
    check_connection_fields,
    validate_connection_create,
    validate_connection_patch,
)
from fetcher.services.errors import EMPTY_BODY_MESSAGE, ApiError, forbidden_host, invalid_payload
from fetcher.services.principal import Principal
from fetcher.services.records import ConnectionRecord
from fetcher.services.store_roles import ConflictError, ConnectionStore
from fetcher.services.timeutil import SystemClock, new_id

__all__ = ["ConnectionEditor"]

T = TypeVar("T")


def _active_jobs(verb: str) -> ApiError:
    return ApiError("FET-1021", f"cannot {verb} connection with active jobs")


def _name_taken() -> ApiError:
    return ApiError(
        "FET-1002", "A connection with this configName already exists.", title="Conflict"
    )


@dataclass
class ConnectionEditor:
    """``schema_cache`` is the §2.7 cache validate-schema reads (shared with it)."""

    store: ConnectionStore
    directory: ConnectionDirectory
    cipher: CredentialCipher
    sqlite: SqlitePolicy = field(default_factory=SqlitePolicy)
    ssrf_guard: bool = False
    schema_cache: SchemaCache = field(default_factory=SchemaCache)
    clock: SystemClock = field(default_factory=SystemClock)

    async def create(
        self, body: Mapping[str, object], product: str, *, principal: Principal
    ) -> ConnectionRecord:
        """§2.6.1 steps 3–7 (the header and body parse ran in the host), in the caller's
        tenant, recording its ``sub`` as ``createdBy`` (§12.4)."""
        require_product(principal, product)
        data = self._validated(body, principal.tenant)
        record = replace(
            self._new_record(data, body, product),
            tenant=principal.tenant,
            created_by=principal.sub,
        )
        await self._write(self.store.insert_connection(record))
        return record

    async def update(
        self, connection_id: str, body: Mapping[str, object], *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.5 steps 2 (``{}``) to 9; drops the cache entries of the old and new name."""
        if not body:
            raise invalid_payload(EMPTY_BODY_MESSAGE)
        check_connection_fields(body)
        record = await self.directory.mutable(connection_id, principal)
        tenant = principal.tenant
        if await self.store.has_active_jobs(record.config_name, tenant=tenant):
            raise _active_jobs("update")
        data = self._validated(body, tenant, record)
        updated = merged_record(record, data, body, self.clock.now(), self.cipher)
        if not await self._write(self.store.update_connection(updated)):
            raise not_found("connection")
        self.schema_cache.invalidate(record.config_name, updated.config_name, tenant=tenant)
        return connection_response(updated)

    async def delete(self, connection_id: str, *, principal: Principal) -> None:
        """§2.6.6: path ID (host), existence, internal, active jobs; a soft delete."""
        record = await self.directory.mutable(connection_id, principal)
        tenant = principal.tenant
        if await self.store.has_active_jobs(record.config_name, tenant=tenant):
            raise _active_jobs("delete")
        if not await self.store.soft_delete_connection(
            connection_id, self.clock.now(), tenant=tenant
        ):
            raise not_found("connection")
        self.schema_cache.invalidate(record.config_name, tenant=tenant)

    async def assign(
        self, connection_id: str, product: str, *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.10: unrestricted tokens only (§12.4), existence, internal, then an atomic
        set-if-unassigned within the tenant."""
        require_unrestricted(principal)
        await self.directory.mutable(connection_id, principal)
        now = self.clock.now()
        tenant = principal.tenant
        if not await self.store.assign_product(connection_id, product, now, tenant=tenant):
            if await self.store.get_connection(connection_id, tenant=tenant) is None:
                raise not_found("connection")
            raise ApiError(
                "FET-1015",
                "The connection is already assigned to a product and cannot be reassigned.",
            )
        return connection_response(await self.directory.get(connection_id, principal))

    def _validated(
        self, body: Mapping[str, object], tenant: str, stored: ConnectionRecord | None = None
    ) -> ConnectionInput:
        """The one validation path of create (§2.6.1 steps 3-6) and PATCH (§2.6.5 steps 3 and
        7-8): the body rules (on PATCH merged into ``stored``, then credential re-targeting,
        step 7a), the §2.9 host-literal layer, and configNames taken by the internal
        datasources the tenant sees (§12.5)."""
        sqlite = self.sqlite
        if stored is None:
            data = validate_connection_create(
                body,
                embedded=sqlite.embedded,
                sqlite_allowed_dir=sqlite.allowed_dir,
                metadata_store_path=sqlite.metadata_store_path,
            )
        else:
            data = validate_connection_patch(
                stored_input(stored),
                body,
                embedded=sqlite.embedded,
                sqlite_allowed_dir=sqlite.allowed_dir,
                metadata_store_path=sqlite.metadata_store_path,
            )
            check_retarget(stored, data, body)
        if self.ssrf_guard and data.host and is_blocked_host_literal(data.host):
            raise forbidden_host()  # §2.9 host-literal layer, when the guard is on
        if data.config_name in self.directory.internal_for(tenant):
            raise _name_taken()
        return data

    @staticmethod
    async def _write(write: Awaitable[T]) -> T:
        """A store write; a configName taken meanwhile (unique index) → ``409 FET-1002``."""
        try:
            return await write
        except ConflictError:
            raise _name_taken() from None

    def _new_record(
        self, data: ConnectionInput, body: Mapping[str, object], product: str
    ) -> ConnectionRecord:
        """A new record: the validated input applied to an empty one, as a PATCH applies it
        to a stored one (:func:`merged_record`), so both write the same fields."""
        now = self.clock.now()
        empty = ConnectionRecord(
            id=new_id(),
            config_name=data.config_name,
            type=data.type,
            database_name=data.database_name,
            created_at=now,
            updated_at=now,
            product_name=product,
            encryption_key_version=self.cipher.version,
        )
        return merged_record(empty, data, body, now, self.cipher)
