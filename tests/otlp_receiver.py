"""A small OTLP/HTTP trace receiver on loopback for the trace tests (issue 22).

It accepts ``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest`` (uncompressed or
gzip), decodes it with the ``opentelemetry-proto`` package, and keeps every span with its
resource's ``service.name``; it answers an empty ``ExportTraceServiceResponse``. It binds
127.0.0.1 only and runs in a thread of the test process, stopped by :meth:`close`.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

__all__ = ["OtlpReceiver", "ReceivedSpan"]


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    duration_ms: float
    #: Every text the span carries (attribute values, event names and attributes, status).
    texts: tuple[str, ...]


def _value(any_value: Any) -> Any:
    field = any_value.WhichOneof("value")
    return getattr(any_value, field) if field else None


def _spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    found: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {a.key: _value(a.value) for a in span.attributes}
                event_texts = [e.name for e in span.events] + [
                    str(_value(a.value)) for e in span.events for a in e.attributes
                ]
                found.append(
                    ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes=attributes,
                        status_code=span.status.code,
                        status_message=span.status.message,
                        duration_ms=(span.end_time_unix_nano - span.start_time_unix_nano) / 1e6,
                        texts=(
                            span.name,
                            *(str(v) for v in attributes.values()),
                            *event_texts,
                            span.status.message,
                        ),
                    )
                )
    return found


class OtlpReceiver:
    """``endpoint`` is the base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``span_count`` counts
    every span received. ``keep=False`` (the benchmarks) only counts: no :class:`ReceivedSpan`
    is built or held, so a long load run costs the receiver little CPU and no memory."""

    def __init__(self, *, keep: bool = True) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.span_count = 0
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                count = sum(
                    len(scope.spans) for r in request.resource_spans for scope in r.scope_spans
                )
                with lock:
                    if keep:
                        receiver.spans.extend(_spans(request))
                    receiver.span_count += count
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in list(self.spans) if s.trace_id == trace_id]


def span_tree(spans: list[ReceivedSpan], *, durations: bool = False) -> str:
    """The spans of one trace as an indented tree (children in name order under their parent;
    a span whose parent is not among them is a root), ``service: name`` per line."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else ""
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.name):
            took = f"  ({span.duration_ms:.1f} ms)" if durations else ""
            lines.append(f"{'  ' * depth}{span.service}: {span.name}{took}")
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)
