"""The console with ``AUTH_MODE=jwt`` and ``MULTI_TENANT_ENABLED=true`` (issue 21), in headless
Chromium over WebDriver against a running embedded process.

* Without a token the page asks for one and calls no business route; a token that is not
  valid shows ``401 Unauthorized``, one without the route's scope ``403 Forbidden`` with the
  API's message.
* A token that may read jobs but not events sees a job's page with a 403 in place of its
  events.
* Tokens stay in the page's memory: nothing in localStorage, sessionStorage or a cookie, and
  after a reload the page asks again.
* The tenant picker: with a token of ``acme`` and one of ``globex``, each tenant sees its own
  connections only (the API takes the tenant from the token, §12.5; the picker chooses which
  token is sent, with ``X-Tenant-ID`` naming it).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import jwt

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.browser import WebDriver, web_driver
from tests.e2e.conftest import E2E
from tests.e2e.harness import PRODUCT, embedded_fetcher, eventually, unique
from tests.fakes.jwks_harness import SECRET, SECRET_B64
from tests.fakes.jwks_server import ISSUER

pytestmark = E2E

ENV = {
    "AUTH_MODE": "jwt",
    "AUTH_ISSUER": ISSUER,
    "AUTH_JWT_SECRET": SECRET_B64,
    "MULTI_TENANT_ENABLED": "true",
}


def token(tenant: str, scope: str = "fetcher:admin") -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": "fetcher",
        "sub": f"ops-{tenant}",
        "iat": now,
        "exp": now + 3600,
        "scope": scope,
        "tenantId": tenant,
    }
    return jwt.encode(claims, SECRET, algorithm="HS256")


async def _connection(http: httpx.AsyncClient, base_url: str, tenant: str, folder: Path) -> str:
    """A SQLITE connection of ``tenant``; its configName."""
    name = unique(tenant).replace("-", "_")
    response = await http.post(
        f"{base_url}/v1/management/connections",
        json={"configName": name, "type": "SQLITE", "databaseName": str(folder / "x.db")},
        headers={"X-Product-Name": PRODUCT, "Authorization": f"Bearer {token(tenant)}"},
    )
    assert response.status_code == 201, response.text
    return name


async def _use_token(driver: WebDriver, value: str) -> None:
    await driver.type(await driver.wait_for("#token"), value)
    await driver.click(await driver.wait_for("#use-token"))


async def _forget(driver: WebDriver) -> None:
    await driver.click(await driver.wait_for("#forget-token"))


async def _nothing_stored(driver: WebDriver) -> None:
    stored = await driver.script(
        "return [localStorage.length, sessionStorage.length, document.cookie]"
    )
    assert stored == [0, 0, ""]


async def _connection_names(driver: WebDriver) -> list[str]:
    names: list[str] = await driver.script(
        "return [...document.querySelectorAll('#connection-list a.conn-link')]"
        ".map(a => a.textContent)"
    )
    return names


async def _job_without_events_scope(
    driver: WebDriver, http: httpx.AsyncClient, base_url: str, connection: str
) -> None:
    """A token that may read jobs but not events: the job page shows the job, and the
    events section the 403 with the scope it lacks."""
    body = {
        "dataRequest": {"mappedFields": {connection: {"accounts": ["*"]}}},
        "metadata": {"source": PRODUCT, "correlationId": unique("console")},
    }
    headers = {"Authorization": f"Bearer {token('acme')}"}
    created = await http.post(f"{base_url}/v1/fetcher", json=body, headers=headers)
    assert created.status_code == 202, created.text
    job_id = created.json()["jobId"]

    async def ended() -> bool | None:
        job = (await http.get(f"{base_url}/v1/fetcher/{job_id}", headers=headers)).json()
        return job["status"] == "completed" or None

    await eventually(ended, "the acme job to complete")
    await _use_token(driver, token("acme", scope="fetcher:jobs:read"))
    await driver.open(f"{base_url}/console#/jobs/{job_id}")
    await driver.wait_for("#job-page", text=job_id)
    await driver.wait_for(
        "#job-events .failure", text="403 Forbidden: token lacks scope fetcher:events:read"
    )


async def test_tokens_stay_in_memory_and_tenants_see_their_own(tmp_path: Path) -> None:
    folder = tmp_path / "samples"
    folder.mkdir()
    build_sample_database(folder / "x.db")
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(folder), **ENV) as process,
        httpx.AsyncClient(timeout=30.0) as http,
        web_driver(tmp_path / "profile") as driver,
    ):
        acme = await _connection(http, process.base_url, "acme", folder)
        globex = await _connection(http, process.base_url, "globex", folder)
        await driver.open(f"{process.base_url}/console#/connections")
        await driver.wait_for("#view", text="Enter a bearer token")

        await _use_token(driver, "not-a-token")
        await driver.wait_for(".failure", text="401 Unauthorized: missing or invalid bearer token")
        await _forget(driver)
        await _use_token(driver, token("acme", scope="fetcher:jobs:write"))
        await driver.wait_for(
            ".failure", text="403 Forbidden: token lacks scope fetcher:connections:read"
        )
        await _forget(driver)

        await _use_token(driver, token("acme"))
        await driver.wait_for("#connection-list a", text=acme)
        assert await _connection_names(driver) == [acme]
        await _use_token(driver, token("globex"))
        await driver.wait_for("#connection-list a", text=globex)
        assert await _connection_names(driver) == [globex]
        # Back to acme through the picker.
        await driver.script(
            "const s = document.querySelector('#tenant'); s.value = 'acme';"
            "s.dispatchEvent(new Event('change'));"
        )

        async def acme_only() -> bool | None:
            return await _connection_names(driver) == [acme] or None

        await eventually(acme_only, "acme's connections after picking acme")
        await _nothing_stored(driver)
        await _forget(driver)
        await _job_without_events_scope(driver, http, process.base_url, acme)
        await driver.reload()
        await driver.wait_for("#view", text="Enter a bearer token")
        await _nothing_stored(driver)
