"""Issue 22: a job event carries its job's trace context as the CloudEvents distributed-tracing
extension (``ce-traceparent``/``ce-tracestate``), stored with the outbox row at the terminal
transition so every (re-)emission sends the same value; the relay's publish is a producer
span, child of that context. With tracing off: NULL stored, no header, no span."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.trace import SpanKind

from fetcher.services.errors import ApiError
from fetcher.services.events.job_events import event_trace_headers
from fetcher.services.records import OutboxEvent
from fetcher.services.tracing import span
from tests.spans import recording
from tests.unit.worker.conftest import EXCHANGE, World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
SIGNED = {"t", "signature-version", "x-message-signature"}  # §8.5
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _after_now() -> datetime:
    """A moment past every row written so far: the store's clock may stamp a row with the same
    instant as (or a hair after) ``datetime.now`` here, and ``created_before`` is strict."""
    return datetime.now(UTC) + timedelta(seconds=1)


async def _run_job(world: World) -> str:
    job_id = await world.submit(MAPPED)
    await world.handler.handle(world.delivery())
    return job_id


async def _unsend_all(world: World) -> None:
    """A publish whose ``sent_at`` write was lost: the relay sends the row again (§8.6)."""
    await world.store._run(lambda conn: conn.execute("UPDATE outbox SET sent_at = NULL"))


async def test_the_event_carries_the_jobs_trace_on_every_publish(world: World) -> None:
    with recording() as recorded:
        job_id = await _run_job(world)
        await world.relay.drain_all()
        record = recorded.named("record job.completed")
        publish = recorded.named(f"publish {EXCHANGE}")
    [(routing_key, _, headers)] = world.publisher.events
    assert routing_key == "job.completed"
    trace_id = format(record.context.trace_id, "032x")
    expected = headers["ce-traceparent"]
    assert expected.startswith(f"00-{trace_id}-{record.context.span_id:016x}-")
    assert int(expected[-2:], 16) & 1  # sampled
    assert "ce-tracestate" not in headers  # the job's trace has none
    assert publish.kind is SpanKind.PRODUCER
    assert publish.parent is not None
    assert publish.parent.span_id == record.context.span_id
    assert publish.context.trace_id == record.context.trace_id
    assert publish.attributes is not None
    assert publish.attributes["messaging.destination.name"] == EXCHANGE
    assert publish.attributes["messaging.message.id"] == f"fetcher.job.completed.{job_id}"
    await _unsend_all(world)
    await world.relay.drain_all()  # tracing off now: the stored value is sent, unchanged
    assert len(world.publisher.events) == 2
    again = world.publisher.events[1][2]
    assert again["ce-traceparent"] == expected
    assert again["ce-id"] == headers["ce-id"]


async def test_a_failed_job_event_carries_the_trace_too(world: World) -> None:
    world.database.fail_on["stream"] = "relation does not exist"
    with recording() as recorded:
        await _run_job(world)
        await world.relay.drain_all()
        record = recorded.named("record job.failed")
    [(routing_key, _, headers)] = world.publisher.events
    assert routing_key == "job.failed"
    assert headers["ce-traceparent"].split("-")[1] == format(record.context.trace_id, "032x")


async def test_a_job_failed_by_the_manager_carries_the_requests_trace(world: World) -> None:
    """The work message could not be published: the Manager fails the job (§4.3) and its
    event carries the request's trace."""
    world.publisher.fail = True
    with recording(), span("POST /v1/fetcher") as request, pytest.raises(ApiError):
        await world.submit(MAPPED)
    world.publisher.fail = False
    await world.relay.drain_all()
    [(routing_key, _, headers)] = world.publisher.events
    assert routing_key == "job.failed"
    trace_id = format(request.get_span_context().trace_id, "032x")
    assert headers["ce-traceparent"].startswith(f"00-{trace_id}-")


async def test_an_unsampled_job_sends_its_unsampled_context(world: World) -> None:
    """Sampled or not, the job's valid context is sent (as the work message's is), so a
    consumer's parent-based sampler agrees with the job's decision; nothing is recorded."""
    await world.submit(MAPPED)
    delivery = world.delivery()
    delivery.headers["traceparent"] = TRACEPARENT[:-2] + "00"
    with recording() as recorded:
        await world.handler.handle(delivery)
        await world.relay.drain_all()
    [(_, _, headers)] = world.publisher.events
    assert headers["ce-traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert headers["ce-traceparent"].endswith("-00")
    assert not recorded.spans()


async def test_tracing_off_stores_null_and_sends_no_header(world: World) -> None:
    await _run_job(world)
    async with world.store.claim_unsent(created_before=_after_now(), limit=10) as batch:
        assert [(r.traceparent, r.tracestate) for r in batch.rows] == [(None, None)]
    with recording() as recorded:  # a NULL column: no header and no relay span, traced or not
        await world.relay.drain_all()
    [(_, _, headers)] = world.publisher.events
    assert not [name for name in headers if "trace" in name]
    assert not [s for s in recorded.spans() if s.kind is SpanKind.PRODUCER]


async def test_a_malformed_stored_value_never_reaches_a_header(world: World) -> None:
    with recording():
        await _run_job(world)
    await world.store._run(  # written by hand, bypassing the record's check
        lambda conn: conn.execute(
            "UPDATE outbox SET traceparent = ?, tracestate = 'k=v'", (TRACEPARENT + "\r\nx: y",)
        )
    )
    await world.relay.drain_all()
    [(_, _, headers)] = world.publisher.events
    assert not [name for name in headers if "trace" in name]


def _event(**trace: str | None) -> OutboxEvent:
    return OutboxEvent(
        ce_id="fetcher.job.failed.j",
        job_id="j",
        event_type="failed",
        routing_key="job.failed",
        body=b"{}",
        headers={},
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        **trace,
    )


def test_the_extension_headers_of_a_stored_context() -> None:
    assert event_trace_headers(_event()) == {}
    assert event_trace_headers(_event(traceparent=TRACEPARENT)) == {"ce-traceparent": TRACEPARENT}
    both = _event(traceparent=TRACEPARENT, tracestate="congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    assert event_trace_headers(both) == {
        "ce-traceparent": TRACEPARENT,
        "ce-tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
    }
    assert not set(event_trace_headers(both)) & SIGNED


@pytest.mark.parametrize(
    "trace",
    [
        {"traceparent": "garbage"},
        {"traceparent": TRACEPARENT.upper()},
        {"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"},
        {"traceparent": TRACEPARENT + "\r\nx-message-signature: forged"},
        {"traceparent": TRACEPARENT, "tracestate": "Bad Key=1"},
        {"traceparent": TRACEPARENT, "tracestate": "k=v\n"},
        {"traceparent": None, "tracestate": "k=v"},
    ],
)
def test_a_malformed_value_is_refused(trace: dict[str, str | None]) -> None:
    with pytest.raises(ValueError, match="trace"):
        _event(**trace)
    with pytest.raises(ValueError, match="trace"):
        replace(_event(), traceparent=trace.get("traceparent"), tracestate=trace.get("tracestate"))
