"""Issue 22: one OpenTelemetry trace follows a job from the HTTP request through RabbitMQ and
the Worker to the stored object, exported over OTLP/HTTP to a receiver on loopback.

A Manager and a Worker with ``TRACING_ENABLED=true`` (the session's Manager traces nothing)
export to :class:`~tests.otlp_receiver.OtlpReceiver`; the spans are read back decoded from the
protobuf ``ExportTraceServiceRequest`` bodies the real exporter sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.conftest import E2E, SOURCE_CONFIG, SOURCE_PASSWORD
from tests.e2e.harness import (
    PRODUCT,
    DatabaseFactory,
    FetcherProcess,
    Stack,
    assert_envelope,
    eventually,
    unique,
)
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, span_tree

pytestmark = E2E

INCOMING_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INCOMING_PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{INCOMING_TRACE}-{INCOMING_PARENT}-01"
#: A filter value that is also a row value; neither may reach a span.
FILTER_EMAIL = "late@example.com"
ROW_VALUES = ("ana@example.com", "1500.00", "99999.99", "inactive@example.com", FILTER_EMAIL)
SERVER, CONSUMER, PRODUCER = 2, 5, 4  # the OTLP Span.SpanKind numbers


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    started = OtlpReceiver()
    try:
        yield started
    finally:
        started.close()


def tracing_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {
        "TRACING_ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # the SDK's batch delay: spans leave within 0.2 s
    }


@pytest_asyncio.fixture(loop_scope="session")
async def traced_manager(
    stack: Stack, receiver: OtlpReceiver
) -> AsyncIterator[tuple[FetcherProcess, str]]:
    manager = await stack.launcher.manager(**tracing_env(receiver))
    try:
        yield manager, manager.base_url
    finally:
        await manager.terminate()
        stack.launcher.assert_no_secrets(manager)


def by_name(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.name: s for s in spans}


async def job_trace(receiver: OtlpReceiver, trace_id: str, names: set[str]) -> list[ReceivedSpan]:
    async def arrived() -> list[ReceivedSpan] | None:
        spans = receiver.of_trace(trace_id)
        return spans if names <= {s.name for s in spans} else None

    return await eventually(arrived, f"spans {sorted(names)} of trace {trace_id}", within=20.0)


def assert_child(spans: dict[str, ReceivedSpan], child: str, parent: str) -> None:
    assert spans[child].parent_span_id == spans[parent].span_id, (child, parent)


def assert_nothing_leaks(spans: list[ReceivedSpan], forbidden: tuple[str, ...]) -> None:
    for span in spans:
        for text in span.texts:
            for value in forbidden:
                assert value not in text, (span.name, value)


async def post_job(
    stack: Stack, base_url: str, body: dict[str, Any], headers: dict[str, str]
) -> str:
    response = await stack.launcher.http.post(f"{base_url}/v1/fetcher", json=body, headers=headers)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["jobId"]
    return job_id


async def test_one_job_is_one_trace_across_both_processes(
    stack: Stack, receiver: OtlpReceiver, traced_manager: tuple[FetcherProcess, str]
) -> None:
    """An incoming ``traceparent`` is honoured: the Manager's request span is its child, the
    work message carries the trace over RabbitMQ, and the Worker's spans continue it, in
    parent/child order, down to the stored object; no span holds the connection's password,
    the filter value or a row value."""
    _, base_url = traced_manager
    queue, exchange = stack.names.work_queue, stack.names.events_exchange
    body = {
        "dataRequest": {
            "mappedFields": {SOURCE_CONFIG: {"public.accounts": ["id", "email", "balance"]}},
            "filters": {SOURCE_CONFIG: {"accounts": {"email": {"eq": [FILTER_EMAIL]}}}},
        },
        "metadata": {"source": PRODUCT, "correlationId": unique("trace")},
    }
    manager, _ = traced_manager
    async with stack.launcher.running_worker(**tracing_env(receiver)) as worker:
        job_id = await post_job(stack, base_url, body, {"traceparent": TRACEPARENT})
        job = await stack.api.wait_terminal(job_id)
        assert job["status"] == "completed", job
        assert job["traceId"] == INCOMING_TRACE  # §15.3: the job links to this trace
        names = {
            "POST /v1/fetcher",
            "validate job",
            f"test connection {SOURCE_CONFIG}",
            "store job",
            f"send {queue}",
            f"process {queue}",
            "claim job",
            "run job",
            "plan",
            "extract, encrypt and upload",
            f"extract {SOURCE_CONFIG}",
            "record job.completed",
            f"publish {exchange}",
        }
        spans = await job_trace(receiver, INCOMING_TRACE, names)
    print(span_tree(spans, durations=True))  # docs/tracing.md's sample (pytest -s)
    assert span_tree(spans) == JOB_TREE.format(queue=queue, ds=SOURCE_CONFIG, exchange=exchange)
    named = by_name(spans)
    request = named["POST /v1/fetcher"]
    assert (request.parent_span_id, request.kind) == (INCOMING_PARENT, SERVER)
    assert request.attributes["http.route"] == "/v1/fetcher"
    assert request.attributes["http.response.status_code"] == 202
    for child in ("validate job", f"test connection {SOURCE_CONFIG}", "store job", f"send {queue}"):
        assert_child(named, child, "POST /v1/fetcher")
        assert named[child].service == "fetcher-manager"
    assert named[f"send {queue}"].kind == PRODUCER
    assert named[f"test connection {SOURCE_CONFIG}"].attributes["db.system"] == "postgresql"
    assert_child(named, f"process {queue}", f"send {queue}")  # across RabbitMQ
    assert named[f"process {queue}"].kind == CONSUMER
    for child, parent in [
        ("claim job", f"process {queue}"),
        ("run job", f"process {queue}"),
        ("extract, encrypt and upload", "run job"),
        ("plan", "extract, encrypt and upload"),
        (f"extract {SOURCE_CONFIG}", "extract, encrypt and upload"),
        ("record job.completed", "run job"),
        (f"publish {exchange}", "record job.completed"),  # the outbox relay's publish
    ]:
        assert_child(named, child, parent)
        assert named[child].service == "fetcher-worker"
    datasource = named[f"extract {SOURCE_CONFIG}"].attributes
    assert (datasource["db.system"], datasource["fetcher.table_count"]) == ("postgresql", 1)
    assert datasource["fetcher.row_count"] == 1  # the filtered row
    stored = named["extract, encrypt and upload"].attributes
    assert stored["fetcher.object.size_bytes"] > 0
    assert named["run job"].attributes["fetcher.job_id"] == job_id
    assert all(s.status_code != 2 for s in spans), [s.name for s in spans if s.status_code == 2]
    assert_nothing_leaks(spans, (SOURCE_PASSWORD, *ROW_VALUES))
    await assert_event_traced(stack, job_id, "completed", named["record job.completed"])
    publish = named[f"publish {exchange}"]
    assert publish.kind == PRODUCER
    assert publish.attributes["messaging.destination.name"] == exchange
    assert publish.attributes["messaging.rabbitmq.destination.routing_key"] == "job.completed"
    # Logs join traces: the lines logged inside a span name it (trace_id, span_id).
    assert_logged_in(manager, "job created", request.trace_id, named["POST /v1/fetcher"])
    assert_logged_in(manager, "http request", request.trace_id, named["POST /v1/fetcher"])
    assert_logged_in(worker, "job claimed", request.trace_id, named[f"process {queue}"])


async def assert_event_traced(stack: Stack, job_id: str, status: str, record: ReceivedSpan) -> None:
    """The job's event carries the terminal transition's trace context as the CloudEvents
    distributed-tracing extension, outside the §8.5 signed set: without it, the event is
    exactly the §8.4/§8.5 envelope and its signature still verifies."""
    event = await stack.broker.collector.wait_for(job_id, f"job.{status}")
    headers = dict(event.headers)
    traceparent = headers.pop("ce-traceparent")
    assert re.fullmatch(f"00-{record.trace_id}-{record.span_id}-0[13]", str(traceparent)), (
        traceparent
    )
    assert "ce-tracestate" not in headers
    assert_envelope(stack, replace(event, headers=headers), status)


def assert_logged_in(
    process: FetcherProcess, event: str, trace_id: str, span: ReceivedSpan
) -> None:
    lines = [json.loads(line) for line in process.logs().splitlines() if line.startswith("{")]
    [line] = [x for x in lines if x["event"] == event and x.get("trace_id") == trace_id]
    assert line["span_id"] == span.span_id


#: The span tree of one completed job (children in name order).
JOB_TREE = """\
fetcher-manager: POST /v1/fetcher
  fetcher-manager: send {queue}
    fetcher-worker: process {queue}
      fetcher-worker: claim job
      fetcher-worker: run job
        fetcher-worker: extract, encrypt and upload
          fetcher-worker: extract {ds}
          fetcher-worker: plan
        fetcher-worker: record job.completed
          fetcher-worker: publish {exchange}
  fetcher-manager: store job
  fetcher-manager: test connection {ds}
  fetcher-manager: validate job"""


async def test_a_failed_job_has_an_error_span_with_the_redacted_text(
    stack: Stack,
    receiver: OtlpReceiver,
    traced_manager: tuple[FetcherProcess, str],
    databases: DatabaseFactory,
) -> None:
    """A source that refuses the Worker: the job's span has status error with the summary of
    the job's §4.5 text (no address, no password, no detail) and its category, in the same
    trace as the Manager's request (no incoming ``traceparent``: the trace starts there)."""
    _, base_url = traced_manager
    doomed = databases.create("fetcher_e2e_traced_gone")
    config = unique("pg_gone").replace("-", "_")
    await stack.api.create_connection(
        config, doomed.name, password=SOURCE_PASSWORD, host=doomed.host, port=doomed.port
    )
    body = {
        "dataRequest": {"mappedFields": {config: {"public.accounts": ["id"]}}},
        "metadata": {"source": PRODUCT, "correlationId": unique("trace")},
    }
    job_id = await post_job(stack, base_url, body, {})
    databases.drop(doomed)  # after the Manager's live test, before any Worker runs

    async def request_span() -> ReceivedSpan | None:
        found = [s for s in list(receiver.spans) if s.name == "POST /v1/fetcher"]
        return found[-1] if found else None

    request = await eventually(request_span, "the Manager's request span", within=20.0)
    assert request.parent_span_id == ""  # a new trace
    async with stack.launcher.running_worker(**tracing_env(receiver)):
        job = await stack.api.wait_terminal(job_id)
        spans = await job_trace(receiver, request.trace_id, {"run job", "record job.failed"})
    assert job["status"] == "failed", job
    named = by_name(spans)
    run = named["run job"]
    # Issue 33: the category and a value-free summary; the §4.5 text stays on the job.
    assert job["metadata"]["error"].startswith(f"failed to connect to datasource '{config}': ")
    assert (run.status_code, run.status_message) == (
        2,
        f"failed to connect to datasource '{config}': <detail>",
    )
    assert run.attributes["error.type"] == "connect"
    assert_child(named, "record job.failed", "run job")
    await assert_event_traced(stack, job_id, "failed", named["record job.failed"])
    address = f"{doomed.host}:{doomed.port}"
    assert_nothing_leaks(spans, (SOURCE_PASSWORD, address))
