"""Retry through the running Manager and Worker (issue 35 item 4, contract §14.5): a canceled
job and a failed job are submitted again through the whole §3.6 path; the new job records
``retryOf``, runs and completes; a job that is not failed or canceled answers 409 FET-1105;
the SDK's ``client.retry`` and ``fetcher jobs retry ID`` do the same."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.client import ApiError, AsyncFetcherClient
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import Stack, drain_canceled, jobs_cli

pytestmark = E2E

FAST = {SOURCE_CONFIG: {"public.accounts": ["id", "email"]}}


async def _retry(stack: Stack, job_id: str) -> tuple[int, dict[str, object]]:
    response = await stack.api.http.post(f"{stack.api.base_url}/v1/fetcher/{job_id}/retry")
    body: dict[str, object] = response.json()
    return response.status_code, body


async def test_a_canceled_job_is_retried_and_completes(stack: Stack) -> None:
    """Cancel while pending, retry: 202 with a new job whose GET names ``retryOf``, with the
    same request (documents and hash); a Worker completes it. A second retry while the first
    retry is active is deduplicated (200, the same job); retrying a completed job → 409."""
    original = await stack.api.submit(FAST)
    canceled = await stack.api.http.post(f"{stack.api.base_url}/v1/fetcher/{original}/cancel")
    assert canceled.status_code == 200, canceled.text
    status, body = await _retry(stack, original)
    assert status == 202, body
    retried = str(body["jobId"])
    assert retried != original
    again_status, again = await _retry(stack, original)
    assert (again_status, again["jobId"]) == (200, retried), again  # §3.8 deduplication
    async with stack.launcher.running_worker():
        done = await stack.api.wait_terminal(retried)
    assert done["status"] == "completed", done
    assert done["retryOf"] == original
    first = await stack.api.job(original)
    assert "retryOf" not in first
    for member in ("mappedFields", "metadata", "requestHash"):
        assert done[member] == first[member], member
    status, body = await _retry(stack, retried)
    assert (status, body["code"]) == (409, "FET-1105"), body
    assert body["message"] == "only a failed or canceled job can be retried: it is completed"


async def test_a_failed_job_is_retried_by_the_sdk_and_the_cli(stack: Stack) -> None:
    """A job failed by its Worker (a table that does not exist) is retried by
    ``client.retry`` and by ``fetcher jobs retry ID``; a pending job is refused by both."""
    missing = {SOURCE_CONFIG: {"public.no_such_table": ["id"]}}
    failed = await stack.api.submit(missing)
    async with stack.launcher.running_worker():
        assert (await stack.api.wait_terminal(failed))["status"] == "failed"
    async with AsyncFetcherClient(stack.api.base_url) as client:
        submission = await client.retry(failed)
        assert submission.status == "pending"
        retried = await client.get_job(submission.job_id)
        assert retried["retryOf"] == failed
        with pytest.raises(ApiError) as refused:
            await client.retry(submission.job_id)
        assert (refused.value.status, refused.value.code) == (409, "FET-1105")
    canceled = await stack.api.http.post(
        f"{stack.api.base_url}/v1/fetcher/{submission.job_id}/cancel"
    )
    assert canceled.status_code == 200, canceled.text
    done = await asyncio.to_thread(jobs_cli, stack.api.base_url, "retry", failed)
    assert done.returncode == 0, done.stderr
    new_id, new_status = done.stdout.split()
    assert new_status == "pending"
    assert (await stack.api.job(new_id))["retryOf"] == failed
    refused_cli = await asyncio.to_thread(jobs_cli, stack.api.base_url, "retry", new_id)
    assert refused_cli.returncode == 2
    assert "FET-1105" in refused_cli.stderr, refused_cli.stderr
    await stack.api.http.post(f"{stack.api.base_url}/v1/fetcher/{new_id}/cancel")
    await drain_canceled(stack, submission.job_id, new_id)
