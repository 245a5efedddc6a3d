"""The async client against an in-process Manager, and the sync client's transport rules."""

from __future__ import annotations

import json

import httpx
import pytest

from fetcher.client import (
    ApiError,
    BadRequestError,
    ConflictError,
    FetcherClient,
    NotFoundError,
    SchemaValidationError,
    TransportError,
    WaitTimeoutError,
)
from fetcher.engine.testing import FakeDatabase
from fetcher.engine.types import Column, TableSchema, TypeFamily
from tests.unit.client.conftest import InProcess

PG = {
    "configName": "pg_main",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": "s3cret-pass",
}
MAPPED = {"pg_main": {"accounts": ["id", "email"]}}


def add_accounts(manager: InProcess) -> None:
    db = manager.registry.databases.setdefault("pg_main", FakeDatabase())
    columns = tuple(Column(c, TypeFamily.TEXT) for c in ("id", "email"))
    db.add(TableSchema("public", "accounts", columns), [{"id": "1", "email": "a@x"}])


async def test_connection_lifecycle(manager: InProcess) -> None:
    api = manager.client
    created = await api.create_connection(PG, product="payments")  # type: ignore[arg-type]
    assert created["configName"] == "pg_main"
    assert created["productName"] == "payments"
    cid = created["id"]
    assert (await api.get_connection(cid))["id"] == cid
    page = await api.list_connections(product="payments", limit=5, sort_order="asc")
    assert [c["id"] for c in page["items"]] == [cid]
    assert (await api.list_unassigned())["items"] == []
    patched = await api.update_connection(cid, {"metadata": {"team": "core"}})
    assert patched["metadata"] == {"team": "core"}
    matched = await api.list_connections(metadata={"team": "core"})
    assert [c["id"] for c in matched["items"]] == [cid]
    add_accounts(manager)
    assert (await api.test_connection(cid))["status"] == "success"
    schema = await api.connection_schema(cid, schemas=["public"])
    assert schema["tables"] == [
        {"name": "accounts", "fields": ["email", "id"], "types": {"email": "text", "id": "text"}}
    ]
    ok = await api.validate_schema(MAPPED)
    assert ok["status"] == "success"
    with pytest.raises(ConflictError) as conflict:
        await api.assign_connection(cid, product="other")
    assert conflict.value.code == "FET-1015"
    await api.delete_connection(cid)
    with pytest.raises(NotFoundError) as missing:
        await api.get_connection(cid)
    assert missing.value.code == "FET-1001"
    assert missing.value.title == "Entity Not Found"


async def test_errors_carry_code_title_message_fields(manager: InProcess) -> None:
    api = manager.client
    with pytest.raises(BadRequestError) as caught:
        await api.create_connection({"configName": "pg_x", "type": "POSTGRESQL"}, product="p")  # type: ignore[typeddict-item]
    error = caught.value
    assert (error.status, error.code, error.title) == (400, "FET-0402", "Missing Fields in Request")
    assert error.fields["host"] == "host is a required field"
    assert error.message
    assert error.request_id
    with pytest.raises(BadRequestError) as none_resolve:
        await api.validate_schema({"nowhere": {"t": ["a"]}})
    assert none_resolve.value.code == "FET-1062"
    await api.create_connection(PG, product="payments")  # type: ignore[arg-type]
    add_accounts(manager)
    with pytest.raises(SchemaValidationError) as invalid:
        await api.validate_schema({"pg_main": {"nope": ["a"]}})
    assert (invalid.value.status, invalid.value.code) == (422, "FET-1060")
    assert invalid.value.errors == [
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "pg_main", "table": "nope"}
    ]
    with pytest.raises(BadRequestError) as bad_id:
        await api.get_job("not-a-uuid")
    assert bad_id.value.code == "FET-0404"


async def test_submit_duplicate_get_and_wait_timeout(manager: InProcess) -> None:
    api = manager.client
    await api.create_connection(PG, product="payments")  # type: ignore[arg-type]
    add_accounts(manager)
    first = await api.submit(MAPPED, metadata={"source": "payments", "correlationId": "c-1"})
    assert (first.status, first.duplicate) == ("pending", False)
    assert first.location == f"/v1/fetcher/{first.job_id}"
    again = await api.submit(MAPPED, metadata={"source": "payments", "correlationId": "c-1"})
    assert (again.job_id, again.duplicate) == (first.job_id, True)
    job = await api.get_job(first.job_id)
    assert job["id"] == first.job_id
    assert job["mappedFields"] == MAPPED
    with pytest.raises(WaitTimeoutError) as timeout:
        await api.wait(first.job_id, timeout=0.3, poll_interval=0.05)
    assert timeout.value.last["status"] == "pending"
    page = await api.events(after="0", limit=10, type="completed", wait=0)
    assert (page["items"], page["next"]) == ([], "0")


async def test_operational_routes(manager: InProcess) -> None:
    api = manager.client
    assert (await api.health())["status"] == "healthy"
    assert "version" in await api.version()
    assert "fetcher_http_requests_total" in await api.metrics()
    ready = await api.readyz()
    assert ready["status"] in ("healthy", "unhealthy")
    with pytest.raises(BadRequestError) as tenant:
        await api.readyz_tenant("acme")
    assert tenant.value.code == "FET-1080"


def test_sync_client_sends_token_json_and_maps_errors() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/fetcher":
            body = {"jobId": "j", "status": "pending", "createdAt": "t", "message": "m"}
            return httpx.Response(202, json=body, headers={"Location": "/v1/fetcher/j"})
        error = {"code": "FET-0006", "title": "Too Many Requests", "message": "later"}
        return httpx.Response(429, json=error, headers={"Retry-After": "7"})

    with FetcherClient(
        "http://127.0.0.1/", token="tok-123", transport=httpx.MockTransport(handler)
    ) as api:
        assert "tok-123" not in repr(api)
        submitted = api.submit(MAPPED, metadata={"source": "payments"})
        assert (submitted.job_id, submitted.duplicate) == ("j", False)
        with pytest.raises(ApiError) as limited:
            api.test_connection("0190a1b2-0000-7000-8000-000000000002")
    assert limited.value.retry_after == 7
    assert limited.value.code == "FET-0006"
    first = seen[0]
    assert first.headers["authorization"] == "Bearer tok-123"
    assert first.headers["content-type"] == "application/json"
    assert json.loads(first.content) == {
        "dataRequest": {"mappedFields": MAPPED},
        "metadata": {"source": "payments"},
    }


def test_sync_wait_returns_the_terminal_job_and_no_answer_is_a_transport_error() -> None:
    states = iter(["pending", "processing", "completed"])

    def handler(request: httpx.Request) -> httpx.Response:
        job = {"id": "j", "status": next(states), "createdAt": "2026-12-07T00:00:00.000Z"}
        return httpx.Response(200, json=job)

    with FetcherClient("http://f", transport=httpx.MockTransport(handler)) as api:
        job = api.wait("j", poll_interval=0.01)
        assert (job.status, job["status"]) == ("completed", "completed")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with (
        FetcherClient("http://f", transport=httpx.MockTransport(refuse)) as api,
        pytest.raises(TransportError),
    ):
        api.health()
