"""The Manager's HTTP server span and access log (issue 22, docs/tracing.md).

One pure-ASGI pass per HTTP request, inside :class:`~fetcher.manager.middleware.FetcherMiddleware`
(so the request ID and its log context are already bound, and the route template is known when
the application returns):

* **Server span** (OpenTelemetry HTTP semantic conventions): named ``{method} {http.route}``,
  child of the request's W3C ``traceparent`` when it carries a valid one, so a product's own
  trace contains Fetcher's spans. Attributes: ``http.request.method``, ``http.route``,
  ``url.path``, ``url.scheme``, ``http.response.status_code``; never the query string, a header
  or the body. A 5xx sets status error (a 4xx is the client's, not the server's, error).
* **Access log**: one JSON line ``http request`` per request with ``method``, ``route`` (the
  template, ``unmatched`` for none), ``path``, ``status`` and ``duration_ms``; the formatter adds
  ``request_id`` and, once the bearer token is verified, ``sub`` and ``tenant`` from the log
  context. Info, except debug for the probes and the scrape (``/health``, ``/readyz``,
  ``/metrics``), which would otherwise drown the log. ``ACCESS_LOG=false`` turns it off.

A request refused before the application (too many in flight, §13) never reaches this pass:
it is counted by the metrics only.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fetcher.manager.middleware import UNMATCHED_ROUTE
from fetcher.services.tracing import SpanKind, extracted_context, mark_failed, span

__all__ = ["ACCESS_LOGGER", "QUIET_PATHS", "TelemetryMiddleware"]

#: The access log's logger name (one name: easy to route or silence on its own).
ACCESS_LOGGER: Final = "fetcher.access"
#: Paths logged at debug: probes and the metrics scrape run every few seconds.
QUIET_PATHS: Final = frozenset({"/health", "/readyz", "/metrics"})

access_log = logging.getLogger(ACCESS_LOGGER)


class TelemetryMiddleware:
    """The server span and the access line (module docstring)."""

    def __init__(self, app: ASGIApp, *, access_log_enabled: bool = True) -> None:
        self.app = app
        self.access_log_enabled = access_log_enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = str(scope.get("method", ""))
        path = str(scope.get("path", ""))
        status = [500]  # an exception leaving the application becomes a 500 outside

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        attributes = {
            "http.request.method": method,
            "url.path": path,
            "url.scheme": str(scope.get("scheme", "http")),
        }
        parent = extracted_context(Headers(scope=scope))
        with span(method, kind=SpanKind.SERVER, attributes=attributes, parent=parent) as current:
            try:
                await self.app(scope, receive, send_status)
            finally:
                route = _route_template(scope)
                if current.is_recording():
                    current.update_name(f"{method} {route}")
                    current.set_attribute("http.route", route)
                    current.set_attribute("http.response.status_code", status[0])
                    if status[0] >= 500:
                        mark_failed(current, f"HTTP {status[0]}")
                if self.access_log_enabled:
                    _log_access(method, route, path, status[0], started)


def _route_template(scope: Scope) -> str:
    template = getattr(scope.get("route"), "path", None)
    return template if isinstance(template, str) else UNMATCHED_ROUTE


def _log_access(method: str, route: str, path: str, status: int, started: float) -> None:
    level = logging.DEBUG if path in QUIET_PATHS else logging.INFO
    if not access_log.isEnabledFor(level):
        return
    duration_ms = round((time.perf_counter() - started) * 1000, 3)
    fields: dict[str, object] = {
        "method": method,
        "route": route,
        "path": path,
        "status": status,
        "duration_ms": duration_ms,
    }
    # request_id, sub and tenant reach the line through the log context (JsonFormatter).
    access_log.log(level, "http request", extra=fields)
