"""Connection use cases (contract §2.5, §2.6): create, read, list, test, and the descriptors
the engine needs (credentials decrypted only in memory, §6.4).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from fetcher.engine import ConnectionDescriptor, ConnectorRegistry, EngineError
from fetcher.engine.model import TlsSettings
from fetcher.engine.types import EngineType
from fetcher.services.connection_validation import ConnectionInput, validate_connection_create
from fetcher.services.credentials import CredentialCipher, CredentialError
from fetcher.services.errors import ApiError
from fetcher.services.ports import ConflictError, MetadataStore
from fetcher.services.records import ConnectionQuery, ConnectionRecord
from fetcher.services.timeutil import SystemClock, format_ms, new_id

__all__ = [
    "ConnectionService",
    "TEST_FAILURE_MESSAGE",
    "connection_response",
    "descriptor_from_record",
]

TEST_FAILURE_MESSAGE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)
CONNECT_TIMEOUT_SECONDS = 10
_NOT_FOUND = (
    "It was not possible to find the connection entity during the requested flow. "
    "Please review the data provided in the request."
)


def not_found(entity: str) -> ApiError:
    return ApiError("FET-1001", _NOT_FOUND.replace("connection", entity))


def connection_response(record: ConnectionRecord) -> dict[str, object]:
    """§2.5 ConnectionResponse: empty optional members omitted; secrets never returned."""
    body: dict[str, object] = {"id": record.id}
    if record.product_name:
        body["productName"] = record.product_name
    body |= {"configName": record.config_name, "type": record.type}
    if record.type != EngineType.SQLITE.value:
        body |= {"host": record.host, "port": record.port}
    body["databaseName"] = record.database_name
    if record.schema:
        body["schema"] = record.schema
    if record.type != EngineType.SQLITE.value and record.user_name is not None:
        body["userName"] = record.user_name
    if record.ssl_mode or record.ssl_ca or record.ssl_cert or record.ssl_key_encrypted:
        body["ssl"] = {"mode": record.ssl_mode or ""}
    if record.metadata:
        body["metadata"] = dict(record.metadata)
    body |= {
        "internal": False,
        "createdAt": format_ms(record.created_at),
        "updatedAt": format_ms(record.updated_at),
    }
    return body


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


@dataclass
class ConnectionService:
    store: MetadataStore
    cipher: CredentialCipher
    registry: ConnectorRegistry
    clock: SystemClock = field(default_factory=SystemClock)
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    embedded: bool = False
    sqlite_allowed_dir: str | None = None
    metadata_store_path: str | None = None

    async def create(self, body: Mapping[str, object], product: str) -> ConnectionRecord:
        """§2.6.1 steps 3–7 (the header and body parse ran in the host)."""
        data = validate_connection_create(
            body,
            embedded=self.embedded,
            sqlite_allowed_dir=self.sqlite_allowed_dir,
            metadata_store_path=self.metadata_store_path,
        )
        if data.config_name in self.internal:
            raise _name_taken()
        record = self._new_record(data, product)
        try:
            await self.store.insert_connection(record)
        except ConflictError:
            raise _name_taken() from None
        return record

    def _new_record(self, data: ConnectionInput, product: str) -> ConnectionRecord:
        now = self.clock.now()
        connection_id = new_id()
        ssl = data.ssl
        return ConnectionRecord(
            id=connection_id,
            product_name=product,
            config_name=data.config_name,
            type=data.type,
            host=data.host,
            port=data.port,
            database_name=data.database_name,
            schema=data.schema,
            user_name=data.user_name,
            password_encrypted=(
                self.cipher.encrypt(data.password, connection_id) if data.password else None
            ),
            ssl_mode=ssl.mode if ssl else None,
            ssl_ca=ssl.ca if ssl else None,
            ssl_cert=ssl.cert if ssl else None,
            ssl_key_encrypted=(
                self.cipher.encrypt(ssl.key, connection_id) if ssl and ssl.key else None
            ),
            encryption_key_version=self.cipher.version,
            metadata=dict(data.metadata),  # type: ignore[arg-type]
            created_at=now,
            updated_at=now,
        )

    async def get(self, connection_id: str) -> ConnectionRecord:
        record = await self.store.get_connection(connection_id)
        if record is None:
            raise not_found("connection")
        return record

    async def list(self, query: ConnectionQuery) -> tuple[list[ConnectionRecord], int]:
        return await self.store.list_connections(query)

    async def test(self, connection_id: str) -> dict[str, object]:
        """§2.6.7 step 5: connect and probe within 10 s; a failure is ``200 failure``."""
        record = await self.get(connection_id)
        started = time.monotonic()
        ok = await self.probe(record)
        latency = int((time.monotonic() - started) * 1000)
        if ok:
            return {"status": "success", "message": "Connection successful", "latencyMs": latency}
        return {"status": "failure", "message": TEST_FAILURE_MESSAGE, "latencyMs": latency}

    async def probe(self, record: ConnectionRecord) -> bool:
        """A live test: decrypt, connect and probe within 10 s. Never raises."""
        try:
            descriptor = descriptor_from_record(record, self.cipher)
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                async with self.registry.connector_for(descriptor) as connector:
                    await connector.probe()
        except (CredentialError, EngineError, TimeoutError, OSError):
            return False
        return True


def _name_taken() -> ApiError:
    return ApiError(
        "FET-1002", "A connection with this configName already exists.", title="Conflict"
    )
