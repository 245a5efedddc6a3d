"""§2.8 and the §3.6 validation order through HTTP: one test per step proving that nothing was
stored or published when it fails; deduplication; publish failure."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import pytest

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.records import JobStatus
from tests.unit.manager.conftest import Harness, HarnessFactory
from tests.unit.manager.test_http_rules import assert_error

J = "/v1/fetcher"


def job(mapped: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "dataRequest": {
            "mappedFields": mapped
            if mapped is not None
            else {"pg_main": {"accounts": ["id", "email"]}}
        },
        "metadata": {"source": "payments"},
    }
    body.update(extra)
    return body


async def assert_nothing_stored(h: Harness) -> None:
    statuses: tuple[JobStatus, ...] = ("pending", "processing", "completed", "failed")
    for status in statuses:
        assert await h.store.jobs_with_status(status) == []
    assert await h.store.count_unsent() == 0
    assert h.publisher.published == []


@pytest.fixture
async def hp(h: Harness) -> Harness:
    await h.create_ok()
    return h


STEP_CASES: list[tuple[str, dict[str, Any], str, str | None, str | None]] = [
    ("3 unknown", job(extra=1), "FET-0400", "Unexpected Fields in the Request", None),
    (
        "3 unknown nested",
        {"dataRequest": {"mappedFields": {}, "x": 1, "limits": {"y": 1}}, "metadata": {}},
        "FET-0400",
        None,
        None,
    ),
    ("4 dataRequest", {"metadata": {"source": "p"}}, "FET-0402", "Missing Fields in Request", None),
    (
        "4 mappedFields",
        {"dataRequest": {"mappedFields": None}, "metadata": {"source": "p"}},
        "FET-0402",
        None,
        None,
    ),
    (
        "4a",
        {"dataRequest": [], "metadata": {"source": "p"}},
        "FET-0401",
        "Invalid Data Request",
        "dataRequest must be an object",
    ),
    ("5", job({}), "FET-0401", None, "mappedFields cannot be empty"),
    (
        "5 wildcard",
        job({"pg_main": {"t": ["*", "id"]}}),
        "FET-0401",
        None,
        "wildcard '*' must be the only entry in the field list for 'pg_main.t'",
    ),
    (
        "6",
        {
            "dataRequest": {
                "mappedFields": {"pg_main": {"t": ["id"]}},
                "limits": {"maxConcurrency": True},
            },
            "metadata": {"source": "payments"},
        },
        "FET-0401",
        None,
        "limits.maxConcurrency must be a positive integer",
    ),
    (
        "7",
        job({f"ds{i:02d}": {"t": ["x"]} for i in range(11)}),
        "FET-0401",
        None,
        "Maximum 10 datasources allowed per job, got 11",
    ),
    (
        "8",
        {"dataRequest": {"mappedFields": {"pg_main": {"t": ["id"]}}}},
        "FET-0402",
        "Missing Required Field",
        "metadata is required and must contain 'source' field",
    ),
    (
        "9",
        {"dataRequest": {"mappedFields": {"pg_main": {"t": ["id"]}}}, "metadata": {"a": 1}},
        "FET-0402",
        "Missing Required Field",
        "metadata.source is required for job notification routing",
    ),
    (
        "10",
        {"dataRequest": {"mappedFields": {"pg_main": {"t": ["id"]}}}, "metadata": {"source": " "}},
        "FET-0402",
        "Invalid Field Value",
        "metadata.source must be a non-empty string",
    ),
    (
        "11",
        {
            "dataRequest": {"mappedFields": {"pg_main": {"t": ["id"]}}},
            "metadata": {"source": "payments", "n": {"x": 1}},
        },
        "FET-0410",
        "Invalid Metadata Nesting",
        None,
    ),
    (
        "12",
        {
            "dataRequest": {
                "mappedFields": {"pg_main": {"t": ["id"]}},
                "filters": {"zz": {"t": {"id": {"eq": [1]}}}},
            },
            "metadata": {"source": "payments"},
        },
        "FET-0401",
        "Invalid Filter References",
        "filter references unknown datasource 'zz' not found in mappedFields",
    ),
    (
        "14 none",
        job({"nope": {"t": ["x"]}}),
        "FET-1020",
        "No Connections Found",
        "No connections configured for the requested datasources",
    ),
    (
        "14 some",
        job({"pg_main": {"t": ["x"]}, "zz_missing": {"t": ["x"]}, "aa_missing": {"t": ["x"]}}),
        "FET-1020",
        "Missing Data Source",
        "No connection configured for datasource 'aa_missing'",
    ),
]


@pytest.mark.parametrize(
    ("step", "body", "code", "title", "message"), STEP_CASES, ids=[c[0] for c in STEP_CASES]
)
async def test_validation_steps_store_nothing(
    hp: Harness,
    *,
    step: str,
    body: dict[str, Any],
    code: str,
    title: str | None,
    message: str | None,
) -> None:
    error = assert_error(await hp.client.post(J, json=body), 400, code, title)
    if message is not None:
        assert error["message"] == message
    await assert_nothing_stored(hp)


async def test_step_14_ambiguous_name(make_harness: HarnessFactory) -> None:
    internal = ConnectionDescriptor(
        config_name="pg_main",
        type=EngineType.POSTGRESQL,
        host="h",
        port=1,
        database="d",
        internal=True,
        connection_id=internal_connection_id("pg_main"),
    )
    h = await make_harness(internal={"pg_main": internal})
    seed = await h.create_ok("seed")
    record = await h.store.get_connection(seed["id"], tenant="")
    assert record is not None
    await h.store.insert_connection(replace(record, id=str(uuid.uuid4()), config_name="pg_main"))
    error = assert_error(await h.client.post(J, json=job()), 400, "FET-1020", "Missing Data Source")
    assert error["message"] == "datasource 'pg_main' is ambiguous"
    await assert_nothing_stored(h)


async def test_step_14a_unassigned_connection(hp: Harness) -> None:
    record = await hp.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    orphan = replace(record, id=str(uuid.uuid4()), config_name="orphan", product_name=None)
    await hp.store.insert_connection(orphan)
    body = job({"orphan": {"t": ["x"]}, "pg_main": {"t": ["x"]}})
    error = assert_error(await hp.client.post(J, json=body), 400, "FET-1014")
    assert error["message"] == (
        "Connection 'orphan' has no product assigned. "
        "Use the migration endpoint to assign it first."
    )
    await assert_nothing_stored(hp)


async def test_step_14a_product_mismatch(hp: Harness) -> None:
    body = job(metadata={"source": "Billing"})
    error = assert_error(await hp.client.post(J, json=body), 400, "FET-1016", "Product Mismatch")
    assert error["message"] == (
        "Connection 'pg_main' does not belong to the product identified by source 'Billing'"
    )
    await assert_nothing_stored(hp)


async def test_step_14a_source_is_normalized(hp: Harness) -> None:
    response = await hp.client.post(J, json=job(metadata={"source": "  PAYMENTS "}))
    assert response.status_code == 202


async def test_step_14b_live_test_failure(hp: Harness) -> None:
    await hp.create_ok("pg_zz")
    hp.db("pg_zz").fail_on["connect"] = "refused"
    hp.db("pg_main").fail_on["probe"] = "refused"
    body = job({"pg_zz": {"t": ["x"]}, "pg_main": {"t": ["x"]}})
    error = assert_error(await hp.client.post(J, json=body), 400, "FET-1040", "Connection Down")
    assert error["message"] == "Connection 'pg_main' is not available"
    await assert_nothing_stored(hp)


async def test_step_14b_ssrf(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    await h.create_ok(host="93.184.216.34")
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    await h.store.update_connection(replace(record, host="192.168.1.1"))
    assert_error(await h.client.post(J, json=job()), 400, "FET-0414")
    await assert_nothing_stored(h)


async def test_internal_datasources_skip_ownership_and_live_test(
    make_harness: HarnessFactory,
) -> None:
    internal = ConnectionDescriptor(
        config_name="ledger_ro",
        type=EngineType.POSTGRESQL,
        host="h",
        port=1,
        database="d",
        internal=True,
        connection_id=internal_connection_id("ledger_ro"),
    )
    h = await make_harness(internal={"ledger_ro": internal})
    h.db("ledger_ro").fail_on["connect"] = "would fail"
    response = await h.client.post(J, json=job({"ledger_ro": {"t": ["x"]}}))
    assert response.status_code == 202
    assert h.registry.opened == []


async def test_create_then_duplicate(hp: Harness) -> None:
    first = await hp.client.post(J, json=job())
    assert first.status_code == 202
    body = first.json()
    assert body["status"] == "pending"
    assert body["message"] == "Job created and queued for processing"
    assert first.headers["location"] == f"/v1/fetcher/{body['jobId']}"
    second = await hp.client.post(J, json=job())
    assert second.status_code == 200
    again = second.json()
    assert again["jobId"] == body["jobId"]
    assert again["createdAt"] == body["createdAt"]
    assert again["message"] == "Duplicate request detected - returning existing job"
    assert second.headers["location"] == f"/v1/fetcher/{body['jobId']}"
    assert len(hp.publisher.published) == 1
    other = await hp.client.post(J, json=job(metadata={"source": "payments", "c": 1}))
    assert other.status_code == 202


async def test_publish_failure_is_503_and_fails_the_job(hp: Harness) -> None:
    hp.publisher.fail = True
    response = await hp.client.post(J, json=job())
    assert_error(response, 503, "FET-0003", "Service Unavailable")
    failed = await hp.store.jobs_with_status("failed")
    assert len(failed) == 1
    assert failed[0].error == "process failed: unable to publish"
    assert failed[0].completed_at is not None
    rows = await hp.store.read_feed(after=0, limit=10, tenant="", products=None)
    assert [r.routing_key for r in rows] == ["job.failed"]
    payload = json.loads(rows[0].body)
    assert payload["metadata"]["error"] == {"message": "process failed: unable to publish"}
    got = (await hp.client.get(f"{J}/{failed[0].id}")).json()
    assert got["status"] == "failed"
    assert got["metadata"]["error"] == "process failed: unable to publish"
    hp.publisher.fail = False
    assert (await hp.client.post(J, json=job())).status_code == 202


async def test_get_job(hp: Harness) -> None:
    created = (await hp.client.post(J, json=job())).json()
    response = await hp.client.get(f"{J}/{created['jobId'].upper()}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == created["jobId"]
    assert body["status"] == "pending"
    assert body["mappedFields"] == {"pg_main": {"accounts": ["id", "email"]}}
    assert body["metadata"] == {"source": "payments"}
    assert {"resultPath", "resultHmac", "completedAt", "filters", "limits"}.isdisjoint(body)


async def test_get_job_errors(h: Harness) -> None:
    error = assert_error(await h.client.get(f"{J}/not-a-uuid"), 400, "FET-0404")
    assert error["message"] == "invalid job id"
    error = assert_error(await h.client.get(f"{J}/{uuid.uuid4()}"), 404, "FET-1001")
    assert error["message"] == (
        "It was not possible to find the job entity during the requested flow. "
        "Please review the data provided in the request."
    )


async def test_jobs_created_metric(hp: Harness) -> None:
    await hp.client.post(J, json=job())
    await hp.client.post(J, json=job())
    text = (await hp.client.get("/metrics")).text
    assert 'fetcher_jobs_created_total{outcome="created"} 1.0' in text
    assert 'fetcher_jobs_created_total{outcome="duplicate"} 1.0' in text
