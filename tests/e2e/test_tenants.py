"""Two tenants on one real stack (§12.5, issue 8 "Must show"): a multi-tenant Manager and
Worker process (``AUTH_MODE=jwt`` with an HS256 secret, ``MULTI_TENANT_ENABLED=true``) over
PostgreSQL, RabbitMQ and SeaweedFS.

* ``globex`` cannot see, change, test, assign, use in a job, or read the events of ``acme``'s
  connections and jobs: each answers exactly like a missing resource (a 404, an empty list,
  the unknown-datasource error), never a 403 that would confirm it exists;
* identical requests in the two tenants make two jobs (deduplication is per tenant);
* ``acme``'s event verifies with the key ``fetcher derive-key --tenant acme`` prints (and with
  ``fetcher.consumer`` for tenant ``acme``), and ``globex``'s does not;
* ``acme``'s object decrypts only with ``acme``'s storage key, and its key starts with
  ``acme/``.

The tenants' Manager has a metadata database and a work queue of its own (a multi-tenant
Worker dead-letters single-tenant work messages, so it must not share the session's queue);
events go through the session's events exchange, where the session collector sees them.
Tokens are built here with PyJWT (HS256 with the test secret), as any issuer would.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import secrets
import subprocess
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
import pytest_asyncio
from cryptography.exceptions import InvalidTag

from fetcher.consumer import ConsumerKeys as SdkKeys
from fetcher.consumer import TenantMismatchError, verify_event
from fetcher.consumer.errors import BadSignatureError
from tests.e2e.conftest import E2E, SOURCE_PASSWORD
from tests.e2e.harness import (
    FETCHER_BIN,
    MASTER_KEY,
    PRODUCT,
    Database,
    DatabaseFactory,
    FetcherProcess,
    ProcessLauncher,
    ReceivedEvent,
    Stack,
    decrypt_result_object,
    hmac_hex,
    signing_input,
    unique,
)

pytestmark = E2E

ISSUER = "https://issuer.e2e.example"
AUDIENCE = "fetcher"
JWT_SECRET = secrets.token_bytes(32)
TENANTS = ("acme", "globex")
ACCOUNTS = {"public.accounts": ["id", "email", "balance"]}


def token(tenant: str, *, sub: str | None = None, scope: str = "fetcher:admin") -> str:
    """A bearer token of ``tenant`` (claim ``tenantId``, the default ``AUTH_TENANT_CLAIM``)."""
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": sub or f"svc-{tenant}",
        "iat": now,
        "exp": now + 3600,
        "scope": scope,
        "tenantId": tenant,
    }
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def derive_tenant_key(tenant: str, purpose: str) -> bytes:
    """The key ``fetcher derive-key --tenant <tenant> --purpose <purpose>`` prints (§12.5)."""
    output = subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "derive-key", "--tenant", tenant, "--purpose", purpose],
        env={"PATH": "/usr/bin:/bin", "APP_ENC_KEY": MASTER_KEY},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    label = {"external": "External HMAC Key (hex): ", "storage": "Storage Key (hex): "}[purpose]
    assert output.startswith(label), output
    assert output.count("\n") == 1, output
    return bytes.fromhex(output.removeprefix(label).strip())


@dataclass
class TenantApi:
    """The Manager routes as one tenant's caller sees them (bearer token + product header)."""

    http: httpx.AsyncClient
    base_url: str
    tenant: str

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {token(self.tenant)}", "X-Product-Name": PRODUCT}

    async def call(
        self, method: str, path: str, *, json_body: object = None, **params: str
    ) -> httpx.Response:
        return await self.http.request(
            method,
            f"{self.base_url}{path}",
            headers=self._headers(),
            json=json_body,
            params=params or None,
        )

    async def create_connection(self, config_name: str, source: Database) -> str:
        response = await self.call(
            "POST",
            "/v1/management/connections",
            json_body={
                "configName": config_name,
                "type": "POSTGRESQL",
                "host": source.host,
                "port": source.port,
                "databaseName": source.name,
                "userName": "postgres",
                "password": SOURCE_PASSWORD,
            },
        )
        assert response.status_code == 201, response.text
        connection_id: str = response.json()["id"]
        return connection_id

    async def post_job(self, mapped: Mapping[str, object], correlation: str) -> httpx.Response:
        body = {
            "dataRequest": {"mappedFields": mapped},
            "metadata": {"source": PRODUCT, "correlationId": correlation},
        }
        return await self.call("POST", "/v1/fetcher", json_body=body)

    async def job(self, job_id: str) -> dict[str, Any]:
        response = await self.call("GET", f"/v1/fetcher/{job_id}")
        assert response.status_code == 200, response.text
        doc: dict[str, Any] = response.json()
        return doc

    async def feed_job_ids(self) -> set[str]:
        """The job IDs of every event this tenant's feed shows (§2.12), read from the start."""
        seen: set[str] = set()
        after = "0"
        while True:
            response = await self.call("GET", "/v1/events", after=after, limit="1000")
            assert response.status_code == 200, response.text
            page = response.json()
            if not page["items"]:
                return seen
            seen |= {str(item["data"]["job_id"]) for item in page["items"]}
            after = page["next"]


