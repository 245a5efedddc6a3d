"""Issue 33 items 5 and 10, through a running Manager and Worker at ``LOG_LEVEL=debug`` with
tracing on: a job failing on a filter value keeps that value on the job and in its
``job.failed`` event (§4.5) and nowhere else: not in any log line of either process (the AMQP
stack's frame dumps included), not in any exported span. The failure is logged at ``warning``
with its category; every process logs one start-up line; no line carries uvicorn's ANSI
``color_message``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fetcher import __version__
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import PRODUCT, FetcherProcess, Stack, eventually, unique
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = E2E

#: A caller's filter value that must stay on the job and its event.
SSN = "SSN-123-45-6789"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    started = OtlpReceiver()
    try:
        yield started
    finally:
        started.close()


def json_lines(process: FetcherProcess) -> list[dict[str, Any]]:
    """Every stdout line must be a JSON object; stderr must be empty."""
    assert process.stderr_path.read_text() == "", process.log_tail()
    return [json.loads(line) for line in process.stdout_path.read_text().splitlines()]


def assert_one_startup_line(lines: list[dict[str, Any]], mode: str, address: str) -> None:
    [line] = [x for x in lines if x["event"].startswith("fetcher started")]
    assert line["level"] == "info"
    assert line["event"] == (
        f"fetcher started: {mode} on {address} (auth none, tracing on, version {__version__})"
    )
    assert (line["mode"], line["port"], line["auth_mode"], line["tracing"]) == (
        mode,
        int(address.rsplit(":", 1)[1]),
        "none",
        True,
    )
    assert line["version"] == __version__


async def test_a_filter_value_stays_on_the_job_and_its_event_only(
    stack: Stack, receiver: OtlpReceiver
) -> None:
    env = {
        "LOG_LEVEL": "debug",
        "TRACING_ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    manager = await stack.launcher.manager(**env)
    try:
        body = {
            "dataRequest": {
                "mappedFields": {SOURCE_CONFIG: {"public.accounts": ["id", "opened_on"]}},
                "filters": {SOURCE_CONFIG: {"accounts": {"opened_on": {"gt": [SSN]}}}},
            },
            "metadata": {"source": PRODUCT, "correlationId": unique("privacy")},
        }
        response = await stack.launcher.http.post(f"{manager.base_url}/v1/fetcher", json=body)
        assert response.status_code == 202, response.text
        job_id = response.json()["jobId"]
        async with stack.launcher.running_worker(**env) as worker:
            event = await stack.broker.collector.wait_for(job_id, "job.failed")
            job = await stack.api.wait_terminal(job_id)

            async def job_spans() -> list[ReceivedSpan] | None:
                spans = list(receiver.spans)
                return spans if any(s.name == "record job.failed" for s in spans) else None

            spans = await eventually(job_spans, "the failed job's spans", within=20.0)
    finally:
        await manager.terminate()

    # Where §4.5 puts the text: the job and its job.failed event.
    error = job["metadata"]["error"]
    assert error.startswith("extraction request failed schema validation: invalid filter value")
    assert f"'{SSN}' is not a date" in error
    assert SSN in event.body.decode()

    # Nowhere else: no span ...
    for span in spans:
        for text in span.texts:
            assert SSN not in text, (span.name, text)
    [run] = [s for s in spans if s.name == "run job"]
    assert (run.status_code, run.status_message) == (
        2,
        "extraction request failed schema validation: <issue>",
    )
    assert run.attributes["error.type"] == "validation"

    # ... and no log line of either process, at debug.
    manager_lines, worker_lines = json_lines(manager), json_lines(worker)
    for process in (manager, worker):
        assert SSN not in process.logs(), process.name
    every = manager_lines + worker_lines
    assert any(x["level"] == "debug" for x in every), "debug lines are written"
    for line in every:
        assert "color_message" not in line, line
        assert "\x1b" not in json.dumps(line, ensure_ascii=False), line
        if line["level"] == "debug":  # never aio-pika's, aiormq's or pamqp's frame dumps
            assert line["logger"].startswith("fetcher."), line

    # Item 10: the failure at warning, with its category; one start-up line per process.
    [failed] = [x for x in worker_lines if x["event"].startswith("job failed")]
    assert failed["level"] == "warning"
    assert failed["event"] == "job failed: extraction request failed schema validation: <issue>"
    assert (failed["error_category"], failed["job_id"]) == ("validation", job_id)
    assert_one_startup_line(manager_lines, "manager", manager.base_url.removeprefix("http://"))
    assert_one_startup_line(worker_lines, "worker", f"0.0.0.0:{worker.base_url.rsplit(':', 1)[1]}")
