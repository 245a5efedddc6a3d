"""Event delivery under trouble (§4.2, §8.1, §8.6): an event the broker refused is delivered
later by the repairer with the same ``ce-id``, a redelivered work message of a finished job
does nothing, and two Workers sharing one queue complete every job exactly once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    Database,
    ReceivedEvent,
    Stack,
    assert_envelope,
    decrypt_result_object,
    eventually,
    hmac_hex,
    outbox_rows,
    publish_work,
    take_dead_letters,
    take_work_messages,
)

pytestmark = E2E

MAPPED = {SOURCE_CONFIG: {"public.accounts": ["id", "email"]}}
#: §8.6: the repairer only claims rows older than this.
REPAIR_MIN_AGE_SECONDS = 10.0
COMPLETED = 'fetcher_jobs_finished_total{status="completed"}'
PUBLISHED = 'fetcher_events_published_total{type="completed"}'


async def assert_work_queue_drained(stack: Stack) -> None:
    """No work message is left on the queue (nothing requeued) and none of ours in the DLQ."""
    assert await stack.broker.queue_state(stack.names.work_queue) == (0, 0)
    async with stack.broker.channel() as channel:
        assert await take_dead_letters(channel, stack.names.work_queue) == []


async def test_refused_event_is_repaired_with_the_same_ce_id(
    stack: Stack, metadata_db: Database
) -> None:
    """Proves §8.6 repair: with the events exchange gone, the Worker's publish fails with a
    channel error, the job is nevertheless ``completed`` in GET (the authority) and its
    outbox row stays unsent (``sent_at`` NULL, no ``publishedAt`` in the feed). Once the
    route is back and the row is older than 10 s, a fresh Worker's start-up repair pass
    delivers exactly one ``job.completed`` whose ``ce-id`` is the outbox row's and the feed
    item's, signed and shaped like any other event, and marks the row sent."""
    job_id = ""
    try:
        async with stack.launcher.running_worker() as first:
            await stack.broker.unroute_events()
            job_id = await stack.api.submit(MAPPED)
            ce_id = f"fetcher.job.completed.{job_id}"
            await first.wait_for_log(f"event {ce_id} not published yet")
            job = await stack.api.job(job_id)
            assert job["status"] == "completed", job
            assert stack.broker.collector.for_job(job_id) == []
    finally:
        async with stack.broker.channel() as channel:
            await stack.broker.route_events(channel)

    [row] = outbox_rows(metadata_db, job_id)
    assert (row["ce_id"], row["routing_key"], row["sent_at"]) == (ce_id, "job.completed", None)
    [unsent] = await stack.api.feed_items(job_id)
    assert unsent["headers"]["ce-id"] == ce_id
    assert "publishedAt" not in unsent

    # Nothing goes out before the row is old enough for the repairer (§8.6: 10 s).
    await asyncio.sleep(max(0.0, REPAIR_MIN_AGE_SECONDS + 0.5 - row["age_seconds"]))
    async with stack.launcher.running_worker() as repairer:
        # The start-up pass, not the 30 s tick that follows it.
        event = await stack.broker.collector.wait_for(job_id, "job.completed", within=10.0)
        samples = await repairer.metrics(stack.launcher.http)
    await stack.broker.fence()

    assert samples.get(PUBLISHED) == 1.0, "the repairing Worker published the event"
    assert samples.get(COMPLETED, 0.0) == 0.0, "the repairing Worker ran no job"
    assert stack.broker.collector.for_job(job_id) == [event]
    assert event.headers["ce-id"] == ce_id
    ce_time = assert_envelope(stack, event, "completed")
    assert ce_time > job["completedAt"], "emitted by the repairer, after the commit"
    assert event.payload["completed_at"] == job["completedAt"]
    [sent] = outbox_rows(metadata_db, job_id)
    assert sent["sent_at"] is not None
    [published] = await stack.api.feed_items(job_id)
    assert published["headers"]["ce-id"] == ce_id
    assert published["data"] == event.payload
    assert "publishedAt" in published