@dataclass(frozen=True)
class TenantWorld:
    manager: FetcherProcess
    apis: dict[str, TenantApi]
    connections: dict[str, str]
    #: A connection only ``acme`` has (a configName ``globex`` never created).
    acme_only: tuple[str, str]
    jobs: dict[str, str]
    events: dict[str, ReceivedEvent]
    stack: Stack


async def _own_queue_deleted(stack: Stack, queue: str) -> None:
    async with stack.broker.channel() as channel:
        await channel.queue_delete(queue)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tenants(stack: Stack, databases: DatabaseFactory) -> AsyncIterator[TenantWorld]:
    """The multi-tenant Manager; in each tenant a ``pg_src`` connection and the identical job,
    run to completion by a multi-tenant Worker; ``acme`` also gets a connection of its own."""
    launcher: ProcessLauncher = stack.launcher
    metadata = databases.create("fetcher_e2e_tenants_meta")
    queue = f"{stack.names.work_queue}.{unique('tenants')}"
    shared = {
        "DATABASE_URL": metadata.url,
        "RABBITMQ_FETCHER_WORK_QUEUE": queue,
        "MULTI_TENANT_ENABLED": "true",
    }
    manager = await launcher.manager(
        AUTH_MODE="jwt",
        AUTH_ISSUER=ISSUER,
        AUTH_AUDIENCE=AUDIENCE,
        AUTH_JWT_SECRET=base64.b64encode(JWT_SECRET).decode(),
        **shared,
    )
    try:
        apis = {t: TenantApi(launcher.http, manager.base_url, t) for t in TENANTS}
        connections = {t: await apis[t].create_connection("pg_src", stack.source) for t in TENANTS}
        only_name = unique("acme_only").replace("-", "_")
        acme_only = (only_name, await apis["acme"].create_connection(only_name, stack.source))
        correlation = unique("same-request")  # the very same body in both tenants
        jobs: dict[str, str] = {}
        for tenant in TENANTS:
            response = await apis[tenant].post_job({"pg_src": ACCOUNTS}, correlation)
            assert response.status_code == 202, response.text  # 202: new, not a duplicate
            jobs[tenant] = str(response.json()["jobId"])
        async with launcher.running_worker(**shared):
            for tenant in TENANTS:
                await _wait_completed(apis[tenant], jobs[tenant])
        events = {
            t: await stack.broker.collector.wait_for(jobs[t], "job.completed") for t in TENANTS
        }
        yield TenantWorld(manager, apis, connections, acme_only, jobs, events, stack)
    except BaseException as exc:
        exc.add_note(manager.log_tail())
        raise
    finally:
        await manager.terminate()
        await _own_queue_deleted(stack, queue)


