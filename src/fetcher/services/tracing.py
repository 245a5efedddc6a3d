"""Spans for the services, the hosts and the log formatter (issue 22, docs/tracing.md).

The OpenTelemetry *API* is the port: code here and in the hosts opens spans through it and
never sees the SDK, which only :mod:`fetcher.adapters.tracing` installs (``TRACING_ENABLED``).
Until then :func:`span` is a plain ``yield`` of the invalid span: no context is attached, no
object is allocated per call, so tracing off costs one boolean test per span site.

Propagation is W3C Trace Context only (``traceparent``/``tracestate``), whatever
``OTEL_PROPAGATORS`` says: those two headers are what the work message carries (never
baggage, which could smuggle request data into a queue).

Attributes never hold a value read from a source, a password, a host's credentials or a filter
value: callers pass counts, engines, names of fixed sets, and texts already redacted (§8.7).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from fetcher.engine.kit import DB_SYSTEM as _ENGINE_DB_SYSTEM
from fetcher.engine.kit import SpanHandle, set_span_opener
from fetcher.services.records import OutboxEvent
from fetcher.services.trace_context import valid_traceparent, valid_tracestate

__all__ = [
    "DB_SYSTEM",
    "TRACE_HEADERS",
    "AttributeValue",
    "SpanKind",
    "current_span",
    "current_trace_ids",
    "enable_tracing",
    "extracted_context",
    "mark_failed",
    "sampled_trace_id",
    "span",
    "trace_headers",
    "with_trace_context",
]

#: The headers a work message carries, outside the §7.3 signed set.
TRACE_HEADERS: Final = ("traceparent", "tracestate")

AttributeValue = str | bool | int | float
#: ``db.system`` by the stored connection ``type`` text (§2.5).
DB_SYSTEM: Final[dict[str, str]] = {str(k.value): v for k, v in _ENGINE_DB_SYSTEM.items()}

_PROPAGATOR: Final = TraceContextTextMapPropagator()
_TRACER: Final = trace.get_tracer("fetcher")
_state = {"enabled": False}


def enable_tracing(enabled: bool = True) -> None:
    """Called once by the tracing adapter after it installed the SDK's provider (and by tests,
    which turn it off again)."""
    _state["enabled"] = enabled
    set_span_opener(_engine_span if enabled else None)


@contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
    parent: otel_context.Context | None = None,
) -> Iterator[Span]:
    """A span current for the block (the invalid span when tracing is off).

    An exception leaving the block sets status error with its type name only: its text may
    hold what no span may (a caller with a redacted text uses :func:`mark_failed` first).
    """
    if not _state["enabled"]:
        yield INVALID_SPAN
        return
    with _TRACER.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            status = getattr(current, "status", None)  # the SDK's span has one, the API's not
            if status is None or status.status_code is StatusCode.UNSET:
                current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


def _engine_span(
    name: str, attributes: Mapping[str, str | int]
) -> AbstractContextManager[SpanHandle]:
    """The engine's spans (plan, one per datasource) are this module's spans."""
    return span(name, attributes=attributes)


def mark_failed(target: Span, redacted_text: str, error_type: str = "") -> None:
    """Status error with ``redacted_text`` (already §8.7-redacted by the caller)."""
    target.set_status(Status(StatusCode.ERROR, redacted_text))
    if error_type:
        target.set_attribute("error.type", error_type)


def trace_headers() -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of the current span; empty when none is sampled
    or tracing is off, so a message without a trace keeps its exact former headers."""
    if not _state["enabled"]:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {k: v for k, v in carrier.items() if k in TRACE_HEADERS}


def with_trace_context(event: OutboxEvent) -> OutboxEvent:
    """``event`` with the current span's ``traceparent`` (and ``tracestate``) to store with
    its outbox row; unchanged with tracing off or no valid span. An unsampled span's context
    is kept (flags ``00``), as the work message propagates it. Only a well-formed W3C value
    is kept (the propagator writes one; the check guards what reaches a header)."""
    carrier = trace_headers()
    traceparent = carrier.get("traceparent")
    if not valid_traceparent(traceparent):
        return event
    tracestate = carrier.get("tracestate")
    return replace(
        event,
        traceparent=traceparent,
        tracestate=tracestate if valid_tracestate(tracestate) else None,
    )


def extracted_context(headers: Mapping[str, object]) -> otel_context.Context | None:
    """The remote parent named by ``traceparent``/``tracestate`` in ``headers`` (``None``: no
    valid one). Only those two string headers are read; a malformed one is ignored (W3C)."""
    if not _state["enabled"]:
        return None
    carrier = {k.lower(): v for k, v in headers.items() if isinstance(v, str)}
    carrier = {k: v for k, v in carrier.items() if k in TRACE_HEADERS}
    if "traceparent" not in carrier:
        return None
    extracted = _PROPAGATOR.extract(carrier)
    if not trace.get_current_span(extracted).get_span_context().is_valid:
        return None
    return extracted


def current_span() -> Span:
    """The span current here (the invalid span when tracing is off or outside any span)."""
    return trace.get_current_span() if _state["enabled"] else INVALID_SPAN


def current_trace_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` as 32 and 16 lowercase hex of the current span, or ``None``."""
    if not _state["enabled"]:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def sampled_trace_id() -> str | None:
    """§15.3: the current span's trace ID (32 lowercase hex) when tracing is on and the span
    is sampled, so a trace with this ID reaches the collector; ``None`` otherwise."""
    if not _state["enabled"]:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return format(context.trace_id, "032x")
