"""What the HTTP port answers before the runtime exists (contract §9.3, §2.10).

A dependency that is unreachable at startup does not refuse the start: the process keeps
retrying with backoff while ``/health`` answers ``503 starting`` and ``/readyz`` reports every
check ``down``. :class:`FrontApp` is the one ASGI app the server runs from the first moment;
it delegates to the real app once the runtime is built.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from fetcher import __version__
from fetcher.services.jsontext import compact_json

__all__ = ["FrontApp"]

_STARTING = "starting"


class FrontApp:
    """Serves the "starting" answers until :meth:`switch` hands over to the real app."""

    def __init__(self, checks: Sequence[str], deployment_mode: str) -> None:
        self._checks = tuple(checks)
        self._deployment_mode = deployment_mode
        self._app: ASGIApp | None = None

    def switch(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is not None:
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # lifespan and websockets are not served while starting
        await self._starting(scope["path"], send)

    async def _starting(self, path: str, send: Send) -> None:
        if path == "/health":
            body: dict[str, object] = {"status": "unhealthy", "reason": _STARTING}
        elif path == "/readyz":
            body = {
                "status": "unhealthy",
                "checks": {
                    name: {"status": "down", "latency_ms": 0, "error": _STARTING}
                    for name in self._checks
                },
                "version": __version__,
                "deployment_mode": self._deployment_mode,
            }
        else:
            body = {
                "code": "FET-0003",
                "title": "Service Unavailable",
                "message": "The service is starting. Please try again shortly.",
            }
        payload = compact_json(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"retry-after", b"1"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
