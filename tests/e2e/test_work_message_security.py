"""Work messages the Worker must not trust (§7.3, §7.4 rows 1–3).

Four real jobs are created while no Worker runs; their genuine messages are taken off the work
queue and replaced by a forged, an unsigned, a tampered and an expired copy. A Worker then
handles the four. Afterwards the genuine messages of the three untouched jobs are published
again and complete, which proves those jobs were runnable all along.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
import pytest_asyncio

from fetcher.crypto import KeySet
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    MASTER_KEY,
    PENDING_TIMEOUT_SECONDS,
    RawMessage,
    Stack,
    assert_failed_once,
    eventually,
    hmac_hex,
    publish_work,
    signing_input,
    take_dead_letters,
    take_work_messages,
)

pytestmark = E2E

SIGNING_HEADERS = ("t", "signature-version", "x-message-signature")
CASES = ("forged", "unsigned", "tampered", "expired")
EXPIRED = "work message expired before processing"
REJECTED = 'fetcher_work_messages_rejected_total{reason="%s"}'


def signed(message: RawMessage, key: bytes, work_queue: str, t: int) -> RawMessage:
    """``message`` re-signed per §7.3 (exchange ``""``, routing key = the work queue)."""
    signature = hmac_hex(
        key,
        signing_input(
            str(t), job_id=message.job_id, exchange="", routing_key=work_queue, body=message.body
        ),
    )
    headers = {**message.headers, "t": str(t), "x-message-signature": signature}
    return RawMessage(message.body, headers)


def forge(case: str, genuine: RawMessage, work_queue: str) -> RawMessage:
    """The hostile copy of ``genuine`` for one case."""
    now = int(time.time())
    if case == "forged":  # well-formed, but signed with a key that is not the internal key
        return signed(genuine, secrets.token_bytes(32), work_queue, now)
    if case == "unsigned":
        headers = {k: v for k, v in genuine.headers.items() if k not in SIGNING_HEADERS}
        return RawMessage(genuine.body, headers)
    if case == "tampered":  # the genuine signature over a body changed afterwards
        body = json.loads(genuine.body)
        body["mappedFields"][SOURCE_CONFIG]["public.accounts"].append("email")
        return RawMessage(json.dumps(body, separators=(",", ":")).encode(), genuine.headers)
    internal = KeySet.from_text(MASTER_KEY).internal_hmac
    return signed(genuine, internal, work_queue, now - PENDING_TIMEOUT_SECONDS - 60)


@dataclass(frozen=True)
class Outcome:
    """What the Worker did with one hostile message."""

    job_id: str
    sent: RawMessage
    dead_letters: list[RawMessage]
    status_after_rejection: str
    events_after_rejection: list[str]
    status_after_genuine: str


@dataclass(frozen=True)
class Run:
    outcomes: Mapping[str, Outcome]
    rejected: Mapping[str, float]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def run(stack: Stack) -> Run:
    """Create the jobs, swap their messages, let one Worker handle the hostile copies, then
    republish the genuine messages of the untouched jobs."""
    queue = stack.names.work_queue
    mapped = {SOURCE_CONFIG: {"public.accounts": ["id"]}}
    job_ids = {case: await stack.api.submit(mapped) for case in CASES}
    dead: list[RawMessage] = []

    async def statuses() -> dict[str, str]:
        return {case: (await stack.api.job(j))["status"] for case, j in job_ids.items()}

    def routing_keys(case: str) -> list[str]:
        return [e.routing_key for e in stack.broker.collector.for_job(job_ids[case])]

    async with stack.broker.channel() as channel:
        genuine = {m.job_id: m for m in await take_work_messages(channel, queue, len(CASES))}
        assert sorted(genuine) == sorted(job_ids.values())
        sent = {case: forge(case, genuine[job_id], queue) for case, job_id in job_ids.items()}

        async def all_handled() -> dict[str, str] | None:
            """Each message was dead-lettered (or, a defect, its job ran), and the expired
            job's ``job.failed`` has arrived if it failed."""
            dead.extend(await take_dead_letters(channel, queue))
            dead_jobs = {d.job_id for d in dead}
            if any(j not in dead_jobs and not routing_keys(c) for c, j in job_ids.items()):
                return None
            current = await statuses()
            if current["expired"] == "failed" and "job.failed" not in routing_keys("expired"):
                return None
            return current

        async with stack.launcher.running_worker() as worker:
            for message in sent.values():
                await publish_work(channel, queue, message)
            after_rejection = await eventually(all_handled, "the four messages to be handled")
            events = {case: routing_keys(case) for case in CASES}
            samples = await worker.metrics(stack.launcher.http)
            for case in ("forged", "unsigned", "tampered"):
                await publish_work(channel, queue, genuine[job_ids[case]])
                await stack.api.wait_terminal(job_ids[case])
            finals = await statuses()

    outcomes = {
        case: Outcome(
            job_id=job_id,
            sent=sent[case],
            dead_letters=[d for d in dead if d.job_id == job_id],
            status_after_rejection=after_rejection[case],
            events_after_rejection=events[case],
            status_after_genuine=finals[case],
        )
        for case, job_id in job_ids.items()
    }
    reasons = ("signature", "expired", "payload", "retries_exhausted")
    return Run(outcomes, {r: samples.get(REJECTED % r, 0.0) for r in reasons})


def assert_dead_lettered(outcome: Outcome) -> None:
    """The exact message sent was rejected (``basic.reject``) into ``fetcher.dlq``, once."""
    assert [(d.body, d.death_reasons) for d in outcome.dead_letters] == [
        (outcome.sent.body, ["rejected"])
    ]


@pytest.mark.parametrize("case", ["forged", "unsigned", "tampered"])
async def test_unauthentic_message_is_dead_lettered_and_never_runs(run: Run, case: str) -> None:
    """A message signed with another key (row 2), without signing headers (row 1), or whose
    body changed after signing (row 2) goes to the DLQ and leaves its job ``pending``; the
    job's genuine message still runs it afterwards."""
    outcome = run.outcomes[case]
    assert_dead_lettered(outcome)
    assert outcome.status_after_rejection == "pending"
    assert outcome.events_after_rejection == []
    assert outcome.status_after_genuine == "completed"


async def test_expired_message_fails_its_job_and_is_dead_lettered(run: Run, stack: Stack) -> None:
    """An authentic message whose ``t`` is older than ``PENDING_TIMEOUT_SECONDS`` (row 3)
    fails its pending job with the exact §4.5 text and one ``job.failed``, and goes to the
    DLQ; the job never runs."""
    outcome = run.outcomes["expired"]
    assert_dead_lettered(outcome)
    assert outcome.status_after_rejection == "failed"
    assert outcome.events_after_rejection == ["job.failed"]
    await assert_failed_once(stack, outcome.job_id, EXPIRED)


async def test_rejections_are_counted_by_reason(run: Run) -> None:
    """``fetcher_work_messages_rejected_total`` counts the three signature rejections and the
    expired one, and nothing else (§2.11)."""
    expected = {
        "signature": 3.0,
        "expired": 1.0,
        "payload": 0.0,
        "retries_exhausted": 0.0,
    }
    assert dict(run.rejected) == expected
