"""The Manager as a process against a real broker, with no Worker running: concurrent identical
submissions and the work message they produce (§3.8, §7.1–§7.3), a publish the broker refuses
(§3.6 step 16), the SIGTERM drain and startup with a missing or misconfigured dependency
(§2.10, §9.3).

Each scenario runs its own Manager, so that the session's Manager and work queue are never
disturbed; jobs go to a work queue of the scenario's own (``manager_with_own_queue``).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from typing import Any

import httpx

from tests.e2e.conftest import E2E, SOURCE_CONFIG, SOURCE_PASSWORD
from tests.e2e.harness import (
    PRODUCT,
    Database,
    DatabaseFactory,
    FetcherProcess,
    ManagerApi,
    Stack,
    derive_internal_key,
    eventually,
    hmac_hex,
    manager_with_own_queue,
    outbox_rows,
    signing_input,
    take_all_messages,
    unique,
)

pytestmark = E2E

MAPPED = {SOURCE_CONFIG: {"public.accounts": ["id", "email"], "ledger.entries": ["*"]}}
CONCURRENT_POSTS = 20
PUBLISH_FAILED = "process failed: unable to publish"
DRAIN_DELAY_SECONDS = 3
DRAINING = {"status": "down", "reason": "shutting down"}
STARTING = {"status": "unhealthy", "reason": "starting"}
REFUSAL = "startup refused: DATABASE_URL must be a postgresql:// URL\n"


async def wait_answering(process: FetcherProcess, client: httpx.AsyncClient) -> None:
    """Poll until the process's port answers HTTP at all (any status)."""

    async def answering() -> bool | None:
        if process.process.poll() is not None:
            raise AssertionError(f"exited with {process.process.returncode}")
        try:
            await client.get(f"{process.base_url}/health", timeout=2.0)
        except httpx.TransportError:
            return None
        return True

    await eventually(answering, f"{process.name} to answer HTTP")


def check_statuses(readyz: dict[str, Any]) -> dict[str, str]:
    """``/readyz`` check name → ``up``/``down``/``skipped``."""
    return {name: str(check["status"]) for name, check in readyz["checks"].items()}


async def test_concurrent_identical_posts_create_one_job_and_one_signed_message(
    stack: Stack,
) -> None:
    """Proves §3.8 "N concurrent identical requests → one job, one work message": 20 parallel
    identical POSTs all answer the same ``jobId``, exactly one with 202 and the rest 200, and
    exactly one message reaches the work queue. That message has the §7.2 properties and
    headers (``x-request-id`` is the 202 response's ``X-Request-Id``), a compact sorted-key
    body holding the request as submitted (``filters`` absent because none was sent), and a
    §7.3 signature that verifies under an independently derived internal key."""
    metadata = {"source": PRODUCT, "correlationId": unique("burst"), "note": "café ✓", "n": 7}
    limits = {"timeoutSeconds": 120}
    async with manager_with_own_queue(stack) as own:
        responses = await asyncio.gather(
            *(
                own.api.post_job(MAPPED, limits=limits, metadata=metadata)
                for _ in range(CONCURRENT_POSTS)
            )
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] * (CONCURRENT_POSTS - 1) + [202], [r.text for r in responses]
        job_ids = {r.json()["jobId"] for r in responses}
        assert len(job_ids) == 1, job_ids
        [job_id] = job_ids
        [created] = [r for r in responses if r.status_code == 202]
        # Every publish was confirmed before its 202, so the queue holds all there will be.
        async with stack.broker.channel() as channel:
            messages = await take_all_messages(channel, own.work_queue)
        job = await own.api.job(job_id)

    assert len(messages) == 1, [m.body for m in messages]
    [message] = messages
    assert message.content_type == "application/json"
    assert message.delivery_mode == 2
    headers = dict(message.headers)
    t = headers.pop("t")
    signature = headers.pop("x-message-signature")
    assert headers == {
        "jobId": job_id,
        "x-request-id": created.headers["X-Request-Id"],
        "x-retry-count": 0,
        "signature-version": "v1",
    }
    assert isinstance(t, str)
    assert re.fullmatch(r"[0-9]{1,12}", t), t
    assert abs(int(t) - time.time()) < 60
    signed = signing_input(
        t, job_id=job_id, exchange="", routing_key=own.work_queue, body=message.body
    )
    assert signature == hmac_hex(derive_internal_key(), signed)

    body: dict[str, Any] = json.loads(message.body)
    compact = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert message.body == compact.encode()
    assert body == {
        "createdAt": created.json()["createdAt"],
        "jobId": job_id,
        "mappedFields": MAPPED,
        "metadata": metadata,
        "limits": limits,
    }
    assert job["status"] == "pending"
    assert job["createdAt"] == body["createdAt"]


