"""The console as a new operator meets it (issue 33 item 8), in headless Chromium against a
running embedded process (tests/e2e/browser.py, every host but 127.0.0.1 unreachable).

* ``/console/`` (the address people type) is the console;
* the job list refreshes with no listed job running: a new failed job appears without a
  reload, and nothing is requested while the tab is hidden;
* times are UTC ISO with their zone, as the CLI and the logs write them;
* a completed event's result path is not in the error style, a failure's text is;
* the schema browser shows each column's type, as ``GET …/schema`` gives it;
* every input and select has a real label;
* the status legend's contrast is at least 4.5:1 (WCAG 2 AA), computed from the rendered colours;
* the list filters by product (``X-Product-Name``) and by ``correlationId``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.browser import WebDriver, web_driver
from tests.e2e.conftest import E2E
from tests.e2e.harness import PRODUCT, FetcherProcess, ManagerApi, embedded_fetcher, eventually
from tests.e2e.harness import unique as unique_name

pytestmark = E2E

CONNECTIONS = "/v1/management/connections"
OTHER_PRODUCT = "billing"
UTC_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
#: jobs.js IDLE_MS, with room for one slow refresh.
IDLE_REFRESH_WITHIN = 5.0 + 10.0


@dataclass
class Desk:
    process: FetcherProcess
    api: ManagerApi
    connection: dict[str, Any]
    other: dict[str, Any]
    completed: dict[str, Any]
    billing: dict[str, Any]

    def url(self, path: str = "/console", fragment: str = "") -> str:
        return f"{self.process.base_url}{path}{fragment}"


async def _connection(api: ManagerApi, database: Path, product: str) -> dict[str, Any]:
    response = await api.http.post(
        f"{api.base_url}{CONNECTIONS}",
        json={
            "configName": unique_name("ledger").replace("-", "_"),
            "type": "SQLITE",
            "databaseName": str(database),
        },
        headers={"X-Product-Name": product},
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


@pytest_asyncio.fixture(loop_scope="session")
async def desk(tmp_path: Path) -> AsyncIterator[Desk]:
    samples = tmp_path / "samples"
    samples.mkdir()
    build_sample_database(samples / "ledger.db")
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(samples)) as process,
        httpx.AsyncClient(timeout=30.0) as http,
    ):
        api = ManagerApi(http, process.base_url)
        connection = await _connection(api, samples / "ledger.db", PRODUCT)
        other = await _connection(api, samples / "ledger.db", OTHER_PRODUCT)
        ok = await api.submit(
            {connection["configName"]: {"ledger": ["id", "amount"]}},
            metadata={"source": PRODUCT, "correlationId": "settlement-2026-12-07"},
        )
        billed = await api.submit(
            {other["configName"]: {"ledger": ["id"]}},
            metadata={"source": OTHER_PRODUCT, "correlationId": "invoice-run-7"},
        )
        completed, billing = await api.wait_terminal(ok), await api.wait_terminal(billed)
        assert (completed["status"], billing["status"]) == ("completed", "completed")
        yield Desk(process, api, connection, other, completed, billing)


async def _listed(driver: WebDriver) -> list[str]:
    ids: list[str] = await driver.script(
        "return [...document.querySelectorAll('#job-list tbody tr td:nth-child(2)')]"
        ".map(td => td.textContent)"
    )
    return ids


async def _trailing_slash_and_zones(driver: WebDriver, desk: Desk) -> None:
    await driver.open(desk.url("/console/", "#/jobs"))
    await driver.wait_for("#job-list td", text=desk.completed["id"])
    created = await driver.script(
        "return [...document.querySelectorAll('#job-list tbody tr')]"
        ".find(tr => tr.cells[1].textContent === arguments[0]).cells[4].textContent",
        desk.completed["id"],
    )
    assert UTC_ISO.fullmatch(created), created
    assert created[:19] == desk.completed["createdAt"][:19]  # the same instant, in UTC


async def _refresh_without_a_running_job(driver: WebDriver, desk: Desk) -> None:
    """No listed job runs; a job created now (it fails at once) shows up by itself."""
    await driver.open(desk.url(fragment="#/jobs"))
    await driver.wait_for("#job-list td", text=desk.completed["id"])
    assert not {"pending", "processing"} & set(
        await driver.script(
            "return [...document.querySelectorAll('#job-list tbody tr')]"
            ".map(tr => tr.cells[0].textContent)"
        )
    )
    await driver.script("window.operatorMark = 'same page'")
    failed = await desk.api.submit({desk.connection["configName"]: {"ledger": ["nope"]}})
    await desk.api.wait_terminal(failed)

    async def shown() -> bool | None:
        return failed in await _listed(driver) or None

    await eventually(shown, "the new failed job on the open list", within=IDLE_REFRESH_WITHIN)
    assert await driver.script("return window.operatorMark") == "same page"


async def _paused_while_hidden(driver: WebDriver, desk: Desk) -> None:
    """While the tab is hidden the list requests nothing; shown again, it refreshes at once."""
    await driver.open(desk.url(fragment="#/jobs"))
    await driver.wait_for("#job-list td", text=desk.completed["id"])
    count = (
        "return performance.getEntriesByType('resource')"
        ".filter(e => new URL(e.name).pathname === '/v1/fetcher').length"
    )
    await driver.script(
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});"
        "document.dispatchEvent(new Event('visibilitychange'));"
    )
    before = await driver.script(count)
    await asyncio.sleep(IDLE_REFRESH_WITHIN)
    assert await driver.script(count) == before
    await driver.script(
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});"
        "document.dispatchEvent(new Event('visibilitychange'));"
    )

    async def refreshed() -> bool | None:
        return await driver.script(count) > before or None

    await eventually(refreshed, "a refresh once the tab shows again", within=3)


async def _result_path_is_plain(driver: WebDriver, desk: Desk) -> None:
    await driver.open(desk.url(fragment="#/events"))
    await driver.wait_for("#event-list td", text=desk.completed["id"])
    cells = await driver.script(
        "const rows = [...document.querySelectorAll('#event-list tbody tr')];"
        "return rows.map(tr => [tr.cells[1].textContent, tr.cells[5].textContent,"
        " tr.cells[5].querySelectorAll('.error-text').length,"
        " getComputedStyle(tr.cells[5].firstElementChild || tr.cells[5]).color]);"
    )
    by_type = {kind: (text, errors, color) for kind, text, errors, color in cells}
    path, plain_errors, plain_color = by_type["job.completed"]
    failure, failure_errors, failure_color = by_type["job.failed"]
    assert path.startswith("external-data/"), path
    assert path.endswith(".json"), path
    assert failure.startswith("extraction request failed schema validation"), failure
    assert (plain_errors, failure_errors) == (0, 1)
    assert plain_color != failure_color, (plain_color, failure_color)


async def _schema_types(driver: WebDriver, desk: Desk) -> None:
    schema = (
        await desk.api.http.get(
            f"{desk.api.base_url}{CONNECTIONS}/{desk.connection['id']}/schema",
        )
    ).json()
    [ledger] = [t for t in schema["tables"] if t["name"] == "ledger"]
    await driver.open(desk.url(fragment=f"#/connections/{desk.connection['id']}"))
    await driver.click(await driver.wait_for("#load-schema"))
    await driver.wait_for("#schema summary", text="ledger")
    shown = await driver.script(
        "const table = [...document.querySelectorAll('#schema details')]"
        ".find(d => d.querySelector('summary').textContent.startsWith('ledger '));"
        "return [...table.querySelectorAll('li.field')].map(li => li.textContent);"
    )
    assert shown == [f"{f} {ledger['types'][f]}" for f in ledger["fields"]], shown
    assert ledger["types"]["amount"] == "DECIMAL(18, 2)", ledger["types"]
    await _every_input_labelled(driver)


async def _every_input_labelled(driver: WebDriver) -> None:
    unlabelled = await driver.script(
        "return [...document.querySelectorAll('input, select')]"
        ".filter(el => !el.labels || ![...el.labels].some(l => l.textContent.trim()))"
        ".map(el => el.outerHTML)"
    )
    assert unlabelled == []


def _luminance(rgb: tuple[float, ...]) -> float:
    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two ``rgb(…)``/``rgba(…)`` colours."""

    def parse(color: str) -> tuple[float, ...]:
        return tuple(float(v) for v in re.findall(r"[\d.]+", color))

    light, dark = sorted((_luminance(parse(foreground)), _luminance(parse(background))))[::-1]
    return (light + 0.05) / (dark + 0.05)


