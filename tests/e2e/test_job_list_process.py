"""``GET /v1/fetcher`` through a running embedded process (issue 21): jobs that really ran, one
completed and one failed, found by the async SDK's iterator and by ``fetcher jobs list
--status failed --since 1h`` as a user types it (a subprocess whose output is piped: JSON
lines)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from fetcher.cli.demo_data import build_sample_database
from fetcher.client import AsyncFetcherClient
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher, eventually

pytestmark = E2E

CONNECTION = "ledger_list"


async def submit(client: httpx.AsyncClient, table: str) -> str:
    body = {
        "dataRequest": {"mappedFields": {CONNECTION: {table: ["*"]}}},
        "metadata": {"source": "payments", "run": secrets.token_hex(6)},
    }
    response = await client.post("/v1/fetcher", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


async def settled(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        job: dict[str, Any] = (await client.get(f"/v1/fetcher/{job_id}")).json()
        return job if job["status"] in ("completed", "failed") else None

    return await eventually(done, f"job {job_id}", within=30.0, interval=0.05)


def cli(base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    fetcher = Path(sys.executable).with_name("fetcher")
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "FETCHER_API_URL": base_url}
    return subprocess.run(  # noqa: S603 - our own console script, fixed arguments
        [str(fetcher), "jobs", "list", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_jobs_that_ran_are_listed_by_the_sdk_and_the_cli(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    database = allowed / "ledger.db"
    build_sample_database(database)
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(allowed)) as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=30.0) as client,
    ):
        created = await client.post(
            "/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json={"configName": CONNECTION, "type": "SQLITE", "databaseName": str(database)},
        )
        assert created.status_code == 201, created.text
        connection_id = created.json()["id"]
        ok = await settled(client, await submit(client, "accounts"))
        bad = await settled(client, await submit(client, "no_such_table"))
        assert (ok["status"], bad["status"]) == ("completed", "failed")

        async with AsyncFetcherClient(process.base_url) as api:
            every = [job async for job in api.jobs.list(connection_id=connection_id, limit=1)]
            failed = [job async for job in api.jobs.list(status="failed")]
        assert [job["id"] for job in every] == [bad["id"], ok["id"]]
        assert every[0] == bad  # the GET /v1/fetcher/{id} shape
        assert [job["id"] for job in failed] == [bad["id"]]

        result = await asyncio.to_thread(
            cli, process.base_url, "--status", "failed", "--since", "1h"
        )
        assert result.returncode == 0, result.stderr
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert [job["id"] for job in lines] == [bad["id"]]
        assert lines[0]["metadata"]["error"] == bad["metadata"]["error"]

        refused = await asyncio.to_thread(cli, process.base_url, "--status", "done")
        assert refused.returncode == 2
        assert "FET-0405" in refused.stderr