async def test_publish_refused_by_the_broker_fails_the_job_with_its_event(
    stack: Stack, metadata_db: Database
) -> None:
    """Proves §3.6 step 16 on a real broker: with the Manager's work queue deleted, the
    mandatory publish is returned unroutable, the POST answers 503 FET-0003, and the job
    (found by the response's ``X-Request-Id``) is ``failed`` with
    ``process failed: unable to publish`` and a ``completedAt``; its ``job.failed`` outbox row
    was written in the same transaction and is in the feed with the exact payload."""
    metadata = {"source": PRODUCT, "correlationId": unique("unpublished")}
    async with manager_with_own_queue(stack) as own:
        async with stack.broker.channel() as channel:
            await channel.queue_delete(own.work_queue)
        response = await own.api.post_job(MAPPED, metadata=metadata)
        assert response.status_code == 503, response.text
        assert response.json()["code"] == "FET-0003"
        assert response.json()["title"] == "Service Unavailable"
        request_id = response.headers["X-Request-Id"]
        [row] = metadata_db.records("SELECT id FROM jobs WHERE request_id = %s", (request_id,))
        job_id = str(row["id"])
        job = await own.api.job(job_id)
        feed = await own.api.feed_items(job_id)

    assert job["status"] == "failed", job
    assert job["metadata"] == {**metadata, "error": PUBLISH_FAILED}
    assert "completedAt" in job
    assert job["completedAt"] >= job["createdAt"]
    assert [r["routing_key"] for r in outbox_rows(metadata_db, job_id)] == ["job.failed"]
    assert [(i["routingKey"], i["data"]) for i in feed] == [
        (
            "job.failed",
            {
                "job_id": job_id,
                "status": "failed",
                "metadata": {**metadata, "error": {"message": PUBLISH_FAILED}},
            },
        )
    ]
    assert feed[0]["headers"]["ce-id"] == f"fetcher.job.failed.{job_id}"


async def test_sigterm_drains_readyz_then_exits_cleanly(stack: Stack) -> None:
    """Proves the §9.3 Manager drain: right after SIGTERM ``/readyz`` answers 503
    ``unhealthy`` with ``draining`` down ("shutting down") next to the dependency checks while
    the process still serves; it keeps serving about ``READYZ_DRAIN_DELAY_SEC`` (3 s) and then
    exits 0 within a bound."""
    manager = await stack.launcher.manager(READYZ_DRAIN_DELAY_SEC=str(DRAIN_DELAY_SECONDS))
    http = stack.launcher.http
    status, ready = await manager.get_json(http, "/readyz")
    assert (status, ready["status"]) == (200, "healthy"), ready
    assert check_statuses(ready) == {"database": "up", "rabbitmq": "up"}
    signalled = time.monotonic()
    manager.sigterm()

    async def draining() -> dict[str, Any] | None:
        status, body = await manager.get_json(http, "/readyz")
        return body if status == 503 and "draining" in body["checks"] else None

    body = await eventually(draining, "/readyz to report draining", within=DRAIN_DELAY_SECONDS)
    assert manager.process.poll() is None, "the Manager stopped serving before the drain delay"
    assert body["status"] == "unhealthy"
    assert body["checks"]["draining"] == DRAINING
    assert check_statuses(body) == {
        "database": "up",
        "rabbitmq": "up",
        "draining": "down",
    }
    assert await manager.get_json(http, "/health") == (200, {"status": "healthy"})

    code = await manager.wait_exit(within=DRAIN_DELAY_SECONDS + 10)
    elapsed = time.monotonic() - signalled
    assert code == 0, manager.log_tail()
    assert elapsed >= DRAIN_DELAY_SECONDS - 0.5, f"exited after {elapsed:.1f}s"
    stack.launcher.assert_no_secrets(manager)


async def test_startup_waits_for_a_missing_database_then_serves(
    stack: Stack, databases: DatabaseFactory
) -> None:
    """Proves §9.3 "an unreachable dependency does not refuse the start": a Manager whose
    ``DATABASE_URL`` names a database that does not exist yet keeps its port open with
    ``/health`` 503 ``starting`` and ``/readyz`` 503 (every check down) while it retries
    (its log shows the failed attempt);
    once the database is created it finishes starting (migrations included), ``/health``
    turns 200 and a connection can be created through it."""
    late = databases.reserve("fetcher_e2e_late")
    manager = stack.launcher.start_manager(DATABASE_URL=late.url)
    http = stack.launcher.http
    try:
        await wait_answering(manager, http)
        await manager.wait_for_log("does not exist")  # it tried the database and failed
        assert await manager.get_json(http, "/health") == (503, STARTING)
        status, ready = await manager.get_json(http, "/readyz")
        assert status == 503
        assert ready["status"] == "unhealthy"
        assert check_statuses(ready) == {
            "database": "down",
            "rabbitmq": "down",
        }
        assert manager.process.poll() is None

        databases.materialize(late)
        await manager.wait_healthy(http, within=30.0)
        assert await manager.get_json(http, "/health") == (200, {"status": "healthy"})
        api = ManagerApi(http, manager.base_url)
        config = unique("pg_late").replace("-", "_")
        await api.create_connection(
            config,
            stack.source.name,
            password=SOURCE_PASSWORD,
            host=stack.source.host,
            port=stack.source.port,
        )
        assert [r["config_name"] for r in late.records("SELECT config_name FROM connections")] == [
            config
        ]
    finally:
        code = await manager.terminate()
    assert code == 0, manager.log_tail()
    stack.launcher.assert_no_secrets(manager)


async def test_manager_without_database_url_is_refused_before_any_port(stack: Stack) -> None:
    """Proves a §9.3 refusal: ``FETCHER_MODE=manager`` without ``DATABASE_URL`` prints exactly
    one ``startup refused: DATABASE_URL must be a postgresql:// URL`` line to stderr, nothing
    to stdout, and exits 1. Its ``SERVER_ADDRESS`` port is held by the test meanwhile: a
    process that bound it first would have failed differently (address in use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        refused = await stack.launcher.run_to_exit(
            unset=["DATABASE_URL"], FETCHER_MODE="manager", SERVER_ADDRESS=f"127.0.0.1:{port}"
        )
    assert (refused.returncode, refused.stderr, refused.stdout) == (1, REFUSAL, "")