async def _wait_completed(api: TenantApi, job_id: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = await api.job(job_id)
        if job["status"] == "completed":
            return
        assert job["status"] in ("pending", "processing"), job
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} of tenant {api.tenant} did not complete")


def _assert_missing(response: httpx.Response, entity: str) -> None:
    """§12.5: another tenant's resource answers exactly like a missing one."""
    assert response.status_code == 404, (response.status_code, response.text)
    body = response.json()
    assert body["code"] == "FET-1001", body
    assert f"find the {entity} entity" in body["message"], body


async def test_identical_requests_in_two_tenants_make_two_jobs(tenants: TenantWorld) -> None:
    acme, globex = tenants.jobs["acme"], tenants.jobs["globex"]
    assert acme != globex
    acme_job = await tenants.apis["acme"].job(acme)
    globex_job = await tenants.apis["globex"].job(globex)
    assert acme_job["metadata"] == globex_job["metadata"]
    assert acme_job["resultHmac"] != globex_job["resultHmac"]  # same rows, other tenant key
    assert tenants.connections["acme"] != tenants.connections["globex"]


async def test_object_keys_start_with_the_tenant_and_decrypt_only_with_its_key(
    tenants: TenantWorld,
) -> None:
    storage = {t: derive_tenant_key(t, "storage") for t in TENANTS}
    external = {t: derive_tenant_key(t, "external") for t in TENANTS}
    for tenant in TENANTS:
        job_id = tenants.jobs[tenant]
        job = await tenants.apis[tenant].job(job_id)
        assert job["resultPath"] == f"{tenant}/external-data/{job_id}.json"
        stored = tenants.stack.results.read(job["resultPath"])
        plaintext = decrypt_result_object(storage[tenant], stored)
        assert [row["id"] for row in json.loads(plaintext)["pg_src"]["accounts"]] == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]
        assert hmac.compare_digest(hmac_hex(external[tenant], plaintext), job["resultHmac"])
        other = "globex" if tenant == "acme" else "acme"
        with pytest.raises(InvalidTag):
            decrypt_result_object(storage[other], stored)
        with pytest.raises(InvalidTag):
            decrypt_result_object(tenants.stack.keys.storage, stored)  # the global key


def _signature_ok(event: ReceivedEvent, exchange: str, key: bytes, tenant: str) -> bool:
    headers = event.headers
    signed = signing_input(
        str(headers["t"]),
        exchange=exchange,
        routing_key=event.routing_key,
        body=event.body,
        tenant=tenant,
    )
    return hmac.compare_digest(hmac_hex(key, signed), str(headers["x-message-signature"]))


async def test_acmes_event_verifies_with_acmes_derived_key_only(tenants: TenantWorld) -> None:
    exchange = tenants.stack.names.events_exchange
    acme_key = derive_tenant_key("acme", "external")
    globex_key = derive_tenant_key("globex", "external")
    event = tenants.events["acme"]
    assert (event.headers["ce-tenantid"], event.headers["X-Tenant-ID"]) == ("acme", "acme")
    assert _signature_ok(event, exchange, acme_key, "acme")
    assert not _signature_ok(event, exchange, globex_key, "globex")
    assert not _signature_ok(event, exchange, globex_key, "acme")
    assert not _signature_ok(event, exchange, tenants.stack.keys.external, "")
    theirs = tenants.events["globex"]
    assert theirs.headers["ce-tenantid"] == "globex"
    assert not _signature_ok(theirs, exchange, acme_key, "acme")
    assert _signature_ok(theirs, exchange, globex_key, "globex")
    # The consumer SDK agrees: acme's consumer accepts acme's event only.
    acme = SdkKeys.from_hex(external=acme_key.hex(), tenant="acme")
    verified = verify_event(
        event.headers, event.body, exchange=exchange, routing_key=event.routing_key, keys=acme
    )
    assert verified.job_id == tenants.jobs["acme"]
    with pytest.raises(TenantMismatchError):
        verify_event(
            theirs.headers,
            theirs.body,
            exchange=exchange,
            routing_key=theirs.routing_key,
            keys=acme,
        )
    relabelled = {**theirs.headers, "ce-tenantid": "acme", "X-Tenant-ID": "acme"}
    with pytest.raises(BadSignatureError):
        verify_event(
            relabelled, theirs.body, exchange=exchange, routing_key=theirs.routing_key, keys=acme
        )


