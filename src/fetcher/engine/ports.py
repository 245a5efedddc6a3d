"""The engine's ports: what the world must provide, and what each implementation MUST do.

The engine does no I/O of its own. Hosts hand it implementations of these Protocols; in-memory
fakes of every port live in ``fetcher.engine.testing``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from fetcher.engine.filters.ast import BoundFieldFilter
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.types import Column, DiscoveredSchema, TableSchema

__all__ = [
    "Clock",
    "Connector",
    "ConnectorRegistry",
    "NamedDiscovery",
    "ResultSink",
    "Row",
    "Spool",
    "SpoolFactory",
    "TableQuery",
    "discover_named",
]

#: One result row: catalog column name → a JSON-ready value already encoded per §5.3
#: (``None``, ``bool``, ``int``, ``float``, ``str``, lists and dicts of those, or the exact
#: number marker of ``fetcher.engine.values``).
Row = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class TableQuery:
    """One table to read: the discovered table, the projected columns, the bound filters."""

    table: TableSchema
    columns: tuple[Column, ...]
    filters: tuple[BoundFieldFilter, ...] = ()


@runtime_checkable
class Connector(Protocol):
    """An open (after ``__aenter__``) read-only session on one datasource.

    Implementations MUST:
    * connect in ``__aenter__`` within 10 s, with read-only intent and a UTC session time zone
      where the engine has them (§11.1), passing connection parameters as keyword arguments,
      never as a concatenated DSN (§2.9.1); a failure raises ``EngineError(CONNECT)`` whose
      ``detail`` is the driver text (the host redacts it) and whose message is
      ``failed to connect to datasource '<ds>'``;
    * issue only read-only statements;
    * raise ``EngineError(UNAVAILABLE)`` with message ``failed to discover datasource schema
      '<ds>'`` from ``discover`` and ``failed to query datasource '<ds>'`` from ``stream``;
    * never put a password, TLS key or DSN in an exception message or a log line;
    * close everything in ``__aexit__``, safely when called twice.
    """

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def probe(self) -> None:
        """Run the trivial probe (``SELECT 1`` / ``ping``, §2.6.7)."""
        ...

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """Discover tables, views and columns in ``schemas`` (ignored where the engine has one
        namespace, §3.3), excluding system objects (§11.3)."""
        ...

    def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Yield the table's rows in batches, through a server-side cursor, each row keyed by
        the catalog spelling of the projected columns and encoded per §5.3."""
        ...


@runtime_checkable
class NamedDiscovery(Protocol):
    """A connector that can discover only the tables a job names (an optional capability).

    A job names a few tables; a schema may hold thousands, and discovering all of them made
    planning grow with the schema (2,000 tables: about 100 ms a job on PostgreSQL). The result
    MUST hold every table of ``schemas`` that §3.3 catalog matching (``find_table``) could match
    to one of ``names`` (as requested), with all its columns; it MAY hold others. A connector
    without this method is asked for whole schemas (:func:`discover_named`).
    """

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema: ...


async def discover_named(
    connector: Connector, schemas: Sequence[str], names: Sequence[str]
) -> DiscoveredSchema:
    """``schemas`` discovered for the tables ``names`` (:class:`NamedDiscovery`), or whole."""
    if isinstance(connector, NamedDiscovery):
        return await connector.discover_tables(schemas, names)
    return await connector.discover(schemas)


class ConnectorRegistry(Protocol):
    """Builds (unopened) connectors. MUST raise ``EngineError(VALIDATION)`` for a type it does
    not support, with message ``datasource type <T> is not supported``."""

    def connector_for(self, connection: ConnectionDescriptor) -> Connector: ...


class ResultSink(Protocol):
    """Receives the final document bytes in order. The host decides what a chunk becomes (HMAC,
    encryption, upload). ``write`` raises ``EngineError(UNAVAILABLE)`` on a storage failure.

    Writes begin while extraction still runs (§4.3.1 direct streaming of the first datasource):
    when execution raises, the host MUST discard whatever the sink received (no object)."""

    async def write(self, chunk: bytes) -> None: ...


class Spool(Protocol):
    """A per-datasource buffer of serialized result bytes with a running count (§4.3.1).

    Implementations MUST keep what they hold out of plaintext on disk, and MUST discard all
    held data in ``close`` (safe to call twice)."""

    @property
    def size(self) -> int: ...

    async def write(self, data: bytes) -> None: ...

    def read(self) -> AsyncIterator[bytes]:
        """Yield everything written, in order. Called at most once, after the last write."""
        ...

    async def close(self) -> None: ...


class SpoolFactory(Protocol):
    def create(self) -> Spool: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC now."""
        ...

    def monotonic(self) -> float: ...


#: A map from datasource configName to its descriptor, as handed to ``Engine.plan``.
Connections = Mapping[str, ConnectionDescriptor]
