"""§2.10/§2.11 operational routes and the OpenAPI document."""

from __future__ import annotations

import asyncio

import pytest

from fetcher import __version__
from tests.unit.manager.conftest import Harness
from tests.unit.manager.test_http_rules import assert_error

METRIC_NAMES = (
    "fetcher_http_requests_total",
    "fetcher_http_request_duration_seconds",
    "fetcher_jobs_created_total",
    "fetcher_jobs_finished_total",
    "fetcher_job_duration_seconds",
    "fetcher_work_messages_rejected_total",
    "fetcher_events_published_total",
    "fetcher_outbox_pending",
    "fetcher_readyz_check_up",
)


async def test_health_before_and_after_startup(h: Harness) -> None:
    h.runtime.lifecycle.started.clear()
    response = await h.client.get("/health")
    assert (response.status_code, response.json()) == (
        503, {"status": "unhealthy", "reason": "starting"},
    )  # fmt: skip
    h.runtime.lifecycle.started.set()
    response = await h.client.get("/health")
    assert (response.status_code, response.json()) == (200, {"status": "healthy"})


async def test_readyz_healthy_with_skipped_check(h: Harness) -> None:
    response = await h.client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "healthy"
    assert body["checks"]["database"]["status"] == "up"
    assert isinstance(body["checks"]["database"]["latency_ms"], int)
    assert body["checks"]["rabbitmq"] == {"status": "skipped", "latency_ms": 0}
    assert (body["version"], body["deployment_mode"]) == (__version__, "local")


async def test_readyz_down_check_is_redacted(h: Harness) -> None:
    async def broken() -> None:
        raise ConnectionError("connect to db.example.com:5432 failed for password=hunter22")

    h.runtime.readiness = {"database": broken, "rabbitmq": None}
    response = await h.client.get("/readyz")
    assert response.status_code == 503
    check = response.json()["checks"]["database"]
    assert check["status"] == "down"
    assert "db.example.com" not in check["error"]
    assert "hunter22" not in check["error"]
    metrics = (await h.client.get("/metrics")).text
    assert 'fetcher_readyz_check_up{check="database"} 0.0' in metrics


async def test_readyz_checks_run_in_parallel_with_a_2s_budget(h: Harness) -> None:
    async def slow() -> None:
        await asyncio.sleep(10)

    h.runtime.readiness = {"database": slow, "rabbitmq": slow}
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await h.client.get("/readyz")
    assert loop.time() - started < 3.5
    assert response.status_code == 503
    assert response.json()["checks"]["rabbitmq"]["status"] == "down"


async def test_readyz_draining(h: Harness) -> None:
    h.runtime.lifecycle.draining.set()
    response = await h.client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["draining"] == {"status": "down", "reason": "shutting down"}


async def test_readyz_tenant_is_fet_1080(h: Harness) -> None:
    error = assert_error(await h.client.get("/readyz/tenant/abc"), 400, "FET-1080")
    assert error["message"] == "tenant readiness is only available in multi-tenant mode"
    assert error["title"] == "Tenant Context Required"


async def test_metrics_exposes_every_name_with_route_templates(h: Harness) -> None:
    await h.client.get("/v1/fetcher/0190a1b2-0000-7000-8000-000000000001")
    await h.client.get("/readyz")
    response = await h.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for name in METRIC_NAMES:
        assert f"# TYPE {name} " in text
    assert 'route="/v1/fetcher/{id}"' in text
    assert "0190a1b2" not in text
    assert "fetcher_outbox_pending 0.0" in text


async def test_version(h: Harness) -> None:
    response = await h.client.get("/version")
    assert response.json() == {"version": __version__}


async def test_openapi_document(h: Harness) -> None:
    response = await h.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    expected = {
        "/v1/management/connections": {"get", "post"},
        "/v1/management/connections/unassigned": {"get"},
        "/v1/management/connections/validate-schema": {"post"},
        "/v1/management/connections/{id}": {"get", "patch", "delete"},
        "/v1/management/connections/{id}/test": {"post"},
        "/v1/management/connections/{id}/schema": {"get"},
        "/v1/management/connections/{id}/assign": {"post"},
        "/v1/fetcher": {"get", "post"},
        "/v1/fetcher/{id}": {"get"},
        "/v1/events": {"get"},
        "/health": {"get"},
        "/readyz": {"get"},
        "/readyz/tenant/{id}": {"get"},
        "/metrics": {"get"},
        "/version": {"get"},
    }
    for path, methods in expected.items():
        assert set(document["paths"][path]) == methods, path
    schemas = document["components"]["schemas"]
    for model in ("ConnectionCreate", "ConnectionUpdate", "JobRequest", "ErrorBody"):
        assert model in schemas
    create = document["paths"]["/v1/fetcher"]["post"]
    ref = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/JobRequest"
    assert {"202", "200", "400", "413", "415", "500", "503"} <= set(create["responses"])
    assert "422" not in document["paths"]["/v1/fetcher/{id}"]["get"]["responses"]
    _assert_refs_resolve(document)


def _assert_refs_resolve(document: dict[str, object]) -> None:
    import json
    import re

    text = json.dumps(document)
    schemas = document["components"]["schemas"]  # type: ignore[index]
    for ref in set(re.findall(r'"#/components/schemas/([^"]+)"', text)):
        assert ref in schemas, ref


async def test_openapi_validates_as_openapi_3_1(h: Harness) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    document = (await h.client.get("/openapi.json")).json()
    validator.validate(document)


async def test_docs_serves_swagger_ui(h: Harness) -> None:
    response = await h.client.get("/docs")
    assert response.status_code == 200
    assert "swagger-ui" in response.text.lower()
    assert "/openapi.json" in response.text
