"""The Manager's pure-ASGI middleware (contract §2.1, §2.2, §2.11).

One pass per HTTP request:

* **Request ID**: ``X-Request-Id`` is reused when it has 1–128 visible ASCII characters, else a
  UUIDv4 is generated; it is stored in ``scope["state"]["request_id"]`` and set on every
  response.
* **Body limit**: ``receive`` is wrapped so that more than 1 MiB (declared by
  ``Content-Length`` or counted while a chunked body streams) raises ``413 FET-0007`` the moment
  it is read, never after buffering. Routes that ignore their body never read it.
* **Host and site** (issue 33, :mod:`fetcher.services.api.request_origin`): a ``Host`` that
  ``ALLOWED_HOSTS`` and the defaults do not accept → ``421 FET-0013`` before anything else
  (DNS rebinding); with ``AUTH_MODE=none`` a ``POST``/``PUT``/``PATCH``/``DELETE`` sent from
  another site → ``403 FET-0014`` before routing.
* **Edge headers**: every answer carries ``X-Content-Type-Options: nosniff``; every JSON
  answer ``Cache-Control: no-store`` (unless the route set its own ``Cache-Control``): API
  answers hold tenant data and must not be kept by a shared or browser cache.
* **CORS**: only for the origins of ``CORS_ALLOWED_ORIGINS`` (``*`` only when listed). A
  preflight from an allowed origin → ``204``; credentials are never allowed.
* **Unhandled errors**: ``500 FET-0002`` with the exact §2.2 message.
* **Requests in flight** (§13 "HTTP connections"): while ``HTTP_MAX_CONNECTIONS`` requests are
  being served, a further request is answered at once with ``503 FET-0003`` and never queued,
  so a flood of slow requests cannot pile up unbounded work and memory in the process.
* **Metrics**: ``fetcher_http_requests_total`` and ``fetcher_http_request_duration_seconds``
  labelled from fixed sets only (§2.11): the method or ``other``, the route template or
  ``unmatched``, and a known status or ``other``. A label value taken from the request would
  let any client create series without bound (§13 "Bounded memory").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fetcher.manager.errors import error_body, internal_error, status_for
from fetcher.manager.json_body import request_id_from
from fetcher.services.api.request_origin import (
    REFUSED_HOST_LOG,
    HostPolicy,
    cross_site_refused,
    cross_site_write,
    host_refused,
)
from fetcher.services.errors import ApiError
from fetcher.services.log_context import log_context
from fetcher.services.metrics import Metrics, method_label, status_label

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "MAX_BODY_BYTES",
    "UNMATCHED_ROUTE",
    "CorsPolicy",
    "FetcherMiddleware",
    "body_too_large",
    "edge_headers",
    "too_many_in_flight",
]

log = logging.getLogger(__name__)

#: §2.1: the request body limit.
MAX_BODY_BYTES = 1024 * 1024
#: §9.1 ``HTTP_MAX_CONNECTIONS`` default: requests in flight at once.
DEFAULT_MAX_IN_FLIGHT = 1000
#: §2.11: the ``route`` label of a request that matched no route template.
UNMATCHED_ROUTE = "unmatched"
_CORS_METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
#: Authorization: a browser client sends its bearer token (§12.2) only if a preflight allows it.
_CORS_HEADERS = "Authorization, Content-Type, X-Product-Name, X-Request-Id"
_EXPOSED = "X-Request-Id, Location, Retry-After, WWW-Authenticate"


def body_too_large() -> ApiError:
    """§2.1: ``413 FET-0007``."""
    return ApiError("FET-0007", "The request body exceeds the limit of 1 MiB.")


def too_many_in_flight() -> ApiError:
    """§13: ``503 FET-0003`` when ``HTTP_MAX_CONNECTIONS`` requests are already in flight."""
    return ApiError(
        "FET-0003",
        "The service is handling too many requests. Please try again shortly.",
        headers={"Retry-After": "1"},
    )


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """§2.1 CORS: the allowed origins; empty means no CORS header is ever sent."""

    origins: tuple[str, ...] = ()

    def allowed(self, origin: str | None) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for ``origin``, or ``None``."""
        if not origin or not self.origins:
            return None
        if origin in self.origins:
            return origin
        return "*" if "*" in self.origins else None

    def response_headers(self, allow: str) -> dict[str, str]:
        return {
            "access-control-allow-origin": allow,
            "access-control-expose-headers": _EXPOSED,
            "vary": "Origin",
        }

    def preflight_headers(self, allow: str, requested_headers: str | None) -> dict[str, str]:
        return {
            "access-control-allow-origin": allow,
            "access-control-allow-methods": _CORS_METHODS,
            "access-control-allow-headers": requested_headers or _CORS_HEADERS,
            "access-control-max-age": "600",
            "vary": "Origin",
        }


def edge_headers(message: Message) -> None:
    """Add ``nosniff`` to a response start, and ``no-store`` when its body is JSON."""
    headers = MutableHeaders(scope=message)
    headers.setdefault("x-content-type-options", "nosniff")
    if headers.get("content-type", "").startswith("application/json"):
        headers.setdefault("cache-control", "no-store")


def _limited_receive(receive: Receive, headers: Headers, limit: int) -> Receive:
    """``receive`` that raises FET-0007 once the body is known to exceed ``limit``."""
    declared = headers.get("content-length", "")
    too_large_declared = declared.isdigit() and int(declared) > limit
    total = 0

    async def wrapped() -> Message:
        nonlocal total
        if too_large_declared:
            raise body_too_large()
        message = await receive()
        if message["type"] == "http.request":
            total += len(message.get("body", b""))
            if total > limit:
                raise body_too_large()
        return message

    return wrapped


