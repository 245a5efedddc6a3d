"""``Engine.run`` extracts each datasource on the connection it was planned with (§4.3 steps 2
and 3, :mod:`fetcher.engine.reuse`): one connect per datasource, never more connections open
than ``maxConcurrency`` would allow, and every connector closed however the run ends. Planning
asks a connector that can (``NamedDiscovery``) for the requested tables only."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import pytest

from fetcher.engine import ConnectionDescriptor, Engine, EngineError, ExtractionRequest, Limits
from fetcher.engine.reuse import ReusedConnectors
from fetcher.engine.testing import FakeConnector, FakeDatabase, FakeRegistry, MemorySink
from fetcher.engine.types import DiscoveredSchema
from tests.unit.engine.test_engine import _connections, _pg, _request

NAMES = ("a", "b", "c")


def _world(*names: str) -> tuple[FakeRegistry, dict[str, FakeDatabase]]:
    databases = {name: _pg() for name in names}
    return FakeRegistry(databases), databases


def _job(*names: str, **limits: int) -> ExtractionRequest:
    return _request({name: {"accounts": ["id"]} for name in names}, limits=Limits(**limits))


def _counts(databases: dict[str, FakeDatabase]) -> dict[str, tuple[int, int]]:
    return {name: (db.opened, db.closed) for name, db in databases.items()}


async def test_each_datasource_connects_once_and_is_closed() -> None:
    registry, databases = _world(*NAMES)
    sink = MemorySink()
    await Engine(registry).run(_job(*NAMES), _connections(*NAMES), sink)
    assert _counts(databases) == dict.fromkeys(NAMES, (1, 1))
    assert all(db.streamed == ["accounts"] for db in databases.values())
    # plan and execute called apart connect twice, as the contract's API leaves them
    registry, databases = _world(*NAMES)
    engine = Engine(registry)
    plan = await engine.plan(_job(*NAMES), _connections(*NAMES))
    apart = MemorySink()
    await engine.execute(plan, apart)
    assert _counts(databases) == dict.fromkeys(NAMES, (2, 2))
    assert sink.data == apart.data


async def test_beyond_max_concurrency_a_planned_connection_is_not_kept_waiting() -> None:
    """Only the datasources extracted first keep their connection: the others close after
    planning and connect again when their turn comes, so at most ``maxConcurrency`` are open
    during extraction, as before."""
    registry, databases = _world(*NAMES)
    open_during_extraction: list[int] = []
    for db in databases.values():
        db.delay = 0.05

    async def watch() -> None:
        while True:
            open_during_extraction.append(sum(d.opened - d.closed for d in databases.values()))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        await Engine(registry).run(
            _job(*NAMES, max_concurrency=1), _connections(*NAMES), MemorySink()
        )
    finally:
        watcher.cancel()
    assert _counts(databases) == {"a": (1, 1), "b": (2, 2), "c": (2, 2)}
    assert max(open_during_extraction[5:]) == 1


@pytest.mark.parametrize("stage", ["discover", "stream"])
async def test_every_connector_closes_when_a_run_fails(stage: str) -> None:
    registry, databases = _world(*NAMES)
    databases["b"].fail_on[stage] = "boom"
    with pytest.raises(EngineError):
        await Engine(registry).run(_job(*NAMES), _connections(*NAMES), MemorySink())
    assert all(db.opened == db.closed for db in databases.values())
    if stage == "discover":  # planning still ran for every datasource, nothing was extracted
        assert [db.opened for db in databases.values()] == [1, 1, 1]
        assert all(db.streamed == [] for db in databases.values())


async def test_a_validation_failure_closes_the_planned_connections() -> None:
    registry, databases = _world(*NAMES)
    request = _request({name: {"ghost": ["id"]} for name in NAMES})
    with pytest.raises(EngineError, match="table 'ghost' not found"):
        await Engine(registry).run(request, _connections(*NAMES), MemorySink())
    assert _counts(databases) == dict.fromkeys(NAMES, (1, 1))


async def test_a_timeout_closes_the_planned_connections() -> None:
    registry, databases = _world(*NAMES)
    databases["c"].delay = 5.0
    with pytest.raises(EngineError, match="execution exceeded its deadline"):
        await Engine(registry).run(
            _job(*NAMES, timeout_seconds=1), _connections(*NAMES), MemorySink()
        )
    assert all(db.opened == db.closed for db in databases.values())


async def test_a_lease_is_usable_only_inside_its_block() -> None:
    registry, _ = _world("a")
    reused = ReusedConnectors(registry, keep=())
    lease = reused.connector_for(_connections("a")["a"])
    with pytest.raises(RuntimeError, match="outside its 'async with' block"):
        await lease.discover([])
    await reused.aclose()


#: What the naming fake was asked: (schemas, names) per discovery.
ASKED: list[tuple[list[str], list[str]]] = []


class NamedFakeConnector(FakeConnector):
    """A fake with the ``NamedDiscovery`` capability: it records what it was asked."""

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        raise AssertionError("whole discovery asked for although the connector names tables")

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema:
        ASKED.append((list(schemas), list(names)))
        whole = await super().discover(schemas)
        return replace(whole, tables=tuple(t for t in whole.tables if t.name in names))


class NamedFakeRegistry(FakeRegistry):
    def connector_for(self, connection: ConnectionDescriptor) -> FakeConnector:
        return NamedFakeConnector(connection, self.databases[connection.config_name])


async def test_planning_asks_a_naming_connector_for_the_requested_tables_only() -> None:
    """The planner hands a ``NamedDiscovery`` connector the requested names (also through a
    reused connection) and plans the same job as from whole discovery."""
    mapped = {"pg": {"accounts": ["id"], "accounting.invoices": ["*"], "ghost": ["id"]}}
    ASKED.clear()
    with pytest.raises(EngineError) as named:
        await Engine(NamedFakeRegistry({"pg": _pg()})).run(
            _request(mapped), _connections("pg"), MemorySink()
        )
    with pytest.raises(EngineError) as whole:
        await Engine(FakeRegistry({"pg": _pg()})).run(
            _request(mapped), _connections("pg"), MemorySink()
        )
    assert named.value.text() == whole.value.text()  # "table 'ghost' not found …"
    assert ASKED == [(["accounting", "public"], ["accounts", "invoices", "ghost"])]
    del mapped["pg"]["ghost"]
    named_sink, whole_sink = MemorySink(), MemorySink()
    await Engine(NamedFakeRegistry({"pg": _pg()})).run(
        _request(mapped), _connections("pg"), named_sink
    )
    await Engine(FakeRegistry({"pg": _pg()})).run(_request(mapped), _connections("pg"), whole_sink)
    assert named_sink.data == whole_sink.data
