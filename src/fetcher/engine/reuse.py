"""One connection per datasource for a whole run (contract §4.3 steps 2 and 3).

``Engine.run`` plans and executes in one call, so a datasource's tables are extracted on the
connection it was planned with (step 2 connects and discovers; step 3 runs "tables inside a
datasource ... sequentially on one connection") instead of connecting a second time: one
connect per datasource and job, not two (a TLS handshake and a login against the customer's
server each time).

:class:`ReusedConnectors` is the ``ConnectorRegistry`` the run hands the planner and the runner.
It keeps the connectors of the datasources extracted first, the first ``maxConcurrency`` in
code-point order of their names (the order both steps take them in): such a connector that
exits planning cleanly is parked, and its extraction takes it instead of connecting. Every other
connector closes when it exits, as does one that exits with an error, and whatever is still
parked closes when the run ends, however it ends. So at most ``maxConcurrency`` connections wait
between the two steps, and no datasource ever has two. Connectors are matched by the identity of
their descriptor, which the plan carries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import (
    Connector,
    ConnectorRegistry,
    Row,
    TableQuery,
    discover_named,
)
from fetcher.engine.types import DiscoveredSchema

__all__ = ["ReusedConnectors"]


class ReusedConnectors:
    """A ``ConnectorRegistry`` over ``registry`` for one run (see the module)."""

    def __init__(self, registry: ConnectorRegistry, keep: Sequence[ConnectionDescriptor]) -> None:
        """``keep``: the descriptors whose connector waits from planning for extraction."""
        self._registry = registry
        self._keep = list(keep)
        self._parked: list[tuple[ConnectionDescriptor, Connector]] = []

    def connector_for(self, connection: ConnectionDescriptor) -> _Lease:
        return _Lease(self, connection)

    async def aclose(self) -> None:
        """Close every parked connector (safe to call again)."""
        parked, self._parked = self._parked, []
        await _close(parked)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _take(self, connection: ConnectionDescriptor) -> Connector | None:
        for index, (parked, connector) in enumerate(self._parked):
            if parked is connection:
                del self._parked[index]
                return connector
        return None

    def _release(self, connection: ConnectionDescriptor, connector: Connector) -> bool:
        """Park ``connector`` if its datasource is kept (once); ``False``: close it."""
        for index, kept in enumerate(self._keep):
            if kept is connection:
                del self._keep[index]
                self._parked.append((connection, connector))
                return True
        return False

    async def _open(self, connection: ConnectionDescriptor) -> Connector:
        parked = self._take(connection)
        if parked is not None:
            return parked
        return await self._registry.connector_for(connection).__aenter__()


async def _close(entries: Sequence[tuple[ConnectionDescriptor, Connector]]) -> None:
    """Close each connector; an error of one does not keep the others open."""
    async with AsyncExitStack() as stack:
        for _, connector in entries:
            stack.push_async_exit(connector)


class _Lease:
    """One use of a datasource's connector: the parked one if there is one, else a new one."""

    def __init__(self, owner: ReusedConnectors, connection: ConnectionDescriptor) -> None:
        self._owner = owner
        self._connection = connection
        self._connector: Connector | None = None

    async def __aenter__(self) -> Self:
        self._connector = await self._owner._open(self._connection)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        connector, self._connector = self._connector, None
        if connector is None:
            return
        if exc_type is None and self._owner._release(self._connection, connector):
            return
        await connector.__aexit__(exc_type, exc, tb)

    async def probe(self) -> None:
        await self._open().probe()

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        return await self._open().discover(schemas)

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema:
        return await discover_named(self._open(), schemas, names)

    def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        return self._open().stream(query)

    def _open(self) -> Connector:
        if self._connector is None:
            raise RuntimeError("the connector is used outside its 'async with' block")
        return self._connector
