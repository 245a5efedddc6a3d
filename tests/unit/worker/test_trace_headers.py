"""Issue 22, propagation: ``traceparent``/``tracestate`` travel in the work message's headers
outside the §7.3 signed set. A message without them verifies; a forged or malformed one
changes nothing but the trace; a signed field changed still dead-letters the message."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from tests.spans import recording
from tests.unit.worker.conftest import World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
FORGED = "00-11111111111111111111111111111111-2222222222222222-01"


async def test_the_worker_continues_the_managers_trace(world: World) -> None:
    with recording() as recorded:
        job_id = await world.submit(MAPPED)
        delivery = world.delivery()
        assert set(delivery.headers) >= {"traceparent"}
        await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    send = next(s for s in recorded.spans() if s.kind is SpanKind.PRODUCER)
    process = next(s for s in recorded.spans() if s.kind is SpanKind.CONSUMER)
    assert process.parent is not None
    assert process.parent.span_id == send.context.span_id
    assert process.context.trace_id == send.context.trace_id
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    # The engine's spans (stdlib-only engine, through the services' span opener).
    extract, plan = recorded.named("extract pg"), recorded.named("plan")
    assert extract.attributes is not None
    assert dict(extract.attributes) == {
        "db.system": "postgresql",
        "fetcher.datasource": "pg",
        "fetcher.table_count": 1,
        "fetcher.row_count": 2,
    }
    wrapper = recorded.named("extract, encrypt and upload")
    assert extract.parent is not None
    assert plan.parent is not None
    assert extract.parent.span_id == plan.parent.span_id == wrapper.context.span_id


@pytest.mark.parametrize("traceparent", [None, FORGED, "not-a-traceparent"])
async def test_trace_headers_are_outside_the_signed_set(
    world: World, traceparent: str | None
) -> None:
    job_id = await world.submit(MAPPED)  # tracing off: the message has no trace header
    delivery = world.delivery()
    assert "traceparent" not in delivery.headers
    if traceparent is not None:
        delivery.headers["traceparent"] = traceparent
        delivery.headers["tracestate"] = "vendor=forged"
    with recording() as recorded:
        await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    process = next(s for s in recorded.spans() if s.kind is SpanKind.CONSUMER)
    forged = traceparent == FORGED
    assert (format(process.context.trace_id, "032x") == "1" * 32) is forged


async def test_a_changed_signed_header_still_dead_letters(world: World) -> None:
    await world.submit(MAPPED)
    delivery = world.delivery()
    delivery.headers["traceparent"] = FORGED
    delivery.headers["jobId"] = "00000000-0000-7000-8000-000000000000"
    delivery.headers["t"] = str(int(str(delivery.headers["t"])) + 1)
    await world.handler.handle(delivery)
    assert delivery.outcome == "reject"
