"""§2.9 / §2.9.1 in the Worker: with ``SSRF_GUARD_ENABLED=true`` the Worker resolves each stored
datasource host once, fails the job when any address is blocked or DNS fails, and hands the
connector the vetted address. Internal datasources are never guarded (§9.4).

The Manager's live test is bypassed by submitting with the guard off (as a Manager without the
guard would, or before DNS changed); the Worker then runs with the guard on.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fetcher.engine import ConnectionDescriptor, Engine
from fetcher.engine.testing import FakeConnector, FakeDatabase, FakeRegistry
from fetcher.engine.types import EngineType
from fetcher.services.connections import ssrf
from fetcher.services.testing import FakeDns
from tests.unit.worker.conftest import ACCOUNTS, World

MAPPED = {"pg": {"accounts": ["id", "email"]}}
PUBLIC = "93.184.216.34"
BLOCKED_TEXT = (
    "failed to connect to datasource 'pg': host is not a valid external database endpoint"
)


class RecordingRegistry(FakeRegistry):
    """A FakeRegistry that remembers every descriptor it was asked to open."""

    def __init__(self, databases: dict[str, FakeDatabase]) -> None:
        super().__init__(databases)
        self.opened: list[ConnectionDescriptor] = []

    def connector_for(self, connection: ConnectionDescriptor) -> FakeConnector:
        self.opened.append(connection)
        return super().connector_for(connection)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns(with_port=False)
    monkeypatch.setattr(ssrf, "resolve_host", fake)
    return fake


@pytest.fixture
def registry(world: World) -> RecordingRegistry:
    """Guard on, with a recording registry behind the Worker's engine."""
    recording = RecordingRegistry({"pg": world.database})
    world.extraction.engine = Engine(recording)
    world.extraction.ssrf_guard = True
    return recording


async def _run(world: World) -> tuple[str, str | None]:
    job_id = await world.submit(MAPPED)
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    return job.status, job.error


async def test_the_vetted_address_is_pinned(
    world: World, registry: RecordingRegistry, dns: FakeDns
) -> None:
    dns.answers[world.connection.host or ""] = [PUBLIC, "2606:2800:220:1::1"]
    status, error = await _run(world)
    assert (status, error) == ("completed", None)
    assert registry.opened
    assert {d.pinned_address for d in registry.opened} == {PUBLIC}
    assert {d.host for d in registry.opened} == {world.connection.host}
    assert dns.calls == [world.connection.host]  # resolved once


@pytest.mark.parametrize(
    "answer", [["10.0.0.8"], [PUBLIC, "::ffff:127.0.0.1"], ["::ffff:169.254.169.254"]]
)
async def test_a_blocked_resolution_fails_the_job(
    world: World, registry: RecordingRegistry, dns: FakeDns, answer: list[str]
) -> None:
    dns.answers[world.connection.host or ""] = answer
    status, error = await _run(world)
    assert (status, error) == ("failed", BLOCKED_TEXT)
    assert registry.opened == []
    await world.relay.drain_all()
    ((routing_key, body, _),) = world.publisher.events
    assert routing_key == "job.failed"
    assert json.loads(body)["metadata"]["error"] == {"message": BLOCKED_TEXT}


async def test_a_blocked_literal_fails_without_resolving(
    world: World, registry: RecordingRegistry, dns: FakeDns
) -> None:
    await world.store.update_connection(replace(world.connection, host="127.0.0.1"))
    status, error = await _run(world)
    assert (status, error) == ("failed", BLOCKED_TEXT)
    assert dns.calls == []
    assert registry.opened == []


async def test_a_dns_failure_fails_the_job_without_dialing(
    world: World, registry: RecordingRegistry, dns: FakeDns
) -> None:
    status, error = await _run(world)
    assert status == "failed"
    assert error is not None
    assert error.startswith("failed to connect to datasource 'pg': name resolution failed")
    assert world.connection.host is not None
    assert world.connection.host not in error  # §8.7: the host is redacted from the detail
    assert registry.opened == []


async def test_guard_off_never_resolves(world: World, dns: FakeDns) -> None:
    status, _ = await _run(world)
    assert status == "completed"
    assert dns.calls == []


async def test_internal_datasources_skip_the_guard(
    world: World, registry: RecordingRegistry, dns: FakeDns
) -> None:
    internal = ConnectionDescriptor(
        config_name="ops",
        type=EngineType.POSTGRESQL,
        host="10.0.0.1",
        port=5432,
        database="ops",
        username="ro",
        password="pw",
        internal=True,
    )
    ops = FakeDatabase()
    ops.add(ACCOUNTS, [{"id": 7, "email": "o@example.com", "balance": "1.00"}])
    registry.databases["ops"] = ops
    world.jobs.directory.internal = {"ops": internal}
    world.extraction.internal = {"ops": internal}
    job_id = await world.submit({"ops": {"accounts": ["id"]}})
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert (job.status, job.error) == ("completed", None)
    assert dns.calls == []
    assert [d.pinned_address for d in registry.opened] == [None] * len(registry.opened)
