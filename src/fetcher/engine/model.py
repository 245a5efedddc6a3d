"""The engine's request and connection values (contract §1.4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fetcher.engine.filters.ast import FilterSpec
from fetcher.engine.limits import DEFAULT_LIMITS, Limits
from fetcher.engine.types import EngineType

__all__ = ["ConnectionDescriptor", "ExtractionRequest", "ExtractionResult", "TlsSettings"]

_EMPTY: Mapping[str, object] = MappingProxyType({})
_EMPTY_COUNTS: Mapping[str, Mapping[str, int]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """``ssl`` of a connection (§2.5, §11.2). ``key`` is a secret and never shown by ``repr``."""

    mode: str
    ca: str | None = None
    cert: str | None = None
    key: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        ca = "<pem>" if self.ca else None
        cert = "<pem>" if self.cert else None
        key = "[redacted]" if self.key else None
        return f"TlsSettings(mode={self.mode!r}, ca={ca!r}, cert={cert!r}, key={key!r})"


@dataclass(frozen=True, slots=True)
class ConnectionDescriptor:
    """Everything a connector needs to open one datasource, credentials decrypted.

    ``repr()`` MUST NOT show the password or the TLS key (§1.4): both are redacted below.
    ``database`` is the file path for ``SQLITE``. ``pinned_address`` is the IP address the
    SSRF pre-dial vetted (§2.9.1 rule 3): when set, a connector dials it and keeps ``host`` only
    for TLS SNI and hostname verification, so the name is never resolved a second time.
    ``resolved_addresses`` are every address that pre-dial saw (the pinned one first); they
    are only known to redaction (§8.7 step 1, §13 "Worker redaction"), never dialled.
    """

    config_name: str
    type: EngineType
    host: str | None = None
    port: int | None = None
    database: str = ""
    schema: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl: TlsSettings | None = None
    metadata: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    internal: bool = False
    connection_id: str | None = None
    pinned_address: str | None = None
    resolved_addresses: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return (
            f"ConnectionDescriptor(config_name={self.config_name!r}, type={self.type.value!r}, "
            f"host={self.host!r}, port={self.port!r}, database={self.database!r}, "
            f"schema={self.schema!r}, username={self.username!r}, "
            f"password={'[redacted]' if self.password else None!r}, ssl={self.ssl!r}, "
            f"internal={self.internal!r}, pinned_address={self.pinned_address!r})"
        )

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        """The secret values of this connection, for redaction (§8.7 step 1)."""
        values = [self.password, self.ssl.key if self.ssl else None]
        return tuple(v for v in values if v)


@dataclass(frozen=True, slots=True)
class ExtractionRequest:
    """One job as the engine sees it.

    ``mapped_fields`` is ``{configName: {tableKey: [field, …]}}`` as submitted; ``filters`` is
    the parsed AST; ``limits`` are the effective limits (already lowered by the request).
    """

    job_id: str
    mapped_fields: Mapping[str, Mapping[str, tuple[str, ...]]]
    filters: FilterSpec = field(default_factory=lambda: MappingProxyType({}))
    limits: Limits = DEFAULT_LIMITS
    metadata: Mapping[str, object] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What ``Engine.execute`` produced: the document bytes went to the ``ResultSink``.

    ``table_rows`` is ``{datasource: {tableKey: rows}}`` in document order: the same counts as
    the document's arrays (the job's result summary, contract §14.1).
    """

    row_count: int
    size_bytes: int
    sha256: str
    table_rows: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: _EMPTY_COUNTS)
