"""§2.9 / §2.9.1 on the Manager's connect paths: resolve once, vet every address, pin it.

DNS is simulated by replacing :func:`fetcher.services.connections.ssrf.resolve_host`, the one
function that
resolves a datasource host. Every path that dials a stored connection (test, schema,
validate-schema, the job-creation live test) must block a blocked literal without resolving,
block a name that resolves to any blocked address (IPv4-mapped IPv6 included), turn a DNS
failure into a connect failure without dialing, and hand the connector the vetted address.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fetcher.adapters.sql import postgres as sql_postgres
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.connections import ssrf
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.testing import FakeDns
from tests.unit.manager.conftest import Harness, HarnessFactory, table
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
PUBLIC = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"
JOB = {
    "dataRequest": {"mappedFields": {"pg_main": {"accounts": ["id"]}}},
    "metadata": {"source": "payments"},
}


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns()
    monkeypatch.setattr(ssrf, "resolve_host", fake)
    return fake


@pytest.fixture
async def guarded(make_harness: HarnessFactory) -> Harness:
    return await make_harness(env={"SSRF_GUARD_ENABLED": "true"})


async def _stored(h: Harness, host: str = "db.example.com") -> str:
    """A connection whose stored host is ``host`` (written behind the create-time literal
    check, as if the host had been valid when it was created)."""
    created = await h.create_ok(host="db.example.com")
    record = await h.store.get_connection(created["id"], tenant="")
    assert record is not None
    await h.store.update_connection(replace(record, host=host))
    h.db("pg_main").add(table("public", "accounts", "id"), [{"id": "1"}])
    return str(created["id"])


# --- the one resolve-and-vet function -------------------------------------------------------


async def test_vet_host_pins_the_first_resolved_address(dns: FakeDns) -> None:
    dns.answers["db.example.com"] = [PUBLIC_V6, PUBLIC, PUBLIC_V6]
    assert await ssrf.vet_host("db.example.com", 5432) == PUBLIC_V6
    assert dns.calls == [("db.example.com", 5432)]


@pytest.mark.parametrize(
    "answer",
    [
        ["10.0.0.5"],
        [PUBLIC, "127.0.0.1"],
        ["::ffff:169.254.169.254"],
        ["::ffff:10.1.2.3", PUBLIC],
        ["fd00::1"],
        ["64:ff9b::a00:1"],
    ],
)
async def test_vet_host_blocks_any_blocked_address(dns: FakeDns, answer: list[str]) -> None:
    dns.answers["db.example.com"] = answer
    with pytest.raises(ssrf.BlockedHostError):
        await ssrf.vet_host("db.example.com", 5432)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "db.cluster.local", "::1", "10.1.1.1"])
async def test_vet_host_blocks_literals_without_resolving(dns: FakeDns, host: str) -> None:
    with pytest.raises(ssrf.BlockedHostError):
        await ssrf.vet_host(host, 5432)
    assert dns.calls == []


async def test_vet_host_dns_failure(dns: FakeDns) -> None:
    with pytest.raises(ssrf.HostResolutionError) as caught:
        await ssrf.vet_host("nowhere.example.com", 5432)
    assert "name resolution failed" in caught.value.detail


async def test_vet_host_empty_answer_is_a_dns_failure(dns: FakeDns) -> None:
    dns.answers["db.example.com"] = []
    with pytest.raises(ssrf.HostResolutionError):
        await ssrf.vet_host("db.example.com", 5432)


async def test_pin_descriptor_keeps_the_name_and_adds_the_address(dns: FakeDns) -> None:
    dns.answers["db.example.com"] = [PUBLIC, PUBLIC_V6, PUBLIC]
    descriptor = ConnectionDescriptor(
        config_name="pg", type=EngineType.POSTGRESQL, host="db.example.com", port=5432
    )
    pinned = await ssrf.pin_descriptor(descriptor)
    assert (pinned.host, pinned.pinned_address) == ("db.example.com", PUBLIC)
    assert pinned.resolved_addresses == (PUBLIC, PUBLIC_V6)  # for redaction only
    assert len(dns.calls) == 1
    sqlite = ConnectionDescriptor(config_name="s", type=EngineType.SQLITE, database="/x.db")
    assert await ssrf.pin_descriptor(sqlite) is sqlite


def test_descriptor_repr_shows_the_pin_but_no_secret() -> None:
    descriptor = ConnectionDescriptor(
        config_name="pg",
        type=EngineType.POSTGRESQL,
        host="db.example.com",
        password="sentinel-Pa55word",
        pinned_address=PUBLIC,
    )
    text = repr(descriptor)
    assert "sentinel-Pa55word" not in text
    assert f"pinned_address='{PUBLIC}'" in text


def test_sql_registry_hands_the_pinned_address_to_postgres(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[dict[str, Any]] = []

    def fake_connector(connection: ConnectionDescriptor, **kwargs: Any) -> object:
        seen.append({"connection": connection, **kwargs})
        return object()

    # The registry imports the PostgreSQL connector when it first builds one (the driver is
    # an optional extra), so the fake replaces it in its own module.
    monkeypatch.setattr(sql_postgres, "PostgresConnector", fake_connector)
    registry = SqlConnectorRegistry()
    base = ConnectionDescriptor(config_name="pg", type=EngineType.POSTGRESQL, host="db.example.com")
    registry.connector_for(replace(base, pinned_address=PUBLIC))
    registry.connector_for(base)
    assert [s["pinned_address"] for s in seen] == [PUBLIC, None]


# --- POST …/test (§2.6.7) -------------------------------------------------------------------


async def test_test_pins_the_vetted_address(guarded: Harness, dns: FakeDns) -> None:
    dns.answers["db.example.com"] = [PUBLIC]
    ident = await _stored(guarded)
    body = (await guarded.client.post(f"{C}/{ident}/test")).json()
    assert body["status"] == "success"
    [opened] = guarded.registry.opened
    assert (opened.host, opened.pinned_address) == ("db.example.com", PUBLIC)
    assert dns.calls == [("db.example.com", 5432)]  # resolved exactly once


@pytest.mark.parametrize("answer", [["10.0.0.7"], [PUBLIC, "::ffff:127.0.0.1"]])
async def test_test_blocked_after_resolution(
    guarded: Harness, dns: FakeDns, answer: list[str]
) -> None:
    dns.answers["db.example.com"] = answer
    ident = await _stored(guarded)
    assert_error(await guarded.client.post(f"{C}/{ident}/test"), 400, "FET-0414")
    assert guarded.registry.opened == []


async def test_test_blocked_literal_is_not_resolved(guarded: Harness, dns: FakeDns) -> None:
    ident = await _stored(guarded, host="169.254.169.254")
    assert_error(await guarded.client.post(f"{C}/{ident}/test"), 400, "FET-0414")
    assert dns.calls == []
    assert guarded.registry.opened == []


async def test_test_dns_failure_is_a_failure_without_dialing(
    guarded: Harness, dns: FakeDns
) -> None:
    ident = await _stored(guarded)
    response = await guarded.client.post(f"{C}/{ident}/test")
    assert (response.status_code, response.json()["status"]) == (200, "failure")
    assert guarded.registry.opened == []


async def test_guard_off_never_resolves_or_pins(h: Harness, dns: FakeDns) -> None:
    ident = await _stored(h, host="10.0.0.9")
    assert (await h.client.post(f"{C}/{ident}/test")).json()["status"] == "success"
    assert dns.calls == []
    assert h.registry.opened[-1].pinned_address is None


async def test_internal_datasource_skips_the_guard(
    make_harness: HarnessFactory, dns: FakeDns
) -> None:
    internal = ConnectionDescriptor(
        config_name="ledger_ro",
        type=EngineType.POSTGRESQL,
        host="10.0.0.1",
        port=5432,
        database="ledger",
        username="ro",
        password="pw",
        internal=True,
        connection_id=internal_connection_id("ledger_ro"),
    )
    h = await make_harness(internal={"ledger_ro": internal}, env={"SSRF_GUARD_ENABLED": "true"})
    ident = internal_connection_id("ledger_ro")
    assert (await h.client.post(f"{C}/{ident}/test")).json()["status"] == "success"
    assert (await h.client.get(f"{C}/{ident}/schema")).status_code == 200
    assert dns.calls == []
    assert all(d.pinned_address is None for d in h.registry.opened)


# --- GET …/schema (§2.6.8) ------------------------------------------------------------------


async def test_schema_pins_blocks_and_fails(guarded: Harness, dns: FakeDns) -> None:
    ident = await _stored(guarded)
    dns.answers["db.example.com"] = [PUBLIC]
    response = await guarded.client.get(f"{C}/{ident}/schema")
    assert response.status_code == 200, response.text
    assert guarded.registry.opened[-1].pinned_address == PUBLIC
    dns.answers["db.example.com"] = ["::ffff:192.168.1.1"]
    assert_error(await guarded.client.get(f"{C}/{ident}/schema"), 400, "FET-0414")
    del dns.answers["db.example.com"]
    assert_error(await guarded.client.get(f"{C}/{ident}/schema"), 502, "FET-1041")
    assert len(guarded.registry.opened) == 1


# --- POST …/validate-schema (§2.6.9) --------------------------------------------------------


async def test_validate_schema_pins_and_reports_blocks_as_down(
    guarded: Harness, dns: FakeDns
) -> None:
    await _stored(guarded)
    body = {"mappedFields": {"pg_main": {"accounts": ["id"]}}}
    dns.answers["db.example.com"] = ["10.0.0.1"]
    response = await guarded.client.post(f"{C}/validate-schema", json=body)
    error = assert_error(response, 422, "FET-1060")
    assert error["errors"] == [{"type": "DATA_SOURCE_DOWN", "dataSourceId": "pg_main"}]
    del dns.answers["db.example.com"]
    response = await guarded.client.post(f"{C}/validate-schema", json=body)
    assert_error(response, 422, "FET-1060")
    assert guarded.registry.opened == []
    dns.answers["db.example.com"] = [PUBLIC]
    response = await guarded.client.post(f"{C}/validate-schema", json=body)
    assert response.status_code == 200, response.text
    assert guarded.registry.opened[-1].pinned_address == PUBLIC


# --- POST /v1/fetcher live test (§3.6 step 14b) ---------------------------------------------


@pytest.mark.parametrize(
    ("answer", "status", "code"),
    [(["::ffff:10.0.0.1"], 400, "FET-0414"), (None, 400, "FET-1040")],
)
async def test_job_live_test_blocks_and_dns_failures(
    guarded: Harness, dns: FakeDns, answer: list[str] | None, status: int, code: str
) -> None:
    await _stored(guarded)
    if answer is not None:
        dns.answers["db.example.com"] = answer
    assert_error(await guarded.client.post("/v1/fetcher", json=JOB), status, code)
    assert guarded.registry.opened == []
    assert guarded.publisher.published == []


async def test_job_live_test_pins(guarded: Harness, dns: FakeDns) -> None:
    await _stored(guarded)
    dns.answers["db.example.com"] = [PUBLIC]
    response = await guarded.client.post("/v1/fetcher", json=JOB)
    assert response.status_code == 202, response.text
    assert guarded.registry.opened[-1].pinned_address == PUBLIC
    assert dns.calls == [("db.example.com", 5432)]