async def test_redelivered_message_of_a_completed_job_is_acked_and_ignored(
    stack: Stack,
) -> None:
    """Proves §4.2 / §7.4 row 6: the genuine work message of a job that already completed,
    published again, is acknowledged without a second run: the object is not rewritten
    (same ETag and LastModified), the job document is unchanged, no second event is
    published, nothing is requeued or dead-lettered. With one permit (prefetch 1) the
    Worker can take the next job's message only after it settled the redelivery, so that
    next job completing proves the redelivery was handled."""
    job_id = await stack.api.submit(MAPPED)
    async with stack.broker.channel() as channel:
        [genuine] = await take_work_messages(channel, stack.names.work_queue, 1)
        assert genuine.job_id == job_id
        async with stack.launcher.running_worker(RABBITMQ_NUMBERS_OF_WORKERS="1") as worker:
            await publish_work(channel, stack.names.work_queue, genuine)
            await stack.broker.collector.wait_for(job_id, "job.completed")
            job = await stack.api.wait_terminal(job_id)
            assert job["status"] == "completed", job
            stored = stack.results.head(job["resultPath"])

            await publish_work(channel, stack.names.work_queue, genuine)
            follower = await stack.api.submit(MAPPED)
            assert (await stack.api.wait_terminal(follower))["status"] == "completed"
            samples = await worker.metrics(stack.launcher.http)
    await stack.broker.fence()

    assert samples.get(COMPLETED) == 2.0, "one run each for the job and the follower"
    assert samples.get(PUBLISHED) == 2.0
    assert [e.routing_key for e in stack.broker.collector.for_job(job_id)] == ["job.completed"]
    assert await stack.api.job(job_id) == job
    assert stack.results.head(job["resultPath"]) == stored
    assert stack.results.keys_for(job_id) == [job["resultPath"]]
    # One run, then a silent acknowledgement (§7.4 row 6): every line about the job is info.
    text = worker.stdout_path.read_text()
    logged = [json.loads(line)["event"] for line in text.splitlines() if job_id in line]
    assert job_id not in worker.stderr_path.read_text()
    assert all(json.loads(line)["level"] == "info" for line in text.splitlines() if job_id in line)
    assert logged.count("job claimed") == 1
    assert logged.count("work message acknowledged: job not pending") == 1
    assert [e for e in logged if e.startswith("job completed")] == [logged[2]]
    await assert_work_queue_drained(stack)


JOBS = 50
WORKER_PERMITS = "3"


async def test_two_workers_complete_fifty_jobs_exactly_once(stack: Stack) -> None:
    """Proves the atomic claim (§4.2) and the stable ``ce-id`` (§8.6) under concurrency: two
    Workers (3 permits each) on one queue run 50 distinct jobs; every job ends
    ``completed`` with exactly one ``job.completed`` (50 distinct ``ce-id``s), one object
    whose HMAC matches its event, and both Workers did part of the work, which together
    adds up to exactly 50 runs."""
    env = {"RABBITMQ_NUMBERS_OF_WORKERS": WORKER_PERMITS}
    async with (
        stack.launcher.running_worker(**env) as first,
        stack.launcher.running_worker(**env) as second,
    ):

        async def both_consuming() -> bool | None:
            _, consumers = await stack.broker.queue_state(stack.names.work_queue)
            return True if consumers == 2 else None

        await eventually(both_consuming, "both Workers to consume the work queue")
        job_ids = list(await asyncio.gather(*(stack.api.submit(MAPPED) for _ in range(JOBS))))
        assert len(set(job_ids)) == JOBS

        async def all_finished() -> dict[str, list[ReceivedEvent]] | None:
            events = {j: stack.broker.collector.for_job(j) for j in job_ids}
            return events if all(events.values()) else None

        await eventually(all_finished, f"{JOBS} terminal events", within=60.0)
        runs = [
            (await worker.metrics(stack.launcher.http)).get(COMPLETED, 0.0)
            for worker in (first, second)
        ]
    await stack.broker.fence()

    assert sum(runs) == JOBS, runs
    assert all(count > 0 for count in runs), f"one Worker did everything: {runs}"
    events = {j: stack.broker.collector.for_job(j) for j in job_ids}
    assert {j: [e.routing_key for e in evs] for j, evs in events.items()} == {
        j: ["job.completed"] for j in job_ids
    }
    ce_ids = {str(evs[0].headers["ce-id"]) for evs in events.values()}
    assert ce_ids == {f"fetcher.job.completed.{j}" for j in job_ids}

    jobs: list[dict[str, Any]] = list(await asyncio.gather(*(stack.api.job(j) for j in job_ids)))
    for job, job_id in zip(jobs, job_ids, strict=True):
        result = events[job_id][0].payload["result"]
        assert job["status"] == "completed", job
        assert job["resultHmac"] == result["hmac"]
        assert stack.results.keys_for(job_id) == [result["path"]]
        plaintext = decrypt_result_object(stack.keys.storage, stack.results.read(result["path"]))
        assert hmac_hex(stack.keys.external, plaintext) == result["hmac"]
    await assert_work_queue_drained(stack)
