"""The web console at ``/console`` (issue 21), tested as a person would use it.

A running embedded process (one real ``fetcher run``, SQLite store, a SQLite sample datasource
in ``SQLITE_ALLOWED_DIR``) is opened in headless Chromium driven over WebDriver, with every
connection other than to 127.0.0.1 failing (tests/e2e/browser.py). The person finds the
completed job in the job list, filters to ``failed`` and reads a failed job's error, opens the
jobs' pages, opens the connection and presses **Test** until the rate limit answers, browses
its schema and reads the event feed; then a job that runs for seconds turns ``failed`` on the
open list without a reload (the list refreshes itself while a job runs), and a PostgreSQL
connection's page shows its fields but never its password. Afterwards the page
must have requested nothing but the Manager itself (Chromium's own performance log and the
page's resource timing).

XSS: ``configName`` only allows ``[A-Za-z0-9_-]``, so the hostile name travels where the API
accepts any text: the connection's ``userName`` and ``metadata``, a job's ``metadata`` and a
requested field name, which the Worker's failure text repeats (§4.5). Each must show as its
literal characters, with no ``<img>`` element, no alert and no CSP report. With the console's
one text primitive (``dom.js`` ``text()``) switched to ``innerHTML``, this test fails.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.browser import WebDriver, web_driver
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    PRODUCT,
    FetcherProcess,
    ManagerApi,
    embedded_fetcher,
    eventually,
    unique,
)
from tests.sqlite_views import SLOW_SQLITE_VIEW

pytestmark = E2E

HOSTILE = "<img src=x onerror=alert(1)>"
CONNECTIONS = "/v1/management/connections"
SLOW_JOB_SECONDS = 8
#: Events in the longer feed, and how many the event page shows (events.js SHOWN).
FEED_JOBS = 64
EVENTS_SHOWN = 50
#: The URL schemes that reach a host over the network.
NETWORK_SCHEMES = {"http", "https", "ws", "wss", "ftp"}
#: §2.6.7: the per-connection bucket's capacity.
TEST_BUCKET = 10


@dataclass
class Scene:
    process: FetcherProcess
    connection: dict[str, Any]
    completed: dict[str, Any]
    failed: dict[str, Any]

    def url(self, fragment: str = "") -> str:
        return f"{self.process.base_url}/console{fragment}"


async def _connection(api: ManagerApi, database: Path) -> dict[str, Any]:
    response = await api.http.post(
        f"{api.base_url}{CONNECTIONS}",
        json={
            "configName": unique("ledger").replace("-", "_"),
            "type": "SQLITE",
            "databaseName": str(database),
            "metadata": {"label": HOSTILE, "owner": "<b>ops</b>"},
        },
        headers={"X-Product-Name": PRODUCT},
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


@pytest_asyncio.fixture
async def scene(tmp_path: Path) -> AsyncIterator[Scene]:
    samples = tmp_path / "samples"
    samples.mkdir()
    database = samples / "ledger.db"
    build_sample_database(database)
    with contextlib.closing(sqlite3.connect(database)) as db:
        db.execute(SLOW_SQLITE_VIEW)
        db.commit()
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(samples)) as process,
        httpx.AsyncClient(timeout=30.0) as http,
    ):
        api = ManagerApi(http, process.base_url)
        connection = await _connection(api, database)
        name = connection["configName"]
        ok = await api.submit({name: {"ledger": ["id", "amount"]}})
        bad = await api.submit(
            {name: {"ledger": ["id", HOSTILE]}},
            metadata={"source": PRODUCT, "correlationId": HOSTILE},
        )
        completed = await api.wait_terminal(ok)
        failed = await api.wait_terminal(bad)
        assert completed["status"] == "completed", completed
        assert failed["status"] == "failed", failed
        assert HOSTILE in failed["metadata"]["error"], failed
        yield Scene(process, connection, completed, failed)


async def _row_ids(driver: WebDriver) -> list[str]:
    ids: list[str] = await driver.script(
        "return [...document.querySelectorAll('#job-list tbody tr td:nth-child(2)')]"
        ".map(td => td.textContent)"
    )
    return ids


async def _assert_inert(driver: WebDriver) -> None:
    """Nothing hostile became markup or ran: no <img>, no alert, no CSP report, no error."""
    assert await driver.alert_text() is None
    # An API answer of 4xx is logged by the browser as a "network" entry: that one is expected
    # (the 429 of the Test button); a CSP report or a script error is not.
    logged = await driver.log("browser")
    problems = [e["message"] for e in logged if e["level"] != "INFO" and e["source"] != "network"]
    assert problems == [], problems
    images = await driver.script("return document.querySelectorAll('img, b').length")
    assert images == 0


async def _jobs(driver: WebDriver, scene: Scene) -> None:
    await driver.open(scene.url("#/jobs"))
    await driver.wait_for("#job-list td", text=scene.completed["id"])
    assert scene.failed["id"] in await _row_ids(driver)
    # Filter to failed, as a person does: tick the box and apply.
    await driver.click(await driver.wait_for("input[name=status][value=failed]"))
    await driver.click(await driver.wait_for("#apply-filters"))
    error = scene.failed["metadata"]["error"]

    async def only_failed() -> bool | None:
        return await _row_ids(driver) == [scene.failed["id"]] or None

    await eventually(only_failed, "the list filtered to the failed job", within=20)
    assert error[:60] in await driver.text(await driver.wait_for("#job-list td .error-text"))
    assert "status=failed" in await driver.script("return location.hash")
    await _assert_inert(driver)
    # The failed job's page: the whole redacted failure text, as text.
    await driver.click(await driver.wait_for("#job-list a", text=scene.failed["id"]))
    shown = await driver.text(await driver.wait_for("#job-error"))
    assert shown == error
    await driver.wait_for("#job-events td", text="job.failed")
    page = await driver.text(await driver.wait_for("#job-page"))
    assert HOSTILE in page  # the correlationId in the request's metadata
    await _assert_inert(driver)


async def _job_page(driver: WebDriver, scene: Scene) -> None:
    job = scene.completed
    await driver.open(scene.url(f"#/jobs/{job['id']}"))
    path = await driver.text(await driver.wait_for("#result-path"))
    assert path == job["resultPath"]
    page = await driver.text(await driver.wait_for("#job-page", text=job["resultHmac"]))
    assert job["requestHash"] in page
    await driver.wait_for("#job-events td", text="job.completed")
    # §14.1 summary: rows per table, sizes, key version; §14.2 the encrypted object's download.
    result = job["result"]
    summary = await driver.text(await driver.wait_for("#job-result"))
    assert f"{result['sizeBytes']} bytes" in summary
    assert f"{result['plaintextBytes']} bytes" in summary
    assert "Key version\n1" in summary or "Key version 1" in summary, summary
    rows = await driver.script(
        "return [...document.querySelectorAll('#result-tables tbody tr')]"
        ".map(tr => [...tr.cells].map(td => td.textContent))"
    )
    assert rows == [
        [ds, table, str(count)]
        for ds, counts in result["tables"].items()
        for table, count in counts.items()
    ]
    await driver.click(await driver.wait_for("#download-result"))
    status = await driver.text(
        await driver.wait_for("#download-status", text=f"{result['sizeBytes']} bytes")
    )
    assert status.endswith(f"{job['id']}.json.enc"), status
    await _assert_inert(driver)


async def _connection_page(driver: WebDriver, scene: Scene) -> None:
    connection = scene.connection
    await driver.open(scene.url("#/connections"))
    await driver.click(await driver.wait_for("#connection-list a", text=connection["configName"]))
    page = await driver.text(await driver.wait_for("#connection-page", text="Test"))
    assert HOSTILE in page
    assert "<b>ops</b>" in page
    button = await driver.wait_for("#test-connection")
    results = [await _press_test(driver, button) for _ in range(TEST_BUCKET + 1)]
    # The bucket holds 10 (and other presses may have refilled a little): the first press
    # succeeds, and pressing on reaches the rate limit, shown as such.
    assert results[0].startswith("success: Connection successful ("), results
    refused = [r for r in results if not r.startswith("success: Connection successful")]
    assert refused, results
    assert refused[0].startswith("429 Too Many Requests: Connection test limit reached"), results
    assert "Retry-After" in refused[0]
    await driver.click(await driver.wait_for("#load-schema"))
    await driver.wait_for("#schema summary", text="ledger")
    await _assert_inert(driver)


async def _no_secret_shown(driver: WebDriver, scene: Scene, http: httpx.AsyncClient) -> None:
    """A PostgreSQL connection with a password: its page shows its fields, never the
    password (nor anything else the API does not return)."""
    password = f"Pw-{unique('secret')}"
    response = await http.post(
        f"{scene.process.base_url}{CONNECTIONS}",
        json={
            "configName": unique("pg").replace("-", "_"),
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": 5432,
            "databaseName": "test",
            "userName": HOSTILE,
            "password": password,
            "ssl": {"mode": "disable"},
        },
        headers={"X-Product-Name": PRODUCT},
    )
    assert response.status_code == 201, response.text
    await driver.open(scene.url(f"#/connections/{response.json()['id']}"))
    page = await driver.text(await driver.wait_for("#connection-page", text="POSTGRESQL"))
    assert HOSTILE in page  # the user name, as text
    assert "127.0.0.1" in page
    dom = await driver.script("return document.documentElement.outerHTML")
    assert password not in dom
    await _assert_inert(driver)


async def _press_test(driver: WebDriver, button: str) -> str:
    """Press Test and read the answer once the button is enabled again."""
    await driver.click(button)

    async def settled() -> str | None:
        state: list[Any] = await driver.script(
            "const b = document.querySelector('#test-connection');"
            "const r = document.querySelector('#test-result');"
            "return [b.disabled, r.innerText];"
        )
        busy, text = state
        return None if busy or text.startswith("Testing") or not text else str(text)

    return await eventually(settled, "the connection test's answer", within=20)


async def _events(driver: WebDriver, scene: Scene) -> None:
    await driver.open(scene.url("#/events"))
    await driver.wait_for("#event-list td", text=scene.completed["id"])
    cells = await driver.script(
        "return [...document.querySelectorAll('#event-list tbody tr')]"
        ".map(tr => [Number(tr.cells[0].textContent), tr.cells[2].textContent])"
    )
    assert {job for _, job in cells} == {scene.completed["id"], scene.failed["id"]}
    cursors = [cursor for cursor, _ in cells]
    assert cursors == sorted(cursors, reverse=True)  # newest first
    await driver.open(scene.url("#/events?type=failed"))
    await driver.wait_for("#event-list td", text=scene.failed["id"])
    assert scene.completed["id"] not in await driver.text(await driver.wait_for("#event-list"))


async def _statuses(driver: WebDriver) -> dict[str, str]:
    rows: dict[str, str] = await driver.script(
        "return Object.fromEntries([...document.querySelectorAll('#job-list tbody tr')]"
        ".map(tr => [tr.cells[1].textContent, tr.cells[0].textContent]))"
    )
    return rows


async def _live(driver: WebDriver, scene: Scene) -> None:
    """A running job turns ``failed`` on the open list, with no reload."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        api = ManagerApi(http, scene.process.base_url)
        slow = await api.submit(
            {scene.connection["configName"]: {"slow": ["*"]}},
            limits={"timeoutSeconds": SLOW_JOB_SECONDS},
        )
    await driver.open(scene.url("#/jobs"))
    await driver.wait_for("#job-list td", text=slow)
    assert (await _statuses(driver))[slow] in ("pending", "processing")
    await driver.script("window.consoleTestMark = 'same page'")

    async def ended() -> str | None:
        status = (await _statuses(driver))[slow]
        return status if status in ("completed", "failed") else None

    assert await eventually(ended, "the list to show the job's end", within=60) == "failed"
    assert await driver.script("return window.consoleTestMark") == "same page"
    error = await driver.text(await driver.wait_for("#job-list td .error-text", text="deadline"))
    assert error == "execution exceeded its deadline"


