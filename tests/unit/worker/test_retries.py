"""§7.4 row 7: a transient metadata-store failure before the claim republishes the work message
(``x-retry-count`` + 1, re-signed with a fresh ``t``, after 1, 2 and 4 s) and acks the original;
at ``x-retry-count`` 3 the message is dead-lettered as ``retries_exhausted``."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from fetcher.crypto import sign_message
from fetcher.services.jobs import work_handler as handlers
from fetcher.services.store_roles import StoreUnavailableError
from tests.unit.worker.conftest import QUEUE, FakeDelivery, World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
#: The original message's signing time: well inside the freshness window, but old enough
#: that a re-signed copy's ``t`` is visibly fresh.
ORIGINAL_AGE_SECONDS = 120
REJECTED = "fetcher_work_messages_rejected_total"


@dataclass
class Outage:
    """The store's ``method`` raises :class:`StoreUnavailableError` while ``down``."""

    method: str
    down: bool = True
    failures: int = 0


@pytest.fixture
def outage(world: World, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Outage]:
    """Break one store method (``get_job`` or ``claim_job``) of the world's store."""

    def breaking(method: str) -> Outage:
        original = getattr(world.store, method)
        state = Outage(method)

        async def flaky(*args: object, **kwargs: object) -> object:
            if state.down:
                state.failures += 1
                raise StoreUnavailableError("metadata store unavailable")
            return await original(*args, **kwargs)

        monkeypatch.setattr(world.store, method, flaky)
        return state

    return breaking


@pytest.fixture
def delays(world: World, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry delays the handler waits, recorded instead of slept (base 1 s, as shipped)."""
    waited: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waited.append(seconds)

    world.handler.retry_base_seconds = 1.0
    monkeypatch.setattr(handlers, "asyncio", SimpleNamespace(sleep=no_sleep))
    return waited


def expected_signature(world: World, t: str, body: bytes) -> str:
    """§7.3 recomputed with :mod:`hmac`: t, v1, no tenant, the body's jobId, exchange ``""``,
    the work queue, the body; internal key."""
    job_id = json.loads(body)["jobId"]
    signed = f"{t}\nv1\n\n{job_id}\n\n{QUEUE}\n".encode() + body
    return hmac.new(world.keys.internal_hmac, signed, hashlib.sha256).hexdigest()


def aged(world: World, delivery: FakeDelivery, retries: int) -> FakeDelivery:
    """``delivery`` at ``x-retry-count`` ``retries``, signed ``ORIGINAL_AGE_SECONDS`` ago."""
    t = int(time.time()) - ORIGINAL_AGE_SECONDS
    signature = sign_message(
        world.keys.internal_hmac,
        t=t,
        body=delivery.body,
        exchange="",
        routing_key=QUEUE,
        job_id=json.loads(delivery.body)["jobId"],
    )
    headers = {
        **delivery.headers,
        "x-retry-count": retries,
        "t": str(t),
        "x-message-signature": signature,
    }
    return FakeDelivery(delivery.body, headers)


def rejected(world: World, reason: str) -> float:
    value = world.handler.metrics.registry.get_sample_value(REJECTED, {"reason": reason})
    return value or 0.0


@pytest.mark.parametrize("method", ["get_job", "claim_job"])
async def test_transient_store_error_republishes_a_resigned_copy(
    world: World, outage: Callable[[str], Outage], delays: list[float], method: str
) -> None:
    """A store outage on ``get_job`` or ``claim_job`` republishes the same body with
    ``x-retry-count`` 1, a fresh ``t`` and a signature that verifies over it (the other
    headers kept), acks the original, and neither runs nor touches the job."""
    job_id = await world.submit(MAPPED)
    original = aged(world, world.delivery(), retries=0)
    state = outage(method)
    before = int(time.time())

    await world.handler.handle(original)

    assert original.outcome == "ack"
    assert state.failures == 1
    assert delays == [1.0]
    assert len(world.publisher.work) == 2  # the Manager's message and the retry
    body, headers = world.publisher.work[-1]
    assert body == original.body
    assert headers["x-retry-count"] == 1
    assert headers["jobId"] == job_id
    assert headers["x-request-id"] == original.headers["x-request-id"]
    assert headers["signature-version"] == "v1"
    t = headers["t"]
    assert isinstance(t, str)
    assert before <= int(t) <= int(time.time())
    assert t != original.headers["t"]
    assert headers["x-message-signature"] == expected_signature(world, t, body)
    assert world.database.streamed == []
    state.down = False
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "pending"


async def test_retries_back_off_then_the_recovered_store_runs_the_job(
    world: World, outage: Callable[[str], Outage], delays: list[float]
) -> None:
    """Three outages in a row republish with ``x-retry-count`` 1, 2, 3 after 1, 2, 4 s; once
    the store is back, the third copy (count 3) claims and completes the job and is acked,
    with nothing rejected."""
    job_id = await world.submit(MAPPED)
    state = outage("get_job")
    delivery = world.delivery()
    for expected in (1, 2, 3):
        await world.handler.handle(delivery)
        assert delivery.outcome == "ack"
        delivery = world.delivery()
        assert delivery.headers["x-retry-count"] == expected
    assert delays == [1.0, 2.0, 4.0]

    state.down = False
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    assert len(world.publisher.work) == 4
    assert rejected(world, "retries_exhausted") == 0.0


async def test_a_message_at_three_retries_is_dead_lettered_as_exhausted(
    world: World, outage: Callable[[str], Outage], delays: list[float]
) -> None:
    """A message already at ``x-retry-count`` 3 meeting another outage is rejected (to the
    DLQ) without waiting or republishing, counted as ``retries_exhausted``; the job stays
    ``pending`` for the reaper."""
    job_id = await world.submit(MAPPED)
    exhausted = aged(world, world.delivery(), retries=3)
    state = outage("claim_job")

    await world.handler.handle(exhausted)

    assert exhausted.outcome == "reject"
    assert state.failures == 1
    assert delays == []
    assert len(world.publisher.work) == 1
    assert rejected(world, "retries_exhausted") == 1.0
    assert rejected(world, "signature") == 0.0
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "pending"
