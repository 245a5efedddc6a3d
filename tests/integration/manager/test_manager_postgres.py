"""Manager routes on PostgreSQL: store-enforced uniqueness and deduplication under concurrency,
publish failure, and the test/schema/validate-schema routes against a real server."""

from __future__ import annotations

import asyncio
import json

from tests.integration.manager.conftest import PgHarness
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
JOB = {
    "dataRequest": {"mappedFields": {"pg_real": {"shop.orders": ["id", "total"]}}},
    "metadata": {"source": "payments", "correlationId": "c-1"},
}


async def _connection(pg: PgHarness, name: str = "pg_real", **overrides: object) -> str:
    response = await pg.create_connection(name, **overrides)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def test_concurrent_creates_one_wins(pg: PgHarness) -> None:
    responses = await asyncio.gather(*(pg.create_connection("same_name") for _ in range(2)))
    assert sorted(r.status_code for r in responses) == [201, 409]
    conflict = next(r for r in responses if r.status_code == 409)
    assert_error(conflict, 409, "FET-1002")


async def test_twenty_concurrent_identical_jobs_make_one(pg: PgHarness) -> None:
    await _connection(pg)
    responses = await asyncio.gather(*(pg.client.post("/v1/fetcher", json=JOB) for _ in range(20)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 19 + [202], [r.text for r in responses if r.status_code >= 400]
    job_ids = {r.json()["jobId"] for r in responses}
    assert len(job_ids) == 1
    assert len(pg.publisher.published) == 1
    assert len(await pg.store.jobs_with_status("pending")) == 1
    assert {r.headers["location"] for r in responses} == {f"/v1/fetcher/{job_ids.pop()}"}


async def test_publish_failure_fails_the_job_with_an_event(pg: PgHarness) -> None:
    await _connection(pg)
    pg.publisher.fail = True
    assert_error(await pg.client.post("/v1/fetcher", json=JOB), 503, "FET-0003")
    [failed] = await pg.store.jobs_with_status("failed")
    assert failed.error == "process failed: unable to publish"
    assert await pg.store.jobs_with_status("pending") == []
    await pg.store.assign_feed_seq()
    feed = (await pg.client.get("/v1/events?type=failed")).json()
    [item] = feed["items"]
    assert item["routingKey"] == "job.failed"
    assert item["data"] == {
        "job_id": failed.id,
        "status": "failed",
        "metadata": {
            "source": "payments",
            "correlationId": "c-1",
            "error": {"message": "process failed: unable to publish"},
        },
    }
    job = (await pg.client.get(f"/v1/fetcher/{failed.id}")).json()
    assert job["status"] == "failed"
    assert "completedAt" in job


async def test_live_connection_test_and_failure(pg: PgHarness) -> None:
    ident = await _connection(pg)
    body = (await pg.client.post(f"{C}/{ident}/test")).json()
    assert body["status"] == "success", body
    broken = await _connection(pg, "pg_broken", port=1)
    body = (await pg.client.post(f"{C}/{broken}/test")).json()
    assert body["status"] == "failure"
    job = {**JOB, "dataRequest": {"mappedFields": {"pg_broken": {"t": ["x"]}}}}
    error = assert_error(await pg.client.post("/v1/fetcher", json=job), 400, "FET-1040")
    assert error["message"] == "Connection 'pg_broken' is not available"


async def test_schema_route_against_postgres(pg: PgHarness) -> None:
    ident = await _connection(pg, schema="shop")
    response = await pg.client.get(f"{C}/{ident}/schema")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["type"] == "POSTGRESQL"
    assert body["tables"] == [
        {"name": "shop.big_orders", "fields": ["id"], "types": {"id": "integer"}},
        {
            "name": "shop.customers",
            "fields": ["email", "id"],
            "types": {"email": "text", "id": "integer"},
        },
        {
            "name": "shop.orders",
            "fields": ["Note", "id", "total"],
            "types": {"Note": "text", "id": "integer", "total": "numeric"},
        },
    ]
    public = (await pg.client.get(f"{C}/{ident}/schema?schemas=public")).json()
    names = [t["name"] for t in public["tables"]]
    assert "connections" in names
    assert not any(n.startswith("public.") for n in names)
    broken = await _connection(pg, "pg_broken", port=1)
    assert_error(await pg.client.get(f"{C}/{broken}/schema"), 502, "FET-1041")


async def test_validate_schema_against_postgres(pg: PgHarness) -> None:
    await _connection(pg)
    ok = {"mappedFields": {"pg_real": {"shop.orders": ["id", "Note"], "shop.customers": ["*"]}}}
    assert (await pg.client.post(f"{C}/validate-schema", json=ok)).status_code == 200
    bad = {"mappedFields": {"pg_real": {"shop.orders": ["note"], "shop.nope": ["id"]}}}
    error = assert_error(await pg.client.post(f"{C}/validate-schema", json=bad), 422, "FET-1060")
    assert error["errors"] == [
        {
            "type": "FIELD_NOT_FOUND",
            "dataSourceId": "pg_real",
            "table": "shop.orders",
            "field": "note",
        },
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "pg_real", "table": "shop.nope"},
    ]


async def test_list_and_lifecycle_on_postgres(pg: PgHarness) -> None:
    ident = await _connection(pg, metadata={"team": "core", "n": 1.5})
    page = (await pg.client.get(f"{C}?metadata.n=1.5&metadata.team=core")).json()
    assert [i["id"] for i in page["items"]] == [ident]
    patched = await pg.client.patch(f"{C}/{ident}", json={"configName": "pg_renamed"})
    assert patched.json()["configName"] == "pg_renamed"
    assert (await pg.client.delete(f"{C}/{ident}")).status_code == 204
    assert (await pg.client.get(C)).json()["total"] == 0
    assert json.loads((await pg.client.get("/readyz")).text)["checks"]["database"]["status"] == "up"