async def test_globex_cannot_see_change_test_or_assign_acmes_connections(
    tenants: TenantWorld,
) -> None:
    globex, acme = tenants.apis["globex"], tenants.apis["acme"]
    base = "/v1/management/connections"
    for connection_id in (tenants.connections["acme"], tenants.acme_only[1]):
        _assert_missing(await globex.call("GET", f"{base}/{connection_id}"), "connection")
        _assert_missing(
            await globex.call("PATCH", f"{base}/{connection_id}", json_body={"userName": "x"}),
            "connection",
        )
        _assert_missing(await globex.call("POST", f"{base}/{connection_id}/test"), "connection")
        _assert_missing(await globex.call("GET", f"{base}/{connection_id}/schema"), "connection")
        _assert_missing(await globex.call("POST", f"{base}/{connection_id}/assign"), "connection")
        _assert_missing(await globex.call("DELETE", f"{base}/{connection_id}"), "connection")
    listed = await globex.call("GET", base)
    assert listed.status_code == 200, listed.text
    assert [item["id"] for item in listed.json()["items"]] == [tenants.connections["globex"]]
    unassigned = await globex.call("GET", f"{base}/unassigned")
    assert unassigned.status_code == 200, unassigned.text
    assert unassigned.json()["items"] == []
    # acme still has both, untouched by globex's PATCH and DELETE.
    for connection_id in (tenants.connections["acme"], tenants.acme_only[1]):
        mine = await acme.call("GET", f"{base}/{connection_id}")
        assert mine.status_code == 200, mine.text
        assert mine.json()["userName"] == "postgres"
    mine_listed = await acme.call("GET", base)
    assert {item["id"] for item in mine_listed.json()["items"]} == {
        tenants.connections["acme"],
        tenants.acme_only[1],
    }


async def test_globex_cannot_use_acmes_connection_by_name(tenants: TenantWorld) -> None:
    """An acme-only configName resolves in globex exactly like a name nobody has."""
    globex = tenants.apis["globex"]
    name = tenants.acme_only[0]
    nobody = unique("nobody").replace("-", "_")
    for candidate in (name, nobody):
        response = await globex.post_job({candidate: ACCOUNTS}, unique("use"))
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "FET-1020"
        checked = await globex.call(
            "POST",
            "/v1/management/connections/validate-schema",
            json_body={"mappedFields": {candidate: ACCOUNTS}},
        )
        assert checked.status_code == 400, checked.text
        assert checked.json()["code"] == "FET-1062"
    # In acme the same name resolves (a positive control for the probe above).
    ok = await tenants.apis["acme"].call(
        "POST",
        "/v1/management/connections/validate-schema",
        json_body={"mappedFields": {name: ACCOUNTS}},
    )
    assert ok.status_code == 200, ok.text


async def test_globex_cannot_read_acmes_jobs_or_events(tenants: TenantWorld) -> None:
    globex, acme = tenants.apis["globex"], tenants.apis["acme"]
    _assert_missing(await globex.call("GET", f"/v1/fetcher/{tenants.jobs['acme']}"), "job")
    _assert_missing(await acme.call("GET", f"/v1/fetcher/{tenants.jobs['globex']}"), "job")
    assert await globex.feed_job_ids() == {tenants.jobs["globex"]}
    assert await acme.feed_job_ids() == {tenants.jobs["acme"]}
