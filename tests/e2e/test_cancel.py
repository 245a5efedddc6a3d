"""Cancel through the running Manager and Worker (issue 35 item 3, contract §14.4): a pending
job is ``canceled`` at once and its work message does nothing; a processing job reading a slow
PostgreSQL view is stopped by its Worker within 2 s; neither leaves an object or an unfinished
upload, each is announced by exactly one ``job.canceled``, and a second cancel answers 409."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.client import ApiError, AsyncFetcherClient
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    Stack,
    assert_envelope,
    drain_canceled,
    embedded_fetcher,
    eventually,
    jobs_cli,
    slow_view_sql,
)
from tests.sqlite_views import SLOW_SQLITE_VIEW

pytestmark = E2E

#: 600 rows at 50 ms: half a minute of source time, far longer than the cancel takes.
SLOW_VIEW = "public.cancel_slow"
SLOW = {SOURCE_CONFIG: {SLOW_VIEW: ["id"]}}
FAST = {SOURCE_CONFIG: {"public.accounts": ["id", "email"]}}
#: §14.4: a processing job stops within 2 s of the cancel.
STOP_WITHIN_SECONDS = 2.0


async def _cancel(stack: Stack, job_id: str) -> tuple[int, dict[str, object]]:
    response = await stack.api.http.post(f"{stack.api.base_url}/v1/fetcher/{job_id}/cancel")
    body: dict[str, object] = response.json()
    return response.status_code, body


async def _one_canceled_event(stack: Stack, job_id: str) -> None:
    event = await stack.broker.collector.wait_for(job_id, "job.canceled", within=60.0)
    assert_envelope(stack, event, "canceled")
    assert event.payload["status"] == "canceled"
    await stack.broker.fence()
    routing_keys = [e.routing_key for e in stack.broker.collector.for_job(job_id)]
    assert routing_keys == ["job.canceled"]


async def test_pending_job_is_canceled_at_once(stack: Stack) -> None:
    """No Worker runs: the job is ``pending``; cancel answers 200 ``canceled``; a Worker then
    started drops its message (the claim's CAS fails) and publishes the one event."""
    job_id = await stack.api.submit(FAST)
    assert (await stack.api.job(job_id))["status"] == "pending"
    status, body = await _cancel(stack, job_id)
    assert (status, body["status"]) == (200, "canceled"), body
    assert body["completedAt"] is not None
    async with stack.launcher.running_worker():
        await _one_canceled_event(stack, job_id)
        job = await stack.api.job(job_id)
    assert job["status"] == "canceled"
    assert "resultPath" not in job
    assert job.get("result") is None
    assert stack.results.keys_for(job_id) == []
    status, body = await _cancel(stack, job_id)
    assert (status, body["code"]) == (409, "FET-1104"), body
    listed = await stack.api.http.get(
        f"{stack.api.base_url}/v1/fetcher", params={"status": "canceled", "limit": 100}
    )
    assert listed.status_code == 200, listed.text
    assert job_id in [item["id"] for item in listed.json()["items"]]


async def test_processing_job_stops_within_two_seconds(stack: Stack) -> None:
    """The Worker polls the job's status every 0.5 s while it waits on the slow view; once the
    Manager canceled it, the run stops, the spools and the multipart upload are discarded."""
    stack.source.execute(slow_view_sql(SLOW_VIEW, rows=600, seconds_per_row=0.05))
    async with stack.launcher.running_worker() as worker:
        job_id = await stack.api.submit(SLOW)

        async def processing() -> bool | None:
            return (await stack.api.job(job_id))["status"] == "processing" or None

        await eventually(processing, "the Worker to claim the slow job", within=30.0)
        await asyncio.sleep(1.0)  # well into the source's rows
        status, body = await _cancel(stack, job_id)
        asked = time.monotonic()
        assert (status, body["status"]) == (200, "canceled"), body
        await worker.wait_for_log("job canceled: extraction stopped", within=10.0)
        stopped_after = time.monotonic() - asked
        print(f"processing job stopped {stopped_after:.2f} s after the cancel answered")
        assert stopped_after < STOP_WITHIN_SECONDS, stopped_after
        await _one_canceled_event(stack, job_id)
        samples = await worker.metrics(stack.launcher.http)
    assert samples.get('fetcher_jobs_finished_total{status="canceled"}') == 1.0
    assert samples.get('fetcher_jobs_finished_total{status="completed"}', 0.0) == 0.0
    assert (await stack.api.job(job_id))["status"] == "canceled"
    assert stack.results.keys_for(job_id) == []


async def test_sdk_and_cli_cancel(stack: Stack) -> None:
    """``client.cancel(id)`` answers the canceled job and raises ``ApiError`` 409 FET-1104 the
    second time; ``fetcher jobs cancel ID`` prints ``<id> canceled`` and, for a job that already
    ended, one error line naming FET-1104 and exit 2."""
    by_sdk, by_cli = await stack.api.submit(FAST), await stack.api.submit(FAST)
    async with AsyncFetcherClient(stack.api.base_url) as client:
        job = await client.cancel(by_sdk)
        assert (job.id, job.status) == (by_sdk, "canceled")
        with pytest.raises(ApiError) as refused:
            await client.cancel(by_sdk)
        assert (refused.value.status, refused.value.code) == (409, "FET-1104")
    done = await asyncio.to_thread(jobs_cli, stack.api.base_url, "cancel", by_cli)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{by_cli} canceled\n", "")
    again = await asyncio.to_thread(jobs_cli, stack.api.base_url, "cancel", by_cli)
    assert again.returncode == 2
    assert "FET-1104" in again.stderr, again.stderr
    assert "it is canceled" in again.stderr, again.stderr
    assert again.stdout == ""
    assert (await stack.api.job(by_cli))["status"] == "canceled"
    await drain_canceled(stack, by_sdk, by_cli)


async def test_embedded_cancel_of_a_job_waiting_on_its_source(tmp_path: Path) -> None:
    """Embedded mode (SQLite store, local objects, in-process broker): a job whose one query
    never ends by itself is canceled while the source computes; the run stops within 2 s,
    no file is left under the object directory, and the feed holds one ``job.canceled``."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    database = allowed / "slow.db"
    with sqlite3.connect(database) as conn:
        conn.executescript(SLOW_SQLITE_VIEW)
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(allowed), LOG_LEVEL="info") as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=30.0) as client,
    ):
        created = await client.post(
            "/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json={"configName": "slow_src", "type": "SQLITE", "databaseName": str(database)},
        )
        assert created.status_code == 201, created.text
        body = {
            "dataRequest": {"mappedFields": {"slow_src": {"slow": ["n"]}}},
            "metadata": {"source": "payments"},
        }
        submitted = await client.post("/v1/fetcher", json=body)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["jobId"]
        await process.wait_for_log("extraction started", within=30.0)
        await asyncio.sleep(1.0)  # the query is running
        canceled = await client.post(f"/v1/fetcher/{job_id}/cancel")
        asked = time.monotonic()
        assert (canceled.status_code, canceled.json()["status"]) == (200, "canceled")
        await process.wait_for_log("job canceled: extraction stopped", within=10.0)
        stopped_after = time.monotonic() - asked
        print(f"embedded job stopped {stopped_after:.2f} s after the cancel answered")
        assert stopped_after < STOP_WITHIN_SECONDS, stopped_after

        async def canceled_items() -> list[dict[str, Any]] | None:
            page = (await client.get("/v1/events", params={"after": "0"})).json()
            items = [i for i in page["items"] if i["data"].get("job_id") == job_id]
            return items or None

        [item] = await eventually(canceled_items, "the job.canceled feed item", within=45.0)
        assert item["headers"]["ce-eventtype"] == "canceled", item
        assert item["data"]["status"] == "canceled", item
        assert (await client.get(f"/v1/fetcher/{job_id}")).json()["status"] == "canceled"
    objects = tmp_path / "state" / "objects"
    assert [p for p in objects.rglob("*") if p.is_file()] == []
