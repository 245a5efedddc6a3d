"""An in-memory span recorder for in-process tests (issue 22).

The OpenTelemetry API accepts one global tracer provider per process; the first use installs
an SDK provider that records into one :class:`InMemorySpanExporter`, and :func:`recording`
turns Fetcher's spans on for one block only (off again after it, so other tests keep their
exact log lines), starting from an empty record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fetcher.services.tracing import enable_tracing

__all__ = ["recording"]

_exporter: list[InMemorySpanExporter] = []


def _installed() -> InMemorySpanExporter:
    if not _exporter:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _exporter.append(exporter)
    return _exporter[0]


class Recorded:
    """The spans finished so far in the current test."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self._exporter.get_finished_spans()

    def named(self, name: str) -> ReadableSpan:
        [found] = [s for s in self.spans() if s.name == name]
        return found


@contextmanager
def recording() -> Iterator[Recorded]:
    exporter = _installed()
    exporter.clear()
    enable_tracing(True)
    try:
        yield Recorded(exporter)
    finally:
        enable_tracing(False)  # what was recorded stays readable until the next recording()
