"""§2.6.7 test, §2.6.8 schema and §2.6.9 validate-schema through HTTP, with fake connectors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.connections.rate_limit import ConnectionTestLimiter
from fetcher.services.errors import ApiError
from fetcher.services.records import ConnectionRecord
from tests.unit.manager.conftest import Harness, HarnessFactory, table
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
FAILURE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- test (§2.6.7) --------------------------------------------------------------------------


async def test_test_success_and_failure(h: Harness) -> None:
    created = await h.create_ok()
    response = await h.client.post(f"{C}/{created['id']}/test")
    body = response.json()
    assert (response.status_code, body["status"], body["message"]) == (
        200, "success", "Connection successful",
    )  # fmt: skip
    assert isinstance(body["latencyMs"], int)
    assert body["latencyMs"] >= 0
    h.db("pg_main").fail_on["connect"] = "connection to server at 10.0.0.1 failed"
    body = (await h.client.post(f"{C}/{created['id']}/test")).json()
    assert (body["status"], body["message"]) == ("failure", FAILURE)


async def test_test_probe_failure_is_failure(h: Harness) -> None:
    created = await h.create_ok()
    h.db("pg_main").fail_on["probe"] = "boom"
    assert (await h.client.post(f"{C}/{created['id']}/test")).json()["status"] == "failure"


async def test_test_decryption_failure_is_failure(h: Harness) -> None:
    from dataclasses import replace

    created = await h.create_ok()
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    await h.store.update_connection(replace(record, encryption_key_version="9"))
    body = (await h.client.post(f"{C}/{created['id']}/test")).json()
    assert body["status"] == "failure"


async def test_test_internal_datasource(make_harness: HarnessFactory) -> None:
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
    response = await h.client.post(f"{C}/{internal_connection_id('ledger_ro')}/test")
    assert response.json()["status"] == "success"
    assert h.registry.opened[-1] is internal


async def test_test_errors(h: Harness) -> None:
    assert_error(await h.client.post(f"{C}/x/test"), 400, "FET-0404")
    assert_error(await h.client.post(f"{C}/{uuid.uuid4()}/test"), 404, "FET-1001")


async def test_test_ssrf_predial_blocks(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    created = await h.create_ok(host="93.184.216.34")
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    from dataclasses import replace

    await h.store.update_connection(replace(record, host="127.0.0.1"))
    response = await h.client.post(f"{C}/{created['id']}/test")
    assert_error(response, 400, "FET-0414")
    assert h.registry.opened == []


async def test_test_dns_failure_under_guard_is_failure(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    created = await h.create_ok(host="no-such-host.invalid")
    body = (await h.client.post(f"{C}/{created['id']}/test")).json()
    assert body["status"] == "failure"
    assert h.registry.opened == []


async def test_rate_limit_per_connection_is_429_with_retry_after(h: Harness) -> None:
    clock = Clock()
    h.runtime.connections.tester.limiter = ConnectionTestLimiter(clock=clock)
    created = await h.create_ok()
    url = f"{C}/{created['id']}/test"
    for _ in range(10):
        assert (await h.client.post(url)).status_code == 200
    response = await h.client.post(url)
    error = assert_error(response, 429, "FET-0006", "Too Many Requests")
    assert response.headers["retry-after"] == "6"
    assert error["message"] == "Connection test limit reached. Try again in 6 seconds."
    clock.now += 6
    assert (await h.client.post(url)).status_code == 200


async def test_rate_limit_comes_before_resolution(h: Harness) -> None:
    clock = Clock()
    h.runtime.connections.tester.limiter = ConnectionTestLimiter(clock=clock)
    url = f"{C}/{uuid.uuid4()}/test"
    for _ in range(10):
        assert_error(await h.client.post(url), 404, "FET-1001")
    assert_error(await h.client.post(url), 429, "FET-0006")


def test_global_bucket_limits_all_connections() -> None:
    clock = Clock()
    limiter = ConnectionTestLimiter(clock=clock)
    for i in range(60):
        limiter.admit(f"c{i}")
    with pytest.raises(ApiError, match="FET-0006") as caught:
        limiter.admit("fresh")
    assert caught.value.headers == {"Retry-After": "1"}
    clock.now += 1
    limiter.admit("fresh")


def test_refused_request_takes_no_token() -> None:
    clock = Clock()
    limiter = ConnectionTestLimiter(clock=clock)
    for _ in range(10):
        limiter.admit("a")
    for _ in range(5):
        with pytest.raises(ApiError, match="FET-0006"):
            limiter.admit("a")
    clock.now += 6
    limiter.admit("a")


# --- schema (§2.6.8) ------------------------------------------------------------------------


async def test_schema_result_keys_sorted(h: Harness) -> None:
    created = await h.create_ok()
    db = h.db("pg_main")
    db.add(table("public", "accounts", "id", "Email", "email"))
    db.add(table("accounting", "invoices", "id", "amount"))
    db.add(table("public", "Zeta", "b", "a"))
    response = await h.client.get(f"{C}/{created['id']}/schema?schemas=public,accounting")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "id": created["id"],
        "configName": "pg_main",
        "databaseName": "ledger",
        "type": "POSTGRESQL",
        "tables": [
            {"name": "Zeta", "fields": ["a", "b"], "types": {"a": "text", "b": "text"}},
            {
                "name": "accounting.invoices",
                "fields": ["amount", "id"],
                "types": {"amount": "text", "id": "text"},
            },
            {
                "name": "accounts",
                "fields": ["Email", "email", "id"],
                "types": {"Email": "text", "email": "text", "id": "text"},
            },
        ],
    }


async def test_schema_default_scope_is_connection_schema_else_public(h: Harness) -> None:
    plain = await h.create_ok()
    scoped = await h.create_ok("pg_acc", schema="accounting")
    for name in ("pg_main", "pg_acc"):
        h.db(name).add(table("public", "accounts", "id"))
        h.db(name).add(table("accounting", "invoices", "id"))
    names = [t["name"] for t in (await h.client.get(f"{C}/{plain['id']}/schema")).json()["tables"]]
    assert names == ["accounts"]
    body = (await h.client.get(f"{C}/{scoped['id']}/schema")).json()
    assert [t["name"] for t in body["tables"]] == ["accounting.invoices"]


@pytest.mark.parametrize("value", ["", "a,,b", " ", ",".join(f"s{i}" for i in range(21))])
async def test_schema_param_rules(h: Harness, value: str) -> None:
    created = await h.create_ok()
    response = await h.client.get(f"{C}/{created['id']}/schema", params={"schemas": value})
    assert_error(response, 400, "FET-0405")


async def test_schema_errors(h: Harness) -> None:
    created = await h.create_ok()
    url = f"{C}/{created['id']}/schema"
    assert_error(await h.client.get(f"{C}/zz/schema"), 400, "FET-0404")
    assert_error(await h.client.get(f"{C}/{uuid.uuid4()}/schema"), 404, "FET-1001")
    h.db("pg_main").fail_on["discover"] = "permission denied"
    error = assert_error(await h.client.get(url), 502, "FET-1042", "Schema Retrieval Error")
    assert error["message"] == "Failed to retrieve database schema information."
    h.db("pg_main").fail_on["connect"] = "refused"
    error = assert_error(await h.client.get(url), 502, "FET-1041", "Database Connection Error")
    assert error["message"] == FAILURE


async def test_schema_ssrf_predial(make_harness: HarnessFactory) -> None:
    from dataclasses import replace

    h = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    created = await h.create_ok(host="93.184.216.34")
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    await h.store.update_connection(replace(record, host="10.0.0.8"))
    assert_error(await h.client.get(f"{C}/{created['id']}/schema"), 400, "FET-0414")


# --- validate-schema (§2.6.9) ---------------------------------------------------------------

V = f"{C}/validate-schema"


async def _validate(h: Harness, body: object) -> Any:
    return await h.client.post(V, json=body)


def _many(n: int, value: object) -> dict[str, object]:
    return {f"k{i:02d}": value for i in range(n)}


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"mappedFields": {"a": {"t": ["x"]}}, "extra": 1}, "FET-0400", None),
        ({}, "FET-0402", None),
        ({"mappedFields": None}, "FET-0402", None),
        ({"mappedFields": []}, "FET-0401", None),
        ({"mappedFields": {"a": ["t"]}}, "FET-0401", None),
        ({"mappedFields": {"a": {"t": [1]}}}, "FET-0401", None),
        ({"mappedFields": {}}, "FET-0401", "mappedFields cannot be empty"),
        (
            {"mappedFields": _many(11, {"t": ["x"]})},
            "FET-1061",
            "maximum 10 datasources allowed per validation request",
        ),
        (
            {"mappedFields": {"ds": _many(21, ["x"])}},
            "FET-1061",
            "maximum 20 tables allowed per datasource, got 21 for 'ds'",
        ),
        (
            {"mappedFields": {"ds": {"t": ["f"] * 51}}},
            "FET-1061",
            "maximum 50 fields allowed per table, got 51 for 'ds.t'",
        ),
        ({"mappedFields": {" ds": {"t": ["x"]}}}, "FET-0401", None),
        ({"mappedFields": {"ds": {"": ["x"]}}}, "FET-0401", None),
        ({"mappedFields": {"ds": {"t": ["x "]}}}, "FET-0401", None),
        ({"mappedFields": {"ds": {"t": ["*", "id"]}}}, "FET-0401", None),
        (
            {"mappedFields": {"nope": {"t": ["x"]}}},
            "FET-1062",
            "No connections configured for the requested datasources",
        ),
    ],
)
async def test_validate_schema_body_checks(
    h: Harness, body: dict[str, Any], code: str, message: str | None
) -> None:
    error = assert_error(await _validate(h, body), 400, code)
    if message is not None:
        assert error["message"] == message
    if code == "FET-0402":
        assert error["title"] == "Missing Fields in Request"
        assert error["fields"] == {"mappedFields": "mappedFields is a required field"}
    if code == "FET-0401":
        assert error["title"] == "Invalid Data Request"


async def test_validate_schema_limits_are_inclusive(h: Harness) -> None:
    await h.create_ok()
    h.db("pg_main").add(table("public", "t", *[f"f{i}" for i in range(50)]))
    body = {"mappedFields": {"pg_main": {"t": [f"f{i}" for i in range(50)]}}}
    assert (await _validate(h, body)).status_code == 200


async def test_validate_schema_success(h: Harness) -> None:
    await h.create_ok()
    h.db("pg_main").add(table("public", "accounts", "id", "email"))
    h.db("pg_main").add(table("accounting", "invoices", "id"))
    body = {
        "mappedFields": {
            "pg_main": {
                "public.accounts": ["id", "email"],
                "Public.accounts": ["*"],
                "accounting.invoices": [],
            }
        }
    }
    response = await _validate(h, body)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "success",
        "message": "Schema validated successfully. All datasources, tables, and fields exist.",
    }


async def test_validate_schema_reports_every_problem_in_order(hi_pair: Harness) -> None:
    h = hi_pair
    h.db("pg_b").add(table("public", "accounts", "id", "email"))
    h.db("pg_a").fail_on["connect"] = "refused"
    body = {
        "mappedFields": {
            "pg_b": {
                "zeta": ["x"],
                "accounts": ["nope", "id", "also_nope", "nope"],
                "a.b.c": ["x"],
            },
            "missing_ds": {"t": ["x"]},
            "pg_a": {"t": ["x"]},
        }
    }
    response = await _validate(h, body)
    error = assert_error(response, 422, "FET-1060", "Schema validation failed")
    assert error["message"] == "Schema validation found inconsistencies."
    assert error["errors"] == [
        {"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "missing_ds"},
        {"type": "DATA_SOURCE_DOWN", "dataSourceId": "pg_a"},
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "pg_b", "table": "zeta"},
        {"type": "FIELD_NOT_FOUND", "dataSourceId": "pg_b", "table": "accounts", "field": "nope"},
        {
            "type": "FIELD_NOT_FOUND",
            "dataSourceId": "pg_b",
            "table": "accounts",
            "field": "also_nope",
        },
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "pg_b", "table": "a.b.c"},
    ]


@pytest.fixture
async def hi_pair(h: Harness) -> Harness:
    await h.create_ok("pg_a")
    await h.create_ok("pg_b")
    return h


async def test_validate_schema_uses_the_cache_until_updated(hi_pair: Harness) -> None:
    h = hi_pair
    h.db("pg_a").add(table("public", "t", "x"))
    body = {"mappedFields": {"pg_a": {"t": ["x"]}}}
    assert (await _validate(h, body)).status_code == 200
    opened = h.db("pg_a").opened
    assert (await _validate(h, body)).status_code == 200
    assert h.db("pg_a").opened == opened
    # Another replica updates the connection: the entry's updatedAt no longer matches.
    from dataclasses import replace
    from datetime import timedelta

    record = await h.store.get_connection_by_name("pg_a", tenant="")
    assert record is not None
    await h.store.update_connection(replace(record, updated_at=record.updated_at + timedelta(1)))
    assert (await _validate(h, body)).status_code == 200
    assert h.db("pg_a").opened == opened + 1


async def test_validate_schema_cache_disabled_with_ttl_zero(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"SCHEMA_CACHE_TTL_SECONDS": "0"})
    await h.create_ok("pg_a")
    h.db("pg_a").add(table("public", "t", "x"))
    body = {"mappedFields": {"pg_a": {"t": ["x"]}}}
    await _validate(h, body)
    await _validate(h, body)
    assert h.db("pg_a").opened == 2


async def test_validate_schema_ambiguous_name_is_not_found(make_harness: HarnessFactory) -> None:
    internal = ConnectionDescriptor(
        config_name="dup_ds",
        type=EngineType.POSTGRESQL,
        host="h",
        port=1,
        database="d",
        internal=True,
        connection_id=internal_connection_id("dup_ds"),
    )
    h = await make_harness(internal={"dup_ds": internal, "other_in": internal})
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    await h.store.insert_connection(
        ConnectionRecord(
            id=str(uuid.uuid4()),
            config_name="dup_ds",
            type="POSTGRESQL",
            database_name="d",
            created_at=moment,
            updated_at=moment,
        )
    )
    body = {"mappedFields": {"dup_ds": {"t": ["x"]}, "other_in": {"t": ["x"]}}}
    error = assert_error(await _validate(h, body), 422, "FET-1060")
    assert error["errors"][0] == {"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "dup_ds"}
