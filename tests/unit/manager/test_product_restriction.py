"""§12.4 product-restricted tokens on every route, through the HTTP app.

``app.state.authenticator`` is a fake that maps a bearer token to a Principal (the real token
verification is tested elsewhere); everything behind it is the production app over a SQLite
store. A restricted token gets ``403 FET-0012`` where §12.4 says so and otherwise sees
another product's (or an unassigned) connection or job exactly as a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.manager.app import create_app
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.errors import ApiError
from fetcher.services.events.job_events import EventContext, failed_event
from fetcher.services.principal import Principal, Scope
from fetcher.services.records import ConnectionRecord, JobRecord
from fetcher.settings import Settings
from tests.unit.manager.conftest import (
    AutoRegistry,
    FakePublisher,
    Harness,
    base_env,
    build_runtime,
    pg_body,
)
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
J = "/v1/fetcher"
E = "/v1/events"
NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
ALL = frozenset({Scope.ADMIN.value})
UNASSIGNED = "a product-restricted token cannot manage unassigned connections"


def principal(sub: str, products: frozenset[str] | None = None, tenant: str = "") -> Principal:
    return Principal(sub=sub, scopes=ALL, products=products, tenant=tenant)


@dataclass
class FakeAuthenticator:
    """Maps ``Authorization: Bearer <token>`` to a Principal; anything else is a 401."""

    principals: Mapping[str, Principal] = field(default_factory=dict)

    async def authenticate(self, request: Request) -> Principal:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        found = self.principals.get(token) if scheme.lower() == "bearer" else None
        if found is None:
            raise ApiError("FET-0010", "missing or invalid bearer token", title="Unauthorized")
        return found


TOKENS = {
    "admin": principal("admin"),
    "pay": principal("pay-svc", frozenset({"payments"})),
    "nobody": principal("nobody", frozenset()),
}


class World(Harness):
    """A harness whose app authenticates with :class:`FakeAuthenticator`."""

    app: Any

    def auth(self, token: str, **headers: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}", **headers}

    async def create_as(
        self, token: str, product: str, name: str, **overrides: Any
    ) -> httpx.Response:
        return await self.client.post(
            C,
            json=pg_body(name, **overrides),
            headers=self.auth(token, **{"X-Product-Name": product}),
        )


INTERNAL = ConnectionDescriptor(
    config_name="ledger_ro",
    type=EngineType.POSTGRESQL,
    host="10.1.2.3",
    port=5432,
    database="ledger",
    username="ro",
    password="pw",
    internal=True,
    connection_id=internal_connection_id("ledger_ro"),
)


async def make_world(
    tmp_path: Path,
    tokens: Mapping[str, Principal],
    internal: Mapping[str, ConnectionDescriptor] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[World, SqliteMetadataStore]:
    settings = Settings.from_env({**base_env(tmp_path), **(env or {})})
    store = SqliteMetadataStore(tmp_path / "meta.db")
    await store.open()
    await store.migrate()
    registry, publisher = AutoRegistry(), FakePublisher()
    runtime = build_runtime(settings, store, registry, publisher, internal)
    runtime.lifecycle.started.set()
    app = create_app(runtime)
    app.state.authenticator = FakeAuthenticator(tokens)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    world = World(runtime, client, publisher, registry)
    world.app = app
    return world, store


@dataclass
class Seeded:
    pay: str
    bill: str
    loose: str


@pytest.fixture
async def w(tmp_path: Path) -> Any:
    world, store = await make_world(tmp_path, TOKENS, {"ledger_ro": INTERNAL})
    try:
        yield world
    finally:
        await world.client.aclose()
        await store.close()


async def seed(w: World) -> Seeded:
    """``pay_db`` (payments), ``bill_db`` (billing) and ``loose`` (no product)."""
    pay = await w.create_as("admin", "payments", "pay_db")
    bill = await w.create_as("admin", "billing", "bill_db")
    assert pay.status_code == bill.status_code == 201
    loose = ConnectionRecord(
        id="0190a1b2-0000-7000-8000-0000000000aa",
        config_name="loose",
        type="POSTGRESQL",
        database_name="ledger",
        host="db.example.com",
        port=5432,
        user_name="reader",
        created_at=NOW,
        updated_at=NOW,
    )
    await w.store.insert_connection(loose)
    return Seeded(pay.json()["id"], bill.json()["id"], loose.id)


def job_body(source: str, name: str = "pay_db", **metadata: object) -> dict[str, Any]:
    return {
        "dataRequest": {"mappedFields": {name: {"accounts": ["id"]}}},
        "metadata": {"source": source, **metadata},
    }


# --- create --------------------------------------------------------------------------------


async def test_create_only_for_the_tokens_products(w: World) -> None:
    body = assert_error(await w.create_as("pay", "billing", "x_db"), 403, "FET-0012")
    assert body == {
        "code": "FET-0012",
        "title": "Product Not Allowed",
        "message": "token is not allowed to act for product 'billing'",
    }
    assert_error(await w.create_as("nobody", "payments", "x_db"), 403, "FET-0012")
    created = await w.create_as("pay", " Payments ", "x_db")
    assert created.status_code == 201, created.text
    assert (created.json()["productName"], created.json()["createdBy"]) == ("payments", "pay-svc")


async def test_create_product_check_comes_after_the_header_and_before_the_body(w: World) -> None:
    headers = w.auth("pay", **{"X-Product-Name": "bad product!"})
    assert_error(await w.client.post(C, json=pg_body("x_db"), headers=headers), 400, "FET-0403")
    headers = w.auth("pay", **{"X-Product-Name": "billing", "Content-Type": "text/plain"})
    response = await w.client.post(C, content=b"{not json", headers=headers)
    assert_error(response, 403, "FET-0012")


# --- list, list unassigned, assign -----------------------------------------------------------


async def test_list_with_and_without_the_header(w: World) -> None:
    s = await seed(w)
    headers = w.auth("pay", **{"X-Product-Name": "billing"})
    assert_error(await w.client.get(C, headers=headers), 403, "FET-0012")
    own = (await w.client.get(C, headers=w.auth("pay", **{"X-Product-Name": "payments"}))).json()
    assert ([i["id"] for i in own["items"]], own["total"]) == ([s.pay], 1)
    mixed = (await w.client.get(C, headers=w.auth("pay"))).json()
    assert [i["id"] for i in mixed["items"]] == [INTERNAL.connection_id, s.pay]
    assert mixed["total"] == 2
    none = (await w.client.get(C, headers=w.auth("nobody"))).json()
    assert ([i["id"] for i in none["items"]], none["total"]) == ([INTERNAL.connection_id], 1)
    everything = (await w.client.get(C, headers=w.auth("admin"))).json()
    assert everything["total"] == 4


async def test_unassigned_routes_refuse_a_restricted_token_first(w: World) -> None:
    s = await seed(w)
    for token in ("pay", "nobody"):
        response = await w.client.get(f"{C}/unassigned?limit=abc", headers=w.auth(token))
        assert assert_error(response, 403, "FET-0012")["message"] == UNASSIGNED
        # Before the header, the path ID and the body: nothing else is looked at.
        response = await w.client.post(f"{C}/not-a-uuid/assign", headers=w.auth(token))
        assert assert_error(response, 403, "FET-0012")["message"] == UNASSIGNED
    listed = (await w.client.get(f"{C}/unassigned", headers=w.auth("admin"))).json()
    assert [i["id"] for i in listed["items"]] == [s.loose]
    headers = w.auth("admin", **{"X-Product-Name": "payments"})
    assigned = await w.client.post(f"{C}/{s.loose}/assign", headers=headers)
    assert assigned.status_code == 200, assigned.text


# --- get, PATCH, DELETE, test, schema --------------------------------------------------------


async def test_another_products_or_an_unassigned_connection_is_missing(w: World) -> None:
    s = await seed(w)
    for ident in (s.bill, s.loose, "0190a1b2-0000-7000-8000-0000000000ff"):
        for response in (
            await w.client.get(f"{C}/{ident}", headers=w.auth("pay")),
            await w.client.patch(f"{C}/{ident}", json={"port": 5433}, headers=w.auth("pay")),
            await w.client.delete(f"{C}/{ident}", headers=w.auth("pay")),
            await w.client.post(f"{C}/{ident}/test", headers=w.auth("pay")),
            await w.client.get(f"{C}/{ident}/schema", headers=w.auth("pay")),
        ):
            assert_error(response, 404, "FET-1001")
    # Nothing was changed by the refused writes.
    bill = (await w.client.get(f"{C}/{s.bill}", headers=w.auth("admin"))).json()
    assert bill["port"] == 5432


async def test_own_connections_and_internal_datasources_stay_reachable(w: World) -> None:
    s = await seed(w)
    for ident in (s.pay, INTERNAL.connection_id):
        assert (await w.client.get(f"{C}/{ident}", headers=w.auth("pay"))).status_code == 200
        tested = await w.client.post(f"{C}/{ident}/test", headers=w.auth("pay"))
        assert tested.json()["status"] == "success"
        schema = await w.client.get(f"{C}/{ident}/schema", headers=w.auth("pay"))
        assert schema.status_code == 200
    internal = f"{C}/{INTERNAL.connection_id}"
    patched = await w.client.patch(internal, json={"port": 1}, headers=w.auth("pay"))
    assert_error(patched, 409, "FET-0004")
    change = {"metadata": {"team": "core"}}
    patched = await w.client.patch(f"{C}/{s.pay}", json=change, headers=w.auth("pay"))
    assert patched.json()["metadata"] == {"team": "core"}
    assert (await w.client.delete(f"{C}/{s.pay}", headers=w.auth("pay"))).status_code == 204


# --- validate-schema -------------------------------------------------------------------------


async def test_validate_schema_resolves_only_internal_and_own_products(w: World) -> None:
    await seed(w)
    url = f"{C}/validate-schema"
    only_foreign = {"mappedFields": {"bill_db": {"t": ["*"]}, "loose": {"t": ["*"]}}}
    response = await w.client.post(url, json=only_foreign, headers=w.auth("pay"))
    assert_error(response, 400, "FET-1062")
    mixed = {"mappedFields": {"bill_db": {"t": ["*"]}, "pay_db": {"t": ["*"]}}}
    response = await w.client.post(url, json=mixed, headers=w.auth("pay"))
    errors = assert_error(response, 422, "FET-1060")["errors"]
    assert {"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "bill_db"} in errors
    assert all(
        e["dataSourceId"] != "pay_db" or e["type"] != "DATA_SOURCE_NOT_FOUND" for e in errors
    )
    response = await w.client.post(url, json=mixed, headers=w.auth("admin"))
    errors = assert_error(response, 422, "FET-1060")["errors"]
    assert not any(e["type"] == "DATA_SOURCE_NOT_FOUND" for e in errors)


# --- jobs ------------------------------------------------------------------------------------


async def test_job_creation_step_10a(w: World) -> None:
    await seed(w)
    response = await w.client.post(J, json=job_body(" Billing ", "bill_db"), headers=w.auth("pay"))
    body = assert_error(response, 403, "FET-0012")
    assert body["message"] == "token is not allowed to act for product 'billing'"
    # 10a runs after step 10 ...
    blank = await w.client.post(J, json=job_body("  "), headers=w.auth("pay"))
    assert_error(blank, 400, "FET-0402")
    # ... and before step 11 (metadata flatness).
    nested = job_body("billing", nested={"a": 1})
    assert_error(await w.client.post(J, json=nested, headers=w.auth("pay")), 403, "FET-0012")
    assert await w.store.jobs_with_status("pending") == []
    accepted = await w.client.post(J, json=job_body("payments"), headers=w.auth("pay"))
    assert accepted.status_code == 202, accepted.text


async def test_step_10a_comes_before_deduplication(w: World) -> None:
    await seed(w)
    first = await w.client.post(J, json=job_body("billing", "bill_db"), headers=w.auth("admin"))
    assert first.status_code == 202, first.text
    again = await w.client.post(J, json=job_body("billing", "bill_db"), headers=w.auth("pay"))
    assert_error(again, 403, "FET-0012")


async def test_get_job_of_another_product_is_missing(w: World) -> None:
    await seed(w)
    bill = await w.client.post(J, json=job_body("billing", "bill_db"), headers=w.auth("admin"))
    pay = await w.client.post(J, json=job_body("payments"), headers=w.auth("pay"))
    bill_id, pay_id = bill.json()["jobId"], pay.json()["jobId"]
    assert_error(await w.client.get(f"{J}/{bill_id}", headers=w.auth("pay")), 404, "FET-1001")
    assert_error(await w.client.get(f"{J}/{pay_id}", headers=w.auth("nobody")), 404, "FET-1001")
    own = await w.client.get(f"{J}/{pay_id}", headers=w.auth("pay"))
    assert (own.status_code, own.json()["createdBy"]) == (200, "pay-svc")
    assert (await w.client.get(f"{J}/{bill_id}", headers=w.auth("admin"))).status_code == 200


# --- the event feed --------------------------------------------------------------------------


CTX = EventContext(source="//lerian.fetcher/test", exchange="fetcher.job.events")


async def failed_job(w: World, n: int, source: str, tenant: str = "") -> str:
    """A failed job of ``tenant`` with its outbox event, numbered in the feed."""
    job_id = f"0190a1b2-0000-7000-8000-{n:012d}"
    metadata = f'{{"source":"{source}"}}'
    await w.store.insert_job(
        JobRecord(
            id=job_id,
            status="pending",
            request_hash=job_id,
            mapped_fields_json='{"pg":{"t":["id"]}}',
            metadata_json=metadata,
            created_at=NOW,
            updated_at=NOW,
            tenant=tenant,
        )
    )
    event = failed_event(CTX, job_id, metadata, "boom", NOW, tenant=tenant)
    assert await w.store.fail_job(
        job_id, from_statuses=("pending",), error="boom", completed_at=NOW, event=event
    )
    await w.store.assign_feed_seq()
    return job_id


async def test_feed_holds_only_the_tokens_products(w: World) -> None:
    ids = [await failed_job(w, i, s) for i, s in enumerate(("payments", "billing", "Payments "))]

    async def read(token: str, query: str = "") -> list[str]:
        response = await w.client.get(f"{E}{query}", headers=w.auth(token))
        assert response.status_code == 200, response.text
        return [item["data"]["job_id"] for item in response.json()["items"]]

    assert await read("pay") == [ids[0], ids[2]]
    assert await read("pay", "?after=1") == [ids[2]]
    assert await read("nobody") == []
    assert await read("admin") == ids
    page = (await w.client.get(f"{E}?after=1", headers=w.auth("nobody"))).json()
    assert page == {"items": [], "next": "1"}


# --- AUTH_MODE=none --------------------------------------------------------------------------


async def test_without_authentication_nothing_records_created_by(w: World) -> None:
    w.app.state.authenticator = None
    created = await w.client.post(C, json=pg_body("anon_db"), headers={"X-Product-Name": "p"})
    assert created.status_code == 201
    assert "createdBy" not in created.json()
    job = await w.client.post(J, json=job_body("p", "anon_db"))
    assert job.status_code == 202, job.text
    got = await w.client.get(f"{J}/{job.json()['jobId']}")
    assert "createdBy" not in got.json()
