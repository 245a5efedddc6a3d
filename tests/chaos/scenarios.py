"""Chaos scenarios: a steady load of small jobs through the Manager while a fault hits one
dependency (or a Worker), then the delivery promise checked from the outside.

A scenario submits jobs at ``rate`` per second for ``load_seconds``; its fault starts
``fault_at`` seconds in and lasts ``fault_seconds``. Every job carries its scenario's name in
``metadata.scenario``, so the jobs a scenario caused are found in the metadata store even when
the Manager's answer never arrived.

After every scenario ran, :func:`settle` waits until no job is ``pending`` or ``processing``
(at most the reaper windows of §4.4 plus a tick), and :func:`check_invariants` checks, per
job, against the metadata store, the test queue bound to ``job.*``, the event feed (§2.12)
and the bucket:

1. the job is ``completed`` or ``failed`` (nothing stranded);
2. every AMQP event of the job carries one and the same ``ce-id``,
   ``fetcher.job.<status>.<id>`` for its stored status (at-least-once: duplicates of that one
   ``ce-id`` are allowed, a second ``ce-id`` is not), signed with the external key (§8.5);
3. the feed has exactly one item for the job, of the same status;
4. a ``completed`` job has exactly one object, which decrypts with the storage key to a
   plaintext whose HMAC is the job's ``resultHmac``;
5. a ``failed`` job has no object and no unfinished upload, except the orphan §4.4/§4.5
   explicitly allow (``failed to record job completion`` or ``extraction abandoned…`` after
   the upload had finished): counted separately as ``allowed_orphans``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.chaos.stack import SLOW_VIEW, SOURCE, ChaosStack
from tests.e2e.harness import (
    PRODUCT,
    ReceivedEvent,
    decrypt_result_object,
    hmac_hex,
    signing_input,
    unique,
)

__all__ = [
    "FAST_TABLE",
    "Fault",
    "Scenario",
    "ScenarioResult",
    "check_invariants",
    "run_scenario",
    "settle",
]

FAST_TABLE = {SOURCE: {"public.items": ["id", "name", "amount"]}}
SLOW_TABLE = {SOURCE: {SLOW_VIEW: ["id"]}}
#: Short job timeout: the §4.4 processing window is timeoutSeconds + STORAGE_TIMEOUT + 180 s.
JOB_LIMITS = {"timeoutSeconds": 30}
ORPHAN_ALLOWED = ("failed to record job completion", "extraction abandoned")

Fault = Callable[[ChaosStack, float], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: Fault
    fault_seconds: float
    fault_at: float = 5.0
    rate: float = 5.0
    load_seconds: float = 40.0
    mapped: dict[str, dict[str, list[str]]] = field(default_factory=lambda: FAST_TABLE)


@dataclass
class Submission:
    started: float
    latency: float
    status: int  # 0: no HTTP answer (transport error or client timeout)
    job_id: str | None


@dataclass
class ScenarioResult:
    name: str
    fault_start: float = 0.0
    fault_end: float = 0.0
    submissions: list[Submission] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)  # id → final status
    recovery_seconds: float | None = None
    violations: list[str] = field(default_factory=list)
    allowed_orphans: int = 0

    def during_fault(self) -> list[Submission]:
        return [s for s in self.submissions if self.fault_start <= s.started <= self.fault_end]

    def summary(self) -> dict[str, Any]:
        during = self.during_fault()
        ok = [s for s in during if s.status in (200, 202)]
        latencies = sorted(s.latency for s in during)
        counts = Counter(self.jobs.values())
        return {
            "scenario": self.name,
            "fault_seconds": round(self.fault_end - self.fault_start, 1),
            "submitted": len(self.submissions),
            "accepted": sum(s.status in (200, 202) for s in self.submissions),
            "jobs": len(self.jobs),
            "completed": counts.get("completed", 0),
            "failed": counts.get("failed", 0),
            "stranded": len(self.jobs) - counts["completed"] - counts["failed"],
            "api_requests_during_fault": len(during),
            "api_success_during_fault": round(len(ok) / len(during), 4) if during else None,
            "api_p99_during_fault_s": round(_p99(latencies), 3) if latencies else None,
            "api_status_during_fault": dict(Counter(str(s.status) for s in during)),
            "recovery_s": None
            if self.recovery_seconds is None
            else round(self.recovery_seconds, 1),
            "invariant_violations": len(self.violations),
            "allowed_orphans": self.allowed_orphans,
            "violation_samples": self.violations[:10],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _p99(sorted_values: Sequence[float]) -> float:
    index = max(0, math.ceil(0.99 * len(sorted_values)) - 1)
    return sorted_values[index]


# --- load --------------------------------------------------------------------------------------


async def _submit(stack: ChaosStack, scenario: Scenario, out: list[Submission]) -> None:
    body = {
        "dataRequest": {"mappedFields": scenario.mapped, "limits": JOB_LIMITS},
        "metadata": {
            "source": PRODUCT,
            "correlationId": unique("chaos"),
            "scenario": scenario.name,
        },
    }
    started = time.time()
    status, job_id = 0, None
    with contextlib.suppress(httpx.HTTPError):
        response = await stack.launcher.http.post(
            f"{stack.api.base_url}/v1/fetcher", json=body, timeout=15.0
        )
        status = response.status_code
        if status in (200, 202):
            job_id = str(response.json()["jobId"])
    out.append(Submission(started, time.time() - started, status, job_id))


async def _load(stack: ChaosStack, scenario: Scenario, out: list[Submission]) -> None:
    """Submit at a steady ``rate`` (open loop: a slow answer does not slow the load)."""
    count = int(scenario.rate * scenario.load_seconds)
    began = time.monotonic()
    tasks = []
    for i in range(count):
        await asyncio.sleep(max(0.0, began + i / scenario.rate - time.monotonic()))
        tasks.append(asyncio.create_task(_submit(stack, scenario, out)))
    await asyncio.gather(*tasks)


async def run_scenario(stack: ChaosStack, scenario: Scenario) -> ScenarioResult:
    """Load and fault together; returns when the load and the fault are over."""
    result = ScenarioResult(scenario.name)

    async def fault() -> None:
        await asyncio.sleep(scenario.fault_at)
        result.fault_start = time.time()
        try:
            await scenario.fault(stack, scenario.fault_seconds)
        finally:
            result.fault_end = time.time()

    await asyncio.gather(_load(stack, scenario, result.submissions), fault())
    return result


# --- faults ------------------------------------------------------------------------------------


def outage(dependency: str) -> Fault:
    """Cut every connection to ``dependency`` and refuse new ones for the fault's length."""

    async def fault(stack: ChaosStack, seconds: float) -> None:
        await stack.proxies.by_name(dependency).outage(seconds)

    return fault