async def _send_json(
    send: Send, status: int, body: object, headers: Mapping[str, str] | None = None
) -> None:
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    start: Message = {"type": "http.response.start", "status": status, "headers": raw}
    edge_headers(start)
    await send(start)
    await send({"type": "http.response.body", "body": payload})


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class FetcherMiddleware:
    """Request IDs, the streaming body limit, CORS, 500s and HTTP metrics (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        cors_origins: Iterable[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        hosts: HostPolicy | None = None,
        refuse_cross_site: bool = False,
    ) -> None:
        self.app = app
        #: ``None``: every ``Host`` is served (a test app with no settings).
        self.hosts = hosts
        #: ``AUTH_MODE=none``: state-changing requests from another site are refused.
        self.refuse_cross_site = refuse_cross_site
        self.metrics = metrics
        self.cors = CorsPolicy(tuple(cors_origins))
        self.max_body_bytes = max_body_bytes
        self.max_in_flight = max_in_flight
        #: Requests being served right now (one event loop: no lock is needed).
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        request_id = request_id_from(headers.get("x-request-id"))
        scope.setdefault("state", {})["request_id"] = request_id
        extra = {"x-request-id": request_id}
        started = time.perf_counter()
        if self.in_flight >= self.max_in_flight:
            status = await self._refuse_busy(send, headers, extra)
        else:
            self.in_flight += 1
            try:
                with log_context(request_id=request_id):  # on every line logged for it
                    status = await self._handle(scope, receive, send, headers=headers, extra=extra)
            finally:
                self.in_flight -= 1
        self._observe(scope, status, started)

    async def _refuse_busy(self, send: Send, headers: Headers, extra: dict[str, str]) -> int:
        """§13: answer at once, without touching the application or the request body."""
        allow = self.cors.allowed(headers.get("origin"))
        if allow is not None:
            extra |= self.cors.response_headers(allow)
        err = too_many_in_flight()
        await _send_json(send, status_for(err), error_body(err), {**err.headers, **extra})
        return status_for(err)

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, *, headers: Headers, extra: dict[str, str]
    ) -> int:
        """The Host and site checks, a CORS preflight from an allowed origin, or the
        application; returns the status."""
        allow = self.cors.allowed(headers.get("origin"))
        refusal = self._refusal(scope, headers, cors_allowed=allow is not None)
        if refusal is not None:
            if allow is not None:
                extra |= self.cors.response_headers(allow)
            await _send_json(send, status_for(refusal), error_body(refusal), extra)
            return status_for(refusal)
        if allow is not None and self._is_preflight(scope, headers):
            extra |= self.cors.preflight_headers(
                allow, headers.get("access-control-request-headers")
            )
            start: Message = {"type": "http.response.start", "status": 204, "headers": _raw(extra)}
            edge_headers(start)
            await send(start)
            await send({"type": "http.response.body", "body": b""})
            return 204
        if allow is not None:
            extra |= self.cors.response_headers(allow)
        status = [500]
        await self._serve(scope, receive, send, headers=headers, extra=extra, status=status)
        return status[0]

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        headers: Headers,
        extra: Mapping[str, str],
        status: list[int],
    ) -> None:
        started_response = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started_response
            if message["type"] == "http.response.start":
                started_response = True
                status[0] = int(message["status"])
                mutable = MutableHeaders(scope=message)
                for key, value in extra.items():
                    mutable[key] = value
                edge_headers(message)
            await send(message)

        limited = _limited_receive(receive, headers, self.max_body_bytes)
        try:
            await self.app(scope, limited, send_wrapper)
        except Exception as exc:
            log.error("unhandled error: %s: %s", type(exc).__name__, exc)
            log.debug("unhandled error traceback", exc_info=True)
            if started_response:
                return
            err = body_too_large() if _is_body_limit(exc) else internal_error()
            status[0] = status_for(err)
            await _send_json(send, status[0], error_body(err), {**err.headers, **extra})

    def _refusal(self, scope: Scope, headers: Headers, *, cors_allowed: bool) -> ApiError | None:
        """421 for a ``Host`` not served, 403 for a cross-site write (module docstring)."""
        if self.hosts is not None and not self.hosts.allows(headers.get("host")):
            # The one trace of a refusal (it never reaches the access log). The name itself
            # would be redacted like every host in a log line (§8.7), so it is not written.
            log.info(REFUSED_HOST_LOG)
            return host_refused()
        if self.refuse_cross_site and cross_site_write(
            method=str(scope.get("method", "")),
            host=headers.get("host"),
            origin=headers.get("origin"),
            fetch_site=headers.get("sec-fetch-site"),
            cors_allowed=cors_allowed,
        ):
            return cross_site_refused()
        return None

    @staticmethod
    def _is_preflight(scope: Scope, headers: Headers) -> bool:
        return scope["method"] == "OPTIONS" and "access-control-request-method" in headers

    def _observe(self, scope: Scope, status: int, started: float) -> None:
        method = method_label(str(scope.get("method", "")))
        route = _route_template(scope)
        self.metrics.http_requests.labels(method, route, status_label(status)).inc()
        self.metrics.http_duration.labels(method, route).observe(time.perf_counter() - started)


def _is_body_limit(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and exc.code == "FET-0007"


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
