"""The Worker's health server on ``HEALTH_PORT`` (contract §2.10, §2.11).

``/health``, ``/readyz`` (database, rabbitmq, object_storage), ``/readyz/tenant/{id}``,
``/metrics`` and ``/version``: the Manager's routes, answered by the same
:class:`fetcher.services.operations.service.Operations`. Every other path is ``404 FET-0005`` in the
§2.2 shape. A ``Host`` that ``ALLOWED_HOSTS`` and the defaults do not accept is
``421 FET-0013`` before routing (DNS rebinding, :mod:`fetcher.services.api.request_origin`); every
answer carries ``X-Content-Type-Options: nosniff`` and every JSON one ``Cache-Control: no-store``.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fetcher.bootstrap import Runtime
from fetcher.services.api.request_origin import (
    MISDIRECTED_CODE,
    MISDIRECTED_MESSAGE,
    MISDIRECTED_TITLE,
    REFUSED_HOST_LOG,
    HostPolicy,
)
from fetcher.services.jsontext import compact_json
from fetcher.services.operations.service import JSON, Operations, Reply

__all__ = ["create_health_app"]

log = logging.getLogger(__name__)

_NOT_FOUND = {
    "code": "FET-0005",
    "title": "Not Found",
    "message": "The requested route does not exist.",
}


_MISDIRECTED = {
    "code": MISDIRECTED_CODE,
    "title": MISDIRECTED_TITLE,
    "message": MISDIRECTED_MESSAGE,
}


class _HealthEdge:
    """The Host check and the edge headers around the health routes (module docstring)."""

    def __init__(self, app: ASGIApp, hosts: HostPolicy) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def edge(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("x-content-type-options", "nosniff")
                if headers.get("content-type", "").startswith(JSON):
                    headers.setdefault("cache-control", "no-store")
            await send(message)

        if not self.hosts.allows(Headers(scope=scope).get("host")):
            log.info(REFUSED_HOST_LOG)
            await Response(compact_json(_MISDIRECTED), 421, media_type=JSON)(scope, receive, edge)
            return
        await self.app(scope, receive, edge)


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type)


def create_health_app(runtime: Runtime) -> ASGIApp:
    operations = Operations(runtime)

    async def health(_: Request) -> Response:
        return _response(operations.health())

    async def readyz(_: Request) -> Response:
        return _response(await operations.readyz())

    async def tenant(request: Request) -> Response:
        return _response(await operations.tenant_readyz(request.path_params["id"]))

    async def metrics(_: Request) -> Response:
        return _response(await operations.metrics())

    async def version(_: Request) -> Response:
        return _response(operations.version())

    async def not_found(_: Request, __: Exception) -> Response:
        body = compact_json(_NOT_FOUND)
        return Response(body, status_code=404, media_type=JSON)

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/readyz", readyz),
            Route("/readyz/tenant/{id}", tenant),
            Route("/metrics", metrics),
            Route("/version", version),
        ],
        exception_handlers={404: not_found},
    )
    # The Worker binds HEALTH_PORT on every interface: no SERVER_ADDRESS name to add.
    return _HealthEdge(app, HostPolicy.build(runtime.settings.allowed_hosts))
