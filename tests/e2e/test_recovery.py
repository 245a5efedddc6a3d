"""The stale-job reaper (§4.4): a job whose Worker died mid-extraction, and a job whose work
message was dead-lettered, each end ``failed`` with one ``job.failed``; elapsed time is
simulated by moving the job's timestamps back in the metadata database."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    PENDING_TIMEOUT_SECONDS,
    PRODUCT,
    Database,
    RawMessage,
    Stack,
    age_job,
    assert_failed_once,
    eventually,
    publish_work,
    take_dead_letters,
    take_work_messages,
    unique,
)

pytestmark = E2E

ABANDONED = "extraction abandoned: worker stopped before completion"
NOT_PROCESSED = "work message was not processed"
#: §4.4: processing is stale after the job's timeoutSeconds + STORAGE_TIMEOUT_SECONDS + 180 s.
JOB_TIMEOUT_SECONDS = 60
STORAGE_TIMEOUT_SECONDS = 120
PROCESSING_STALE_AFTER = JOB_TIMEOUT_SECONDS + STORAGE_TIMEOUT_SECONDS + 180
#: The reaper runs at start-up and its event goes out right after the commit (§8.6), well
#: before the repairer's next 30 s tick would send it.
RELAYED_WITHIN = 10.0
#: A view whose every row sleeps: planning is instant, the first fetch takes a minute.
SLOW_VIEW = "public.slow_rows"
SLOW_SCHEMA = f"""
CREATE FUNCTION public.e2e_slow_id(i integer) RETURNS integer LANGUAGE sql VOLATILE
    AS $$ SELECT i FROM (SELECT pg_sleep(0.5)) AS nap $$;
CREATE VIEW {SLOW_VIEW} AS SELECT public.e2e_slow_id(g) AS id FROM generate_series(1, 120) AS g;
"""
#: Backends of the session's source database sleeping inside the view: the extraction. (The
#: statement is a ``FETCH`` from a server-side cursor, so its text does not name the view.)
SLEEPING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    " AND wait_event = 'PgSleep'"
)


def end_orphaned_queries(source: Database) -> None:
    """End the source queries a killed Worker left running, and wait until they are gone."""
    source.execute(f"SELECT pg_terminate_backend(pid) FROM ({SLEEPING}) AS orphans", (source.name,))
    deadline = time.monotonic() + 10
    while source.query(SLEEPING, (source.name,))[1]:
        assert time.monotonic() < deadline, "orphaned source queries survived termination"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def slow_view(source_db: Database) -> Iterator[str]:
    """``public.slow_rows`` in the source database (dropped with it at the end of the
    session); no orphaned query of it outlives the module."""
    source_db.execute(SLOW_SCHEMA)
    try:
        yield SLOW_VIEW
    finally:
        end_orphaned_queries(source_db)


async def test_worker_killed_mid_extraction_is_reaped(
    stack: Stack, metadata_db: Database, slow_view: str
) -> None:
    """Proves the ``processing`` reaper: a Worker SIGKILLed while its job's query runs
    leaves the job ``processing`` with no event and no object; once ``started_at`` is older
    than timeoutSeconds + STORAGE_TIMEOUT_SECONDS + 180 s, a new Worker's start-up reaper
    fails it with the exact §4.4 text and exactly one ``job.failed``, and nothing is left
    at the object key (not even an unfinished upload)."""
    job_id = await stack.api.submit(
        {SOURCE_CONFIG: {slow_view: ["id"]}}, limits={"timeoutSeconds": JOB_TIMEOUT_SECONDS}
    )
    doomed = await stack.launcher.worker()
    try:

        async def extracting() -> bool | None:
            """The job is claimed and its query is running on the source database."""
            if (await stack.api.job(job_id))["status"] != "processing":
                return None
            _, sleeping = stack.source.query(SLEEPING, (stack.source.name,))
            return True if sleeping else None

        await eventually(extracting, "the slow extraction to be running")
    finally:
        assert await doomed.kill() == -signal.SIGKILL
        end_orphaned_queries(stack.source)

    assert (await stack.api.job(job_id))["status"] == "processing"
    age_job(metadata_db, job_id, "started_at", PROCESSING_STALE_AFTER + 30)
    async with stack.launcher.running_worker(
        STORAGE_TIMEOUT_SECONDS=str(STORAGE_TIMEOUT_SECONDS)
    ) as reaper:
        await stack.broker.collector.wait_for(job_id, "job.failed", within=RELAYED_WITHIN)
    await stack.broker.fence()
    await assert_failed_once(stack, job_id, ABANDONED)
    assert f"reaped stale processing job {job_id}" in reaper.logs()


def tampered(message: RawMessage) -> RawMessage:
    """``message`` with its body changed after signing (§7.4 row 2), headers kept."""
    body = json.loads(message.body)
    body["mappedFields"][SOURCE_CONFIG]["public.accounts"].append("email")
    return RawMessage(json.dumps(body, separators=(",", ":")).encode(), message.headers)


async def test_dead_lettered_job_is_reaped_and_can_be_submitted_again(
    stack: Stack, metadata_db: Database
) -> None:
    """Proves the ``pending`` reaper and §3.8 "dead pending jobs": a job whose only work
    message was dead-lettered stays ``pending`` and keeps deduplicating the same request
    (200, same ``jobId``); once ``created_at`` is older than ``PENDING_TIMEOUT_SECONDS`` a
    Worker fails it with ``work message was not processed`` and one ``job.failed``, and the
    same request then creates a new job (202, new ``jobId``) that runs to ``completed``."""
    mapped = {SOURCE_CONFIG: {"public.accounts": ["id"]}}
    metadata = {"source": PRODUCT, "correlationId": unique("reaped")}
    job_id = await stack.api.submit(mapped, metadata=metadata)
    duplicate = await stack.api.post_job(mapped, metadata=metadata)
    assert (duplicate.status_code, duplicate.json()["jobId"]) == (200, job_id)

    async with stack.broker.channel() as channel:
        [genuine] = await take_work_messages(channel, stack.names.work_queue, 1)
        forged = tampered(genuine)
        await publish_work(channel, stack.names.work_queue, forged)
        age_job(metadata_db, job_id, "created_at", PENDING_TIMEOUT_SECONDS + 60)
        dead: list[RawMessage] = []

        async def dead_lettered() -> list[RawMessage] | None:
            dead.extend(await take_dead_letters(channel, stack.names.work_queue))
            return dead or None

        async with stack.launcher.running_worker() as worker:
            await stack.broker.collector.wait_for(job_id, "job.failed", within=RELAYED_WITHIN)
            await eventually(dead_lettered, "the tampered message in the DLQ")
            retry = await stack.api.post_job(mapped, metadata=metadata)
            assert retry.status_code == 202, retry.text
            new_id = retry.json()["jobId"]
            assert new_id != job_id
            assert (await stack.api.wait_terminal(new_id))["status"] == "completed"
    await stack.broker.fence()

    assert [(d.body, d.death_reasons) for d in dead] == [(forged.body, ["rejected"])]
    await assert_failed_once(stack, job_id, NOT_PROCESSED)
    assert f"reaped stale pending job {job_id}" in worker.logs()
    assert [e.routing_key for e in stack.broker.collector.for_job(new_id)] == ["job.completed"]
    assert await stack.broker.queue_state(stack.names.work_queue) == (0, 0)