async def _legend_contrast(driver: WebDriver, desk: Desk) -> None:
    await driver.open(desk.url(fragment="#/jobs"))
    await driver.wait_for("#job-list td", text=desk.completed["id"])
    await _every_input_labelled(driver)
    colours = await driver.script(
        "const legend = document.querySelector('#job-filters legend');"
        "let el = legend, bg = 'rgba(0, 0, 0, 0)';"
        "while (el && /rgba\\(.*, 0\\)|transparent/.test(bg)) {"
        "  bg = getComputedStyle(el).backgroundColor; el = el.parentElement; }"
        "return [getComputedStyle(legend).color, bg];"
    )
    foreground, background = colours
    assert "rgba" not in foreground, foreground
    assert contrast(foreground, background) >= 4.5, colours


async def _filters(driver: WebDriver, desk: Desk) -> None:
    """Product (sent as ``X-Product-Name``) and correlationId, typed and applied."""
    await driver.open(desk.url(fragment="#/jobs"))
    await driver.wait_for("#job-list td", text=desk.billing["id"])
    await driver.type(await driver.wait_for("input[name=product]"), OTHER_PRODUCT)
    await driver.click(await driver.wait_for("#apply-filters"))

    async def only(job_id: str) -> bool | None:
        return await _listed(driver) == [job_id] or None

    await eventually(lambda: only(desk.billing["id"]), "the billing product's job", within=20)
    assert f"product={OTHER_PRODUCT}" in await driver.script("return location.hash")

    await driver.open(desk.url(fragment="#/jobs?correlationId=settlement-2026-12-07"))
    await eventually(lambda: only(desk.completed["id"]), "the job of that correlationId", within=20)
    note = await driver.text(await driver.wait_for("#job-search-note"))
    assert note.startswith("Correlation ID matched in the browser over the newest"), note
    field = await driver.wait_for("input[name=correlationId]")
    assert await driver.script("return arguments[0].value", {ELEMENT_KEY: field}) == (
        "settlement-2026-12-07"
    )


ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"


async def test_a_new_operator_finds_the_console_usable(desk: Desk, tmp_path: Path) -> None:
    async with web_driver(tmp_path / "profile") as driver:
        await _trailing_slash_and_zones(driver, desk)
        await _legend_contrast(driver, desk)
        await _filters(driver, desk)
        await _schema_types(driver, desk)
        await _refresh_without_a_running_job(driver, desk)
        await _result_path_is_plain(driver, desk)
        await _paused_while_hidden(driver, desk)
