"""Retake the console screenshots of ``docs/console.md`` (not a test).

    .venv/bin/python -m tests.e2e.console_screenshots docs/console

Starts an embedded process on the demo's sample ledger, runs five jobs (completed, empty and
failed ones), and photographs the job list and a completed job's page in headless Chromium
through the same WebDriver helper as the browser tests (``tests/e2e/browser.py``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import httpx

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.browser import web_driver
from tests.e2e.harness import PRODUCT, ManagerApi, embedded_fetcher

REQUESTS = (
    {"demo_ledger": {"ledger": ["id", "account", "amount"], "accounts": ["*"]}},
    {"demo_ledger": {"ledger": ["id", "memo", "balance_after"]}},
    {"demo_ledger": {"archived_entries": ["*"]}},
    {"demo_ledger": {"missing_table": ["id"]}},  # fails: no such table
    {"demo_ledger": {"accounts": ["id"]}},
)


async def _jobs(api: ManagerApi) -> list[dict[str, object]]:
    filters = {"demo_ledger": {"ledger": {"currency": {"eq": ["USD"]}}}}
    ids = [await api.submit(REQUESTS[0], filters=filters)]
    ids += [await api.submit(mapped) for mapped in REQUESTS[1:]]
    return [await api.wait_terminal(job_id) for job_id in ids]


async def take(out: Path, tmp: Path) -> None:
    samples = tmp / "samples"
    samples.mkdir(parents=True)
    ledger = samples / "ledger.db"
    build_sample_database(ledger)
    connection = {
        "configName": "demo_ledger",
        "type": "SQLITE",
        "databaseName": str(ledger),
        "metadata": {"team": "finance"},
    }
    async with (
        embedded_fetcher(tmp, SQLITE_ALLOWED_DIR=str(samples)) as process,
        httpx.AsyncClient(timeout=30) as http,
    ):
        api = ManagerApi(http, process.base_url)
        created = await http.post(
            f"{process.base_url}/v1/management/connections",
            headers={"X-Product-Name": PRODUCT},
            json=connection,
        )
        created.raise_for_status()
        jobs = await _jobs(api)
        async with web_driver(tmp / "profile", width=1280, height=1000) as driver:
            await driver.open(f"{process.base_url}/console#/jobs")
            await driver.wait_for("#job-list td", text=str(jobs[0]["id"]))
            await asyncio.sleep(0.5)
            await driver.screenshot(out / "jobs.png")
            done = next(job for job in jobs if job["status"] == "completed")
            await driver.open(f"{process.base_url}/console#/jobs/{done['id']}")
            await driver.wait_for("#job-events td", text="job.completed")
            await asyncio.sleep(0.5)
            await driver.screenshot(out / "job.png")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="fetcher-shots-") as scratch:
        asyncio.run(take(Path(sys.argv[1]), Path(scratch)))