async def _only_the_manager(driver: WebDriver, base_url: str) -> None:
    """Every request the browser made, by its own log and by the page's timing, went to the
    Manager."""
    requested = []
    for entry in await driver.log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
    resources = await driver.script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    # chrome:// pages (the first blank tab) and data: URLs are the browser's own, no host.
    network = [u for u in [*requested, *resources] if u.split(":", 1)[0] in NETWORK_SCHEMES]
    assert sum(u.startswith(f"{base_url}/console") for u in network) >= 8, network
    elsewhere = [u for u in network if not u.startswith(f"{base_url}/")]
    assert elsewhere == []


async def test_a_person_uses_the_console(scene: Scene, tmp_path: Path) -> None:
    async with web_driver(tmp_path / "profile") as driver:
        await _jobs(driver, scene)
        await _job_page(driver, scene)
        await _connection_page(driver, scene)
        await _events(driver, scene)
        await _live(driver, scene)
        async with httpx.AsyncClient(timeout=30.0) as http:
            await _no_secret_shown(driver, scene, http)
        await _only_the_manager(driver, scene.process.base_url)


async def test_the_feed_pages_search_a_longer_feed(tmp_path: Path) -> None:
    """The event page's newest 50 and a job's events are found by bisection over one-item
    pages (feed.js): over 64 events, every third a failure, spread 10 minutes apart (so a
    job's events lie far from most of the feed), they must be exactly what reading the whole
    feed gives."""
    samples = tmp_path / "samples"
    samples.mkdir()
    build_sample_database(samples / "ledger.db")
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(samples)) as process,
        httpx.AsyncClient(timeout=30.0) as http,
    ):
        api = ManagerApi(http, process.base_url)
        name = (await _connection(api, samples / "ledger.db"))["configName"]
        jobs = [
            await api.submit({name: {"ledger": ["id", "nope" if i % 3 == 0 else "amount"]}})
            for i in range(FEED_JOBS)
        ]
        for job in jobs:
            await api.wait_terminal(job)
        _spread_over_hours(tmp_path / "state" / "meta.db")
        feed = await _whole_feed(http, process.base_url)
        assert len(feed) == FEED_JOBS
        async with web_driver(tmp_path / "profile") as driver:
            for kind, path in (("", "#/events"), ("failed", "#/events?type=failed")):
                expected = [e for e in feed if not kind or e["routingKey"] == f"job.{kind}"]
                newest = [int(e["cursor"]) for e in expected][::-1][:EVENTS_SHOWN]
                await driver.open(f"{process.base_url}/console{path}")
                await driver.wait_for("#event-list td", text=expected[-1]["data"]["job_id"])
                shown = await driver.script(
                    "return [...document.querySelectorAll('#event-list tbody tr')]"
                    ".map(tr => Number(tr.cells[0].textContent))"
                )
                assert shown == newest, kind
            for job in (jobs[1], jobs[FEED_JOBS // 2], jobs[-1]):
                cursor = next(e["cursor"] for e in feed if e["data"]["job_id"] == job)
                await driver.open(f"{process.base_url}/console#/jobs/{job}")
                row = await driver.text(await driver.wait_for("#job-events tbody tr"))
                assert row.startswith(f"{cursor} job."), row


def _spread_over_hours(meta_db: Path) -> None:
    """Move each job, and its event, 10 minutes before the next one (in the metadata store of
    the running process: SQLite lets another writer in)."""
    shift = "strftime('%Y-%m-%dT%H:%M:%fZ', {}, ?)"
    with contextlib.closing(sqlite3.connect(meta_db, timeout=10)) as db:
        rows = db.execute("SELECT id, job_id FROM outbox ORDER BY id").fetchall()
        for position, (row_id, job_id) in enumerate(rows):
            minutes = f"-{(len(rows) - position) * 10} minutes"
            created = shift.format("created_at")
            db.execute(f"UPDATE outbox SET created_at = {created} WHERE id = ?", (minutes, row_id))
            db.execute(
                f"UPDATE jobs SET created_at = {created},"
                f" completed_at = {shift.format('completed_at')} WHERE id = ?",
                (minutes, minutes, job_id),
            )
        db.commit()


async def _whole_feed(http: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    after = "0"
    while True:
        page = (await http.get(f"{base_url}/v1/events", params={"after": after})).json()
        if not page["items"]:
            return items
        items += page["items"]
        after = page["next"]


async def test_a_person_cancels_and_retries_a_job(scene: Scene, tmp_path: Path) -> None:
    """§14.4 in the console: a running job's page has **Cancel job**; pressing it shows the
    API's confirmation and the page turns ``canceled`` (no button any more). §14.5: **Retry
    job** on it links the new job, whose page names the retried one; a completed job has no
    Retry. A job that ended meanwhile (canceled behind the page's back) shows the API's 409
    FET-1104 as an error."""
    name = scene.connection["configName"]
    async with httpx.AsyncClient(timeout=30.0) as http:
        api = ManagerApi(http, scene.process.base_url)
        running = await api.submit({name: {"slow": ["*"]}}, limits={"timeoutSeconds": 60})
        raced = await api.submit({name: {"slow": ["*"]}}, limits={"timeoutSeconds": 60})
        async with web_driver(tmp_path / "profile") as driver:
            await driver.open(scene.url(f"#/jobs/{running}"))
            await driver.click(await driver.wait_for("#cancel-job"))
            notice = await driver.text(await driver.wait_for("#job-notice", text="Canceled"))
            assert notice == "Canceled: the job is now canceled."
            await driver.wait_for("#job-page .badge", text="canceled")
            assert await driver.script("return document.querySelector('#cancel-job')") is None
            assert (await api.job(running))["status"] == "canceled"

            # §14.5: the canceled job's Retry submits it again; the notice links the new job,
            # whose page names the job it retries.
            await driver.click(await driver.wait_for("#retry-job"))
            notice = await driver.text(await driver.wait_for("#job-notice", text="queued"))
            retried = notice.rsplit(": ", 1)[1]
            assert notice == f"Job created and queued for processing: {retried}"
            await driver.click(await driver.wait_for("#retried-job"))
            link = await driver.text(await driver.wait_for("#retry-of"))
            assert link == running
            assert (await api.job(retried))["retryOf"] == running
            cleanup = await http.post(f"{scene.process.base_url}/v1/fetcher/{retried}/cancel")
            assert cleanup.status_code == 200, cleanup.text

            await driver.open(scene.url(f"#/jobs/{scene.completed['id']}"))
            await driver.wait_for("#job-result")
            assert await driver.script("return document.querySelector('#retry-job')") is None

            await driver.open(scene.url(f"#/jobs/{raced}"))
            button = await driver.wait_for("#cancel-job")
            behind = await http.post(f"{scene.process.base_url}/v1/fetcher/{raced}/cancel")
            assert behind.status_code == 200, behind.text
            await driver.click(button)
            error = await driver.text(await driver.wait_for("#job-notice", text="FET-1104"))
            assert "the job cannot be canceled: it is canceled" in error, error
            await driver.wait_for("#job-page .badge", text="canceled")
            await _assert_inert(driver)
