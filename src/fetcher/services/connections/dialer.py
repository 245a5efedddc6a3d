"""Opening a connection for the Manager's live uses (contract §2.5.1, §2.6.7, §2.6.8, §2.9).

:class:`ConnectionDialer` readies a :class:`Target` for one connect (the SQLITE re-check, the
SSRF pre-dial with the vetted address pinned, credentials decrypted in memory, §6.4), opens a
connector within 10 s, discovers a schema within 30 s, and logs a failure once, redacted with
the connection's own values (§8.7). The live test and schema discovery both dial through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

from fetcher.crypto import Redactor
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.engine import ConnectionDescriptor, Connector, ConnectorRegistry, EngineError
from fetcher.engine.kit import DiscoveredSchema, EngineType
from fetcher.services.connections.credentials import CredentialCipher, CredentialError
from fetcher.services.connections.directory import Target
from fetcher.services.connections.sqlite_files import SqlitePolicy
from fetcher.services.connections.ssrf import (
    BlockedHostError,
    HostResolutionError,
    vet_host_addresses,
)
from fetcher.services.connections.stored import descriptor_from_record
from fetcher.services.errors import forbidden_host

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DISCOVERY_TIMEOUT_SECONDS",
    "ConnectFailed",
    "ConnectionDialer",
    "DiscoveryFailed",
]

#: The logger of the connection use cases: each line keeps its ``logger`` field (§8.7 logs)
#: as it was before they were split into modules.
log = logging.getLogger("fetcher.services.connections.use_cases")

CONNECT_TIMEOUT_SECONDS = 10
DISCOVERY_TIMEOUT_SECONDS = 30
_SQLITE = EngineType.SQLITE.value


class ConnectFailed(Exception):
    """A connect failure (decryption, SQLITE re-check, DNS under the guard, driver, timeout).

    ``detail`` is the raw driver text; ``redactor`` knows the values of the connection it came
    from. It is redacted once, where it is logged (§8.7), and never shown by ``str()``.
    """

    def __init__(self, detail: str, redactor: Redactor | None = None) -> None:
        super().__init__("connect failed")
        self.detail = detail
        self.redactor = redactor


class DiscoveryFailed(ConnectFailed):
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


@dataclass
class ConnectionDialer:
    """Connects to targets. ``redactor`` holds the §8.7 step 1 values of the process (keys,
    service passwords); each connection's own values are added per use."""

    cipher: CredentialCipher
    registry: ConnectorRegistry
    sqlite: SqlitePolicy = field(default_factory=SqlitePolicy)
    ssrf_guard: bool = False
    redactor: Redactor = field(default_factory=Redactor)

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
        if record.type == _SQLITE and not self.sqlite.allows(record.database_name):
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
        """§2.9 pre-dial through :func:`~fetcher.services.connections.ssrf.vet_host`: a blocked
        host →
        ``400 FET-0414``; a DNS failure → :class:`ConnectFailed`. Returns every vetted address,
        the one to pin first."""
        try:
            return await vet_host_addresses(host, port)
        except BlockedHostError:
            raise forbidden_host() from None
        except HostResolutionError as exc:
            raise ConnectFailed(exc.detail) from None  # redacted where logged, with the host

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

    async def discover(self, target: Target, scope: Sequence[str]) -> DiscoveredSchema:
        """Connect (10 s) and discover ``scope`` (30 s). Raises FET-0414, :class:`ConnectFailed`
        or :class:`DiscoveryFailed`."""
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
                raise DiscoveryFailed(_detail(exc), self._redactor_for(descriptor)) from None

    async def log_failure(self, what: str, target: Target, exc: BaseException) -> None:
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

    def _redactor_for(self, descriptor: ConnectionDescriptor) -> Redactor:
        secrets, hosts = _values(descriptor)
        return self.redactor.with_values(secrets=secrets, hosts=hosts)

    def _target_redactor(self, target: Target) -> Redactor:
        """Before a descriptor exists: the process values and the stored host."""
        host = target.record.host if target.record else None
        return self.redactor.with_values(hosts=[host] if host else [])
