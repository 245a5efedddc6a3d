"""§15.3: a job records the trace ID of the sampled request span that created it, serves it
as ``traceId`` (``null`` when the request was not traced), and keeps it through its run."""

from __future__ import annotations

from fetcher.services.jobs.service import job_response
from fetcher.services.tracing import extracted_context, span
from tests.spans import recording
from tests.unit.worker.conftest import World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def _trace_id(world: World, job_id: str) -> object:
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    return job_response(job)["traceId"]


async def test_a_traced_request_gives_its_job_the_trace_id(world: World) -> None:
    with recording(), span("POST /v1/fetcher") as request_span:
        job_id = await world.submit(MAPPED)
    expected = format(request_span.get_span_context().trace_id, "032x")
    assert await _trace_id(world, job_id) == expected
    await world.handler.handle(world.delivery())  # the run keeps it
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    assert job.trace_id == expected


async def test_a_caller_s_sampled_trace_is_the_job_s_trace(world: World) -> None:
    with recording():
        parent = extracted_context({"traceparent": SAMPLED})  # read while tracing is on
        with span("POST /v1/fetcher", parent=parent):
            job_id = await world.submit(MAPPED)
    assert await _trace_id(world, job_id) == "0af7651916cd43dd8448eb211c80319c"


async def test_untraced_or_unsampled_requests_give_null(world: World) -> None:
    off = await world.submit(MAPPED)  # tracing off
    with recording():
        parent = extracted_context({"traceparent": UNSAMPLED})  # read while tracing is on
        with span("POST /v1/fetcher", parent=parent):
            dropped = await world.submit({"pg": {"public.accounts": ["id"]}})
    for job_id in (off, dropped):
        body_value = await _trace_id(world, job_id)
        assert body_value is None
    job = await world.store.get_job(off, tenant="")
    assert job is not None
    assert "traceId" in job_response(job)  # present, as null