def latency(dependency: str, seconds_per_chunk: float) -> Fault:
    async def fault(stack: ChaosStack, seconds: float) -> None:
        proxy = stack.proxies.by_name(dependency)
        proxy.latency = seconds_per_chunk
        try:
            await asyncio.sleep(seconds)
        finally:
            proxy.restore()

    return fault


def storage_cut_mid_upload(stack_delay: float = 0.0) -> Fault:
    """Cut S3 while uploads are in flight: slow S3 down first (so uploads are mid-way), then
    cut and refuse."""

    async def fault(stack: ChaosStack, seconds: float) -> None:
        proxy = stack.proxies.storage
        proxy.rate = 20_000  # bytes/s: uploads of a few KiB are now in flight for a while
        await asyncio.sleep(max(1.0, stack_delay))
        await proxy.outage(seconds)

    return fault


def kill_workers(every: float) -> Fault:
    """SIGKILL one Worker every ``every`` seconds (round robin) and start a replacement."""

    async def fault(stack: ChaosStack, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(min(every, max(0.0, end - time.monotonic())))
            live = stack.live_workers()
            if live:
                victim = live[0]
                await victim.kill()  # SIGKILL: no drain, no flush
                stack.workers.remove(victim)
            await stack.add_worker()

    return fault


def everything(seconds_kill_every: float = 5.0) -> Fault:
    """Broker, metadata store, object storage and source cut at once, a Worker killed."""

    async def fault(stack: ChaosStack, seconds: float) -> None:
        cuts = [stack.proxies.by_name(n).outage(seconds) for n in ("broker", "metadata")]
        cuts += [stack.proxies.by_name(n).outage(seconds) for n in ("storage", "source")]
        await asyncio.gather(*cuts, kill_workers(seconds_kill_every)(stack, seconds))

    return fault


# --- settling and checking ---------------------------------------------------------------------


def scenario_jobs(stack: ChaosStack, name: str) -> list[dict[str, Any]]:
    return stack.metadata.records(
        "SELECT id, status, error, result_path, result_hmac, completed_at FROM jobs"
        " WHERE metadata_json::json ->> 'scenario' = %s",
        (name,),
    )


async def settle(stack: ChaosStack, within: float) -> float:
    """Wait until no job is pending or processing and no outbox row is unsent (the reapers
    and the repairer have done their part); returns the seconds waited."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        _, rows = stack.metadata.query(
            "SELECT (SELECT count(*) FROM jobs WHERE status IN ('pending', 'processing')),"
            " (SELECT count(*) FROM outbox WHERE sent_at IS NULL)"
        )
        if rows[0] == (0, 0):
            break
        await asyncio.sleep(2.0)
    await stack.broker.fence()
    return time.monotonic() - began


def recovery(stack: ChaosStack, result: ScenarioResult) -> float | None:
    """Seconds from the fault's end to the first job completed after it (any scenario's)."""
    fault_end = datetime.fromtimestamp(result.fault_end, UTC)
    _, rows = stack.metadata.query(
        "SELECT min(completed_at) FROM jobs WHERE status = 'completed' AND completed_at >= %s",
        (fault_end,),
    )
    first = rows[0][0]
    return None if first is None else (first - fault_end).total_seconds()


async def read_feed(stack: ChaosStack) -> dict[str, list[dict[str, Any]]]:
    """Every §2.12 feed item, grouped by job."""
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    after = "0"
    while True:
        response = await stack.launcher.http.get(
            f"{stack.api.base_url}/v1/events", params={"after": after, "limit": 1000}
        )
        response.raise_for_status()
        page = response.json()
        for item in page["items"]:
            by_job[str(item["data"].get("job_id"))].append(item)
        if not page["items"]:
            return by_job
        after = page["next"]


def _event_problems(
    stack: ChaosStack, job_id: str, status: str, events: list[ReceivedEvent]
) -> list[str]:
    expected = f"fetcher.job.{status}.{job_id}"
    ce_ids = {str(e.headers.get("ce-id")) for e in events}
    problems = []
    if ce_ids != {expected}:
        problems.append(f"{job_id}: AMQP ce-ids {sorted(ce_ids)} for status {status}")
    for event in events:
        t = str(event.headers.get("t"))
        signed = signing_input(
            t, exchange=stack.broker.names.events_exchange, routing_key=event.routing_key,
            body=event.body,
        )  # fmt: skip
        if event.headers.get("x-message-signature") != hmac_hex(stack.keys.external, signed):
            problems.append(f"{job_id}: event {event.routing_key} signature does not verify")
    return problems


def _object_problems(stack: ChaosStack, job: dict[str, Any]) -> tuple[list[str], int]:
    job_id, status = job["id"], job["status"]
    keys = stack.results.keys_for(job_id)
    if status == "completed":
        if keys != [job["result_path"]]:
            return [f"{job_id}: completed with objects {keys}"], 0
        plaintext = decrypt_result_object(stack.keys.storage, stack.results.read(keys[0]))
        if hmac_hex(stack.keys.external, plaintext) != job["result_hmac"]:
            return [f"{job_id}: object HMAC does not match resultHmac"], 0
        return [], 0
    if not keys:
        return [], 0
    error = str(job["error"] or "")
    if error.startswith(ORPHAN_ALLOWED) and len(keys) == 1:
        return [], 1  # §4.4/§4.5: the orphan object may remain
    return [f"{job_id}: failed ({error[:80]}) but objects {keys} exist"], 0


async def check_invariants(stack: ChaosStack, result: ScenarioResult) -> None:
    """Fill ``result.jobs``, ``result.violations`` and ``result.allowed_orphans``."""
    feed = await read_feed(stack)
    events: dict[str, list[ReceivedEvent]] = defaultdict(list)
    for event in stack.broker.collector.received:
        if event.job_id:
            events[event.job_id].append(event)
    for job in scenario_jobs(stack, result.name):
        job_id, status = job["id"], job["status"]
        result.jobs[job_id] = status
        if status not in ("completed", "failed"):
            result.violations.append(f"{job_id}: still {status}")
            continue
        result.violations += _event_problems(stack, job_id, status, events.get(job_id, []))
        items = [i["routingKey"] for i in feed.get(job_id, [])]
        if items != [f"job.{status}"]:
            result.violations.append(f"{job_id}: feed items {items} for status {status}")
        problems, orphans = await asyncio.to_thread(_object_problems, stack, job)
        result.violations += problems
        result.allowed_orphans += orphans
    result.recovery_seconds = recovery(stack, result)
    accepted = {s.job_id for s in result.submissions if s.job_id}
    missing = accepted - set(result.jobs)
    result.violations += [f"{job_id}: answered 202 but not stored" for job_id in missing]


def dump(results: Sequence[ScenarioResult]) -> str:
    return json.dumps([r.summary() for r in results], indent=2)
