"""Issue 22: the services' span port (off: nothing; on: W3C propagation, error status) and the
log lines that join traces (``trace_id``/``span_id`` inside a span, never outside)."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from opentelemetry.trace import INVALID_SPAN, StatusCode

from fetcher.cli.logs import JsonFormatter
from fetcher.crypto import Redactor
from fetcher.engine import EngineError, ErrorCategory
from fetcher.engine.spans import engine_span
from fetcher.services.tracing import (
    current_trace_ids,
    extracted_context,
    mark_failed,
    span,
    trace_headers,
)
from tests.spans import recording

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-0[13]")


def test_off_spans_are_the_invalid_span_and_carry_nothing() -> None:
    with span("x") as current:
        assert current is INVALID_SPAN
        assert trace_headers() == {}
        assert current_trace_ids() is None
    assert extracted_context({"traceparent": PARENT}) is None


def test_on_the_current_span_is_propagated_as_traceparent() -> None:
    with recording() as recorded, span("outer") as outer:
        headers = trace_headers()
        ids = current_trace_ids()
    match = TRACEPARENT.fullmatch(headers["traceparent"])
    assert match is not None
    context = outer.get_span_context()
    assert match.groups() == (format(context.trace_id, "032x"), format(context.span_id, "016x"))
    assert ids == match.groups()
    assert [s.name for s in recorded.spans()] == ["outer"]


def test_an_incoming_traceparent_is_the_parent() -> None:
    with recording() as recorded:
        parent = extracted_context({"Traceparent": PARENT, "tracestate": "k=v"})
        assert parent is not None
        with span("child", parent=parent):
            pass
        child = recorded.named("child")
    assert format(child.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert child.parent is not None
    assert format(child.parent.span_id, "016x") == "b7ad6b7169203331"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"traceparent": "garbage"},
        {"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
        {"traceparent": b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    ],
)
def test_a_missing_or_malformed_traceparent_starts_no_remote_parent(
    headers: dict[str, object],
) -> None:
    with recording():
        assert extracted_context(headers) is None


def _fail_in_span() -> None:
    with span("job") as current:
        mark_failed(current, "connection refused by [REDACTED]", "FET-1006")
        raise RuntimeError("password=hunter2")


def test_a_failure_has_status_error_with_the_redacted_text_only() -> None:
    with recording() as recorded:
        with pytest.raises(RuntimeError, match="hunter2"):
            _fail_in_span()
        with pytest.raises(ValueError, match="secret"), span("other"):
            raise ValueError("secret")
        job, other = recorded.named("job"), recorded.named("other")
    assert job.status.status_code is StatusCode.ERROR
    assert job.status.description == "connection refused by [REDACTED]"
    assert job.attributes is not None
    assert job.attributes["error.type"] == "FET-1006"
    assert (other.status.status_code, other.status.description) == (StatusCode.ERROR, "ValueError")
    assert not job.events
    assert not other.events  # no exception event: its message could hold a secret


def _line(logger: logging.Logger, stream: io.StringIO) -> dict[str, object]:
    logger.info("hello")
    line: dict[str, object] = json.loads(stream.getvalue().splitlines()[-1])
    return line


def test_log_lines_inside_a_span_carry_its_ids() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(Redactor(secrets=[]), "test"))
    logger = logging.getLogger("fetcher.test.tracelogs")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        with recording():
            outside = _line(logger, stream)
            with span("s") as current:
                inside = _line(logger, stream)
        off = _line(logger, stream)
    finally:
        logger.handlers.clear()
    context = current.get_span_context()
    assert "trace_id" not in outside
    assert "trace_id" not in off
    assert list(inside)[:7] == ["ts", "level", "event", "logger", "env", "trace_id", "span_id"]
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")
    assert re.fullmatch(r"[0-9a-f]{32}", str(inside["trace_id"]))
    assert re.fullmatch(r"[0-9a-f]{16}", str(inside["span_id"]))


def test_engine_spans_follow_the_switch() -> None:
    """The stdlib-only engine opens spans through the services' opener while tracing is on,
    and through nothing at all while it is off."""
    with engine_span("off", {"fetcher.table_count": 1}) as ignored:
        ignored.set_attribute("fetcher.row_count", 3)
    with recording() as recorded:
        with (
            pytest.raises(EngineError),
            engine_span("on", {"fetcher.table_count": 1}),
        ):
            raise EngineError(ErrorCategory.CONNECT, "failed to connect to datasource 'x'")
        on = recorded.named("on")
    assert [s.name for s in recorded.spans()] == ["on"]
    assert on.attributes is not None
    assert on.attributes["error.type"] == "connect"
    assert (on.status.status_code, on.status.description) == (StatusCode.ERROR, "EngineError")
