"""Structured logs (§9.1 JSON lines on stdout): one ``grep <jobId>`` over a real Manager's
and a real Worker's output follows the job's whole life, create → publish → claim → extract →
store → event, each line a JSON object that carries the job's fields (§9.2: no secret)."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import MS_TIMESTAMP, PRODUCT, FetcherProcess, Stack, unique

pytestmark = E2E

FIXED_KEYS = ["ts", "level", "event", "logger", "env"]


def grep(process: FetcherProcess, needle: str) -> list[dict[str, Any]]:
    """The stdout lines that contain ``needle``, as ``grep`` finds them, each parsed."""
    found = [line for line in process.stdout_path.read_text().splitlines() if needle in line]
    return [json.loads(line) for line in found]


async def connection_id(stack: Stack, config_name: str) -> str:
    response = await stack.launcher.http.get(
        f"{stack.api.base_url}/v1/management/connections",
        params={"limit": 100},
        headers={"X-Product-Name": PRODUCT},
    )
    assert response.status_code == 200, response.text
    [found] = [c["id"] for c in response.json()["items"] if c["configName"] == config_name]
    return str(found)


async def test_one_grep_follows_a_job_through_manager_and_worker(stack: Stack) -> None:
    """Proves that the job ID reaches the output (the old formatter dropped ``extra=``) on
    every step, in order, with the request, product and connection bound as fields."""
    metadata = {"source": PRODUCT, "correlationId": unique("logs")}
    mapped = {SOURCE_CONFIG: {"public.accounts": ["id", "email"]}}
    async with stack.launcher.running_worker() as worker:
        response = await stack.api.post_job(mapped, metadata=metadata)
        assert response.status_code == 202, response.text
        job_id = response.json()["jobId"]
        await stack.broker.collector.wait_for(job_id, "job.completed")
    request_id = response.headers["x-request-id"]
    connection = await connection_id(stack, SOURCE_CONFIG)

    manager_lines = grep(stack.manager, job_id)
    worker_lines = grep(worker, job_id)
    for line in manager_lines + worker_lines:
        assert list(line)[:5] == FIXED_KEYS, line
        assert MS_TIMESTAMP.fullmatch(line["ts"]), line
        assert line["job_id"] == job_id, line
        assert line["level"] == "info", line

    # Issue 22: the request's access line ends it, and carries the job it created too.
    assert [line["event"] for line in manager_lines] == [
        "job created",
        "work message published",
        "http request",
    ]
    access = manager_lines.pop()
    assert (access["logger"], access["route"], access["status"]) == (
        "fetcher.access",
        "/v1/fetcher",
        202,
    )
    for line in manager_lines:
        assert line["logger"] == "fetcher.services.jobs.service"
        assert (line["request_id"], line["product"], line["connection_id"]) == (
            request_id,
            PRODUCT,
            connection,
        )

    assert [line["event"] for line in worker_lines] == [
        "job claimed",
        "extraction started",
        f"job completed: 6 rows stored at external-data/{job_id}.json",
        "event job.completed published",
    ]
    for line in worker_lines[:3]:  # the work message carries the Manager's request ID
        assert line["request_id"] == request_id, line
    for line in worker_lines[1:3]:  # the extraction knows the job's product and connections
        assert (line["product"], line["connection_id"]) == (PRODUCT, connection), line
    # Created before it is claimed; the Worker's steps in order. (The Manager logs the publish
    # once the broker confirms it, which may come after the Worker's claim.)
    stamps = [line["ts"] for line in manager_lines[:1] + worker_lines]
    assert stamps == sorted(stamps), "create → claim → extract → store → event"
    stack.launcher.assert_no_secrets(stack.manager)  # the Worker's were checked at its exit
