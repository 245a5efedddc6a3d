"""The Worker as a process: the SIGTERM drain with a job in flight (§9.3) and the readiness
checks of its health server (§2.10)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    Database,
    FetcherProcess,
    Stack,
    eventually,
    free_port,
    slow_view_sql,
)
from tests.services import S3_SECRET_KEY

pytestmark = E2E

#: A view whose 16 rows take about 4 s to fetch: long enough to signal the Worker mid-job.
SLOW_VIEW = "public.drain_rows"
SLOW_ROWS = 16
SECONDS_PER_ROW = 0.25
FAST = {SOURCE_CONFIG: {"public.accounts": ["id"]}}
DRAINING = {"status": "down", "reason": "shutting down"}
WORKER_CHECKS = ("database", "rabbitmq", "object_storage")


@pytest.fixture(scope="module")
def slow_view(source_db: Database) -> str:
    """``public.drain_rows`` in the session's source database (dropped with it)."""
    source_db.execute(slow_view_sql(SLOW_VIEW, SLOW_ROWS, SECONDS_PER_ROW))
    return SLOW_VIEW


def parse_ms(text: str) -> datetime:
    """A §4.6 ``…T…Z`` timestamp as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def readyz(stack: Stack, worker: FetcherProcess) -> tuple[int, dict[str, Any]]:
    """The Worker's ``GET /readyz`` on ``HEALTH_PORT``: status code and body."""
    status, body = await worker.get_json(stack.launcher.http, "/readyz")
    assert isinstance(body, dict), body
    return status, body


async def test_sigterm_finishes_the_job_in_flight_and_takes_no_new_one(
    stack: Stack, slow_view: str
) -> None:
    """Proves the §9.3 Worker drain: SIGTERM while a slow job is ``processing`` turns
    ``/readyz`` 503 with ``draining`` and cancels the consumer at once (the work queue loses
    its consumer); a job submitted after that stays ``pending`` with its message ready on the
    queue, while the in-flight job still ends ``completed`` (after the signal) with its one
    ``job.completed`` event; the Worker then exits 0. A fresh Worker later runs the waiting
    job, so it was runnable all along."""
    job_id = await stack.api.submit({SOURCE_CONFIG: {slow_view: ["id"]}})
    worker = await stack.launcher.worker()
    queue = stack.names.work_queue
    try:

        async def processing() -> bool | None:
            return True if (await stack.api.job(job_id))["status"] == "processing" else None

        await eventually(processing, f"job {job_id} to be claimed")
        signalled_at = datetime.now(UTC)
        worker.sigterm()

        async def draining() -> dict[str, Any] | None:
            status, body = await readyz(stack, worker)
            return body if status == 503 and "draining" in body["checks"] else None

        body = await eventually(draining, "the Worker's /readyz to report draining")
        assert body["checks"]["draining"] == DRAINING

        async def unsubscribed() -> bool | None:
            return True if (await stack.broker.queue_state(queue))[1] == 0 else None

        await eventually(unsubscribed, "the Worker to cancel its consumer", within=5.0)
        late_id = await stack.api.submit(FAST)
        await stack.broker.collector.wait_for(job_id, "job.completed")
        code = await worker.wait_exit(within=30.0)
        assert code == 0
    except BaseException as exc:
        exc.add_note(worker.log_tail())
        await worker.kill()
        raise
    stack.launcher.assert_no_secrets(worker)

    job = await stack.api.job(job_id)
    assert job["status"] == "completed", job
    # ms-truncated completedAt vs. the µs signal time: compare at ms precision.
    assert parse_ms(job["completedAt"]) >= signalled_at.replace(
        microsecond=signalled_at.microsecond // 1000 * 1000
    )
    await stack.broker.fence()
    assert [e.routing_key for e in stack.broker.collector.for_job(job_id)] == ["job.completed"]
    assert (await stack.api.job(late_id))["status"] == "pending"
    assert await stack.broker.queue_state(queue) == (1, 0)
    assert stack.broker.collector.for_job(late_id) == []

    async with stack.launcher.running_worker():
        assert (await stack.api.wait_terminal(late_id))["status"] == "completed"
    assert await stack.broker.queue_state(queue) == (0, 0)


async def test_readyz_reports_each_dependency_and_a_redacted_storage_failure(
    stack: Stack,
) -> None:
    """Proves the Worker's §2.10 readiness: with every dependency reachable ``/readyz`` is
    200 ``healthy`` with ``database``, ``rabbitmq`` and ``object_storage`` ``up`` (no
    ``error``); a Worker whose S3 endpoint is a closed port answers 503 ``unhealthy`` with
    ``object_storage`` ``down`` and an ``error`` that names neither the endpoint nor the
    secret key (§8.7), the other checks still ``up``, and the readiness gauge at 0."""
    async with stack.launcher.running_worker() as worker:
        status, body = await readyz(stack, worker)
    assert (status, body["status"]) == (200, "healthy"), body
    assert list(body) == ["status", "checks", "version", "deployment_mode"]
    assert sorted(body["checks"]) == sorted(WORKER_CHECKS)
    for name in WORKER_CHECKS:
        check = body["checks"][name]
        assert check["status"] == "up", (name, check)
        assert "error" not in check, (name, check)
        assert isinstance(check["latency_ms"], int)

    port = free_port()
    async with stack.launcher.running_worker(
        OBJECT_STORAGE_ENDPOINT=f"http://127.0.0.1:{port}"
    ) as broken:
        status, body = await readyz(stack, broken)
        samples = await broken.metrics(stack.launcher.http)
    assert (status, body["status"]) == (503, "unhealthy"), body
    assert {n: c["status"] for n, c in body["checks"].items()} == {
        "database": "up",
        "rabbitmq": "up",
        "object_storage": "down",
    }
    error = body["checks"]["object_storage"]["error"]
    assert isinstance(error, str)
    assert error.strip()
    for leak in ("127.0.0.1", str(port), S3_SECRET_KEY):
        assert leak not in error, (leak, error)
    assert samples['fetcher_readyz_check_up{check="object_storage"}'] == 0.0
    assert samples['fetcher_readyz_check_up{check="database"}'] == 1.0
