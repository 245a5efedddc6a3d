"""Connection use cases (contract §2.5, §2.6, §2.7, §2.9, §9.4).

:class:`ConnectionService` serves every connection route once the host has parsed the path,
query, header and body: create, get, list (internal datasources first when no product is
given), list unassigned, PATCH, soft DELETE, assign, the rate-limited live test, fresh schema
discovery and validate-schema (through the §2.7 cache). Stored credentials are decrypted only
in memory, for one use (§6.4).

Every use case takes the request's :class:`Principal`: it reaches only its tenant's rows and
the internal datasources visible to that tenant (§12.5), and a product-restricted token only
its products' connections (§12.4); anything else is missing (``404 FET-1001``). The pure schema
rules live in :mod:`fetcher.services.connection_schema`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from fetcher.crypto import Redactor
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.engine import ConnectionDescriptor, Connector, ConnectorRegistry, EngineError
from fetcher.engine.kit import DiscoveredSchema, EngineType, TlsSettings
from fetcher.services import connection_schema as rules
from fetcher.services.access import require_product, require_unrestricted
from fetcher.services.connection_validation import (
    ConnectionInput,
    SslInput,
    check_connection_fields,
    validate_connection_create,
    validate_connection_patch,
)
from fetcher.services.credentials import CredentialCipher, CredentialError
from fetcher.services.errors import (
    EMPTY_BODY_MESSAGE,
    ApiError,
    forbidden_host,
    invalid_payload,
    retarget_needs_password,
)
from fetcher.services.internal_datasources import internal_connection_id, visible_internal
from fetcher.services.ports import ConflictError, MetadataStore
from fetcher.services.principal import Principal
from fetcher.services.rate_limit import ConnectionTestLimiter
from fetcher.services.records import ConnectionQuery, ConnectionRecord, SortOrder
from fetcher.services.responses import ConnectionResponse, TestResult, shape
from fetcher.services.schema_cache import SchemaCache
from fetcher.services.schema_discovery import (
    datasource_errors,
    requested_scope,
    schema_body,
    schema_scope,
)
from fetcher.services.sqlite_files import sqlite_location_ok
from fetcher.services.ssrf import (
    BlockedHostError,
    HostResolutionError,
    is_blocked_host_literal,
    vet_host_addresses,
)
from fetcher.services.timeutil import SystemClock, format_ms, new_id

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DISCOVERY_TIMEOUT_SECONDS",
    "TEST_FAILURE_MESSAGE",
    "ConnectFailed",
    "ConnectionService",
    "ListRequest",
    "Target",
    "connection_response",
    "descriptor_from_record",
    "internal_response",
    "not_found",
]

log = logging.getLogger(__name__)

TEST_FAILURE_MESSAGE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)
SCHEMA_DISCOVERY_MESSAGE = "Failed to retrieve database schema information."
CONNECT_TIMEOUT_SECONDS = 10
DISCOVERY_TIMEOUT_SECONDS = 30
_NOT_FOUND = (
    "It was not possible to find the connection entity during the requested flow. "
    "Please review the data provided in the request."
)
_SQLITE = EngineType.SQLITE.value


T = TypeVar("T")


def not_found(entity: str) -> ApiError:
    """§2.3 FET-1001 for ``connection`` or ``job`` (message exact)."""
    return ApiError("FET-1001", _NOT_FOUND.replace("connection", entity))


class ConnectFailed(Exception):
    """A connect failure (decryption, SQLITE re-check, DNS under the guard, driver, timeout).

    ``detail`` is the raw driver text; ``redactor`` knows the values of the connection it came
    from. It is redacted once, where it is logged (§8.7), and never shown by ``str()``.
    """

    def __init__(self, detail: str, redactor: Redactor | None = None) -> None:
        super().__init__("connect failed")
        self.detail = detail
        self.redactor = redactor


class _DiscoveryFailed(ConnectFailed):
    """Connected, but discovery failed or timed out (§2.6.8 → 502 FET-1042)."""


def _values(descriptor: ConnectionDescriptor) -> tuple[tuple[str, ...], list[str]]:
    """§8.7 step 1 for one connection: its password and TLS key; its host and the address
    the SSRF pre-dial pinned (the address the driver dials, §2.9.1)."""
    hosts = [h for h in (descriptor.host, descriptor.pinned_address) if h]
    return descriptor.secrets(), [*hosts, *descriptor.resolved_addresses]


def _detail(exc: BaseException) -> str:
    if isinstance(exc, EngineError):
        return exc.detail or exc.message
    return str(exc) or type(exc).__name__


# --- responses (§2.5) ---------------------------------------------------------------------


def connection_response(record: ConnectionRecord) -> dict[str, object]:
    """§2.5 ConnectionResponse: empty optional members omitted; secrets never returned."""
    network = record.type != _SQLITE
    has_ssl = record.ssl_mode or record.ssl_ca or record.ssl_cert or record.ssl_key_encrypted
    return shape(
        ConnectionResponse,
        {
            "id": record.id,
            "productName": record.product_name or None,
            "configName": record.config_name,
            "type": record.type,
            "host": record.host if network else None,
            "port": record.port if network else None,
            "databaseName": record.database_name,
            "schema": record.schema or None,
            "userName": record.user_name if network else None,
            "ssl": {"mode": record.ssl_mode or ""} if has_ssl else None,
            "metadata": dict(record.metadata) or None,
            "internal": False,
            "createdAt": format_ms(record.created_at),
            "updatedAt": format_ms(record.updated_at),
            "createdBy": record.created_by,
        },
    )


def internal_response(descriptor: ConnectionDescriptor) -> dict[str, object]:
    """§2.5/§9.4: an internal datasource, without ``host``, ``port`` and timestamps."""
    return shape(
        ConnectionResponse,
        {
            "id": descriptor.connection_id or internal_connection_id(descriptor.config_name),
            "configName": descriptor.config_name,
            "type": descriptor.type.value,
            "databaseName": descriptor.database,
            "schema": descriptor.schema or None,
            "userName": (
                descriptor.username or None if descriptor.type is not EngineType.SQLITE else None
            ),
            "ssl": {"mode": descriptor.ssl.mode} if descriptor.ssl is not None else None,
            "metadata": dict(descriptor.metadata) or None,
            "internal": True,
        },
    )


def descriptor_from_record(
    record: ConnectionRecord, cipher: CredentialCipher, *, config_name: str | None = None
) -> ConnectionDescriptor:
    """Decrypt a stored connection for one use. Raises :class:`CredentialError`."""
    version = record.encryption_key_version
    password = (
        cipher.decrypt(record.password_encrypted, record.id, version)
        if record.password_encrypted
        else None
    )
    ssl_key = (
        cipher.decrypt(record.ssl_key_encrypted, record.id, version)
        if record.ssl_key_encrypted
        else None
    )
    tls = None
    if record.ssl_mode or record.ssl_ca or record.ssl_cert or ssl_key:
        tls = TlsSettings(record.ssl_mode or "", record.ssl_ca, record.ssl_cert, ssl_key)
    return ConnectionDescriptor(
        config_name=config_name or record.config_name,
        type=EngineType(record.type),
        host=record.host,
        port=record.port,
        database=record.database_name,
        schema=record.schema,
        username=record.user_name,
        password=password,
        ssl=tls,
        metadata=dict(record.metadata),
        connection_id=record.id,
    )


# --- inputs and resolved connections ------------------------------------------------------


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


def _active_jobs(verb: str) -> ApiError:
    return ApiError("FET-1021", f"cannot {verb} connection with active jobs")


def _internal_conflict() -> ApiError:
    return ApiError("FET-0004", "Internal datasources are read-only through the API.")


def _name_taken() -> ApiError:
    return ApiError(
        "FET-1002", "A connection with this configName already exists.", title="Conflict"
    )


#: The fields a validated input and a stored record share, name for name and value for value:
#: read from the record as a PATCH base (:func:`_stored_input`), written back by create and
#: PATCH (:meth:`ConnectionService._merged_record`).
_PLAIN_FIELDS = ("config_name", "type", "host", "port", "database_name", "schema", "user_name")


def _plain_fields(source: ConnectionRecord | ConnectionInput) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _PLAIN_FIELDS}


def _stored_input(record: ConnectionRecord) -> ConnectionInput:
    """The stored record as a PATCH base; secrets are kept out (never re-validated)."""
    ssl = None
    if record.ssl_mode or record.ssl_ca or record.ssl_cert or record.ssl_key_encrypted:
        ssl = SslInput(record.ssl_mode or "", record.ssl_ca, record.ssl_cert)
    return ConnectionInput(**_plain_fields(record), ssl=ssl, metadata=dict(record.metadata))


def _check_retarget(
    record: ConnectionRecord, data: ConnectionInput, body: Mapping[str, object]
) -> None:
    """§2.6.5 step 7a: a kept stored password never follows a new host, port, engine or TLS
    setting unless the caller sends it again (§13 "Credential re-targeting").

    The rule guards the stored password, so it applies only when the merged record would keep
    one: not when the merged type is SQLITE or a MONGODB PATCH removes the credentials (both
    drop the stored password, see :meth:`ConnectionService._patched_secrets`).
    """
    if not record.password_encrypted or data.type == _SQLITE or data.user_name is None:
        return
    retargeted = (
        data.host != record.host
        or data.port != record.port
        or data.type != record.type
        or "ssl" in body
    )
    sent = body.get("password")
    if retargeted and not (isinstance(sent, str) and sent):
        raise retarget_needs_password()


# --- the service --------------------------------------------------------------------------


@dataclass
class ConnectionService:
    """Connection use cases. ``internal`` maps configName → internal descriptor (§9.4) and
    ``internal_tenants`` configName → the tenants that see it (§12.5)."""

    store: MetadataStore
    cipher: CredentialCipher
    registry: ConnectorRegistry
    clock: SystemClock = field(default_factory=SystemClock)
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    internal_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    embedded: bool = False
    sqlite_allowed_dir: str | None = None
    metadata_store_path: str | None = None
    ssrf_guard: bool = False
    schema_cache: SchemaCache = field(default_factory=SchemaCache)
    limiter: ConnectionTestLimiter = field(default_factory=ConnectionTestLimiter)
    started_at: datetime = field(default_factory=lambda: SystemClock().now())
    #: §8.7 step 1 values of the process (keys, service passwords); each connection's own
    #: values are added per use.
    redactor: Redactor = field(default_factory=Redactor)

    # -- create, read, list --------------------------------------------------------------

    def internal_for(self, tenant: str) -> dict[str, ConnectionDescriptor]:
        """The internal datasources ``tenant`` sees, under its IDs (§9.4, §12.5)."""
        return visible_internal(self.internal, self.internal_tenants, tenant)

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

    def _validated(
        self, body: Mapping[str, object], tenant: str, stored: ConnectionRecord | None = None
    ) -> ConnectionInput:
        """The one validation path of create (§2.6.1 steps 3-6) and PATCH (§2.6.5 steps 3 and
        7-8): the body rules (on PATCH merged into ``stored``, then credential re-targeting,
        step 7a), the §2.9 host-literal layer, and configNames taken by the internal
        datasources the tenant sees (§12.5)."""
        if stored is None:
            data = validate_connection_create(
                body,
                embedded=self.embedded,
                sqlite_allowed_dir=self.sqlite_allowed_dir,
                metadata_store_path=self.metadata_store_path,
            )
        else:
            data = validate_connection_patch(
                _stored_input(stored),
                body,
                embedded=self.embedded,
                sqlite_allowed_dir=self.sqlite_allowed_dir,
                metadata_store_path=self.metadata_store_path,
            )
            _check_retarget(stored, data, body)
        self._check_host_literal(data.host)
        if data.config_name in self.internal_for(tenant):
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
        to a stored one (:meth:`_merged_record`), so both write the same fields."""
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
        return self._merged_record(empty, data, body, now)

    def _check_host_literal(self, host: str | None) -> None:
        """§2.9 host-literal layer (create, PATCH) when the guard is on."""
        if self.ssrf_guard and host and is_blocked_host_literal(host):
            raise forbidden_host()

    def _internal_by_id(self, connection_id: str, tenant: str) -> ConnectionDescriptor | None:
        for descriptor in self.internal_for(tenant).values():
            if (descriptor.connection_id or internal_connection_id(descriptor.config_name)) == (
                connection_id
            ):
                return descriptor
        return None

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
        descriptor = self._internal_by_id(connection_id, principal.tenant)
        if descriptor is not None:
            return Target.of_internal(descriptor, self.started_at)
        return Target.stored(await self.get(connection_id, principal))

    async def describe(self, connection_id: str, principal: Principal) -> dict[str, object]:
        """§2.6.4 GET: the ConnectionResponse."""
        origin = (await self.resolve(connection_id, principal)).origin()
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
        internal = self.internal_for(tenant)
        return [
            internal[name]
            for name in sorted(internal)
            if wanted is None or internal[name].type.value.casefold() == wanted
        ]

    # -- PATCH, DELETE, assign -----------------------------------------------------------

    async def _mutable(self, connection_id: str, principal: Principal) -> ConnectionRecord:
        """Existence (404), then internal (409 FET-0004)."""
        if self._internal_by_id(connection_id, principal.tenant) is not None:
            raise _internal_conflict()
        return await self.get(connection_id, principal)

    async def update(
        self, connection_id: str, body: Mapping[str, object], *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.5 steps 2 (``{}``) to 9; drops the cache entries of the old and new name."""
        if not body:
            raise invalid_payload(EMPTY_BODY_MESSAGE)
        check_connection_fields(body)
        record = await self._mutable(connection_id, principal)
        tenant = principal.tenant
        if await self.store.has_active_jobs(record.config_name, tenant=tenant):
            raise _active_jobs("update")
        data = self._validated(body, tenant, record)
        updated = self._merged_record(record, data, body, self.clock.now())
        if not await self._write(self.store.update_connection(updated)):
            raise not_found("connection")
        self.schema_cache.invalidate(record.config_name, updated.config_name, tenant=tenant)
        return connection_response(updated)

    def _merged_record(
        self,
        record: ConnectionRecord,
        data: ConnectionInput,
        body: Mapping[str, object],
        now: datetime,
    ) -> ConnectionRecord:
        """``record`` with ``data`` applied: secrets encrypted only when sent (kept ones stay,
        re-keyed with a version change); SQLITE clears credentials; ``ssl`` replaced only when
        sent."""
        password, ssl_key, version = self._patched_secrets(record, data, body)
        ssl_sent = "ssl" in body
        ssl = data.ssl
        return replace(
            record,
            **_plain_fields(data),
            password_encrypted=password,
            ssl_mode=(ssl.mode if ssl else None) if ssl_sent else record.ssl_mode,
            ssl_ca=(ssl.ca if ssl else None) if ssl_sent else record.ssl_ca,
            ssl_cert=(ssl.cert if ssl else None) if ssl_sent else record.ssl_cert,
            ssl_key_encrypted=ssl_key,
            encryption_key_version=version,
            metadata=dict(data.metadata),  # type: ignore[arg-type]
            updated_at=now,
        )

    def _patched_secrets(
        self, record: ConnectionRecord, data: ConnectionInput, body: Mapping[str, object]
    ) -> tuple[str | None, str | None, str]:
        """``(password, ssl key, key version)`` ciphertexts after a create or PATCH.

        A sent value is encrypted under the current key. A kept value stays as stored, unless
        the record's key version changes with this PATCH: then it is re-encrypted too, so one
        version label fits both ciphertexts (§6.4).
        """
        sqlite = data.type == _SQLITE
        sent_password = data.password if "password" in body else None
        ssl = data.ssl
        sent_key = (ssl.key if ssl else None) if "ssl" in body else None
        kept_password = (  # a MONGODB PATCH may remove both credentials (§2.5)
            None if sqlite or sent_password or data.user_name is None else record.password_encrypted
        )
        kept_key = None if "ssl" in body or sqlite else record.ssl_key_encrypted
        if sent_password is None and sent_key is None:
            return kept_password, kept_key, record.encryption_key_version
        encrypt = self.cipher.encrypt
        password = encrypt(sent_password, record.id) if sent_password else kept_password
        key = encrypt(sent_key, record.id) if sent_key else kept_key
        if record.encryption_key_version != self.cipher.version:
            password = self._rekey(record, password, kept_password)
            key = self._rekey(record, key, kept_key)
        return password, key, self.cipher.version

    def _rekey(self, record: ConnectionRecord, value: str | None, kept: str | None) -> str | None:
        if value is None or value != kept:
            return value
        try:
            plain = self.cipher.decrypt(value, record.id, record.encryption_key_version)
        except CredentialError:
            return value  # unreadable before the PATCH; it stays unreadable
        return self.cipher.encrypt(plain, record.id)

    async def delete(self, connection_id: str, *, principal: Principal) -> None:
        """§2.6.6: path ID (host), existence, internal, active jobs; a soft delete."""
        record = await self._mutable(connection_id, principal)
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
        await self._mutable(connection_id, principal)
        now = self.clock.now()
        tenant = principal.tenant
        if not await self.store.assign_product(connection_id, product, now, tenant=tenant):
            if await self.store.get_connection(connection_id, tenant=tenant) is None:
                raise not_found("connection")
            raise ApiError(
                "FET-1015",
                "The connection is already assigned to a product and cannot be reassigned.",
            )
        return connection_response(await self.get(connection_id, principal))

    # -- connecting (§2.6.7, §2.9, §2.5.1) -----------------------------------------------

    async def test(self, connection_id: str, *, principal: Principal) -> dict[str, object]:
        """§2.6.7 steps 2–5: rate limit (the tenant's buckets, §12.5), resolution, SSRF
        pre-dial, connect and probe."""
        self.limiter.admit(connection_id, tenant=principal.tenant)
        target = await self.resolve(connection_id, principal)
        started = time.monotonic()
        ok = await self._probe_target(target)
        latency = int((time.monotonic() - started) * 1000)
        message = "Connection successful" if ok else TEST_FAILURE_MESSAGE
        status = "success" if ok else "failure"
        return shape(TestResult, {"status": status, "message": message, "latencyMs": latency})

    async def probe(self, record: ConnectionRecord) -> bool:
        """A live test of a stored connection (§3.6 step 14b): ``False`` on a connect failure.

        Raises ``400 FET-0414`` when the SSRF pre-dial blocks the host.
        """
        return await self._probe_target(Target.stored(record))

    async def _probe_target(self, target: Target) -> bool:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                descriptor = await self.prepare(target)
                async with self.session(descriptor) as connector:
                    await connector.probe()
        except (ConnectFailed, EngineError, TimeoutError, OSError) as exc:
            await self._log_failure("connection test failed", target, exc)
            return False
        return True

    def _redactor_for(self, descriptor: ConnectionDescriptor) -> Redactor:
        secrets, hosts = _values(descriptor)
        return self.redactor.with_values(secrets=secrets, hosts=hosts)

    def _target_redactor(self, target: Target) -> Redactor:
        """Before a descriptor exists: the process values and the stored host."""
        host = target.record.host if target.record else None
        return self.redactor.with_values(hosts=[host] if host else [])

    async def _log_failure(self, what: str, target: Target, exc: BaseException) -> None:
        """Log a connect or discovery failure. Its detail is redacted here, once, with the
        values of the connection (§8.7), off the event loop when long (§13 "Blocking work");
        the log formatter does not redact it again."""
        redactor = self._target_redactor(target)
        if isinstance(exc, ConnectFailed):
            detail, redactor = exc.detail, exc.redactor or redactor
        else:
            detail = _detail(exc)
        text = await redactor.redact_async(detail)
        log.info("%s: %s: %s", what, target.config_name, text, extra=LOG_REDACTED)

    async def prepare(self, target: Target) -> ConnectionDescriptor:
        """Ready a target for one connect: SQLITE re-check, SSRF pre-dial, decryption.

        Under the guard the host is resolved once and the vetted address is pinned on the
        returned descriptor (§2.9.1 rule 3), so the connector never resolves the name again.
        Raises ``400 FET-0414`` when the guard blocks the host, :class:`ConnectFailed` for
        every connect failure that happens before dialing (a DNS failure included).
        """
        record = target.origin()
        if isinstance(record, ConnectionDescriptor):
            return record  # §2.9: the guard never applies to internal datasources
        if record.type == _SQLITE and not self._sqlite_ok(record.database_name):
            raise ConnectFailed("SQLite file is not readable in the allowed directory")
        host = record.host if self.ssrf_guard else None
        addresses = await self._predial(host, record.port) if host else ()
        try:
            descriptor = descriptor_from_record(record, self.cipher)
        except CredentialError as exc:
            raise ConnectFailed(exc.reason) from None
        if not addresses:
            return descriptor
        return replace(descriptor, pinned_address=addresses[0], resolved_addresses=addresses)

    @staticmethod
    async def _predial(host: str, port: int | None) -> tuple[str, ...]:
        """§2.9 pre-dial through :func:`~fetcher.services.ssrf.vet_host`: a blocked host →
        ``400 FET-0414``; a DNS failure → :class:`ConnectFailed`. Returns every vetted address,
        the one to pin first."""
        try:
            return await vet_host_addresses(host, port)
        except BlockedHostError:
            raise forbidden_host() from None
        except HostResolutionError as exc:
            raise ConnectFailed(exc.detail) from None  # redacted where logged, with the host

    def _sqlite_ok(self, path: str) -> bool:
        """§2.5.1 re-check before every open of a stored SQLITE connection."""
        allowed = self.sqlite_allowed_dir
        return (
            self.embedded
            and allowed is not None
            and sqlite_location_ok(
                path, allowed_dir=allowed, metadata_store_path=self.metadata_store_path
            )
        )

    @asynccontextmanager
    async def session(self, descriptor: ConnectionDescriptor) -> AsyncIterator[Connector]:
        """An open connector; a failure to build or open it (10 s) is :class:`ConnectFailed`."""
        try:
            connector = self.registry.connector_for(descriptor)
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                await connector.__aenter__()
        except (EngineError, TimeoutError, OSError) as exc:
            raise ConnectFailed(_detail(exc), self._redactor_for(descriptor)) from None
        try:
            yield connector
        except (EngineError, OSError) as exc:
            raise ConnectFailed(_detail(exc), self._redactor_for(descriptor)) from None
        finally:
            await connector.__aexit__(None, None, None)

    # -- schema discovery (§2.6.8, §2.6.9, §2.7) -----------------------------------------

    async def schema(
        self, connection_id: str, schemas: str | None, *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.8: fresh discovery (no cache), 30 s; 502 FET-1041 / FET-1042 on failure."""
        requested = rules.parse_schemas_param(schemas)
        target = await self.resolve(connection_id, principal)
        scope = schema_scope(target.type, requested, target.schema)
        try:
            discovered = await self._discover(target, scope)
        except _DiscoveryFailed as exc:
            await self._log_failure("schema discovery failed", target, exc)
            raise ApiError("FET-1042", SCHEMA_DISCOVERY_MESSAGE) from None
        except ConnectFailed as exc:
            await self._log_failure("schema connect failed", target, exc)
            raise ApiError("FET-1041", TEST_FAILURE_MESSAGE) from None
        return schema_body(
            connection_id=target.id,
            config_name=target.config_name,
            database_name=target.database_name,
            engine=target.type,
            discovered=discovered,
        )

    async def _discover(self, target: Target, scope: Sequence[str]) -> DiscoveredSchema:
        """Connect (10 s) and discover ``scope`` (30 s). Raises FET-0414, :class:`ConnectFailed`
        or :class:`_DiscoveryFailed`."""
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                descriptor = await self.prepare(target)
        except TimeoutError:
            raise ConnectFailed("timed out") from None
        async with self.session(descriptor) as connector:
            try:
                async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                    return await connector.discover(scope)
            except (EngineError, TimeoutError, OSError) as exc:
                raise _DiscoveryFailed(_detail(exc), self._redactor_for(descriptor)) from None

    async def validate_schema(
        self, body: Mapping[str, object], *, principal: Principal
    ) -> dict[str, object]:
        """§2.6.9: body checks, resolution (FET-1062), then per-datasource checks through the
        tenant's §2.7 cache entries; inconsistencies → ``422 FET-1060`` with the sorted
        ``errors``."""
        mapped = rules.check_validation_body(body)
        names = sorted(mapped)
        targets = [await self._resolve_name(name, principal) for name in names]
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

    async def _resolve_name(self, name: str, principal: Principal) -> Target | None:
        """Internal, then stored; a name that is both is ambiguous and does not resolve. Only
        the internal datasources the tenant sees and the stored connections the caller may
        reach (§12.4: a restricted token's products; §12.5: its tenant) count."""
        record = await self.store.get_connection_by_name(name, tenant=principal.tenant)
        if record is not None and not principal.may_act_for(record.product_name):
            record = None
        descriptor = self.internal_for(principal.tenant).get(name)
        if record is not None and descriptor is not None:
            return None
        if descriptor is not None:
            return Target.of_internal(descriptor, self.started_at)
        return Target.stored(record) if record is not None else None

    async def _datasource_errors(
        self, name: str, target: Target | None, tables: Mapping[str, Sequence[str]], tenant: str
    ) -> list[dict[str, str]]:
        if target is None:
            return [{"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": name}]
        scope = requested_scope(target.type, name, tables)
        discovered = self.schema_cache.get(name, scope, target.updated_at, tenant=tenant)
        if discovered is None:
            try:
                discovered = await self._discover(target, scope)
            except (ApiError, ConnectFailed) as exc:
                await self._log_failure("validate-schema discovery failed", target, exc)
                return [{"type": "DATA_SOURCE_DOWN", "dataSourceId": name}]
            self.schema_cache.put(name, scope, target.updated_at, discovered, tenant=tenant)
        return datasource_errors(name, target.type, discovered, tables)
