"""§13 "Blocking work", through a running embedded process: a SQLite job that exceeds its
``timeoutSeconds`` fails with the deadline text promptly, its statement is interrupted so the
bounded SQLite read pool is not left busy, and ``/health`` stays quick meanwhile.

More timed-out jobs run than the pool has threads (``SQLITE_READ_THREADS``); a statement that
kept its thread would leave none for the ordinary job that follows, which then could not even
open its file.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from fetcher.adapters.sql.sqlite import SQLITE_READ_THREADS
from fetcher.cli.demo_data import build_sample_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher, eventually
from tests.sqlite_views import SLOW_SQLITE_VIEW

pytestmark = E2E

CONNECTION = "slow_ledger"
TIMEOUT_SECONDS = 1
#: Generous bounds: the deadline is 1 s; a job that kept running would take hours.
FAIL_WITHIN = 20.0
HEALTH_SECONDS = 0.5


@pytest_asyncio.fixture(loop_scope="session")
async def embedded(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    database = allowed / "ledger.db"
    build_sample_database(database)
    db = sqlite3.connect(database)
    db.execute(SLOW_SQLITE_VIEW)
    db.commit()
    db.close()
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(allowed)) as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=30.0) as client,
    ):
        created = await client.post(
            "/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json={
                "configName": CONNECTION,
                "type": "SQLITE",
                "databaseName": str(database),
            },
        )
        assert created.status_code == 201, created.text
        yield client


async def submit(client: httpx.AsyncClient, table: str, limits: dict[str, int]) -> str:
    body = {
        "dataRequest": {"mappedFields": {CONNECTION: {table: ["*"]}}, "limits": limits},
        "metadata": {"source": "payments", "correlationId": f"slow-{secrets.token_hex(6)}"},
    }
    response = await client.post("/v1/fetcher", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["jobId"]
    return job_id


async def terminal(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        job: dict[str, Any] = (await client.get(f"/v1/fetcher/{job_id}")).json()
        return job if job["status"] in ("completed", "failed") else None

    return await eventually(done, f"job {job_id}", within=FAIL_WITHIN, interval=0.05)


async def test_timed_out_sqlite_jobs_release_their_threads(embedded: httpx.AsyncClient) -> None:
    client = embedded
    for _ in range(SQLITE_READ_THREADS + 2):
        job_id = await submit(client, "slow", {"timeoutSeconds": TIMEOUT_SECONDS})
        begun = time.monotonic()
        health = await client.get("/health")  # while the statement runs
        assert health.status_code == 200
        assert health.elapsed.total_seconds() < HEALTH_SECONDS
        job = await terminal(client, job_id)
        assert job["status"] == "failed", job
        assert "execution exceeded its deadline" in job["metadata"]["error"]
        assert time.monotonic() - begun < FAIL_WITHIN

    ordinary = await terminal(client, await submit(client, "accounts", {}))
    assert ordinary["status"] == "completed", ordinary
