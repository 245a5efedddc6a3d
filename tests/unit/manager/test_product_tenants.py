"""§12.5 tenant isolation through the HTTP app (Manager side), with a fake authenticator.

Two tenants, ``acme`` and ``globex``, with unrestricted tokens: each sees only its own
connections, jobs and events; another tenant's resource is a 404 (never a 403); configName and
deduplication are per tenant; rate-limit buckets and schema-cache entries are per tenant;
internal datasources are visible only to the tenants ``DATASOURCE_<NAME>_TENANTS`` names, under
the tenant's ID; rows written in single-tenant mode are invisible under a tenant.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.connections.rate_limit import ConnectionTestLimiter
from tests.unit.manager.conftest import pg_body
from tests.unit.manager.test_http_rules import assert_error
from tests.unit.manager.test_product_restriction import (
    INTERNAL,
    World,
    failed_job,
    job_body,
    make_world,
    principal,
)

C = "/v1/management/connections"
J = "/v1/fetcher"
E = "/v1/events"
TOKENS = {
    "acme": principal("alice", tenant="acme"),
    "globex": principal("gary", tenant="globex"),
    "acme-pay": principal("pat", frozenset({"payments"}), tenant="acme"),
}


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    world, store = await make_world(tmp_path, TOKENS, {"ledger_ro": INTERNAL})
    world.runtime.connections.directory.internal_tenants = {"ledger_ro": frozenset({"acme"})}
    try:
        yield world
    finally:
        await world.client.aclose()
        await store.close()


async def create(w: World, token: str, name: str = "pg_main", product: str = "payments") -> str:
    response = await w.create_as(token, product, name)
    assert response.status_code == 201, response.text
    assert response.json()["createdBy"] == TOKENS[token].sub
    return str(response.json()["id"])


async def test_another_tenants_connection_is_missing_on_every_route(w: World) -> None:
    acme_id = await create(w, "acme")
    h = w.auth("globex")
    for response in (
        await w.client.get(f"{C}/{acme_id}", headers=h),
        await w.client.patch(f"{C}/{acme_id}", json={"metadata": {"x": "y"}}, headers=h),
        await w.client.delete(f"{C}/{acme_id}", headers=h),
        await w.client.post(f"{C}/{acme_id}/test", headers=h),
        await w.client.get(f"{C}/{acme_id}/schema", headers=h),
        await w.client.post(
            f"{C}/{acme_id}/assign", headers=w.auth("globex", **{"X-Product-Name": "crm"})
        ),
    ):
        assert_error(response, 404, "FET-1001")
    listed = (await w.client.get(C, headers=h)).json()
    assert (listed["items"], listed["total"]) == ([], 0)
    unassigned = (await w.client.get(f"{C}/unassigned", headers=h)).json()
    assert unassigned["total"] == 0
    validate = {"mappedFields": {"pg_main": {"t": ["*"]}}}
    response = await w.client.post(f"{C}/validate-schema", json=validate, headers=h)
    assert_error(response, 400, "FET-1062")
    own = (await w.client.get(f"{C}/{acme_id}", headers=w.auth("acme"))).json()
    assert "metadata" not in own  # the refused PATCH changed nothing


async def test_config_name_is_unique_per_tenant(w: World) -> None:
    acme_id = await create(w, "acme")
    globex_id = await create(w, "globex")
    assert acme_id != globex_id
    assert_error(await w.create_as("acme", "payments", "pg_main"), 409, "FET-1002")
    acme = (await w.client.get(C, headers=w.auth("acme", **{"X-Product-Name": "payments"}))).json()
    assert [i["id"] for i in acme["items"]] == [acme_id]


async def test_identical_job_requests_in_two_tenants_make_two_jobs(w: World) -> None:
    await create(w, "acme", "pay_db")
    await create(w, "globex", "pay_db")
    acme = await w.client.post(J, json=job_body("payments"), headers=w.auth("acme"))
    globex = await w.client.post(J, json=job_body("payments"), headers=w.auth("globex"))
    assert (acme.status_code, globex.status_code) == (202, 202)
    assert acme.json()["jobId"] != globex.json()["jobId"]
    again = await w.client.post(J, json=job_body("payments"), headers=w.auth("acme"))
    assert (again.status_code, again.json()["jobId"]) == (200, acme.json()["jobId"])
    acme_id, globex_id = acme.json()["jobId"], globex.json()["jobId"]
    assert_error(await w.client.get(f"{J}/{acme_id}", headers=w.auth("globex")), 404, "FET-1001")
    got = await w.client.get(f"{J}/{globex_id}", headers=w.auth("globex"))
    assert (got.status_code, got.json()["createdBy"]) == (200, "gary")
    work = [headers for _body, headers in w.publisher.work]
    assert [h.get("X-Tenant-ID") for h in work] == ["acme", "globex"]


async def test_a_job_cannot_use_another_tenants_connection(w: World) -> None:
    await create(w, "acme", "pay_db")
    response = await w.client.post(J, json=job_body("payments"), headers=w.auth("globex"))
    assert_error(response, 400, "FET-1020")
    assert await w.store.jobs_with_status("pending") == []


async def test_the_feed_holds_only_the_tenants_events(w: World) -> None:
    tenants = ("acme", "globex", "acme", "", "acme")
    sources = ("payments", "payments", "billing", "payments", "payments")
    ids = [
        await failed_job(w, i, source, tenant)
        for i, (tenant, source) in enumerate(zip(tenants, sources, strict=True))
    ]

    async def read(token: str, query: str = "") -> list[str]:
        response = await w.client.get(f"{E}{query}", headers=w.auth(token))
        assert response.status_code == 200, response.text
        return [item["data"]["job_id"] for item in response.json()["items"]]

    assert await read("acme") == [ids[0], ids[2], ids[4]]
    assert await read("acme", "?after=1") == [ids[2], ids[4]]  # feed_seq is global
    assert await read("globex") == [ids[1]]
    assert await read("acme-pay") == [ids[0], ids[4]]
    page = (await w.client.get(E, headers=w.auth("acme"))).json()
    assert [item["cursor"] for item in page["items"]] == ["1", "3", "5"]
    headers = page["items"][0]["headers"]
    assert headers["ce-tenantid"] == "acme"
    assert len(headers) == 11  # §2.12: the eleven CloudEvents headers, no X-Tenant-ID


async def test_internal_datasources_are_visible_only_to_named_tenants(w: World) -> None:
    acme_id = internal_connection_id("ledger_ro", "acme")
    assert (await w.client.get(f"{C}/{acme_id}", headers=w.auth("acme"))).status_code == 200
    single_id = internal_connection_id("ledger_ro")
    assert_error(await w.client.get(f"{C}/{single_id}", headers=w.auth("acme")), 404, "FET-1001")
    assert_error(await w.client.get(f"{C}/{acme_id}", headers=w.auth("globex")), 404, "FET-1001")
    listed = (await w.client.get(C, headers=w.auth("acme"))).json()
    assert [i["id"] for i in listed["items"]] == [acme_id]
    assert (await w.client.get(C, headers=w.auth("globex"))).json()["total"] == 0
    # A stored configName conflicts with an internal one only where that one is visible.
    assert_error(await w.create_as("acme", "payments", "ledger_ro"), 409, "FET-1002")
    assert (await w.create_as("globex", "payments", "ledger_ro")).status_code == 201
    job = await w.client.post(J, json=job_body("payments", "ledger_ro"), headers=w.auth("acme"))
    assert job.status_code == 202, job.text


async def test_rate_limit_buckets_are_per_tenant(w: World) -> None:
    w.runtime.connections.tester.limiter = ConnectionTestLimiter(
        per_connection=10, global_capacity=2
    )
    acme_ids = [await create(w, "acme", f"pg_{i}") for i in range(3)]
    globex_id = await create(w, "globex", "pg_0")
    for ident in acme_ids[:2]:
        response = await w.client.post(f"{C}/{ident}/test", headers=w.auth("acme"))
        assert response.status_code == 200
    limited = await w.client.post(f"{C}/{acme_ids[2]}/test", headers=w.auth("acme"))
    assert_error(limited, 429, "FET-0006")
    other = await w.client.post(f"{C}/{globex_id}/test", headers=w.auth("globex"))
    assert other.status_code == 200  # acme's exhausted global bucket is not globex's


async def test_schema_cache_entries_are_per_tenant(w: World) -> None:
    await create(w, "acme")
    globex_id = await create(w, "globex")
    body: dict[str, Any] = {"mappedFields": {"pg_main": {"accounts": ["*"]}}}
    for token in ("acme", "globex"):
        response = await w.client.post(f"{C}/validate-schema", json=body, headers=w.auth(token))
        assert response.status_code in (200, 422), response.text
    cache = w.runtime.connections.schemas.cache
    assert len(cache) == 2
    patched = await w.client.patch(
        f"{C}/{globex_id}", json={"metadata": {"x": "y"}}, headers=w.auth("globex")
    )
    assert patched.status_code == 200
    assert len(cache) == 1  # globex's PATCH dropped only globex's entry


async def test_single_tenant_rows_are_invisible_under_a_tenant_and_visible_again(
    w: World,
) -> None:
    authenticator = w.app.state.authenticator
    w.app.state.authenticator = None  # AUTH_MODE=none: the tenant ""
    created = await w.client.post(C, json=pg_body("legacy"), headers={"X-Product-Name": "payments"})
    assert created.status_code == 201
    legacy_id = created.json()["id"]
    job = await w.client.post(J, json=job_body("payments", "legacy"))
    assert job.status_code == 202
    w.app.state.authenticator = authenticator  # multi-tenant mode
    assert_error(await w.client.get(f"{C}/{legacy_id}", headers=w.auth("acme")), 404, "FET-1001")
    assert (await w.client.get(C, headers=w.auth("acme"))).json()["total"] == 1  # internal only
    job_url = f"{J}/{job.json()['jobId']}"
    assert_error(await w.client.get(job_url, headers=w.auth("acme")), 404, "FET-1001")
    w.app.state.authenticator = None  # back to single-tenant mode
    assert (await w.client.get(f"{C}/{legacy_id}")).status_code == 200
    assert (await w.client.get(job_url)).status_code == 200
