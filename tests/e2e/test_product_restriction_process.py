"""§12.4 product-restricted tokens against a real ``fetcher run`` (embedded, ``AUTH_MODE=jwt``,
HS256), with tokens minted by ``fetcher dev-token --product`` as an operator would: the
``products`` claim goes through the real verifier, and everything behind it through the
running process, jobs included.

A token restricted to ``payments`` (every scope) creates and submits only for ``payments``
(``403 FET-0012`` naming the product otherwise), sees a ``billing`` connection or job exactly
as a missing one (``404 FET-1001``, nothing changed by the refused writes), lists only its
products' connections, cannot manage unassigned connections, resolves only its own names in
validate-schema, and reads only its products' events from the feed. The unrestricted token
sees both. Log lines of the restricted token's requests carry its ``sub``; no token is logged.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import FetcherProcess, embedded_fetcher, eventually
from tests.e2e.test_sdk_auth_process import AUTH, dev_token

pytestmark = E2E

C = "/v1/management/connections"
J = "/v1/fetcher"
NOT_ALLOWED = "token is not allowed to act for product 'billing'"
UNASSIGNED = "a product-restricted token cannot manage unassigned connections"


@dataclass
class World:
    process: FetcherProcess
    http: httpx.AsyncClient
    tokens: Mapping[str, str]
    pay_connection: str
    bill_connection: str
    pay_job: str
    bill_job: str

    def headers(self, who: str, product: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return headers | ({"X-Product-Name": product} if product is not None else {})

    async def get(self, who: str, path: str, product: str | None = None) -> httpx.Response:
        return await self.http.get(self.process.base_url + path, headers=self.headers(who, product))


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert (response.status_code, body.get("code")) == (status, code), response.text
    return body


def sqlite_body(name: str, database: str) -> dict[str, str]:
    return {"configName": name, "type": "SQLITE", "databaseName": database}


def job_body(source: str, datasource: str) -> dict[str, object]:
    return {
        "dataRequest": {"mappedFields": {datasource: {"accounts": ["*"]}}},
        "metadata": {"source": source},
    }


async def _create(http: httpx.AsyncClient, url: str, headers: dict[str, str], body: object) -> str:
    response = await http.post(url + C, json=body, headers=headers)
    assert response.status_code == 201, response.text
    created: str = response.json()["id"]
    return created


async def _finished(http: httpx.AsyncClient, url: str, headers: dict[str, str], job: str) -> None:
    async def done() -> bool | None:
        status = (await http.get(f"{url}{J}/{job}", headers=headers)).json()["status"]
        assert status != "failed"
        return True if status == "completed" else None

    await eventually(done, f"job {job} to complete", within=60)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def w(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("products")
    allowed = root / "allowed"
    allowed.mkdir()
    build_sample_database(allowed / "pay.db")
    shutil.copyfile(allowed / "pay.db", allowed / "bill.db")
    tokens = {
        "admin": await asyncio.to_thread(dev_token, "--sub", "ops", "--scope", "fetcher:admin"),
        "pay": await asyncio.to_thread(
            dev_token, "--sub", "pay-svc", "--scope", "fetcher:admin", "--product", " Payments "
        ),
    }
    async with (
        embedded_fetcher(
            root, LOG_LEVEL="info", SQLITE_ALLOWED_DIR=str(allowed), **AUTH
        ) as process,
        httpx.AsyncClient(timeout=30.0) as http,
    ):
        url = process.base_url
        admin = {"Authorization": f"Bearer {tokens['admin']}"}
        pay = {"Authorization": f"Bearer {tokens['pay']}"}
        pay_connection = await _create(
            http,
            url,
            pay | {"X-Product-Name": "payments"},
            sqlite_body("pay_db", str(allowed / "pay.db")),
        )
        bill_connection = await _create(
            http,
            url,
            admin | {"X-Product-Name": "billing"},
            sqlite_body("bill_db", str(allowed / "bill.db")),
        )
        jobs = []
        for headers, source, datasource in (
            (pay, "payments", "pay_db"),
            (admin, "billing", "bill_db"),
        ):
            response = await http.post(url + J, json=job_body(source, datasource), headers=headers)
            assert response.status_code == 202, response.text
            jobs.append(response.json()["jobId"])
            await _finished(http, url, admin, jobs[-1])
        yield World(process, http, tokens, pay_connection, bill_connection, *jobs)
        logs = process.logs()
    for token in tokens.values():
        assert token not in logs
        assert token.rsplit(".", 1)[1] not in logs


async def test_create_and_submit_only_for_the_tokens_products(w: World) -> None:
    url = w.process.base_url
    body = sqlite_body("other_db", "/nowhere.db")
    refused = await w.http.post(url + C, json=body, headers=w.headers("pay", "BILLING"))
    assert error_of(refused, 403, "FET-0012") == {
        "code": "FET-0012",
        "title": "Product Not Allowed",
        "message": NOT_ALLOWED,
    }
    # §3.6 step 10a: before deduplication, so the identical billing job is not handed back.
    submitted = await w.http.post(
        url + J, json=job_body(" Billing ", "bill_db"), headers=w.headers("pay")
    )
    assert error_of(submitted, 403, "FET-0012")["message"] == NOT_ALLOWED
    own = (await w.get("pay", f"{C}/{w.pay_connection}")).json()
    assert (own["productName"], own["createdBy"]) == ("payments", "pay-svc")


async def test_another_products_connection_is_missing_and_unchanged(w: World) -> None:
    url, path = w.process.base_url, f"{C}/{w.bill_connection}"
    before = (await w.get("admin", path)).json()
    headers = w.headers("pay")
    for response in (
        await w.http.get(url + path, headers=headers),
        await w.http.patch(url + path, json={"configName": "taken_over"}, headers=headers),
        await w.http.delete(url + path, headers=headers),
        await w.http.post(f"{url}{path}/test", headers=headers),
        await w.http.get(f"{url}{path}/schema", headers=headers),
    ):
        error_of(response, 404, "FET-1001")
    assert (await w.get("admin", path)).json() == before


async def test_lists_hold_only_the_tokens_products(w: World) -> None:
    mine = (await w.get("pay", C)).json()
    assert ([item["id"] for item in mine["items"]], mine["total"]) == ([w.pay_connection], 1)
    error_of(await w.get("pay", C, product="billing"), 403, "FET-0012")
    everything = (await w.get("admin", C)).json()
    assert {item["id"] for item in everything["items"]} == {w.pay_connection, w.bill_connection}
    unassigned = await w.get("pay", f"{C}/unassigned")
    assert error_of(unassigned, 403, "FET-0012")["message"] == UNASSIGNED


async def test_validate_schema_resolves_only_the_tokens_names(w: World) -> None:
    url = f"{w.process.base_url}{C}/validate-schema"
    foreign = {"mappedFields": {"bill_db": {"accounts": ["*"]}}}
    error_of(await w.http.post(url, json=foreign, headers=w.headers("pay")), 400, "FET-1062")
    answered = await w.http.post(url, json=foreign, headers=w.headers("admin"))
    assert answered.status_code == 200, answered.text


async def test_jobs_and_events_of_another_product_are_hidden(w: World) -> None:
    error_of(await w.get("pay", f"{J}/{w.bill_job}"), 404, "FET-1001")
    own = (await w.get("pay", f"{J}/{w.pay_job}")).json()
    assert (own["status"], own["createdBy"]) == ("completed", "pay-svc")
    assert (await w.get("admin", f"{J}/{w.bill_job}")).json()["status"] == "completed"

    async def feed(who: str) -> list[str]:
        page = (await w.get(who, "/v1/events?after=0&limit=1000")).json()
        return [item["data"]["job_id"] for item in page["items"]]

    assert await feed("pay") == [w.pay_job]
    assert sorted(await feed("admin")) == sorted([w.pay_job, w.bill_job])


async def test_results_of_another_product_are_hidden(w: World) -> None:
    """§14.2: the download route answers a restricted token as ``GET /v1/fetcher/{id}``
    does; a token with only ``fetcher:jobs:read`` may not download (FET-0011)."""
    error_of(await w.get("pay", f"{J}/{w.bill_job}/result"), 404, "FET-1001")
    own = await w.get("pay", f"{J}/{w.pay_job}/result")
    assert own.status_code == 200, own.text
    assert (
        own.headers["etag"] == f'"{(await w.get("pay", f"{J}/{w.pay_job}")).json()["resultHmac"]}"'
    )
    assert (await w.get("admin", f"{J}/{w.bill_job}/result")).status_code == 200
    reader = await asyncio.to_thread(
        dev_token, "--sub", "reader", "--scope", "fetcher:jobs:read", "--product", "payments"
    )
    denied = await w.http.get(
        f"{w.process.base_url}{J}/{w.pay_job}/result",
        headers={"Authorization": f"Bearer {reader}"},
    )
    assert error_of(denied, 403, "FET-0011")["message"] == "token lacks scope fetcher:results:read"
    results = await asyncio.to_thread(
        dev_token, "--sub", "dl", "--scope", "fetcher:results:read", "--product", "payments"
    )
    allowed = await w.http.get(
        f"{w.process.base_url}{J}/{w.pay_job}/result",
        headers={"Authorization": f"Bearer {results}"},
    )
    assert allowed.content == own.content


async def test_the_restricted_tokens_log_lines_carry_its_sub(w: World) -> None:
    lines = [line for line in w.process.logs().splitlines() if w.pay_job in line]
    assert any('"sub":"pay-svc"' in line.replace(" ", "") for line in lines), lines
